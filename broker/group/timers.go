package group

import "time"

// timers is the clock the session, join-phase and sync-phase timeouts run
// on: the runtime's (runtimeTimers) outside this package's tests, which
// set a fake clock (Config.timers) that fires the timers as the test
// advances it, to check a timeout at its boundary without waiting for it.
type timers interface {
	// now is the time deadlines are computed from.
	now() time.Time
	// afterFunc calls f once d has passed, with none of the caller's
	// locks held, and returns the timer (time.AfterFunc).
	afterFunc(d time.Duration, f func()) timer
}

// timer is a timer started by timers.afterFunc; *time.Timer is one.
type timer interface {
	Stop() bool
	Reset(d time.Duration) bool
}

// runtimeTimers are the runtime's monotonic timers.
type runtimeTimers struct{}

func (runtimeTimers) now() time.Time { return time.Now() }

func (runtimeTimers) afterFunc(d time.Duration, f func()) timer { return time.AfterFunc(d, f) }
