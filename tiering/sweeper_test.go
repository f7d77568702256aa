package tiering

import (
	"fmt"
	"path"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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
	if _, _, err := LoadManifest(testCtx(t), base, testTopic, testPartition); !IsNotFound(err) {
		t.Fatalf("a manifest was committed: %v", err)
	}
	orphans, err := base.List(testCtx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	// Foreign objects and an orphan of a partition without a manifest.
	mustPut(t, base, PartitionPrefix(testTopic, testPartition)+"README", []byte("keep me"), PutCondition{})
	mustPut(t, base, "events/7/00000000000000000000-1-deadbeef.log", []byte("orphan"), PutCondition{})
	mustPut(t, base, "events/7/notes.txt", []byte("keep me too"), PutCondition{})

	restarted := newTestArchiver(t, tl, base, nil)
	restarted.BecomeLeader(1)
	waitUploaded(t, restarted, tl.sealedEnd())
	m := restarted.Manifest()

	sw := &Sweeper{Store: base, Grace: time.Hour}
	if n, err := sw.SweepAll(testCtx(t)); err != nil || n != 0 {
		t.Fatalf("sweep within the grace period deleted %d: %v", n, err)
	}
	sw.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
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
		for _, k := range SegmentKeys(testTopic, testPartition, &m.Segments[i]) {
			if _, err := base.Stat(testCtx(t), k); err != nil {
				t.Errorf("referenced %s: %v", k, err)
			}
		}
	}
	for _, k := range []string{PartitionPrefix(testTopic, testPartition) + "README", "events/7/notes.txt", ManifestKey(testTopic, testPartition)} {
		if _, err := base.Stat(testCtx(t), k); err != nil {
			t.Errorf("%s: %v", k, err)
		}
	}
	checkAllRecords(t, tl, m, storeReader(base))
}

// TestArchiverNeverCommitsOldObjects: objects uploaded longer than half
// the sweep grace ago are not committed (the sweeper may be deleting them).
func TestArchiverNeverCommitsOldObjects(t *testing.T) {
	s := newTestLocalStore(t)
	tl := newTestLog(t, testSegBytes)
	tl.produce(30)
	var clock time.Time
	var ticks atomic.Int64 // a minute passes at every reading
	a := newTestArchiver(t, tl, s, func(c *ArchiverConfig) {
		c.Grace = time.Minute
		c.Now = func() time.Time { return clock.Add(time.Duration(ticks.Add(1)) * time.Minute) }
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
	if _, _, err := LoadManifest(testCtx(t), s, testTopic, testPartition); !IsNotFound(err) {
		t.Fatalf("committed: %v", err)
	}
	if !refused() {
		t.Fatalf("last error %v", a.Lag().LastError)
	}
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
	if _, _, _, ok := splitObjectKey("t/01/x"); ok {
		t.Error("partition 01 accepted")
	}
	if topic, p, name, ok := splitObjectKey("t/12/x"); !ok || topic != "t" || p != 12 || name != "x" {
		t.Error("t/12/x not split")
	}
}
