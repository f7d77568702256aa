package main

import (
	"math"
	"math/bits"
	"sync"
	"time"
)

// histogram is a log-bucketed latency histogram in the spirit of
// HdrHistogram: values in nanoseconds fall into buckets whose width is at
// most 1/64 of their lower bound (under 1.6% relative error), so any
// percentile is reported within that error of the true value while memory
// stays fixed (64 buckets per power of two). The maximum is kept exactly.
//
//	index: v < 64            -> v
//	       otherwise         -> (e+1)*64 + (v>>e) - 64, e = bits.Len64(v) - 7
type histogram struct {
	mu     sync.Mutex
	counts []int64
	total  int64
	sum    float64
	max    int64
}

const subBuckets = 64

func newHistogram() *histogram {
	return &histogram{counts: make([]int64, (64-6+1)*subBuckets)}
}

func bucketOf(v int64) int {
	if v < subBuckets {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - 7
	return (e+1)*subBuckets + int(v>>e) - subBuckets
}

// bucketUpper is the highest value that falls into bucket i.
func bucketUpper(i int) int64 {
	if i < subBuckets {
		return int64(i)
	}
	e := i/subBuckets - 1
	m := int64(i%subBuckets + subBuckets)
	return (m+1)<<e - 1
}

// record adds one latency.
func (h *histogram) record(d time.Duration) {
	v := int64(d)
	h.mu.Lock()
	h.counts[bucketOf(v)]++
	h.total++
	h.sum += float64(v)
	h.max = max(h.max, v)
	h.mu.Unlock()
}

// merge adds o's counts to h.
func (h *histogram) merge(o *histogram) {
	o.mu.Lock()
	defer o.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

// quantile returns the value at quantile q (0..1): the upper bound of the
// bucket holding the ceil(q*n)-th value, capped at the exact maximum.
func (h *histogram) quantile(q float64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.total == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.total)))
	rank = min(max(rank, 1), h.total)
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return time.Duration(min(bucketUpper(i), h.max))
		}
	}
	return time.Duration(h.max)
}

// curveQuantiles are the points of the percentile curve written to JSON:
// every "nine" from 0 to 99.999 and the halves between them.
var curveQuantiles = []float64{0, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9995, 0.9999, 0.99995, 0.99999, 1}

// point is one point of a percentile curve.
type point struct {
	Quantile float64 `json:"q"`
	Ms       float64 `json:"ms"`
}

// latencySummary is what a histogram reports.
type latencySummary struct {
	Count  int64   `json:"count"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
	Curve  []point `json:"curve"`
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func (h *histogram) summary() *latencySummary {
	h.mu.Lock()
	n, sum, mx := h.total, h.sum, h.max
	h.mu.Unlock()
	s := &latencySummary{Count: n, MaxMs: float64(mx) / 1e6}
	if n == 0 {
		return s
	}
	s.MeanMs = sum / float64(n) / 1e6
	s.P50Ms, s.P99Ms, s.P999Ms = ms(h.quantile(0.5)), ms(h.quantile(0.99)), ms(h.quantile(0.999))
	for _, q := range curveQuantiles {
		// Points past the resolution of the sample say nothing new.
		if q > 0 && q < 1 && 1/(1-q) > float64(n) {
			continue
		}
		s.Curve = append(s.Curve, point{q, ms(h.quantile(q))})
	}
	return s
}
