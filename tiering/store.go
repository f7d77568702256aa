package tiering

import (
	"context"
	"errors"
	"io"
	"time"
)

// Errors of the object stores. Implementations wrap them with detail; test
// with errors.Is or the predicates.
var (
	// ErrNotFound: the object does not exist.
	ErrNotFound = errors.New("tiering: object not found")
	// ErrPreconditionFailed: a conditional put lost its race (the object
	// changed, or exists when it must not).
	ErrPreconditionFailed = errors.New("tiering: precondition failed")
	// ErrUnavailable: the store could not be reached or answered with a
	// server error; the operation may succeed later.
	ErrUnavailable = errors.New("tiering: object store unavailable")
)

// IsNotFound reports whether err says the object does not exist.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key     string
	Size    int64
	ETag    string // opaque version token for conditional puts
	ModTime time.Time
}

// PutCondition makes a put conditional. The zero value is unconditional.
type PutCondition struct {
	// IfNoneMatch: the put succeeds only if the object does not exist.
	IfNoneMatch bool
	// IfMatch, when set, is the ETag the object must still have.
	IfMatch string
}

// ObjectStore is the small interface Strata needs from S3-compatible
// storage. Keys are slash-separated and never start with a slash; an
// implementation adds its own prefix. Every method honours ctx and is safe
// for concurrent use.
type ObjectStore interface {
	// Put stores size bytes read from r under key, replacing any object
	// (subject to cond). Large objects are uploaded in parts. When Put
	// returns nil the object is durable in the store and visible to Get.
	// It fails with ErrPreconditionFailed when cond does not hold.
	Put(ctx context.Context, key string, r io.Reader, size int64, cond PutCondition) (ObjectInfo, error)
	// Get streams length bytes of the object from offset off (length -1:
	// to the end). The caller closes the reader. ErrNotFound if missing;
	// asking past the end returns the bytes that exist.
	Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error)
	// Stat returns the object's size and ETag, or ErrNotFound.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// List returns every object whose key starts with prefix, sorted by
	// key.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	// Delete removes the object; deleting a missing object is not an
	// error.
	Delete(ctx context.Context, key string) error
}
