package atomicfile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// errInjected is the fault a faultFS injects.
var errInjected = errors.New("injected fault")

// faultFS is OS with the operations named in fail failing with
// errInjected: "create", "write", "sync", "close", "rename", "syncdir",
// "remove".
type faultFS struct {
	FS
	fail map[string]bool
}

func newFaultFS(ops ...string) faultFS {
	f := faultFS{FS: OS, fail: map[string]bool{}}
	for _, op := range ops {
		f.fail[op] = true
	}
	return f
}

func (f faultFS) Create(name string, perm fs.FileMode) (File, error) {
	if f.fail["create"] {
		return nil, errInjected
	}
	file, err := f.FS.Create(name, perm)
	if err != nil {
		return nil, err
	}
	return faultFile{File: file, fail: f.fail}, nil
}

func (f faultFS) CreateTemp(dir, pattern string) (File, error) {
	if f.fail["create"] {
		return nil, errInjected
	}
	file, err := f.FS.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return faultFile{File: file, fail: f.fail}, nil
}

func (f faultFS) Rename(oldpath, newpath string) error {
	if f.fail["rename"] {
		return errInjected
	}
	return f.FS.Rename(oldpath, newpath)
}

func (f faultFS) Remove(name string) error {
	if f.fail["remove"] {
		return errInjected
	}
	return f.FS.Remove(name)
}

func (f faultFS) SyncDir(dir string) error {
	if f.fail["syncdir"] {
		return errInjected
	}
	return f.FS.SyncDir(dir)
}

type faultFile struct {
	File
	fail map[string]bool
}

func (f faultFile) Write(b []byte) (int, error) {
	if f.fail["write"] {
		return 0, errInjected
	}
	return f.File.Write(b)
}

func (f faultFile) Sync() error {
	if f.fail["sync"] {
		return errInjected
	}
	return f.File.Sync()
}

func (f faultFile) Close() error {
	err := f.File.Close() // always release the descriptor
	if f.fail["close"] {
		return errInjected
	}
	return err
}

// dirNames lists dir's entries.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWriteFileReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state")
	for i, data := range []string{"first, and longer than the second\n", "second\n", ""} {
		if err := WriteFile(path, []byte(data), 0o640); err != nil {
			t.Fatalf("#%d: %v", i, err)
		}
		if got := readFile(t, path); got != data {
			t.Errorf("#%d: got %q, want %q", i, got, data)
		}
		if names := dirNames(t, dir); !slices.Equal(names, []string{"state"}) {
			t.Errorf("#%d: directory holds %v, want only the target", i, names)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm&^0o640 != 0 {
		t.Errorf("mode %v, want at most 0640", perm)
	}
}

// TestWriteFileTruncatesLeftover: a longer temporary file left by a crash
// does not leak its tail into the next replacement.
func TestWriteFileTruncatesLeftover(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state")
	if err := os.WriteFile(path+TempSuffix, bytes.Repeat([]byte("x"), 100), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); got != "new" {
		t.Fatalf("got %q, want %q", got, "new")
	}
	if _, err := os.Stat(path + TempSuffix); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("temporary file after success: %v", err)
	}
}

// TestWriteFileFailures: a failure at any step before the rename leaves
// the old contents at the target and no temporary file; a failed directory
// fsync is reported, with no temporary file left either.
func TestWriteFileFailures(t *testing.T) {
	tests := []struct {
		fail       string
		wantTarget string // contents of the target afterwards
	}{
		{"create", "old"},
		{"write", "old"},
		{"sync", "old"},
		{"close", "old"},
		{"rename", "old"},
		{"syncdir", "new"},
	}
	for i, tt := range tests {
		dir := t.TempDir()
		path := filepath.Join(dir, "state")
		if err := WriteFile(path, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		w := Writer{FS: newFaultFS(tt.fail)}
		err := w.WriteFile(path, []byte("new"), 0o644)
		if !errors.Is(err, errInjected) {
			t.Errorf("#%d %s: got %v, want the injected fault", i, tt.fail, err)
		}
		if got := readFile(t, path); got != tt.wantTarget {
			t.Errorf("#%d %s: target holds %q, want %q", i, tt.fail, got, tt.wantTarget)
		}
		if names := dirNames(t, dir); !slices.Equal(names, []string{"state"}) {
			t.Errorf("#%d %s: directory holds %v, want only the target", i, tt.fail, names)
		}
	}
}

// TestWriteFileFailedCleanupReported: when the temporary file cannot be
// removed after a failure, both errors are returned.
func TestWriteFileFailedCleanupReported(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state")
	fsys := newFaultFS("sync", "remove")
	err := Writer{FS: fsys}.WriteFile(path, []byte("new"), 0o644)
	if !errors.Is(err, errInjected) || !bytes.Contains([]byte(err.Error()), []byte("remove")) {
		t.Fatalf("got %v, want the fsync fault and the failed removal", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("target exists after a failed write: %v", err)
	}
}

// TestCreateTempConcurrent: replacements of one path under way at once
// have temporary files of their own, and the last Commit wins.
func TestCreateTempConcurrent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "obj")
	a, err := CreateTemp(path, ".tmp-*")
	if err != nil {
		t.Fatal(err)
	}
	b, err := CreateTemp(path, ".tmp-*")
	if err != nil {
		t.Fatal(err)
	}
	if a.TempName() == b.TempName() || filepath.Dir(a.TempName()) != dir {
		t.Fatalf("temporary files %s and %s, want two in %s", a.TempName(), b.TempName(), dir)
	}
	for _, p := range []struct {
		p    *Pending
		data string
	}{{a, "a"}, {b, "b"}} {
		if _, err := p.p.Write([]byte(p.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Write([]byte("late")); !errors.Is(err, ErrClosed) {
		t.Errorf("write after Sync: got %v, want ErrClosed", err)
	}
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); got != "b" {
		t.Fatalf("got %q, want the last commit's %q", got, "b")
	}
	if err := a.Abort(); err != nil {
		t.Errorf("Abort after Commit: %v", err)
	}
	if got := readFile(t, path); got != "b" {
		t.Fatalf("Abort after Commit changed the target to %q", got)
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"obj"}) {
		t.Errorf("directory holds %v, want only the target", names)
	}
}

// TestAbortRemovesTemp: Abort leaves the target as it was and removes the
// temporary file, once; a Pending is unusable afterwards.
func TestAbortRemovesTemp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "obj")
	if err := WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, syncFirst := range []bool{false, true} {
		p, err := CreateTemp(path, ".tmp-*")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Write([]byte("new")); err != nil {
			t.Fatal(err)
		}
		if syncFirst {
			if err := p.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Abort(); err != nil {
			t.Fatalf("#%d: %v", i, err)
		}
		if err := p.Abort(); err != nil {
			t.Errorf("#%d: second Abort: %v", i, err)
		}
		if err := p.Commit(); !errors.Is(err, ErrClosed) {
			t.Errorf("#%d: Commit after Abort: got %v, want ErrClosed", i, err)
		}
		if got := readFile(t, path); got != "old" {
			t.Errorf("#%d: target holds %q, want %q", i, got, "old")
		}
		if names := dirNames(t, dir); !slices.Equal(names, []string{"obj"}) {
			t.Errorf("#%d: directory holds %v, want only the target", i, names)
		}
	}
}

// TestPendingFailures: a failed Sync or Commit of a Pending removes its
// temporary file and leaves the target untouched.
func TestPendingFailures(t *testing.T) {
	for i, fail := range []string{"sync", "close", "rename"} {
		dir := t.TempDir()
		path := filepath.Join(dir, "obj")
		if err := WriteFile(path, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := Writer{FS: newFaultFS(fail)}.CreateTemp(path, ".tmp-*")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Write([]byte("new")); err != nil {
			t.Fatal(err)
		}
		if err := p.Commit(); !errors.Is(err, errInjected) {
			t.Errorf("#%d %s: got %v, want the injected fault", i, fail, err)
		}
		if err := p.Abort(); err != nil {
			t.Errorf("#%d %s: Abort after the failure: %v", i, fail, err)
		}
		if got := readFile(t, path); got != "old" {
			t.Errorf("#%d %s: target holds %q, want %q", i, fail, got, "old")
		}
		if names := dirNames(t, dir); !slices.Equal(names, []string{"obj"}) {
			t.Errorf("#%d %s: directory holds %v, want only the target", i, fail, names)
		}
	}
}

func TestSyncDir(t *testing.T) {
	if err := SyncDir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing directory: got %v, want fs.ErrNotExist", err)
	}
	if err := (Writer{FS: newFaultFS("syncdir")}).SyncDir(t.TempDir()); !errors.Is(err, errInjected) {
		t.Fatalf("got %v, want the injected fault", err)
	}
}

// TestCreateSyncThenCommit: a replacement started with Create writes
// path + TempSuffix, holds the new contents there durably after Sync with
// the target untouched, and puts them at the target on Commit.
func TestCreateSyncThenCommit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state")
	if err := WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Create(path, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if p.TempName() != path+TempSuffix {
		t.Fatalf("temporary file %s, want %s", p.TempName(), path+TempSuffix)
	}
	if _, err := p.Write([]byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	if got, tmp := readFile(t, path), readFile(t, path+TempSuffix); got != "old" || tmp != "new" {
		t.Fatalf("after Sync: target %q, temporary file %q; want %q and %q", got, tmp, "old", "new")
	}
	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, path); got != "new" {
		t.Fatalf("after Commit: got %q, want %q", got, "new")
	}
	if names := dirNames(t, dir); !slices.Equal(names, []string{"state"}) {
		t.Fatalf("directory holds %v, want only the target", names)
	}
}
