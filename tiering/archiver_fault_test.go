package tiering

import (
	"testing"
	"time"

	"github.com/stratastream/strata/tiering/miniotest"
	"github.com/stratastream/strata/tiering/s3fault"
)

// The archiver against a faulty store (tiering/s3fault in front of a real
// MinIO): under every fault appends go on, local retention deletes only
// what the committed manifest holds, the archiver retries with backoff
// (longer when the store throttles, never shorter than its Retry-After),
// and once the store is healthy the uploads catch up with a manifest
// whose every object is in the bucket and every record readable.

// committedManifest reads the manifest from the bucket, past the proxy.
func committedManifest(t *testing.T, direct ObjectStore) *Manifest {
	t.Helper()
	m, _, err := LoadManifest(testCtx(t), direct, testTopic, testTopicID, testPartition)
	if IsNotFound(err) {
		return NewManifest(testTopic, testTopicID, testPartition)
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// checkManifestObjects fails unless every object of every segment of m is
// in the bucket, the .log of the segment's size.
func checkManifestObjects(t *testing.T, direct ObjectStore, m *Manifest) {
	t.Helper()
	for i := range m.Segments {
		rs := &m.Segments[i]
		for _, k := range m.SegmentKeys(rs) {
			info, err := direct.Stat(testCtx(t), k)
			if err != nil {
				t.Fatalf("manifest segment [%d, %d): %s: %v", rs.BaseOffset, rs.NextOffset, k, err)
			}
			if k == m.SegmentKey(rs, SuffixLog) && info.Size != rs.Size {
				t.Fatalf("manifest segment [%d, %d): %s has %d bytes, the manifest says %d", rs.BaseOffset, rs.NextOffset, k, info.Size, rs.Size)
			}
		}
	}
}

// produceThroughFault produces rounds of batches with the archiver
// stepping between them, and after each round checks that local
// retention deleted only segments the bucket's manifest holds.
func produceThroughFault(t *testing.T, tl *testLog, a *Archiver, direct ObjectStore, rounds int) {
	t.Helper()
	for range rounds {
		tl.produce(6)
		deleted, err := tl.log.EnforceRetention()
		if err != nil {
			t.Fatal(err)
		}
		if len(deleted) > 0 {
			m := committedManifest(t, direct)
			for _, d := range deleted {
				if d.NextOffset > m.EndOffset() {
					t.Fatalf("segment [%d, %d) deleted locally, the committed manifest ends at %d", d.BaseOffset, d.NextOffset, m.EndOffset())
				}
			}
		}
		waitSteps(t, a, 1)
	}
}

func TestArchiverS3Faults(t *testing.T) {
	m := miniotest.Start(t)
	fs := newFaultyS3(t, m, 8, nil)
	tl := newTestLog(t, testSegBytes)
	a := newTestArchiver(t, tl, fs.store, nil)
	a.BecomeLeader(1)
	tl.produce(30)
	waitUploaded(t, a, tl.sealedEnd())

	puts := []s3fault.Op{s3fault.OpPutObject, s3fault.OpUploadPart}
	for _, tc := range []struct {
		name  string
		rules []s3fault.Rule
	}{
		{"internal errors", []s3fault.Rule{{Fault: s3fault.InternalError, Ops: puts, Fraction: 0.6}}},
		{"uploads reset", []s3fault.Rule{{Fault: s3fault.Reset, Ops: puts, Key: SuffixLog, Fraction: 0.7, After: 700}}},
		{"manifest answers lost", []s3fault.Rule{{Fault: s3fault.DropResponse, Ops: puts, Key: "/manifest", Limit: 2}}},
		{"manifest reads cut", []s3fault.Rule{
			{Fault: s3fault.Truncate, Ops: []s3fault.Op{s3fault.OpGetObject}, Key: "/manifest", Fraction: 0.3, After: 50},
			{Fault: s3fault.ShortBody, Ops: []s3fault.Op{s3fault.OpGetObject}, Key: "/manifest", Fraction: 0.3, After: 50}}},
		{"slow and throttled", []s3fault.Rule{{Fault: s3fault.Delay, Fraction: 0.3, Delay: 150 * time.Millisecond},
			{Fault: s3fault.Throttle, BytesPerSecond: 256 << 10}}},
		{"store down", []s3fault.Rule{{Fault: s3fault.Refuse}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs.set(t, tc.rules...)
			before := fs.proxy.Counts()
			produceThroughFault(t, tl, a, fs.direct, 5)
			if injectedSince(fs.proxy, before) == 0 {
				t.Fatal("no fault was injected")
			}
			lag := a.Lag()
			t.Logf("%s: %v; lag: pending %d segments, failing %v, backoff %v", tc.name, fs.proxy.Counts(), lag.SegmentsPending, lag.Failing, lag.Backoff)
			fs.proxy.Clear()
			tl.produce(1)
			waitUploaded(t, a, tl.sealedEnd())
			man := committedManifest(t, fs.direct)
			checkManifest(t, man, 1)
			checkManifestObjects(t, fs.direct, man)
			checkAllRecords(t, tl, man, storeReader(fs.direct))
		})
	}
	t.Logf("store errors: %v", fs.store.StoreErrors())
}

// TestArchiverSlowDown: a store answering every upload with 503 SlowDown
// and Retry-After is waited for at least the Retry-After between steps,
// even past RetryMax; the throttled steps are counted; uploads resume
// when it relents.
func TestArchiverSlowDown(t *testing.T) {
	m := miniotest.Start(t)
	fs := newFaultyS3(t, m, 9, nil) // two attempts per request
	tl := newTestLog(t, testSegBytes)
	a := newTestArchiver(t, tl, fs.store, nil) // RetryMax 300 ms
	a.BecomeLeader(1)
	tl.produce(30)
	waitUploaded(t, a, tl.sealedEnd())

	const retryAfter = 500 * time.Millisecond
	fs.set(t, s3fault.Rule{Fault: s3fault.SlowDown, Ops: []s3fault.Op{s3fault.OpPutObject}, RetryAfter: retryAfter})
	start := time.Now()
	puts0 := fs.proxy.Requests(s3fault.OpPutObject)
	tl.produce(30) // seals segments: the archiver wakes and is throttled
	waitFor(t, 30*time.Second, "two throttled steps", func() bool { return a.Lag().Throttled >= 2 })
	lag := a.Lag()
	elapsed := time.Since(start)
	puts := fs.proxy.Requests(s3fault.OpPutObject) - puts0
	if !lag.Failing || !IsThrottled(lag.LastError) || lag.Backoff < retryAfter {
		t.Fatalf("lag while throttled: failing %v, error %v, backoff %v (want at least %v)", lag.Failing, lag.LastError, lag.Backoff, retryAfter)
	}
	// Each step makes at most two attempts at its first put, and steps
	// are at least the store's Retry-After (1 s once rounded up to whole
	// seconds) apart: an upper bound a machine of any speed keeps.
	if bound := 2 * (int64(elapsed/time.Second) + 2); puts > bound {
		t.Fatalf("%d put requests in %v of SlowDown, bound %d", puts, elapsed, bound)
	}
	t.Logf("SlowDown with Retry-After %v: %d put requests in %v, %d throttled steps, backoff %v", retryAfter, puts, elapsed, lag.Throttled, lag.Backoff)

	fs.proxy.Clear()
	waitUploaded(t, a, tl.sealedEnd())
	man := committedManifest(t, fs.direct)
	checkManifest(t, man, 1)
	checkManifestObjects(t, fs.direct, man)
	checkAllRecords(t, tl, man, storeReader(fs.direct))
	if lag := a.Lag(); lag.Failing || lag.Backoff != 0 {
		t.Fatalf("lag after recovery: failing %v, backoff %v", lag.Failing, lag.Backoff)
	}
}
