package tiering

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"testing/iotest"
	"time"
)

// memStore is an in-memory ObjectStore for the remote-read tests. It counts
// GETs per key, can delay each GET (first-byte latency) and throttle its
// body (bandwidth per GET), and can hold all GETs, or those a test picks,
// until released.
type memStore struct {
	latency     time.Duration // before each GET returns
	bytesPerSec int64         // per GET body, 0: unthrottled

	mu      sync.Mutex
	objects map[string][]byte
	gets    map[string]int
	getLog  []memGet
	gate    chan struct{}     // when set, the GETs gated picks wait for it to close
	gated   func(memGet) bool // which GETs wait for gate; nil: all
	// truncateLongGets, when > 0, breaks off every GET of more than that
	// many bytes after that many, with an error.
	truncateLongGets int64
}

type memGet struct {
	key      string
	off, len int64
}

func newMemStore() *memStore {
	return &memStore{objects: make(map[string][]byte), gets: make(map[string]int)}
}

func (s *memStore) Put(ctx context.Context, key string, r io.Reader, size int64, cond PutCondition) (ObjectInfo, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return ObjectInfo{}, err
	}
	if int64(len(b)) != size {
		return ObjectInfo{}, fmt.Errorf("memstore: put %s: %d bytes, size %d", key, len(b), size)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, exists := s.objects[key]
	if cond.IfNoneMatch && exists {
		return ObjectInfo{}, ErrPreconditionFailed
	}
	s.objects[key] = b
	return ObjectInfo{Key: key, Size: size, ModTime: time.Now()}, nil
}

func (s *memStore) put(key string, b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[key] = bytes.Clone(b)
}

func (s *memStore) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	s.mu.Lock()
	b, ok := s.objects[key]
	s.gets[key]++
	g := memGet{key, off, length}
	s.getLog = append(s.getLog, g)
	gate := s.gate
	if gate != nil && s.gated != nil && !s.gated(g) {
		gate = nil
	}
	truncate := s.truncateLongGets
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if s.latency > 0 {
		t := time.NewTimer(s.latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	off = min(off, int64(len(b)))
	end := int64(len(b))
	if length >= 0 {
		end = min(end, off+length)
	}
	var r io.Reader = bytes.NewReader(b[off:end])
	if truncate > 0 && end-off > truncate {
		r = io.MultiReader(bytes.NewReader(b[off:off+truncate]), iotest.ErrReader(errors.New("memstore: connection reset")))
	}
	if s.bytesPerSec > 0 {
		r = &throttledReader{r: r, bps: s.bytesPerSec, start: time.Now(), ctx: ctx}
	}
	return io.NopCloser(r), nil
}

// throttledReader delivers at most bps bytes per second.
type throttledReader struct {
	r     io.Reader
	bps   int64
	start time.Time
	n     int64
	ctx   context.Context
}

func (t *throttledReader) Read(p []byte) (int, error) {
	if len(p) > 64<<10 {
		p = p[:64<<10]
	}
	n, err := t.r.Read(p)
	t.n += int64(n)
	due := t.start.Add(time.Duration(float64(t.n) / float64(t.bps) * float64(time.Second)))
	if d := time.Until(due); d > 0 {
		select {
		case <-time.After(d):
		case <-t.ctx.Done():
			return n, t.ctx.Err()
		}
	}
	return n, err
}

func (s *memStore) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.objects[key]
	if !ok {
		return ObjectInfo{}, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return ObjectInfo{Key: key, Size: int64(len(b))}, nil
}

func (s *memStore) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ObjectInfo
	for k, b := range s.objects {
		if strings.HasPrefix(k, prefix) {
			out = append(out, ObjectInfo{Key: k, Size: int64(len(b))})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func (s *memStore) Delete(ctx context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objects, key)
	return nil
}

// getCount returns the GETs of keys ending in suffix.
func (s *memStore) getCount(suffix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, c := range s.gets {
		if strings.HasSuffix(k, suffix) {
			n += c
		}
	}
	return n
}

// countGets returns the number of logged GETs that match.
func (s *memStore) countGets(match func(memGet) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, g := range s.getLog {
		if match(g) {
			n++
		}
	}
	return n
}

// getsOf returns the logged GETs of key.
func (s *memStore) getsOf(key string) []memGet {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []memGet
	for _, g := range s.getLog {
		if g.key == key {
			out = append(out, g)
		}
	}
	return out
}

// hold makes GETs wait until the returned function is called.
func (s *memStore) hold() (release func()) { return s.holdWhere(nil) }

// holdWhere makes the GETs that match (all when match is nil) wait until
// the returned function is called; each is logged before it waits. A
// later hold replaces it for GETs that start after; releasing it then
// frees only the GETs it holds.
func (s *memStore) holdWhere(match func(memGet) bool) (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.gate, s.gated = ch, match
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if s.gate == ch {
				s.gate, s.gated = nil, nil
			}
			s.mu.Unlock()
			close(ch)
		})
	}
}
