package tiering

import (
	"errors"
	"time"
)

// ErrThrottled: the store asked its client to slow down (S3's 503
// SlowDown or ServiceUnavailable, 429). It comes wrapped together with
// ErrUnavailable: the operation may succeed later, after a longer wait
// than a plain failure gets (see StoreError.RetryAfter).
var ErrThrottled = errors.New("tiering: object store is throttling requests")

// StoreError details a failed store operation for the caller's backoff
// and for metrics. An S3Store's errors carry one (errors.As); the
// package's sentinels (ErrUnavailable, ErrThrottled, ErrNotFound, ...)
// are in its chain as before.
type StoreError struct {
	// Op is the operation: put, get, head, list or delete.
	Op string
	// Code names the failure: S3's error code (SlowDown, InternalError,
	// ServiceUnavailable, AccessDenied, ...), http_<status> for an answer
	// without a known code, or what went wrong on the connection:
	// timeout, reset, refused, closed (the store closed the connection
	// before answering), truncated (a body shorter than its headers
	// said, or a range other than the one asked for), other.
	Code string
	// RetryAfter is how long the store asked the client to wait
	// (Retry-After or x-amz-retry-after), 0 when it did not say.
	RetryAfter time.Duration
	Err        error
	// body: the failure came after the store had answered, while its
	// body was read or checked (the S3 client does not retry those).
	body bool
}

func (e *StoreError) Error() string { return e.Err.Error() }
func (e *StoreError) Unwrap() error { return e.Err }

// RetryAfter returns how long err says the store asked to wait before
// the next attempt, 0 when it did not say.
func RetryAfter(err error) time.Duration {
	var se *StoreError
	if errors.As(err, &se) {
		return se.RetryAfter
	}
	return 0
}

// IsThrottled reports whether err says the store is throttling.
func IsThrottled(err error) bool { return errors.Is(err, ErrThrottled) }

// StoreErrorCount is how many requests to a store failed one way.
type StoreErrorCount struct {
	Op    string // put, get, head, list, delete
	Code  string // as StoreError.Code
	Count int64
}

// ErrorCounter is implemented by stores that count their failed
// requests (S3Store): every request that failed, by operation and code,
// including those the client then retried successfully. Answers that
// are outcomes rather than failures (not found, precondition failed,
// range not satisfiable) and requests the caller cancelled are not
// counted.
type ErrorCounter interface {
	StoreErrors() []StoreErrorCount
}
