package tiering

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestPreallocate: a chunk file gets its blocks at once, at its final size,
// before anything is written to it.
func TestPreallocate(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "x.chunk"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, 1); err == syscall.EOPNOTSUPP {
		t.Skip("the temporary directory's file system has no fallocate; preallocate leaves the writes to allocate")
	}
	const size = 3<<20 + 5
	if err := preallocate(f, size); err != nil {
		t.Fatal(err)
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != size {
		t.Fatalf("size %d after preallocate, want %d", fi.Size(), size)
	}
	// The blocks are allocated, not a sparse hole.
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Blocks*512 < size {
		t.Fatalf("%d bytes of blocks allocated for %d", st.Blocks*512, size)
	}
	if err := preallocate(f, 0); err != nil {
		t.Fatalf("preallocate 0: %v", err)
	}
}
