package main

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBucketBounds(t *testing.T) {
	for i, v := range []int64{0, 1, 63, 64, 65, 127, 128, 129, 1000, 123456789, 1 << 40, 1<<62 + 12345} {
		b := bucketOf(v)
		if up := bucketUpper(b); up < v {
			t.Errorf("#%d: value %d in bucket %d with upper bound %d", i, v, b, up)
		}
		if b > 0 {
			if lo := bucketUpper(b-1) + 1; lo > v {
				t.Errorf("#%d: value %d in bucket %d starting at %d", i, v, b, lo)
			}
		}
	}
}

func TestQuantileError(t *testing.T) {
	h := newHistogram()
	r := rand.New(rand.NewPCG(1, 2))
	var vals []int64
	for range 100000 {
		v := int64(r.ExpFloat64() * 1e6)
		vals = append(vals, v)
		h.record(time.Duration(v))
	}
	slices.Sort(vals)
	for i, q := range []float64{0.5, 0.9, 0.99, 0.999, 1} {
		want := vals[max(0, int(q*float64(len(vals)))-1)]
		got := int64(h.quantile(q))
		if d := float64(got-want) / float64(want); d < -0.02 || d > 0.02 {
			t.Errorf("#%d: q %v: got %d, want %d within 2%%", i, q, got, want)
		}
	}
}
