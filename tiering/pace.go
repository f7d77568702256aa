package tiering

import (
	"context"
	"io"

	"golang.org/x/time/rate"
)

// Paced GETs.
//
// With ReaderConfig.Pacer set, the bodies of the reader's GETs (demand
// misses and read-ahead runs alike) are read no faster than the pacer
// allows: each Read takes its bytes from the limiter, waiting for them.
// The store then sends at that rate (TCP flow control holds it back), and
// the work a remote read costs here (the body's copy, the CRC check of
// every batch, the chunk file's write) is spread evenly over time instead
// of coming in bursts of a whole read-ahead run at the store's speed,
// which on a small host take the CPU from everything else the process
// serves. The broker sets the pacer to its remote fetch quota.

// pacedReadMax bounds one paced Read: the chunk copy buffer (copyBatchBufSize),
// so that pacing does not cut the reads of a GET body smaller.
const pacedReadMax = copyBatchBufSize

// pacedBody reads a GET body within lim, charging the bytes each Read
// returned (a network read returns less than asked as often as not).
type pacedBody struct {
	r   io.ReadCloser
	lim *rate.Limiter
	ctx context.Context
}

// paced wraps rc in lim, or returns it as it is when lim is nil.
func paced(ctx context.Context, rc io.ReadCloser, lim *rate.Limiter) io.ReadCloser {
	if lim == nil {
		return rc
	}
	return &pacedBody{r: rc, lim: lim, ctx: ctx}
}

func (p *pacedBody) Read(b []byte) (int, error) {
	if len(b) > pacedReadMax {
		b = b[:pacedReadMax]
	}
	n, err := p.r.Read(b)
	if p.lim.Limit() == rate.Inf {
		return n, err
	}
	for left := n; left > 0; {
		k := min(left, max(p.lim.Burst(), 1))
		if werr := p.lim.WaitN(p.ctx, k); werr != nil {
			return n, werr
		}
		left -= k
	}
	return n, err
}

func (p *pacedBody) Close() error { return p.r.Close() }
