package segment

import (
	"errors"
	"io"
	"os"
	"slices"
	"sync"
	"testing"
	"time"
)

// lgSegmentBases returns the base offsets of the log's segments.
func lgSegmentBases(l *Log) []int64 {
	var bases []int64
	for _, s := range l.Segments() {
		bases = append(bases, s.BaseOffset)
	}
	return bases
}

func TestRetentionBySize(t *testing.T) {
	cfg := lgConfig()
	one := int64(len(lgBatch(1, 0, 200, 0)))
	cfg.SegmentBytes = 2 * one // two batches per segment
	cfg.RetentionMs = -1
	l := lgOpen(t, t.TempDir(), cfg)
	lgFill(t, l, 9, 1, 200, 0) // segments 0,2,4,6 full; 8 active with one batch
	tests := []struct {
		retentionBytes int64
		wantDeleted    []int64
		wantBases      []int64
	}{
		{-1, nil, []int64{0, 2, 4, 6, 8}},
		{9 * one, nil, []int64{0, 2, 4, 6, 8}},
		{8 * one, nil, []int64{0, 2, 4, 6, 8}}, // deleting 2 batches would go below 8
		{7 * one, []int64{0}, []int64{2, 4, 6, 8}},
		{2*one + 1, []int64{2, 4}, []int64{6, 8}},
		{1, []int64{6}, []int64{8}}, // never the active segment
	}
	for i, tt := range tests {
		cfg.RetentionBytes = tt.retentionBytes
		l.UpdateConfig(cfg)
		deleted, err := l.EnforceRetention()
		if err != nil {
			t.Fatalf("#%d: %v", i, err)
		}
		var got []int64
		for _, d := range deleted {
			got = append(got, d.BaseOffset)
			if _, err := os.Stat(d.LogPath); !os.IsNotExist(err) {
				t.Errorf("#%d: %s still exists", i, d.LogPath)
			}
		}
		if !slices.Equal(got, tt.wantDeleted) {
			t.Errorf("#%d: got deleted %v, want %v", i, got, tt.wantDeleted)
		}
		if bases := lgSegmentBases(l); !slices.Equal(bases, tt.wantBases) {
			t.Errorf("#%d: got segments %v, want %v", i, bases, tt.wantBases)
		}
		if got, want := l.LogStartOffset(), tt.wantBases[0]; got != want {
			t.Errorf("#%d: got log start %d, want %d", i, got, want)
		}
	}
	if _, err := l.Read(0, 100, 100); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Errorf("read below the log start: got %v, want ErrOffsetOutOfRange", err)
	}
	if off, ok, err := readOffsetCheckpoint(l.Dir(), logStartOffsetFile); err != nil || !ok || off != 8 {
		t.Errorf("log start checkpoint: got %d %v %v, want 8", off, ok, err)
	}
}

func TestRetentionByTime(t *testing.T) {
	cfg := lgConfig()
	cfg.RetentionMs = 10_000
	cfg.SegmentMs = 1 << 62                             // no roll on age here
	cfg.SegmentBytes = int64(len(lgBatch(1, 0, 10, 0))) // one batch per segment
	var mu sync.Mutex
	clock := time.UnixMilli(100_000)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	l := lgOpen(t, t.TempDir(), cfg, WithClock(now))
	// Batch i has timestamp 100_000 + 1000*i, except batch 2 (far future).
	for i := range 6 {
		ts := int64(100_000 + 1000*i)
		if i == 2 {
			ts = 1 << 50
		}
		lgAppend(t, l, lgBatch(1, ts, 10, 0))
	}
	tests := []struct {
		now       int64
		wantBases []int64
	}{
		{110_000, []int64{0, 1, 2, 3, 4, 5}},
		{110_001, []int64{1, 2, 3, 4, 5}},
		{113_500, []int64{2, 3, 4, 5}}, // segment 2 blocks newer ones
		{1 << 51, []int64{5}},
	}
	for i, tt := range tests {
		mu.Lock()
		clock = time.UnixMilli(tt.now)
		mu.Unlock()
		if _, err := l.EnforceRetention(); err != nil {
			t.Fatal(err)
		}
		if bases := lgSegmentBases(l); !slices.Equal(bases, tt.wantBases) {
			t.Errorf("#%d: now %d: got segments %v, want %v", i, tt.now, bases, tt.wantBases)
		}
	}
}

func TestRetentionVetoAndHighWatermark(t *testing.T) {
	cfg := lgConfig()
	cfg.RetentionBytes = 1
	cfg.SegmentBytes = int64(len(lgBatch(1, 0, 10, 0)))
	var mu sync.Mutex
	var asked []int64
	allowBelow := int64(2)
	l := lgOpen(t, t.TempDir(), cfg, WithDeleteVeto(func(si SegmentInfo) bool {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, si.BaseOffset)
		return si.BaseOffset < allowBelow
	}))
	lgFill(t, l, 6, 1, 10, 0)
	l.SetHighWatermark(4)
	tests := []struct {
		allowBelow int64
		hw         int64
		wantBases  []int64
		wantAsked  []int64
	}{
		{2, 4, []int64{2, 3, 4, 5}, []int64{0, 1, 2}}, // vetoed at 2
		{10, 4, []int64{4, 5}, []int64{2, 3}},         // segment 4 ends above the high watermark
		{10, 6, []int64{5}, []int64{4}},
	}
	for i, tt := range tests {
		mu.Lock()
		allowBelow, asked = tt.allowBelow, nil
		mu.Unlock()
		l.SetHighWatermark(tt.hw)
		if _, err := l.EnforceRetention(); err != nil {
			t.Fatal(err)
		}
		if bases := lgSegmentBases(l); !slices.Equal(bases, tt.wantBases) {
			t.Errorf("#%d: got segments %v, want %v", i, bases, tt.wantBases)
		}
		mu.Lock()
		if !slices.Equal(asked, tt.wantAsked) {
			t.Errorf("#%d: veto asked about %v, want %v", i, asked, tt.wantAsked)
		}
		mu.Unlock()
	}
}

func TestSetLogStartOffset(t *testing.T) {
	dir := t.TempDir()
	cfg := lgConfig()
	cfg.SegmentBytes = int64(2 * len(lgBatch(2, 0, 10, 0)))
	l := lgOpen(t, dir, cfg)
	lgFill(t, l, 7, 2, 10, 0) // segments at 0, 4, 8, 12 (active, one batch)
	tests := []struct {
		start     int64
		wantStart int64
		wantBases []int64
		wantErr   error
	}{
		{3, 3, []int64{0, 4, 8, 12}, nil},
		{1, 3, []int64{0, 4, 8, 12}, nil}, // backwards: no-op
		{4, 4, []int64{4, 8, 12}, nil},
		{11, 11, []int64{8, 12}, nil},
		{15, 11, []int64{8, 12}, ErrOffsetOutOfRange},
		{14, 14, []int64{12}, nil}, // the active segment stays
	}
	for i, tt := range tests {
		err := l.SetLogStartOffset(tt.start)
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("#%d: got error %v, want %v", i, err, tt.wantErr)
		}
		if got := l.LogStartOffset(); got != tt.wantStart {
			t.Errorf("#%d: got log start %d, want %d", i, got, tt.wantStart)
		}
		if bases := lgSegmentBases(l); !slices.Equal(bases, tt.wantBases) {
			t.Errorf("#%d: got segments %v, want %v", i, bases, tt.wantBases)
		}
		if off, _, _ := readOffsetCheckpoint(dir, logStartOffsetFile); off != tt.wantStart {
			t.Errorf("#%d: checkpoint holds %d, want %d", i, off, tt.wantStart)
		}
	}
	if _, err := l.Read(13, 100, 100); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Errorf("read below log start: got %v", err)
	}
	lgCrash(t, l)
	l = lgOpen(t, dir, cfg)
	if got := l.LogStartOffset(); got != 14 {
		t.Errorf("after reopen: got log start %d, want 14", got)
	}
}

// fakeTimers stands in for time.AfterFunc (withAfterFunc): it records
// each timer and runs its function only when the test fires it.
type fakeTimers struct {
	mu     sync.Mutex
	timers []*fakeTimer
}

type fakeTimer struct {
	d       time.Duration
	f       func()
	stopped bool
	fired   bool
}

func (ft *fakeTimers) afterFunc(d time.Duration, f func()) func() bool {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	tm := &fakeTimer{d: d, f: f}
	ft.timers = append(ft.timers, tm)
	return func() bool {
		ft.mu.Lock()
		defer ft.mu.Unlock()
		was := !tm.stopped && !tm.fired
		tm.stopped = true
		return was
	}
}

// pending returns the delays of the timers neither fired nor stopped.
func (ft *fakeTimers) pending() []time.Duration {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	var ds []time.Duration
	for _, tm := range ft.timers {
		if !tm.stopped && !tm.fired {
			ds = append(ds, tm.d)
		}
	}
	return ds
}

// fire runs every pending timer's function, as if its delay had passed.
func (ft *fakeTimers) fire() {
	ft.mu.Lock()
	var due []func()
	for _, tm := range ft.timers {
		if !tm.stopped && !tm.fired {
			tm.fired = true
			due = append(due, tm.f)
		}
	}
	ft.mu.Unlock()
	for _, f := range due {
		f()
	}
}

// TestDeletedSegmentReadable checks that a zero-copy read handed out before
// retention deleted its segment can still be sent until file.delete.delay.ms
// has passed, and that the descriptor is closed afterwards. The delay's
// timer is a fake one the test fires.
func TestDeletedSegmentReadable(t *testing.T) {
	cfg := lgConfig()
	cfg.SegmentBytes = int64(len(lgBatch(1, 0, 100, 0)))
	cfg.FileDeleteDelayMs = 300
	cfg.RetentionBytes = 1
	var timers fakeTimers
	l := lgOpen(t, t.TempDir(), cfg, withAfterFunc(timers.afterFunc))
	want := lgFill(t, l, 3, 1, 100, 0)
	rs, err := l.Read(0, 1000, 3)
	if err != nil {
		t.Fatal(err)
	}
	deleted, err := l.EnforceRetention()
	if err != nil || len(deleted) != 2 {
		t.Fatalf("got deleted %v, %v; want 2 segments", deleted, err)
	}
	if got := timers.pending(); !slices.Equal(got, []time.Duration{300 * time.Millisecond, 300 * time.Millisecond}) {
		t.Fatalf("delayed closes %v, want two of file.delete.delay.ms", got)
	}
	got, err := io.ReadAll(io.NewSectionReader(rs.File, rs.Pos, rs.Size))
	if err != nil || string(got) != string(want[0]) {
		t.Fatalf("read of a deleted segment within the delay: %v", err)
	}
	timers.fire()
	if _, err := rs.File.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("file of a deleted segment after the delay: %v, want it closed", err)
	}
}

// TestRetentionKeepsEpochs: with WithKeepEpochs, segments deleted by
// retention keep their leader epochs (a tiered log: they are still in
// the partition's log), across a reopen too; without it, the epochs below
// the new log start go. SetLocalLogStartOffset (a follower following its
// leader's local start) does as retention; SetLogStartOffset drops them
// either way.
func TestRetentionKeepsEpochs(t *testing.T) {
	for _, keep := range []bool{false, true} {
		cfg := lgConfig()
		one := int64(len(lgBatch(1, 0, 200, 0)))
		cfg.SegmentBytes = 2 * one
		cfg.RetentionMs = -1
		dir := t.TempDir()
		var opts []Option
		if keep {
			opts = append(opts, WithKeepEpochs(func() bool { return true }))
		}
		l := lgOpen(t, dir, cfg, opts...)
		for i := range 8 {
			if i == 2 || i == 5 {
				if err := l.Epochs().Assign(int32(i), int64(i)); err != nil {
					t.Fatal(err)
				}
			}
			lgAppend(t, l, lgBatch(1, 0, 200, 0))
		}
		cfg.RetentionBytes = 3 * one
		l.UpdateConfig(cfg)
		if _, err := l.EnforceRetention(); err != nil {
			t.Fatal(err)
		}
		if l.LogStartOffset() != 4 {
			t.Fatalf("keep=%v: log start %d, want 4", keep, l.LogStartOffset())
		}
		want := []EpochEntry{{2, 4}, {5, 5}}
		if keep {
			want = []EpochEntry{{2, 2}, {5, 5}}
		}
		if got := l.Epochs().Entries(); !slices.Equal(got, want) {
			t.Fatalf("keep=%v: epochs %v after retention, want %v", keep, got, want)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = lgOpen(t, dir, cfg, opts...)
		if got := l.Epochs().Entries(); !slices.Equal(got, want) {
			t.Fatalf("keep=%v: epochs %v after reopening, want %v", keep, got, want)
		}
		// A follower following its leader's local start: as retention.
		if err := l.SetLocalLogStartOffset(6); err != nil {
			t.Fatal(err)
		}
		if !keep {
			want = []EpochEntry{{5, 6}}
		}
		if got := l.Epochs().Entries(); l.LogStartOffset() != 6 || !slices.Equal(got, want) {
			t.Fatalf("keep=%v: log start %d, epochs %v after SetLocalLogStartOffset(6), want 6 and %v", keep, l.LogStartOffset(), got, want)
		}
		if err := l.SetLogStartOffset(7); err != nil {
			t.Fatal(err)
		}
		if got := l.Epochs().Entries(); !slices.Equal(got, []EpochEntry{{5, 7}}) {
			t.Fatalf("keep=%v: epochs %v after SetLogStartOffset(7), want [{5 7}]", keep, got)
		}
	}
}
