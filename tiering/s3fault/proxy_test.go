package s3fault

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/stratastream/strata/tiering/miniotest"
)

func TestClassify(t *testing.T) {
	for i, tc := range []struct {
		method, target string
		rangeHdr       bool
		want           Request
	}{
		{"PUT", "/b/t/0/00000000000000000000-1-ab.log?x-id=PutObject", false, Request{Op: OpPutObject, Bucket: "b", Key: "t/0/00000000000000000000-1-ab.log"}},
		{"PUT", "/b/k?partNumber=3&uploadId=U&x-id=UploadPart", false, Request{Op: OpUploadPart, Bucket: "b", Key: "k"}},
		{"POST", "/b/k?uploads", false, Request{Op: OpCreateUpload, Bucket: "b", Key: "k"}},
		{"POST", "/b/k?uploadId=U&x-id=CompleteMultipartUpload", false, Request{Op: OpCompleteUpload, Bucket: "b", Key: "k"}},
		{"DELETE", "/b/k?uploadId=U&x-id=AbortMultipartUpload", false, Request{Op: OpAbortUpload, Bucket: "b", Key: "k"}},
		{"DELETE", "/b/a%20b/c?x-id=DeleteObject", false, Request{Op: OpDeleteObject, Bucket: "b", Key: "a b/c"}},
		{"POST", "/b?delete", false, Request{Op: OpDeleteObjects, Bucket: "b"}},
		{"GET", "/b/k?x-id=GetObject", true, Request{Op: OpGetObject, Bucket: "b", Key: "k", Ranged: true}},
		{"GET", "/b/k", false, Request{Op: OpGetObject, Bucket: "b", Key: "k"}},
		{"GET", "/b?list-type=2&prefix=p%2F", false, Request{Op: OpList, Bucket: "b"}},
		{"GET", "/b/?list-type=2", false, Request{Op: OpList, Bucket: "b"}},
		{"GET", "/b?prefix=x&max-keys=5", false, Request{Op: OpList, Bucket: "b"}},
		{"GET", "/b?uploads", false, Request{Op: OpList, Bucket: "b"}},
		{"GET", "/b?location", false, Request{Op: OpOther, Bucket: "b"}},
		{"GET", "/b/k?tagging", false, Request{Op: OpOther, Bucket: "b", Key: "k"}},
		{"HEAD", "/b/k", false, Request{Op: OpHeadObject, Bucket: "b", Key: "k"}},
		{"HEAD", "/b", false, Request{Op: OpOther, Bucket: "b"}},
		{"PUT", "/b", false, Request{Op: OpOther, Bucket: "b"}},
	} {
		r := httptest.NewRequest(tc.method, tc.target, nil)
		if tc.rangeHdr {
			r.Header.Set("Range", "bytes=0-9")
		}
		if got := Classify(r); got != tc.want {
			t.Errorf("#%d %s %s: got %+v, want %+v", i, tc.method, tc.target, got, tc.want)
		}
	}
}

func TestRuleValidation(t *testing.T) {
	p := startProxy(t, "http://127.0.0.1:1", 1)
	for i, r := range []Rule{
		{Fault: "melt"},
		{Fault: SlowDown, Ops: []Op{"frobnicate"}},
		{Fault: SlowDown, Fraction: 1.5},
		{Fault: SlowDown, Fraction: -0.1},
		{Fault: SlowDown, Limit: -1},
		{Fault: Delay},
		{Fault: Throttle},
		{Fault: ShortBody},
		{Fault: Reset, After: -1},
	} {
		if err := p.Set(r); err == nil {
			t.Errorf("#%d: rule %+v accepted", i, r)
		}
	}
	if _, err := Start("ftp://x", 1); err == nil {
		t.Error("an ftp target was accepted")
	}
}

// fixture is MinIO with a bucket anyone may read and write, so the tests
// can send raw HTTP requests through the proxy and see exactly what comes
// back, without a client that retries.
type fixture struct {
	srv    *miniotest.Server
	bucket string
	proxy  *Proxy
	object []byte // stored under key "obj"
	hc     *http.Client
}

const objectSize = 100 << 10

func newFixture(t *testing.T) *fixture {
	t.Helper()
	srv := miniotest.Start(t)
	bucket := srv.NewBucket(t)
	policy := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":["*"]},
		"Action":["s3:GetObject","s3:PutObject","s3:DeleteObject","s3:ListBucket"],
		"Resource":["arn:aws:s3:::%[1]s","arn:aws:s3:::%[1]s/*"]}]}`, bucket)
	ctx := testCtx(t)
	if err := srv.Client().SetBucketPolicy(ctx, bucket, policy); err != nil {
		t.Fatal(err)
	}
	f := &fixture{srv: srv, bucket: bucket, proxy: startProxy(t, srv.Endpoint(), 7), object: make([]byte, objectSize),
		hc: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableCompression: true}}}
	for i := range f.object {
		f.object[i] = byte(i*7 + i/251)
	}
	if _, err := srv.Client().PutObject(ctx, bucket, "obj", bytes.NewReader(f.object), objectSize, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	return f
}

func startProxy(t *testing.T, target string, seed uint64) *Proxy {
	t.Helper()
	p, err := Start(target, seed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// do sends a request through the proxy and reads the whole answer: the
// response (nil when none came), the body bytes that arrived and the
// error of the request or of reading the body.
func (f *fixture) do(t *testing.T, method, key string, body []byte, hdr map[string]string) (*http.Response, []byte, error) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(testCtx(t), method, f.proxy.URL()+"/"+f.bucket+"/"+key, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := f.hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// stored reports whether key exists in the bucket (asked of MinIO
// directly).
func (f *fixture) stored(t *testing.T, key string) bool {
	t.Helper()
	_, err := f.srv.Client().StatObject(testCtx(t), f.bucket, key, minio.StatObjectOptions{})
	if err != nil && minio.ToErrorResponse(err).Code != "NoSuchKey" {
		t.Fatal(err)
	}
	return err == nil
}

type s3Error struct {
	Code    string
	Message string
}

func TestFaults(t *testing.T) {
	f := newFixture(t)
	p := f.proxy
	set := func(r Rule) {
		t.Helper()
		if err := p.Set(r); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("forwarded", func(t *testing.T) {
		p.Clear()
		resp, b, err := f.do(t, "GET", "obj", nil, map[string]string{"Range": "bytes=10-19"})
		if err != nil || resp.StatusCode != http.StatusPartialContent || !bytes.Equal(b, f.object[10:20]) {
			t.Fatalf("ranged GET: %v %v %q", resp, err, b)
		}
	})

	t.Run("slowdown", func(t *testing.T) {
		set(Rule{Fault: SlowDown, Ops: []Op{OpGetObject}, RetryAfter: 1500 * time.Millisecond})
		resp, b, err := f.do(t, "GET", "obj", nil, nil)
		if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("got %v %v", resp, err)
		}
		var e s3Error
		if err := xml.Unmarshal(b, &e); err != nil || e.Code != "SlowDown" {
			t.Fatalf("body %q: %v", b, err)
		}
		if ra, ms := resp.Header.Get("Retry-After"), resp.Header.Get("x-amz-retry-after"); ra != "2" || ms != "1500" {
			t.Fatalf("Retry-After %q, x-amz-retry-after %q; want 2 and 1500", ra, ms)
		}
		// Other operations pass.
		if resp, _, err := f.do(t, "HEAD", "obj", nil, nil); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("HEAD under a GET rule: %v %v", resp, err)
		}
	})

	t.Run("internal-error", func(t *testing.T) {
		set(Rule{Fault: InternalError, Ops: []Op{OpPutObject}})
		resp, b, err := f.do(t, "PUT", "ie", []byte("x"), nil)
		var e s3Error
		if err != nil || resp.StatusCode != http.StatusInternalServerError || xml.Unmarshal(b, &e) != nil || e.Code != "InternalError" {
			t.Fatalf("got %v %v %q", resp, err, b)
		}
		if f.stored(t, "ie") {
			t.Fatal("a put answered 500 by the proxy reached the store")
		}
	})

	t.Run("reset-upload", func(t *testing.T) {
		set(Rule{Fault: Reset, Ops: []Op{OpPutObject}, After: 1000})
		if _, _, err := f.do(t, "PUT", "rs", f.object, nil); err == nil {
			t.Fatal("a reset upload succeeded")
		}
		if f.stored(t, "rs") {
			t.Fatal("a reset upload reached the store")
		}
	})

	t.Run("reset-download", func(t *testing.T) {
		set(Rule{Fault: Reset, Ops: []Op{OpGetObject}, After: 1000})
		resp, b, err := f.do(t, "GET", "obj", nil, nil)
		if resp == nil || err == nil || len(b) > 1000 || !bytes.Equal(b, f.object[:len(b)]) {
			t.Fatalf("got %v, %d bytes, %v; want a reset within the first 1000 bytes", resp, len(b), err)
		}
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Logf("read error %v (not ECONNRESET)", err)
		}
	})

	t.Run("drop-response", func(t *testing.T) {
		set(Rule{Fault: DropResponse, Ops: []Op{OpPutObject}})
		if _, _, err := f.do(t, "PUT", "dr", []byte("carried out"), nil); err == nil {
			t.Fatal("a dropped answer arrived")
		}
		if !f.stored(t, "dr") {
			t.Fatal("the store did not carry out a put whose answer was dropped")
		}
	})

	t.Run("truncate", func(t *testing.T) {
		set(Rule{Fault: Truncate, Ops: []Op{OpGetObject}, After: 4096})
		resp, b, err := f.do(t, "GET", "obj", nil, map[string]string{"Range": "bytes=100-"})
		if resp == nil || resp.ContentLength != objectSize-100 || !errors.Is(err, io.ErrUnexpectedEOF) ||
			!bytes.Equal(b, f.object[100:100+4096]) {
			t.Fatalf("got %v (length %d), %d bytes, %v; want 4096 right bytes then an unexpected EOF", resp, resp.ContentLength, len(b), err)
		}
	})

	t.Run("short-body", func(t *testing.T) {
		set(Rule{Fault: ShortBody, Ops: []Op{OpGetObject}, After: 1000})
		resp, b, err := f.do(t, "GET", "obj", nil, map[string]string{"Range": "bytes=100-9999"})
		want := fmt.Sprintf("bytes 100-1099/%d", objectSize)
		if err != nil || resp.ContentLength != 1000 || resp.Header.Get("Content-Range") != want || !bytes.Equal(b, f.object[100:1100]) {
			t.Fatalf("got %v, %d bytes, %v; want a clean 1000-byte answer with Content-Range %q", resp, len(b), err, want)
		}
	})

	t.Run("refuse", func(t *testing.T) {
		set(Rule{Fault: Refuse})
		if resp, _, err := f.do(t, "HEAD", "obj", nil, nil); err == nil {
			t.Fatalf("a refused request was answered: %v", resp)
		}
	})

	t.Run("delay", func(t *testing.T) {
		set(Rule{Fault: Delay, Delay: 200 * time.Millisecond})
		start := time.Now()
		resp, b, err := f.do(t, "GET", "obj", nil, nil)
		if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(b, f.object) {
			t.Fatalf("delayed GET: %v %v", resp, err)
		}
		t.Logf("delayed GET took %v (delay 200ms)", time.Since(start))
	})

	t.Run("throttle", func(t *testing.T) {
		set(Rule{Fault: Throttle, BytesPerSecond: 400 << 10})
		start := time.Now()
		resp, b, err := f.do(t, "GET", "obj", nil, nil)
		if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(b, f.object) {
			t.Fatalf("throttled GET: %v %v", resp, err)
		}
		t.Logf("throttled GET of %d bytes took %v (400 KiB/s)", objectSize, time.Since(start))
		if resp, _, err := f.do(t, "PUT", "th", f.object, nil); err != nil || resp.StatusCode != http.StatusOK || !f.stored(t, "th") {
			t.Fatalf("throttled PUT: %v %v", resp, err)
		}
	})

	counts := p.Counts()
	t.Logf("%v", counts)
	for _, k := range []Key{{OpGetObject, SlowDown}, {OpPutObject, InternalError}, {OpPutObject, Reset}, {OpGetObject, Reset},
		{OpPutObject, DropResponse}, {OpGetObject, Truncate}, {OpGetObject, ShortBody}} {
		if counts.Injected[k] != 1 {
			t.Errorf("injected %v: %d, want 1", k, counts.Injected[k])
		}
	}
	// net/http retries a HEAD whose reused connection died unanswered.
	if n := counts.Injected[Key{OpHeadObject, Refuse}]; n < 1 {
		t.Errorf("injected refusals of HEAD: %d, want at least 1", n)
	}
}

// TestFractionAndLimit: a fraction picks that share of the matching
// requests, the same ones for the same seed; a limit caps the picks.
func TestFractionAndLimit(t *testing.T) {
	f := newFixture(t)
	pattern := func(n int) string {
		var b strings.Builder
		for range n {
			resp, _, err := f.do(t, "HEAD", "obj", nil, nil)
			switch {
			case err != nil:
				t.Fatal(err)
			case resp.StatusCode == http.StatusServiceUnavailable:
				b.WriteByte('x')
			default:
				b.WriteByte('.')
			}
		}
		return b.String()
	}
	if err := f.proxy.Set(Rule{Fault: SlowDown, Ops: []Op{OpHeadObject}, Fraction: 0.3}); err != nil {
		t.Fatal(err)
	}
	first := pattern(100)
	n := strings.Count(first, "x")
	if n == 0 || n == 100 || f.proxy.Injected(OpHeadObject, SlowDown) != int64(n) {
		t.Fatalf("fraction 0.3 of 100 requests: %s (%d), counted %d", first, n, f.proxy.Injected(OpHeadObject, SlowDown))
	}
	again := startProxy(t, f.srv.Endpoint(), 7)
	if err := again.Set(Rule{Fault: SlowDown, Ops: []Op{OpHeadObject}, Fraction: 0.3}); err != nil {
		t.Fatal(err)
	}
	f.proxy = again
	if second := pattern(100); second != first {
		t.Fatalf("the same seed picked differently:\n%s\n%s", first, second)
	}
	t.Logf("seed 7, fraction 0.3: %d of 100 picked", n)

	if err := f.proxy.Set(Rule{Fault: SlowDown, Limit: 3}); err != nil {
		t.Fatal(err)
	}
	if got := pattern(10); got != "xxx......." {
		t.Fatalf("limit 3: %s", got)
	}
}

// TestSignedThroughProxy: a signing client (minio-go, SigV4) pointed at
// the proxy works against the store behind it.
func TestSignedThroughProxy(t *testing.T) {
	srv := miniotest.Start(t)
	bucket := srv.NewBucket(t)
	p := startProxy(t, srv.Endpoint(), 1)
	mc, err := minio.New(strings.TrimPrefix(p.URL(), "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(miniotest.AccessKey, miniotest.SecretKey, ""), BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	if _, err := mc.PutObject(ctx, bucket, "dir/a b", strings.NewReader("hello"), 5, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	obj, err := mc.GetObject(ctx, bucket, "dir/a b", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	if b, err := io.ReadAll(obj); err != nil || string(b) != "hello" {
		t.Fatalf("read back %q, %v", b, err)
	}
	for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil || o.Key != "dir/a b" {
			t.Fatalf("list: %+v", o)
		}
	}
	if p.Requests(OpPutObject) != 1 || p.Requests(OpList) == 0 {
		t.Fatalf("requests seen: %v", p.Counts())
	}
}
