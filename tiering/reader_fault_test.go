package tiering

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"

	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/tiering/miniotest"
	"github.com/stratastream/strata/tiering/s3fault"
)

// Remote reads through a faulty store (tiering/s3fault in front of a
// real MinIO): a read returns the right bytes or a retriable error,
// never wrong or partial batches; the chunk cache and the index cache
// never keep what a broken GET brought; reads recover when the store
// does.

// uploadFixture copies the fixture's objects into the store.
func uploadFixture(t *testing.T, f *remoteFixture, s ObjectStore) {
	t.Helper()
	f.store.mu.Lock()
	objects := make(map[string][]byte, len(f.store.objects))
	for k, v := range f.store.objects {
		objects[k] = v
	}
	f.store.mu.Unlock()
	for k, v := range objects {
		mustPut(t, s, k, v, PutCondition{})
	}
}

// checkCachedChunks fails unless every ready chunk in r's cache is whole
// and holds exactly the bytes of its span of the fixture's segment.
func checkCachedChunks(t *testing.T, r *RemoteReader, f *remoteFixture) int {
	t.Helper()
	segOf := map[string]int{}
	for i := range f.m.Segments {
		segOf[chunkID(f.logKey(i), f.m.Segments[i].NextOffset)] = i
	}
	type ready struct {
		key  chunkKey
		size int64
		file *os.File
	}
	var chunks []ready
	r.cache.mu.Lock()
	for _, e := range r.cache.mu.entries {
		if e.state == chunkReady {
			chunks = append(chunks, ready{e.key, e.size, e.file})
		}
	}
	r.cache.mu.Unlock()
	for _, c := range chunks {
		seg, ok := segOf[c.key.object]
		if !ok {
			t.Fatalf("cached chunk of unknown object %s", c.key.object)
		}
		v, ok := r.indexes.peek(indexCacheKey(f.m.Prefix(), &f.m.Segments[seg], SuffixIndex))
		if !ok {
			continue // its index was evicted; the chunk is checked by size only
		}
		span := v.(*remoteIndex).chunks[c.key.index]
		want := f.logs[seg][span.start:span.end]
		got := make([]byte, c.size)
		n, err := c.file.ReadAt(got, 0)
		if c.size != span.end-span.start || n != len(want) || !bytes.Equal(got[:n], want) {
			t.Fatalf("cached chunk %d of segment %d: %d bytes (size %d, read %d, %v), want the %d bytes [%d, %d)",
				c.key.index, seg, len(got), c.size, n, err, len(want), span.start, span.end)
		}
		if fi, err := c.file.Stat(); err != nil || fi.Size() != c.size {
			t.Fatalf("cached chunk %d of segment %d: file of %v bytes (%v), chunk %d", c.key.index, seg, fi.Size(), err, c.size)
		}
	}
	return len(chunks)
}

// checkCachedIndexes fails unless every offset index in r's index cache
// has all the entries of the segment's .index object.
func checkCachedIndexes(t *testing.T, r *RemoteReader, f *remoteFixture) {
	t.Helper()
	for i := range f.m.Segments {
		seg := &f.m.Segments[i]
		v, ok := r.indexes.peek(indexCacheKey(f.m.Prefix(), seg, SuffixIndex))
		if !ok {
			continue
		}
		f.store.mu.Lock()
		raw := f.store.objects[f.m.SegmentKey(seg, SuffixIndex)]
		f.store.mu.Unlock()
		want := parseOffsetIndex(raw, seg.BaseOffset, seg.NextOffset, seg.Size).Len()
		if got := v.(*remoteIndex).numEntries(); got != want {
			t.Fatalf("cached offset index of segment %d has %d entries, the object %d", i, got, want)
		}
	}
}

// faultyReplay reads the whole remote log from its start, retrying a read
// that fails (at most tries times in a row), and returns the bytes and
// how many reads failed. Every failure must be a retriable store error.
func faultyReplay(t *testing.T, r *RemoteReader, f *remoteFixture, maxBytes, tries int) ([]byte, int) {
	t.Helper()
	var out []byte
	failed := 0
	for off, streak := f.m.LogStartOffset, 0; off < f.m.EndOffset(); {
		rs, err := r.Read(context.Background(), f.key, f.m, off, maxBytes)
		if err != nil {
			if !errors.Is(err, ErrUnavailable) || segment.IsCorrupt(err) {
				t.Fatalf("read at %d: %v; want a retriable store error", off, err)
			}
			failed++
			if streak++; streak > tries {
				t.Fatalf("read at %d failed %d times in a row: %v", off, streak, err)
			}
			continue
		}
		streak = 0
		b, err := rs.Copy()
		rs.Release()
		if err != nil {
			t.Fatal(err)
		}
		want := f.allLogBytes()[len(out):]
		if len(b) == 0 || len(b) > len(want) || !bytes.Equal(b, want[:len(b)]) {
			t.Fatalf("read at %d returned %d bytes that are not the log's next", off, len(b))
		}
		out = append(out, b...)
		off = rs.NextOffset
	}
	return out, failed
}

func TestRemoteReaderS3Faults(t *testing.T) {
	m := miniotest.Start(t)
	fs := newFaultyS3(t, m, 5, nil)
	f := buildFixture(t, defaultFixtureOpts())
	uploadFixture(t, f, fs.direct)
	want := f.allLogBytes()
	gets := []s3fault.Op{s3fault.OpGetObject}
	for _, tc := range []struct {
		name  string
		rules []s3fault.Rule
	}{
		{"slowdown", []s3fault.Rule{{Fault: s3fault.SlowDown, Ops: gets, Fraction: 0.4}}},
		{"internal error", []s3fault.Rule{{Fault: s3fault.InternalError, Ops: gets, Fraction: 0.4}}},
		{"reset mid-body", []s3fault.Rule{{Fault: s3fault.Reset, Ops: gets, Fraction: 0.3, After: 3000}}},
		{"truncated", []s3fault.Rule{{Fault: s3fault.Truncate, Ops: gets, Fraction: 0.3, After: 5000}}},
		{"short body", []s3fault.Rule{{Fault: s3fault.ShortBody, Ops: gets, Fraction: 0.3, After: 5000}}},
		{"short index", []s3fault.Rule{{Fault: s3fault.ShortBody, Ops: gets, Key: SuffixIndex, Fraction: 0.5, After: 40}}},
		{"refused", []s3fault.Rule{{Fault: s3fault.Refuse, Ops: gets, Fraction: 0.3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs.set(t, tc.rules...)
			before := fs.proxy.Counts()
			r := newTestReader(t, fs.store, ReaderConfig{ChunkBytes: 8 << 10, ReadAheadRunChunks: 2, GetTimeout: 30e9})
			got, failed := faultyReplay(t, r, f, 20<<10, 20)
			if !bytes.Equal(got, want) {
				t.Fatalf("replay under faults: %d bytes, want %d", len(got), len(want))
			}
			waitReadAheadIdle(t, r)
			cached := checkCachedChunks(t, r, f)
			checkCachedIndexes(t, r, f)
			injected := injectedSince(fs.proxy, before)
			if injected == 0 {
				t.Fatal("no fault was injected")
			}
			st := r.Stats()
			t.Logf("%s: %d faults injected, %d reads failed, %d chunks cached and checked, load errors %d, read-ahead failed %d",
				tc.name, injected, failed, cached, st.Cache.LoadErrors, st.ReadAheadFailed)

			// Healthy again: a replay through the same cache is whole.
			fs.proxy.Clear()
			if got := replay(t, r, f, f.m.LogStartOffset, 20<<10); !bytes.Equal(got, want) {
				t.Fatalf("replay after the faults: %d bytes, want %d", len(got), len(want))
			}
			waitReadAheadIdle(t, r)
			checkCachedChunks(t, r, f)
			checkCachedIndexes(t, r, f)
		})
	}
	t.Logf("store errors: %v", fs.store.StoreErrors())
}

// injectedSince is how many faults the proxy injected since before.
func injectedSince(p *s3fault.Proxy, before s3fault.Counts) int64 {
	var n int64
	for k, v := range p.Counts().Injected {
		n += v - before.Injected[k]
	}
	return n
}

// TestRemoteReaderStoreDown: with the store refusing every request, reads
// fail with a retriable error and read-ahead fetches nothing; once it is
// back, the same reader continues from where it stopped.
func TestRemoteReaderStoreDown(t *testing.T) {
	m := miniotest.Start(t)
	fs := newFaultyS3(t, m, 6, nil)
	f := buildFixture(t, defaultFixtureOpts())
	uploadFixture(t, f, fs.direct)
	want := f.allLogBytes()
	r := newTestReader(t, fs.store, ReaderConfig{ChunkBytes: 8 << 10, ReadAheadRunChunks: 2})

	// Half the log, then the store goes down.
	var got []byte
	off := f.m.LogStartOffset
	for len(got) < len(want)/2 {
		rs, err := r.Read(context.Background(), f.key, f.m, off, 16<<10)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := rs.Copy()
		rs.Release()
		got, off = append(got, b...), rs.NextOffset
	}
	waitReadAheadIdle(t, r)
	fs.set(t, s3fault.Rule{Fault: s3fault.Refuse})
	failures := 0
	for failures < 3 {
		rs, err := r.Read(context.Background(), f.key, f.m, off, 16<<10)
		if err != nil {
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("read at %d with the store down: %v", off, err)
			}
			failures++
			continue
		}
		// Chunks read ahead before the outage still serve.
		b, _ := rs.Copy()
		rs.Release()
		got, off = append(got, b...), rs.NextOffset
		if off >= f.m.EndOffset() {
			t.Fatal("the whole log was served from the cache; the outage was never felt")
		}
	}
	fs.proxy.Clear()
	for off < f.m.EndOffset() {
		rs, err := r.Read(context.Background(), f.key, f.m, off, 16<<10)
		if err != nil {
			t.Fatalf("read at %d after the store came back: %v", off, err)
		}
		b, _ := rs.Copy()
		rs.Release()
		got, off = append(got, b...), rs.NextOffset
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("replay across the outage: %d bytes, want %d", len(got), len(want))
	}
	checkCachedChunks(t, r, f)
}

// TestRemoteReaderResumesBrokenBody: a chunk or index GET whose body
// breaks once (reset mid-body, cut short, answered short) is resumed at
// once and the read succeeds with the right bytes; one that keeps
// breaking fails after a single resumption, not a storm of GETs.
func TestRemoteReaderResumesBrokenBody(t *testing.T) {
	m := miniotest.Start(t)
	fs := newFaultyS3(t, m, 11, nil)
	f := buildFixture(t, defaultFixtureOpts())
	uploadFixture(t, f, fs.direct)
	gets := []s3fault.Op{s3fault.OpGetObject}
	for i, rule := range []s3fault.Rule{
		{Fault: s3fault.Reset, Ops: gets, Key: SuffixLog, After: 3000, Limit: 1},
		{Fault: s3fault.Truncate, Ops: gets, Key: SuffixLog, After: 5000, Limit: 1},
		{Fault: s3fault.ShortBody, Ops: gets, Key: SuffixLog, After: 6000, Limit: 1},
		{Fault: s3fault.Reset, Ops: gets, Key: SuffixIndex, After: 100, Limit: 1},
	} {
		r := newTestReader(t, fs.store, ReaderConfig{ChunkBytes: 16 << 10, ReadAheadChunks: -1})
		fs.set(t, rule)
		rs, err := r.Read(context.Background(), f.key, f.m, f.m.LogStartOffset, 64<<10)
		if err != nil {
			t.Fatalf("#%d %v: read: %v", i, rule, err)
		}
		checkSlice(t, f, f.m.LogStartOffset, 64<<10, rs)
		rs.Release()
		if fs.proxy.InjectedTotal(rule.Fault) == 0 || r.Stats().Resumed != 1 {
			t.Fatalf("#%d %v: injected %d, resumed %d; want one fault, resumed once", i, rule, fs.proxy.InjectedTotal(rule.Fault), r.Stats().Resumed)
		}
		checkCachedChunks(t, r, f)
		checkCachedIndexes(t, r, f)
		fs.proxy.Clear()
	}

	// A body that always breaks: two GETs, then a retriable error.
	r := newTestReader(t, fs.store, ReaderConfig{ChunkBytes: 16 << 10, ReadAheadChunks: -1})
	if _, err := r.segmentIndex(context.Background(), f.m.Prefix(), &f.m.Segments[0]); err != nil {
		t.Fatal(err)
	}
	fs.set(t, s3fault.Rule{Fault: s3fault.Reset, Ops: gets, Key: SuffixLog, After: 3000})
	before := fs.proxy.Requests(s3fault.OpGetObject)
	if _, err := r.Read(context.Background(), f.key, f.m, f.m.LogStartOffset, 64<<10); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("read with every body reset: %v", err)
	}
	if n := fs.proxy.Requests(s3fault.OpGetObject) - before; n != 2 {
		t.Fatalf("a chunk whose every body breaks took %d GETs, want 2", n)
	}
	if st := r.Stats(); st.Cache.Chunks != 0 {
		t.Fatalf("a chunk that never loaded is cached: %+v", st.Cache)
	}
}
