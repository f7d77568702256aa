package tiering

import (
	"errors"
	"testing"
	"time"

	"github.com/stratastream/strata/tiering/miniotest"
)

// TestArchiverMinIOOutage stops MinIO for a few seconds while producing:
// appends never wait for the store, local retention deletes nothing that
// is not in the committed manifest, and once MinIO is back the uploads
// catch up with nothing lost.
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

	m.Stop()
	outageEnd := time.Now().Add(3 * time.Second)
	var slowest time.Duration
	for time.Now().Before(outageEnd) {
		start := time.Now()
		tl.produce(5)
		slowest = max(slowest, time.Since(start))
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
		time.Sleep(50 * time.Millisecond)
	}
	if slowest > time.Second {
		t.Errorf("appends took up to %v during the outage", slowest)
	}
	lag := a.Lag()
	if lag.SegmentsPending == 0 || lag.BytesPending == 0 || !lag.Failing || !errors.Is(lag.LastError, ErrUnavailable) {
		t.Fatalf("lag during the outage: %+v", lag)
	}
	if len(tl.log.Segments()) < lag.SegmentsPending {
		t.Fatal("pending segments were deleted")
	}

	m.Restart(t)
	waitUploaded(t, a, tl.sealedEnd())
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
