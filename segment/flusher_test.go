package segment

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stratastream/strata/segment/poll"
)

// faultyFile wraps a segment file so that a test can make its fsync fail.
type faultyFile struct {
	*os.File
	failSync *atomic.Bool
}

func (f faultyFile) Sync() error {
	if f.failSync.Load() {
		return &os.PathError{Op: "fsync", Path: f.Name(), Err: syscall.EIO}
	}
	return f.File.Sync()
}

func TestFsyncFailureIsSticky(t *testing.T) {
	dir := t.TempDir()
	var fail atomic.Bool
	wrap := WithFileWrapper(func(path string, f *os.File) File {
		if strings.HasSuffix(path, ".log") {
			return faultyFile{f, &fail}
		}
		return f
	})
	poisoned := make(chan error, 2)
	l := lgOpen(t, dir, lgConfig(), wrap, WithOnPoison(func(err error) { poisoned <- err }))
	want := lgFill(t, l, 3, 1, 10, 0)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	lgAppend(t, l, lgBatch(1, 0, 10, 9)) // only the page cache: fine
	err := l.Sync()
	if !errors.Is(err, ErrPoisoned) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("Sync: got %v, want ErrPoisoned wrapping EIO", err)
	}
	select {
	case perr := <-poisoned:
		if !errors.Is(perr, ErrPoisoned) || !errors.Is(perr, syscall.EIO) {
			t.Errorf("WithOnPoison got %v, want ErrPoisoned wrapping EIO", perr)
		}
	case <-time.After(10 * time.Second):
		t.Error("WithOnPoison was not called")
	}
	fail.Store(false) // a later fsync would "succeed": the log must not believe it
	for i, op := range []func() error{
		func() error { _, err := l.Append(lgBatch(1, 0, 1, 0), AppendOptions{}); return err },
		func() error { _, err := l.AppendReplicated(lgBatch(1, 0, 1, 0)); return err },
		l.Sync,
		func() error { return l.TruncateTo(1) },
	} {
		if err := op(); !errors.Is(err, ErrPoisoned) {
			t.Errorf("#%d: got %v, want ErrPoisoned", i, err)
		}
	}
	if got := l.RecoveryPoint(); got != 3 {
		t.Errorf("recovery point: got %d, want 3 (before the failed fsync)", got)
	}
	if got := lgReadAll(t, l); len(got) != 4 {
		t.Errorf("reads of a poisoned log: got %d batches, want 4", len(got))
	}
	if err := l.Close(); !errors.Is(err, ErrPoisoned) {
		t.Errorf("Close: got %v, want ErrPoisoned", err)
	}
	if len(poisoned) != 0 {
		t.Errorf("WithOnPoison called again: %v", <-poisoned)
	}
	// Reopening runs recovery and clears the poison.
	l = lgOpen(t, dir, lgConfig())
	if l.Recovery().Clean {
		t.Error("a poisoned log was closed as clean")
	}
	lgSameBatches(t, lgReadAll(t, l)[:3], want)
	lgAppend(t, l, lgBatch(1, 0, 1, 0))
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestFlushMessagesSyncsBeforeReturn checks flush.messages=1: every Append
// returns after an fsync covering it, and concurrent appenders share
// fsyncs. The first fsync round is held until every writer has appended
// once, so the appends that queue behind it share a round however the
// goroutines are scheduled.
func TestFlushMessagesSyncsBeforeReturn(t *testing.T) {
	cfg := lgConfig()
	cfg.FlushMessages = 1
	const writers, each = 8, 25
	var synced atomic.Int64
	var rounds atomic.Int64
	var held atomic.Bool
	var lp atomic.Pointer[Log]
	l := lgOpen(t, t.TempDir(), cfg, WithSyncHook(func(upTo int64) {
		rounds.Add(1)
		if l := lp.Load(); l != nil && upTo > 0 && held.CompareAndSwap(false, true) {
			// Each writer's first batch holds one record, and its next
			// append waits for this round: all have appended once when
			// the log end reaches writers.
			if !poll.For(30*time.Second, func() bool { return l.LogEndOffset() >= writers }) {
				t.Errorf("log end %d: not every writer appended while the first fsync round was held", l.LogEndOffset())
			}
		}
		if upTo > synced.Load() {
			synced.Store(upTo)
		}
	}))
	lp.Store(l)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				res, err := l.Append(lgBatch(1+i%3, 0, 50, byte(w)), AppendOptions{LeaderEpoch: 0})
				if err != nil {
					errs <- err
					return
				}
				if s := synced.Load(); s <= res.LastOffset {
					errs <- errors.New("Append returned before its fsync")
					return
				}
				if rp := l.RecoveryPoint(); rp <= res.LastOffset {
					errs <- errors.New("Append returned before the recovery point passed it")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// The held round or the one after it covered two appends or more.
	if n := rounds.Load(); n >= writers*each {
		t.Errorf("got %d fsync rounds for %d appends; want fewer, shared", n, writers*each)
	}
	t.Logf("%d appends, %d fsync rounds", writers*each, rounds.Load())
}

func TestFlushMessagesThreshold(t *testing.T) {
	cfg := lgConfig()
	cfg.FlushMessages = 10
	l := lgOpen(t, t.TempDir(), cfg)
	tests := []struct {
		records int
		wantRP  int64
	}{
		{4, 0},
		{5, 0},
		{1, 10}, // 10 unflushed records: fsync before returning
		{9, 10},
		{3, 22},
	}
	for i, tt := range tests {
		lgAppend(t, l, lgBatch(tt.records, 0, 1, 0))
		if got := l.RecoveryPoint(); got != tt.wantRP {
			t.Errorf("#%d: got recovery point %d, want %d", i, got, tt.wantRP)
		}
	}
}

func TestFlushMs(t *testing.T) {
	cfg := lgConfig()
	cfg.FlushMs = 30
	l := lgOpen(t, t.TempDir(), cfg)
	for round := range 3 {
		lgFill(t, l, 2, 1, 10, 0)
		lgWaitFor(t, fmt.Sprintf("round %d: the flush.ms=30 flush to reach the log end %d", round, l.LogEndOffset()), func() bool {
			return l.RecoveryPoint() == l.LogEndOffset()
		})
	}
}

func TestSyncAndCloseCheckpoint(t *testing.T) {
	dir := t.TempDir()
	cfg := lgConfig()
	cfg.SegmentBytes = 1000
	l := lgOpen(t, dir, cfg)
	lgFill(t, l, 10, 2, 100, 0)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := l.RecoveryPoint(); got != 20 {
		t.Errorf("after Sync: recovery point %d, want 20", got)
	}
	l.SetHighWatermark(15)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		want int64
	}{{recoveryPointFile, 20}, {logStartOffsetFile, 0}, {highWatermarkFile, 15}} {
		if got, ok, err := readOffsetCheckpoint(dir, c.name); err != nil || !ok || got != c.want {
			t.Errorf("%s: got %d %v %v, want %d", c.name, got, ok, err, c.want)
		}
	}
	if err := l.Sync(); !errors.Is(err, ErrClosed) {
		t.Errorf("Sync after Close: got %v, want ErrClosed", err)
	}
	if _, err := l.Append(lgBatch(1, 0, 1, 0), AppendOptions{}); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close: got %v, want ErrClosed", err)
	}
	if _, err := l.Read(0, 1, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Read after Close: got %v, want ErrClosed", err)
	}
}
