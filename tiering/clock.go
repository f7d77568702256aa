package tiering

import "time"

// Clocks.
//
// Every duration that guards a deletion (the sweeper's grace, the
// archiver's "commit within half the grace", the delete delay of dropped
// segments) is measured on this process's monotonic clock, never by
// comparing the broker's wall clock with the store's object times
// (ObjectInfo.ModTime is the store's clock, or for the local-directory
// store the wall clock at the time of writing, which jumps with it). A
// wall clock stepped by hours forward or backward then changes no such
// decision. Durations measured by two brokers are compared only as
// lengths, which needs their clocks to run at the same rate, not to agree.
//
// The other sound design, comparing object times with the store's own
// current time (the Date header of a response), was not taken: the
// local-directory store has no clock of its own (its object times are
// this machine's wall clock, the one that jumps), the header has a
// one-second resolution, and it trusts every proxy on the way. Watching an
// object for the grace period needs nothing from the store.
//
// The wall clock stays for what is about wall time: retention.ms against
// record timestamps (as Kafka) and the times written into manifests for
// operators.

// MonoClock reads a monotonic clock: the time elapsed since a fixed,
// arbitrary origin. It never goes back and does not follow changes of the
// wall clock. Tests inject one to move time; SystemMono is the real one.
type MonoClock func() time.Duration

// monoOrigin is the origin of SystemMono; time.Now carries Go's monotonic
// reading, so durations from it are monotonic.
var monoOrigin = time.Now()

// SystemMono is the process's monotonic clock.
func SystemMono() time.Duration { return time.Since(monoOrigin) }

// orSystem returns c, or SystemMono when c is nil.
func (c MonoClock) orSystem() MonoClock {
	if c == nil {
		return SystemMono
	}
	return c
}
