package poll

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestForHolds(t *testing.T) {
	var n atomic.Int64
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	if !For(time.Minute, func() bool { return n.Load() == 3 }) {
		t.Fatalf("n = %d, want 3", n.Load())
	}
}

func TestForTimesOut(t *testing.T) {
	calls := 0
	if For(5*time.Millisecond, func() bool { calls++; return false }) {
		t.Fatal("For reported a condition that never holds as held")
	}
	if calls < 2 {
		t.Errorf("cond checked %d times, want at least before and at the bound", calls)
	}
}
