package tiering

import (
	"context"
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
}

// Unlimited reports whether nothing is ever deleted by this retention.
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
// or a requested log start removed, then deletes their objects: manifest
// entry first, objects after, so no entry ever points at a missing object.
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
	dropped := next.Segments[:n:n]
	next.Segments = next.Segments[n:]
	next.LogStartOffset = newStart
	if err := a.commit(ctx, next); err != nil {
		return fmt.Errorf("tiering: remote retention of %s/%d: %w", a.cfg.Topic, a.cfg.Partition, err)
	}
	a.log.Info("tiering: remote log start moved", "logStartOffset", newStart, "segmentsDeleted", n)
	a.deleteObjects(ctx, dropped)
	a.logStartMoved(newStart)
	return nil
}

// DeletePartition deletes a partition's remote data, for topic deletion:
// the manifest first (readers and a late archiver commit then find
// nothing to build on), then every object under the partition's prefix.
// Stop the partition's archivers first, or one that never saw a manifest
// could write a new one. Deleting a partition with no remote data is not
// an error.
func DeletePartition(ctx context.Context, store ObjectStore, topic string, partition int32) error {
	if err := store.Delete(ctx, ManifestKey(topic, partition)); err != nil {
		return fmt.Errorf("tiering: delete remote data of %s/%d: %w", topic, partition, err)
	}
	objs, err := store.List(ctx, PartitionPrefix(topic, partition))
	if err != nil {
		return fmt.Errorf("tiering: delete remote data of %s/%d: %w", topic, partition, err)
	}
	keys := make([]string, len(objs))
	for i, o := range objs {
		keys[i] = o.Key
	}
	if err := deleteKeys(ctx, store, keys); err != nil {
		return fmt.Errorf("tiering: delete remote data of %s/%d: %w", topic, partition, err)
	}
	return nil
}
