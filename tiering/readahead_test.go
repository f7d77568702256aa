package tiering

import (
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
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 4 << 10, CacheBytes: 1 << 20, ReadAheadChunks: ahead, ReadAheadWorkers: ahead})
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

// TestReadAheadCrossesSegments: a sequential reader at the end of a
// segment gets the next segment's first chunks prefetched.
func TestReadAheadCrossesSegments(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 4 << 10, ReadAheadChunks: 2})
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
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 4 << 10, ReadAheadChunks: 4, ReadAheadWorkers: 2})
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
