package segment

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

// lgBenchBatch is a producer batch of 1 KiB records totalling about size
// bytes.
func lgBenchBatch(size int) []byte {
	return lgBatch(max(1, size/1024), 1_700_000_000_000, 1024-10, 7)
}

// BenchmarkAppend appends 1 KiB records in 16 KiB and 1 MiB batches, with
// flush.messages never and with an fsync (Sync) every 8 MiB, as the raw-disk
// comparison in bench/segbench does. Old segments are deleted outside the
// timer to bound disk use.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{16 << 10, 1 << 20} {
		for _, syncEvery := range []int{0, 8 << 20} {
			name := fmt.Sprintf("batch=%dKiB/flush=never", size>>10)
			if syncEvery > 0 {
				name = fmt.Sprintf("batch=%dKiB/fsync=8MiB", size>>10)
			}
			b.Run(name, func(b *testing.B) {
				dir := b.TempDir()
				cfg := DefaultConfig()
				cfg.SegmentBytes = 256 << 20
				cfg.RetentionBytes = 512 << 20
				cfg.RetentionMs = -1
				var rolled atomic.Int64
				l, err := Open(dir, cfg, WithOnSeal(func(SegmentInfo) { rolled.Add(1) }), WithLogger(slog.New(slog.DiscardHandler)))
				if err != nil {
					b.Fatal(err)
				}
				defer func() {
					if err := l.Close(); err != nil {
						b.Error(err)
					}
				}()
				batch := lgBenchBatch(size)
				b.SetBytes(int64(len(batch)))
				b.ReportAllocs()
				unsynced, seen := 0, int64(0)
				b.ResetTimer()
				for range b.N {
					if _, err := l.Append(batch, AppendOptions{LeaderEpoch: 0}); err != nil {
						b.Fatal(err)
					}
					if unsynced += len(batch); syncEvery > 0 && unsynced >= syncEvery {
						if err := l.Sync(); err != nil {
							b.Fatal(err)
						}
						unsynced = 0
					}
					if r := rolled.Load(); r != seen {
						seen = r
						b.StopTimer()
						if _, err := l.EnforceRetention(); err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
					}
				}
			})
		}
	}
}

// BenchmarkRead reads by random offset from a 64 MiB log of 16 KiB batches:
// the zero-copy Read (index lookup and header scan) and ReadCopy of up to
// 1 MiB.
func BenchmarkRead(b *testing.B) {
	dir := b.TempDir()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 16 << 20
	l, err := Open(dir, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := l.Close(); err != nil {
			b.Error(err)
		}
	}()
	batch := lgBenchBatch(16 << 10)
	for range (64 << 20) / len(batch) {
		if _, err := l.Append(batch, AppendOptions{LeaderEpoch: 0}); err != nil {
			b.Fatal(err)
		}
	}
	end := l.LogEndOffset()
	for _, tc := range []struct {
		name string
		copy bool
	}{{"zero-copy", false}, {"copy-1MiB", true}} {
		b.Run(tc.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			if tc.copy {
				b.SetBytes(1 << 20)
			}
			b.ReportAllocs()
			for range b.N {
				off := rng.Int64N(end)
				if tc.copy {
					buf, err := l.ReadCopy(off, 1<<20, end)
					if err != nil || len(buf) == 0 {
						b.Fatal(off, err)
					}
					continue
				}
				rs, err := l.Read(off, 1<<20, end)
				if err != nil || rs.Size == 0 {
					b.Fatal(off, err)
				}
			}
		})
	}
}
