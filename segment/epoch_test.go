package segment

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func lgEpochCache(t *testing.T, dir string, leo int64) *EpochCache {
	t.Helper()
	noRebuild := func() ([]EpochEntry, error) { return nil, errors.New("no rebuild expected") }
	c, rebuilt, err := newEpochCache(dir, func() int64 { return leo }, noRebuild)
	if err != nil || rebuilt {
		t.Fatal(rebuilt, err)
	}
	return c
}

func TestEpochCheckpointRoundTrip(t *testing.T) {
	dir := t.TempDir()
	c := lgEpochCache(t, dir, 100)
	for _, e := range []EpochEntry{{0, 0}, {2, 10}, {2, 12}, {5, 40}, {9, 77}} {
		if err := c.Assign(e.Epoch, e.StartOffset); err != nil {
			t.Fatal(err)
		}
	}
	want := []EpochEntry{{0, 0}, {2, 10}, {5, 40}, {9, 77}}
	if got := c.Entries(); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	data, err := os.ReadFile(filepath.Join(dir, leaderEpochFile))
	if err != nil {
		t.Fatal(err)
	}
	if got, wantText := string(data), "0\n4\n0 0\n2 10\n5 40\n9 77\n"; got != wantText {
		t.Errorf("checkpoint file: got %q, want %q", got, wantText)
	}
	c2 := lgEpochCache(t, dir, 100)
	if got := c2.Entries(); !slices.Equal(got, want) {
		t.Errorf("reloaded: got %v, want %v", got, want)
	}
	for i, bad := range []string{"1\n0\n", "0\n2\n1 0\n", "0\n1\n1\n", "0\n2\n3 5\n2 9\n", "0\n1\nx 0\n"} {
		if err := os.WriteFile(filepath.Join(dir, leaderEpochFile), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ReadLeaderEpochs(dir); !errors.Is(err, ErrBadCheckpoint) {
			t.Errorf("#%d: %q: got %v, want ErrBadCheckpoint", i, bad, err)
		}
		// Open rebuilds a checkpoint that does not parse, and rewrites it.
		fromLog := []EpochEntry{{1, 0}, {4, 30}}
		c, rebuilt, err := newEpochCache(dir, nil, func() ([]EpochEntry, error) { return fromLog, nil })
		if err != nil || !rebuilt || !slices.Equal(c.Entries(), fromLog) {
			t.Errorf("#%d: %q: rebuilt %v %v, err %v; want %v", i, bad, rebuilt, c.Entries(), err, fromLog)
		}
		if got, _, err := ReadLeaderEpochs(dir); err != nil || !slices.Equal(got, fromLog) {
			t.Errorf("#%d: rewritten checkpoint: got %v, %v", i, got, err)
		}
	}
}

func TestEpochAssignReplaces(t *testing.T) {
	tests := []struct {
		start  []EpochEntry
		assign EpochEntry
		want   []EpochEntry
	}{
		{nil, EpochEntry{3, 5}, []EpochEntry{{3, 5}}},
		{[]EpochEntry{{1, 0}, {3, 5}}, EpochEntry{3, 9}, []EpochEntry{{1, 0}, {3, 5}}},                 // same epoch later: no-op
		{[]EpochEntry{{1, 0}, {3, 5}}, EpochEntry{3, 2}, []EpochEntry{{1, 0}, {3, 2}}},                 // same epoch earlier: moved
		{[]EpochEntry{{1, 0}, {3, 5}}, EpochEntry{4, 5}, []EpochEntry{{1, 0}, {4, 5}}},                 // start taken by a new epoch
		{[]EpochEntry{{1, 0}, {3, 5}, {6, 9}}, EpochEntry{4, 7}, []EpochEntry{{1, 0}, {3, 5}, {4, 7}}}, // newer epochs dropped
	}
	for i, tt := range tests {
		c := lgEpochCache(t, t.TempDir(), 0)
		for _, e := range tt.start {
			if err := c.Assign(e.Epoch, e.StartOffset); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Assign(tt.assign.Epoch, tt.assign.StartOffset); err != nil {
			t.Fatal(err)
		}
		if got := c.Entries(); !slices.Equal(got, tt.want) {
			t.Errorf("#%d: got %v, want %v", i, got, tt.want)
		}
	}
}

// TestEndOffsetFor follows KIP-101/KIP-279 with epochs this replica never
// saw (1, 2, 4, 6, 7, 8).
func TestEndOffsetFor(t *testing.T) {
	c := lgEpochCache(t, t.TempDir(), 250)
	for _, e := range []EpochEntry{{0, 0}, {3, 40}, {5, 100}, {9, 180}} {
		if err := c.Assign(e.Epoch, e.StartOffset); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		epoch     int32
		wantEpoch int32
		wantEnd   int64
	}{
		{UndefinedEpoch, UndefinedEpoch, UndefinedEpochOffset},
		{0, 0, 40},
		{1, 0, 40}, // missed: ends where the next known epoch starts
		{2, 0, 40},
		{3, 3, 100},
		{4, 3, 100},
		{5, 5, 180},
		{6, 5, 180},
		{8, 5, 180},
		{9, 9, 250}, // latest: the log end
		{10, UndefinedEpoch, UndefinedEpochOffset},
	}
	for i, tt := range tests {
		e, end := c.EndOffsetFor(tt.epoch)
		if e != tt.wantEpoch || end != tt.wantEnd {
			t.Errorf("#%d: EndOffsetFor(%d): got (%d, %d), want (%d, %d)", i, tt.epoch, e, end, tt.wantEpoch, tt.wantEnd)
		}
	}
	// An epoch older than all known ones ends where the first starts.
	c2 := lgEpochCache(t, t.TempDir(), 50)
	if err := c2.Assign(4, 10); err != nil {
		t.Fatal(err)
	}
	if e, end := c2.EndOffsetFor(2); e != 2 || end != 10 {
		t.Errorf("EndOffsetFor before the first epoch: got (%d, %d), want (2, 10)", e, end)
	}
}

func TestEpochTruncation(t *testing.T) {
	base := []EpochEntry{{0, 0}, {3, 40}, {5, 100}, {9, 180}}
	tests := []struct {
		fromEnd bool
		offset  int64
		want    []EpochEntry
	}{
		{true, 181, base},
		{true, 180, base[:3]},
		{true, 41, base[:2]},
		{true, 0, nil},
		{false, 0, base},
		{false, 40, base[1:]},
		{false, 50, []EpochEntry{{3, 50}, {5, 100}, {9, 180}}},
		{false, 500, []EpochEntry{{9, 500}}},
	}
	for i, tt := range tests {
		dir := t.TempDir()
		c := lgEpochCache(t, dir, 0)
		for _, e := range base {
			if err := c.Assign(e.Epoch, e.StartOffset); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		if tt.fromEnd {
			err = c.truncateFromEnd(tt.offset)
		} else {
			err = c.truncateFromStart(tt.offset)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Entries(); !slices.Equal(got, tt.want) {
			t.Errorf("#%d: got %v, want %v", i, got, tt.want)
		}
		if got := lgEpochCache(t, dir, 0).Entries(); !slices.Equal(got, tt.want) {
			t.Errorf("#%d: checkpoint holds %v, want %v", i, got, tt.want)
		}
	}
}

// TestEpochsAcrossReopen checks that the log keeps its epoch cache across a
// crash and trims it to what survived.
func TestEpochsAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	l := lgOpen(t, dir, lgConfig())
	for i, epoch := range []int32{1, 1, 4, 4, 7} {
		if _, err := l.Append(lgBatch(2, int64(i), 10, 0), AppendOptions{LeaderEpoch: epoch}); err != nil {
			t.Fatal(err)
		}
	}
	lgCrash(t, l)
	// Lose the last batch, as a torn write would.
	info, err := os.Stat(filepath.Join(dir, segmentName(0)+".log"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dir, segmentName(0)+".log"), info.Size()-5); err != nil {
		t.Fatal(err)
	}
	l = lgOpen(t, dir, lgConfig())
	if got, want := l.Epochs().Entries(), []EpochEntry{{1, 0}, {4, 4}}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if e, end := l.Epochs().EndOffsetFor(4); e != 4 || end != 8 {
		t.Errorf("EndOffsetFor(4): got (%d, %d), want (4, 8)", e, end)
	}
}
