package segment

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// inspectLog opens a log of several segments (with index entries) in a
// fresh directory and fills it. The log stays open.
func inspectLog(t *testing.T) *Log {
	t.Helper()
	cfg := lgConfig()
	cfg.IndexIntervalBytes = 256
	cfg.SegmentBytes = 4096
	l := lgOpen(t, t.TempDir(), cfg)
	lgFill(t, l, 40, 3, 100, 1000)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := len(l.Segments()); n < 4 {
		t.Fatalf("%d segments, want several", n)
	}
	return l
}

// TestListSegmentsAgreesWithLog: listing a live log's directory finds what
// the log says of its segments.
func TestListSegmentsAgreesWithLog(t *testing.T) {
	l := inspectLog(t)
	dir := l.Dir()
	// Files ListSegments must pass over.
	for _, name := range []string{SnapshotFileName(7), "00000000000000000099.log.tmp", "partition.metadata"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, SegmentFileName(1<<40, LogSuffix)), 0o755); err != nil {
		t.Fatal(err)
	}

	got, err := ListSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := l.Segments()
	if len(got) != len(want) {
		t.Fatalf("listed %d segments, the log has %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.BaseOffset != w.BaseOffset || g.NextOffset != w.NextOffset || g.Size != w.Size || g.Sealed != w.Sealed ||
			g.LogPath != w.LogPath || g.IndexPath != w.IndexPath || g.TimeIndexPath != w.TimeIndexPath {
			t.Errorf("#%d: listed %+v, log says %+v", i, g, w)
		}
		if g.MaxTimestamp != -1 || g.LeaderEpochs != nil {
			t.Errorf("#%d: max timestamp %d, epochs %v; want -1 and none (not read)", i, g.MaxTimestamp, g.LeaderEpochs)
		}
	}

	// A torn tail (half a batch header) leaves the end where it was.
	last := want[len(want)-1]
	f, err := os.OpenFile(last.LogPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, HeaderSize/2)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got, err = ListSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	if end := got[len(got)-1].NextOffset; end != l.LogEndOffset() {
		t.Errorf("after a torn tail: end %d, want %d", end, l.LogEndOffset())
	}
}

func TestListSegmentsEmptyAndMissing(t *testing.T) {
	segs, err := ListSegments(t.TempDir())
	if err != nil || len(segs) != 0 {
		t.Fatalf("empty directory: %v, %v", segs, err)
	}
	if _, err := ListSegments(filepath.Join(t.TempDir(), "orders-0")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing directory: got %v, want fs.ErrNotExist", err)
	}
}

// logBatchStarts frames the batches of a .log file.
func logBatchStarts(t *testing.T, path string) []BatchStart {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []BatchStart
	for pos := 0; pos < len(b); {
		h, err := ParseHeader(b[pos:])
		if err != nil {
			t.Fatalf("%s at %d: %v", path, pos, err)
		}
		out = append(out, BatchStart{Position: int64(pos), BaseOffset: h.BaseOffset, MaxTimestamp: h.MaxTimestamp})
		pos += h.Size()
	}
	return out
}

// TestIndexFilesOfRealLog: the index files a log writes, read as
// written, hold valid entries only, and agree with the log's batches. The
// active segment's files are preallocated and written in groups, so before
// the log closes they read as no entries and no problems.
func TestIndexFilesOfRealLog(t *testing.T) {
	l := inspectLog(t)
	segs := l.Segments()
	active := segs[len(segs)-1]
	for i, f := range []struct {
		path string
		size int
	}{{active.IndexPath, IndexEntrySize}, {active.TimeIndexPath, TimeIndexEntrySize}} {
		b, problems, err := readEntriesAsWritten(f.path, f.size)
		if fi, _ := os.Stat(f.path); err != nil || len(problems) > 0 || len(b) != 0 || fi == nil || fi.Size() == 0 {
			t.Errorf("#%d: active %s: %d bytes of entries, problems %q, %v; want a preallocated file of none", i, f.path, len(b), problems, err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for i, s := range []SegmentInfo{segs[0], active} {
		batches := logBatchStarts(t, s.LogPath)
		ix, problems, err := ReadOffsetIndexFile(s.IndexPath)
		if err != nil || len(problems) > 0 {
			t.Fatalf("#%d: %s: %q, %v", i, s.IndexPath, problems, err)
		}
		if ix.Len() == 0 || ix.Len() >= len(batches) || !bytes.Equal(ix, ix.Valid()) {
			t.Errorf("#%d: %d offset entries for %d batches (%d valid)", i, ix.Len(), len(batches), ix.Valid().Len())
		}
		if p := CheckOffsetIndex(ix, s.BaseOffset, batches); len(p) > 0 {
			t.Errorf("#%d: offset index disagrees with the log: %q", i, p)
		}
		tix, problems, err := ReadTimeIndexFile(s.TimeIndexPath)
		if err != nil || len(problems) > 0 {
			t.Fatalf("#%d: %s: %q, %v", i, s.TimeIndexPath, problems, err)
		}
		if tix.Len() == 0 || !bytes.Equal(tix, tix.Valid()) {
			t.Errorf("#%d: %d time entries (%d valid)", i, tix.Len(), tix.Valid().Len())
		}
		if p := CheckTimeIndex(tix, s.BaseOffset, batches); len(p) > 0 {
			t.Errorf("#%d: time index disagrees with the log: %q", i, p)
		}
	}
	// A sealed segment's last time entry holds its max timestamp.
	tix, _, _ := ReadTimeIndexFile(segs[0].TimeIndexPath)
	if got := tix.Entry(tix.Len() - 1).Timestamp; got != segs[0].MaxTimestamp {
		t.Errorf("last time entry %d, want the segment's max timestamp %d", got, segs[0].MaxTimestamp)
	}
}

func TestIndexEntryLayout(t *testing.T) {
	b := AppendIndexEntry(nil, IndexEntry{RelOffset: 0x01020304, Position: 0x05060708})
	if want := []byte{1, 2, 3, 4, 5, 6, 7, 8}; !bytes.Equal(b, want) {
		t.Fatalf("offset entry %x, want %x (big endian, offset then position)", b, want)
	}
	tb := AppendTimeIndexEntry(nil, TimeIndexEntry{Timestamp: 0x0102030405060708, RelOffset: 0x090a0b0c})
	if want := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}; !bytes.Equal(tb, want) {
		t.Fatalf("time entry %x, want %x (big endian, timestamp then offset)", tb, want)
	}
	ix := OffsetIndex(AppendIndexEntry(b, IndexEntry{RelOffset: 7, Position: 9}))
	if ix.Len() != 2 || ix.Entry(1) != (IndexEntry{RelOffset: 7, Position: 9}) || len(ix) != 2*IndexEntrySize {
		t.Fatalf("got %d entries, second %+v", ix.Len(), ix.Entry(1))
	}
	if n := OffsetIndex(append(ix, 1, 2, 3)).Len(); n != 2 {
		t.Fatalf("a partial entry counted: %d entries", n)
	}
}

func offsetIndex(entries ...IndexEntry) OffsetIndex {
	var b []byte
	for _, e := range entries {
		b = AppendIndexEntry(b, e)
	}
	return b
}

func timeIndex(entries ...TimeIndexEntry) TimeIndex {
	var b []byte
	for _, e := range entries {
		b = AppendTimeIndexEntry(b, e)
	}
	return b
}

func TestOffsetIndexValid(t *testing.T) {
	tests := []struct {
		ix   OffsetIndex
		want int
	}{
		{offsetIndex(), 0},
		{offsetIndex(IndexEntry{1, 100}, IndexEntry{5, 300}), 2},
		{offsetIndex(IndexEntry{1, 100}, IndexEntry{5, 300}, IndexEntry{}, IndexEntry{}), 2}, // preallocated
		{offsetIndex(IndexEntry{0, 100}), 0},                                                 // the first batch has no entry
		{offsetIndex(IndexEntry{1, 0}), 0},                                                   // nor does position 0
		{offsetIndex(IndexEntry{1, 100}, IndexEntry{1, 300}), 1},                             // offset repeats
		{offsetIndex(IndexEntry{1, 100}, IndexEntry{5, 100}), 1},                             // position repeats
		{offsetIndex(IndexEntry{5, 300}, IndexEntry{1, 100}, IndexEntry{9, 900}), 1},         // goes back
	}
	for i, tt := range tests {
		if got := tt.ix.Valid().Len(); got != tt.want {
			t.Errorf("#%d: got %d valid entries, want %d", i, got, tt.want)
		}
	}
}

func TestTimeIndexValid(t *testing.T) {
	tests := []struct {
		ix   TimeIndex
		want int
	}{
		{timeIndex(), 0},
		{timeIndex(TimeIndexEntry{1000, 0}, TimeIndexEntry{2000, 4}), 2}, // the first may name the first batch
		{timeIndex(TimeIndexEntry{1000, 0}, TimeIndexEntry{}, TimeIndexEntry{}), 1},
		{timeIndex(TimeIndexEntry{-5, 0}), 0},
		{timeIndex(TimeIndexEntry{1000, 2}, TimeIndexEntry{1000, 4}), 1},
		{timeIndex(TimeIndexEntry{1000, 2}, TimeIndexEntry{2000, 2}), 1},
	}
	for i, tt := range tests {
		if got := tt.ix.Valid().Len(); got != tt.want {
			t.Errorf("#%d: got %d valid entries, want %d", i, got, tt.want)
		}
	}
}

func TestReadIndexFileAsWritten(t *testing.T) {
	dir := t.TempDir()
	good := offsetIndex(IndexEntry{3, 4096}, IndexEntry{9, 8200})
	tests := []struct {
		data         []byte
		wantEntries  int
		wantProblems []string
	}{
		{good, 2, nil},
		{append(bytes.Clone(good), make([]byte, 5*IndexEntrySize)...), 2, nil},
		{append(bytes.Clone(good), 1, 2, 3), 2, []string{"19 bytes is not a whole number of 8-byte entries"}},
		{append(append(bytes.Clone(good), make([]byte, IndexEntrySize)...), offsetIndex(IndexEntry{20, 9000})...), 2,
			[]string{"entries after the zero entry at byte 16"}},
		// Read as written: entries that do not increase are kept for
		// CheckOffsetIndex to report.
		{offsetIndex(IndexEntry{9, 8200}, IndexEntry{3, 4096}), 2, nil},
		{nil, 0, nil},
	}
	for i, tt := range tests {
		path := filepath.Join(dir, SegmentFileName(int64(i), IndexSuffix))
		if err := os.WriteFile(path, tt.data, 0o644); err != nil {
			t.Fatal(err)
		}
		ix, problems, err := ReadOffsetIndexFile(path)
		if err != nil || ix.Len() != tt.wantEntries || !slices.Equal(problems, tt.wantProblems) {
			t.Errorf("#%d: got %d entries, problems %q, %v; want %d, %q", i, ix.Len(), problems, err, tt.wantEntries, tt.wantProblems)
		}
	}
	if _, _, err := ReadTimeIndexFile(filepath.Join(dir, "missing.timeindex")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: got %v, want fs.ErrNotExist", err)
	}
}

func TestCheckIndexes(t *testing.T) {
	batches := []BatchStart{{0, 100, 1005}, {500, 103, 2001}, {900, 105, 1500}}
	offsetTests := []struct {
		ix   OffsetIndex
		want []string
	}{
		{offsetIndex(IndexEntry{3, 500}, IndexEntry{5, 900}), nil},
		{offsetIndex(IndexEntry{3, 501}), []string{"entry 0 (offset 103, position 501): no batch starts at that position"}},
		{offsetIndex(IndexEntry{4, 500}), []string{"entry 0 (offset 104, position 500): the batch there starts at offset 103"}},
		{offsetIndex(IndexEntry{5, 900}, IndexEntry{3, 500}), []string{"entry 1 (offset 103, position 500) does not follow (offset 105, position 900)"}},
	}
	for i, tt := range offsetTests {
		if got := CheckOffsetIndex(tt.ix, 100, batches); !slices.Equal(got, tt.want) {
			t.Errorf("offset #%d: got %q, want %q", i, got, tt.want)
		}
	}
	timeTests := []struct {
		ix   TimeIndex
		want []string
	}{
		{timeIndex(TimeIndexEntry{1005, 0}, TimeIndexEntry{2001, 3}), nil},
		{timeIndex(TimeIndexEntry{2001, 5}), nil}, // names the batch it was indexing
		{timeIndex(TimeIndexEntry{2002, 3}), []string{"entry 0 (timestamp 2002, offset 103): largest timestamp up to that batch is 2001"}},
		{timeIndex(TimeIndexEntry{2001, 4}), []string{"entry 0 (timestamp 2001, offset 104): no batch starts at that offset"}},
		{timeIndex(TimeIndexEntry{2001, 3}, TimeIndexEntry{1005, 0}), []string{"entry 1 (timestamp 1005, offset 100) goes back from (timestamp 2001, offset 103)"}},
	}
	for i, tt := range timeTests {
		if got := CheckTimeIndex(tt.ix, 100, batches); !slices.Equal(got, tt.want) {
			t.Errorf("time #%d: got %q, want %q", i, got, tt.want)
		}
	}
}

// TestReadCheckpoints: the exported readers see what the log writes, and
// report a missing or malformed file as such.
func TestReadCheckpoints(t *testing.T) {
	l := inspectLog(t)
	dir := l.Dir()
	if err := l.SetLogStartOffset(5); err != nil {
		t.Fatal(err)
	}
	if err := l.Epochs().Assign(3, 10); err != nil {
		t.Fatal(err)
	}
	if off, ok, err := ReadLogStartOffset(dir); err != nil || !ok || off != 5 {
		t.Errorf("log start: got %d, %v, %v; want 5", off, ok, err)
	}
	if es, ok, err := ReadLeaderEpochs(dir); err != nil || !ok || !slices.Equal(es, []EpochEntry{{3, 10}}) {
		t.Errorf("leader epochs: got %v, %v, %v", es, ok, err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if rp, ok, err := ReadRecoveryPoint(dir); err != nil || !ok || rp != l.LogEndOffset() {
		t.Errorf("recovery point after close: got %d, %v, %v; want %d", rp, ok, err, l.LogEndOffset())
	}

	empty := t.TempDir()
	for i, read := range []func(string) (int64, bool, error){ReadLogStartOffset, ReadRecoveryPoint, ReadHighWatermark} {
		if _, ok, err := read(empty); ok || err != nil {
			t.Errorf("#%d: missing file: got %v, %v; want not ok, no error", i, ok, err)
		}
	}
	if _, ok, err := ReadLeaderEpochs(empty); ok || err != nil {
		t.Errorf("missing epochs file: got %v, %v", ok, err)
	}
	if err := os.WriteFile(filepath.Join(empty, logStartOffsetFile), []byte("0\n1\nfive\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadLogStartOffset(empty); !errors.Is(err, ErrBadCheckpoint) {
		t.Errorf("malformed: got %v, want ErrBadCheckpoint", err)
	}
}
