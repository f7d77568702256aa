package producer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// syncFile is f.Sync; tests replace it to inject fsync failures.
var syncFile = func(f *os.File) error { return f.Sync() }

// writeFileAtomic replaces dir/name with data: it writes dir/name.tmp,
// fsyncs it, renames it over dir/name and fsyncs dir. When it returns nil
// the new content is durable; on error the old content (or none) may still
// be in place, and a leftover .tmp file is removed when possible.
func writeFileAtomic(dir, name string, data []byte) (err error) {
	final := filepath.Join(dir, name)
	tmp := final + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp) // best effort; the error that matters is err
		}
	}()
	if _, err := f.Write(data); err != nil {
		return errors.Join(err, f.Close())
	}
	if err := syncFile(f); err != nil {
		return errors.Join(fmt.Errorf("fsync %s: %w", tmp, err), f.Close())
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir fsyncs a directory so that renames and removals in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := syncFile(d); err != nil {
		return errors.Join(fmt.Errorf("fsync directory %s: %w", dir, err), d.Close())
	}
	return d.Close()
}
