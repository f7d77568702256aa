package tiering

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/segment/poll"
)

// readWaitFor polls cond until it holds, failing the test after a
// deadline far beyond what the reader's background work needs.
func readWaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 30*time.Second, what, cond)
}

// waitReadAheadIdle waits until the read-ahead workers have run every job
// queued so far: the chunks they fetched are then in the cache, ready, or
// failed.
func waitReadAheadIdle(t *testing.T, r *RemoteReader) {
	t.Helper()
	readWaitFor(t, "read-ahead to run its queued jobs", func() bool { return r.ra.finished.Load() == r.ra.queued.Load() })
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
// chunks are fetched before it asks for them, in parallel, each once. The
// prefetches are held in the store until all are under way, and the
// replay waits for read-ahead after each read, so what is measured is the
// window read-ahead keeps, not how the scheduler ran its workers.
func TestReadAheadPrefetchesAhead(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	const ahead = 4
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 4 << 10, CacheBytes: 1 << 20, ReadAheadChunks: ahead, ReadAheadRunChunks: 1, ReadAheadWorkers: ahead})
	ctx := context.Background()
	seg := &f.m.Segments[0]
	ix, err := r.segmentIndex(ctx, f.m.Prefix(), seg)
	if err != nil {
		t.Fatal(err)
	}
	if len(ix.chunks) < ahead+5 {
		t.Fatalf("segment 0 has %d chunks, too few for the test", len(ix.chunks))
	}
	// Two sequential reads, starting after the log start (so the first is
	// not taken for a replay), each reading a whole chunk (2, then 3).
	// Their own GETs go through; those from chunk 4 on wait.
	prefetched := func(g memGet) bool { return g.key == ix.logKey && g.off >= ix.chunks[4].start }
	release := f.store.holdWhere(prefetched)
	defer release()
	off := ix.chunks[1].next
	for range 2 {
		rs, err := r.Read(ctx, f.key, f.m, off, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		rs.Release()
		off = rs.NextOffset
	}
	// The reader is at chunk 3; chunks 4..3+ahead are queued, and all are
	// fetched at once: none of those GETs can end before the release.
	if q := r.Stats().ReadAheadQueued; q != ahead {
		t.Fatalf("%d prefetches queued, want %d", q, ahead)
	}
	readWaitFor(t, fmt.Sprintf("%d prefetch GETs under way together", ahead), func() bool { return f.store.countGets(prefetched) == ahead })
	for k := 4; k < 4+ahead; k++ {
		if !fetchedChunk(f.store, ix.logKey, ix.chunks[k].start) {
			t.Fatalf("chunk %d is not among the GETs under way", k)
		}
	}
	release()
	waitReadAheadIdle(t, r)
	if s := r.Stats().Cache; s.Prefetches != ahead {
		t.Fatalf("%d chunks prefetched, want %d", s.Prefetches, ahead)
	}
	if fetchedChunk(f.store, ix.logKey, ix.chunks[4+ahead].start) {
		t.Fatalf("chunk %d fetched: more than %d chunks ahead", 4+ahead, ahead)
	}

	// The rest of the replay, read-ahead done before each read: every
	// chunk is fetched once, by read-ahead, before the reader asks for it.
	before := r.Stats()
	reads := 0
	replayEach(t, r, f, off, 1<<20, func() {
		reads++
		waitReadAheadIdle(t, r)
	})
	after := r.Stats()
	if hits, joins, misses := after.Cache.Hits-before.Cache.Hits, after.Cache.InflightJoins-before.Cache.InflightJoins,
		after.Cache.Misses-before.Cache.Misses; hits != int64(reads) || joins != 0 || misses != 0 {
		t.Errorf("%d reads: %d hits, %d joins of read-ahead GETs, %d misses; want every read a hit", reads, hits, joins, misses)
	}
	if after.ReadAheadDropped != 0 || after.ReadAheadSkipped != 0 || after.ReadAheadFailed != 0 {
		t.Errorf("read-ahead dropped %d, skipped %d, failed %d; want none", after.ReadAheadDropped, after.ReadAheadSkipped, after.ReadAheadFailed)
	}
	chunks, gets := 0, 0
	for i := range f.m.Segments {
		ix, err := r.segmentIndex(ctx, f.m.Prefix(), &f.m.Segments[i])
		if err != nil {
			t.Fatal(err)
		}
		all := f.store.getsOf(ix.logKey)
		gets += len(all)
		for k, c := range ix.chunks {
			want := 1 // chunks 2 and 3 of segment 0 on demand, the rest by read-ahead
			if i == 0 && k < 2 {
				want = 0 // before the first read
			}
			chunks += want
			n := 0
			for _, g := range all {
				if g.off == c.start && g.len == c.end-c.start {
					n++
				}
			}
			if n != want {
				t.Errorf("segment %d chunk %d fetched %d times, want %d", i, k, n, want)
			}
		}
	}
	if gets != chunks {
		t.Errorf("%d GETs of .log objects for %d chunks", gets, chunks)
	}
	t.Logf("replay of %d chunks in %d reads", chunks, reads)
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
	ix, err := r.segmentIndex(ctx, f.m.Prefix(), &f.m.Segments[0])
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
	waitReadAheadIdle(t, r)
	if s := r.Stats(); s.ReadAheadQueued != 1 || s.Cache.Prefetches != run-1 {
		t.Fatalf("%d prefetches queued, %d chunks prefetched; want one job for the %d chunks of group 0 after chunk 0", s.ReadAheadQueued, s.Cache.Prefetches, run-1)
	}
	gets := f.store.getsOf(ix.logKey)
	if len(gets) != 2 || gets[1].off != ix.chunks[1].start || gets[1].len != ix.chunks[run-1].end-ix.chunks[1].start {
		t.Fatalf("GETs %+v; want chunk 0 alone, then chunks 1..%d in one GET [%d, %d)", gets, run-1, ix.chunks[1].start, ix.chunks[run-1].end)
	}

	// The whole replay: every chunk of every segment is fetched once, and
	// the GETs after the first of each segment are runs of up to `run`
	// chunks, aligned to groups.
	replay(t, r, f, rs.NextOffset, 1<<20)
	for i := range f.m.Segments {
		ix, err := r.segmentIndex(ctx, f.m.Prefix(), &f.m.Segments[i])
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
// their own. A reader is made to wait on the last chunk of a run that is
// held in the store until it does; then the run breaks.
func TestReadAheadRunFailure(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 4 << 10, CacheBytes: 1 << 20, ReadAheadChunks: 4, ReadAheadRunChunks: 4, ReadAheadWorkers: 1})
	ctx := context.Background()
	// GETs longer than any one chunk (runs of chunks this long) break off
	// after that many bytes, and wait until released; single-chunk GETs
	// go through.
	var longest int64
	for i := range f.m.Segments {
		ix, err := r.segmentIndex(ctx, f.m.Prefix(), &f.m.Segments[i])
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
	long := func(g memGet) bool { return g.len > longest }
	release := f.store.holdWhere(long)
	defer release()

	// A replay from the log start: its read of chunk 0 queues the next
	// groups of segment 0, one job each, for the one worker; the first
	// job whose run is longer than a chunk waits in the store.
	ix, err := r.segmentIndex(ctx, f.m.Prefix(), &f.m.Segments[0])
	if err != nil {
		t.Fatal(err)
	}
	rs, err := r.Read(ctx, f.key, f.m, f.m.LogStartOffset, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	rs.Release()
	readWaitFor(t, "a run longer than a chunk to be fetched (the fixture must have one in segment 0's first groups)", func() bool { return f.store.countGets(long) == 1 })
	var run memGet
	for _, g := range f.store.getsOf(ix.logKey) {
		if long(g) {
			run = g
		}
	}
	last := -1 // the run's last chunk, which it cannot deliver whole
	for k, c := range ix.chunks {
		if c.end == run.off+run.len {
			last = k
		}
	}
	if last < 0 {
		t.Fatalf("run GET [%d, +%d) does not end at a chunk end", run.off, run.len)
	}
	// A reader of that chunk joins the run's load, then the run breaks.
	joins := r.Stats().Cache.InflightJoins
	type result struct {
		rs  RemoteSlice
		err error
	}
	done := make(chan result, 1)
	lastOff := ix.chunks[last-1].next
	go func() {
		rs, err := r.Read(ctx, f.key, f.m, lastOff, 1<<20)
		done <- result{rs, err}
	}()
	readWaitFor(t, "the reader to wait for the run", func() bool { return r.Stats().Cache.InflightJoins == joins+1 })
	release()
	res := <-done
	if res.err != nil {
		t.Fatalf("read of chunk %d after its run broke: %v", last, res.err)
	}
	checkSlice(t, f, lastOff, 1<<20, res.rs)
	res.rs.Release()
	waitReadAheadIdle(t, r)
	if s := r.Stats(); s.Cache.LoadErrors == 0 || s.ReadAheadFailed == 0 {
		t.Fatalf("load errors %d, read-ahead failures %d; want the run to have failed", s.Cache.LoadErrors, s.ReadAheadFailed)
	}
	own := 0
	for _, g := range f.store.getsOf(ix.logKey) {
		if g.off == ix.chunks[last].start && g.len == ix.chunks[last].end-ix.chunks[last].start {
			own++
		}
	}
	if own != 1 {
		t.Fatalf("chunk %d fetched alone %d times, want once, by the reader after the run broke", last, own)
	}

	// A whole replay through broken runs returns the log.
	if got := replay(t, r, f, f.m.LogStartOffset, 1<<20); !bytes.Equal(got, f.allLogBytes()) {
		t.Fatalf("replay returned %d bytes, not the %d of the log", len(got), len(f.allLogBytes()))
	}
}

// TestReadAheadCrossesSegments: a sequential reader at the end of a
// segment gets the next segment's first chunks prefetched.
func TestReadAheadCrossesSegments(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 4 << 10, ReadAheadChunks: 2, ReadAheadRunChunks: 1})
	ctx := context.Background()
	ix, err := r.segmentIndex(ctx, f.m.Prefix(), &f.m.Segments[0])
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
	waitReadAheadIdle(t, r)
	next := &f.m.Segments[1]
	if n := f.store.getCount(next.ObjectName() + SuffixIndex); n != 1 {
		t.Fatalf("the next segment's index fetched %d times, want once", n)
	}
	ix1, err := r.segmentIndex(ctx, f.m.Prefix(), next)
	if err != nil {
		t.Fatal(err)
	}
	for k := range 2 {
		if !fetchedChunk(f.store, ix1.logKey, ix1.chunks[k].start) || !r.cache.contains(chunkKey{ix1.chunkID, k}) {
			t.Fatalf("chunk %d of the next segment not prefetched", k)
		}
	}
	if s := r.Stats(); s.ReadAheadQueued != 2 || s.Cache.Prefetches != 2 || fetchedChunk(f.store, ix1.logKey, ix1.chunks[2].start) {
		t.Fatalf("%d prefetches queued, %d chunks prefetched; want 2 with ReadAheadChunks 2", s.ReadAheadQueued, s.Cache.Prefetches)
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
// partitions waiting, reads of cached chunks return, every one a hit. The
// GETs hang until the test ends, so a read that waited for one would
// never return.
func TestRemoteReadNotBlockedBySlowGets(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 4 << 10, ReadAheadChunks: 4, ReadAheadRunChunks: 1, ReadAheadWorkers: 2})
	ctx := context.Background()
	read := func(off int64, maxBytes int) (RemoteSlice, error) {
		rs, err := r.Read(ctx, f.key, f.m, off, maxBytes)
		if err == nil {
			rs.Release()
		}
		return rs, err
	}
	// Warm the first two chunks of segments 1..6 without reading
	// sequentially (one batch from each chunk's start).
	segs := f.m.Segments[1:7]
	for i := range segs {
		ix, err := r.segmentIndex(ctx, f.m.Prefix(), &segs[i])
		if err != nil {
			t.Fatal(err)
		}
		for _, off := range []int64{segs[i].BaseOffset, ix.chunks[0].next} {
			if _, err := read(off, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	if q := r.Stats().ReadAheadQueued; q != 0 {
		t.Fatalf("warming queued %d prefetches", q)
	}
	// Other partitions whose first segment holds the same bytes.
	const others = 10
	otherManifests := make([]*Manifest, others)
	for p := range others {
		om := f.m.Clone()
		om.Topic, om.Partition = "other", int32(p)
		for _, suffix := range []string{SuffixLog, SuffixIndex, SuffixTimeIndex} {
			f.store.mu.Lock()
			b := f.store.objects[f.m.SegmentKey(&f.m.Segments[0], suffix)]
			f.store.mu.Unlock()
			f.store.put(om.SegmentKey(&om.Segments[0], suffix), b)
		}
		otherManifests[p] = om
	}
	release := f.store.hold()
	defer release()
	// Demand readers of other partitions, stuck on their GETs.
	stuckCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for p := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs, err := r.Read(stuckCtx, PartitionKey{Topic: "other", Partition: int32(p)}, otherManifests[p], 7, 1<<20)
			if err == nil {
				rs.Release()
			}
		}()
	}
	readWaitFor(t, "the other partitions' readers to wait in their GETs", func() bool {
		return f.store.countGets(func(g memGet) bool { return strings.HasPrefix(g.key, "other/") }) == others
	})
	// Sequential reads over the cached chunks: each queues read-ahead
	// that the stuck store holds, until the queue overflows.
	before := r.Stats().Cache
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			for i := range segs {
				rs, err := read(segs[i].BaseOffset, 1<<20) // the whole first chunk
				if err != nil {
					return err
				}
				if _, err := read(rs.NextOffset, 1<<20); err != nil { // continues: read-ahead
					return err
				}
			}
			for range 100 {
				if _, err := read(segs[0].BaseOffset, 1<<20); err != nil {
					return err
				}
			}
			return nil
		}()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("reads of cached chunks did not return while GETs hang")
	}
	after := r.Stats()
	if hits, misses, joins := after.Cache.Hits-before.Hits, after.Cache.Misses-before.Misses, after.Cache.InflightJoins-before.InflightJoins; hits != int64(2*len(segs)+100) || misses != 0 || joins != 0 {
		t.Fatalf("cached reads: %d hits, %d misses, %d joins; want all %d hits", hits, misses, joins, 2*len(segs)+100)
	}
	if after.ReadAheadDropped == 0 || after.ReadAheadQueued == 0 {
		t.Fatalf("read-ahead queued %d, dropped %d; want the queue to overflow", after.ReadAheadQueued, after.ReadAheadDropped)
	}
}
