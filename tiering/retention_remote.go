package tiering

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratastream/strata/segment"
)

// RemoteRetention is a tiered topic's total retention, over local and
// remote data: Kafka's retention.ms and retention.bytes. -1 (or any
// negative value) is unlimited; the zero value keeps everything too, so
// set both.
type RemoteRetention struct {
	Ms    int64 // retention.ms
	Bytes int64 // retention.bytes
	// DeleteDelay is how long the objects of a segment dropped from the
	// manifest stay in the store (file.delete.delay.ms, as for local
	// segment files), so that a reader that resolved an older manifest
	// finishes its read. It is measured on the leader's monotonic clock
	// from when it first saw the segment dropped (a time, not a count of
	// later manifest versions: a quiet partition writes none, and a busy
	// one many per second). 0 deletes them at the next step.
	DeleteDelay time.Duration
}

// Unlimited reports whether nothing is ever deleted by this retention
// (DeleteDelay aside).
func (r RemoteRetention) Unlimited() bool { return r.Ms <= 0 && r.Bytes <= 0 }

// expiredSegments returns how many of m's oldest segments total retention
// deletes at now: the longest prefix of segments each of which is older
// than Ms (by its largest timestamp, or its upload time without one) or
// whose removal still leaves the log at or above Bytes. localOnly is the
// size of local data beyond the remote end, counted in the log's size.
func expiredSegments(m *Manifest, localOnly int64, now time.Time, r RemoteRetention) int {
	if r.Unlimited() {
		return 0
	}
	total := m.Bytes() + localOnly
	n := 0
	for _, s := range m.Segments {
		ts := s.MaxTimestamp
		if ts < 0 {
			ts = s.UploadedAt.UnixMilli()
		}
		byTime := r.Ms > 0 && ts < now.UnixMilli()-r.Ms
		bySize := r.Bytes > 0 && total-s.Size >= r.Bytes
		if !byTime && !bySize {
			break
		}
		total -= s.Size
		n++
	}
	return n
}

// localBytesBeyond sums the local segments' bytes at or above offset.
func localBytesBeyond(segs []segment.SegmentInfo, offset int64) int64 {
	var n int64
	for _, s := range segs {
		if s.BaseOffset >= offset {
			n += s.Size
		}
	}
	return n
}

// SetLogStartOffset asks the archiver to move the remote log start up to
// offset (DeleteRecords): segments wholly below it leave the manifest and
// their objects are deleted. The leader applies it at its next step;
// moving it backwards does nothing.
func (a *Archiver) SetLogStartOffset(offset int64) {
	a.mu.Lock()
	a.mu.wantLogStart = max(a.mu.wantLogStart, offset)
	a.mu.Unlock()
	a.Notify()
}

// applyRetention commits a manifest without the segments total retention
// or a requested log start removed, moved to its dropped list; their
// objects are deleted after the delete delay (purgeDropped). No entry of
// the remote log ever points at a missing object.
func (a *Archiver) applyRetention(ctx context.Context) error {
	m, _, ok := a.view()
	if !ok {
		return nil
	}
	a.mu.Lock()
	r, wantStart := a.mu.retention, a.mu.wantLogStart
	a.mu.Unlock()

	n := expiredSegments(m, localBytesBeyond(a.cfg.Log.Segments(), m.EndOffset()), a.cfg.Now(), r)
	for n < len(m.Segments) && m.Segments[n].NextOffset <= wantStart {
		n++
	}
	newStart := m.LogStartOffset
	if n > 0 {
		newStart = max(newStart, m.Segments[n-1].NextOffset)
	}
	if wantStart > newStart {
		// Inside segment n, or beyond the end when every segment went: an
		// empty remote log starts (and ends) there.
		newStart = wantStart
	}
	if n == 0 && newStart == m.LogStartOffset {
		return nil
	}
	next := m.Clone()
	a.drop(next, next.Segments[:n:n])
	next.Segments = next.Segments[n:]
	next.LogStartOffset = newStart
	if err := a.commit(ctx, next); err != nil {
		return fmt.Errorf("tiering: remote retention of %s/%d: %w", a.cfg.Topic, a.cfg.Partition, err)
	}
	a.log.Info("tiering: remote log start moved", "logStartOffset", newStart, "segmentsDropped", n)
	a.logStartMoved(newStart)
	return nil
}

// drop adds segs to next's dropped list, stamped with the wall clock for
// operators.
func (a *Archiver) drop(next *Manifest, segs []RemoteSegment) {
	at := a.cfg.Now().UTC()
	for _, s := range segs {
		next.Dropped = append(next.Dropped, DroppedSegment{RemoteSegment: s, DroppedAt: at})
	}
}

// noteDropped starts the delete-delay clock of every dropped segment of m
// not watched yet and forgets those no longer dropped. Followers watch
// too, so a new leader does not start from zero. Called on the loop
// goroutine only.
func (a *Archiver) noteDropped(m *Manifest) {
	if m == nil {
		return
	}
	now := a.cfg.Mono()
	names := make(map[string]bool, len(m.Dropped))
	for i := range m.Dropped {
		name := m.Dropped[i].ObjectName()
		names[name] = true
		if _, ok := a.dropSeen[name]; !ok {
			a.dropSeen[name] = now
		}
	}
	for name := range a.dropSeen {
		if !names[name] {
			delete(a.dropSeen, name)
		}
	}
}

// purgeDropped deletes, as leader, the objects of the dropped segments
// watched for the delete delay, then commits a manifest without them. A
// failed delete leaves them listed, to be deleted again; a failed commit
// leaves entries whose objects are gone, which nothing reads.
func (a *Archiver) purgeDropped(ctx context.Context) error {
	m, _, ok := a.view()
	if !ok || len(m.Dropped) == 0 {
		return nil
	}
	a.noteDropped(m)
	a.mu.Lock()
	delay := a.mu.retention.DeleteDelay
	a.mu.Unlock()
	now := a.cfg.Mono()
	next := m.Clone()
	next.Dropped = next.Dropped[:0]
	var keys []string
	for i := range m.Dropped {
		d := &m.Dropped[i]
		if now-a.dropSeen[d.ObjectName()] >= delay {
			keys = append(keys, m.SegmentKeys(&d.RemoteSegment)...)
		} else {
			next.Dropped = append(next.Dropped, *d)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	if err := deleteKeys(ctx, a.cfg.Store, keys); err != nil {
		return fmt.Errorf("tiering: deleting objects of dropped segments of %s/%d: %w", a.cfg.Topic, a.cfg.Partition, err)
	}
	if len(next.Dropped) == 0 {
		next.Dropped = nil
	}
	if err := a.commit(ctx, next); err != nil {
		return fmt.Errorf("tiering: commit manifest of %s/%d without deleted segments: %w", a.cfg.Topic, a.cfg.Partition, err)
	}
	a.log.Info("tiering: objects of dropped segments deleted", "segments", len(m.Dropped)-len(next.Dropped))
	return nil
}

// DeletePartition deletes the remote data of a partition of the topic
// incarnation topicID, for topic deletion: the manifest first (readers and
// a late archiver commit then find nothing to build on), then every object
// under the partition's prefix. Nothing of another incarnation with the
// same name is touched: the partition's legacy-layout directory is
// deleted only when its manifest records topicID (a legacy directory
// without a manifest is left to the sweeper). Stop the partition's
// archivers first, or one that never saw a manifest could write a new one.
// Deleting a partition with no remote data is not an error.
func DeletePartition(ctx context.Context, store ObjectStore, topic, topicID string, partition int32) error {
	if !validTopicName(topic) || !ValidTopicID(topicID) || partition < 0 {
		return fmt.Errorf("tiering: delete remote data: invalid partition %q (id %q) %d", topic, topicID, partition)
	}
	fail := func(err error) error {
		return fmt.Errorf("tiering: delete remote data of %s/%d (topic id %s): %w", topic, partition, topicID, err)
	}
	if err := deletePrefix(ctx, store, ManifestKey(topic, topicID, partition), PartitionPrefix(topic, topicID, partition)); err != nil {
		return fail(err)
	}
	legacy := objectKey{topic: topic, partition: partition, name: manifestName}
	m, _, err := loadManifestAt(ctx, store, legacy)
	switch {
	case IsNotFound(err) || errors.Is(err, ErrBadManifest):
		return nil // not provably this incarnation's
	case err != nil:
		return fail(err)
	case m.TopicID != topicID:
		return nil
	}
	if err := deletePrefix(ctx, store, legacy.manifestKey(), legacy.prefix()); err != nil {
		return fail(err)
	}
	return nil
}

// deletePrefix deletes the manifest at manifestKey, then every object
// whose key starts with prefix.
func deletePrefix(ctx context.Context, store ObjectStore, manifestKey, prefix string) error {
	if err := store.Delete(ctx, manifestKey); err != nil {
		return err
	}
	objs, err := store.List(ctx, prefix)
	if err != nil {
		return err
	}
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.Key
	}
	return deleteKeys(ctx, store, keys)
}
