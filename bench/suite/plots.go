package main

import (
	"cmp"
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var (
	figureColor = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	refColor    = color.RGBA{R: 160, G: 160, B: 160, A: 255}
)

// plots draws throughput.png, latency.png, replay.png and quota.png into
// dir.
func plots(rep *report, dir string) error {
	var errs []error
	var bars []barGroup
	curves := map[string][]curve{}
	var panels []string
	var ser []series
	var trade []tradeoff
	for _, s := range rep.Scenarios {
		trade = append(trade, s.Tradeoffs...)
		for _, b := range s.Bars {
			if len(b.Values) > 0 {
				bars = append(bars, b)
			}
		}
		keys := make([]string, 0, len(s.Curves))
		for k := range s.Curves {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if _, ok := curves[k]; !ok {
				panels = append(panels, k)
			}
			curves[k] = append(curves[k], s.Curves[k]...)
		}
		ser = append(ser, s.Series...)
	}
	if len(bars) > 0 {
		var ps []*plot.Plot
		for _, b := range bars {
			p, err := barPlot(b)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			ps = append(ps, p)
		}
		errs = append(errs, tile(ps, 3, 5*vg.Inch, 3.6*vg.Inch, filepath.Join(dir, "throughput.png")))
	}
	if len(panels) > 0 {
		var ps []*plot.Plot
		for _, k := range panels {
			p, err := latencyPlot(k, curves[k])
			if err != nil {
				errs = append(errs, err)
				continue
			}
			ps = append(ps, p)
		}
		errs = append(errs, tile(ps, 1, 9*vg.Inch, 4.5*vg.Inch, filepath.Join(dir, "latency.png")))
	}
	if len(ser) > 0 {
		p, err := seriesPlot(ser)
		if err != nil {
			errs = append(errs, err)
		} else {
			errs = append(errs, tile([]*plot.Plot{p}, 1, 9*vg.Inch, 4.5*vg.Inch, filepath.Join(dir, "replay.png")))
		}
	}
	if len(trade) > 0 {
		p, err := tradeoffPlot(trade)
		if err != nil {
			errs = append(errs, err)
		} else {
			errs = append(errs, tile([]*plot.Plot{p}, 1, 9*vg.Inch, 4.5*vg.Inch, filepath.Join(dir, "quota.png")))
		}
	}
	return errors.Join(errs...)
}

// tradeoffPlot draws scenario 5's curves: the tail consumer's p99
// against the replay rate, a labelled point per remote fetch quota.
func tradeoffPlot(ts []tradeoff) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "S5 tail consumer p99 during replays ÷ alone, against the replay rate, per remote fetch quota"
	p.X.Label.Text = "replay MB/s (cold, from MinIO)"
	p.Y.Label.Text = "tail p99 ÷ alone (log scale; goal ≤ 2)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.X.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	var args []any
	lo, hi := 1.0, 2.0 // the axis always shows ratio 1 and the goal
	for _, t := range ts {
		pts := slices.Clone(t.Points)
		slices.SortFunc(pts, func(a, b tradeoffPoint) int { return cmp.Compare(a.X, b.X) })
		xys := make(plotter.XYs, len(pts))
		labels := make([]string, len(pts))
		for i, pt := range pts {
			xys[i] = plotter.XY{X: pt.X, Y: max(pt.Y, 0.001)}
			labels[i] = pt.Label
			lo, hi = min(lo, xys[i].Y), max(hi, xys[i].Y)
		}
		args = append(args, t.Name, xys)
		l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
		if err != nil {
			return nil, err
		}
		p.Add(l)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return nil, err
	}
	// Set the range: gonum widens a range of one value by ±1, which
	// takes a log axis below zero when all points have one ratio under 1.
	p.Y.Min, p.Y.Max = lo/1.5, hi*1.5
	return p, nil
}

// barPlot is one bar chart: the figure's bars in blue, its references'
// in grey, value labels on top.
func barPlot(b barGroup) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = b.Title
	p.Y.Label.Text = b.Unit
	p.Y.Min = 0
	top := 0.0
	for i, v := range b.Values {
		bc, err := plotter.NewBarChart(plotter.Values{v}, vg.Points(28))
		if err != nil {
			return nil, err
		}
		bc.XMin = float64(i)
		bc.Color = figureColor
		if b.IsRef[i] {
			bc.Color = refColor
		}
		bc.LineStyle.Width = 0
		p.Add(bc)
		top = max(top, v)
	}
	labels := make([]string, len(b.Values))
	xys := make(plotter.XYs, len(b.Values))
	for i, v := range b.Values {
		labels[i] = num(v)
		xys[i] = plotter.XY{X: float64(i), Y: v + top*0.02}
	}
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
	if err != nil {
		return nil, err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].XAlign = draw.XCenter
	}
	p.Add(l)
	p.Y.Max = top * 1.15
	p.NominalX(b.Labels...)
	return p, nil
}

// quantileX places quantile q on a "nines" axis: 0.9 -> 1, 0.99 -> 2, ...
func quantileX(q float64) float64 { return -math.Log10(1 - q) }

func latencyPlot(title string, cs []curve) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title + " (percentile curves)"
	p.X.Label.Text = "percentile (the leftmost point is the minimum)"
	p.Y.Label.Text = "ms (log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.X.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 0, Label: ""}, {Value: quantileX(0.5), Label: "50"},
		{Value: 1, Label: "90"}, {Value: 2, Label: "99"}, {Value: 3, Label: "99.9"}, {Value: 4, Label: "99.99"}, {Value: 5, Label: "99.999"}})
	p.Legend.Top = true
	p.Legend.Left = true
	var args []any
	for _, c := range cs {
		var xys plotter.XYs
		for _, pt := range c.Points {
			if pt.Quantile >= 1 {
				continue // the maximum is in the tables
			}
			xys = append(xys, plotter.XY{X: quantileX(pt.Quantile), Y: max(pt.Ms, 0.001)})
		}
		if len(xys) > 0 {
			args = append(args, c.Name, xys)
		}
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return nil, err
	}
	return p, nil
}

func seriesPlot(ss []series) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "S4 replay from offset 0 out of MinIO: throughput over time (bare Fetch, 250 ms windows)"
	p.X.Label.Text = "seconds since the replay started"
	p.Y.Label.Text = "MB/s"
	p.Y.Min = 0
	var args []any
	top := 0.0
	for _, s := range ss {
		xys := plotter.XYs{{X: 0, Y: 0}}
		for i := range s.T {
			xys = append(xys, plotter.XY{X: s.T[i], Y: s.MBPerS[i]})
			top = max(top, s.MBPerS[i])
		}
		args = append(args, s.Name, xys)
	}
	if err := plotutil.AddLines(p, args...); err != nil {
		return nil, err
	}
	p.Y.Min, p.Y.Max = 0, top*1.05
	p.Legend.Top = true
	return p, nil
}

// tile draws plots in rows of cols, each w × h, into one PNG.
func tile(ps []*plot.Plot, cols int, w, h vg.Length, path string) error {
	if len(ps) == 0 {
		return nil
	}
	cols = min(cols, len(ps))
	rows := (len(ps) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
	}
	for i, p := range ps {
		grid[i/cols][i%cols] = p
	}
	img := vgimg.New(w*vg.Length(cols), h*vg.Length(rows))
	dc := draw.New(img)
	t := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(grid, t, dc)
	for i := range grid {
		for j, p := range grid[i] {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
