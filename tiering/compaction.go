package tiering

import (
	"fmt"
	"math"

	"github.com/stratastream/strata/segment"
)

// Compacted topics that tier.
//
// Kafka refuses cleanup.policy=compact with remote.storage.enable=true;
// Strata allows it (DESIGN.md, "Compaction"). Three things differ from a
// topic that only deletes:
//
//   - The upload gate (uploadable): a local segment is uploaded once the
//     local cleaner has cleaned it (its NextOffset is at or below the log's
//     cleaner checkpoint) or once all its data is older than
//     max.compaction.lag.ms, so the bucket holds dirty data no longer than
//     the cleaner would keep it locally.
//   - Gaps: cleaned segments have offsets without records, inside them and
//     between them (a cleaned segment ends at its last kept batch). A
//     remote segment still covers [BaseOffset, NextOffset) with no gap to
//     its neighbours: an upload that starts in a gap below the cleaner
//     checkpoint begins its entry at the remote end, with indexes rebuilt
//     relative to it (archiver_slice.go). Readers already return the next
//     batch for an offset in a gap (RemoteReader.Read).
//   - The remote cleaner (remote_cleaner.go) compacts what is in the
//     bucket, since the local cleaner never sees it again.

// Compaction is a partition's compaction settings, by Kafka's names, as
// the archiver applies them to the remote log. The zero value is a topic
// that does not compact.
type Compaction struct {
	// Enabled: cleanup.policy holds compact.
	Enabled bool
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio: the remote
	// cleaner runs when the remote bytes not remote-cleaned yet are at
	// least this share of the remote log.
	MinCleanableDirtyRatio float64
	// MinCompactionLagMs is min.compaction.lag.ms: a remote segment holding
	// a record newer than this is not cleaned yet (it and what follows).
	MinCompactionLagMs int64
	// MaxCompactionLagMs is max.compaction.lag.ms: a local segment not
	// cleaned locally is uploaded anyway once all its data is older than
	// this, and the remote cleaner runs whatever the dirty ratio once the
	// oldest dirty remote segment is that old. 0, negative or
	// math.MaxInt64 is unlimited.
	MaxCompactionLagMs int64
	// DeleteRetentionMs is delete.retention.ms: tombstones stay this long
	// after the cleaning that first kept them.
	DeleteRetentionMs int64
	// SegmentBytes is segment.bytes: the remote cleaner groups source
	// segments into replacement objects of about this size at most.
	SegmentBytes int64
}

// Validate checks the settings.
func (c Compaction) Validate() error {
	switch {
	case !c.Enabled:
		return nil
	case !(c.MinCleanableDirtyRatio >= 0 && c.MinCleanableDirtyRatio <= 1):
		return fmt.Errorf("tiering: min.cleanable.dirty.ratio %v outside [0, 1]", c.MinCleanableDirtyRatio)
	case c.MinCompactionLagMs < 0:
		return fmt.Errorf("tiering: min.compaction.lag.ms %d", c.MinCompactionLagMs)
	case c.DeleteRetentionMs < 0:
		return fmt.Errorf("tiering: delete.retention.ms %d", c.DeleteRetentionMs)
	case c.SegmentBytes < 0:
		return fmt.Errorf("tiering: segment.bytes %d", c.SegmentBytes)
	}
	return nil
}

// maxLagBounded reports whether max.compaction.lag.ms bounds anything.
func (c Compaction) maxLagBounded() bool {
	return c.MaxCompactionLagMs > 0 && c.MaxCompactionLagMs < math.MaxInt64
}

// cleanedLog is what the upload gate needs of a compacted local log.
// *segment.Log implements it.
type cleanedLog interface {
	CleanerCheckpoint() int64
}

// cleanerCheckpoint returns the local log's cleaner checkpoint, 0 when
// the log does not say.
func cleanerCheckpoint(l PartitionLog) int64 {
	if cl, ok := l.(cleanedLog); ok {
		return cl.CleanerCheckpoint()
	}
	return 0
}

// uploadable is the upload gate of a compacted topic: the local segment s
// may go to the bucket once it is cleaned (below the cleaner checkpoint
// ckpt) or all its data is older than max.compaction.lag.ms at nowMs. A
// topic that does not compact uploads every sealed committed segment.
func (c Compaction) uploadable(s segment.SegmentInfo, ckpt, nowMs int64) bool {
	if !c.Enabled || s.NextOffset <= ckpt {
		return true
	}
	return c.maxLagBounded() && s.MaxTimestamp <= nowMs-c.MaxCompactionLagMs
}

// SetCompaction changes the compaction settings, applied from the next
// step. Invalid settings are refused.
func (a *Archiver) SetCompaction(c Compaction) error {
	if err := c.Validate(); err != nil {
		return err
	}
	a.mu.Lock()
	a.mu.compaction = c
	a.mu.Unlock()
	a.Notify()
	return nil
}

func (a *Archiver) compaction() Compaction {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mu.compaction
}

// Compacted reports whether the archiver applies compaction (the topic's
// cleanup.policy holds compact).
func (a *Archiver) Compacted() bool { return a.compaction().Enabled }
