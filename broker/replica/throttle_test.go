package replica

import (
	"math"
	"testing"
	"time"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_000_000, 0)} }

// TestThrottleTokenBucket checks the hold-back decisions of a quota on
// an injected clock: one second's worth passes at once, then debt holds
// back for exactly as long as it takes to repay.
func TestThrottleTokenBucket(t *testing.T) {
	clk := newFakeClock()
	q := NewThrottle(1000, clk.now)
	if over, _ := q.Exceeded(); over {
		t.Fatal("a fresh quota is exceeded")
	}
	q.Record(600)
	if over, _ := q.Exceeded(); over {
		t.Fatal("exceeded after 600 of a 1000-byte bucket")
	}
	q.Record(900) // 500 bytes of debt
	over, wait := q.Exceeded()
	if !over || wait != 500*time.Millisecond {
		t.Fatalf("after 1500 bytes: got exceeded=%v wait=%v, want true 500ms", over, wait)
	}
	clk.advance(499 * time.Millisecond)
	if over, _ := q.Exceeded(); !over {
		t.Fatal("debt repaid 1 ms early")
	}
	clk.advance(time.Millisecond)
	if over, _ := q.Exceeded(); over {
		t.Fatal("still exceeded once the debt is repaid")
	}
	// Idle time banks at most one second's worth.
	clk.advance(time.Hour)
	q.Record(1000)
	if over, _ := q.Exceeded(); over {
		t.Fatal("exceeded after spending exactly the banked second")
	}
	q.Record(1)
	if over, _ := q.Exceeded(); !over {
		t.Fatal("a bucket banked more than one second's worth")
	}
}

// TestThrottleLongRunRate drives a sender that sends 300-byte messages
// whenever the quota allows, over 60 simulated seconds on an injected
// clock: the bytes sent stay within one second's burst plus one message
// of the rate, and the measured rate matches it.
func TestThrottleLongRunRate(t *testing.T) {
	clk := newFakeClock()
	const rate = 10_000
	q := NewThrottle(rate, clk.now)
	sent := 0
	for step := 0; step < 60_000; step++ { // 1 ms steps
		for i := 0; i < 100; i++ {
			if over, _ := q.Exceeded(); over {
				break
			}
			q.Record(300)
			sent += 300
		}
		clk.advance(time.Millisecond)
	}
	lo, hi := 60*rate, 61*rate+300
	if sent < lo || sent > hi {
		t.Fatalf("sent %d bytes in 60 s at %d B/s: want %d..%d", sent, rate, lo, hi)
	}
	if q.Bytes() != int64(sent) {
		t.Fatalf("Bytes() = %d, want %d", q.Bytes(), sent)
	}
	if r := q.Rate(); r < 0.95*rate || r > 1.05*rate {
		t.Fatalf("measured rate %.0f, want %d ±5%%", r, rate)
	}
}

// TestThrottleRates checks the unthrottled and zero rates, SetRate, and
// the measured rate's windows.
func TestThrottleRates(t *testing.T) {
	clk := newFakeClock()
	q := NewThrottle(Unthrottled, clk.now)
	q.Record(math.MaxInt32)
	if over, _ := q.Exceeded(); over {
		t.Fatal("an unthrottled quota is exceeded")
	}
	if q.Limit() != Unthrottled {
		t.Fatalf("Limit() = %d", q.Limit())
	}
	q.SetRate(-5)
	if q.Limit() != Unthrottled {
		t.Fatalf("a negative rate: Limit() = %d, want Unthrottled", q.Limit())
	}
	q.SetRate(0)
	if over, _ := q.Exceeded(); over {
		t.Fatal("rate 0 holds back the first message")
	}
	q.Record(1)
	clk.advance(time.Hour)
	if over, wait := q.Exceeded(); !over || wait <= 0 {
		t.Fatalf("rate 0 after a message: exceeded=%v wait=%v, want held", over, wait)
	}
	q.SetRate(100)
	if over, _ := q.Exceeded(); over {
		t.Fatal("a new rate keeps the old debt")
	}

	// The measured rate: 1000 bytes a second for 20 s reads 1000; after
	// 20 idle seconds it reads 0 (the windows expired).
	m := NewThrottle(Unthrottled, clk.now)
	if m.Rate() != 0 {
		t.Fatalf("rate before any byte: %v", m.Rate())
	}
	for i := 0; i < 20; i++ {
		m.Record(1000)
		clk.advance(time.Second)
	}
	if r := m.Rate(); r < 900 || r > 1100 {
		t.Fatalf("measured %.0f B/s, want about 1000", r)
	}
	clk.advance(20 * time.Second)
	if r := m.Rate(); r != 0 {
		t.Fatalf("measured %.0f B/s after 20 idle seconds, want 0", r)
	}
}
