package tiering

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testChunkCache is a chunkCache in a temp dir whose loader fills chunks
// with a pattern derived from the key and counts loads per key.
type testChunkCache struct {
	*chunkCache
	mu    sync.Mutex
	loads map[chunkKey]int
}

func newTestChunkCache(t *testing.T, capacity int64) *testChunkCache {
	t.Helper()
	c, err := newChunkCache(t.TempDir(), capacity, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	return &testChunkCache{chunkCache: c, loads: make(map[chunkKey]int)}
}

func chunkPattern(key chunkKey, n int64) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(len(key.object)*31 + key.index*7 + i)
	}
	return b
}

func (c *testChunkCache) loader(key chunkKey, size int64) chunkLoader {
	return func(ctx context.Context, w io.Writer) error {
		c.mu.Lock()
		c.loads[key]++
		c.mu.Unlock()
		_, err := w.Write(chunkPattern(key, size))
		return err
	}
}

func (c *testChunkCache) loadCount(key chunkKey) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loads[key]
}

// read acquires key, checks its content and releases it.
func (c *testChunkCache) read(t *testing.T, key chunkKey, size int64, correlated bool) {
	t.Helper()
	ref, err := c.acquire(context.Background(), key, size, correlated, c.loader(key, size))
	if err != nil {
		t.Fatal(err)
	}
	checkChunkFile(t, ref, key, size)
	ref.release()
}

func checkChunkFile(t *testing.T, ref *chunkRef, key chunkKey, size int64) {
	t.Helper()
	got := make([]byte, size)
	if _, err := ref.file().ReadAt(got, 0); err != nil {
		t.Fatalf("chunk %v: %v", key, err)
	}
	if !bytes.Equal(got, chunkPattern(key, size)) {
		t.Fatalf("chunk %v: wrong content", key)
	}
}

// dirBytes sums the sizes of the cache's chunk files.
func dirBytes(t *testing.T, dir string) (int64, int) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	files := 0
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
		files++
	}
	return n, files
}

func TestChunkCacheBound(t *testing.T) {
	const size, capacity = 1000, 10_500
	c := newTestChunkCache(t, capacity)
	for i := range 200 {
		key := chunkKey{fmt.Sprintf("obj-%d", i%7), i}
		c.read(t, key, size, i%3 == 0)
		if i%5 == 0 {
			c.read(t, key, size, false) // some promotions too
		}
		s := c.stats()
		if s.Bytes > capacity {
			t.Fatalf("after %d chunks: %d bytes cached, capacity %d", i+1, s.Bytes, capacity)
		}
		if n, _ := dirBytes(t, c.dir); n > capacity {
			t.Fatalf("after %d chunks: %d bytes of files, capacity %d", i+1, n, capacity)
		}
		if s.ProtectedBytes > int64(capacity*protectedFraction) {
			t.Fatalf("protected segment holds %d bytes, more than %v of %d", s.ProtectedBytes, protectedFraction, capacity)
		}
	}
	if s := c.stats(); s.Evictions == 0 || s.Chunks != 10 {
		t.Fatalf("stats %+v: want evictions and 10 chunks", s)
	}
}

// TestChunkCacheScanResistance: a sequential scan, each chunk read several
// times as a stream does, does not evict a chunk that is read again and
// again meanwhile, even when the scan passes 1.5x the cache between its
// reads; a plain LRU would evict it, and so would promoting on every hit.
func TestChunkCacheScanResistance(t *testing.T) {
	const size, chunks = 1000, 8
	c := newTestChunkCache(t, size*chunks)
	hot := chunkKey{"hot", 0}
	c.read(t, hot, size, false)
	c.read(t, hot, size, false)
	for i := range 6 * chunks {
		key := chunkKey{"scan", i}
		for j := range 4 {
			c.read(t, key, size, j > 0) // a stream's first read of a chunk may look uncorrelated
		}
		if i%12 == 11 {
			c.read(t, hot, size, false)
		}
	}
	if n := c.loadCount(hot); n != 1 {
		t.Fatalf("hot chunk loaded %d times, want 1", n)
	}
	// Control: a chunk read only once is just another probationary chunk
	// and the scan evicts it.
	cold := chunkKey{"cold", 0}
	c.read(t, cold, size, false)
	for i := range 2 * chunks {
		c.read(t, chunkKey{"scan2", i}, size, false)
	}
	c.read(t, cold, size, false)
	if n := c.loadCount(cold); n != 2 {
		t.Fatalf("once-read chunk loaded %d times, want 2 (evicted by the scan)", n)
	}
}

// TestChunkCachePinned: a referenced chunk is never evicted, even when the
// cache overflows; once released it goes.
func TestChunkCachePinned(t *testing.T) {
	const size, capacity = 1000, 4000
	c := newTestChunkCache(t, capacity)
	held := chunkKey{"held", 0}
	ref, err := c.acquire(context.Background(), held, size, false, c.loader(held, size))
	if err != nil {
		t.Fatal(err)
	}
	path := ref.e.path
	for i := range 30 {
		c.read(t, chunkKey{"other", i}, size, false)
	}
	checkChunkFile(t, ref, held, size)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("pinned chunk's file: %v", err)
	}
	if s := c.stats(); s.Pinned != 1 || s.Bytes > capacity+size {
		t.Fatalf("stats %+v: want 1 pinned and at most %d bytes", s, capacity+size)
	}
	ref.release()
	ref.release() // idempotent
	for i := range 30 {
		c.read(t, chunkKey{"more", i}, size, false)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("released chunk's file after more reads: %v, want it evicted", err)
	}
	if s := c.stats(); s.Pinned != 0 || s.Bytes > capacity {
		t.Fatalf("stats %+v", s)
	}
}

// TestChunkCacheOverPinned: when every chunk is pinned the cache grows past
// its bound, and shrinks back as they are released.
func TestChunkCacheOverPinned(t *testing.T) {
	const size, capacity = 1000, 3000
	c := newTestChunkCache(t, capacity)
	var refs []*chunkRef
	for i := range 6 {
		key := chunkKey{"p", i}
		ref, err := c.acquire(context.Background(), key, size, false, c.loader(key, size))
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
	}
	if s := c.stats(); s.Bytes != 6*size {
		t.Fatalf("with 6 pinned chunks: %d bytes", s.Bytes)
	}
	for _, r := range refs {
		r.release()
	}
	if s := c.stats(); s.Bytes > capacity || s.Pinned != 0 {
		t.Fatalf("after release: %+v", s)
	}
	if n, files := dirBytes(t, c.dir); n > capacity || files != 3 {
		t.Fatalf("after release: %d files, %d bytes", files, n)
	}
}

// TestChunkCacheSingleflight: concurrent readers of a missing chunk share
// one load. The load is held until every reader waits on it.
func TestChunkCacheSingleflight(t *testing.T) {
	c := newTestChunkCache(t, 1<<20)
	key := chunkKey{"sf", 3}
	gate := make(chan struct{})
	var loads atomic.Int32
	load := func(ctx context.Context, w io.Writer) error {
		loads.Add(1)
		<-gate
		_, err := w.Write(chunkPattern(key, 500))
		return err
	}
	const n = 16
	var wg sync.WaitGroup
	refs := make(chan *chunkRef, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ref, err := c.acquire(context.Background(), key, 500, false, load)
			if err != nil {
				t.Error(err)
				return
			}
			refs <- ref
		}()
	}
	readWaitFor(t, "every reader to wait for the load", func() bool { s := c.stats(); return s.Misses+s.InflightJoins == n })
	close(gate)
	wg.Wait()
	close(refs)
	for ref := range refs {
		checkChunkFile(t, ref, key, 500)
		ref.release()
	}
	if loads.Load() != 1 {
		t.Fatalf("%d loads, want 1", loads.Load())
	}
	if s := c.stats(); s.Misses != 1 || s.InflightJoins != n-1 || s.Hits != 0 {
		t.Fatalf("stats %+v: want 1 miss and %d joins", s, n-1)
	}
}

// TestChunkCacheLoadError: a failed load is reported to every waiter and
// not cached; the next read loads again.
func TestChunkCacheLoadError(t *testing.T) {
	c := newTestChunkCache(t, 1<<20)
	key := chunkKey{"err", 0}
	boom := errors.New("boom")
	_, err := c.acquire(context.Background(), key, 100, false, func(ctx context.Context, w io.Writer) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want boom", err)
	}
	if s := c.stats(); s.Chunks != 0 || s.Bytes != 0 || s.LoadErrors != 1 {
		t.Fatalf("after a failed load: %+v", s)
	}
	c.read(t, key, 100, false)
	if _, files := dirBytes(t, c.dir); files != 1 {
		t.Fatalf("%d files, want 1", files)
	}
}

// TestChunkCacheCancelledWaiter: a reader that gives up does not cancel the
// load others (or later readers) use.
func TestChunkCacheCancelledWaiter(t *testing.T) {
	c := newTestChunkCache(t, 1<<20)
	key := chunkKey{"slow", 0}
	gate := make(chan struct{})
	load := func(ctx context.Context, w io.Writer) error {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
		_, err := w.Write(chunkPattern(key, 100))
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := c.acquire(ctx, key, 100, false, load); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the deadline", err)
	}
	close(gate)
	ref, err := c.acquire(context.Background(), key, 100, false, c.loader(key, 100))
	if err != nil {
		t.Fatal(err)
	}
	checkChunkFile(t, ref, key, 100)
	ref.release()
	if n := c.loadCount(key); n != 0 {
		t.Fatalf("second reader loaded again (%d); want it to join the first load", n)
	}
}

// TestChunkCacheClearsStaleFiles: a restart deletes the chunk files a
// previous run left, and nothing else.
func TestChunkCacheClearsStaleFiles(t *testing.T) {
	dir := t.TempDir()
	f := buildFixture(t, defaultFixtureOpts())
	r, err := NewRemoteReader(f.store, ReaderConfig{CacheDir: dir, ChunkBytes: 4 << 10, ReadAheadChunks: -1})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := r.Read(context.Background(), f.key, f.m, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	_ = rs // left pinned, as a crash would leave it
	if _, files := dirBytes(t, dir); files == 0 {
		t.Fatal("no chunk files after a read")
	}
	// Simulate a crash: the reader is abandoned, not closed.
	other := filepath.Join(dir, "keep.txt")
	if err := os.WriteFile(other, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "0123-4-5"+chunkFileSuffix), []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	r2 := newTestReader(t, f.store, ReaderConfig{CacheDir: dir})
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), chunkFileSuffix) {
			t.Fatalf("stale chunk file %s survived the restart", e.Name())
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("a file that is not the cache's was removed: %v", err)
	}
	if s := r2.Stats().Cache; s.Bytes != 0 || s.Chunks != 0 {
		t.Fatalf("restarted cache: %+v", s)
	}
	rs.Release()
	r.cancel()
	r.ra.stop()
}

// TestChunkCacheCloseRemovesFiles: Close deletes the cached files, a pinned
// one once its slice is released.
func TestChunkCacheCloseRemovesFiles(t *testing.T) {
	dir := t.TempDir()
	f := buildFixture(t, defaultFixtureOpts())
	r, err := NewRemoteReader(f.store, ReaderConfig{CacheDir: dir, ChunkBytes: 4 << 10, ReadAheadChunks: -1})
	if err != nil {
		t.Fatal(err)
	}
	replay(t, r, f, 0, 1<<20)
	rs, err := r.Read(context.Background(), f.key, f.m, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, files := dirBytes(t, dir); files != 1 {
		t.Fatalf("%d files after Close with one slice held, want 1", files)
	}
	if _, err := rs.Copy(); err != nil {
		t.Fatalf("held slice after Close: %v", err)
	}
	rs.Release()
	if _, files := dirBytes(t, dir); files != 0 {
		t.Fatalf("%d files after the last release, want 0", files)
	}
	if _, err := r.Read(context.Background(), f.key, f.m, 0, 1<<20); !errors.Is(err, ErrReaderClosed) {
		t.Fatalf("read after Close: %v, want ErrReaderClosed", err)
	}
}

// TestRemoteReadSingleflight: N concurrent fetches of the same offset make
// one GET of the index and one of the chunk. Each GET is held until every
// reader waits on it.
func TestRemoteReadSingleflight(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 4 << 10, ReadAheadChunks: -1})
	releaseIndex := f.store.holdWhere(func(g memGet) bool { return strings.HasSuffix(g.key, SuffixIndex) })
	defer releaseIndex()
	const n = 20
	off := f.batches[len(f.batches)/2].base
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs, err := r.Read(context.Background(), f.key, f.m, off, 1<<20)
			if err != nil {
				t.Error(err)
				return
			}
			checkSlice(t, f, off, 1<<20, rs)
			rs.Release()
		}()
	}
	readWaitFor(t, "every reader to wait for the index", func() bool { return r.indexes.hits.Load()+r.indexes.misses.Load() == n })
	releaseLog := f.store.holdWhere(func(g memGet) bool { return strings.HasSuffix(g.key, SuffixLog) })
	defer releaseLog()
	releaseIndex()
	readWaitFor(t, "every reader to wait for the chunk", func() bool { s := r.cache.stats(); return s.Misses+s.InflightJoins == n })
	releaseLog()
	wg.Wait()
	if g, gi := f.store.getCount(SuffixLog), f.store.getCount(SuffixIndex); g != 1 || gi != 1 {
		t.Fatalf("%d readers made %d GETs of .log and %d of .index, want 1 and 1", n, g, gi)
	}
	if s := r.Stats(); s.IndexMisses != 1 || s.IndexHits != n-1 || s.Cache.Misses != 1 || s.Cache.InflightJoins != n-1 {
		t.Fatalf("stats %+v: want one index miss and one chunk miss, the other %d readers joining them", s, n-1)
	}
}

// TestRemoteReadScanResistance: a replay through 3x the cache does not
// evict the chunk another consumer keeps reading.
func TestRemoteReadScanResistance(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	total := int64(len(f.allLogBytes()))
	capacity := total / 3
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 4 << 10, CacheBytes: capacity, ReadAheadChunks: 2, ReadAheadWorkers: 2})
	ctx := context.Background()
	hotSeg := len(f.m.Segments) - 1
	hotOff := f.m.Segments[hotSeg].BaseOffset + 3
	readHot := func() {
		t.Helper()
		rs, err := r.Read(ctx, f.key, f.m, hotOff, 1000)
		if err != nil {
			t.Fatal(err)
		}
		rs.Release()
	}
	readHot()
	readHot()
	hotChunkGets := func() int {
		n := 0
		for _, g := range f.store.getsOf(f.logKey(hotSeg)) {
			if g.off == 0 { // the hot offset is in the segment's first chunk
				n++
			}
		}
		return n
	}
	if n := hotChunkGets(); n != 1 {
		t.Fatalf("hot chunk fetched %d times, want 1", n)
	}
	// The log is 3x the cache: replay it three times, reading the hot
	// chunk again each time the replay has passed 1.5x the cache (a plain
	// LRU would have evicted it by then).
	for range 3 {
		var since int64
		for off := f.m.LogStartOffset; off < f.m.Segments[hotSeg].BaseOffset; {
			rs, err := r.Read(ctx, f.key, f.m, off, 1000)
			if err != nil {
				t.Fatal(err)
			}
			rs.Release()
			off = rs.NextOffset
			if since += rs.Size; since > capacity*3/2 {
				readHot()
				since = 0
			}
		}
	}
	readHot()
	if n := hotChunkGets(); n != 1 {
		t.Fatalf("the hot chunk was fetched %d times during the replays, want once", n)
	}
	if s := r.Stats().Cache; s.Evictions == 0 || s.Bytes > capacity {
		t.Fatalf("stats %+v: want evictions within the bound", s)
	}
}
