package tiering

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/stratastream/strata/segment/atomicfile"
)

// LocalStore is an ObjectStore in a local directory, the embedded default
// (remote.storage.dir): a key is a file path under the directory. It lets
// tiering run on a machine with nothing else installed, and serves tests.
//
// Durability: Put writes a temporary file in the object's directory,
// fsyncs it, renames it over the key and fsyncs the directory (package
// atomicfile), so a returned Put survives a crash and a reader sees the old
// object or the new one, never a mix. Directories it creates are fsynced
// into their parents.
//
// ETags are "<size>-<mtime ns>-<inode>" in hex. Under the directory's lock
// each Put gives its file a modification time strictly after the replaced
// object's, so an ETag never comes back for a later version of a key.
//
// Locking: the final rename of a Put, and a Delete, hold an exclusive
// flock on the object directory's lock file (".strata-lock"), so
// conditional puts are atomic among goroutines and among processes sharing
// the directory. The lock is never held while object data is copied.
type LocalStore struct {
	root string
}

// Reserved names in a LocalStore directory. Keys may not have a path
// component starting with localReserved.
const (
	localReserved   = ".strata-"
	localTempPrefix = ".strata-tmp-"
	localLockName   = ".strata-lock"
)

// NewLocalStore opens (creating if needed) the store in dir.
func NewLocalStore(dir string) (*LocalStore, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("tiering: local store %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("tiering: local store: %w", err)
	}
	return &LocalStore{root: abs}, nil
}

// Dir returns the store's directory.
func (s *LocalStore) Dir() string { return s.root }

// String describes the store for logs.
func (s *LocalStore) String() string { return "local directory " + s.root }

// path maps a key to its file, refusing keys that could leave the
// directory or collide with the store's own files.
func (s *LocalStore) path(key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

// checkKey refuses empty keys, absolute keys, empty, "." and ".."
// components, backslashes and reserved names.
func checkKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.ContainsAny(key, "\\\x00") {
		return fmt.Errorf("tiering: invalid object key %q", key)
	}
	for c := range strings.SplitSeq(key, "/") {
		if c == "" || c == "." || c == ".." || strings.HasPrefix(c, localReserved) {
			return fmt.Errorf("tiering: invalid object key %q", key)
		}
	}
	return nil
}

// Put implements ObjectStore.
func (s *LocalStore) Put(ctx context.Context, key string, r io.Reader, size int64, cond PutCondition) (ObjectInfo, error) {
	path, err := s.path(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	if size < 0 {
		return ObjectInfo{}, fmt.Errorf("tiering: put %s: negative size %d", key, size)
	}
	if err := ctx.Err(); err != nil {
		return ObjectInfo{}, err
	}
	tmp, err := s.writeTemp(ctx, path, key, r, size)
	if err != nil {
		return ObjectInfo{}, err
	}
	info, err := s.install(key, tmp, path, cond)
	if err != nil {
		return ObjectInfo{}, errors.Join(err, tmp.Abort())
	}
	return info, nil
}

// writeTemp copies size bytes of r into a new, fsynced temporary file
// beside path (its directory created if needed): a replacement of path
// that install commits.
func (s *LocalStore) writeTemp(ctx context.Context, path, key string, r io.Reader, size int64) (*atomicfile.Pending, error) {
	if err := mkdirAllSynced(s.root, filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("tiering: put %s: %w", key, err)
	}
	tmp, err := atomicfile.CreateTemp(path, localTempPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("tiering: put %s: %w", key, err)
	}
	n, err := io.CopyN(tmp, ctxReader{ctx, r}, size)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: body has %d bytes, want %d", io.ErrUnexpectedEOF, n, size)
		}
		return nil, errors.Join(fmt.Errorf("tiering: put %s: %w", key, err), tmp.Abort())
	}
	if err := tmp.Sync(); err != nil {
		return nil, fmt.Errorf("tiering: put %s: %w", key, err) // Sync removed the file
	}
	return tmp, nil
}

// install commits tmp, renaming it over path, if cond holds, under the
// directory lock. The caller aborts tmp when install fails.
func (s *LocalStore) install(key string, tmp *atomicfile.Pending, path string, cond PutCondition) (ObjectInfo, error) {
	dir := filepath.Dir(path)
	unlock, err := lockDir(dir)
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("tiering: put %s: %w", key, err)
	}
	defer unlock()

	cur, err := os.Stat(path)
	exists := err == nil && cur.Mode().IsRegular()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return ObjectInfo{}, fmt.Errorf("tiering: put %s: %w", key, err)
	}
	if err == nil && !exists {
		return ObjectInfo{}, fmt.Errorf("tiering: put %s: a directory has that name", key)
	}
	switch {
	case cond.IfNoneMatch && exists:
		return ObjectInfo{}, fmt.Errorf("%w: %s exists", ErrPreconditionFailed, key)
	case cond.IfMatch != "" && !exists:
		return ObjectInfo{}, fmt.Errorf("%w: %s does not exist", ErrPreconditionFailed, key)
	case cond.IfMatch != "" && localETag(cur) != cond.IfMatch:
		return ObjectInfo{}, fmt.Errorf("%w: %s changed", ErrPreconditionFailed, key)
	}
	mtime := time.Now()
	if exists && !mtime.After(cur.ModTime()) {
		mtime = cur.ModTime().Add(time.Microsecond)
	}
	if err := os.Chtimes(tmp.TempName(), mtime, mtime); err != nil {
		return ObjectInfo{}, fmt.Errorf("tiering: put %s: %w", key, err)
	}
	if err := tmp.Commit(); err != nil {
		return ObjectInfo{}, fmt.Errorf("tiering: put %s: %w", key, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("tiering: put %s: %w", key, err)
	}
	return localInfo(key, fi), nil
}

// Get implements ObjectStore.
func (s *LocalStore) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	path, err := s.path(key)
	if err != nil {
		return nil, err
	}
	if off < 0 || length < -1 {
		return nil, fmt.Errorf("tiering: get %s: invalid range %d+%d", key, off, length)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, localErr("get", key, err)
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		_ = f.Close()
		if err == nil {
			return nil, fmt.Errorf("%w: %s is a directory", ErrNotFound, key)
		}
		return nil, fmt.Errorf("tiering: get %s: %w", key, err)
	}
	n := max(fi.Size()-off, 0)
	if length >= 0 {
		n = min(n, length)
	}
	return &localReader{SectionReader: io.NewSectionReader(f, off, n), f: f}, nil
}

// localReader streams a range of a file and closes it.
type localReader struct {
	*io.SectionReader
	f *os.File
}

func (r *localReader) Close() error { return r.f.Close() }

// Stat implements ObjectStore.
func (s *LocalStore) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	path, err := s.path(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return ObjectInfo{}, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return ObjectInfo{}, localErr("stat", key, err)
	}
	if !fi.Mode().IsRegular() {
		return ObjectInfo{}, fmt.Errorf("%w: %s is a directory", ErrNotFound, key)
	}
	return localInfo(key, fi), nil
}

// List implements ObjectStore.
func (s *LocalStore) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if strings.HasPrefix(prefix, "/") || strings.Contains(prefix, "..") {
		return nil, fmt.Errorf("tiering: invalid list prefix %q", prefix)
	}
	// Walk the deepest directory the prefix names in full.
	base := ""
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		base = prefix[:i]
	}
	start := filepath.Join(s.root, filepath.FromSlash(base))
	var out []ObjectInfo
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed under us, or no such prefix
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		name := d.Name()
		if strings.HasPrefix(name, localReserved) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) || !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		out = append(out, localInfo(key, fi))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tiering: list %q: %w", prefix, err)
	}
	slices.SortFunc(out, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Delete implements ObjectStore. The directory is fsynced, so a returned
// Delete is durable.
func (s *LocalStore) Delete(ctx context.Context, key string) error {
	path, err := s.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return fmt.Errorf("tiering: delete %s: %w", key, err)
	}
	defer unlock()
	if err := os.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("tiering: delete %s: %w", key, err)
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return fmt.Errorf("tiering: delete %s: %w", key, err)
	}
	return nil
}

// localInfo describes a stored file.
func localInfo(key string, fi fs.FileInfo) ObjectInfo {
	return ObjectInfo{Key: key, Size: fi.Size(), ETag: localETag(fi), ModTime: fi.ModTime()}
}

// localETag is the version token of a stored file.
func localETag(fi fs.FileInfo) string {
	return fmt.Sprintf("%x-%x-%x", fi.Size(), fi.ModTime().UnixNano(), inodeOf(fi))
}

// localErr wraps a file error, mapping a missing file to ErrNotFound.
func localErr(op, key string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotDir) {
		return fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return fmt.Errorf("tiering: %s %s: %w", op, key, err)
}

// mkdirAllSynced creates dir and its missing parents below root, fsyncing
// each new directory's parent so the new entries survive a crash.
func mkdirAllSynced(root, dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	if dir == root || len(dir) <= len(root) {
		return os.MkdirAll(dir, 0o755)
	}
	parent := filepath.Dir(dir)
	if err := mkdirAllSynced(root, parent); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil // a concurrent Put made it
		}
		return err
	}
	return atomicfile.SyncDir(parent)
}

// ctxReader stops a copy when its context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// getWithInfo reads a whole object and describes the version read.
func (s *LocalStore) getWithInfo(ctx context.Context, key string) ([]byte, ObjectInfo, error) {
	rc, err := s.Get(ctx, key, 0, -1)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	lr := rc.(*localReader)
	defer lr.Close()
	fi, err := lr.f.Stat()
	if err != nil {
		return nil, ObjectInfo{}, fmt.Errorf("tiering: get %s: %w", key, err)
	}
	b := make([]byte, fi.Size())
	if _, err := io.ReadFull(lr.f, b); err != nil {
		return nil, ObjectInfo{}, fmt.Errorf("tiering: get %s: %w", key, err)
	}
	return b, localInfo(key, fi), nil
}
