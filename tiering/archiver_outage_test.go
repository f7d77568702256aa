package tiering

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratastream/strata/tiering/miniotest"
)

// TestArchiverMinIOOutage stops MinIO while producing: the archiver's
// steps fail, local retention deletes nothing that is not in the committed
// manifest, and once MinIO is back the uploads catch up with nothing lost.
// (That appends never wait for the store, TestArchiverHungStore shows.)
func TestArchiverMinIOOutage(t *testing.T) {
	m := miniotest.Start(t)
	s, bucket := newS3Store(t, m, func(c *S3Config) {
		c.RequestTimeout, c.DialTimeout, c.MaxAttempts = 2*time.Second, 300*time.Millisecond, 2
	})
	tl := newTestLog(t, testSegBytes)
	tl.produce(60)
	a := newTestArchiver(t, tl, s, nil)
	a.BecomeLeader(1)
	waitUploaded(t, a, tl.sealedEnd())

	// Produce through the outage, the archiver taking a step after each
	// round: a dozen batches seal a segment, and every step after that
	// fails on its upload.
	m.Stop()
	for range 12 {
		tl.produce(5)
		remoteEnd := a.Manifest().EndOffset()
		deleted, err := tl.log.EnforceRetention()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range deleted {
			if d.NextOffset > remoteEnd {
				t.Fatalf("segment [%d, %d) deleted during the outage, remote end %d", d.BaseOffset, d.NextOffset, remoteEnd)
			}
		}
		waitSteps(t, a, 1)
	}
	lag := a.Lag()
	if lag.SegmentsPending == 0 || lag.BytesPending == 0 || !lag.Failing || !errors.Is(lag.LastError, ErrUnavailable) {
		t.Fatalf("lag during the outage: %+v", lag)
	}
	if len(tl.log.Segments()) < lag.SegmentsPending {
		t.Fatal("pending segments were deleted")
	}

	// A step that meets MinIO still initializing gets 503 with a
	// Retry-After (60 s in a CI run), which the archiver honours: the
	// bound covers that wait.
	m.Restart(t)
	waitUploadedWithin(t, a, tl.sealedEnd(), 3*time.Minute)
	man := a.Manifest()
	checkManifest(t, man, 1)
	if _, err := tl.log.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	checkAllRecords(t, tl, man, minioReader(m, bucket, "strata/test/"))
	if lag := a.Lag(); lag.SegmentsPending != 0 || lag.Failing {
		t.Fatalf("lag after catching up: %+v", lag)
	}
}

// TestArchiverHungStore: while every store operation hangs, with the
// archiver stuck in one, appends, rolls and local retention go on
// (retention deleting nothing the committed manifest lacks), and once the
// store answers the uploads catch up. The store hangs until released, by
// the test or by a watchdog a minute later: appends that waited for it
// would end only after the watchdog, which fails the test.
func TestArchiverHungStore(t *testing.T) {
	s := &faultStore{ObjectStore: newTestLocalStore(t)}
	tl := newTestLog(t, testSegBytes)
	tl.produce(30)
	a := newTestArchiver(t, tl, s, nil)
	a.BecomeLeader(1)
	waitUploaded(t, a, tl.sealedEnd())
	committed := a.Manifest().EndOffset()

	hang := make(chan struct{})
	var once sync.Once
	unhang := func() { once.Do(func() { close(hang) }) }
	t.Cleanup(unhang) // before the archiver's Close, which waits for its step
	entered := make(chan struct{}, 1)
	s.setBefore(func(op, key string) error {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-hang
		return nil
	})
	tl.produce(30) // seals segments: the archiver wakes and hangs in the store
	select {
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatal("the archiver did not call the store after segments were sealed")
	}
	steps := a.steps.Load()

	var watchdog atomic.Bool
	timer := time.AfterFunc(time.Minute, func() { watchdog.Store(true); unhang() })
	tl.produce(60)
	deleted, err := tl.log.EnforceRetention()
	timer.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if watchdog.Load() {
		t.Fatal("appends and retention waited for the hung store")
	}
	if n := a.steps.Load(); n != steps {
		t.Fatalf("the archiver finished %d steps while the store hung", n-steps)
	}
	if len(deleted) == 0 {
		t.Fatal("local retention deleted none of the uploaded segments while the store hung")
	}
	for _, d := range deleted {
		if d.NextOffset > committed {
			t.Fatalf("segment [%d, %d) deleted while the store hung, remote end %d", d.BaseOffset, d.NextOffset, committed)
		}
	}
	if lag := a.Lag(); lag.SegmentsPending == 0 || lag.RemoteEnd != committed {
		t.Fatalf("lag while the store hangs: %+v", lag)
	}

	unhang()
	waitUploaded(t, a, tl.sealedEnd())
	m := a.Manifest()
	checkManifest(t, m, 1)
	checkAllRecords(t, tl, m, storeReader(s))
}
