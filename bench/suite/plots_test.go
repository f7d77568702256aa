package main

import (
	"path/filepath"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

// TestTradeoffPlotOnePoint draws scenario 5's curve for a run of one
// quota whose tail was quicker beside the replays than alone: a single
// point under ratio 1 once took the log axis below zero and panicked
// after every scenario had run.
func TestTradeoffPlotOnePoint(t *testing.T) {
	for _, y := range []float64{0.22, 1, 7.5, 0} {
		p, err := tradeoffPlot([]tradeoff{{Name: "loopback", Points: []tradeoffPoint{{Label: "default", X: 266.5, Y: y}}}})
		if err != nil {
			t.Fatalf("ratio %v: %v", y, err)
		}
		if err := tile([]*plot.Plot{p}, 1, 9*vg.Inch, 4.5*vg.Inch, filepath.Join(t.TempDir(), "quota.png")); err != nil {
			t.Fatalf("ratio %v: %v", y, err)
		}
	}
}
