package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
)

// TempSuffix ends the name of WriteFile's temporary file: the target's
// path + TempSuffix. A file of that name found in a directory is what a
// crash left of an interrupted replacement; the directory's owner may
// remove it.
const TempSuffix = ".tmp"

// ErrClosed is returned by a Pending written to after Sync, or used after
// Commit, Abort or a failure.
var ErrClosed = errors.New("atomicfile: temporary file already closed")

// Writer replaces files through an FS. The zero value uses OS.
type Writer struct {
	FS FS // nil: OS
}

func (w Writer) fs() FS {
	if w.FS == nil {
		return OS
	}
	return w.FS
}

// WriteFile replaces the file at path with data through the OS, as
// Writer.WriteFile does.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return Writer{}.WriteFile(path, data, perm)
}

// Create starts a replacement of path through the OS, as Writer.Create
// does.
func Create(path string, perm fs.FileMode) (*Pending, error) {
	return Writer{}.Create(path, perm)
}

// CreateTemp starts a replacement of path through the OS, as
// Writer.CreateTemp does.
func CreateTemp(path, pattern string) (*Pending, error) {
	return Writer{}.CreateTemp(path, pattern)
}

// WriteFile replaces the file at path with data: it writes path +
// TempSuffix (perm applies when that file is created), fsyncs it, renames
// it over path and fsyncs the directory. When it returns nil, data is
// durable at path. On error the temporary file is gone and, unless only the
// directory fsync failed, path is untouched. Two calls for one path must
// not overlap.
func (w Writer) WriteFile(path string, data []byte, perm fs.FileMode) error {
	p, err := w.Create(path, perm)
	if err != nil {
		return err
	}
	if _, err := p.Write(data); err != nil {
		return errors.Join(err, p.Abort())
	}
	return p.Commit()
}

// Create starts a replacement of path whose temporary file is the one
// WriteFile uses, path + TempSuffix (truncated if it exists; perm applies
// when it is created), for a caller that fsyncs several replacements
// together before committing them one by one. Two replacements of one path
// must not overlap, as for WriteFile.
func (w Writer) Create(path string, perm fs.FileMode) (*Pending, error) {
	f, err := w.fs().Create(path+TempSuffix, perm)
	if err != nil {
		return nil, fmt.Errorf("atomicfile: create %s: %w", path+TempSuffix, err)
	}
	return &Pending{fs: w.fs(), f: f, tmp: path + TempSuffix, path: path}, nil
}

// CreateTemp starts a replacement of path whose temporary file is a new
// file in path's directory, named by pattern as os.CreateTemp names it (a
// "*" in pattern is replaced by a random string). Unlike WriteFile, any
// number of replacements of one path may be under way at once; the last
// Commit wins.
func (w Writer) CreateTemp(path, pattern string) (*Pending, error) {
	f, err := w.fs().CreateTemp(filepath.Dir(path), pattern)
	if err != nil {
		return nil, fmt.Errorf("atomicfile: create temporary file for %s: %w", path, err)
	}
	return &Pending{fs: w.fs(), f: f, tmp: f.Name(), path: path}, nil
}

// Pending is a replacement under way: a temporary file beside the target,
// which Commit renames over it. Write the new contents, optionally Sync,
// then Commit; on any other way out call Abort, which is a no-op after
// Commit (so it may be deferred). Sync and Commit remove the temporary file
// themselves when they fail. A Pending is not safe for concurrent use.
type Pending struct {
	fs     FS
	f      File // nil once closed
	tmp    string
	path   string
	synced bool // the temporary file is fsynced and closed
	done   bool // committed, aborted, or failed and cleaned up
}

// Write appends b to the temporary file.
func (p *Pending) Write(b []byte) (int, error) {
	if p.done || p.synced {
		return 0, ErrClosed
	}
	n, err := p.f.Write(b)
	if err != nil {
		return n, fmt.Errorf("atomicfile: write %s: %w", p.tmp, err)
	}
	return n, nil
}

// TempName returns the path of the temporary file.
func (p *Pending) TempName() string { return p.tmp }

// Sync fsyncs and closes the temporary file: the new contents are then
// durable under TempName, not yet at the target, and can no longer be
// written to. Commit syncs if Sync was not called. A failed Sync removes
// the temporary file and ends the replacement.
func (p *Pending) Sync() error {
	if p.done {
		return ErrClosed
	}
	if p.synced {
		return nil
	}
	if err := p.f.Sync(); err != nil {
		return p.fail(fmt.Errorf("atomicfile: fsync %s: %w", p.tmp, err))
	}
	f := p.f
	p.f = nil
	if err := f.Close(); err != nil {
		return p.fail(fmt.Errorf("atomicfile: close %s: %w", p.tmp, err))
	}
	p.synced = true
	return nil
}

// Commit makes the new contents durable at the target: it syncs the
// temporary file (unless Sync did), renames it over the target and fsyncs
// the directory. A failure before the rename removes the temporary file
// and leaves the target untouched; a failed directory fsync leaves the new
// contents at the target, not known to be durable. Either way the
// replacement is over.
func (p *Pending) Commit() error {
	if err := p.Sync(); err != nil {
		return err
	}
	if err := p.fs.Rename(p.tmp, p.path); err != nil {
		return p.fail(fmt.Errorf("atomicfile: rename %s over %s: %w", p.tmp, p.path, err))
	}
	p.done = true
	if err := p.fs.SyncDir(filepath.Dir(p.path)); err != nil {
		return fmt.Errorf("atomicfile: fsync directory of %s: %w", p.path, err)
	}
	return nil
}

// Abort ends the replacement without touching the target: it closes and
// removes the temporary file. It returns nil after Commit or a previous
// Abort, and an error only when the temporary file could not be removed.
func (p *Pending) Abort() error {
	if p.done {
		return nil
	}
	return p.fail(nil)
}

// fail ends the replacement, removing the temporary file, and returns err
// joined with any error of the removal.
func (p *Pending) fail(err error) error {
	p.done = true
	if p.f != nil {
		// The file is thrown away: its close error changes nothing, and err
		// (or the removal below) is what the caller needs to hear of.
		_ = p.f.Close()
		p.f = nil
	}
	if rerr := p.fs.Remove(p.tmp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = errors.Join(err, fmt.Errorf("atomicfile: remove %s: %w", p.tmp, rerr))
	}
	return err
}
