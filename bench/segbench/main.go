// Command segbench measures how close segment.Log's append path comes to the
// disk's physical limit. In one run it writes the same number of bytes with a
// plain sequential write() loop into a file (the limit) and through
// segment.Log (1 KiB records in 16 KiB and 1 MiB batches), each with no
// fsync and with an fsync every 8 MiB, and prints a Markdown table of MB/s
// and the ratio to raw.
//
// Both sides write into a directory on the same file system (-dir, default
// a temporary directory under the current one). The page cache cannot be
// dropped without privileges, so between runs everything is synced (sync(2))
// and the files removed; with no fsync the numbers include the page cache
// absorbing part of the writes, for both sides alike.
//
//	go run ./bench/segbench -bytes 1073741824
package main

import (
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"syscall"
	"time"

	"github.com/stratastream/strata/segment"
)

func main() {
	total := flag.Int64("bytes", 1<<30, "bytes to write per run")
	dirFlag := flag.String("dir", ".", "directory on the disk to measure; a temporary directory is made inside")
	syncEvery := flag.Int("fsync-every", 8<<20, "bytes between fsyncs in the fsync rows")
	reps := flag.Int("reps", 3, "runs of each side per row; the median is reported")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}

	dir, err := os.MkdirTemp(*dirFlag, "segbench-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	fmt.Printf("segbench: %d MiB per run, median of %d runs per side (alternating order), in %s, 1 KiB records\n\n", *total>>20, *reps, dir)
	fmt.Println("| batch | fsync | raw write() MB/s | segment.Log MB/s | ratio |")
	fmt.Println("|---|---|---:|---:|---:|")
	for _, size := range []int{16 << 10, 1 << 20} {
		batch := buildBatch(size)
		for _, every := range []int{0, *syncEvery} {
			var raws, segs []float64
			for rep := range *reps {
				// Alternate which side goes first, so that drift in the
				// disk's state does not favour one.
				for i := range 2 {
					var mbps float64
					var err error
					if (rep+i)%2 == 0 {
						mbps, err = runRaw(dir, len(batch), *total, every)
						raws = append(raws, mbps)
					} else {
						mbps, err = runLog(dir, batch, *total, every)
						segs = append(segs, mbps)
					}
					if err != nil {
						log.Fatal(err)
					}
				}
			}
			raw, seg := median(raws), median(segs)
			mode := "never"
			if every > 0 {
				mode = fmt.Sprintf("every %d MiB", every>>20)
			}
			fmt.Printf("| %d KiB | %s | %.0f | %.0f | %.2f |\n", size>>10, mode, raw, seg, seg/raw)
		}
	}
}

func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// buildBatch returns a producer batch of 1 KiB records of about size bytes.
func buildBatch(size int) []byte {
	recs := make([]segment.Record, max(1, size/1024))
	value := make([]byte, 1024-10)
	for i := range value {
		value[i] = byte(i * 7)
	}
	now := time.Now().UnixMilli()
	for i := range recs {
		recs[i] = segment.Record{Timestamp: now, Value: value}
	}
	b, err := segment.BuildBatch(segment.BatchSpec{Records: recs})
	if err != nil {
		log.Fatal(err)
	}
	return b
}

// settle writes back everything dirty so that one run's writeback does not
// slow the next.
func settle() { syscall.Sync() }

// runRaw writes total bytes in chunks of size with write(2), fsyncing every
// syncEvery bytes (0: never), and returns MB/s.
func runRaw(dir string, size int, total int64, syncEvery int) (float64, error) {
	settle()
	path := filepath.Join(dir, "raw")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, err
	}
	chunk := make([]byte, size)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	start := time.Now()
	var written int64
	unsynced := 0
	for written < total {
		n, err := f.Write(chunk)
		if err != nil {
			return 0, err
		}
		written += int64(n)
		if unsynced += n; syncEvery > 0 && unsynced >= syncEvery {
			if err := f.Sync(); err != nil {
				return 0, err
			}
			unsynced = 0
		}
	}
	elapsed := time.Since(start)
	if err := f.Close(); err != nil {
		return 0, err
	}
	if err := os.Remove(path); err != nil {
		return 0, err
	}
	return float64(written) / elapsed.Seconds() / 1e6, nil
}

// runLog appends batch until total bytes are written, calling Sync every
// syncEvery bytes (0: never), and returns MB/s. Close (which fsyncs) is not
// timed, as the raw side does not fsync at the end either.
func runLog(dir string, batch []byte, total int64, syncEvery int) (float64, error) {
	settle()
	logDir := filepath.Join(dir, "log")
	l, err := segment.Open(logDir, segment.DefaultConfig(), segment.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return 0, err
	}
	start := time.Now()
	var written int64
	unsynced := 0
	for written < total {
		if _, err := l.Append(batch, segment.AppendOptions{LeaderEpoch: 0}); err != nil {
			return 0, err
		}
		written += int64(len(batch))
		if unsynced += len(batch); syncEvery > 0 && unsynced >= syncEvery {
			if err := l.Sync(); err != nil {
				return 0, err
			}
			unsynced = 0
		}
	}
	elapsed := time.Since(start)
	if err := l.Close(); err != nil {
		return 0, err
	}
	if err := os.RemoveAll(logDir); err != nil {
		return 0, err
	}
	return float64(written) / elapsed.Seconds() / 1e6, nil
}
