// Package poll waits, in tests, for a condition to hold: it checks the
// condition every millisecond until it holds or a bound passes. The bound
// only stops a test that would hang; it is never a measure of speed, so
// callers make it generous. Every package's tests share it instead of a
// sleep loop of their own; it lives under segment, the lowest layer, and
// imports only the standard library, so any package's tests may use it.
package poll

import (
	"testing"
	"time"
)

// The time between two checks starts at minInterval and doubles up to
// maxInterval.
const (
	minInterval = time.Millisecond
	maxInterval = 100 * time.Millisecond
)

// For checks cond until it returns true, and reports whether it did
// before timeout passed. It may be called from any goroutine.
func For(timeout time.Duration, cond func() bool) bool {
	if cond() {
		return true
	}
	bound := time.NewTimer(timeout)
	defer bound.Stop()
	wait := minInterval
	next := time.NewTimer(wait)
	defer next.Stop()
	for {
		select {
		case <-next.C:
			if cond() {
				return true
			}
			wait = min(2*wait, maxInterval)
			next.Reset(wait)
		case <-bound.C:
			return cond()
		}
	}
}

// Until checks cond until it returns true, and fails the test with what
// if timeout passes first. Call it from the test's goroutine.
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !For(timeout, cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}
