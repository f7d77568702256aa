package segment

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkClean cleans a dirty log of 32 MiB (10-record batches, keys
// drawn from a set a tenth the size of the record count) and, in the same
// run on copies of the same files, reads every .log file sequentially and
// writes it to a new file with one fsync per file: the raw sequential
// read+write rate of this disk. It reports both rates and clean/raw (the
// goal is >= 0.5). One sub-benchmark per record size and
// file.delete.delay.ms: at the default (60 s) the replaced segments are
// closed, and their blocks freed, after the cleaning, as the broker runs
// it; at 0 inside it. MB/s counts the dirty bytes. Besides the ratio of
// the totals (clean/raw) it reports the median of the iterations' own
// ratios (clean/raw-median: each pair runs back to back, so a machine
// whose load changes during the run skews it less), and the CPU time
// (user + system, of the whole process) each side took per GB of dirty
// log (clean-cpu-s/GB, raw-cpu-s/GB). Clean gets the producers' last
// offsets as the broker passes them (an empty map: the batches have no
// producer id).
//
// Neither side pays for its setup: the copies are synced before the
// timer starts, and removed after each iteration, so that the page cache
// reuses its pages as on a broker that has run a while (on a VM, keeping
// every iteration's copies makes the page cache take never-touched
// memory, whose first touch slows the raw copy's writes about fivefold
// after some 700 MB and flatters the ratio).
func BenchmarkClean(b *testing.B) {
	for _, valueSize := range []int{100, 1000} {
		b.Run(fmt.Sprintf("value=%dB", valueSize), func(b *testing.B) {
			tmpl := b.TempDir()
			size := cbBuildDirtyLog(b, tmpl, 32<<20, valueSize)
			for _, delayMs := range []int64{DefaultConfig().FileDeleteDelayMs, 0} {
				b.Run(fmt.Sprintf("file.delete.delay.ms=%d", delayMs), func(b *testing.B) {
					cbCleanAndCopy(b, tmpl, size, delayMs)
				})
			}
		})
	}
}

// cbCleanAndCopy runs BenchmarkClean's iterations on copies of the dirty
// log in tmpl (size bytes of sealed segments).
func cbCleanAndCopy(b *testing.B, tmpl string, size, delayMs int64) {
	b.SetBytes(size)
	m, err := NewOffsetMap(16<<20, 0.9)
	if err != nil {
		b.Fatal(err)
	}
	var cleanTime, rawTime, cleanCPU, rawCPU time.Duration
	var ratios []float64
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		dir := filepath.Join(b.TempDir(), fmt.Sprint(i))
		cbCopyDir(b, tmpl, dir)
		cfg := cbConfig()
		cfg.FileDeleteDelayMs = delayMs
		l, err := Open(dir, cfg, WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		began, cpu := time.Now(), cbCPUTime(b)
		// The broker passes its producers' state (no producer
		// here: the batches have no producer id); without it Clean
		// would scan every batch header of the log for it.
		res, err := l.Clean(context.Background(), CleanConfig{Map: m, DeleteRetentionMs: 86_400_000, ProducerLastOffsets: map[int64]int64{}})
		took := time.Since(began)
		cleanCPU += cbCPUTime(b) - cpu
		cleanTime += took
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			b.Logf("%d segments into %d, %d of %d records kept, %d bytes written; map built in %v, clean took %v", res.SegmentsRead, res.SegmentsWritten, res.RecordsKept, res.RecordsRead, res.BytesWritten, res.MapDuration, res.Duration)
		}
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
		raw := filepath.Join(b.TempDir(), fmt.Sprint(i))
		cbCopyDir(b, tmpl, raw)
		began, cpu = time.Now(), cbCPUTime(b)
		cbRawCopy(b, raw)
		rawTook := time.Since(began)
		rawCPU += cbCPUTime(b) - cpu
		rawTime += rawTook
		for _, d := range []string{dir, raw} {
			if err := os.RemoveAll(d); err != nil {
				b.Fatal(err)
			}
		}
		ratios = append(ratios, rawTook.Seconds()/took.Seconds())
		b.StartTimer()
	}
	mb := float64(size) * float64(b.N) / 1e6
	cleanRate, rawRate := mb/cleanTime.Seconds(), mb/rawTime.Seconds()
	b.ReportMetric(cleanRate, "clean-MB/s")
	b.ReportMetric(rawRate, "raw-MB/s")
	b.ReportMetric(cleanRate/rawRate, "clean/raw")
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "clean/raw-median")
	gb := float64(size) * float64(b.N) / 1e9
	b.ReportMetric(cleanCPU.Seconds()/gb, "clean-cpu-s/GB")
	b.ReportMetric(rawCPU.Seconds()/gb, "raw-cpu-s/GB")
}

// cbCPUTime is the CPU time (user + system) the process has used.
func cbCPUTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func cbConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 8 << 20
	return cfg
}

// cbBuildDirtyLog writes about total bytes of batches into a log in dir,
// seals the last segment and returns the bytes of the sealed segments.
func cbBuildDirtyLog(b *testing.B, dir string, total int64, valueSize int) int64 {
	b.Helper()
	l, err := Open(dir, cbConfig(), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	nrec := total / int64(valueSize+30)
	keys := max(nrec/10, 1)
	value := []byte(strings.Repeat("x", valueSize))
	var written int64
	for written < total {
		recs := make([]Record, 10)
		for i := range recs {
			recs[i] = Record{Timestamp: 1_700_000_000_000, Key: fmt.Appendf(nil, "key-%08d", rng.Int64N(keys)), Value: value}
		}
		batch, err := BuildBatch(BatchSpec{Records: recs})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Append(batch, AppendOptions{LeaderEpoch: 0}); err != nil {
			b.Fatal(err)
		}
		written += int64(len(batch))
	}
	if _, err := l.rollForTest(); err != nil {
		b.Fatal(err)
	}
	var size int64
	for _, s := range l.Segments() {
		size += s.Size
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	return size
}

func cbCopyDir(b *testing.B, from, to string) {
	b.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		b.Fatal(err)
	}
	syscall.Sync()
}

// cbRawCopy reads every .log file of dir in 512 KiB chunks and writes it
// to a new file, fsyncing each.
func cbRawCopy(b *testing.B, dir string) {
	b.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, defaultCleanIOBuffer)
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), LogSuffix) {
			continue
		}
		in, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dir, e.Name()+".copy"))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.CopyBuffer(struct{ io.Writer }{out}, struct{ io.Reader }{in}, buf); err != nil {
			b.Fatal(err)
		}
		if err := out.Sync(); err != nil {
			b.Fatal(err)
		}
		if err := out.Close(); err != nil {
			b.Fatal(err)
		}
		if err := in.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
