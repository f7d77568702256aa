package segment

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// lgTruncateFixture builds a log of ten 3-record batches (offsets 0..29),
// three batches per segment (segments at 0, 9, 18, 27), batch i written by
// leader epoch i/2.
func lgTruncateFixture(t *testing.T, dir string) (*Log, Config, [][]byte) {
	t.Helper()
	cfg := lgConfig()
	cfg.IndexIntervalBytes = 100
	cfg.SegmentBytes = int64(3 * len(lgBatch(3, 0, 40, 0)))
	l := lgOpen(t, dir, cfg)
	var batches [][]byte
	for i := range 10 {
		b := lgBatch(3, int64(1000+10*i), 40, byte(i))
		if _, err := l.Append(b, AppendOptions{LeaderEpoch: int32(i / 2)}); err != nil {
			t.Fatal(err)
		}
		batches = append(batches, b)
	}
	if got := lgSegmentBases(l); !slices.Equal(got, []int64{0, 9, 18, 27}) {
		t.Fatalf("fixture segments: got %v", got)
	}
	return l, cfg, batches
}

func TestTruncateTo(t *testing.T) {
	allEpochs := []EpochEntry{{0, 0}, {1, 6}, {2, 12}, {3, 18}, {4, 24}}
	tests := []struct {
		logStart   int64 // set before truncating
		to         int64
		wantEnd    int64
		wantBases  []int64
		wantEpochs []EpochEntry
	}{
		{0, 30, 30, []int64{0, 9, 18, 27}, allEpochs},
		{0, 100, 30, []int64{0, 9, 18, 27}, allEpochs},
		{0, 28, 27, []int64{0, 9, 18, 27}, allEpochs}, // the batch holding 28 goes whole
		{0, 27, 27, []int64{0, 9, 18}, allEpochs},
		{0, 24, 24, []int64{0, 9, 18}, allEpochs[:4]},
		{0, 13, 12, []int64{0, 9}, allEpochs[:2]},
		{0, 9, 9, []int64{0}, allEpochs[:2]},
		{0, 7, 6, []int64{0}, allEpochs[:1]},
		{0, 0, 0, []int64{0}, nil},
		{5, 3, 3, []int64{3}, nil}, // below the log start: start over
	}
	for i, tt := range tests {
		dir := t.TempDir()
		l, cfg, batches := lgTruncateFixture(t, dir)
		l.SetHighWatermark(29)
		if tt.logStart > 0 {
			if err := l.SetLogStartOffset(tt.logStart); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.TruncateTo(tt.to); err != nil {
			t.Fatalf("#%d: TruncateTo(%d): %v", i, tt.to, err)
		}
		if got := l.LogEndOffset(); got != tt.wantEnd {
			t.Errorf("#%d: got log end %d, want %d", i, got, tt.wantEnd)
		}
		if got := lgSegmentBases(l); !slices.Equal(got, tt.wantBases) {
			t.Errorf("#%d: got segments %v, want %v", i, got, tt.wantBases)
		}
		if got := l.Epochs().Entries(); !slices.Equal(got, tt.wantEpochs) {
			t.Errorf("#%d: got epochs %v, want %v", i, got, tt.wantEpochs)
		}
		if hw, rp := l.HighWatermark(), l.RecoveryPoint(); hw > tt.wantEnd || rp > tt.wantEnd {
			t.Errorf("#%d: high watermark %d, recovery point %d above log end %d", i, hw, rp, tt.wantEnd)
		}
		var want [][]byte
		if tt.logStart == 0 {
			want = batches[:tt.wantEnd/3]
		}
		lgSameBatches(t, lgReadAll(t, l), want)
		// A truncated segment takes appends again, and its indexes stay what
		// a rebuild would produce.
		more := lgFill(t, l, 4, 3, 40, 2000)
		want = append(want, more...)
		lgSameBatches(t, lgReadAll(t, l), want)
		if ts, off := l.MaxTimestamp(); ts != 2011 || off != tt.wantEnd+9 {
			t.Errorf("#%d: MaxTimestamp: got %d@%d, want 2011@%d", i, ts, off, tt.wantEnd+9)
		}
		segs := l.Segments()
		active := segs[len(segs)-1].LogPath[:len(segs[len(segs)-1].LogPath)-len(".log")]
		lgCrash(t, l)
		if err := writeOffsetCheckpoint(dir, recoveryPointFile, 0); err != nil {
			t.Fatal(err)
		}
		l = lgOpen(t, dir, cfg)
		// The active segment's index entries were still in memory at the
		// crash: its files are rebuilt, the others must match.
		rep := l.Recovery()
		if rep.Reason != nil || slices.ContainsFunc(rep.RebuiltIndexes, func(p string) bool { return !strings.HasPrefix(p, active) }) {
			t.Errorf("#%d: rescan after truncation: got %+v, want no rebuild but of %s", i, rep, active)
		}
		lgSameBatches(t, lgReadAll(t, l), want)
		// Truncate the active segment again, with index entries pending,
		// and close cleanly: the files must hold every entry.
		if err := l.TruncateTo(tt.wantEnd + 5); err != nil {
			t.Fatal(err)
		}
		more = lgFill(t, l, 3, 3, 40, 3000)
		want = append(want[:len(want)-3], more...)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = lgOpen(t, dir, cfg)
		if rep := l.Recovery(); !rep.Clean || rep.ScannedSegments != 0 || len(rep.RebuiltIndexes) != 0 {
			t.Errorf("#%d: reopen after truncation and close: got %+v, want nothing scanned or rebuilt", i, rep)
		}
		lgSameBatches(t, lgReadAll(t, l), want)
	}
}

func TestTruncateFullyAndStartAt(t *testing.T) {
	dir := t.TempDir()
	l, cfg, _ := lgTruncateFixture(t, dir)
	if err := l.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	check := func(when string, wantEnd int64) {
		t.Helper()
		if s, e := l.LogStartOffset(), l.LogEndOffset(); s != 100 || e != wantEnd {
			t.Errorf("%s: got [%d, %d), want [100, %d)", when, s, e, wantEnd)
		}
		if got := lgSegmentBases(l); !slices.Equal(got, []int64{100}) {
			t.Errorf("%s: got segments %v, want [100]", when, got)
		}
	}
	check("after", 100)
	if len(l.Epochs().Entries()) != 0 {
		t.Errorf("epochs not cleared: %v", l.Epochs().Entries())
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(names) != 1 || filepath.Base(names[0]) != segmentName(100)+".log" {
		t.Errorf("log files: %v", names)
	}
	more := lgFill(t, l, 2, 1, 10, 0)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = lgOpen(t, dir, cfg)
	check("after reopen", 102)
	lgSameBatches(t, lgReadAll(t, l), more)
	if _, err := os.Stat(filepath.Join(dir, segmentName(0)+".index")); !os.IsNotExist(err) {
		t.Errorf("old index file left behind: %v", err)
	}
}

// TestTruncateKeepsPendingIndexEntries truncates an active segment whose
// index entries are still only in memory: those kept must reach the file.
func TestTruncateKeepsPendingIndexEntries(t *testing.T) {
	dir := t.TempDir()
	cfg := lgConfig()
	cfg.IndexIntervalBytes = 0 // an entry for every batch but the first
	l := lgOpen(t, dir, cfg)
	want := lgFill(t, l, 10, 1, 20, 0)
	if err := l.TruncateTo(6); err != nil {
		t.Fatal(err)
	}
	want = append(want[:6], lgFill(t, l, 2, 1, 20, 100)...)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = lgOpen(t, dir, cfg)
	if rep := l.Recovery(); !rep.Clean || rep.ScannedSegments != 0 || len(rep.RebuiltIndexes) != 0 {
		t.Errorf("got %+v, want nothing scanned or rebuilt", rep)
	}
	lgSameBatches(t, lgReadAll(t, l), want)
	if off, ts, found, err := l.OffsetForTimestamp(100); err != nil || !found || off != 6 || ts != 100 {
		t.Errorf("OffsetForTimestamp(100): got %d@%d %v %v, want 6@100", off, ts, found, err)
	}
}
