//go:build !unix

package tiering

import (
	"errors"
	"io/fs"
	"sync"
)

// errNotDir never matches off unix; a missing parent reports ErrNotExist.
var errNotDir = errors.New("tiering: not a directory")

// localDirMu serializes LocalStore renames and deletes in this process.
// Without flock, processes sharing a directory are not excluded.
var localDirMu sync.Mutex

// lockDir locks the store's renames and deletes and returns the release.
func lockDir(string) (unlock func(), err error) {
	localDirMu.Lock()
	return localDirMu.Unlock, nil
}

// inodeOf is 0 where inode numbers are not available.
func inodeOf(fs.FileInfo) uint64 { return 0 }
