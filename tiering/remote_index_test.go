package tiering

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"

	"github.com/stratastream/strata/segment"
)

func indexBytes(entries ...[2]uint32) []byte {
	var b []byte
	for _, e := range entries {
		b = binary.BigEndian.AppendUint32(b, e[0])
		b = binary.BigEndian.AppendUint32(b, e[1])
	}
	return b
}

func TestParseOffsetIndex(t *testing.T) {
	const base, next, size = 100, 200, 10_000
	valid := indexBytes([2]uint32{5, 1000}, [2]uint32{9, 2000}, [2]uint32{30, 5000})
	for i, tc := range []struct {
		raw  []byte
		want int // valid entries
	}{
		{nil, 0},
		{valid, 3},
		{append(bytes.Clone(valid), make([]byte, 64)...), 3},                 // preallocated zero tail
		{append(bytes.Clone(valid), 1, 2, 3), 3},                             // partial entry
		{append(bytes.Clone(valid), indexBytes([2]uint32{30, 6000})...), 3},  // offset does not grow
		{append(bytes.Clone(valid), indexBytes([2]uint32{31, 4000})...), 3},  // position does not grow
		{append(bytes.Clone(valid), indexBytes([2]uint32{40, size})...), 3},  // position past the object
		{append(bytes.Clone(valid), indexBytes([2]uint32{100, 9000})...), 3}, // offset past the segment
		{append(bytes.Clone(valid), indexBytes([2]uint32{99, 9000})...), 4},  // last offset of the segment
		{indexBytes([2]uint32{0, 0}, [2]uint32{5, 1000}), 0},                 // starts with zeros
		{indexBytes([2]uint32{0, 100}), 0},                                   // relative offset 0 is never indexed
	} {
		got := parseOffsetIndex(tc.raw, base, next, size)
		if len(got) != tc.want*segment.IndexEntrySize || !bytes.Equal(got, tc.raw[:len(got)]) {
			t.Errorf("#%d: got %d valid entries, want %d", i, len(got)/segment.IndexEntrySize, tc.want)
		}
	}
}

func TestRemoteIndexChunks(t *testing.T) {
	seg := &RemoteSegment{BaseOffset: 1000, NextOffset: 2000, Size: 10_000}
	raw := indexBytes([2]uint32{10, 900}, [2]uint32{20, 1900}, [2]uint32{30, 2100}, [2]uint32{40, 7000}, [2]uint32{50, 8100})
	for i, tc := range []struct {
		raw   []byte
		chunk int64
		want  []chunkSpan
	}{
		{raw, 2000, []chunkSpan{{0, 1900, 1020}, {1900, 2100, 1030}, {2100, 7000, 1040}, {7000, 10_000, 2000}}},
		{raw, 1000, []chunkSpan{{0, 900, 1010}, {900, 1900, 1020}, {1900, 2100, 1030}, {2100, 7000, 1040}, {7000, 8100, 1050}, {8100, 10_000, 2000}}},
		{raw, 100_000, []chunkSpan{{0, 10_000, 2000}}},
		{nil, 1000, []chunkSpan{{0, 10_000, 2000}}}, // no index: one chunk
		{raw, 800, []chunkSpan{{0, 900, 1010}, {900, 2100, 1030}, {2100, 7000, 1040}, {7000, 8100, 1050}, {8100, 10_000, 2000}}},
	} {
		ix := newRemoteIndex("k", seg, tc.raw, tc.chunk)
		if fmt.Sprint(ix.chunks) != fmt.Sprint(tc.want) {
			t.Errorf("#%d: chunks %v, want %v", i, ix.chunks, tc.want)
		}
	}
	ix := newRemoteIndex("k", seg, raw, 2000)
	for i, tc := range []struct {
		off       int64
		wantPos   int64
		wantChunk int
	}{
		{1000, 0, 0}, {1009, 0, 0}, {1010, 900, 0}, {1019, 900, 0}, {1020, 1900, 1}, {1035, 2100, 2}, {1049, 7000, 3}, {1999, 8100, 3},
	} {
		pos := ix.floorByOffset(tc.off)
		if pos != tc.wantPos || ix.chunkFor(pos) != tc.wantChunk {
			t.Errorf("#%d: offset %d: position %d chunk %d, want %d and %d", i, tc.off, pos, ix.chunkFor(pos), tc.wantPos, tc.wantChunk)
		}
	}
}

func TestParseTimeIndex(t *testing.T) {
	entry := func(ts int64, rel uint32) []byte {
		return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, uint64(ts)), rel)
	}
	raw := bytes.Join([][]byte{entry(100, 0), entry(150, 4), entry(300, 9), make([]byte, 24)}, nil)
	ti := parseTimeIndex(raw, 1000, 1020)
	if n := len(ti.entries) / segment.TimeIndexEntrySize; n != 3 {
		t.Fatalf("%d entries, want 3", n)
	}
	for i, tc := range []struct {
		ts      int64
		wantRel uint32
		wantOK  bool
	}{
		{50, 0, false}, {100, 0, false}, {101, 0, true}, {150, 0, true}, {151, 4, true}, {1000, 9, true},
	} {
		rel, ok := ti.floorBefore(tc.ts)
		if rel != tc.wantRel || ok != tc.wantOK {
			t.Errorf("#%d: ts %d: (%d, %v), want (%d, %v)", i, tc.ts, rel, ok, tc.wantRel, tc.wantOK)
		}
	}
	if ti := parseTimeIndex(entry(100, 25), 1000, 1020); len(ti.entries) != 0 {
		t.Fatal("entry past the segment accepted")
	}
}

func TestIndexCacheBoundsAndSingleflight(t *testing.T) {
	c := newIndexCache(1000, 5)
	var loads atomic.Int32
	load := func(size int64) func(context.Context) (any, int64, error) {
		return func(context.Context) (any, int64, error) {
			loads.Add(1)
			return size, size, nil
		}
	}
	// Concurrent gets of one key, the load held until all wait on it.
	gate := make(chan struct{})
	held := func(ctx context.Context) (any, int64, error) {
		<-gate
		return load(100)(ctx)
	}
	const getters = 10
	var wg sync.WaitGroup
	for range getters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if v, err := c.get(context.Background(), "a", held); err != nil || v.(int64) != 100 {
				t.Errorf("get: %v %v", v, err)
			}
		}()
	}
	readWaitFor(t, "every get to wait for the load", func() bool { return c.hits.Load()+c.misses.Load() == getters })
	close(gate)
	wg.Wait()
	if loads.Load() != 1 || c.misses.Load() != 1 {
		t.Fatalf("%d concurrent gets made %d loads (%d misses), want 1", getters, loads.Load(), c.misses.Load())
	}
	for i := range 10 {
		c.get(context.Background(), fmt.Sprint("k", i), load(100))
	}
	c.mu.Lock()
	n, bytes := c.mu.lru.Len(), c.mu.bytes
	c.mu.Unlock()
	if n > 5 || bytes > 1000 {
		t.Fatalf("%d entries, %d bytes; bounds are 5 and 1000", n, bytes)
	}
	c.get(context.Background(), "big", load(5000)) // larger than the bound: kept alone
	c.mu.Lock()
	n = c.mu.lru.Len()
	c.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d entries after a huge one, want 1", n)
	}
	// Errors are not cached.
	boom := errors.New("boom")
	if _, err := c.get(context.Background(), "e", func(context.Context) (any, int64, error) { return nil, 0, boom }); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if v, err := c.get(context.Background(), "e", load(1)); err != nil || v.(int64) != 1 {
		t.Fatalf("after a failed load: %v %v", v, err)
	}
}

// FuzzRemoteIndex: any .index bytes give a chunk table that covers the
// object in increasing, non-empty chunks, and lookups stay within it;
// the parsed entries are a prefix of the input.
func FuzzRemoteIndex(f *testing.F) {
	f.Add(indexBytes([2]uint32{10, 900}, [2]uint32{20, 1900}), int64(10_000), int64(1000))
	f.Add([]byte{}, int64(1), int64(1))
	f.Add(make([]byte, 40), int64(100), int64(7))
	f.Fuzz(func(t *testing.T, raw []byte, size, chunk int64) {
		if size <= 0 || size > 1<<31 || chunk <= 0 || size/chunk > 1<<16 {
			return
		}
		seg := &RemoteSegment{BaseOffset: 50, NextOffset: 5000, Size: size}
		ix := newRemoteIndex("k", seg, raw, chunk)
		if !bytes.HasPrefix(raw, ix.entries) {
			t.Fatal("entries are not a prefix of the input")
		}
		at := int64(0)
		for _, c := range ix.chunks {
			if c.start != at || c.end <= c.start || c.next <= seg.BaseOffset || c.next > seg.NextOffset {
				t.Fatalf("bad chunk %v after %d", c, at)
			}
			at = c.end
		}
		if at != size {
			t.Fatalf("chunks end at %d, size %d", at, size)
		}
		for off := seg.BaseOffset; off < seg.NextOffset; off += 97 {
			pos := ix.floorByOffset(off)
			if pos < 0 || pos >= size || ix.chunkFor(pos) >= len(ix.chunks) {
				t.Fatalf("offset %d: position %d chunk %d", off, pos, ix.chunkFor(pos))
			}
		}
	})
}

func testBatch(t testing.TB, base int64, records, valueSize int) []byte {
	t.Helper()
	recs := make([]segment.Record, records)
	for i := range recs {
		v := make([]byte, valueSize)
		for j := range v {
			v[j] = byte(i + j*7)
		}
		recs[i] = segment.Record{Timestamp: int64(1000 + i), Value: v}
	}
	b, err := segment.BuildBatch(segment.BatchSpec{BaseOffset: base, Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCopyValidBatches(t *testing.T) {
	var chunk []byte
	for i := range 50 {
		chunk = append(chunk, testBatch(t, int64(i*10), 1+i%5, 100*i)...)
	}
	huge := testBatch(t, 500, 3, 1<<20) // a batch larger than the 1 MiB window
	chunk = append(chunk, huge...)
	chunk = append(chunk, testBatch(t, 503, 2, 10)...)
	corrupt := bytes.Clone(chunk)
	corrupt[len(corrupt)-len(huge)/2] ^= 1
	for i, tc := range []struct {
		src     io.Reader
		size    int64
		wantErr bool
	}{
		{bytes.NewReader(chunk), int64(len(chunk)), false},
		{iotest.OneByteReader(bytes.NewReader(chunk)), int64(len(chunk)), false},
		{iotest.HalfReader(bytes.NewReader(append(bytes.Clone(chunk), 1, 2, 3))), int64(len(chunk)), false}, // more than the chunk: ignored
		{bytes.NewReader(chunk[:len(chunk)-1]), int64(len(chunk)), true},                                    // object too short
		{bytes.NewReader(chunk), int64(len(chunk) - 1), true},                                               // last batch past the chunk
		{bytes.NewReader(chunk), int64(len(chunk) - len(huge) - 30), true},                                  // chunk ends inside a batch
		{bytes.NewReader(corrupt), int64(len(corrupt)), true},
		{bytes.NewReader(make([]byte, 100)), 100, true},
		{iotest.ErrReader(errors.New("boom")), 10, true},
	} {
		var out bytes.Buffer
		err := copyValidBatches(&out, tc.src, tc.size)
		if (err != nil) != tc.wantErr {
			t.Errorf("#%d: got error %v, want error %v", i, err, tc.wantErr)
			continue
		}
		if err == nil && !bytes.Equal(out.Bytes(), chunk[:tc.size]) {
			t.Errorf("#%d: output differs from the input", i)
		}
		if err != nil && !bytes.Equal(out.Bytes(), chunk[:out.Len()]) {
			t.Errorf("#%d: wrote %d bytes that are not a prefix of the input", i, out.Len())
		}
		if i == 6 && out.Len() >= len(chunk)-len(huge)-30 {
			t.Errorf("#%d: wrote %d bytes, past the corrupt batch", i, out.Len())
		}
	}
}

// FuzzCopyValidBatches: never panics; when it succeeds the output is the
// input and holds valid batches; whatever it wrote is a prefix of valid
// batches.
func FuzzCopyValidBatches(f *testing.F) {
	two := append(testBatch(f, 0, 2, 30), testBatch(f, 2, 1, 5)...)
	f.Add(two, int64(len(two)))
	f.Add(two[:50], int64(50))
	f.Add([]byte{}, int64(0))
	f.Fuzz(func(t *testing.T, in []byte, size int64) {
		if size < 0 || size > 1<<20 {
			return
		}
		var out bytes.Buffer
		err := copyValidBatches(&out, bytes.NewReader(in), size)
		if !bytes.HasPrefix(in, out.Bytes()) {
			t.Fatal("output is not a prefix of the input")
		}
		if verr := segment.SplitBatches(out.Bytes(), func(segment.Header, []byte) error { return nil }); verr != nil {
			t.Fatalf("wrote invalid batches: %v", verr)
		}
		if err == nil && int64(out.Len()) != size {
			t.Fatalf("success with %d of %d bytes", out.Len(), size)
		}
	})
}
