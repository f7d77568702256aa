package tiering

import (
	"context"
	"fmt"
	"path"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/tiering/miniotest"
)

// TestSweeperAfterCrashMidUpload: an archiver uploads segment objects but
// its manifest commits never happen (it crashes before them). The
// restarted archiver uploads under new ids; the sweeper leaves the
// orphans alone during the grace period and deletes them after it, never
// touching a referenced or foreign object.
func TestSweeperAfterCrashMidUpload(t *testing.T) {
	base := newTestLocalStore(t)
	fs := &faultStore{ObjectStore: base}
	fs.setBefore(func(op, key string) error {
		if op == "put" && path.Base(key) == manifestName {
			return fmt.Errorf("%w: crash before the commit", ErrUnavailable)
		}
		return nil
	})
	tl := newTestLog(t, testSegBytes)
	tl.produce(60)
	crashed := newTestArchiver(t, tl, fs, nil)
	crashed.BecomeLeader(1)
	waitFor(t, 10*time.Second, "an upload without a commit", func() bool {
		objs, _ := base.List(testCtx(t), "")
		return len(objs) >= 8
	})
	if err := crashed.Close(); err != nil {
		t.Fatal(err)
	}
	tl.gate.Detach(crashed)
	if _, _, err := LoadManifest(testCtx(t), base, testTopic, testTopicID, testPartition); !IsNotFound(err) {
		t.Fatalf("a manifest was committed: %v", err)
	}
	orphans, err := base.List(testCtx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	// Foreign objects and an orphan of a partition without a manifest.
	mustPut(t, base, testPrefix+"README", []byte("keep me"), PutCondition{})
	mustPut(t, base, "events/7/00000000000000000000-1-deadbeef.log", []byte("orphan"), PutCondition{})
	mustPut(t, base, "events/7/notes.txt", []byte("keep me too"), PutCondition{})

	restarted := newTestArchiver(t, tl, base, nil)
	restarted.BecomeLeader(1)
	waitUploaded(t, restarted, tl.sealedEnd())
	m := restarted.Manifest()

	clock := newFakeMono()
	sw := &Sweeper{Store: base, Grace: time.Hour, Mono: clock.now}
	for range 2 { // first sight, then within the grace period
		if n, err := sw.SweepAll(testCtx(t)); err != nil || n != 0 {
			t.Fatalf("sweep within the grace period deleted %d: %v", n, err)
		}
		clock.advance(50 * time.Minute)
	}
	n, err := sw.SweepAll(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if n != len(orphans)+1 {
		t.Errorf("swept %d objects, want %d", n, len(orphans)+1)
	}
	for _, o := range orphans {
		if _, err := base.Stat(testCtx(t), o.Key); !IsNotFound(err) {
			t.Errorf("orphan %s survived: %v", o.Key, err)
		}
	}
	for i := range m.Segments {
		for _, k := range segmentKeys(testPrefix, &m.Segments[i]) {
			if _, err := base.Stat(testCtx(t), k); err != nil {
				t.Errorf("referenced %s: %v", k, err)
			}
		}
	}
	for _, k := range []string{testPrefix + "README", "events/7/notes.txt", ManifestKey(testTopic, testTopicID, testPartition)} {
		if _, err := base.Stat(testCtx(t), k); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
	checkAllRecords(t, tl, m, storeReader(base))
}

// fakeMono is a monotonic clock a test moves by hand.
type fakeMono struct{ t atomic.Int64 }

func newFakeMono() *fakeMono { return &fakeMono{} }

func (c *fakeMono) now() time.Duration      { return time.Duration(c.t.Load()) }
func (c *fakeMono) advance(d time.Duration) { c.t.Add(int64(d)) }

// TestArchiverNeverCommitsOldObjects: objects whose upload started longer
// than half the sweep grace ago by the monotonic clock are not committed
// (the sweeper may be deleting them), even though the wall clock, jumping
// back an hour at every reading, says no time passed at all.
func TestArchiverNeverCommitsOldObjects(t *testing.T) {
	s := newTestLocalStore(t)
	tl := newTestLog(t, testSegBytes)
	tl.produce(30)
	var wallTicks, monoTicks atomic.Int64
	start := time.Now()
	a := newTestArchiver(t, tl, s, func(c *ArchiverConfig) {
		c.Grace = time.Minute
		c.Now = func() time.Time { return start.Add(-time.Duration(wallTicks.Add(1)) * time.Hour) }
		c.Mono = func() time.Duration { return time.Duration(monoTicks.Add(1)) * time.Minute } // a minute per reading
	})
	a.BecomeLeader(1)
	refused := func() bool {
		l := a.Lag()
		return l.LastError != nil && strings.Contains(l.LastError.Error(), "grace")
	}
	waitFor(t, 20*time.Second, "an upload refused for its age", refused)
	waitSteps(t, a, 3) // the retries are refused too
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadManifest(testCtx(t), s, testTopic, testTopicID, testPartition); !IsNotFound(err) {
		t.Fatalf("committed: %v", err)
	}
	if !refused() {
		t.Fatalf("last error %v", a.Lag().LastError)
	}
}

// TestArchiverCommitsWhileWallClockJumps: a wall clock stepped by ten
// hours forward and back between readings changes nothing the archiver
// decides about the grace: every sealed segment is committed.
func TestArchiverCommitsWhileWallClockJumps(t *testing.T) {
	s := newTestLocalStore(t)
	tl := newTestLog(t, testSegBytes)
	tl.produce(40)
	var readings atomic.Int64
	a := newTestArchiver(t, tl, s, func(c *ArchiverConfig) {
		c.Grace = time.Minute
		c.Now = func() time.Time {
			if readings.Add(1)%2 == 0 {
				return time.Now().Add(10 * time.Hour)
			}
			return time.Now().Add(-10 * time.Hour)
		}
	})
	a.BecomeLeader(1)
	waitUploaded(t, a, tl.sealedEnd())
	checkAllRecords(t, tl, a.Manifest(), storeReader(s))
}

// skewStore reports object times shifted by skew, as a store whose clock
// differs from the broker's (or a broker whose clock was stepped) does.
type skewStore struct {
	ObjectStore
	skew time.Duration
}

func (s skewStore) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	objs, err := s.ObjectStore.List(ctx, prefix)
	for i := range objs {
		objs[i].ModTime = objs[i].ModTime.Add(s.skew)
	}
	return objs, err
}

func (s skewStore) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	o, err := s.ObjectStore.Stat(ctx, key)
	o.ModTime = o.ModTime.Add(s.skew)
	return o, err
}

func TestSweeperIgnoresStoreClockLocal(t *testing.T) {
	for _, skew := range []time.Duration{-10 * time.Hour, 10 * time.Hour} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			testSweeperIgnoresStoreClock(t, skewStore{newTestLocalStore(t), skew})
		})
	}
}

func TestSweeperIgnoresStoreClockMinIO(t *testing.T) {
	m := miniotest.Start(t)
	for _, skew := range []time.Duration{-10 * time.Hour, 10 * time.Hour} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			s, _ := newS3Store(t, m, nil)
			testSweeperIgnoresStoreClock(t, skewStore{s, skew})
		})
	}
}

// testSweeperIgnoresStoreClock: with object times hours off the broker's
// clock either way, the sweeper deletes nothing at first sight, keeps an
// upload in flight that commits within the grace period, keeps referenced
// and dropped segments, and deletes an orphan only once it has watched it
// unreferenced for the grace period on its monotonic clock.
func testSweeperIgnoresStoreClock(t *testing.T, store ObjectStore) {
	ctx := testCtx(t)
	seg := func(base int64, id string) RemoteSegment {
		return RemoteSegment{BaseOffset: base, NextOffset: base + 10, Size: 3, MaxTimestamp: -1, Epoch: 1, ID: id,
			LeaderEpochs: []segment.EpochEntry{{Epoch: 1, StartOffset: base}}}
	}
	m := NewManifest(testTopic, testTopicID, testPartition)
	m.LeaderEpoch = 1
	live, dropped, inflight, orphan := seg(0, "live"), seg(10, "dropped"), seg(10, "inflight"), seg(10, "orphan")
	m.Segments = []RemoteSegment{live}
	m.Dropped = []DroppedSegment{{RemoteSegment: dropped, DroppedAt: time.Now()}}
	for _, s := range []RemoteSegment{live, dropped, inflight, orphan} {
		for _, k := range m.SegmentKeys(&s) {
			mustPut(t, store, k, []byte("abc"), PutCondition{})
		}
	}
	etag, err := CommitManifest(ctx, store, m, "")
	if err != nil {
		t.Fatal(err)
	}
	exists := func(s RemoteSegment) bool {
		for _, k := range m.SegmentKeys(&s) {
			if _, err := store.Stat(ctx, k); err != nil {
				return false
			}
		}
		return true
	}
	clock := newFakeMono()
	sw := &Sweeper{Store: store, Grace: time.Hour, Mono: clock.now}
	sweep := func(want int) {
		t.Helper()
		if n, err := sw.SweepAll(ctx); err != nil || n != want {
			t.Fatalf("at %v: swept %d (%v), want %d", clock.now(), n, err, want)
		}
	}
	sweep(0)
	clock.advance(20 * time.Minute)
	// The upload in flight commits, within half the grace of its start.
	next := m.Clone()
	next.Segments = append(next.Segments, inflight)
	if _, err := CommitManifest(ctx, store, next, etag); err != nil {
		t.Fatal(err)
	}
	sweep(0)
	clock.advance(39 * time.Minute)
	sweep(0) // 59 minutes watched
	clock.advance(time.Minute)
	sweep(len(m.SegmentKeys(&orphan)))
	for name, s := range map[string]RemoteSegment{"live": live, "dropped": dropped, "committed in flight": inflight} {
		if !exists(s) {
			t.Errorf("%s segment deleted", name)
		}
	}
	if exists(orphan) {
		t.Error("orphan kept after the grace period")
	}
	sweep(0)
}

func TestSegmentObjectNames(t *testing.T) {
	for i, tc := range []struct {
		name string
		ok   bool
	}{
		{"00000000000000000000-1-ab12.log", true},
		{"00000000000000000100-0-ab12.index", true},
		{"00000000000000000100-7-AB12.timeindex", true},
		{"00000000000000000100-7-ab12.snapshot", true},
		{"manifest", false},
		{"0000000000000000100-7-ab12.log", false}, // 19 digits
		{"00000000000000000100-x-ab12.log", false},
		{"00000000000000000100-7-ab-12.log", false},
		{"00000000000000000100-7-.log", false},
		{"00000000000000000100-7-ab12.txt", false},
		{"README", false},
	} {
		if got := isSegmentObjectName(tc.name); got != tc.ok {
			t.Errorf("#%d: %q: got %v, want %v", i, tc.name, got, tc.ok)
		}
	}
}
