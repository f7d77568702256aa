package main

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// progress draws a one-line bar on stderr while the run goes: share done
// (of -records or of -duration), records sent and acknowledged, the rate
// so far and, with consumers, records consumed.
type progress struct {
	on  bool
	c   config
	len int
}

func newProgress(c config) *progress {
	on := c.Progress == "on"
	if c.Progress == "auto" {
		if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			on = true
		}
	}
	return &progress{on: on, c: c}
}

func (p *progress) show(g *gen, elapsed time.Duration) {
	if !p.on {
		return
	}
	var frac float64
	if p.c.Records > 0 {
		frac = float64(g.acked.Load()) / float64(p.c.Records)
	} else {
		frac = float64(elapsed) / float64(p.c.Duration)
	}
	frac = min(max(frac, 0), 1)
	const width = 30
	n := int(frac * width)
	bar := strings.Repeat("=", n) + strings.Repeat(" ", width-n)
	acked := g.acked.Load()
	line := fmt.Sprintf("\r[%s] %3.0f%% %6.1fs acked %d (%.0f/s, %.1f MB/s)", bar, frac*100, elapsed.Seconds(),
		acked, float64(acked)/elapsed.Seconds(), float64(acked)*float64(p.c.Size)/elapsed.Seconds()/1e6)
	if p.c.Consumers > 0 {
		line += fmt.Sprintf(" consumed %d", g.consumed.Load())
	}
	if pad := p.len - len(line); pad > 0 {
		line += strings.Repeat(" ", pad)
	}
	p.len = len(line)
	fmt.Fprint(os.Stderr, line)
}

func (p *progress) done(g *gen, elapsed time.Duration) {
	if p.on {
		p.show(g, elapsed)
		fmt.Fprintln(os.Stderr)
	}
}
