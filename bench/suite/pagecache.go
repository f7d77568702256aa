package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The page cache fill brings the machine to the memory state of a broker
// that has run for a while before anything is measured: a page cache that
// holds all of memory, so the pages new log data goes into are reclaimed
// from older file data, as on any broker that has written more than its
// RAM (24 GiB at 300 MB/s: under two minutes).
//
// On a virtual machine whose host backs guest memory lazily and takes
// free pages back (virtio-balloon free page reporting, as on the machine
// of bench/RESULTS.md), the state matters more than anywhere else: the
// first write to a page the host took back costs a host page fault, which
// the guest sees as system time of the writer. Measured there, writing
// into such pages cost ~2.7 CPU s/GB against ~0.25 for pages the guest
// keeps, and it fell on whatever wrote first after the machine's start or
// after files were deleted: a broker's pwrite, the floor's first run
// (which is why the floor is the least of its runs). The fill pays that
// once, up front, and the fill's own figure in the report shows what it
// cost.
//
// The fill is a file in the run's temporary directory, written and
// fdatasync'ed (so its pages are clean and reclaimable, and its writeback
// is over before scenario 1 times the disk), kept until the run ends. It
// grows until the free memory (MemFree) is below pageCacheFreeTarget and
// then by pageCacheOvershoot more, to at most a third of the free disk,
// so that what stays free is about what the kernel keeps free by itself
// (its watermarks; a fill as large as MemFree left 5 GiB free, the kernel
// dropping other cache on the way): leaving some free would
// only move the host's cost to the next writer (measured: with 2.2 GiB
// left free, the floor's first run of 2 GB still cost 2.57 CPU s/GB).
// Files a scenario deletes give pages back that the host may take again;
// within a measured run nothing is deleted. The host may also drop the
// guest's page cache as a whole (seen once on that machine: Cached fell
// from 21 GB to 90 MB with the files still there): the figures of a run
// in which that happened are back to the host's first-touch cost, which
// their CPU s/GB shows. Scenario 6 sizes its retained data to the disk
// left.

// The fill's sizes: it writes until MemFree is below pageCacheFreeTarget,
// then pageCacheOvershoot more; it checks MemFree every pageCacheStep.
const (
	pageCacheFreeTarget = 512 << 20
	pageCacheOvershoot  = 1 << 30
	pageCacheStep       = 256 << 20
)

// pageCacheMin is the smallest fill worth writing: less than this means
// no room on the disk.
const pageCacheMin = 1 << 30

// pageCacheFill is what the fill did, for the report.
type pageCacheFill struct {
	MemFreeBefore int64   `json:"mem_free_before"`
	MemFreeAfter  int64   `json:"mem_free_after"`
	Bytes         int64   `json:"bytes"`
	Seconds       float64 `json:"seconds"`
	// CPUSPerGB is the suite's user+system CPU per 10^9 bytes written
	// (the fdatasync's wait not counted as CPU): what writing fresh page
	// cache pages cost on this machine.
	CPUSPerGB float64 `json:"cpu_s_per_gb"`
	Skipped   string  `json:"skipped,omitempty"`
	Error     string  `json:"error,omitempty"`
}

// fillPageCache writes the fill (see above) into dir. Failing to is not
// fatal: the run goes on and the report says so.
func fillPageCache(ctx context.Context, dir string) *pageCacheFill {
	pc := &pageCacheFill{}
	free, err := memFree()
	if err != nil {
		pc.Error = err.Error()
		return pc
	}
	pc.MemFreeBefore, pc.MemFreeAfter = free, free
	limit := freeBytes(dir) / 3
	if limit < pageCacheMin {
		pc.Skipped = fmt.Sprintf("%.1f GiB of memory free, %.1f GiB of disk: no room for a fill", float64(free)/(1<<30), float64(freeBytes(dir))/(1<<30))
		return pc
	}
	logf("page cache fill: %.1f GiB free of memory; writing until under %d MiB is free (at most %.1f GiB) so new log data reclaims pages as on a long-running broker", float64(free)/(1<<30), pageCacheFreeTarget>>20, float64(limit)/(1<<30))
	t0, cpu0 := time.Now(), selfCPU()
	size, err := writeFill(ctx, filepath.Join(dir, "page-cache-fill"), limit)
	if err != nil {
		pc.Error = err.Error()
		return pc
	}
	pc.Bytes, pc.Seconds = size, time.Since(t0).Seconds()
	pc.CPUSPerGB = (selfCPU() - cpu0) / (float64(size) / 1e9)
	if after, err := memFree(); err == nil {
		pc.MemFreeAfter = after
	}
	logf("  %.1f GiB in %.0f s, %.2f CPU s/GB; %.1f GiB of memory free now", float64(size)/(1<<30), pc.Seconds, pc.CPUSPerGB, float64(pc.MemFreeAfter)/(1<<30))
	return pc
}

// writeFill writes a new file at path in 1 MiB writes until MemFree is
// under pageCacheFreeTarget and pageCacheOvershoot more is written, or
// limit bytes, and fdatasyncs it. It returns the bytes written.
func writeFill(ctx context.Context, path string, limit int64) (int64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	done, stopAt := int64(0), limit
	for done < stopAt {
		if ctx.Err() != nil {
			return done, errors.Join(ctx.Err(), f.Close())
		}
		if _, err := f.Write(buf); err != nil {
			return done, errors.Join(err, f.Close())
		}
		done += int64(len(buf))
		if stopAt == limit && done%pageCacheStep == 0 {
			if free, err := memFree(); err == nil && free < pageCacheFreeTarget {
				stopAt = min(limit, done+pageCacheOvershoot)
			}
		}
	}
	if err := f.Sync(); err != nil {
		return done, errors.Join(err, f.Close())
	}
	return done, f.Close()
}

// memFree is /proc/meminfo's MemFree in bytes.
func memFree() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemFree:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/meminfo MemFree %q: %v", rest, err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("/proc/meminfo has no MemFree")
}

// pageCacheLine describes the fill for summary.md.
func pageCacheLine(pc *pageCacheFill) string {
	switch {
	case pc == nil:
		return ""
	case pc.Error != "":
		return fmt.Sprintf("Page cache fill: FAILED (%s); figures were measured with %.1f GiB of memory free, where writes may pay the host's first-touch cost (bench/suite/pagecache.go).\n\n", esc(pc.Error), float64(pc.MemFreeBefore)/(1<<30))
	case pc.Skipped != "":
		return fmt.Sprintf("Page cache fill: none written (%s).\n\n", esc(pc.Skipped))
	}
	return fmt.Sprintf("Page cache fill, before scenario 1 and kept to the end (bench/suite/pagecache.go): %.1f GiB written and fdatasync'ed with %.1f GiB of memory free, so log data reclaims clean page cache as on a long-running broker instead of taking pages the host must fault in; writing it cost %.2f CPU s/GB (%.0f s), the price of fresh pages on this machine; %.1f GiB free after.\n\n",
		float64(pc.Bytes)/(1<<30), float64(pc.MemFreeBefore)/(1<<30), pc.CPUSPerGB, pc.Seconds, float64(pc.MemFreeAfter)/(1<<30))
}
