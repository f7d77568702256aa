package broker

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/stratastream/strata/segment/poll"
	"github.com/stratastream/strata/tiering"
)

// TestRemoteQuotaRates: the quota's rate and its GET pacer follow set,
// and a read over the quota is held back (the bucket itself is
// replica.Throttle's, tested there).
func TestRemoteQuotaRates(t *testing.T) {
	now := time.Unix(1000, 0)
	q := newRemoteQuota(1000, func() time.Time { return now })
	if got := q.rate(); got != 1000 {
		t.Fatalf("rate %v, want 1000", got)
	}
	if got := q.pacer.Limit(); got != 1000 {
		t.Fatalf("pacer limit %v, want 1000", got)
	}
	if d := q.throttle(); d != 0 {
		t.Fatalf("throttle at start %v, want 0", d)
	}
	q.record(3000) // one second banked: 2 s of debt
	if d := q.throttle(); d != 2*time.Second {
		t.Fatalf("throttle after 3000 B %v, want 2s", d)
	}
	q.set(math.MaxInt64)
	if got, d := q.rate(), q.throttle(); got != 0 || d != 0 || q.pacer.Limit() != rate.Inf {
		t.Fatalf("unlimited: rate %v, throttle %v, pacer %v", got, d, q.pacer.Limit())
	}
}

func TestRemoteFetchRateDefault(t *testing.T) {
	for i, c := range []struct {
		v    int64
		cpus int
		want int64
	}{
		{0, 2, 2 * remoteQuotaPerCPU},
		{0, 0, remoteQuotaPerCPU},
		{5, 8, 5},
		{math.MaxInt64, 2, math.MaxInt64},
	} {
		if got := remoteFetchRate(c.v, c.cpus); got != c.want {
			t.Fatalf("#%d: remoteFetchRate(%d, %d) = %d, want %d", i, c.v, c.cpus, got, c.want)
		}
	}
}

// heldRead is a remote read that blocks until released, like a GET the
// store holds.
type heldRead struct {
	started chan struct{}
	release chan struct{}
	calls   atomic.Int32
}

func newHeldRead() *heldRead {
	return &heldRead{started: make(chan struct{}, 1), release: make(chan struct{})}
}

func (h *heldRead) read(ctx context.Context) (tiering.RemoteSlice, error) {
	h.calls.Add(1)
	h.started <- struct{}{}
	select {
	case <-h.release:
		return tiering.RemoteSlice{Size: 100, NextOffset: 7}, nil
	case <-ctx.Done():
		return tiering.RemoteSlice{}, ctx.Err()
	}
}

// TestRemoteReadPoolBounds: with one goroutine and one pending slot, a
// read held on its GET runs, a second waits, a third is turned away at
// once; the waiting one, given up by its fetch, never runs; the held one
// is counted in flight until released.
func TestRemoteReadPoolBounds(t *testing.T) {
	p := newRemoteReadPool(1, 1)
	t.Cleanup(p.close)
	held := newHeldRead()
	type result struct {
		rs      tiering.RemoteSlice
		release func()
		err     error
	}
	first := make(chan result, 1)
	go func() {
		rs, rel, err := p.read(context.Background(), held.read)
		first <- result{rs, rel, err}
	}()
	<-held.started

	queued := newHeldRead()
	qctx, giveUp := context.WithCancel(context.Background())
	second := make(chan error, 1)
	go func() {
		_, _, err := p.read(qctx, queued.read)
		second <- err
	}()
	poll.Until(t, 5*time.Second, "second read queued", func() bool { return p.queued.Load() == 1 })

	third := newHeldRead()
	if _, _, err := p.read(context.Background(), third.read); !errors.Is(err, errRemoteReadRejected) {
		t.Fatalf("third read: %v, want errRemoteReadRejected", err)
	}
	giveUp()
	if err := <-second; !errors.Is(err, errRemoteReadExpired) {
		t.Fatalf("second read: %v, want errRemoteReadExpired", err)
	}

	close(held.release)
	r := <-first
	if r.err != nil || r.rs.Size != 100 || r.rs.NextOffset != 7 {
		t.Fatalf("first read: %+v, %v", r.rs, r.err)
	}
	if got := p.inFlight.Load(); got != 100 {
		t.Fatalf("in flight %d, want 100", got)
	}
	r.release()
	r.release()
	if got := p.inFlight.Load(); got != 0 {
		t.Fatalf("in flight after release %d, want 0", got)
	}
	// The pool drains the abandoned job without running it: a read
	// submitted after it runs, and the abandoned one never did.
	after := newHeldRead()
	close(after.release)
	if _, rel, err := p.read(context.Background(), after.read); err != nil {
		t.Fatalf("read after: %v", err)
	} else {
		rel()
	}
	if n := queued.calls.Load(); n != 0 {
		t.Fatalf("abandoned read ran %d times", n)
	}
	if n := third.calls.Load(); n != 0 {
		t.Fatalf("rejected read ran %d times", n)
	}
	if p.rejected.Load() != 1 || p.expired.Load() != 1 {
		t.Fatalf("rejected %d, expired %d, want 1 and 1", p.rejected.Load(), p.expired.Load())
	}
}

// TestRemoteReadPoolAbandonRunning: a fetch that gives up on a running
// read returns at once; the read finishes later and its result is
// dropped, not counted in flight.
func TestRemoteReadPoolAbandonRunning(t *testing.T) {
	p := newRemoteReadPool(1, 1)
	t.Cleanup(p.close)
	held := newHeldRead()
	ctx, giveUp := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := p.read(ctx, held.read)
		done <- err
	}()
	<-held.started
	giveUp()
	if err := <-done; !errors.Is(err, errRemoteReadExpired) {
		t.Fatalf("abandoned running read: %v, want errRemoteReadExpired", err)
	}
	close(held.release)
	poll.Until(t, 5*time.Second, "held read finished", func() bool { return p.running.Load() == 0 })
	if got := p.inFlight.Load(); got != 0 {
		t.Fatalf("in flight %d after an abandoned read, want 0", got)
	}
}

// TestRemoteReadPoolClose: close fails queued reads and cancels the
// running one.
func TestRemoteReadPoolClose(t *testing.T) {
	p := newRemoteReadPool(1, 1)
	held := newHeldRead()
	errs := make(chan error, 2)
	go func() {
		_, _, err := p.read(context.Background(), held.read)
		errs <- err
	}()
	<-held.started
	go func() {
		_, _, err := p.read(context.Background(), newHeldRead().read)
		errs <- err
	}()
	poll.Until(t, 5*time.Second, "second read queued", func() bool { return p.queued.Load() == 1 })
	p.close()
	for range 2 {
		if err := <-errs; err == nil {
			t.Fatal("a read succeeded after close")
		}
	}
}
