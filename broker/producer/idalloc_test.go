package producer

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stratastream/strata/segment/atomicfile"
)

func openAllocator(t *testing.T, dir string, size int64) *IDAllocator {
	t.Helper()
	src, err := OpenFileBlockSource(dir, size)
	if err != nil {
		t.Fatal(err)
	}
	return NewIDAllocator(src, nil)
}

func TestIDsUniqueAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	seen := map[int64]bool{}
	// Each "run" takes a different number of ids, then the process dies
	// without any shutdown step: some runs use up blocks, some stop inside
	// one, one takes none.
	for run, n := range []int{3, 10, 0, 1, 25, 7} {
		a := openAllocator(t, dir, 10)
		for range n {
			id, err := a.Next()
			if err != nil {
				t.Fatal(err)
			}
			if seen[id] {
				t.Fatalf("run %d: id %d handed out twice", run, id)
			}
			seen[id] = true
		}
	}
	if len(seen) != 46 {
		t.Errorf("got %d ids, want 46", len(seen))
	}
}

func TestCrashBetweenReserveAndUse(t *testing.T) {
	dir := t.TempDir()
	src, err := OpenFileBlockSource(dir, 100)
	if err != nil {
		t.Fatal(err)
	}
	b, err := src.Reserve() // reserved and durable, but no id used yet
	if err != nil {
		t.Fatal(err)
	}
	a := openAllocator(t, dir, 100) // restart
	id, err := a.Next()
	if err != nil {
		t.Fatal(err)
	}
	if id < b.End {
		t.Errorf("after restart: got id %d, want >= %d (end of the block reserved before the crash)", id, b.End)
	}
	// A crash while writing the block file leaves a temp file; the old
	// reservation stays in force.
	if err := os.WriteFile(filepath.Join(dir, BlockFileName+".tmp"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	a = openAllocator(t, dir, 100)
	if id2, err := a.Next(); err != nil || id2 <= id {
		t.Errorf("after a torn write: got %d, %v; want > %d", id2, err, id)
	}
}

func TestBlockFileCorrupt(t *testing.T) {
	dir := t.TempDir()
	if _, err := openAllocator(t, dir, 10).Next(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, BlockFileName)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tests := []string{
		"",
		"1 10",                     // no newline, no crc
		"1 10 00000000\n",          // wrong crc
		string(good[:len(good)-1]), // no final newline
		"2" + string(good[1:]),     // other version
		"1 -5 " + string(good[len(good)-9:]),
		string(good[:2]) + "9" + string(good[3:]), // a changed digit
	}
	for i, content := range tests {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenFileBlockSource(dir, 10); !errors.Is(err, ErrCorruptBlockFile) {
			t.Errorf("#%d %q: got %v, want ErrCorruptBlockFile", i, content, err)
		}
	}
}

// failingSyncFS is the OS file system with every fsync, of a file or a
// directory, failing with err.
type failingSyncFS struct {
	atomicfile.FS
	err error
}

func (f failingSyncFS) Create(name string, perm fs.FileMode) (atomicfile.File, error) {
	file, err := f.FS.Create(name, perm)
	if err != nil {
		return nil, err
	}
	return failingSyncFile{File: file, err: f.err}, nil
}

func (f failingSyncFS) SyncDir(string) error { return f.err }

type failingSyncFile struct {
	atomicfile.File
	err error
}

func (f failingSyncFile) Sync() error { return f.err }

func TestBlockSourcePoisonedByFsyncFailure(t *testing.T) {
	dir := t.TempDir()
	src, err := OpenFileBlockSource(dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Reserve(); err != nil {
		t.Fatal(err)
	}
	failing := errors.New("EIO")
	files = atomicfile.Writer{FS: failingSyncFS{FS: atomicfile.OS, err: failing}}
	t.Cleanup(func() { files = atomicfile.Writer{} })
	if _, err := src.Reserve(); !errors.Is(err, failing) {
		t.Fatalf("failing fsync: got %v, want it reported", err)
	}
	files = atomicfile.Writer{}
	if _, err := src.Reserve(); !errors.Is(err, ErrPoisoned) {
		t.Errorf("after a failed fsync: got %v, want ErrPoisoned", err)
	}
	// A restart reads what is on disk and goes on past it.
	a := openAllocator(t, dir, 10)
	if id, err := a.Next(); err != nil || id < 10 {
		t.Errorf("after restart: got %d, %v; want an id >= 10", id, err)
	}
}

func TestAllocatorConcurrent(t *testing.T) {
	a := openAllocator(t, t.TempDir(), 7)
	const workers, each = 8, 50
	ids := make(chan int64, workers*each)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				id, err := a.Next()
				if err != nil {
					t.Error(err)
					return
				}
				ids <- id
			}
		})
	}
	wg.Wait()
	close(ids)
	seen := map[int64]bool{}
	for id := range ids {
		if seen[id] {
			t.Fatalf("id %d handed out twice", id)
		}
		seen[id] = true
	}
	if len(seen) != workers*each {
		t.Errorf("got %d ids, want %d", len(seen), workers*each)
	}
}

// badSource returns the blocks it is given, in order.
type badSource struct{ blocks []Block }

func (s *badSource) Reserve() (Block, error) {
	if len(s.blocks) == 0 {
		return Block{}, errors.New("no more")
	}
	b := s.blocks[0]
	s.blocks = s.blocks[1:]
	return b, nil
}

func TestAllocatorRejectsOverlappingBlocks(t *testing.T) {
	a := NewIDAllocator(&badSource{blocks: []Block{{0, 1}, {0, 5}}}, nil)
	if id, err := a.Next(); err != nil || id != 0 {
		t.Fatalf("first id: got %d, %v", id, err)
	}
	if id, err := a.Next(); err == nil {
		t.Errorf("overlapping block: got id %d, want an error", id)
	}
}
