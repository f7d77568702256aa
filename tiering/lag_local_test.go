package tiering

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratastream/strata/segment"
)

// TestInspectLocalAgreesWithLog: InspectLocal, reading only the files,
// finds what the open log says of itself (log start, log end, segments,
// bytes) and the pending segments the archiver's Lag counts, before any
// upload and after a manifest that covers part of the log.
func TestInspectLocalAgreesWithLog(t *testing.T) {
	tl := newTestLog(t, testSegBytes)
	tl.produce(80)
	dir := tl.log.Dir()
	now := time.Now().Add(time.Minute)

	segs := tl.log.Segments()
	if len(segs) < 4 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	var bytes int64
	for _, s := range segs {
		bytes += s.Size
	}
	check := func(m *Manifest, wantPending int) LocalState {
		t.Helper()
		ls, err := InspectLocal(dir, m, now)
		if err != nil {
			t.Fatal(err)
		}
		if ls.LogStart != tl.log.LogStartOffset() || ls.LogEnd != tl.log.LogEndOffset() {
			t.Errorf("log start %d end %d, want %d %d", ls.LogStart, ls.LogEnd, tl.log.LogStartOffset(), tl.log.LogEndOffset())
		}
		if ls.Segments != len(segs) || ls.Bytes != bytes {
			t.Errorf("%d segments %d bytes, want %d %d", ls.Segments, ls.Bytes, len(segs), bytes)
		}
		if ls.SegmentsPending != wantPending {
			t.Errorf("pending %d, want %d", ls.SegmentsPending, wantPending)
		}
		if wantPending > 0 && (ls.BytesPending <= 0 || ls.OldestPending < time.Minute) {
			t.Errorf("pending %d bytes, oldest %v; want bytes and at least a minute", ls.BytesPending, ls.OldestPending)
		}
		if wantPending == 0 && (ls.BytesPending != 0 || ls.OldestPending != 0) {
			t.Errorf("nothing pending but %d bytes, oldest %v", ls.BytesPending, ls.OldestPending)
		}
		return ls
	}

	// No manifest: every sealed segment is pending.
	ls := check(nil, len(segs)-1)
	var sealedBytes int64
	for _, s := range segs[:len(segs)-1] {
		sealedBytes += s.Size
	}
	if ls.BytesPending != sealedBytes {
		t.Errorf("pending bytes %d, want %d", ls.BytesPending, sealedBytes)
	}

	// A manifest up to the end of the second segment: the others wait.
	m := &Manifest{Version: 1, Topic: testTopic, Partition: testPartition, LogStartOffset: 0,
		Segments: []RemoteSegment{{BaseOffset: 0, NextOffset: segs[1].NextOffset, Size: 1}}}
	check(m, len(segs)-3)

	// A manifest past every sealed segment: nothing pending.
	m.Segments[0].NextOffset = segs[len(segs)-2].NextOffset
	check(m, 0)

	// A torn tail (half a batch header) leaves the log end where it was.
	last := segs[len(segs)-1].LogPath
	f, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 30)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	ls, err = InspectLocal(dir, m, now)
	if err != nil || ls.LogEnd != tl.log.LogEndOffset() {
		t.Fatalf("after a torn tail: log end %d, %v; want %d", ls.LogEnd, err, tl.log.LogEndOffset())
	}
}

// TestInspectLocalLogStartCheckpoint: a log start moved inside the first
// segment (the checkpoint) is the local log start.
func TestInspectLocalLogStartCheckpoint(t *testing.T) {
	tl := newTestLog(t, testSegBytes)
	tl.produce(40)
	segs := tl.log.Segments()
	if err := tl.log.SetLogStartOffset(segs[0].NextOffset - 1); err != nil {
		t.Fatal(err)
	}
	if err := tl.log.Sync(); err != nil {
		t.Fatal(err)
	}
	ls, err := InspectLocal(tl.log.Dir(), nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// SetLogStartOffset writes the checkpoint before it returns.
	if _, ok, err := segment.ReadLogStartOffset(tl.log.Dir()); !ok || err != nil {
		t.Fatalf("no log-start checkpoint after SetLogStartOffset: %v", err)
	}
	if ls.LogStart != tl.log.LogStartOffset() {
		t.Fatalf("log start %d, want %d", ls.LogStart, tl.log.LogStartOffset())
	}
}

func TestInspectLocalMissingDir(t *testing.T) {
	_, err := InspectLocal(filepath.Join(t.TempDir(), "nope-0"), nil, time.Now())
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("got %v, want fs.ErrNotExist", err)
	}
	ls, err := InspectLocal(t.TempDir(), nil, time.Now())
	if err != nil || ls.Segments != 0 || ls.LogEnd != 0 {
		t.Fatalf("empty dir: %+v, %v", ls, err)
	}
}

// TestPartitionReadCounts: demand reads are counted per partition and add
// up to the cache's own counters.
func TestPartitionReadCounts(t *testing.T) {
	f := buildFixture(t, defaultFixtureOpts())
	r := newTestReader(t, f.store, ReaderConfig{ChunkBytes: 4 << 10, CacheBytes: 1 << 20})
	replay(t, r, f, f.m.LogStartOffset, 1000)
	replay(t, r, f, f.m.LogStartOffset, 1000) // all cached now
	pc := r.PartitionReadCounts()
	if len(pc) != 1 {
		t.Fatalf("%d partitions counted, want 1", len(pc))
	}
	got := pc[f.key]
	cs := r.Stats().Cache
	if got.Hits != cs.Hits || got.InflightJoins != cs.InflightJoins || got.Misses != cs.Misses {
		t.Fatalf("partition counts %+v, cache %+v", got, cs)
	}
	if got.Reads() == 0 || got.HitRatio() < 0.5 || got.HitRatio() > 1 {
		t.Fatalf("counts %+v: hit ratio %.2f, want at least half after a second replay", got, got.HitRatio())
	}
	if _, _, _, err := r.OffsetForTimestamp(context.Background(), f.key, f.m, 0); err != nil {
		t.Fatal(err)
	}
	if n := r.PartitionReadCounts()[f.key].Reads(); n <= got.Reads() {
		t.Fatalf("a timestamp lookup was not counted: %d reads, had %d", n, got.Reads())
	}
	r.ForgetPartition(f.key)
	if len(r.PartitionReadCounts()) != 0 {
		t.Fatal("ForgetPartition kept the counters")
	}
}

func TestReadCountsHitRatio(t *testing.T) {
	for i, tc := range []struct {
		c    ReadCounts
		want float64
	}{
		{ReadCounts{}, 0},
		{ReadCounts{Hits: 3, Misses: 1}, 0.75},
		{ReadCounts{Hits: 1, InflightJoins: 1, Misses: 2}, 0.5},
		{ReadCounts{Misses: 5}, 0},
	} {
		if got := tc.c.HitRatio(); got != tc.want {
			t.Errorf("#%d: got %v, want %v", i, got, tc.want)
		}
	}
}
