package tiering

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Sweeper deletes segment objects no manifest references once it has
// watched them unreferenced for Grace: what an upload interrupted by a
// crash, a lost commit race or a failed delete left behind.
//
// An object's age is how long this sweeper has seen it unreferenced, on
// its monotonic clock (Mono), across sweeps: the first sweep that finds
// it unreferenced notes the time, a later one deletes it once Grace has
// passed since, and a sweep that finds it referenced (or gone) forgets
// it. The store's object times (LastModified, the store's clock) and the
// broker's wall clock play no part (clock.go), so a wall clock stepped by
// hours deletes nothing early. A restarted sweeper starts watching again,
// which only delays deletion.
//
// Why nothing a manifest will reference is deleted: the sweeper lists a
// partition's objects before it reads the manifest, so an object it
// deletes was unreferenced by a manifest read at least Grace after the
// object was first listed, hence after its upload started. The archiver
// commits objects only within Grace/2 of starting their upload (and gives
// the commit that deadline), so a commit referencing the object would
// have landed before that manifest read. Dropped segments
// (Manifest.Dropped) count as referenced: their deletion is the
// archiver's, after the delete delay. Only names of the segment layout
// (<20 digits>-<epoch>-<id>.<suffix>) under a partition prefix of either
// key layout are touched; other objects are left alone. Running sweepers
// on several brokers at once is safe: each one's own watching satisfies
// the argument.
type Sweeper struct {
	Store  ObjectStore
	Grace  time.Duration // DefaultSweepGrace when 0
	Logger *slog.Logger  // slog.Default() when nil
	Mono   MonoClock     // SystemMono when nil

	mu struct {
		sync.Mutex
		// seen holds the unreferenced objects being watched, by key.
		seen map[string]seenObject
	}
}

// seenObject is when the sweeper first found an object unreferenced, and
// the version it found (an object rewritten under its key starts over).
type seenObject struct {
	etag string
	at   time.Duration // on the sweeper's monotonic clock
}

func (s *Sweeper) grace() time.Duration {
	if s.Grace <= 0 {
		return DefaultSweepGrace
	}
	return s.Grace
}

func (s *Sweeper) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.Default()
	}
	return s.Logger
}

// SweepAll sweeps every partition in the store and returns how many
// objects it deleted. A partition that fails does not stop the others;
// the errors are joined. Calls must not overlap.
func (s *Sweeper) SweepAll(ctx context.Context) (int, error) {
	objs, err := s.Store.List(ctx, "")
	if err != nil {
		return 0, fmt.Errorf("tiering: sweep: %w", err)
	}
	groups := map[string][]ObjectInfo{}
	keys := map[string]objectKey{}
	var order []string
	listed := make(map[string]bool, len(objs))
	for _, o := range objs {
		k, ok := parseObjectKey(o.Key)
		if !ok {
			continue
		}
		listed[o.Key] = true
		p := k.prefix()
		if _, seen := groups[p]; !seen {
			order = append(order, p)
			keys[p] = k
		}
		groups[p] = append(groups[p], o)
	}
	s.forgetUnlisted(listed)
	total := 0
	var errs []error
	for _, p := range order {
		n, err := s.sweep(ctx, keys[p], groups[p])
		total += n
		if err != nil {
			errs = append(errs, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return total, errors.Join(errs...)
}

// forgetUnlisted stops watching objects that are gone.
func (s *Sweeper) forgetUnlisted(listed map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.mu.seen {
		if !listed[k] {
			delete(s.mu.seen, k)
		}
	}
}

// Run sweeps the whole store every interval until ctx is done.
func (s *Sweeper) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		n, err := s.SweepAll(ctx)
		if err != nil && ctx.Err() == nil {
			s.logger().Warn("tiering: sweep failed", "deleted", n, "err", err)
		} else if n > 0 {
			s.logger().Info("tiering: swept unreferenced objects", "deleted", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweep deletes the unreferenced segment objects among objs, the objects
// under k's partition prefix listed before this call, that it has watched
// for the grace period.
func (s *Sweeper) sweep(ctx context.Context, k objectKey, objs []ObjectInfo) (int, error) {
	referenced := map[string]bool{}
	m, _, err := loadManifestAt(ctx, s.Store, k)
	switch {
	case err == nil:
		for i := range m.Segments {
			for _, key := range m.SegmentKeys(&m.Segments[i]) {
				referenced[key] = true
			}
		}
		for i := range m.Dropped {
			for _, key := range m.SegmentKeys(&m.Dropped[i].RemoteSegment) {
				referenced[key] = true
			}
		}
	case IsNotFound(err):
		// No manifest: nothing is referenced (a partition deleted halfway,
		// or one whose first commit has not happened yet).
	default:
		return 0, fmt.Errorf("tiering: sweep %s: %w", k.prefix(), err)
	}
	now := s.Mono.orSystem()()
	grace := s.grace()
	var doomed []string
	s.mu.Lock()
	if s.mu.seen == nil {
		s.mu.seen = map[string]seenObject{}
	}
	for _, o := range objs {
		ok, _ := parseObjectKey(o.Key)
		if !isSegmentObjectName(ok.name) {
			continue
		}
		if referenced[o.Key] {
			delete(s.mu.seen, o.Key)
			continue
		}
		first, watched := s.mu.seen[o.Key]
		if !watched || first.etag != o.ETag {
			s.mu.seen[o.Key] = seenObject{etag: o.ETag, at: now}
			continue
		}
		if now-first.at >= grace {
			doomed = append(doomed, o.Key)
		}
	}
	s.mu.Unlock()
	if len(doomed) == 0 {
		return 0, nil
	}
	err = deleteKeys(ctx, s.Store, doomed)
	if err != nil {
		err = fmt.Errorf("tiering: sweep %s: %w", k.prefix(), err)
	}
	// The entries of deleted objects go with the next listing; one whose
	// delete failed stays due.
	s.logger().Info("tiering: deleted unreferenced objects", "prefix", k.prefix(), "count", len(doomed))
	return len(doomed), err
}
