package s3fault

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Fault is what the proxy does to a request a rule picks.
type Fault string

// The faults.
const (
	// SlowDown answers 503 with S3's SlowDown XML error, and Retry-After
	// (whole seconds, rounded up) and x-amz-retry-after (milliseconds)
	// when the rule sets RetryAfter. The store never sees the request.
	SlowDown Fault = "slowdown"
	// InternalError answers 500 with S3's InternalError XML error. The
	// store never sees the request.
	InternalError Fault = "internal-error"
	// Delay holds the request for the rule's Delay, then forwards it.
	Delay Fault = "delay"
	// Throttle forwards the request with its bodies, both ways, passed
	// at the rule's BytesPerSecond: one bucket shared by every request
	// the rule picks, as one slow link.
	Throttle Fault = "throttle"
	// Reset resets the client's connection (TCP RST) after After bytes
	// of a body: of the request body for requests that carry one (put,
	// upload-part, complete-multipart, delete-multi), which then never
	// reach the store; of the store's response body for the others.
	Reset Fault = "reset"
	// DropResponse forwards the request whole, so the store carries it
	// out, and resets the client's connection instead of answering: an
	// operation whose outcome the client cannot know.
	DropResponse Fault = "drop-response"
	// Truncate forwards the request and cuts the response body after
	// After bytes, headers unchanged, closing the connection: the client
	// gets fewer bytes than Content-Length said.
	Truncate Fault = "truncate"
	// ShortBody forwards the request and cuts the response body after
	// After bytes with Content-Length (and the end of Content-Range)
	// rewritten to match: a store that answers a range with less than
	// was asked, consistently.
	ShortBody Fault = "short-body"
	// Refuse closes the client's connection at once with a reset,
	// without reading the request: a store that is down.
	Refuse Fault = "refuse"
	// Stall stops after After bytes of a body (of the request body for
	// requests that carry one, which then never reach the store; of the
	// response body for the others) and holds the connection without
	// progress for the rule's Delay (0: until the client goes away or
	// the proxy closes), then resets it.
	Stall Fault = "stall"
)

// Faults is every fault, in a fixed order.
var Faults = []Fault{SlowDown, InternalError, Delay, Throttle, Reset, DropResponse, Truncate, ShortBody, Refuse, Stall}

// Rule picks requests and the fault to inject into them. A request is
// matched against the rules in order; the first rule that matches and
// whose draw picks it applies, else the request is forwarded untouched.
type Rule struct {
	Fault Fault
	// Ops limits the rule to these operations; empty: every one.
	Ops []Op
	// Key, when set, limits the rule to requests whose key contains it
	// (".log", "/manifest", ...).
	Key string
	// RangedOnly limits the rule to GETs with a Range header.
	RangedOnly bool
	// Fraction is the share of matching requests the rule picks, drawn
	// from the proxy's seeded generator; 0 means every one.
	Fraction float64
	// Limit, when positive, is how many requests the rule picks at most.
	Limit int
	// Delay is the wait of a Delay fault, and how long a Stall holds
	// the connection (0: until the client or the proxy closes).
	Delay time.Duration
	// BytesPerSecond is the rate of a Throttle fault.
	BytesPerSecond int64
	// After is how many body bytes pass before a Reset, Truncate,
	// ShortBody or Stall cut.
	After int64
	// RetryAfter, for SlowDown, is sent in Retry-After and
	// x-amz-retry-after; 0 sends neither.
	RetryAfter time.Duration
}

// validate checks the rule's fields against its fault.
func (r Rule) validate() error {
	if !slices.Contains(Faults, r.Fault) {
		return fmt.Errorf("unknown fault %q", r.Fault)
	}
	for _, op := range r.Ops {
		if !slices.Contains(Ops, op) {
			return fmt.Errorf("unknown operation %q", op)
		}
	}
	switch {
	case r.Fraction < 0 || r.Fraction > 1:
		return fmt.Errorf("fraction %v outside [0, 1]", r.Fraction)
	case r.Limit < 0:
		return fmt.Errorf("negative limit %d", r.Limit)
	case r.After < 0:
		return fmt.Errorf("negative After %d", r.After)
	case r.RetryAfter < 0:
		return fmt.Errorf("negative RetryAfter %v", r.RetryAfter)
	case r.Delay < 0:
		return fmt.Errorf("negative Delay %v", r.Delay)
	case r.Fault == Delay && r.Delay == 0:
		return errors.New("a delay needs a positive Delay")
	case r.Fault == Throttle && r.BytesPerSecond <= 0:
		return errors.New("a throttle needs a positive BytesPerSecond")
	case r.Fault == ShortBody && r.After <= 0:
		return errors.New("a short body needs a positive After")
	}
	return nil
}

// matches reports whether the rule applies to req, before its draw.
func (r *Rule) matches(req Request) bool {
	if len(r.Ops) > 0 && !slices.Contains(r.Ops, req.Op) {
		return false
	}
	if r.Key != "" && !strings.Contains(req.Key, r.Key) {
		return false
	}
	return !r.RangedOnly || req.Ranged
}

// String describes the rule for logs.
func (r Rule) String() string {
	var b strings.Builder
	b.WriteString(string(r.Fault))
	if len(r.Ops) > 0 {
		fmt.Fprintf(&b, " ops=%v", r.Ops)
	}
	if r.Key != "" {
		fmt.Fprintf(&b, " key~%q", r.Key)
	}
	if r.RangedOnly {
		b.WriteString(" ranged")
	}
	if r.Fraction > 0 {
		fmt.Fprintf(&b, " fraction=%g", r.Fraction)
	}
	if r.Limit > 0 {
		fmt.Fprintf(&b, " limit=%d", r.Limit)
	}
	switch r.Fault {
	case Delay:
		fmt.Fprintf(&b, " delay=%v", r.Delay)
	case Throttle:
		fmt.Fprintf(&b, " rate=%dB/s", r.BytesPerSecond)
	case Reset, Truncate, ShortBody, Stall:
		fmt.Fprintf(&b, " after=%d", r.After)
	case SlowDown:
		if r.RetryAfter > 0 {
			fmt.Fprintf(&b, " retry-after=%v", r.RetryAfter)
		}
	}
	return b.String()
}
