package tiering

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestExpiredSegments(t *testing.T) {
	now := time.UnixMilli(10_000)
	m := testManifest(4) // sizes 4096 each, max timestamps 1100, 1200, 1300, 1400
	for i, tc := range []struct {
		r         RemoteRetention
		localOnly int64
		want      int
	}{
		{RemoteRetention{Ms: -1, Bytes: -1}, 0, 0},
		{RemoteRetention{}, 0, 0},
		{RemoteRetention{Ms: 8750, Bytes: -1}, 0, 2},   // older than 1250
		{RemoteRetention{Ms: 100, Bytes: -1}, 0, 4},    // all
		{RemoteRetention{Ms: -1, Bytes: 8192}, 0, 2},   // 16384 total
		{RemoteRetention{Ms: -1, Bytes: 8192}, 100, 2}, // 16484: dropping a third leaves 8292-4096 < 8192
		{RemoteRetention{Ms: -1, Bytes: 8000}, 4096, 3},
		{RemoteRetention{Ms: -1, Bytes: 1}, 0, 3}, // the last one keeps the log at or above 1 byte
		{RemoteRetention{Ms: 8750, Bytes: 12288}, 0, 2},
	} {
		if got := expiredSegments(m, tc.localOnly, now, tc.r); got != tc.want {
			t.Errorf("#%d: got %d, want %d", i, got, tc.want)
		}
	}
}

// waitPurged waits until a's manifest lists no dropped segment: their
// objects are deleted.
func waitPurged(t *testing.T, a *Archiver) {
	t.Helper()
	waitFor(t, 10*time.Second, "the objects of dropped segments deleted", func() bool { return len(a.Manifest().Dropped) == 0 })
}

// TestRemoteRetention: total retention drops the oldest remote segments
// (manifest first, objects after) and moves the remote log start; a
// requested log start (DeleteRecords) does the same; uploads go on.
func TestRemoteRetention(t *testing.T) {
	s := newTestLocalStore(t)
	tl := newTestLog(t, testSegBytes)
	tl.produce(120)
	var reported atomic.Int64
	a := newTestArchiver(t, tl, s, func(c *ArchiverConfig) {
		c.OnLogStartOffset = func(off int64) { reported.Store(off) }
	})
	a.BecomeLeader(1)
	waitUploaded(t, a, tl.sealedEnd())
	full := a.Manifest()

	// By size: keep about half of the log.
	local := localBytesBeyond(tl.log.Segments(), full.EndOffset())
	a.SetRetention(RemoteRetention{Ms: -1, Bytes: (full.Bytes() + local) / 2})
	waitFor(t, 10*time.Second, "retention by size", func() bool {
		return a.Manifest().LogStartOffset > 0 && reported.Load() == a.Manifest().LogStartOffset
	})
	waitPurged(t, a)
	m := a.Manifest()
	dropped := len(full.Segments) - len(m.Segments)
	if dropped < 3 || m.LogStartOffset != full.Segments[dropped].BaseOffset || reported.Load() != m.LogStartOffset {
		t.Fatalf("dropped %d segments, log start %d, reported %d", dropped, m.LogStartOffset, reported.Load())
	}
	for i := range full.Segments[:dropped] {
		for _, k := range segmentKeys(testPrefix, &full.Segments[i]) {
			if _, err := s.Stat(testCtx(t), k); !IsNotFound(err) {
				t.Errorf("object %s of a dropped segment: %v", k, err)
			}
		}
	}
	stored, _, err := LoadManifest(testCtx(t), s, testTopic, testTopicID, testPartition)
	if err != nil || stored.LogStartOffset != m.LogStartOffset {
		t.Fatalf("stored manifest: %v", err)
	}

	// DeleteRecords inside a segment.
	target := m.Segments[1].BaseOffset + 3
	a.SetRetention(RemoteRetention{Ms: -1, Bytes: -1})
	a.SetLogStartOffset(target)
	waitFor(t, 10*time.Second, "requested log start", func() bool {
		return a.Manifest().LogStartOffset == target && reported.Load() == target
	})
	if m := a.Manifest(); m.Segments[0].BaseOffset != target-3 || reported.Load() != target {
		t.Fatalf("first segment %d, reported %d", m.Segments[0].BaseOffset, reported.Load())
	}

	// By time: everything is older than a millisecond; the remote log
	// empties and starts at its end, and new segments continue it.
	a.SetRetention(RemoteRetention{Ms: 1, Bytes: -1})
	end := a.Manifest().EndOffset()
	waitFor(t, 10*time.Second, "retention by time", func() bool { return len(a.Manifest().Segments) == 0 })
	if m := a.Manifest(); m.LogStartOffset != end {
		t.Fatalf("empty manifest starts at %d, want %d", m.LogStartOffset, end)
	}
	a.SetRetention(RemoteRetention{Ms: -1, Bytes: -1})
	tl.produce(40)
	waitUploaded(t, a, tl.sealedEnd())
	if m := a.Manifest(); m.LogStartOffset != end || m.Segments[0].BaseOffset != end {
		t.Fatalf("after new uploads: start %d, first %d, want %d", m.LogStartOffset, m.Segments[0].BaseOffset, end)
	}
}

// TestTieringToggle: turning tiering off stops the archiver and leaves the
// remote data readable; local retention then deletes unuploaded data.
// Turned back on, the archiver finds the gap and restarts the remote log
// after it, dropping the remote segments below it.
func TestTieringToggle(t *testing.T) {
	s := newTestLocalStore(t)
	tl := newTestLog(t, testSegBytes)
	tl.produce(60)
	a := newTestArchiver(t, tl, s, nil)
	a.BecomeLeader(1)
	waitUploaded(t, a, tl.sealedEnd())
	before := a.Manifest()

	// remote.storage.enable=false
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	tl.gate.Detach(a)
	tl.gate.SetTiered(false)
	stored, _, err := LoadManifest(testCtx(t), s, testTopic, testTopicID, testPartition)
	if err != nil || stored.EndOffset() != before.EndOffset() {
		t.Fatalf("remote data after disabling: %v", err)
	}
	checkAllRecords(t, tl, stored, storeReader(s))
	tl.produce(60)
	if _, err := tl.log.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	localStart := tl.log.LogStartOffset()
	if localStart <= before.EndOffset() {
		t.Fatalf("local start %d not beyond the remote end %d", localStart, before.EndOffset())
	}

	// remote.storage.enable=true again
	tl.gate.SetTiered(true)
	tl.produce(30) // seal some segments past the gap
	b := newTestArchiver(t, tl, s, nil)
	b.BecomeLeader(1)
	waitUploaded(t, b, tl.sealedEnd())
	waitPurged(t, b)
	m := b.Manifest()
	if m.LogStartOffset != localStart || m.Segments[0].BaseOffset != localStart {
		t.Fatalf("remote log restarts at %d (first segment %d of %d), want %d; before: end %d", m.LogStartOffset, m.Segments[0].BaseOffset, len(m.Segments), localStart, before.EndOffset())
	}
	for i := range before.Segments {
		if _, err := s.Stat(testCtx(t), testSegKey(&before.Segments[i], SuffixLog)); !IsNotFound(err) {
			t.Errorf("segment %d below the gap kept: %v", before.Segments[i].BaseOffset, err)
		}
	}
}

func TestDeletePartition(t *testing.T) {
	s := newTestLocalStore(t)
	tl := newTestLog(t, testSegBytes)
	tl.produce(40)
	a := newTestArchiver(t, tl, s, nil)
	a.BecomeLeader(1)
	waitUploaded(t, a, tl.sealedEnd())
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "events/10/manifest", []byte("another partition"), PutCondition{})
	if err := DeletePartition(testCtx(t), s, testTopic, testTopicID, testPartition); err != nil {
		t.Fatal(err)
	}
	if objs, _ := s.List(testCtx(t), testPrefix); len(objs) != 0 {
		t.Fatalf("%d objects left", len(objs))
	}
	if _, err := s.Stat(testCtx(t), "events/10/manifest"); err != nil {
		t.Fatalf("another partition's data: %v", err)
	}
	if err := DeletePartition(testCtx(t), s, testTopic, testTopicID, testPartition); err != nil {
		t.Fatalf("second delete: %v", err)
	}
}

// TestDroppedSegmentsReadableForDeleteDelay: segments that remote
// retention (here DeleteRecords) removes from the manifest keep their
// objects for the delete delay, measured on the leader's monotonic clock:
// a reader that resolved the old manifest reads them meanwhile, the
// sweeper counts them as referenced, and only after the delay are they
// deleted and their entries gone.
func TestDroppedSegmentsReadableForDeleteDelay(t *testing.T) {
	ctx := testCtx(t)
	s := newTestLocalStore(t)
	tl := newTestLog(t, testSegBytes)
	tl.produce(80)
	clock := newFakeMono()
	a := newTestArchiver(t, tl, s, func(c *ArchiverConfig) {
		c.Mono = clock.now
		c.Retention.DeleteDelay = time.Minute
	})
	a.BecomeLeader(1)
	waitUploaded(t, a, tl.sealedEnd())
	old := a.Manifest()
	start := old.Segments[3].BaseOffset
	a.SetLogStartOffset(start)
	waitFor(t, 10*time.Second, "the remote log start moved", func() bool { return a.Manifest().LogStartOffset == start })
	waitSteps(t, a, 3)
	cur := a.Manifest()
	if len(cur.Dropped) != 3 {
		t.Fatalf("%d dropped segments listed, want 3", len(cur.Dropped))
	}

	// A reader with the old manifest reads what was dropped; the new
	// manifest no longer offers it.
	r := newTestReader(t, s, ReaderConfig{ReadAheadChunks: -1})
	key := PartitionKey{Topic: testTopic, Partition: testPartition}
	for off := int64(0); off < start; {
		rs, err := r.Read(ctx, key, old, off, 1<<20)
		if err != nil {
			t.Fatalf("read of a dropped segment at %d with the old manifest: %v", off, err)
		}
		rs.Release()
		off = rs.NextOffset
	}
	if _, err := r.Read(ctx, key, cur, 0, 1<<20); !errors.Is(err, ErrRemoteOffsetOutOfRange) {
		t.Fatalf("read below the new log start: %v", err)
	}
	sweeps := newFakeMono()
	sw := &Sweeper{Store: s, Grace: time.Second, Mono: sweeps.now}
	for range 2 {
		if n, err := sw.SweepAll(ctx); n != 0 || err != nil {
			t.Fatalf("sweep: %d, %v; dropped segments are referenced", n, err)
		}
		sweeps.advance(time.Hour)
	}

	// After the delay.
	clock.advance(time.Minute)
	waitPurged(t, a)
	for i := range old.Segments[:3] {
		if _, err := s.Stat(ctx, old.SegmentKey(&old.Segments[i], SuffixLog)); !IsNotFound(err) {
			t.Errorf("segment %d kept after the delete delay: %v", old.Segments[i].BaseOffset, err)
		}
	}
	r2 := newTestReader(t, s, ReaderConfig{ReadAheadChunks: -1})
	if _, err := r2.Read(ctx, key, old, 0, 1<<20); !IsNotFound(err) {
		t.Fatalf("read with the old manifest after the delete delay: %v, want not found", err)
	}
	checkAllRecords(t, tl, a.Manifest(), storeReader(s))
}
