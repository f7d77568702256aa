package tiering

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// testStoreContract runs the ObjectStore contract against a fresh, empty
// store from newStore. LocalStore and S3Store (on MinIO) both pass it.
func testStoreContract(t *testing.T, newStore func(t *testing.T) ObjectStore) {
	t.Run("PutGetStat", func(t *testing.T) { contractPutGetStat(t, newStore(t)) })
	t.Run("Ranges", func(t *testing.T) { contractRanges(t, newStore(t)) })
	t.Run("NotFound", func(t *testing.T) { contractNotFound(t, newStore(t)) })
	t.Run("List", func(t *testing.T) { contractList(t, newStore(t)) })
	t.Run("Conditional", func(t *testing.T) { contractConditional(t, newStore(t)) })
	t.Run("ConditionalRace", func(t *testing.T) { contractConditionalRace(t, newStore(t)) })
	t.Run("Large", func(t *testing.T) { contractLarge(t, newStore(t)) })
	t.Run("BadInput", func(t *testing.T) { contractBadInput(t, newStore(t)) })
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustPut(t *testing.T, s ObjectStore, key string, data []byte, cond PutCondition) ObjectInfo {
	t.Helper()
	info, err := s.Put(testCtx(t), key, bytes.NewReader(data), int64(len(data)), cond)
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	return info
}

func mustGet(t *testing.T, s ObjectStore, key string, off, length int64) []byte {
	t.Helper()
	rc, err := s.Get(testCtx(t), key, off, length)
	if err != nil {
		t.Fatalf("get %s %d+%d: %v", key, off, length, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s %d+%d: %v", key, off, length, err)
	}
	return b
}

func contractPutGetStat(t *testing.T, s ObjectStore) {
	data := []byte("hello, tiered world")
	info := mustPut(t, s, "t/0/a.log", data, PutCondition{})
	if info.ETag == "" || info.Size != int64(len(data)) || info.Key != "t/0/a.log" {
		t.Fatalf("put info %+v", info)
	}
	if got := mustGet(t, s, "t/0/a.log", 0, -1); !bytes.Equal(got, data) {
		t.Fatalf("get: got %q, want %q", got, data)
	}
	st, err := s.Stat(testCtx(t), "t/0/a.log")
	if err != nil {
		t.Fatal(err)
	}
	if st.Size != int64(len(data)) || st.ETag != info.ETag || st.ModTime.IsZero() {
		t.Fatalf("stat %+v, put %+v", st, info)
	}
	// Replacing changes the ETag; an empty object is an object.
	info2 := mustPut(t, s, "t/0/a.log", []byte("other"), PutCondition{})
	if info2.ETag == info.ETag {
		t.Fatalf("etag unchanged after overwrite: %s", info2.ETag)
	}
	if got := mustGet(t, s, "t/0/a.log", 0, -1); string(got) != "other" {
		t.Fatalf("after overwrite got %q", got)
	}
	mustPut(t, s, "t/0/empty", nil, PutCondition{})
	if got := mustGet(t, s, "t/0/empty", 0, -1); len(got) != 0 {
		t.Fatalf("empty object read %q", got)
	}
	if st, err := s.Stat(testCtx(t), "t/0/empty"); err != nil || st.Size != 0 {
		t.Fatalf("stat empty: %+v %v", st, err)
	}
	if err := s.Delete(testCtx(t), "t/0/a.log"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(testCtx(t), "t/0/a.log", 0, -1); !IsNotFound(err) {
		t.Fatalf("get after delete: %v, want not found", err)
	}
}

func contractRanges(t *testing.T, s ObjectStore) {
	data := []byte("0123456789abcdefghij")
	mustPut(t, s, "r/obj", data, PutCondition{})
	for i, tc := range []struct {
		off, length int64
		want        string
	}{
		{0, -1, string(data)},
		{0, 5, "01234"},
		{3, 5, "34567"},
		{10, -1, "abcdefghij"},
		{18, 10, "ij"}, // past the end: what exists
		{19, 1, "j"},   // last byte
		{20, -1, ""},   // at the end
		{25, 3, ""},    // beyond the end
		{4, 0, ""},     // empty range
		{0, 20, string(data)},
	} {
		if got := mustGet(t, s, "r/obj", tc.off, tc.length); string(got) != tc.want {
			t.Errorf("#%d: get %d+%d: got %q, want %q", i, tc.off, tc.length, got, tc.want)
		}
	}
}

func contractNotFound(t *testing.T, s ObjectStore) {
	ctx := testCtx(t)
	if _, err := s.Get(ctx, "nf/missing", 0, -1); !IsNotFound(err) {
		t.Errorf("get: %v, want not found", err)
	}
	if _, err := s.Get(ctx, "nf/missing", 5, 10); !IsNotFound(err) {
		t.Errorf("ranged get: %v, want not found", err)
	}
	if _, err := s.Get(ctx, "nf/missing", 0, 0); !IsNotFound(err) {
		t.Errorf("empty get: %v, want not found", err)
	}
	if _, err := s.Stat(ctx, "nf/missing"); !IsNotFound(err) {
		t.Errorf("stat: %v, want not found", err)
	}
	if err := s.Delete(ctx, "nf/missing"); err != nil {
		t.Errorf("delete of a missing object: %v", err)
	}
	if err := s.Delete(ctx, "nowhere/at/all"); err != nil {
		t.Errorf("delete under a missing prefix: %v", err)
	}
	if l, err := s.List(ctx, "nf/"); err != nil || len(l) != 0 {
		t.Errorf("list of a missing prefix: %v %v", l, err)
	}
}

func contractList(t *testing.T, s ObjectStore) {
	keys := []string{"l/1/b", "l/1/a", "l/1/sub/c", "l/10/x", "l/2/a", "l-other/a", "m/a"}
	for _, k := range keys {
		mustPut(t, s, k, []byte(k), PutCondition{})
	}
	for i, tc := range []struct {
		prefix string
		want   []string
	}{
		{"l/1/", []string{"l/1/a", "l/1/b", "l/1/sub/c"}},
		{"l/1", []string{"l/1/a", "l/1/b", "l/1/sub/c", "l/10/x"}},
		{"l/", []string{"l/1/a", "l/1/b", "l/1/sub/c", "l/10/x", "l/2/a"}},
		{"l", []string{"l-other/a", "l/1/a", "l/1/b", "l/1/sub/c", "l/10/x", "l/2/a"}},
		{"", []string{"l-other/a", "l/1/a", "l/1/b", "l/1/sub/c", "l/10/x", "l/2/a", "m/a"}},
		{"l/1/s", []string{"l/1/sub/c"}},
		{"zzz", nil},
	} {
		got, err := s.List(testCtx(t), tc.prefix)
		if err != nil {
			t.Fatalf("#%d: list %q: %v", i, tc.prefix, err)
		}
		var names []string
		for _, o := range got {
			names = append(names, o.Key)
			if o.Size != int64(len(o.Key)) || o.ETag == "" {
				t.Errorf("#%d: %+v: wrong size or no etag", i, o)
			}
		}
		if fmt.Sprint(names) != fmt.Sprint(tc.want) {
			t.Errorf("#%d: list %q: got %v, want %v", i, tc.prefix, names, tc.want)
		}
	}
}

func contractConditional(t *testing.T, s ObjectStore) {
	ctx := testCtx(t)
	put := func(data string, cond PutCondition) (ObjectInfo, error) {
		return s.Put(ctx, "c/manifest", strings.NewReader(data), int64(len(data)), cond)
	}
	if _, err := put("v0", PutCondition{IfMatch: `"nope"`}); !errors.Is(err, ErrPreconditionFailed) {
		t.Fatalf("if-match on a missing object: %v, want precondition failed", err)
	}
	v1, err := put("v1", PutCondition{IfNoneMatch: true})
	if err != nil {
		t.Fatalf("if-none-match on a missing object: %v", err)
	}
	if _, err := put("v1b", PutCondition{IfNoneMatch: true}); !errors.Is(err, ErrPreconditionFailed) {
		t.Fatalf("if-none-match on an existing object: %v, want precondition failed", err)
	}
	v2, err := put("v2", PutCondition{IfMatch: v1.ETag})
	if err != nil {
		t.Fatalf("if-match with the current etag: %v", err)
	}
	if _, err := put("v3", PutCondition{IfMatch: v1.ETag}); !errors.Is(err, ErrPreconditionFailed) {
		t.Fatalf("if-match with a stale etag: %v, want precondition failed", err)
	}
	// Same content as before still gets through with the current ETag.
	if _, err := put("v2", PutCondition{IfMatch: v2.ETag}); err != nil {
		t.Fatalf("if-match rewrite: %v", err)
	}
	if got := mustGet(t, s, "c/manifest", 0, -1); string(got) != "v2" {
		t.Fatalf("content %q, want v2", got)
	}
}

func contractConditionalRace(t *testing.T, s ObjectStore) {
	ctx := testCtx(t)
	const writers = 8
	race := func(key string, cond func() PutCondition) int {
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for w := range writers {
			wg.Go(func() {
				data := fmt.Sprintf("writer %d", w)
				_, err := s.Put(ctx, key, strings.NewReader(data), int64(len(data)), cond())
				switch {
				case err == nil:
					mu.Lock()
					wins++
					mu.Unlock()
				case !errors.Is(err, ErrPreconditionFailed):
					t.Errorf("writer %d: %v", w, err)
				}
			})
		}
		wg.Wait()
		return wins
	}
	if wins := race("race/create", func() PutCondition { return PutCondition{IfNoneMatch: true} }); wins != 1 {
		t.Errorf("if-none-match race: %d winners, want 1", wins)
	}
	base := mustPut(t, s, "race/update", []byte("base"), PutCondition{})
	if wins := race("race/update", func() PutCondition { return PutCondition{IfMatch: base.ETag} }); wins != 1 {
		t.Errorf("if-match race: %d winners, want 1", wins)
	}
}

func contractLarge(t *testing.T, s ObjectStore) {
	ctx := testCtx(t)
	data := make([]byte, 13<<20+12345) // three parts at a 5 MiB part size
	r := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	// A reader without random access takes the buffered path.
	if _, err := s.Put(ctx, "big/seq", io.MultiReader(bytes.NewReader(data)), int64(len(data)), PutCondition{}); err != nil {
		t.Fatalf("put sequential: %v", err)
	}
	// A section of a larger reader uploads only its bytes, from its
	// current position.
	br := bytes.NewReader(append([]byte("junk"), data...))
	if _, err := br.Seek(4, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "big/seek", br, int64(len(data)), PutCondition{IfNoneMatch: true}); err != nil {
		t.Fatalf("put seekable: %v", err)
	}
	for _, key := range []string{"big/seq", "big/seek"} {
		if got := mustGet(t, s, key, 0, -1); !bytes.Equal(got, data) {
			t.Fatalf("%s: whole object differs (%d bytes, want %d)", key, len(got), len(data))
		}
		off := int64(5<<20 - 7)
		if got := mustGet(t, s, key, off, 1<<20); !bytes.Equal(got, data[off:off+1<<20]) {
			t.Fatalf("%s: range across a part boundary differs", key)
		}
	}
}

func contractBadInput(t *testing.T, s ObjectStore) {
	ctx := testCtx(t)
	for _, key := range []string{"", "/abs", "a//b", "../up", "a/./b", "a/../b"} {
		if _, err := s.Put(ctx, key, strings.NewReader("x"), 1, PutCondition{}); err == nil {
			t.Errorf("put %q: accepted", key)
		}
	}
	// A body shorter than its size fails and leaves nothing behind.
	if _, err := s.Put(ctx, "bad/short", strings.NewReader("abc"), 10, PutCondition{}); err == nil {
		t.Error("short body accepted")
	}
	if _, err := s.Stat(ctx, "bad/short"); !IsNotFound(err) {
		t.Errorf("after a short put: %v, want not found", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Put(cctx, "bad/canceled", strings.NewReader("abc"), 3, PutCondition{}); err == nil {
		t.Error("put with a canceled context succeeded")
	}
}
