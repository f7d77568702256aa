package tiering

import (
	"errors"
	"os"
	"syscall"
)

// preallocate allocates size bytes of f's blocks at once, before the chunk
// is written into them: ext4 then skips its per-block delayed-allocation
// work on every write, about a third of a chunk file's write cost. A file
// system without fallocate is not an error: the writes allocate as usual.
func preallocate(f *os.File, size int64) error {
	if size <= 0 {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			ferr = syscall.Fallocate(int(fd), 0, 0, size)
			if ferr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if errors.Is(ferr, syscall.EOPNOTSUPP) || errors.Is(ferr, syscall.ENOSYS) {
		return nil
	}
	return ferr
}
