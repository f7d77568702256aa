package segment

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestOffsetCheckpoint(t *testing.T) {
	dir := t.TempDir()
	if _, ok, err := readOffsetCheckpoint(dir, recoveryPointFile); ok || err != nil {
		t.Fatalf("missing file: got ok %v, %v", ok, err)
	}
	for _, off := range []int64{0, 42, 1 << 40} {
		if err := writeOffsetCheckpoint(dir, recoveryPointFile, off); err != nil {
			t.Fatal(err)
		}
		got, ok, err := readOffsetCheckpoint(dir, recoveryPointFile)
		if err != nil || !ok || got != off {
			t.Errorf("got %d %v %v, want %d", got, ok, err, off)
		}
	}
	data, _ := os.ReadFile(filepath.Join(dir, recoveryPointFile))
	if string(data) != "0\n1\n1099511627776\n" {
		t.Errorf("file: got %q", data)
	}
	if _, err := os.Stat(filepath.Join(dir, recoveryPointFile+tmpSuffix)); !os.IsNotExist(err) {
		t.Errorf("temp file left behind: %v", err)
	}
	for i, bad := range []string{"", "0\n", "1\n1\n5\n", "0\n2\n5\n", "0\n1\n-3\n", "0\n1\nabc\n", "0\n1\n5\n6\n"} {
		if err := os.WriteFile(filepath.Join(dir, logStartOffsetFile), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := readOffsetCheckpoint(dir, logStartOffsetFile); !errors.Is(err, ErrBadCheckpoint) {
			t.Errorf("#%d: %q: got %v, want ErrBadCheckpoint", i, bad, err)
		}
	}
	// Open rebuilds malformed checkpoints (corrupt_checkpoint_test.go
	// has the cases); a malformed recovery point costs a full scan.
	if err := os.Remove(filepath.Join(dir, logStartOffsetFile)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, recoveryPointFile), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := lgOpen(t, dir, lgConfig())
	if rp := l.Recovery().RecoveryPoint; rp != 0 {
		t.Errorf("recovery point from a bad checkpoint: got %d, want 0", rp)
	}
}
