//go:build unix

package tiering

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// errNotDir is what opening a path through a regular file fails with.
var errNotDir error = syscall.ENOTDIR

// lockDir takes an exclusive flock on dir's lock file and returns its
// release. flock locks belong to an open file description, so the lock
// excludes other goroutines of this process as well as other processes.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, localLockName), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	// Closing the file releases the lock.
	return func() { _ = f.Close() }, nil
}

// inodeOf returns the file's inode number.
func inodeOf(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}
