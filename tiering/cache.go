package tiering

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The chunk cache keeps chunks of remote .log objects in files on local
// disk, so that the broker sends them with sendfile like local segments.
//
// Chunks are keyed by the .log object's store key and the chunk's number in
// the segment's chunk table (remote_index.go); objects are immutable, so a
// key always names the same bytes. Each cached chunk is one file
//
//	<remote.cache.dir>/<sha256(object key)[:16] hex>-<chunk>-<generation>.chunk
//
// kept open while cached. The generation makes every load's file name
// unique, so removing an evicted file never races with a reload of the
// same chunk. Files are not fsynced: the cache is rebuilt from the bucket,
// and every *.chunk file in the directory is deleted when the cache starts.
//
// Eviction is a segmented LRU that a scan cannot flush:
//
//   - A new chunk (a demand miss or a read-ahead) enters the probationary
//     segment.
//   - A hit promotes a probationary chunk to the protected segment only
//     when it is an uncorrelated second reference: the chunk was already
//     read on demand once, and this read does not continue a sequential
//     stream (the read-ahead detector tells). A replay streaming through
//     the cache reads each chunk several times, but always as continuations,
//     so it never promotes; a chunk that two consumers read, or one
//     consumer reads again, does.
//   - The protected segment holds at most protectedFraction of the
//     capacity; its least recent chunks are demoted back to probation.
//   - Eviction takes the least recent probationary chunk first and touches
//     the protected segment only when probation has nothing evictable.
//
// A chunk is pinned while referenced (a RemoteSlice not yet released, or a
// load in flight): it is never evicted then, and the cache may exceed its
// bound by the pinned bytes until they are released.
//
// Concurrent requests for the same chunk share one GET (the first creates
// the entry in the loading state, later ones wait on it). The cache lock
// guards only the maps, lists and counters; it is never held during a GET,
// a file write, or a file removal.

// protectedFraction is the share of the capacity the protected segment may
// hold.
const protectedFraction = 0.8

// chunkFileSuffix names the cache's files; only these are deleted on start.
const chunkFileSuffix = ".chunk"

// chunkKey names one chunk of one .log object.
type chunkKey struct {
	object string
	index  int
}

type chunkState uint8

const (
	chunkLoading chunkState = iota
	chunkReady
)

// chunkEntry is one cached chunk. Fields other than done, err and file are
// guarded by chunkCache.mu; err and file are written before done is closed
// and read only after.
type chunkEntry struct {
	key       chunkKey
	size      int64
	path      string
	state     chunkState
	refs      int  // pins: unreleased references and the load in flight
	demanded  bool // read on demand at least once
	protected bool
	elem      *list.Element

	done chan struct{}
	err  error
	file *os.File
}

// chunkRef is a pinned, loaded chunk. Release unpins it, once.
type chunkRef struct {
	c        *chunkCache
	e        *chunkEntry
	released atomic.Bool
}

func (r *chunkRef) file() *os.File { return r.e.file }

func (r *chunkRef) release() {
	if r.released.CompareAndSwap(false, true) {
		r.c.unpin(r.e)
	}
}

// chunkLoader writes the chunk's bytes, exactly, to w.
type chunkLoader func(ctx context.Context, w io.Writer) error

// CacheStats are the chunk cache's counters, for `strata tier status` and
// metrics.
type CacheStats struct {
	Hits          int64 // demand reads served from a cached chunk
	InflightJoins int64 // demand reads that waited for a GET already under way (read-ahead or another reader)
	Misses        int64 // demand reads that had to start a GET
	Prefetches    int64 // chunks fetched by read-ahead
	Evictions     int64
	FetchedBytes  int64 // bytes downloaded into the cache
	LoadErrors    int64

	Bytes          int64 // bytes of cached and loading chunks
	ProtectedBytes int64
	Chunks         int
	Pinned         int // chunks referenced now
	CapacityBytes  int64
}

// HitRatio is the share of demand reads that did not start a GET of their
// own (hits and joins of an in-flight GET), or 0 before any read.
func (s CacheStats) HitRatio() float64 {
	return ReadCounts{Hits: s.Hits, InflightJoins: s.InflightJoins, Misses: s.Misses}.HitRatio()
}

// ReadCounts are demand reads of the chunk cache, by how the cache served
// them: CacheStats has them for the whole cache, PartitionReadCounts per
// partition.
type ReadCounts struct {
	Hits          int64 // served from a cached chunk
	InflightJoins int64 // waited for a GET already under way
	Misses        int64 // started a GET
}

// Reads is the number of demand reads.
func (c ReadCounts) Reads() int64 { return c.Hits + c.InflightJoins + c.Misses }

// HitRatio is the share of reads that did not start a GET of their own
// (hits and joins of an in-flight GET, read-ahead's above all), or 0
// before any read.
func (c ReadCounts) HitRatio() float64 {
	n := c.Reads()
	if n == 0 {
		return 0
	}
	return float64(c.Hits+c.InflightJoins) / float64(n)
}

// readCounters are the live counters behind one ReadCounts.
type readCounters struct {
	hits, joins, misses atomic.Int64
}

func (rc *readCounters) load() ReadCounts {
	return ReadCounts{Hits: rc.hits.Load(), InflightJoins: rc.joins.Load(), Misses: rc.misses.Load()}
}

// chunkCache is the on-disk chunk cache.
type chunkCache struct {
	dir          string
	capacity     int64
	protectedCap int64
	log          *slog.Logger

	hits, joins, misses, prefetches, evictions, fetched, loadErrors atomic.Int64
	gen                                                             atomic.Uint64

	mu struct {
		sync.Mutex
		entries        map[chunkKey]*chunkEntry
		probation      list.List // of *chunkEntry, most recent at the front
		protected      list.List
		bytes          int64
		protectedBytes int64
		pinned         int
		closed         bool
	}
}

// ErrReaderClosed is returned by reads after the RemoteReader is closed.
var ErrReaderClosed = errors.New("tiering: remote reader closed")

// newChunkCache opens the cache in dir, creating it, and deletes the chunk
// files a previous run left there.
func newChunkCache(dir string, capacity int64, log *slog.Logger) (*chunkCache, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tiering: chunk cache dir: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("tiering: chunk cache dir: %w", err)
	}
	removed := 0
	for _, de := range ents {
		if de.Type().IsRegular() && strings.HasSuffix(de.Name(), chunkFileSuffix) {
			if err := os.Remove(filepath.Join(dir, de.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("tiering: clear chunk cache: %w", err)
			}
			removed++
		}
	}
	if removed > 0 {
		log.Info("cleared stale remote chunk cache files", "dir", dir, "files", removed)
	}
	c := &chunkCache{dir: dir, capacity: capacity, protectedCap: int64(float64(capacity) * protectedFraction), log: log}
	c.gen.Store(uint64(time.Now().UnixNano())) // file names unique even across restarts
	c.mu.entries = make(map[chunkKey]*chunkEntry)
	return c, nil
}

// acquire returns key's chunk pinned, loading it with load if it is not
// cached. correlated says the read continues a sequential stream (it then
// never promotes the chunk). The caller releases the reference.
func (c *chunkCache) acquire(ctx context.Context, key chunkKey, size int64, correlated bool, load chunkLoader) (*chunkRef, error) {
	return c.acquireFor(ctx, nil, key, size, correlated, load)
}

// acquireFor is acquire that also counts the read in pc (one partition's
// counters), when pc is not nil.
func (c *chunkCache) acquireFor(ctx context.Context, pc *readCounters, key chunkKey, size int64, correlated bool, load chunkLoader) (*chunkRef, error) {
	for retried := false; ; retried = true {
		c.mu.Lock()
		if c.mu.closed {
			c.mu.Unlock()
			return nil, ErrReaderClosed
		}
		e, joined := c.mu.entries[key]
		if !joined {
			e = c.insertLocked(key, size)
			e.demanded = true
			e.refs++ // the reader's pin, besides the load's
			victims := c.evictLocked()
			c.mu.Unlock()
			c.misses.Add(1)
			if pc != nil {
				pc.misses.Add(1)
			}
			c.removeFiles(victims)
			go c.load(context.WithoutCancel(ctx), e, load)
		} else {
			if e.refs == 0 {
				c.mu.pinned++
			}
			e.refs++
			c.touchLocked(e, correlated)
			loading := e.state == chunkLoading
			c.mu.Unlock()
			switch {
			case loading:
				c.joins.Add(1)
				if pc != nil {
					pc.joins.Add(1)
				}
			default:
				c.hits.Add(1)
				if pc != nil {
					pc.hits.Add(1)
				}
			}
		}
		select {
		case <-e.done:
		case <-ctx.Done():
			c.unpin(e)
			return nil, ctx.Err()
		}
		if e.err == nil {
			return &chunkRef{c: c, e: e}, nil
		}
		c.unpin(e)
		// A load we joined may have failed for reasons of its own (a
		// read-ahead cut short): try once more with our own GET.
		if !joined || retried || errors.Is(e.err, ErrReaderClosed) {
			return nil, e.err
		}
	}
}

// rangeGetter opens one GET of bytes [start, end) of an object.
type rangeGetter func(ctx context.Context, start, end int64) (io.ReadCloser, error)

// prefetchRun loads chunks first..last of object (spans is its chunk
// table) into the cache, in the calling goroutine, without counting demand
// references: every stretch of consecutive chunks not already cached or
// loading is fetched with one GET, and each chunk is checked, written and
// published as soon as its bytes have arrived, so a reader waiting for the
// first chunk of a stretch does not wait for the whole GET. It returns the
// first error.
func (c *chunkCache) prefetchRun(ctx context.Context, object string, spans []chunkSpan, first, last int, get rangeGetter) error {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return ErrReaderClosed
	}
	var runs [][]*chunkEntry
	var run []*chunkEntry
	for k := first; k <= last; k++ {
		key := chunkKey{object, k}
		if _, ok := c.mu.entries[key]; ok {
			if run != nil {
				runs, run = append(runs, run), nil
			}
			continue
		}
		run = append(run, c.insertLocked(key, spans[k].end-spans[k].start))
	}
	if run != nil {
		runs = append(runs, run)
	}
	victims := c.evictLocked()
	c.mu.Unlock()
	c.removeFiles(victims)
	var firstErr error
	for _, run := range runs {
		c.prefetches.Add(int64(len(run)))
		if err := c.loadRun(ctx, run, spans, get); firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// loadRun fetches the consecutive chunks of run with one GET and loads
// them in order. When the GET or a chunk fails, the chunks after it fail
// with the same error.
func (c *chunkCache) loadRun(ctx context.Context, run []*chunkEntry, spans []chunkSpan, get rangeGetter) error {
	body, err := get(ctx, spans[run[0].key.index].start, spans[run[len(run)-1].key.index].end)
	for _, e := range run {
		if err != nil {
			c.publish(e, nil, err)
			continue
		}
		c.load(ctx, e, func(_ context.Context, w io.Writer) error {
			if err := copyValidBatches(w, body, e.size); err != nil {
				span := spans[e.key.index]
				return fmt.Errorf("tiering: get %s [%d, %d): %w", e.key.object, span.start, span.end, err)
			}
			return nil
		})
		err = e.err
	}
	if body != nil {
		if cerr := body.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// contains reports whether key is cached or loading.
func (c *chunkCache) contains(key chunkKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.mu.entries[key]
	return ok
}

// insertLocked adds a loading entry for key, pinned for its load, at the
// front of probation.
func (c *chunkCache) insertLocked(key chunkKey, size int64) *chunkEntry {
	e := &chunkEntry{key: key, size: size, state: chunkLoading, refs: 1, done: make(chan struct{})}
	sum := sha256.Sum256([]byte(key.object))
	e.path = filepath.Join(c.dir, fmt.Sprintf("%s-%d-%d%s", hex.EncodeToString(sum[:8]), key.index, c.gen.Add(1), chunkFileSuffix))
	e.elem = c.mu.probation.PushFront(e)
	c.mu.entries[key] = e
	c.mu.bytes += size
	c.mu.pinned++
	return e
}

// touchLocked records a demand read of e.
func (c *chunkCache) touchLocked(e *chunkEntry, correlated bool) {
	switch {
	case e.protected:
		c.mu.protected.MoveToFront(e.elem)
	case e.demanded && !correlated && e.state == chunkReady:
		c.mu.probation.Remove(e.elem)
		e.elem = c.mu.protected.PushFront(e)
		e.protected = true
		c.mu.protectedBytes += e.size
		for c.mu.protectedBytes > c.protectedCap && c.mu.protected.Len() > 1 {
			d := c.mu.protected.Remove(c.mu.protected.Back()).(*chunkEntry)
			d.protected = false
			d.elem = c.mu.probation.PushFront(d)
			c.mu.protectedBytes -= d.size
		}
	default:
		e.demanded = true
		c.mu.probation.MoveToFront(e.elem)
	}
}

// load fetches e's bytes, writes its file and publishes it. It drops the
// load's pin.
func (c *chunkCache) load(ctx context.Context, e *chunkEntry, load chunkLoader) {
	f, err := c.fill(ctx, e, load)
	c.publish(e, f, err)
}

// publish ends e's load: ready with file f, or failed with err (f, if not
// nil, is then closed and removed). It drops the load's pin and wakes the
// readers waiting for e.
func (c *chunkCache) publish(e *chunkEntry, f *os.File, err error) {
	c.mu.Lock()
	if err == nil && c.mu.closed {
		err = ErrReaderClosed
	}
	if err != nil {
		e.err = err
		c.removeLocked(e)
	} else {
		e.file = f
		e.state = chunkReady
	}
	c.unpinLocked(e)
	victims := c.evictLocked()
	c.mu.Unlock()
	if err != nil {
		// The failed chunk's file goes before anyone hears of the failure.
		c.loadErrors.Add(1)
		c.removeFiles([]*chunkEntry{{path: e.path, file: f}})
		if !errors.Is(err, ErrReaderClosed) && !errors.Is(err, context.Canceled) {
			c.log.Warn("remote chunk fetch failed", "object", e.key.object, "chunk", e.key.index, "err", err)
		}
	}
	close(e.done)
	c.removeFiles(victims)
}

// fill creates e's file and runs the loader into it.
func (c *chunkCache) fill(ctx context.Context, e *chunkEntry, load chunkLoader) (*os.File, error) {
	f, err := os.OpenFile(e.path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("tiering: chunk cache: %w", err)
	}
	// A full disk fails here, before the chunk's bytes are read.
	if err := preallocate(f, e.size); err != nil {
		return f, fmt.Errorf("tiering: chunk cache: allocate %d bytes: %w", e.size, err)
	}
	w := &countingWriter{w: f}
	if err := load(ctx, w); err != nil {
		return f, err
	}
	if w.n != e.size {
		return f, fmt.Errorf("tiering: chunk cache: loader wrote %d bytes of a %d-byte chunk", w.n, e.size)
	}
	c.fetched.Add(e.size)
	return f, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err != nil {
		err = fmt.Errorf("tiering: chunk cache: write: %w", err)
	}
	return n, err
}

// unpin drops one pin of e.
func (c *chunkCache) unpin(e *chunkEntry) {
	c.mu.Lock()
	c.unpinLocked(e)
	victims := c.evictLocked()
	c.mu.Unlock()
	c.removeFiles(victims)
}

func (c *chunkCache) unpinLocked(e *chunkEntry) {
	e.refs--
	if e.refs == 0 {
		c.mu.pinned--
	}
}

// removeLocked takes e out of the index and lists.
func (c *chunkCache) removeLocked(e *chunkEntry) {
	if c.mu.entries[e.key] != e {
		return
	}
	delete(c.mu.entries, e.key)
	if e.protected {
		c.mu.protected.Remove(e.elem)
		c.mu.protectedBytes -= e.size
	} else {
		c.mu.probation.Remove(e.elem)
	}
	c.mu.bytes -= e.size
}

// evictLocked evicts unpinned ready chunks, least recent probationary ones
// first, until the cache is within its capacity. It returns the evicted
// entries, whose files the caller removes after unlocking.
func (c *chunkCache) evictLocked() []*chunkEntry {
	var victims []*chunkEntry
	for _, l := range []*list.List{&c.mu.probation, &c.mu.protected} {
		for el := l.Back(); el != nil && (c.mu.bytes > c.capacity || c.mu.closed); {
			e := el.Value.(*chunkEntry)
			el = el.Prev()
			if e.refs > 0 || e.state != chunkReady {
				continue
			}
			c.removeLocked(e)
			victims = append(victims, e)
		}
	}
	c.evictions.Add(int64(len(victims)))
	return victims
}

// removeFiles closes and deletes the files of evicted chunks.
func (c *chunkCache) removeFiles(victims []*chunkEntry) {
	for _, e := range victims {
		if e.file != nil {
			if err := e.file.Close(); err != nil {
				c.log.Warn("close remote chunk file", "path", e.path, "err", err)
			}
		}
		if err := os.Remove(e.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			c.log.Warn("remove remote chunk file", "path", e.path, "err", err)
		}
	}
}

// stats returns the counters and the current occupancy.
func (c *chunkCache) stats() CacheStats {
	c.mu.Lock()
	s := CacheStats{
		Bytes: c.mu.bytes, ProtectedBytes: c.mu.protectedBytes, Chunks: len(c.mu.entries),
		Pinned: c.mu.pinned, CapacityBytes: c.capacity,
	}
	c.mu.Unlock()
	s.Hits, s.InflightJoins, s.Misses = c.hits.Load(), c.joins.Load(), c.misses.Load()
	s.Prefetches, s.Evictions, s.FetchedBytes, s.LoadErrors = c.prefetches.Load(), c.evictions.Load(), c.fetched.Load(), c.loadErrors.Load()
	return s
}

// close marks the cache closed and deletes the files of unpinned chunks;
// pinned ones are deleted when released.
func (c *chunkCache) close() {
	c.mu.Lock()
	c.mu.closed = true
	var victims []*chunkEntry
	for _, e := range c.mu.entries {
		if e.refs == 0 && e.state == chunkReady {
			victims = append(victims, e)
		}
	}
	for _, e := range victims {
		c.removeLocked(e)
	}
	c.mu.Unlock()
	c.removeFiles(victims)
}
