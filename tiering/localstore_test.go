package tiering

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLocalStoreContract(t *testing.T) {
	testStoreContract(t, func(t *testing.T) ObjectStore {
		s, err := NewLocalStore(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestLocalStoreLayout checks that objects are plain files under the
// directory, that temporary files and locks stay out of listings, and that
// reserved names cannot be used as keys.
func TestLocalStoreLayout(t *testing.T) {
	dir := t.TempDir()
	s, err := NewLocalStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "topic/0/00000000000000000000-1-ab.log", []byte("batches"), PutCondition{})
	b, err := os.ReadFile(filepath.Join(dir, "topic", "0", "00000000000000000000-1-ab.log"))
	if err != nil || string(b) != "batches" {
		t.Fatalf("file: %q %v", b, err)
	}
	// A temporary file left by a crash mid-put is not an object.
	if err := os.WriteFile(filepath.Join(dir, "topic", "0", localTempPrefix+"123"), []byte("torn"), 0o644); err != nil {
		t.Fatal(err)
	}
	objs, err := s.List(testCtx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].Key != "topic/0/00000000000000000000-1-ab.log" {
		t.Fatalf("list: %+v", objs)
	}
	for _, key := range []string{"topic/0/" + localLockName, "topic/" + localTempPrefix + "x/y"} {
		if _, err := s.Put(testCtx(t), key, strings.NewReader("x"), 1, PutCondition{}); err == nil {
			t.Errorf("put %q: reserved name accepted", key)
		}
	}
}

// TestLocalStoreETagNeverRepeats rewrites one key with the same bytes
// quickly: each version must get a new ETag, or a stale If-Match could
// succeed.
func TestLocalStoreETagNeverRepeats(t *testing.T) {
	s, err := NewLocalStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := range 200 {
		info := mustPut(t, s, "k/manifest", []byte("same"), PutCondition{})
		if seen[info.ETag] {
			t.Fatalf("#%d: etag %s repeated", i, info.ETag)
		}
		seen[info.ETag] = true
	}
}

// TestLocalStoreSharedDirectory runs conditional puts from two stores on
// one directory, as two broker processes on one machine would: the
// directory lock makes exactly one of them win.
func TestLocalStoreSharedDirectory(t *testing.T) {
	dir := t.TempDir()
	a, err := NewLocalStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewLocalStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	base := mustPut(t, a, "p/manifest", []byte("v0"), PutCondition{})
	_, errA := a.Put(testCtx(t), "p/manifest", bytes.NewReader([]byte("a")), 1, PutCondition{IfMatch: base.ETag})
	_, errB := b.Put(testCtx(t), "p/manifest", bytes.NewReader([]byte("b")), 1, PutCondition{IfMatch: base.ETag})
	if (errA == nil) == (errB == nil) {
		t.Fatalf("both or neither won: %v / %v", errA, errB)
	}
}

func TestOpenStore(t *testing.T) {
	c := StoreConfig{Dir: t.TempDir()}
	if c.UsesS3() {
		t.Fatalf("%+v uses S3", c)
	}
	s, err := OpenStore(testCtx(t), c)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.(*LocalStore); !ok {
		t.Fatalf("%T, want *LocalStore", s)
	}
	if err := CheckStore(testCtx(t), s); err != nil {
		t.Fatal(err)
	}

	c.S3.Endpoint = "http://127.0.0.1:9000"
	if _, err := OpenStore(testCtx(t), c); err == nil {
		t.Fatal("endpoint without a bucket accepted")
	}
	pathStyle := false
	c.S3.Bucket, c.S3.PathStyle, c.S3.Prefix = "b", &pathStyle, "p"
	if !c.UsesS3() {
		t.Fatalf("%+v does not use S3", c)
	}
	if s, err := OpenStore(testCtx(t), c); err != nil {
		t.Fatal(err)
	} else if _, ok := s.(*S3Store); !ok {
		t.Fatalf("%T, want *S3Store", s)
	}
	if _, err := OpenStore(testCtx(t), StoreConfig{}); err == nil {
		t.Fatal("a config with neither a directory nor a bucket accepted")
	}
}
