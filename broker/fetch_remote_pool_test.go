package broker

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratastream/strata/segment/poll"
	"github.com/stratastream/strata/tiering"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestRemoteQuotaTokenBucket(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	q := newRemoteQuota(1000, clk.now) // 1000 B/s, a burst of 50 B
	steps := []struct {
		advance time.Duration
		record  int64
		want    time.Duration // throttle after the step
	}{
		{0, 0, 0},
		{0, 40, 0},             // within the burst
		{0, 1010, time.Second}, // 50 - 40 - 1010 = -1000 B: 1 s of debt
		{400 * time.Millisecond, 0, 600 * time.Millisecond},
		{600 * time.Millisecond, 0, 0},                 // paid off
		{10 * time.Second, 100, 50 * time.Millisecond}, // the bucket holds at most the burst
	}
	for i, st := range steps {
		clk.advance(st.advance)
		if st.record > 0 {
			q.record(st.record)
		}
		if got := q.throttle(); got != st.want {
			t.Fatalf("#%d: throttle %v, want %v", i, got, st.want)
		}
	}
	// Unlimited, and back.
	q.set(math.MaxInt64)
	q.record(1 << 40)
	if got, r := q.throttle(), q.rate(); got != 0 || r != 0 {
		t.Fatalf("unlimited: throttle %v, rate %v", got, r)
	}
	q.set(2000)
	if got, r := q.throttle(), q.rate(); got != 0 || r != 2000 {
		t.Fatalf("after set(2000): throttle %v, rate %v", got, r)
	}
	q.record(2100) // 100 - 2100: 1 s at 2000 B/s
	if got := q.throttle(); got != time.Second {
		t.Fatalf("after set(2000) and 2100 B: throttle %v, want 1s", got)
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
