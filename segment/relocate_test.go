package segment

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// TestMoverLive: a log moves to another directory while a writer appends
// and a reader reads everything: every batch reads back, in order, from
// the new directory, and after a reopen; the old files are not used; the
// leader-epoch checkpoint and the other files of the directory moved too.
func TestMoverLive(t *testing.T) {
	src, dstRoot := filepath.Join(t.TempDir(), "p-0"), t.TempDir()
	cfg := lgConfig()
	cfg.SegmentBytes = 4096
	l := lgOpen(t, src, cfg)
	var mu sync.Mutex
	var want [][]byte
	appendOne := func(i int) {
		b := lgBatch(3, int64(i*3), 100, byte(i))
		res, err := l.Append(b, AppendOptions{LeaderEpoch: int32(1 + i/200)})
		if err != nil {
			t.Errorf("Append: %v", err)
			return
		}
		_ = res
		mu.Lock()
		want = append(want, b)
		mu.Unlock()
	}
	for i := range 300 {
		appendOne(i)
	}
	if err := os.WriteFile(filepath.Join(src, "owner-file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var appended atomic.Int64
	wg.Add(2)
	go func() { // writer
		defer wg.Done()
		for i := 300; i < 3000 && !stop.Load(); i++ {
			appendOne(i)
			appended.Add(1)
		}
	}()
	var readErr atomic.Pointer[error]
	go func() { // reader: reads from the start, again and again
		defer wg.Done()
		for range 1000 {
			if stop.Load() {
				return
			}
			for off := l.LogStartOffset(); off < l.LogEndOffset(); {
				buf, err := l.ReadCopy(off, 1<<16, l.LogEndOffset())
				if err != nil || len(buf) == 0 {
					if err == nil {
						err = errors.New("empty read below the log end")
					}
					readErr.Store(&err)
					return
				}
				_ = SplitBatches(buf, func(h Header, b []byte) error { off = h.NextOffset(); return nil })
			}
		}
	}()

	staging := filepath.Join(dstRoot, "p-0.future")
	if err := os.Mkdir(staging, 0o755); err != nil {
		t.Fatal(err)
	}
	m := l.NewMover(staging)
	if err := m.CopySealed(nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("copied while live: %d bytes up to offset %d, log end %d", m.Bytes(), m.Offset(), l.LogEndOffset())
	if m.Bytes() == 0 {
		t.Error("nothing copied before Finish")
	}
	final := filepath.Join(dstRoot, "p-0")
	var beforeCalled bool
	err := m.Finish(func(dir string) error { beforeCalled = dir == src; return nil }, func() (string, error) {
		return final, os.Rename(staging, final)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !beforeCalled {
		t.Error("before not called with the old directory")
	}
	if l.Dir() != final {
		t.Errorf("Dir %s, want %s", l.Dir(), final)
	}
	if err := os.RemoveAll(src); err != nil {
		t.Fatal(err)
	}
	// Writes go on in the new directory.
	lgWaitFor(t, "appends after the move", func() bool { return appended.Load() > 100 || l.poisoned.Load() })
	stop.Store(true)
	wg.Wait()
	if e := readErr.Load(); e != nil {
		t.Fatalf("reader: %v", *e)
	}
	for _, si := range l.Segments() {
		if filepath.Dir(si.LogPath) != final {
			t.Errorf("segment %s not in %s", si.LogPath, final)
		}
	}
	lgSameBatches(t, lgReadAll(t, l), want)
	if _, err := os.Stat(filepath.Join(final, "owner-file")); err != nil {
		t.Errorf("owner's file not moved: %v", err)
	}
	epochs := l.Epochs().Entries()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := lgOpen(t, final, cfg)
	lgSameBatches(t, lgReadAll(t, l2), want)
	if got := l2.Epochs().Entries(); len(got) != len(epochs) || len(got) < 2 {
		t.Errorf("epochs after reopen: %v, want %v", got, epochs)
	}
	if r := l2.Recovery(); r.DroppedBytes != 0 || r.DroppedBatches != 0 {
		t.Errorf("reopen dropped data: %+v", r)
	}
}

// TestMoverCommitFails: a failing commit leaves the log in its directory,
// serving and taking appends.
func TestMoverCommitFails(t *testing.T) {
	src, staging := filepath.Join(t.TempDir(), "p-0"), t.TempDir()
	cfg := lgConfig()
	cfg.SegmentBytes = 2048
	l := lgOpen(t, src, cfg)
	want := lgFill(t, l, 50, 2, 100, 0)
	m := l.NewMover(staging)
	if err := m.CopySealed(nil); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := m.Finish(nil, func() (string, error) { return "", boom }); !errors.Is(err, boom) {
		t.Fatalf("Finish: %v, want boom", err)
	}
	if l.Dir() != src {
		t.Fatalf("Dir %s after a failed commit", l.Dir())
	}
	want = append(want, lgFill(t, l, 30, 2, 100, 1000)...)
	lgSameBatches(t, lgReadAll(t, l), want)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2 := lgOpen(t, src, cfg)
	lgSameBatches(t, lgReadAll(t, l2), want)
}
