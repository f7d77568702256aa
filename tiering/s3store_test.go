package tiering

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/stratastream/strata/segment/poll"
	"github.com/stratastream/strata/tiering/miniotest"
)

// newS3Store returns a store on a fresh bucket of m, under a prefix.
func newS3Store(t *testing.T, m *miniotest.Server, tweak func(*S3Config)) (*S3Store, string) {
	t.Helper()
	bucket := m.NewBucket(t)
	cfg := S3Config{
		Endpoint: m.Endpoint(), Bucket: bucket, Prefix: "/strata/test/",
		AccessKeyID: miniotest.AccessKey, SecretAccessKey: miniotest.SecretKey,
		PartSize: 5 << 20, MaxAttempts: 2, MaxBackoff: 50 * time.Millisecond,
		RequestTimeout: 10 * time.Second, DialTimeout: time.Second,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	s, err := NewS3Store(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, bucket
}

func TestS3StoreContract(t *testing.T) {
	m := miniotest.Start(t)
	testStoreContract(t, func(t *testing.T) ObjectStore {
		s, _ := newS3Store(t, m, nil)
		return s
	})
}

// TestS3StorePrefix checks that keys land under the prefix in the bucket,
// read back with minio-go as an independent client.
func TestS3StorePrefix(t *testing.T) {
	m := miniotest.Start(t)
	s, bucket := newS3Store(t, m, nil)
	mustPut(t, s, "t/0/manifest", []byte("{}"), PutCondition{})
	if got := minioRead(t, m, bucket, "strata/test/t/0/manifest"); string(got) != "{}" {
		t.Fatalf("minio-go read %q", got)
	}
}

// minioRead reads a whole object with minio-go, independently of S3Store.
func minioRead(t *testing.T, m *miniotest.Server, bucket, key string) []byte {
	t.Helper()
	obj, err := m.Client().GetObject(testCtx(t), bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		t.Fatalf("minio-go read %s: %v", key, err)
	}
	return b
}

// TestS3StoreCheck covers the three misconfigurations the broker must name
// at start: a missing bucket, refused credentials, an unreachable endpoint.
func TestS3StoreCheck(t *testing.T) {
	m := miniotest.Start(t)
	ok, _ := newS3Store(t, m, nil)
	if err := ok.Check(testCtx(t)); err != nil {
		t.Fatalf("check of a good store: %v", err)
	}
	for i, tc := range []struct {
		tweak func(*S3Config)
		is    error
		says  string
	}{
		{func(c *S3Config) { c.Bucket = "no-such-bucket" }, ErrBucketNotFound, "does not exist"},
		{func(c *S3Config) { c.SecretAccessKey = "wrong-secret" }, ErrAccessDenied, "credentials refused"},
		{func(c *S3Config) { c.AccessKeyID = "nobody" }, ErrAccessDenied, "credentials refused"},
		{func(c *S3Config) { c.Endpoint = "http://127.0.0.1:1" }, ErrUnavailable, "unreachable"},
	} {
		s, _ := newS3Store(t, m, tc.tweak)
		err := s.Check(testCtx(t))
		if !errors.Is(err, tc.is) || !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("#%d: got %v, want %v saying %q", i, err, tc.is, tc.says)
		}
		// Data operations fail the same way, as retriable.
		if _, err := s.Put(testCtx(t), "x/y", strings.NewReader("z"), 1, PutCondition{}); !errors.Is(err, ErrUnavailable) {
			t.Errorf("#%d: put: %v, want unavailable", i, err)
		}
	}
}

// TestS3StoreOutage stops MinIO: operations fail with ErrUnavailable, and
// work again after a restart. (That RequestTimeout bounds them,
// TestS3StoreUnresponsive shows.)
func TestS3StoreOutage(t *testing.T) {
	m := miniotest.Start(t)
	s, _ := newS3Store(t, m, nil)
	mustPut(t, s, "o/a", []byte("a"), PutCondition{})
	m.Stop()
	if _, err := s.Stat(testCtx(t), "o/a"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("stat during outage: %v", err)
	}
	if _, err := s.Put(testCtx(t), "o/b", strings.NewReader("b"), 1, PutCondition{}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("put during outage: %v", err)
	}
	m.Restart(t)
	// Work again: a just-restarted MinIO may still answer a request or
	// two with 503 (ErrUnavailable, which callers retry).
	var got []byte
	poll.Until(t, 30*time.Second, "a read after the restart", func() bool {
		rc, err := s.Get(testCtx(t), "o/a", 0, -1)
		if err != nil {
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("get after restart: %v", err)
			}
			return false
		}
		defer rc.Close()
		got, err = io.ReadAll(rc)
		return err == nil
	})
	if string(got) != "a" {
		t.Fatalf("after restart: %q", got)
	}
}

// TestS3StoreUnresponsive: against an endpoint that accepts connections
// and never answers, operations whose caller sets no deadline give up by
// themselves, RequestTimeout bounding them, with ErrUnavailable. An
// operation the bound missed would never return; the test's wait for
// them is a minute, far beyond the bound.
func TestS3StoreUnresponsive(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn // held open, never read or answered
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	s, err := NewS3Store(context.Background(), S3Config{
		Endpoint: "http://" + ln.Addr().String(), Bucket: "b", AccessKeyID: "k", SecretAccessKey: "s",
		MaxAttempts: 2, MaxBackoff: 10 * time.Millisecond, RequestTimeout: 300 * time.Millisecond, DialTimeout: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background() // no deadline: only the store's bound ends a call
	for _, op := range []struct {
		name string
		call func() error
	}{
		{"stat", func() error { _, err := s.Stat(ctx, "o/a"); return err }},
		{"put", func() error {
			_, err := s.Put(ctx, "o/b", strings.NewReader("b"), 1, PutCondition{})
			return err
		}},
		{"get", func() error {
			rc, err := s.Get(ctx, "o/a", 0, -1)
			if err == nil {
				_, err = io.ReadAll(rc)
				if cerr := rc.Close(); err == nil {
					err = cerr
				}
			}
			return err
		}},
	} {
		done := make(chan error, 1)
		go func() { done <- op.call() }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrUnavailable) {
				t.Errorf("%s: got %v, want ErrUnavailable", op.name, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s did not return: RequestTimeout does not bound it", op.name)
		}
	}
}
