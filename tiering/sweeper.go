package tiering

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// Sweeper deletes segment objects no manifest references once they are
// older than Grace: what an upload interrupted by a crash, a lost commit
// race or a failed delete left behind.
//
// It lists a partition's objects before it reads the manifest, and the
// archiver never commits objects older than Grace/2, so an object the
// sweeper finds unreferenced and old cannot become referenced later. Only
// names of the segment layout (<20 digits>-<epoch>-<id>.<suffix>) are
// touched; other objects under the prefix are left alone. Running
// sweepers on several brokers at once is safe.
type Sweeper struct {
	Store  ObjectStore
	Grace  time.Duration    // DefaultSweepGrace when 0
	Logger *slog.Logger     // slog.Default() when nil
	Now    func() time.Time // time.Now when nil
}

func (s *Sweeper) grace() time.Duration {
	if s.Grace <= 0 {
		return DefaultSweepGrace
	}
	return s.Grace
}

func (s *Sweeper) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

func (s *Sweeper) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.Default()
	}
	return s.Logger
}

// SweepAll sweeps every partition in the store and returns how many
// objects it deleted. A partition that fails does not stop the others;
// the errors are joined.
func (s *Sweeper) SweepAll(ctx context.Context) (int, error) {
	objs, err := s.Store.List(ctx, "")
	if err != nil {
		return 0, fmt.Errorf("tiering: sweep: %w", err)
	}
	type part struct {
		topic     string
		partition int32
	}
	groups := map[part][]ObjectInfo{}
	var order []part
	for _, o := range objs {
		topic, partition, _, ok := splitObjectKey(o.Key)
		if !ok {
			continue
		}
		p := part{topic, partition}
		if _, seen := groups[p]; !seen {
			order = append(order, p)
		}
		groups[p] = append(groups[p], o)
	}
	total := 0
	var errs []error
	for _, p := range order {
		n, err := s.sweep(ctx, p.topic, p.partition, groups[p])
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

// sweep deletes the old, unreferenced segment objects among objs, the
// partition's objects listed before this call.
func (s *Sweeper) sweep(ctx context.Context, topic string, partition int32, objs []ObjectInfo) (int, error) {
	referenced := map[string]bool{}
	m, _, err := LoadManifest(ctx, s.Store, topic, partition)
	switch {
	case err == nil:
		for i := range m.Segments {
			for _, k := range SegmentKeys(topic, partition, &m.Segments[i]) {
				referenced[k] = true
			}
		}
	case IsNotFound(err):
		// No manifest: nothing is referenced (a partition deleted halfway,
		// or one whose first commit never happened).
	default:
		return 0, fmt.Errorf("tiering: sweep %s/%d: %w", topic, partition, err)
	}
	cutoff := s.now().Add(-s.grace())
	var doomed []string
	for _, o := range objs {
		if _, _, name, ok := splitObjectKey(o.Key); !ok || !isSegmentObjectName(name) {
			continue
		}
		if referenced[o.Key] || !o.ModTime.Before(cutoff) {
			continue
		}
		doomed = append(doomed, o.Key)
	}
	if len(doomed) == 0 {
		return 0, nil
	}
	err = deleteKeys(ctx, s.Store, doomed)
	if err != nil {
		err = fmt.Errorf("tiering: sweep %s/%d: %w", topic, partition, err)
	}
	s.logger().Info("tiering: deleted unreferenced objects", "topic", topic, "partition", partition, "count", len(doomed))
	return len(doomed), err
}

// splitObjectKey splits "<topic>/<partition>/<name>".
func splitObjectKey(key string) (topic string, partition int32, name string, ok bool) {
	parts := strings.Split(key, "/")
	if len(parts) != 3 || parts[0] == "" || parts[2] == "" {
		return "", 0, "", false
	}
	p, err := strconv.ParseInt(parts[1], 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != parts[1] {
		return "", 0, "", false
	}
	return parts[0], int32(p), parts[2], true
}

// isSegmentObjectName reports whether name is a segment object's name:
// <20 digits>-<epoch>-<id><suffix>.
func isSegmentObjectName(name string) bool {
	var suffix string
	for _, s := range []string{SuffixLog, SuffixIndex, SuffixTimeIndex, SuffixSnapshot} {
		if strings.HasSuffix(name, s) {
			suffix = s
			break
		}
	}
	if suffix == "" {
		return false
	}
	f := strings.Split(strings.TrimSuffix(name, suffix), "-")
	if len(f) != 3 || len(f[0]) != 20 || !validObjectID(f[2]) {
		return false
	}
	if _, err := strconv.ParseUint(f[0], 10, 63); err != nil {
		return false
	}
	_, err := strconv.ParseUint(f[1], 10, 31)
	return err == nil
}
