package producer

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Errors of the package. Kafka protocol errors from Check are not among
// them: those wrap a *kerr.Error (see ErrorCode).
var (
	// ErrCorruptSnapshot says a snapshot file is not a valid snapshot.
	ErrCorruptSnapshot = errors.New("producer: corrupt snapshot")
	// ErrSnapshotVersion says a snapshot has a format version this build
	// does not read. Load treats it like a corrupt one: the state is
	// rebuilt from an older snapshot or from the log.
	ErrSnapshotVersion = fmt.Errorf("%w: unknown version", ErrCorruptSnapshot)
	// ErrSnapshotOffset says EncodeSnapshot was asked for an offset below
	// batches the state already holds.
	ErrSnapshotOffset = errors.New("producer: snapshot offset below applied batches")
	// ErrCorruptBlockFile says the producer id block file cannot be read.
	// Ids are not handed out until an operator repairs it: starting over
	// from 0 would reuse ids.
	ErrCorruptBlockFile = errors.New("producer: corrupt producer id block file")
	// ErrPoisoned is returned by a FileBlockSource after an fsync or write
	// failed: what reached the disk is unknown until the process restarts.
	ErrPoisoned = errors.New("producer: block source poisoned by an earlier write failure")
	// ErrIDsExhausted says no producer id block is left below 2^63.
	ErrIDsExhausted = errors.New("producer: producer ids exhausted")
	// ErrReplay says the log did not yield the batches Load expected.
	ErrReplay = errors.New("producer: replay of the log failed")
)

// IsCorrupt reports whether err says a snapshot file could not be used
// (corrupt or of an unknown version), as opposed to an I/O failure.
func IsCorrupt(err error) bool { return errors.Is(err, ErrCorruptSnapshot) }

// ErrorCode returns the Kafka error code that err carries: 0 for nil, the
// wrapped *kerr.Error's code, or UNKNOWN_SERVER_ERROR (-1) otherwise.
func ErrorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

// kafkaErr wraps a Kafka error with the detail that the log wants.
func kafkaErr(ke *kerr.Error, format string, args ...any) error {
	return fmt.Errorf("producer: %s: %w", fmt.Sprintf(format, args...), ke)
}
