package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// floorResult is what bench/floor prints with -json: the CPU floor of
// taking bytes in, one socket read, one pwrite and CRC-32C per byte.
type floorResult struct {
	Bytes int64 `json:"bytes"`
	Chunk int   `json:"chunk"`
	Runs  []struct {
		Seconds   float64 `json:"seconds"`
		MBPerS    float64 `json:"mb_per_s"`
		UserS     float64 `json:"user_s"`
		SystemS   float64 `json:"system_s"`
		CPUSPerGB float64 `json:"cpu_s_per_gb"`
	} `json:"runs"`
	CPUSPerGB        float64 `json:"cpu_s_per_gb"`
	CRCOnlyCPUSPerGB float64 `json:"crc32c_only_cpu_s_per_gb"`
	// Scenario is the scenario during which the suite ran it (the first
	// that needed it); Error why it failed.
	Scenario int    `json:"scenario"`
	Error    string `json:"error,omitempty"`
}

// floorChunk is bench/floor's buffer: the bytes of each pwrite and CRC.
const floorChunk = 1 << 20

// floorRef names the floor as the reference of a CPU figure.
const floorRef = "floor: one loopback socket read + one pwrite + CRC-32C of the same bytes (bench/floor, 1 MiB buffers, least of its runs)"

// cpuFloor returns the run's CPU floor, running bench/floor the first time
// a scenario asks for it (so that a run of some scenarios, -only, measures
// it too), with its file in the run's temporary directory. A failure is
// recorded in s and the floor is then zero (its figures show no ratio).
func (r *runner) cpuFloor(ctx context.Context, s *scenario) float64 {
	if r.floor != nil {
		return r.floor.CPUSPerGB
	}
	fl := &floorResult{Scenario: s.ID}
	r.floor, r.rep.Floor = fl, fl
	dir := filepath.Join(r.tmp, "floor")
	defer os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fl.Error = err.Error()
		s.fail("CPU floor", err)
		return 0
	}
	logf("  CPU floor: bench/floor, %d bytes, %d runs", r.o.floorBytes, r.o.floorRepeat)
	timeout := min(2*time.Minute, time.Until(s.deadline)/4)
	if err := runJSON(ctx, timeout, fl, r.bins["floor"], "-json", "-dir", dir,
		"-bytes", strconv.FormatInt(r.o.floorBytes, 10), "-chunk", strconv.Itoa(floorChunk), "-repeat", strconv.Itoa(r.o.floorRepeat)); err != nil {
		fl.CPUSPerGB, fl.Error = 0, err.Error()
		s.fail("CPU floor", err)
		return 0
	}
	for i, x := range fl.Runs {
		logf("    run %d: %.0f MB/s, %.3f CPU s/GB (user %.2f s, system %.2f s)", i+1, x.MBPerS, x.CPUSPerGB, x.UserS, x.SystemS)
	}
	logf("    floor %.3f CPU s/GB; CRC-32C alone %.3f", fl.CPUSPerGB, fl.CRCOnlyCPUSPerGB)
	return fl.CPUSPerGB
}

// cpuFigure adds a figure of CPU seconds per 10^9 bytes (zero: not
// measured) with the run's floor as its reference.
func (r *runner) cpuFigure(ctx context.Context, s *scenario, name string, cpuSPerGB float64, g *goal) *figure {
	f := s.figure(name+", CPU s/GB ÷ floor", "CPU s/GB", g)
	f.setIf(cpuSPerGB)
	f.ref(floorRef, r.cpuFloor(ctx, s))
	return f
}

// floorLine describes the run's floor for summary.md.
func floorLine(fl *floorResult) string {
	if fl == nil {
		return ""
	}
	if fl.Error != "" {
		return fmt.Sprintf("CPU floor (bench/floor, during scenario %d): FAILED: %s\n\n", fl.Scenario, esc(fl.Error))
	}
	runs := ""
	for i, x := range fl.Runs {
		if i > 0 {
			runs += ", "
		}
		runs += fmt.Sprintf("%.3f (%.0f MB/s, %.0f%% system)", x.CPUSPerGB, x.MBPerS, 100*x.SystemS/max(x.UserS+x.SystemS, 1e-9))
	}
	return fmt.Sprintf("CPU floor, the reference of every CPU s/GB figure: %.3f CPU s per GB for one read from a loopback TCP socket into a %d KiB buffer, one pwrite(2) of it into a new file (page cache, no fsync) and CRC-32C of the same bytes, user+system of the process (getrusage), least of %d runs of %d MB each (%s; the sender, a child process, not counted), measured during scenario %d; CRC-32C alone from memory: %.3f CPU s/GB.\n\n",
		fl.CPUSPerGB, fl.Chunk>>10, len(fl.Runs), fl.Bytes/1e6, runs, fl.Scenario, fl.CRCOnlyCPUSPerGB)
}
