package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// lgSide, lgRead and lgResult are what bench/loadgen writes with -json.
type lgSide struct {
	Records     int64   `json:"records"`
	Bytes       int64   `json:"bytes"`
	Seconds     float64 `json:"seconds"`
	RecordsPerS float64 `json:"records_per_s"`
	MBPerS      float64 `json:"mb_per_s"`
	Latency     struct {
		Count  int64   `json:"count"`
		P50Ms  float64 `json:"p50_ms"`
		P99Ms  float64 `json:"p99_ms"`
		P999Ms float64 `json:"p999_ms"`
		MaxMs  float64 `json:"max_ms"`
		Curve  []point `json:"curve"`
	} `json:"latency"`
}

// lgRead is a whole-topic read (loadgen -mode consume, fetch or verify).
type lgRead struct {
	Records     int64   `json:"records"`
	Bytes       int64   `json:"bytes"`
	Seconds     float64 `json:"seconds"`
	RecordsPerS float64 `json:"records_per_s"`
	MBPerS      float64 `json:"mb_per_s"`
	Partitions  int     `json:"partitions"`
	Requests    int64   `json:"requests"`
	Conns       int     `json:"conns"`
	Passes      int     `json:"passes"`
}

type lgResult struct {
	Produce *lgSide `json:"produce"`
	Consume *lgSide `json:"consume"`
	Read    *lgRead `json:"read"`
	Error   string  `json:"error"`

	// clientCPU is loadgen's user+system CPU seconds over the run (the
	// suite's measurement, not in loadgen's JSON).
	clientCPU float64
}

// point is one point of a latency percentile curve.
type point struct {
	Quantile float64 `json:"q"`
	Ms       float64 `json:"ms"`
}

// loadgen runs bench/loadgen in produce mode with the given flags, its
// JSON kept as raw/<label>.json and a row in loadgen.csv. A run that
// fails returns its error (and what it measured, if anything).
func (r *runner) loadgen(ctx context.Context, s *scenario, label, brokers string, args ...string) (*lgResult, error) {
	jsonPath := filepath.Join(r.raw, label+".json")
	_ = os.Remove(jsonPath) // a file of an earlier run, if any
	progress := "off"
	if terminal {
		progress = "on"
	}
	timeout := time.Until(s.deadline) - 5*time.Second
	if timeout < 10*time.Second {
		return nil, errors.New(label + ": no time left in the scenario's bound")
	}
	fixed := []string{"-brokers", brokers, "-label", label, "-json", jsonPath, "-csv", filepath.Join(r.out, "loadgen.csv"),
		"-progress", progress, "-timeout", timeout.Round(time.Second).String()}
	logf("  loadgen %s: %s", label, strings.Join(args, " "))
	_, cpu, err := runTool(ctx, timeout+5*time.Second, r.bins["loadgen"], append(fixed, args...)...)
	res := lgResult{clientCPU: cpu.Seconds()}
	if b, rerr := os.ReadFile(jsonPath); rerr == nil {
		if jerr := json.Unmarshal(b, &res); jerr != nil && err == nil {
			err = jerr
		}
	} else if err == nil {
		err = rerr
	}
	if err == nil && res.Produce == nil {
		err = errors.New("no produce figures in its JSON")
	}
	if err != nil {
		logf("  %s: %v", label, err)
		return &res, fmt.Errorf("%s: %w", label, err)
	}
	p := res.Produce
	logf("    %.0f records/s, %.1f MB/s, produce p50 %.2f p99 %.2f ms", p.RecordsPerS, p.MBPerS, p.Latency.P50Ms, p.Latency.P99Ms)
	if c := res.Consume; c != nil {
		logf("    end-to-end p50 %.2f p99 %.2f ms", c.Latency.P50Ms, c.Latency.P99Ms)
	}
	return &res, nil
}

// readTopic runs bench/loadgen in a read mode (-mode consume, fetch or
// verify, among args) against brokers and returns its figures and the CPU
// seconds loadgen used.
func (r *runner) readTopic(ctx context.Context, timeout time.Duration, brokers string, args ...string) (*lgRead, float64, error) {
	args = append([]string{"-brokers", brokers, "-json", "-", "-timeout", timeout.Round(time.Second).String()}, args...)
	out, cpu, err := runTool(ctx, timeout+10*time.Second, r.bins["loadgen"], args...)
	if err != nil {
		return nil, cpu.Seconds(), err
	}
	var res lgResult
	if err := json.Unmarshal(out, &res); err != nil {
		return nil, cpu.Seconds(), fmt.Errorf("loadgen %s: %w", strings.Join(args, " "), err)
	}
	if res.Read == nil {
		return nil, cpu.Seconds(), fmt.Errorf("loadgen %s: no read figures in its JSON", strings.Join(args, " "))
	}
	return res.Read, cpu.Seconds(), nil
}
