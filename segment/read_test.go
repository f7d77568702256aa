package segment

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestOffsetForTimestamp(t *testing.T) {
	cfg := lgConfig()
	cfg.SegmentBytes = 2048
	cfg.IndexIntervalBytes = 200
	l := lgOpen(t, t.TempDir(), cfg)
	// Batch i holds records 4i..4i+3 with timestamps 1000+10i+j (j < 4),
	// except batch 7, whose timestamps go back in time (500..503).
	for i := range 30 {
		ts := int64(1000 + 10*i)
		if i == 7 {
			ts = 500
		}
		lgAppend(t, l, lgBatch(4, ts, 60, byte(i)))
	}
	if len(l.Segments()) < 3 {
		t.Fatalf("want several segments, got %d", len(l.Segments()))
	}
	tests := []struct {
		ts         int64
		wantOffset int64
		wantTs     int64
		wantFound  bool
	}{
		{0, 0, 1000, true},
		{1000, 0, 1000, true},
		{1001, 1, 1001, true},
		{1004, 4, 1010, true},
		{1013, 7, 1013, true},
		{1014, 8, 1020, true},
		{1063, 27, 1063, true},
		{1064, 32, 1080, true}, // batch 7 (500..503) is skipped
		{1071, 32, 1080, true},
		{1293, 119, 1293, true},
		{1294, -1, -1, false},
	}
	for i, tt := range tests {
		off, ts, found, err := l.OffsetForTimestamp(tt.ts)
		if err != nil {
			t.Fatalf("#%d: %v", i, err)
		}
		if !tt.wantFound {
			if found {
				t.Errorf("#%d: OffsetForTimestamp(%d): got %d@%d, want not found", i, tt.ts, off, ts)
			}
			continue
		}
		if !found || off != tt.wantOffset || ts != tt.wantTs {
			t.Errorf("#%d: OffsetForTimestamp(%d): got %d@%d found %v, want %d@%d", i, tt.ts, off, ts, found, tt.wantOffset, tt.wantTs)
		}
	}
	// The log start bounds the answer.
	if err := l.SetLogStartOffset(10); err != nil {
		t.Fatal(err)
	}
	if off, ts, found, err := l.OffsetForTimestamp(0); err != nil || !found || off != 10 || ts != 1022 {
		t.Errorf("after log start 10: got %d@%d %v %v, want 10@1022", off, ts, found, err)
	}
	if ts, off := l.MaxTimestamp(); ts != 1293 || off != 116 {
		t.Errorf("MaxTimestamp: got %d@%d, want 1293@116", ts, off)
	}
}

func TestOffsetForTimestampAfterReopen(t *testing.T) {
	dir := t.TempDir()
	cfg := lgConfig()
	cfg.SegmentBytes = 1500
	cfg.IndexIntervalBytes = 100
	l := lgOpen(t, dir, cfg)
	for i := range 20 {
		lgAppend(t, l, lgBatch(2, int64(100*i), 50, 0))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = lgOpen(t, dir, cfg)
	for i := range 20 {
		ts := int64(100*i) + 1
		off, got, found, err := l.OffsetForTimestamp(ts)
		if err != nil || !found || off != int64(2*i+1) || got != ts {
			t.Errorf("#%d: OffsetForTimestamp(%d): got %d@%d %v %v, want %d@%d", i, ts, off, got, found, err, 2*i+1, ts)
		}
	}
	if ts, off := l.MaxTimestamp(); ts != 1901 || off != 38 {
		t.Errorf("MaxTimestamp: got %d@%d, want 1901@38", ts, off)
	}
}

// TestConcurrentReaders runs readers against a log being appended to, rolled
// and trimmed by retention; run it with -race. Every read must return whole,
// valid batches with the offsets asked for.
func TestConcurrentReaders(t *testing.T) {
	cfg := lgConfig()
	cfg.SegmentBytes = 16 << 10
	cfg.IndexIntervalBytes = 512
	cfg.RetentionBytes = 64 << 10
	cfg.FileDeleteDelayMs = 200
	l := lgOpen(t, t.TempDir(), cfg)
	const readers, appends = 4, 800
	var done atomic.Bool
	var wg sync.WaitGroup
	reads := make([]atomic.Int64, readers) // checked reads, per reader
	errs := make(chan error, 16)
	fail := func(format string, args ...any) {
		select {
		case errs <- &testError{format, args}:
		default:
		}
	}
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			for !done.Load() {
				start, end := l.LogStartOffset(), l.LogEndOffset()
				if end == start {
					continue
				}
				off := start + rng.Int64N(end-start)
				var buf []byte
				if r%2 == 0 {
					rs, err := l.Read(off, 1+rng.IntN(8192), end)
					if err != nil {
						continue // retention may have moved the start
					}
					buf, err = io.ReadAll(io.NewSectionReader(rs.File, rs.Pos, rs.Size))
					if err != nil {
						continue // the segment was deleted and closed meanwhile
					}
				} else {
					var err error
					if buf, err = l.ReadCopy(off, 1+rng.IntN(8192), end); err != nil {
						continue
					}
				}
				first := true
				err := SplitBatches(buf, func(h Header, _ []byte) error {
					if first && (h.BaseOffset > off || h.LastOffset() < off) {
						fail("read at %d returned a batch for %d..%d first", off, h.BaseOffset, h.LastOffset())
					}
					first = false
					return nil
				})
				if err != nil {
					fail("read at %d: %v", off, err)
				}
				reads[r].Add(1)
			}
		}()
	}
	for i := range appends {
		b := lgBatch(1+i%5, int64(i), 100+i%300, byte(i))
		if _, err := l.Append(b, AppendOptions{LeaderEpoch: 0}); err != nil {
			t.Fatal(err)
		}
		if i%100 == 0 {
			if _, err := l.EnforceRetention(); err != nil {
				t.Fatal(err)
			}
			// However the goroutines are scheduled, every reader reads
			// between one retention pass and the next.
			lgWaitEach(t, fmt.Sprintf("a read by every reader after %d appends", i+1), reads)
		}
	}
	done.Store(true)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if l.LogStartOffset() == 0 {
		t.Error("retention deleted nothing")
	}
}

type testError struct {
	format string
	args   []any
}

func (e *testError) Error() string { return fmt.Sprintf(e.format, e.args...) }

func TestReadCopyMatchesRead(t *testing.T) {
	l := lgOpen(t, t.TempDir(), lgConfig())
	lgFill(t, l, 20, 2, 300, 0)
	for off := int64(0); off < 40; off += 3 {
		rs, err := l.Read(off, 2000, 40)
		if err != nil {
			t.Fatal(err)
		}
		got, err := l.ReadCopy(off, 2000, 40)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, rs.Size)
		if _, err := rs.File.ReadAt(want, rs.Pos); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("offset %d: ReadCopy differs from Read", off)
		}
	}
}

// TestConcurrentTruncateAndRead runs readers, Sync, retention and a writer
// that also truncates, all at once; run it with -race. Reads racing with a
// truncation may fail, but nothing may panic, deadlock or race.
func TestConcurrentTruncateAndRead(t *testing.T) {
	cfg := lgConfig()
	cfg.SegmentBytes = 8 << 10
	cfg.IndexIntervalBytes = 256
	cfg.RetentionBytes = 32 << 10
	cfg.FileDeleteDelayMs = 50
	l := lgOpen(t, t.TempDir(), cfg)
	const readers = 3
	var done atomic.Bool
	var wg sync.WaitGroup
	rounds := make([]atomic.Int64, readers+1) // each reader's, then the retention loop's
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			for ; !done.Load(); rounds[r].Add(1) {
				start := l.LogStartOffset()
				end := max(l.LogEndOffset(), start)
				off := start + rng.Int64N(end-start+1)
				switch rng.IntN(4) {
				case 0:
					_, _ = l.ReadCopy(off, rng.IntN(4096), end)
				case 1:
					_, _, _, _ = l.OffsetForTimestamp(rng.Int64N(2000))
				case 2:
					_ = l.Segments()
					_, _ = l.MaxTimestamp()
				case 3:
					_ = l.Sync()
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ; !done.Load(); rounds[readers].Add(1) {
			if _, err := l.EnforceRetention(); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	for i := range 800 {
		if _, err := l.Append(lgBatch(1+i%3, int64(i), 50+i%200, byte(i)), AppendOptions{LeaderEpoch: int32(i / 100)}); err != nil {
			t.Fatal(err)
		}
		if i%37 == 36 {
			to := max(l.LogStartOffset(), l.LogEndOffset()-int64(i%11))
			if err := l.TruncateTo(to); err != nil {
				t.Fatal(err)
			}
		}
		if i%100 == 99 {
			// However the goroutines are scheduled, each of them runs
			// while the writer is at it.
			lgWaitEach(t, fmt.Sprintf("a round of every goroutine after %d appends", i+1), rounds)
		}
	}
	done.Store(true)
	wg.Wait()
	got := lgReadAll(t, l)
	if len(got) == 0 {
		t.Fatal("nothing readable")
	}
}
