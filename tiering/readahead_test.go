package tiering

import (
	"bytes"
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// waitFor polls cond until it holds or the deadline passes.
func readWaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// fetchedChunk reports whether the store served a GET of the object key
// starting at off.
func fetchedChunk(s *memStore, key string, off int64) bool {
	for _, g := range s.getsOf(key) {
		if g.off == off {
			return true
		}
	}
	return false
}

// TestReadAheadPrefetchesAhead: once a reader reads sequentially, the next
// chunks are fetched before it asks for them, in parallel, each once.
func TestReadAheadPrefetchesAhead(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	f.store.latency = 5 * time.Millisecond
	const ahead = 4
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 4 << 10, CacheBytes: 1 << 20, ReadAheadChunks: ahead, ReadAheadRunChunks: 1, ReadAheadWorkers: ahead})
	ctx := context.Background()
	seg := &f.m.Segments[0]
	ix, err := r.segmentIndex(ctx, f.key, seg)
	if err != nil {
		t.Fatal(err)
	}
	if len(ix.chunks) < ahead+3 {
		t.Fatalf("segment 0 has %d chunks, too few for the test", len(ix.chunks))
	}
	// Two sequential reads, starting after the log start (so the first is
	// not taken for a replay), each reading a whole chunk.
	off := ix.chunks[1].next
	for range 2 {
		rs, err := r.Read(ctx, f.key, f.m, off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		rs.Release()
		off = rs.NextOffset
	}
	// The reader is at chunk 3; chunks 4..3+ahead are on their way.
	for k := 4; k < 4+ahead; k++ {
		readWaitFor(t, "prefetch of the next chunks", func() bool { return fetchedChunk(f.store, ix.logKey, ix.chunks[k].start) })
	}
	if fetchedChunk(f.store, ix.logKey, ix.chunks[4+ahead].start) {
		t.Fatalf("chunk %d fetched: more than %d chunks ahead", 4+ahead, ahead)
	}
	readWaitFor(t, "prefetches to land", func() bool {
		return r.Stats().Cache.Prefetches == ahead && r.cache.contains(chunkKey{ix.logKey, 3 + ahead})
	})

	// The rest of the replay: every chunk is fetched once, nearly all by
	// read-ahead.
	f.store.resetCounts()
	before := r.Stats().Cache
	replay(t, r, f, off, 1<<20)
	after := r.Stats().Cache
	chunks := 0
	for i := range f.m.Segments {
		ix, err := r.segmentIndex(ctx, f.key, &f.m.Segments[i])
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range ix.chunks {
			n := 0
			for _, g := range f.store.getsOf(ix.logKey) {
				if g.off == c.start {
					n++
				}
			}
			if i > 0 || c.start >= ix.chunks[4].start {
				chunks++
				if n > 1 {
					t.Errorf("segment %d chunk at %d fetched %d times", i, c.start, n)
				}
			}
		}
	}
	if misses := after.Misses - before.Misses; misses > int64(len(f.m.Segments)) {
		t.Errorf("%d demand misses over %d chunks; read-ahead should have fetched nearly all", misses, chunks)
	}
	t.Logf("replay of %d chunks: %d hits, %d joins of read-ahead GETs, %d misses", chunks,
		after.Hits-before.Hits, after.InflightJoins-before.InflightJoins, after.Misses-before.Misses)
}

// TestReadAheadFetchesRuns: read-ahead fetches aligned groups of
// ReadAheadRunChunks chunks with one GET each, publishes every chunk of a
// group, never fetches a chunk twice, and a replay through it returns
// every batch in order.
func TestReadAheadFetchesRuns(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	const ahead, run = 2, 3
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 4 << 10, CacheBytes: 1 << 20, ReadAheadChunks: ahead, ReadAheadRunChunks: run, ReadAheadWorkers: 2})
	ctx := context.Background()
	ix, err := r.segmentIndex(ctx, f.key, &f.m.Segments[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(ix.chunks) < 2*run+1 {
		t.Fatalf("segment 0 has %d chunks, too few for the test", len(ix.chunks))
	}
	// A replay from the log start: its first read is chunk 0 (a demand
	// GET); the window then reaches chunks 1 and 2, queued as the rest of
	// group 0 (chunks 1..2) in one GET.
	rs, err := r.Read(ctx, f.key, f.m, f.m.LogStartOffset, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	rs.Release()
	readWaitFor(t, "the rest of group 0", func() bool { return r.cache.contains(chunkKey{ix.logKey, run - 1}) })
	readWaitFor(t, "group 0 to land", func() bool { return r.Stats().Cache.Prefetches == run-1 })
	gets := f.store.getsOf(ix.logKey)
	if len(gets) != 2 || gets[1].off != ix.chunks[1].start || gets[1].len != ix.chunks[run-1].end-ix.chunks[1].start {
		t.Fatalf("GETs %+v; want chunk 0 alone, then chunks 1..%d in one GET [%d, %d)", gets, run-1, ix.chunks[1].start, ix.chunks[run-1].end)
	}

	// The whole replay: every chunk of every segment is fetched once, and
	// the GETs after the first of each segment are runs of up to `run`
	// chunks, aligned to groups.
	replay(t, r, f, rs.NextOffset, 1<<20)
	for i := range f.m.Segments {
		ix, err := r.segmentIndex(ctx, f.key, &f.m.Segments[i])
		if err != nil {
			t.Fatal(err)
		}
		covered := make([]int, len(ix.chunks))
		for _, g := range f.store.getsOf(ix.logKey) {
			first, last := -1, -1
			for k, c := range ix.chunks {
				if c.start >= g.off && c.end <= g.off+g.len {
					covered[k]++
					if first < 0 {
						first = k
					}
					last = k
				}
			}
			if first < 0 || ix.chunks[first].start != g.off || ix.chunks[last].end != g.off+g.len {
				t.Fatalf("segment %d: GET [%d, +%d) is not a whole number of chunks", i, g.off, g.len)
			}
			if last-first+1 > run || first/run != last/run {
				t.Errorf("segment %d: GET of chunks %d..%d crosses a group of %d", i, first, last, run)
			}
		}
		for k, n := range covered {
			if n != 1 {
				t.Errorf("segment %d chunk %d fetched %d times", i, k, n)
			}
		}
	}
	if s := r.Stats(); s.ReadAheadFailed != 0 || s.Cache.LoadErrors != 0 {
		t.Fatalf("read-ahead failures %d, load errors %d", s.ReadAheadFailed, s.Cache.LoadErrors)
	}
}

// TestReadAheadRunFailure: when a run's GET breaks off, the chunks it had
// not delivered fail, and readers waiting for them fetch them again on
// their own.
func TestReadAheadRunFailure(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 4 << 10, CacheBytes: 1 << 20, ReadAheadChunks: 4, ReadAheadRunChunks: 4, ReadAheadWorkers: 1})
	ctx := context.Background()
	// GETs longer than any one chunk (runs) break off after that many
	// bytes; single-chunk GETs go through.
	var longest int64
	for i := range f.m.Segments {
		ix, err := r.segmentIndex(ctx, f.key, &f.m.Segments[i])
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range ix.chunks {
			longest = max(longest, c.end-c.start)
		}
	}
	f.store.mu.Lock()
	f.store.truncateLongGets = longest
	f.store.mu.Unlock()
	if got := replay(t, r, f, f.m.LogStartOffset, 1<<20); !bytes.Equal(got, f.allLogBytes()) {
		t.Fatalf("replay returned %d bytes, not the %d of the log", len(got), len(f.allLogBytes()))
	}
	if s := r.Stats(); s.Cache.LoadErrors == 0 || s.ReadAheadFailed == 0 {
		t.Fatalf("load errors %d, read-ahead failures %d; the test did not break a run", s.Cache.LoadErrors, s.ReadAheadFailed)
	}
}

// TestReadAheadCrossesSegments: a sequential reader at the end of a
// segment gets the next segment's first chunks prefetched.
func TestReadAheadCrossesSegments(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 4 << 10, ReadAheadChunks: 2, ReadAheadRunChunks: 1})
	ctx := context.Background()
	ix, err := r.segmentIndex(ctx, f.key, &f.m.Segments[0])
	if err != nil {
		t.Fatal(err)
	}
	off := ix.chunks[len(ix.chunks)-2].next // the last chunk of segment 0
	for range 2 {
		rs, err := r.Read(ctx, f.key, f.m, off, 200)
		if err != nil {
			t.Fatal(err)
		}
		rs.Release()
		off = rs.NextOffset
	}
	next := &f.m.Segments[1]
	readWaitFor(t, "the next segment's index", func() bool { return f.store.getCount(next.ObjectName()+SuffixIndex) == 1 })
	ix1, err := r.segmentIndex(ctx, f.key, next)
	if err != nil {
		t.Fatal(err)
	}
	for k := range 2 {
		readWaitFor(t, "the next segment's chunks", func() bool { return fetchedChunk(f.store, ix1.logKey, ix1.chunks[k].start) })
	}
	readWaitFor(t, "prefetches to land", func() bool { return r.cache.contains(chunkKey{ix1.logKey, 1}) && r.Stats().Cache.Prefetches == 2 })
	if fetchedChunk(f.store, ix1.logKey, ix1.chunks[2].start) {
		t.Fatal("a third chunk was prefetched with ReadAheadChunks 2")
	}
}

// TestReadAheadNotForRandomReads: reads that do not continue another read
// prefetch nothing. (Reads start inside batches: a read at a batch's base
// offset may continue an earlier read that ended there.)
func TestReadAheadNotForRandomReads(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 4 << 10})
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		off := f.m.LogStartOffset + 1 + rng.Int64N(f.m.EndOffset()-f.m.LogStartOffset-1)
		if b := f.batches[f.batchFor(off)]; b.base == off {
			continue
		}
		rs, err := r.Read(context.Background(), f.key, f.m, off, 100)
		if err != nil {
			t.Fatal(err)
		}
		rs.Release()
	}
	if s := r.Stats(); s.ReadAheadQueued != 0 || s.Cache.Prefetches != 0 {
		t.Fatalf("random reads queued %d prefetches", s.ReadAheadQueued)
	}
}

// TestRemoteReadNotBlockedBySlowGets: while GETs hang, with read-ahead
// workers stuck on them, its queue full, and demand reads of other
// partitions waiting, reads of cached chunks return at once.
func TestRemoteReadNotBlockedBySlowGets(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 4 << 10, ReadAheadChunks: 4, ReadAheadRunChunks: 1, ReadAheadWorkers: 2})
	ctx := context.Background()
	read := func(off int64, maxBytes int) RemoteSlice {
		t.Helper()
		rs, err := r.Read(ctx, f.key, f.m, off, maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		rs.Release()
		return rs
	}
	// Warm the first two chunks of segments 1..6 without reading
	// sequentially (one batch from each chunk's start).
	segs := f.m.Segments[1:7]
	for i := range segs {
		ix, err := r.segmentIndex(ctx, f.key, &segs[i])
		if err != nil {
			t.Fatal(err)
		}
		read(segs[i].BaseOffset, 1)
		read(ix.chunks[0].next, 1)
	}
	if q := r.Stats().ReadAheadQueued; q != 0 {
		t.Fatalf("warming queued %d prefetches", q)
	}
	release := f.store.hold()
	defer release()
	// Demand readers of other partitions, stuck on their GETs.
	stuckCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for p := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs, err := r.Read(stuckCtx, PartitionKey{Topic: "other", Partition: int32(p)}, f.m, 7, 1<<20)
			if err == nil {
				rs.Release()
			}
		}()
	}
	// Sequential reads over the cached chunks: each queues read-ahead
	// that the stuck store holds, until the queue overflows.
	start := time.Now()
	for i := range segs {
		rs := read(segs[i].BaseOffset, 1<<20) // the whole first chunk
		read(rs.NextOffset, 1<<20)            // continues: read-ahead
	}
	for range 100 {
		read(segs[0].BaseOffset, 1<<20)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("cached reads took %v while GETs hang", d)
	}
	if s := r.Stats(); s.ReadAheadDropped == 0 || s.ReadAheadQueued == 0 {
		t.Fatalf("read-ahead queued %d, dropped %d; want the queue to overflow", s.ReadAheadQueued, s.ReadAheadDropped)
	}
	cancel()
	wg.Wait()
}
