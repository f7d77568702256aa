package tiering

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stratastream/strata/segment"
)

// checkSlice checks one Read result against the fixture: it starts with
// the batch holding offset, holds whole batches byte-identical to the
// source, fits maxBytes unless it is a single batch, and NextOffset is
// where the next batch starts.
func checkSlice(t *testing.T, f *remoteFixture, offset int64, maxBytes int, rs RemoteSlice) {
	t.Helper()
	bi := f.batchFor(offset)
	first := f.batches[bi]
	if rs.FirstOffset != first.base {
		t.Fatalf("offset %d max %d: first offset %d, want %d", offset, maxBytes, rs.FirstOffset, first.base)
	}
	got, err := rs.Copy()
	if err != nil {
		t.Fatal(err)
	}
	src := f.logs[first.seg]
	if first.pos+rs.Size > int64(len(src)) || !bytes.Equal(got, src[first.pos:first.pos+rs.Size]) {
		t.Fatalf("offset %d max %d: %d bytes differ from the source at %d", offset, maxBytes, rs.Size, first.pos)
	}
	// Count whole batches.
	n, end := 0, first.pos
	for j := bi; j < len(f.batches) && f.batches[j].seg == first.seg && end < first.pos+rs.Size; j++ {
		end += f.batches[j].size
		n++
	}
	if end != first.pos+rs.Size {
		t.Fatalf("offset %d max %d: slice [%d, +%d) does not end on a batch boundary", offset, maxBytes, first.pos, rs.Size)
	}
	if n > 1 && rs.Size > int64(maxBytes) {
		t.Fatalf("offset %d max %d: %d batches, %d bytes exceed maxBytes", offset, maxBytes, n, rs.Size)
	}
	want := f.m.Segments[first.seg].NextOffset
	if j := bi + n; j < len(f.batches) && f.batches[j].seg == first.seg {
		want = f.batches[j].base
	}
	if rs.NextOffset != want {
		t.Fatalf("offset %d max %d: next offset %d, want %d", offset, maxBytes, rs.NextOffset, want)
	}
}

func TestRemoteReadEveryOffset(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 4 << 10, CacheBytes: 64 << 10})
	ctx := context.Background()
	for _, maxBytes := range []int{0, 1, 700, 3000, 1 << 20} {
		for off := f.m.LogStartOffset; off < f.m.EndOffset(); off++ {
			rs, err := r.Read(ctx, f.key, f.m, off, maxBytes)
			if err != nil {
				t.Fatalf("read at %d max %d: %v", off, maxBytes, err)
			}
			checkSlice(t, f, off, maxBytes, rs)
			rs.Release()
		}
	}
	if s := r.Stats().Cache; s.Pinned != 0 {
		t.Fatalf("%d chunks still pinned after every slice was released", s.Pinned)
	}
}

// TestRemoteReplay reads the whole remote log sequentially and gets it back
// byte for byte, for several read sizes and chunk sizes.
func TestRemoteReplay(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	want := f.allLogBytes()
	for _, chunk := range []int64{1 << 10, 4 << 10, 64 << 10} {
		for _, maxBytes := range []int{1, 1000, 1 << 20} {
			t.Run(fmt.Sprintf("chunk=%d/max=%d", chunk, maxBytes), func(t *testing.T) {
				r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: chunk, CacheBytes: 32 << 10})
				if got := replay(t, r, f, f.m.LogStartOffset, maxBytes); !bytes.Equal(got, want) {
					t.Fatalf("replay: %d bytes, want %d identical to the source", len(got), len(want))
				}
			})
		}
	}
}

// TestRemoteReadLogStartInsideSegment: the remote log start may fall inside
// the first segment; reads from it start with the batch holding it.
func TestRemoteReadLogStartInsideSegment(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	m := *f.m
	m.LogStartOffset = f.m.Segments[0].NextOffset - 7
	f.m = &m
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 4 << 10})
	rs, err := r.Read(context.Background(), f.key, f.m, m.LogStartOffset, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	checkSlice(t, f, m.LogStartOffset, 1<<20, rs)
	rs.Release()
	if _, err := r.Read(context.Background(), f.key, f.m, m.LogStartOffset-1, 1<<20); !errors.Is(err, ErrRemoteOffsetOutOfRange) {
		t.Fatalf("read below the log start: %v, want ErrRemoteOffsetOutOfRange", err)
	}
}

// TestRemoteChunkTable: chunks cover the object, start on batch boundaries
// and carry the next batch's base offset, so no batch straddles chunks.
func TestRemoteChunkTable(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 2 << 10})
	starts := map[[2]int64]int64{} // (seg, pos) -> base offset
	for _, b := range f.batches {
		starts[[2]int64{int64(b.seg), b.pos}] = b.base
	}
	straddlers := 0
	for si := range f.m.Segments {
		ix, err := r.segmentIndex(context.Background(), f.m.Prefix(), &f.m.Segments[si])
		if err != nil {
			t.Fatal(err)
		}
		at := int64(0)
		for k, c := range ix.chunks {
			if c.start != at || c.end <= c.start {
				t.Fatalf("seg %d chunk %d: [%d, %d), want start %d", si, k, c.start, c.end, at)
			}
			if c.end < ix.size {
				base, ok := starts[[2]int64{int64(si), c.end}]
				if !ok || base != c.next {
					t.Fatalf("seg %d chunk %d ends at %d: batch start %v with base %d, chunk says next %d", si, k, c.end, ok, base, c.next)
				}
			} else if c.next != f.m.Segments[si].NextOffset {
				t.Fatalf("seg %d last chunk next %d, want %d", si, c.next, f.m.Segments[si].NextOffset)
			}
			at = c.end
		}
		if at != f.m.Segments[si].Size {
			t.Fatalf("seg %d chunks end at %d, object is %d bytes", si, at, f.m.Segments[si].Size)
		}
		// Batches that a fixed 2 KiB grid would have cut in two.
		for _, b := range f.batches {
			if b.seg == si && b.pos/(2<<10) != (b.pos+b.size-1)/(2<<10) {
				straddlers++
			}
		}
	}
	if straddlers == 0 {
		t.Fatal("fixture has no batch crossing a 2 KiB boundary; the test proves nothing")
	}
}

// TestRemoteReadStraddlingBatches reads, with small chunks, every batch
// that crosses a fixed chunk-size boundary of its object, and batches
// larger than a chunk: each comes back whole.
func TestRemoteReadStraddlingBatches(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	const chunk = 2 << 10
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: chunk})
	big, crossing := 0, 0
	for _, b := range f.batches {
		if b.pos/chunk == (b.pos+b.size-1)/chunk {
			continue
		}
		crossing++
		if b.size > chunk {
			big++
		}
		for _, off := range []int64{b.base, b.last} {
			rs, err := r.Read(context.Background(), f.key, f.m, off, 1)
			if err != nil {
				t.Fatal(err)
			}
			if rs.Size != b.size {
				t.Fatalf("offset %d: %d bytes, want the whole %d-byte batch", off, rs.Size, b.size)
			}
			checkSlice(t, f, off, 1, rs)
			rs.Release()
		}
	}
	if big == 0 || crossing == 0 {
		t.Fatalf("fixture has %d crossing and %d larger-than-chunk batches; want some of each", crossing, big)
	}
}

func TestRemoteReadMaxBytes(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 64 << 10})
	ctx := context.Background()
	var big fixtureBatch
	for _, b := range f.batches {
		if b.size > 3000 {
			big = b
			break
		}
	}
	for i, tc := range []struct {
		offset   int64
		maxBytes int
		want     int64 // bytes
	}{
		{f.batches[0].base, 0, f.batches[0].size},                          // at least one batch
		{f.batches[0].base, -5, f.batches[0].size},                         // negative is zero
		{f.batches[0].base, int(f.batches[0].size) - 1, f.batches[0].size}, // one batch however large
		{f.batches[0].base, int(f.batches[0].size+f.batches[1].size) - 1, f.batches[0].size},
		{f.batches[0].base, int(f.batches[0].size + f.batches[1].size), f.batches[0].size + f.batches[1].size},
		{big.last, 100, big.size},
	} {
		rs, err := r.Read(ctx, f.key, f.m, tc.offset, tc.maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		if rs.Size != tc.want {
			t.Errorf("#%d: offset %d max %d: got %d bytes, want %d", i, tc.offset, tc.maxBytes, rs.Size, tc.want)
		}
		rs.Release()
	}
	// A large maxBytes stays within the segment.
	rs, err := r.Read(ctx, f.key, f.m, f.m.Segments[1].BaseOffset, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Release()
	if rs.NextOffset > f.m.Segments[1].NextOffset {
		t.Fatalf("read crossed into the next segment: next %d > %d", rs.NextOffset, f.m.Segments[1].NextOffset)
	}
}

func TestRemoteReadOutOfRange(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	r := newTestReader(t, f.store, ReaderConfig{})
	ctx := context.Background()
	gap := *f.m
	gap.Segments = append(append([]RemoteSegment(nil), f.m.Segments[:1]...), f.m.Segments[2:]...)
	raised := *f.m
	raised.LogStartOffset = f.m.Segments[1].BaseOffset + 3
	for i, tc := range []struct {
		m      *Manifest
		offset int64
	}{
		{f.m, -1},
		{f.m, f.m.EndOffset()},
		{f.m, f.m.EndOffset() + 100},
		{&raised, raised.LogStartOffset - 1},
		{&raised, f.m.Segments[0].BaseOffset},
		{&gap, f.m.Segments[1].BaseOffset},
		{&Manifest{LogStartOffset: 10}, 10},
		{nil, 0},
	} {
		rs, err := r.Read(ctx, f.key, tc.m, tc.offset, 1<<20)
		if !errors.Is(err, ErrRemoteOffsetOutOfRange) {
			rs.Release()
			t.Errorf("#%d: offset %d: got %v, want ErrRemoteOffsetOutOfRange", i, tc.offset, err)
		}
	}
	// The last offset is in range.
	rs, err := r.Read(ctx, f.key, f.m, f.m.EndOffset()-1, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	rs.Release()
}

func TestRemoteReadCorruptObject(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	key := f.logKey(1)
	b := bytes.Clone(f.logs[1])
	b[len(b)/2] ^= 0x40
	f.store.put(key, b)
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 1 << 20})
	_, err := r.Read(context.Background(), f.key, f.m, f.m.Segments[1].BaseOffset, 1<<20)
	if !segment.IsCorrupt(err) {
		t.Fatalf("read of a corrupt object: %v, want a corruption error", err)
	}
	if s := r.Stats().Cache; s.Chunks != 0 || s.Bytes != 0 {
		t.Fatalf("a corrupt chunk was cached: %+v", s)
	}
	// A truncated object is reported too.
	f.store.put(key, f.logs[1][:len(f.logs[1])-10])
	if _, err := r.Read(context.Background(), f.key, f.m, f.m.Segments[1].BaseOffset, 1<<20); !segment.IsCorrupt(err) {
		t.Fatalf("read of a truncated object: %v, want a corruption error", err)
	}
	// Other segments read fine.
	rs, err := r.Read(context.Background(), f.key, f.m, f.m.Segments[0].BaseOffset, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	rs.Release()
}

func TestRemoteReadMissingObjects(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 4 << 10})
	ctx := context.Background()
	if err := f.store.Delete(ctx, f.logKey(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(ctx, f.key, f.m, f.m.Segments[1].BaseOffset, 1<<20); !IsNotFound(err) {
		t.Fatalf("read of a deleted object: %v, want not found", err)
	}
	// Without its .index a segment is read as one chunk, still correctly.
	if err := f.store.Delete(ctx, f.m.SegmentKey(&f.m.Segments[2], SuffixIndex)); err != nil {
		t.Fatal(err)
	}
	for off := f.m.Segments[2].BaseOffset; off < f.m.Segments[2].NextOffset; off++ {
		rs, err := r.Read(ctx, f.key, f.m, off, 1000)
		if err != nil {
			t.Fatal(err)
		}
		checkSlice(t, f, off, 1000, rs)
		rs.Release()
	}
}

// TestRemoteReadCompactedTail: offsets after the last batch of a segment
// (as compaction leaves them) continue in the next segment, or give an
// empty slice at the end of the remote log.
func TestRemoteReadCompactedTail(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	m := *f.m
	m.Segments = append([]RemoteSegment(nil), f.m.Segments...)
	// Drop the last batch of segments 0 and of the last segment from their
	// objects, keeping the segments' offset ranges, as compaction would.
	var lastOf [2]fixtureBatch
	lastSeg := len(m.Segments) - 1
	for _, b := range f.batches {
		switch b.seg {
		case 0:
			lastOf[0] = b
		case lastSeg:
			lastOf[1] = b
		}
	}
	for i, si := range []int{0, lastSeg} {
		m.Segments[si].Size = lastOf[i].pos
		f.store.put(f.logKey(si), f.logs[si][:lastOf[i].pos])
	}
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 4 << 10})
	ctx := context.Background()
	rs, err := r.Read(ctx, f.key, &m, lastOf[0].base+1, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if rs.FirstOffset != m.Segments[1].BaseOffset {
		t.Fatalf("read in the gap: first offset %d, want the next segment's first batch %d", rs.FirstOffset, m.Segments[1].BaseOffset)
	}
	rs.Release()
	rs, err = r.Read(ctx, f.key, &m, lastOf[1].base, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if rs.Size != 0 || rs.NextOffset != m.EndOffset() {
		t.Fatalf("read past the last batch: %d bytes, next %d; want empty, next %d", rs.Size, rs.NextOffset, m.EndOffset())
	}
	rs.Release()
	// The batch before the gap ends its segment's object: next offset is
	// the segment's NextOffset.
	rs, err = r.Read(ctx, f.key, &m, lastOf[0].base-1, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if rs.NextOffset != m.Segments[0].NextOffset {
		t.Fatalf("read before the gap: next %d, want %d", rs.NextOffset, m.Segments[0].NextOffset)
	}
	rs.Release()
}

// wantOffsetForTimestamp is the brute-force answer: the first record at or
// above start whose timestamp is >= ts.
func (f *remoteFixture) wantOffsetForTimestamp(start, ts int64) (int64, int64, bool) {
	for _, r := range f.records {
		if r.offset >= start && r.ts >= ts {
			return r.offset, r.ts, true
		}
	}
	return f.m.EndOffset(), -1, false
}

func TestRemoteOffsetForTimestamp(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 4 << 10})
	ctx := context.Background()
	lo, hi := f.records[0].ts, f.records[0].ts
	for _, rec := range f.records {
		lo, hi = min(lo, rec.ts), max(hi, rec.ts)
	}
	for _, start := range []int64{f.m.LogStartOffset, f.m.Segments[1].BaseOffset + 11} {
		m := *f.m
		m.LogStartOffset = start
		for ts := lo - 10; ts <= hi+10; ts += 7 {
			off, got, ok, err := r.OffsetForTimestamp(ctx, f.key, &m, ts)
			if err != nil {
				t.Fatal(err)
			}
			wo, wt, wok := f.wantOffsetForTimestamp(start, ts)
			if off != wo || got != wt || ok != wok {
				t.Fatalf("start %d ts %d: got (%d, %d, %v), want (%d, %d, %v)", start, ts, off, got, ok, wo, wt, wok)
			}
		}
	}
}

// TestRemoteReadConcurrent replays the log from many goroutines at once
// through a cache smaller than the log, with read-ahead, and checks every
// byte (run with -race).
func TestRemoteReadConcurrent(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	want := f.allLogBytes()
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 4 << 10, CacheBytes: 40 << 10, ReadAheadChunks: 3, ReadAheadWorkers: 4})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from := f.batches[g*len(f.batches)/8].base
			if g%2 == 0 {
				from = f.m.LogStartOffset
			}
			var got []byte
			for off := from; off < f.m.EndOffset(); {
				rs, err := r.Read(context.Background(), f.key, f.m, off, 500*(g+1))
				if err != nil {
					t.Errorf("goroutine %d read at %d: %v", g, off, err)
					return
				}
				b, err := rs.Copy()
				rs.Release()
				if err != nil {
					t.Error(err)
					return
				}
				got = append(got, b...)
				off = rs.NextOffset
			}
			bi := f.batchFor(from)
			skip := int64(0)
			for _, b := range f.batches[:bi] {
				skip += b.size
			}
			if !bytes.Equal(got, want[skip:]) {
				t.Errorf("goroutine %d: replay from %d differs from the source", g, from)
			}
		}()
	}
	wg.Wait()
	// A prefetch may still be loading a chunk (pinned for its load) that
	// the readers had passed; once read-ahead is done nothing is pinned.
	waitReadAheadIdle(t, r)
	if s := r.Stats().Cache; s.Pinned != 0 || s.Bytes > s.CapacityBytes {
		t.Fatalf("after the readers: %+v", s)
	}
}

// TestRemoteReadLocalStore replays through the local-directory store.
func TestRemoteReadLocalStore(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	local, err := NewLocalStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	objects, err := f.store.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, oi := range objects {
		rc, err := f.store.Get(ctx, oi.Key, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		_, err = local.Put(ctx, oi.Key, rc, oi.Size, PutCondition{})
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	r := newTestReader(t, local, ReaderConfig{ChunkBytes: 8 << 10, CacheBytes: 64 << 10})
	if got := replay(t, r, f, f.m.LogStartOffset, 5000); !bytes.Equal(got, f.allLogBytes()) {
		t.Fatal("replay through the local store differs from the source")
	}
}

// batchesBelow is every fixture batch whose base offset is below end,
// from offset from on, concatenated.
func (f *remoteFixture) batchesBelow(from, end int64) []byte {
	var out []byte
	for _, b := range f.batches {
		if b.last >= from && b.base < end {
			out = append(out, f.logs[b.seg][b.pos:b.pos+b.size]...)
		}
	}
	return out
}

// replayBelow reads m with ReadBelow from offset from up to end and
// returns the bytes, failing on any batch at or past end.
func replayBelow(t *testing.T, r *RemoteReader, f *remoteFixture, m *Manifest, from, end int64, maxBytes int) []byte {
	t.Helper()
	var out []byte
	for off := from; off < end; {
		rs, err := r.ReadBelow(context.Background(), f.key, m, off, end, maxBytes)
		if err != nil {
			t.Fatalf("read below %d at %d: %v", end, off, err)
		}
		b, err := rs.Copy()
		rs.Release()
		if err != nil {
			t.Fatal(err)
		}
		if err := segment.SplitBatches(b, func(h segment.Header, _ []byte) error {
			if h.BaseOffset >= end {
				return fmt.Errorf("read below %d at %d returned the batch at %d", end, off, h.BaseOffset)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if rs.NextOffset <= off {
			t.Fatalf("read below %d at %d: next offset %d does not advance", end, off, rs.NextOffset)
		}
		out = append(out, b...)
		off = rs.NextOffset
	}
	return out
}

// TestRemoteReadBelow: reads bounded by an offset (the broker's local log
// start) return every batch below it and none at or past it, at any
// bound, batch boundary or not, with read-ahead and a large maxBytes that
// would reach further.
func TestRemoteReadBelow(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 8 << 10})
	ends := []int64{f.batches[1].base, f.batches[len(f.batches)/2].base, f.batches[len(f.batches)/2].base + 1, f.m.EndOffset() - 1}
	for _, end := range ends {
		for _, from := range []int64{0, end - 1} {
			got := replayBelow(t, r, f, f.m, from, end, 1<<20)
			if want := f.batchesBelow(from, end); !bytes.Equal(got, want) {
				t.Fatalf("below %d from %d: %d bytes, want %d", end, from, len(got), len(want))
			}
		}
	}
	if _, err := r.ReadBelow(context.Background(), f.key, f.m, 10, 10, 1<<20); !errors.Is(err, ErrRemoteOffsetOutOfRange) {
		t.Fatalf("read at the bound: %v", err)
	}
}

// TestRemoteReadCutSegment: a manifest entry cut at a batch boundary inside
// its object (as after an unclean election) is read up to its NextOffset
// and never beyond, also after the reader cached the object's index for
// the uncut entry.
func TestRemoteReadCutSegment(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 8 << 10})
	// A batch boundary in the middle of segment 1.
	var d int64
	for _, b := range f.batches {
		if b.seg == 1 && b.pos > f.m.Segments[1].Size/2 {
			d = b.base
			break
		}
	}
	replay(t, r, f, 0, 1<<20) // caches the uncut indexes
	cut := f.m.Clone()
	cutAt(cut, d)
	if err := cut.Validate(); err != nil {
		t.Fatal(err)
	}
	got := replayBelow(t, r, f, cut, 0, cut.EndOffset(), 1<<20)
	if want := f.batchesBelow(0, d); !bytes.Equal(got, want) {
		t.Fatalf("cut at %d: %d bytes, want %d", d, len(got), len(want))
	}
	if _, _, ok, err := r.OffsetForTimestamp(context.Background(), f.key, cut, f.records[len(f.records)-1].ts); err != nil || ok {
		t.Fatalf("a timestamp only past the cut found: %v, %v", ok, err)
	}
}
