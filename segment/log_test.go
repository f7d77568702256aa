package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratastream/strata/segment/poll"
)

// lgBatch builds an uncompressed producer batch of n records at base offset
// 0: record i has timestamp ts+i and a value of valueSize bytes derived from
// seed. It is the log tests' own tiny encoder, so they do not depend on the
// codec under test elsewhere.
func lgBatch(n int, ts int64, valueSize int, seed byte) []byte {
	b := make([]byte, HeaderSize, HeaderSize+n*(valueSize+8))
	for i := range n {
		var rec []byte
		rec = append(rec, 0) // attributes
		rec = binary.AppendVarint(rec, int64(i))
		rec = binary.AppendVarint(rec, int64(i))
		rec = binary.AppendVarint(rec, -1) // null key
		rec = binary.AppendVarint(rec, int64(valueSize))
		for j := range valueSize {
			rec = append(rec, seed+byte(i)+byte(j))
		}
		rec = binary.AppendVarint(rec, 0) // headers
		b = binary.AppendVarint(b, int64(len(rec)))
		b = append(b, rec...)
	}
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-LogOverhead))
	binary.BigEndian.PutUint32(b[12:], 0xffffffff) // leader epoch -1
	b[16] = Magic
	binary.BigEndian.PutUint32(b[23:], uint32(n-1))
	binary.BigEndian.PutUint64(b[27:], uint64(ts))
	binary.BigEndian.PutUint64(b[35:], uint64(ts+int64(n)-1))
	binary.BigEndian.PutUint64(b[43:], 0xffffffffffffffff)
	binary.BigEndian.PutUint16(b[51:], 0xffff)
	binary.BigEndian.PutUint32(b[53:], 0xffffffff)
	binary.BigEndian.PutUint32(b[57:], uint32(n))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// lgConfig is a small configuration for tests: 1 KiB index interval,
// nothing rolls or expires unless a test says so.
func lgConfig() Config {
	cfg := DefaultConfig()
	cfg.IndexIntervalBytes = 1024
	cfg.FileDeleteDelayMs = 0
	return cfg
}

// lgOpen opens a log and closes it when the test ends.
func lgOpen(t *testing.T, dir string, cfg Config, opts ...Option) *Log {
	t.Helper()
	l, err := Open(dir, cfg, append([]Option{WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrPoisoned) {
			t.Errorf("Close: %v", err)
		}
	})
	return l
}

// lgCrash abandons a log as a crash would: no flush, no checkpoints, no
// clean-shutdown marker.
func lgCrash(t *testing.T, l *Log) {
	t.Helper()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	close(l.quit)
	<-l.flusherDone
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	if err := l.shutdown(); err != nil {
		t.Fatalf("crash: %v", err)
	}
}

// lgWaitFor polls cond until it holds, failing the test after a deadline
// far beyond any wait the code should need. Call it from the test's
// goroutine.
func lgWaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, 30*time.Second, what, cond)
}

// lgWaitEach waits until every counter has grown: each concurrent worker
// counting its rounds in one of them has finished another round.
func lgWaitEach(t *testing.T, what string, counts []atomic.Int64) {
	t.Helper()
	from := make([]int64, len(counts))
	for i := range counts {
		from[i] = counts[i].Load()
	}
	lgWaitFor(t, what, func() bool {
		for i := range counts {
			if counts[i].Load() <= from[i] {
				return false
			}
		}
		return true
	})
}

func lgAppend(t *testing.T, l *Log, b []byte) AppendResult {
	t.Helper()
	res, err := l.Append(b, AppendOptions{LeaderEpoch: -1})
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return res
}

// lgReadAll reads every batch from the log start to the log end with
// ReadCopy, checking each, and returns them.
func lgReadAll(t *testing.T, l *Log) [][]byte {
	t.Helper()
	var out [][]byte
	off := l.LogStartOffset()
	for off < l.LogEndOffset() {
		buf, err := l.ReadCopy(off, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatalf("ReadCopy(%d): %v", off, err)
		}
		if len(buf) == 0 {
			t.Fatalf("ReadCopy(%d): empty below log end %d", off, l.LogEndOffset())
		}
		err = SplitBatches(buf, func(h Header, b []byte) error {
			out = append(out, slices.Clone(b))
			off = h.NextOffset()
			return nil
		})
		if err != nil {
			t.Fatalf("ReadCopy(%d): %v", off, err)
		}
	}
	return out
}

// lgFill appends n batches of recs records with valueSize-byte values,
// returning the stored batches (with offsets assigned).
func lgFill(t *testing.T, l *Log, n, recs, valueSize int, ts int64) [][]byte {
	t.Helper()
	var out [][]byte
	for i := range n {
		b := lgBatch(recs, ts+int64(i*recs), valueSize, byte(i))
		lgAppend(t, l, b)
		out = append(out, b)
	}
	return out
}

func lgSameBatches(t *testing.T, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d batches, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("batch #%d differs", i)
		}
	}
}

func TestAppendAssignsOffsets(t *testing.T) {
	l := lgOpen(t, t.TempDir(), lgConfig())
	tests := []struct {
		batches              [][]byte
		wantBase, wantLast   int64
		wantEpoch, optsEpoch int32
	}{
		{[][]byte{lgBatch(1, 100, 10, 1)}, 0, 0, 0, 0},
		{[][]byte{lgBatch(5, 100, 10, 2)}, 1, 5, 0, 0},
		{[][]byte{lgBatch(2, 100, 10, 3), lgBatch(3, 100, 10, 4)}, 6, 10, 3, 3},
		{[][]byte{lgBatch(1, 100, 0, 5)}, 11, 11, 3, 3},
	}
	var want [][]byte
	for i, tt := range tests {
		buf := bytes.Join(tt.batches, nil)
		res, err := l.Append(buf, AppendOptions{LeaderEpoch: tt.optsEpoch})
		if err != nil {
			t.Fatalf("#%d: Append: %v", i, err)
		}
		if res.BaseOffset != tt.wantBase || res.LastOffset != tt.wantLast || res.LogAppendTime != -1 {
			t.Errorf("#%d: got %+v, want base %d last %d", i, res, tt.wantBase, tt.wantLast)
		}
		h, _ := ParseHeader(buf)
		if h.BaseOffset != tt.wantBase || h.PartitionLeaderEpoch != tt.optsEpoch {
			t.Errorf("#%d: caller's buffer has base %d epoch %d, want %d %d", i, h.BaseOffset, h.PartitionLeaderEpoch, tt.wantBase, tt.optsEpoch)
		}
		if e, start, _ := l.Epochs().Latest(); e != tt.wantEpoch {
			t.Errorf("#%d: latest epoch %d (start %d), want %d", i, e, start, tt.wantEpoch)
		}
		_ = SplitBatches(buf, func(_ Header, b []byte) error { want = append(want, b); return nil })
	}
	if got := l.Epochs().Entries(); !slices.Equal(got, []EpochEntry{{0, 0}, {3, 6}}) {
		t.Errorf("epochs: got %v, want [{0 0} {3 6}]", got)
	}
	lgSameBatches(t, lgReadAll(t, l), want)
	if got := l.LogEndOffset(); got != 12 {
		t.Errorf("log end: got %d, want 12", got)
	}
}

func TestAppendLogAppendTime(t *testing.T) {
	l := lgOpen(t, t.TempDir(), lgConfig())
	b := lgBatch(3, 100, 5, 0)
	res, err := l.Append(b, AppendOptions{LeaderEpoch: 1, LogAppendTime: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if res.LogAppendTime != 5000 {
		t.Errorf("got LogAppendTime %d, want 5000", res.LogAppendTime)
	}
	got := lgReadAll(t, l)
	h, err := ValidateBatch(got[0])
	if err != nil || !h.LogAppendTime() || h.MaxTimestamp != 5000 {
		t.Errorf("stored batch: %+v, %v; want log append time 5000", h, err)
	}
}

func TestAppendRejects(t *testing.T) {
	l := lgOpen(t, t.TempDir(), lgConfig())
	good := lgBatch(2, 0, 4, 0)
	flipped := slices.Clone(good)
	flipped[len(flipped)-1] ^= 1
	tests := []struct {
		name string
		buf  []byte
	}{
		{"empty", nil},
		{"crc", flipped},
		{"torn", good[:len(good)-1]},
		{"trailing garbage", append(slices.Clone(good), 1, 2, 3)},
	}
	for i, tt := range tests {
		if _, err := l.Append(tt.buf, AppendOptions{}); !IsCorrupt(err) {
			t.Errorf("#%d %s: got %v, want a corruption error", i, tt.name, err)
		}
	}
	if got := l.LogEndOffset(); got != 0 {
		t.Errorf("log end: got %d, want 0", got)
	}
}

func TestAppendReplicated(t *testing.T) {
	l := lgOpen(t, t.TempDir(), lgConfig())
	mk := func(base int64, epoch int32, n int) []byte {
		b := lgBatch(n, 0, 1, 0)
		SetBaseOffset(b, base)
		SetPartitionLeaderEpoch(b, epoch)
		return b
	}
	tests := []struct {
		buf     []byte
		wantErr error
		wantEnd int64
	}{
		{mk(0, 1, 2), nil, 2},
		{mk(3, 1, 2), ErrNotContiguous, 2},
		{append(mk(2, 1, 1), mk(3, 4, 2)...), nil, 5},
		{append(mk(5, 4, 1), mk(7, 4, 1)...), ErrNotContiguous, 5},
		{mk(5, 5, 3), nil, 8},
	}
	for i, tt := range tests {
		_, err := l.AppendReplicated(tt.buf)
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("#%d: got error %v, want %v", i, err, tt.wantErr)
		}
		if got := l.LogEndOffset(); got != tt.wantEnd {
			t.Errorf("#%d: got log end %d, want %d", i, got, tt.wantEnd)
		}
	}
	want := []EpochEntry{{1, 0}, {4, 3}, {5, 5}}
	if got := l.Epochs().Entries(); !slices.Equal(got, want) {
		t.Errorf("epochs: got %v, want %v", got, want)
	}
}

// A follower catching up appends one large fetch; it must roll where a
// leader appending the batches one by one would, so that local retention
// can free what the leader has uploaded.
func TestAppendReplicatedRollsBySize(t *testing.T) {
	cfg := lgConfig()
	one := len(lgBatch(1, 0, 100, 0))
	cfg.SegmentBytes = int64(3 * one) // three batches fit
	var sealed []int64
	l := lgOpen(t, t.TempDir(), cfg, WithOnSeal(func(si SegmentInfo) { sealed = append(sealed, si.BaseOffset) }))
	var buf []byte
	for i := range 8 {
		b := lgBatch(1, 0, 100, 0)
		SetBaseOffset(b, int64(i))
		buf = append(buf, b...)
	}
	big := lgBatch(6, 0, 100, 0) // larger than a segment: one run of its own
	SetBaseOffset(big, 8)
	buf = append(buf, big...)
	last := lgBatch(1, 0, 100, 0)
	SetBaseOffset(last, 14)
	buf = append(buf, last...)
	res, err := l.AppendReplicated(buf)
	if err != nil {
		t.Fatalf("AppendReplicated: %v", err)
	}
	if res.BaseOffset != 0 || res.LastOffset != 14 {
		t.Errorf("result: offsets [%d, %d], want [0, 14]", res.BaseOffset, res.LastOffset)
	}
	var bases []int64
	for _, s := range l.Segments() {
		bases = append(bases, s.BaseOffset)
		if s.Size > cfg.SegmentBytes && s.BaseOffset != 8 {
			t.Errorf("segment %d: %d bytes, over segment.bytes %d", s.BaseOffset, s.Size, cfg.SegmentBytes)
		}
	}
	if want := []int64{0, 3, 6, 8, 14}; !slices.Equal(bases, want) {
		t.Errorf("segment bases %v, want %v", bases, want)
	}
	if want := []int64{0, 3, 6, 8}; !slices.Equal(sealed, want) {
		t.Errorf("sealed %v, want %v", sealed, want)
	}
	got := lgReadAll(t, l)
	if len(got) != 10 {
		t.Errorf("read back %d batches, want 10", len(got))
	}
}

func TestRollBySize(t *testing.T) {
	cfg := lgConfig()
	one := len(lgBatch(1, 0, 100, 0))
	cfg.SegmentBytes = int64(3 * one) // three batches fit
	l := lgOpen(t, t.TempDir(), cfg)
	tests := []struct {
		appendN   int // single-record batches appended in one call
		wantBases []int64
	}{
		{1, []int64{0}},
		{2, []int64{0}},
		{1, []int64{0, 3}},
		{4, []int64{0, 3, 4}}, // larger than a segment: goes whole into a fresh one
		{1, []int64{0, 3, 4, 8}},
	}
	for i, tt := range tests {
		var buf []byte
		for range tt.appendN {
			buf = append(buf, lgBatch(1, 0, 100, 0)...)
		}
		lgAppend(t, l, buf)
		var bases []int64
		for j, s := range l.Segments() {
			bases = append(bases, s.BaseOffset)
			if sealed := j < len(l.Segments())-1; s.Sealed != sealed {
				t.Errorf("#%d: segment %d sealed %v, want %v", i, s.BaseOffset, s.Sealed, sealed)
			}
		}
		if !slices.Equal(bases, tt.wantBases) {
			t.Errorf("#%d: got segments %v, want %v", i, bases, tt.wantBases)
		}
	}
	// Every segment file exists with its name, and a sealed segment's
	// index files are trimmed.
	for _, s := range l.Segments() {
		if filepath.Base(s.LogPath) != segmentName(s.BaseOffset)+".log" {
			t.Errorf("segment %d: log path %s", s.BaseOffset, s.LogPath)
		}
		if s.Sealed {
			fi, err := os.Stat(s.IndexPath)
			if err != nil || fi.Size()%IndexEntrySize != 0 || fi.Size() > s.Size/int64(cfg.IndexIntervalBytes)*IndexEntrySize+IndexEntrySize {
				t.Errorf("sealed %s: %v, %v", s.IndexPath, fi.Size(), err)
			}
		}
	}
}

func TestRollByTime(t *testing.T) {
	cfg := lgConfig()
	cfg.SegmentMs = 1000
	clock := time.UnixMilli(1_000_000)
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	l := lgOpen(t, t.TempDir(), cfg, WithClock(now))
	tests := []struct {
		advance   time.Duration
		retention bool // roll via EnforceRetention instead of Append
		wantSegs  int
	}{
		{0, false, 1},
		{900 * time.Millisecond, false, 1},
		{200 * time.Millisecond, false, 2}, // first batch 1100ms old: rolls before appending
		{0, false, 2},
		{1500 * time.Millisecond, true, 3}, // idle partitions roll too
		{0, true, 3},                       // empty active segment: no roll
	}
	for i, tt := range tests {
		advance(tt.advance)
		if tt.retention {
			if _, err := l.EnforceRetention(); err != nil {
				t.Fatal(err)
			}
		} else {
			lgAppend(t, l, lgBatch(1, 0, 1, 0))
		}
		if got := len(l.Segments()); got != tt.wantSegs {
			t.Errorf("#%d: got %d segments, want %d", i, got, tt.wantSegs)
		}
	}
}

func TestRollByIndexFull(t *testing.T) {
	cfg := lgConfig()
	cfg.IndexIntervalBytes = 0 // every batch but a segment's first is indexed
	cfg.SegmentIndexBytes = 36 // 4 offset entries, 3 time entries
	l := lgOpen(t, t.TempDir(), cfg)
	var want []int64
	for i := range 10 {
		lgAppend(t, l, lgBatch(1, int64(i), 1, 0))
	}
	// Timestamps grow with every batch, so the time index (3 entries)
	// fills first: a segment holds 4 batches (the first unindexed).
	want = []int64{0, 4, 8}
	var got []int64
	for _, s := range l.Segments() {
		got = append(got, s.BaseOffset)
	}
	if !slices.Equal(got, want) {
		t.Errorf("got segments %v, want %v", got, want)
	}
}

func TestOnSealCallback(t *testing.T) {
	cfg := lgConfig()
	cfg.SegmentBytes = int64(len(lgBatch(1, 0, 10, 0)))
	var l *Log
	var sealed []SegmentInfo
	l = lgOpen(t, t.TempDir(), cfg, WithOnSeal(func(si SegmentInfo) {
		// Outside the locks: calling back in must not deadlock.
		_ = l.Segments()
		_ = l.LogEndOffset()
		sealed = append(sealed, si)
	}))
	for i := range 3 {
		if _, err := l.Append(lgBatch(1, int64(100+i), 10, 0), AppendOptions{LeaderEpoch: 7}); err != nil {
			t.Fatal(err)
		}
	}
	if len(sealed) != 2 {
		t.Fatalf("got %d seal callbacks, want 2", len(sealed))
	}
	for i, si := range sealed {
		if si.BaseOffset != int64(i) || si.NextOffset != int64(i+1) || !si.Sealed || si.MaxTimestamp != int64(100+i) {
			t.Errorf("#%d: got %+v", i, si)
		}
		if want := []EpochEntry{{7, int64(i)}}; !slices.Equal(si.LeaderEpochs, want) {
			t.Errorf("#%d: got epochs %v, want %v", i, si.LeaderEpochs, want)
		}
	}
}

func TestReadBounds(t *testing.T) {
	l := lgOpen(t, t.TempDir(), lgConfig())
	// Ten batches of 3 records each: batch i holds offsets 3i..3i+2.
	batches := lgFill(t, l, 10, 3, 100, 1000)
	size := int64(len(batches[0]))
	tests := []struct {
		offset, maxOffset int64
		maxBytes          int
		wantFirst         int64 // -1: empty
		wantBatches       int
		wantErr           error
	}{
		{0, 30, 1 << 20, 0, 10, nil},
		{4, 30, 1 << 20, 3, 9, nil}, // inside a batch: starts with that batch
		{4, 30, 0, 3, 1, nil},       // at least one batch
		{4, 30, int(size) - 1, 3, 1, nil},
		{4, 30, int(2*size) - 1, 3, 1, nil},
		{4, 30, int(2 * size), 3, 2, nil},
		{0, 7, 1 << 20, 0, 3, nil}, // batch at 6 has base < 7
		{0, 6, 1 << 20, 0, 2, nil},
		{28, 30, 1 << 20, 27, 1, nil},
		{30, 30, 1 << 20, -1, 0, nil}, // at the log end: empty
		{5, 5, 1 << 20, -1, 0, nil},   // at maxOffset: empty
		{31, 40, 1 << 20, -1, 0, ErrOffsetOutOfRange},
		{-1, 40, 1 << 20, -1, 0, ErrOffsetOutOfRange},
	}
	for i, tt := range tests {
		rs, err := l.Read(tt.offset, tt.maxBytes, tt.maxOffset)
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("#%d: got error %v, want %v", i, err, tt.wantErr)
			continue
		}
		if tt.wantFirst < 0 {
			if rs.Size != 0 || rs.File != nil {
				t.Errorf("#%d: got %+v, want empty", i, rs)
			}
			continue
		}
		first := int(tt.wantFirst / 3)
		want := bytes.Join(batches[first:first+tt.wantBatches], nil)
		got := make([]byte, rs.Size)
		if _, err := rs.File.ReadAt(got, rs.Pos); err != nil {
			t.Fatal(err)
		}
		if rs.FirstOffset != tt.wantFirst || !bytes.Equal(got, want) {
			t.Errorf("#%d: got first %d, %d bytes; want first %d, %d batches (%d bytes)", i, rs.FirstOffset, rs.Size, tt.wantFirst, tt.wantBatches, len(want))
		}
		if wantNext := tt.wantFirst + int64(3*tt.wantBatches); rs.NextOffset != wantNext {
			t.Errorf("#%d: got next %d, want %d", i, rs.NextOffset, wantNext)
		}
	}
}

func TestReadAcrossSegments(t *testing.T) {
	cfg := lgConfig()
	cfg.SegmentBytes = 4096
	cfg.IndexIntervalBytes = 300
	l := lgOpen(t, t.TempDir(), cfg)
	want := lgFill(t, l, 60, 2, 150, 0)
	if n := len(l.Segments()); n < 5 {
		t.Fatalf("got %d segments, want several", n)
	}
	lgSameBatches(t, lgReadAll(t, l), want)
	// Reading from every offset returns the batch holding it first.
	for off := int64(0); off < l.LogEndOffset(); off++ {
		rs, err := l.Read(off, 1, l.LogEndOffset())
		if err != nil || rs.FirstOffset != off/2*2 || rs.NextOffset != off/2*2+2 {
			t.Fatalf("Read(%d): got %+v, %v", off, rs, err)
		}
	}
}

func TestAppendNotify(t *testing.T) {
	l := lgOpen(t, t.TempDir(), lgConfig())
	ch := l.AppendNotify()
	select {
	case <-ch:
		t.Fatal("closed before any append")
	default:
	}
	if ch2 := l.AppendNotify(); ch2 != ch {
		t.Error("two waiters got different channels before an append")
	}
	lgAppend(t, l, lgBatch(1, 0, 1, 0))
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("not closed by an append")
	}
	ch = l.AppendNotify()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("not closed by Close")
	}
}

func TestReopenClean(t *testing.T) {
	dir := t.TempDir()
	cfg := lgConfig()
	cfg.SegmentBytes = 8192
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := lgFill(t, l, 40, 4, 100, 50)
	l.SetHighWatermark(100)
	infos := l.Segments()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: got %v, want ErrClosed", err)
	}
	indexes := map[string][]byte{}
	for _, s := range infos {
		for _, p := range []string{s.IndexPath, s.TimeIndexPath} {
			indexes[p], _ = os.ReadFile(p)
		}
	}
	l = lgOpen(t, dir, cfg)
	rep := l.Recovery()
	if !rep.Clean || rep.ScannedSegments != 0 || rep.TruncatedAt != -1 || len(rep.RebuiltIndexes) != 0 {
		t.Errorf("recovery after clean close: got %+v", rep)
	}
	if _, err := os.Stat(filepath.Join(dir, cleanShutdownFile)); !os.IsNotExist(err) {
		t.Errorf("clean-shutdown marker still there after Open: %v", err)
	}
	lgSameBatches(t, lgReadAll(t, l), want)
	if got := l.Segments(); !slices.EqualFunc(got, infos, func(a, b SegmentInfo) bool {
		return a.BaseOffset == b.BaseOffset && a.NextOffset == b.NextOffset && a.Size == b.Size && a.MaxTimestamp == b.MaxTimestamp && a.Sealed == b.Sealed
	}) {
		t.Errorf("segments after reopen:\n got %+v\nwant %+v", got, infos)
	}
	if got := l.HighWatermark(); got != 100 {
		t.Errorf("high watermark: got %d, want 100", got)
	}
	// The indexes of a scan equal those written while appending.
	lgCrash(t, l)
	if err := os.WriteFile(filepath.Join(dir, recoveryPointFile), []byte("0\n1\n0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l = lgOpen(t, dir, cfg)
	rep = l.Recovery()
	if rep.ScannedSegments != len(infos) || len(rep.RebuiltIndexes) != 0 {
		t.Errorf("full rescan: got %+v, want %d segments scanned and no index rebuilt", rep, len(infos))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for p, want := range indexes {
		if got, _ := os.ReadFile(p); !bytes.Equal(got, want) {
			t.Errorf("%s differs after rescan and close", filepath.Base(p))
		}
	}
	l = lgOpen(t, dir, cfg)
	more := lgFill(t, l, 3, 1, 10, 0)
	lgSameBatches(t, lgReadAll(t, l), append(want, more...))
}
