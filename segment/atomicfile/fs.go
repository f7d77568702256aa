package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// File is a temporary file being written. *os.File implements it.
type File interface {
	io.Writer
	Sync() error
	Close() error
	Name() string
}

// FS is the file system a replacement goes through. OS is the real one;
// tests embed it in a type of their own and override a method to inject a
// fault.
type FS interface {
	// Create creates the named file for writing, or truncates it if it
	// exists; perm applies to a new file (before the umask).
	Create(name string, perm fs.FileMode) (File, error)
	// CreateTemp creates a new file in dir, for writing, named by pattern
	// as os.CreateTemp names it.
	CreateTemp(dir, pattern string) (File, error)
	// Rename renames oldpath to newpath, replacing newpath.
	Rename(oldpath, newpath string) error
	// Remove removes the named file.
	Remove(name string) error
	// SyncDir fsyncs the directory dir, making the entries created,
	// renamed or removed in it durable.
	SyncDir(dir string) error
}

// OS is the operating system's file system.
var OS FS = osFS{}

type osFS struct{}

func (osFS) Create(name string, perm fs.FileMode) (File, error) {
	return os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
}

func (osFS) CreateTemp(dir, pattern string) (File, error) { return os.CreateTemp(dir, pattern) }

func (osFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

func (osFS) Remove(name string) error { return os.Remove(name) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		return errors.Join(err, d.Close())
	}
	return d.Close()
}

// SyncDir fsyncs the directory dir through the OS, making the entries
// created, renamed or removed in it durable.
func SyncDir(dir string) error { return Writer{}.SyncDir(dir) }

// SyncDir fsyncs the directory dir through w's FS.
func (w Writer) SyncDir(dir string) error {
	if err := w.fs().SyncDir(dir); err != nil {
		return fmt.Errorf("atomicfile: fsync directory %s: %w", dir, err)
	}
	return nil
}
