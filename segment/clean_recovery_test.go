package segment

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// crFixture is a log of several sealed segments with duplicated keys and
// tombstones, and its model.
type crFixture struct {
	dir   string
	cfg   Config
	clock *ctClock
	m     *ctModel
}

func newCrFixture(t *testing.T, seed uint64) *crFixture {
	t.Helper()
	f := &crFixture{dir: t.TempDir(), cfg: lgConfig(), clock: &ctClock{t: time.UnixMilli(1_700_000_000_000)}, m: newCtModel()}
	f.cfg.SegmentBytes = 3000
	l := f.open(t, nil)
	ctProduce(t, l, f.m, rand.New(rand.NewPCG(seed, 1)), f.clock, 120, 15, true)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *crFixture) open(t *testing.T, hook func(string) error) *Log {
	t.Helper()
	return lgOpen(t, f.dir, f.cfg, WithClock(f.clock.now), withCleanHook(hook))
}

// crBytes is the size of the segments' .log files together.
func crBytes(segs []SegmentInfo) int64 {
	var n int64
	for _, s := range segs {
		n += s.Size
	}
	return n
}

// crLeftovers lists the .cleaned and .swap files of dir.
func crLeftovers(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), CleanedSuffix) || strings.HasSuffix(e.Name(), SwapSuffix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestCleanCrashAtEachPoint fails a cleaning at each point of writing and
// swapping, abandons the log as a crash would, and checks that recovery
// discards an uncommitted swap or completes a committed one, leaves no
// .cleaned or .swap file, cuts nothing, and that the log then cleans.
func TestCleanCrashAtEachPoint(t *testing.T) {
	committed := map[string]bool{"committed": true, "sources-removed": true, "renamed.log": true, "renamed.index": true, "renamed.timeindex": true, "checkpointed": true}
	for _, point := range ctCrashPoints {
		t.Run(point, func(t *testing.T) {
			f := newCrFixture(t, 3)
			l := f.open(t, func(p string) error {
				if p == point {
					return fmt.Errorf("injected failure at %s", p)
				}
				return nil
			})
			before := crBytes(l.Segments())
			cc := CleanConfig{Map: ctMap(t, 1<<16), DeleteRetentionMs: ctRetentionMs}
			if _, err := l.Clean(context.Background(), cc); err == nil || !strings.Contains(err.Error(), "injected failure") {
				t.Fatalf("Clean: %v, want the injected failure", err)
			}
			if err := l.Sync(); committed[point] != errors.Is(err, ErrPoisoned) {
				t.Fatalf("after a failure at %s: Sync = %v; poisoned wanted: %v", point, err, committed[point])
			}
			ctCheck(t, l, f.m, false) // reads still work on the old files
			lgCrash(t, l)

			l = f.open(t, nil)
			rep := l.Recovery()
			if rep.TruncatedAt >= 0 {
				t.Fatalf("recovery cut the log at %d: %v", rep.TruncatedAt, rep.Reason)
			}
			if got := len(rep.CompletedSwaps) > 0; got != committed[point] {
				t.Fatalf("completed swaps %v; want some: %v", rep.CompletedSwaps, committed[point])
			}
			if left := crLeftovers(t, f.dir); len(left) > 0 {
				t.Fatalf("left after recovery: %v", left)
			}
			if committed[point] && crBytes(l.Segments()) >= before {
				t.Fatalf("%d bytes of segments after completing the swap, %d before", crBytes(l.Segments()), before)
			}
			ctCheck(t, l, f.m, false)
			if _, err := l.Clean(context.Background(), cc); err != nil {
				t.Fatalf("Clean after recovery: %v", err)
			}
			ctCheck(t, l, f.m, false)
		})
	}
}

// TestRecoveryGapsOnlyBelowCleanerCheckpoint checks that recovery accepts
// the gaps of cleaned segments only below the cleaner checkpoint: with the
// checkpoint lowered, the same files count as damaged, as for a log that
// was never cleaned.
func TestRecoveryGapsOnlyBelowCleanerCheckpoint(t *testing.T) {
	f := newCrFixture(t, 4)
	l := f.open(t, nil)
	if _, err := l.Clean(context.Background(), CleanConfig{Map: ctMap(t, 1<<16), DeleteRetentionMs: ctRetentionMs}); err != nil {
		t.Fatal(err)
	}
	end := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = f.open(t, nil)
	if rep := l.Recovery(); rep.TruncatedAt >= 0 || l.LogEndOffset() != end {
		t.Fatalf("reopen: cut at %d (%v), log end %d, want %d", rep.TruncatedAt, rep.Reason, l.LogEndOffset(), end)
	}
	lgCrash(t, l)
	if err := writeOffsetCheckpoint(f.dir, cleanerOffsetFile, 0); err != nil {
		t.Fatal(err)
	}
	l = f.open(t, nil)
	if rep := l.Recovery(); rep.TruncatedAt < 0 || !IsCorrupt(rep.Reason) {
		t.Fatalf("gaps above the cleaner checkpoint accepted: %+v", rep)
	}
}

// TestRecoveryBadCleanerCheckpoint checks that a cleaner checkpoint that
// does not parse makes recovery accept gaps everywhere (rather than cut
// cleaned segments) and rebuild the checkpoint as the log end.
func TestRecoveryBadCleanerCheckpoint(t *testing.T) {
	f := newCrFixture(t, 5)
	l := f.open(t, nil)
	if _, err := l.Clean(context.Background(), CleanConfig{Map: ctMap(t, 1<<16), DeleteRetentionMs: ctRetentionMs}); err != nil {
		t.Fatal(err)
	}
	lgCrash(t, l)
	if err := os.WriteFile(filepath.Join(f.dir, cleanerOffsetFile), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	l = f.open(t, nil)
	rep := l.Recovery()
	if rep.TruncatedAt >= 0 || !slices.Contains(rep.RebuiltCheckpoints, cleanerOffsetFile) {
		t.Fatalf("recovery: %+v", rep)
	}
	if got, want := l.CleanerCheckpoint(), l.LogEndOffset(); got != want {
		t.Fatalf("cleaner checkpoint %d, want the log end %d", got, want)
	}
	if got, ok, err := readOffsetCheckpoint(f.dir, cleanerOffsetFile); err != nil || !ok || got != l.LogEndOffset() {
		t.Fatalf("checkpoint file: %d, %v, %v", got, ok, err)
	}
	// What was dirty is now taken as clean, so only the latest values are
	// checked, not that older ones are gone.
	recs, _ := ctRead(t, l, f.m)
	byOff := map[int64]Record{}
	for _, r := range recs {
		byOff[r.Offset] = r
	}
	ctCheckLatest(t, f.m, byOff)
}

// TestCleanSkipsGroupChangedByRetention moves the log start past the first
// segments while their cleaned replacement is being written: that swap is
// abandoned, its files removed, and the log stays readable.
func TestCleanSkipsGroupChangedByRetention(t *testing.T) {
	f := newCrFixture(t, 6)
	var l *Log
	fired := false
	l = f.open(t, func(p string) error {
		if p == "written" && !fired {
			fired = true
			segs := l.Segments()
			if err := l.SetLogStartOffset(segs[1].BaseOffset); err != nil {
				return fmt.Errorf("SetLogStartOffset: %w", err)
			}
		}
		return nil
	})
	res, err := l.Clean(context.Background(), CleanConfig{Map: ctMap(t, 1<<16)})
	if err != nil {
		t.Fatal(err)
	}
	if !fired || res.GroupsSkipped == 0 {
		t.Fatalf("hook fired %v, groups skipped %d", fired, res.GroupsSkipped)
	}
	if left := crLeftovers(t, f.dir); len(left) > 0 {
		t.Fatalf("left: %v", left)
	}
	ctRead(t, l, f.m)
}

// TestCleanCanceled checks that a canceled context stops a cleaning
// without changing the log.
func TestCleanCanceled(t *testing.T) {
	f := newCrFixture(t, 7)
	l := f.open(t, nil)
	before := lgReadAll(t, l)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Clean(ctx, CleanConfig{Map: ctMap(t, 1<<16)}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Clean: %v, want context.Canceled", err)
	}
	lgSameBatches(t, lgReadAll(t, l), before)
	if left := crLeftovers(t, f.dir); len(left) > 0 {
		t.Fatalf("left: %v", left)
	}
}

// crLimiter counts what the cleaner asks for.
type crLimiter struct{ calls, bytes, max int }

func (c *crLimiter) WaitN(ctx context.Context, n int) error {
	c.calls++
	c.bytes += n
	c.max = max(c.max, n)
	return ctx.Err()
}

// TestCleanThrottles checks that every byte read and written passes the
// limiter, in chunks no larger than the I/O buffer.
func TestCleanThrottles(t *testing.T) {
	f := newCrFixture(t, 8)
	l := f.open(t, nil)
	lim := &crLimiter{}
	res, err := l.Clean(context.Background(), CleanConfig{Map: ctMap(t, 1<<16), Limiter: lim, IOBufferBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if want := res.MapBytesRead + res.BytesRead + res.BytesWritten; int64(lim.bytes) != want || lim.max > 1000 {
		t.Fatalf("limiter saw %d bytes in %d calls (largest %d); want %d, at most 1000 at a time", lim.bytes, lim.calls, lim.max, want)
	}
}

// TestTruncateLowersCleanerCheckpoint checks that truncation below the
// cleaner checkpoint brings it down to the new log end.
func TestTruncateLowersCleanerCheckpoint(t *testing.T) {
	f := newCrFixture(t, 9)
	l := f.open(t, nil)
	if _, err := l.Clean(context.Background(), CleanConfig{Map: ctMap(t, 1<<16)}); err != nil {
		t.Fatal(err)
	}
	ck := l.CleanerCheckpoint()
	if ck == 0 {
		t.Fatal("checkpoint not raised")
	}
	if err := l.TruncateTo(ck - 5); err != nil {
		t.Fatal(err)
	}
	if got := l.CleanerCheckpoint(); got != l.LogEndOffset() || got > ck-5 {
		t.Fatalf("checkpoint %d after truncating to %d (log end %d)", got, ck-5, l.LogEndOffset())
	}
	if got, _, err := readOffsetCheckpoint(f.dir, cleanerOffsetFile); err != nil || got != l.CleanerCheckpoint() {
		t.Fatalf("checkpoint file %d, %v", got, err)
	}
}

// TestOffsetMap checks the map's bounds and latest-offset rule.
func TestOffsetMap(t *testing.T) {
	if _, err := NewOffsetMap(24*15, 0.9); !errors.Is(err, ErrMapTooSmall) {
		t.Fatalf("15 slots: %v, want ErrMapTooSmall", err)
	}
	if _, err := NewOffsetMap(1<<20, 0); err == nil {
		t.Fatal("load factor 0 accepted")
	}
	m, err := NewOffsetMap(24*1000, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	if m.Capacity() != 897 { // 997 is the largest prime <= 1000
		t.Fatalf("capacity %d, want %d", m.Capacity(), 897)
	}
	for i := range m.Capacity() {
		if !m.Put(fmt.Appendf(nil, "k%d", i), int64(i)) {
			t.Fatalf("Put #%d refused below capacity", i)
		}
	}
	if m.Put([]byte("one more"), 5) {
		t.Fatal("Put of a new key accepted when full")
	}
	if !m.Put([]byte("k3"), 10_000) || !m.Put([]byte("k3"), 7) {
		t.Fatal("Put of a known key refused when full")
	}
	for i := range m.Capacity() {
		want := int64(i)
		if i == 3 {
			want = 10_000 // the larger offset wins
		}
		if got := m.Get(fmt.Appendf(nil, "k%d", i)); got != want {
			t.Fatalf("#%d: got %d, want %d", i, got, want)
		}
	}
	if m.Get([]byte("absent")) != -1 || m.LatestOffset() != 10_000 || m.Size() != m.Capacity() {
		t.Fatalf("absent %d, latest %d, size %d", m.Get([]byte("absent")), m.LatestOffset(), m.Size())
	}
	m.Clear()
	if m.Size() != 0 || m.Get([]byte("k1")) != -1 || m.LatestOffset() != -1 {
		t.Fatal("Clear left entries")
	}
}
