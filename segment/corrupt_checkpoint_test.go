package segment

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// ckptFixture is a closed log of several segments written at leader
// epochs 1, 3 and 7, with its log start moved inside the first segment
// and its high watermark set, and what Open saw before any damage.
type ckptFixture struct {
	dir      string
	epochs   []EpochEntry
	logStart int64
	logEnd   int64
	hw       int64
	segs     int
	batches  int
}

func newCkptFixture(t *testing.T) ckptFixture {
	t.Helper()
	dir := t.TempDir()
	cfg := lgConfig()
	cfg.SegmentBytes = 2048
	l, err := Open(dir, cfg, WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	epochs := []int32{1, 1, 1, 3, 3, 3, 3, 7, 7, 7, 7, 7}
	for i, e := range epochs {
		if _, err := l.Append(lgBatch(2, 1000+int64(i), 200, byte(i)), AppendOptions{LeaderEpoch: e}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.SetLogStartOffset(3); err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(l.LogEndOffset() - 2)
	f := ckptFixture{dir: dir, epochs: l.Epochs().Entries(), logStart: l.LogStartOffset(),
		logEnd: l.LogEndOffset(), hw: l.HighWatermark(), segs: len(l.Segments()), batches: len(epochs)}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if f.segs < 3 || len(f.epochs) != 3 || f.logStart != 3 {
		t.Fatalf("fixture: %d segments, epochs %v, log start %d", f.segs, f.epochs, f.logStart)
	}
	return f
}

// TestCorruptCheckpointRebuilt: each checkpoint file of a partition,
// overwritten with garbage while the log is closed, is rebuilt from the
// log at Open, reported in RebuiltCheckpoints and rewritten so that it
// parses; no batch is lost.
func TestCorruptCheckpointRebuilt(t *testing.T) {
	tests := []struct {
		file  string
		check func(t *testing.T, f ckptFixture, l *Log)
	}{
		{leaderEpochFile, func(t *testing.T, f ckptFixture, l *Log) {
			if got := l.Epochs().Entries(); !slices.Equal(got, f.epochs) {
				t.Errorf("epochs rebuilt from the batches: got %v, want %v", got, f.epochs)
			}
			if got, _, err := ReadLeaderEpochs(f.dir); err != nil || !slices.Equal(got, f.epochs) {
				t.Errorf("rewritten checkpoint: got %v, %v", got, err)
			}
		}},
		{logStartOffsetFile, func(t *testing.T, f ckptFixture, l *Log) {
			// The first segment's base: what Kafka takes when the
			// checkpoint has no entry for the partition.
			if got := l.LogStartOffset(); got != 0 {
				t.Errorf("log start: got %d, want 0 (the first segment)", got)
			}
			if got, ok, err := ReadLogStartOffset(f.dir); err != nil || !ok || got != 0 {
				t.Errorf("rewritten checkpoint: got %d %v %v", got, ok, err)
			}
		}},
		{highWatermarkFile, func(t *testing.T, f ckptFixture, l *Log) {
			if _, ok, err := ReadHighWatermark(f.dir); ok || err != nil {
				t.Errorf("a high watermark that does not parse must be gone until written again: ok %v, err %v", ok, err)
			}
			l.InitHighWatermark(l.LogStartOffset())
			if got := l.HighWatermark(); got != f.logStart {
				t.Errorf("high watermark after InitHighWatermark: got %d, want the log start %d", got, f.logStart)
			}
		}},
		{recoveryPointFile, func(t *testing.T, f ckptFixture, l *Log) {
			if got := l.Recovery().ScannedSegments; got != f.segs {
				t.Errorf("scanned %d segments, want all %d", got, f.segs)
			}
			if got, ok, err := ReadRecoveryPoint(f.dir); err != nil || !ok || got != f.logEnd {
				t.Errorf("rewritten checkpoint: got %d %v %v", got, ok, err)
			}
		}},
	}
	for _, garbage := range []string{"", "0\n1\n", "0\n1\n-5\n", "\x00\x00\x00garbage"} {
		for i, tt := range tests {
			f := newCkptFixture(t)
			if err := os.Remove(filepath.Join(f.dir, cleanShutdownFile)); err != nil {
				t.Fatal(err) // as after a crash: the recovery point matters
			}
			if err := os.WriteFile(filepath.Join(f.dir, tt.file), []byte(garbage), 0o644); err != nil {
				t.Fatal(err)
			}
			l := lgOpen(t, f.dir, lgConfig())
			if got := l.Recovery().RebuiltCheckpoints; !slices.Equal(got, []string{tt.file}) {
				t.Errorf("#%d %s %q: RebuiltCheckpoints %v", i, tt.file, garbage, got)
			}
			tt.check(t, f, l)
			if got := l.LogEndOffset(); got != f.logEnd {
				t.Errorf("#%d %s: log end %d, want %d", i, tt.file, got, f.logEnd)
			}
			if got := lgReadAll(t, l); len(got) < f.batches-1 {
				t.Errorf("#%d %s: read %d batches, want at least %d", i, tt.file, len(got), f.batches-1)
			}
		}
	}
}

// TestAllCheckpointsCorrupt: with every checkpoint garbage at once, Open
// still rebuilds them all.
func TestAllCheckpointsCorrupt(t *testing.T) {
	f := newCkptFixture(t)
	files := []string{recoveryPointFile, logStartOffsetFile, leaderEpochFile, highWatermarkFile}
	for _, name := range files {
		if err := os.WriteFile(filepath.Join(f.dir, name), []byte("junk"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l := lgOpen(t, f.dir, lgConfig())
	got := slices.Sorted(slices.Values(l.Recovery().RebuiltCheckpoints))
	if want := slices.Sorted(slices.Values(files)); !slices.Equal(got, want) {
		t.Errorf("RebuiltCheckpoints: got %v, want %v", got, want)
	}
	// The epochs are rebuilt before the log start is known to be 0: the
	// first epoch starts at the first batch.
	want := slices.Clone(f.epochs)
	want[0].StartOffset = 0
	if got := l.Epochs().Entries(); !slices.Equal(got, want) {
		t.Errorf("epochs: got %v, want %v", got, want)
	}
	if got := l.LogEndOffset(); got != f.logEnd {
		t.Errorf("log end %d, want %d", got, f.logEnd)
	}
}

// TestUnreadableCheckpointFailsOpen: a checkpoint that cannot be read at
// all (here a directory where the file should be; on a failing disk, EIO)
// is not rebuilt: Open fails naming the file, so that the owner can take
// the directory offline rather than trust a disk that does not read.
func TestUnreadableCheckpointFailsOpen(t *testing.T) {
	for i, name := range []string{recoveryPointFile, logStartOffsetFile, leaderEpochFile, highWatermarkFile} {
		f := newCkptFixture(t)
		path := filepath.Join(f.dir, name)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(path, 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := Open(f.dir, lgConfig(), WithLogger(slog.New(slog.DiscardHandler)))
		if err == nil || errors.Is(err, ErrBadCheckpoint) || !strings.Contains(err.Error(), name) {
			t.Errorf("#%d %s: Open got %v, want a read error naming the file", i, name, err)
		}
	}
}
