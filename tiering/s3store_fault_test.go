package tiering

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/tiering/miniotest"
	"github.com/stratastream/strata/tiering/s3fault"
)

// Faults of the object store, injected by a proxy (tiering/s3fault)
// between the S3 store and a real MinIO: what each operation returns when
// the fault hits every attempt, that the SDK's retry hides a single one
// (and the store still counts it), and that a GET never hands back fewer
// bytes than it was asked for as if they were all.

// faultyS3 is an S3Store that reaches MinIO through a fault proxy, and one
// that reaches it directly, on the same bucket and prefix.
type faultyS3 struct {
	minio  *miniotest.Server
	proxy  *s3fault.Proxy
	store  *S3Store // through the proxy
	direct *S3Store
	bucket string
}

func newFaultyS3(t *testing.T, m *miniotest.Server, seed uint64, tweak func(*S3Config)) *faultyS3 {
	t.Helper()
	direct, bucket := newS3Store(t, m, tweak)
	p, err := s3fault.Start(m.Endpoint(), seed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	cfg := direct.cfg
	cfg.Endpoint = p.URL()
	s, err := NewS3Store(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &faultyS3{minio: m, proxy: p, store: s, direct: direct, bucket: bucket}
}

func (f *faultyS3) set(t *testing.T, rules ...s3fault.Rule) {
	t.Helper()
	if err := f.proxy.Set(rules...); err != nil {
		t.Fatal(err)
	}
}

// storeErrors returns the store's error counts as a map.
func storeErrors(s ErrorCounter) map[[2]string]int64 {
	out := map[[2]string]int64{}
	for _, c := range s.StoreErrors() {
		out[[2]string{c.Op, c.Code}] = c.Count
	}
	return out
}

// readAll GETs [off, off+length) and reads the body to its end.
func readAll(ctx context.Context, s ObjectStore, key string, off, length int64) ([]byte, error) {
	rc, err := s.Get(ctx, key, off, length)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(rc)
	if cerr := rc.Close(); err == nil {
		err = cerr
	}
	return b, err
}

func TestS3StoreFaults(t *testing.T) {
	m := miniotest.Start(t)
	f := newFaultyS3(t, m, 1, nil) // two attempts per request
	obj := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	mustPut(t, f.direct, "f/obj", obj, PutCondition{})
	get := func(ctx context.Context) error {
		b, err := readAll(ctx, f.store, "f/obj", 1000, 30000)
		if err == nil && !bytes.Equal(b, obj[1000:31000]) {
			t.Errorf("GET answered %d wrong bytes without an error", len(b))
		}
		return err
	}
	put := func(ctx context.Context) error {
		_, err := f.store.Put(ctx, "f/put", bytes.NewReader(obj), int64(len(obj)), PutCondition{})
		return err
	}
	for i, tc := range []struct {
		name string
		rule s3fault.Rule
		call func(context.Context) error
		op   string // the metrics' operation
		code string // StoreError.Code and the metrics' code
		is   error
	}{
		{"put slowdown", s3fault.Rule{Fault: s3fault.SlowDown, Ops: []s3fault.Op{s3fault.OpPutObject}, RetryAfter: 1500 * time.Millisecond}, put, "put", "SlowDown", ErrThrottled},
		{"put internal error", s3fault.Rule{Fault: s3fault.InternalError, Ops: []s3fault.Op{s3fault.OpPutObject}}, put, "put", "InternalError", ErrUnavailable},
		{"put reset", s3fault.Rule{Fault: s3fault.Reset, Ops: []s3fault.Op{s3fault.OpPutObject}, After: 10000}, put, "put", "reset", ErrUnavailable},
		{"put answer lost", s3fault.Rule{Fault: s3fault.DropResponse, Ops: []s3fault.Op{s3fault.OpPutObject}}, put, "put", "reset", ErrUnavailable},
		{"get slowdown", s3fault.Rule{Fault: s3fault.SlowDown, Ops: []s3fault.Op{s3fault.OpGetObject}}, get, "get", "SlowDown", ErrThrottled},
		{"get internal error", s3fault.Rule{Fault: s3fault.InternalError, Ops: []s3fault.Op{s3fault.OpGetObject}}, get, "get", "InternalError", ErrUnavailable},
		{"get reset mid-body", s3fault.Rule{Fault: s3fault.Reset, Ops: []s3fault.Op{s3fault.OpGetObject}, After: 5000}, get, "get", "reset", ErrUnavailable},
		{"get truncated", s3fault.Rule{Fault: s3fault.Truncate, Ops: []s3fault.Op{s3fault.OpGetObject}, After: 5000}, get, "get", "truncated", ErrUnavailable},
		{"get short body", s3fault.Rule{Fault: s3fault.ShortBody, Ops: []s3fault.Op{s3fault.OpGetObject}, After: 5000}, get, "get", "truncated", ErrUnavailable},
		{"get refused", s3fault.Rule{Fault: s3fault.Refuse, Ops: []s3fault.Op{s3fault.OpGetObject}}, get, "get", "reset", ErrUnavailable},
		{"head internal error", s3fault.Rule{Fault: s3fault.InternalError, Ops: []s3fault.Op{s3fault.OpHeadObject}},
			func(ctx context.Context) error { _, err := f.store.Stat(ctx, "f/obj"); return err }, "head", "http_500", ErrUnavailable},
		{"list slowdown", s3fault.Rule{Fault: s3fault.SlowDown, Ops: []s3fault.Op{s3fault.OpList}},
			func(ctx context.Context) error { _, err := f.store.List(ctx, "f/"); return err }, "list", "SlowDown", ErrThrottled},
		{"delete internal error", s3fault.Rule{Fault: s3fault.InternalError, Ops: []s3fault.Op{s3fault.OpDeleteObject}},
			func(ctx context.Context) error { return f.store.Delete(ctx, "f/put") }, "delete", "InternalError", ErrUnavailable},
	} {
		before := storeErrors(f.store)
		// On every attempt: the operation fails, as retriable, saying why.
		f.set(t, tc.rule)
		err := tc.call(testCtx(t))
		var se *StoreError
		switch {
		case !errors.Is(err, ErrUnavailable) || !errors.Is(err, tc.is):
			t.Errorf("#%d %s: got %v, want %v and ErrUnavailable", i, tc.name, err, tc.is)
		case !errors.As(err, &se) || se.Op != tc.op || (se.Code != tc.code && !(tc.code == "reset" && se.Code == "closed")):
			t.Errorf("#%d %s: store error %+v, want op %s code %s", i, tc.name, se, tc.op, tc.code)
		}
		if tc.rule.RetryAfter > 0 && RetryAfter(err) != 2*time.Second {
			t.Errorf("#%d %s: RetryAfter %v, want the 2 s the store asked for", i, tc.name, RetryAfter(err))
		}
		if se == nil {
			f.proxy.Clear()
			continue
		}
		after := storeErrors(f.store)
		if n := after[[2]string{tc.op, se.Code}] - before[[2]string{tc.op, se.Code}]; n < 1 {
			t.Errorf("#%d %s: %s/%s counted %d times", i, tc.name, tc.op, se.Code, n)
		}
		// Once: the SDK's retry hides what hits the request itself; a
		// body that breaks after the answer started is the caller's.
		f.set(t, func() s3fault.Rule { r := tc.rule; r.Limit = 1; return r }())
		err = tc.call(testCtx(t))
		bodyFault := tc.op == "get" && (tc.code == "reset" || tc.code == "truncated") && tc.rule.Fault != s3fault.Refuse
		if bodyFault != (err != nil) {
			t.Errorf("#%d %s once: %v", i, tc.name, err)
		}
		f.proxy.Clear()
	}
	t.Logf("proxy: %v", f.proxy.Counts())
	t.Logf("store errors: %v", f.store.StoreErrors())
}

// TestS3StoreMultipartFaults: a part upload failing on every attempt
// aborts the upload and leaves no object; one lost answer to the
// completion (the store completed it) is an error the caller retries,
// never a success with a missing object; a single failed part is retried
// by the SDK.
func TestS3StoreMultipartFaults(t *testing.T) {
	m := miniotest.Start(t)
	f := newFaultyS3(t, m, 2, nil)
	big := make([]byte, 11<<20) // three 5 MiB parts
	for i := range big {
		big[i] = byte(i / 4093)
	}
	put := func(key string) error {
		_, err := f.store.Put(testCtx(t), key, bytes.NewReader(big), int64(len(big)), PutCondition{})
		return err
	}

	f.set(t, s3fault.Rule{Fault: s3fault.InternalError, Ops: []s3fault.Op{s3fault.OpUploadPart}})
	if err := put("mp/a"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("every part failing: %v", err)
	}
	if n := f.proxy.Requests(s3fault.OpAbortUpload); n == 0 {
		t.Fatal("the failed multipart upload was not aborted")
	}
	if _, err := f.direct.Stat(testCtx(t), "mp/a"); !IsNotFound(err) {
		t.Fatalf("after a failed multipart upload: stat %v", err)
	}

	f.set(t, s3fault.Rule{Fault: s3fault.Reset, Ops: []s3fault.Op{s3fault.OpUploadPart}, After: 1 << 20, Limit: 1})
	if err := put("mp/b"); err != nil {
		t.Fatalf("one part reset: %v", err)
	}
	if got := mustGet(t, f.direct, "mp/b", 0, -1); !bytes.Equal(got, big) {
		t.Fatal("mp/b differs from what was put")
	}

	f.set(t, s3fault.Rule{Fault: s3fault.DropResponse, Ops: []s3fault.Op{s3fault.OpCompleteUpload}, Limit: 1})
	err := put("mp/c")
	if err != nil && !errors.Is(err, ErrUnavailable) {
		t.Fatalf("completion answer lost: %v, want success or ErrUnavailable", err)
	}
	if err == nil {
		if got := mustGet(t, f.direct, "mp/c", 0, -1); !bytes.Equal(got, big) {
			t.Fatal("mp/c differs from what was put")
		}
	}
	t.Logf("completion answer lost: put returned %v", err)
	t.Logf("proxy: %v; store errors: %v", f.proxy.Counts(), f.store.StoreErrors())
}

// TestS3StoreSlowAndThrottled: delays and a throttled link slow
// operations down but change nothing they return.
func TestS3StoreSlowAndThrottled(t *testing.T) {
	m := miniotest.Start(t)
	f := newFaultyS3(t, m, 3, nil)
	data := bytes.Repeat([]byte("throttled "), 50000)
	f.set(t, s3fault.Rule{Fault: s3fault.Throttle, BytesPerSecond: 4 << 20}, s3fault.Rule{Fault: s3fault.Delay, Delay: 100 * time.Millisecond})
	start := time.Now()
	mustPut(t, f.store, "slow/a", data, PutCondition{})
	got, err := readAll(testCtx(t), f.store, "slow/a", 0, -1)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("throttled read back %d bytes, %v", len(got), err)
	}
	t.Logf("put and get of %d bytes at 4 MiB/s took %v", len(data), time.Since(start))
	if n := f.proxy.InjectedTotal(s3fault.Throttle); n < 2 {
		t.Fatalf("throttled %d requests", n)
	}
	if errs := f.store.StoreErrors(); len(errs) != 0 {
		t.Fatalf("store errors without failures: %v", errs)
	}
	// A whole-object GET asks for a range too, and an empty object
	// answers as empty.
	mustPut(t, f.store, "slow/empty", nil, PutCondition{})
	if got, err := readAll(testCtx(t), f.store, "slow/empty", 0, -1); err != nil || len(got) != 0 {
		t.Fatalf("empty object: %q, %v", got, err)
	}
	if !strings.Contains(f.proxy.Counts().String(), "get") {
		t.Fatal("no GET went through the proxy")
	}
}

// TestS3StoreSlowLinkUpload: an upload over a slow link completes; one
// that stalls part-way fails with a timeout within a few RequestTimeouts
// of its last progress, whatever its size allows in total.
func TestS3StoreSlowLinkUpload(t *testing.T) {
	m := miniotest.Start(t)
	f := newFaultyS3(t, m, 10, func(c *S3Config) { c.RequestTimeout, c.MaxAttempts = 2*time.Second, 1 })
	data := bytes.Repeat([]byte("slow link "), 100<<10) // 1000 KiB, one PutObject
	f.set(t, s3fault.Rule{Fault: s3fault.Throttle, Ops: []s3fault.Op{s3fault.OpPutObject}, BytesPerSecond: 1 << 20})
	start := time.Now()
	if _, err := f.store.Put(testCtx(t), "slow/link", bytes.NewReader(data), int64(len(data)), PutCondition{}); err != nil {
		t.Fatalf("put of %d bytes at 1 MiB/s: %v", len(data), err)
	}
	t.Logf("put of %d bytes at 1 MiB/s took %v", len(data), time.Since(start))
	if got := mustGet(t, f.direct, "slow/link", 0, -1); !bytes.Equal(got, data) {
		t.Fatal("the slow upload stored other bytes")
	}

	f.set(t, s3fault.Rule{Fault: s3fault.Stall, Ops: []s3fault.Op{s3fault.OpPutObject}, After: 64 << 10})
	done := make(chan error, 1)
	start = time.Now()
	go func() {
		_, err := f.store.Put(context.Background(), "slow/stall", bytes.NewReader(data), int64(len(data)), PutCondition{})
		done <- err
	}()
	select {
	case err := <-done:
		var se *StoreError
		if !errors.Is(err, ErrUnavailable) || !errors.As(err, &se) || se.Code != "timeout" {
			t.Fatalf("stalled upload: %v, want a timeout", err)
		}
		t.Logf("stalled upload failed after %v: %v", time.Since(start), err)
	case <-time.After(time.Minute):
		t.Fatal("a stalled upload did not fail: nothing bounds a stall")
	}
	if f.store.StoreErrors()[0] != (StoreErrorCount{Op: "put", Code: "timeout", Count: 1}) {
		t.Fatalf("store errors: %v", f.store.StoreErrors())
	}
}
