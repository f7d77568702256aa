package sharestate

import (
	"fmt"
	"time"

	"github.com/stratastream/strata/segment"
)

// replayReadBytes is how much Load asks of the log per read.
const replayReadBytes = 1 << 20

// LoadReport says what Load found in a partition.
type LoadReport struct {
	Partition int
	// Records is how many records were replayed; Skipped how many did
	// not decode (or belong to another partition) and were left out,
	// each logged.
	Records, Skipped int
	// SharePartitions is how many share partitions have state.
	SharePartitions int
	Bytes           int64
	Duration        time.Duration
}

// Load makes the coordinator own a partition of __share_group_state: it
// replays log from its start to its end and serves the partition's share
// partitions from then on, appending to log; meanwhile they get
// COORDINATOR_LOAD_IN_PROGRESS. A snapshot replaces a share partition's
// state, an update is merged into it (one of an older snapshot epoch is
// skipped), a snapshot tombstone deletes it. On error the partition stays
// unowned and the error wraps ErrLoad. Load and Unload of one partition
// must not run concurrently.
func (c *Coordinator) Load(partitionID int, log Log) (LoadReport, error) {
	began := time.Now()
	rep := LoadReport{Partition: partitionID}
	if partitionID < 0 || partitionID >= c.cfg.NumPartitions {
		return rep, fmt.Errorf("%w: partition %d of %d: %w", ErrLoad, partitionID, c.cfg.NumPartitions, ErrBadPartition)
	}
	p := &partition{id: partitionID, log: log, loading: true, states: map[Key]*shareState{}, readEpochs: map[Key]int32{}}
	c.mu.Lock()
	switch {
	case c.mu.closed:
		c.mu.Unlock()
		return rep, fmt.Errorf("%w: partition %d: %w", ErrLoad, partitionID, ErrClosed)
	case c.mu.partitions[partitionID] != nil:
		c.mu.Unlock()
		return rep, fmt.Errorf("%w: partition %d: %w", ErrLoad, partitionID, ErrAlreadyLoaded)
	}
	c.mu.partitions[partitionID] = p
	c.mu.Unlock()

	states, err := c.replay(p, &rep)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil || c.mu.closed || c.mu.partitions[partitionID] != p {
		if c.mu.partitions[partitionID] == p {
			delete(c.mu.partitions, partitionID)
		}
		if err == nil {
			err = ErrClosed
		}
		return rep, fmt.Errorf("%w: partition %d: %w", ErrLoad, partitionID, err)
	}
	p.states, p.loading = states, false
	rep.SharePartitions = len(states)
	rep.Duration = time.Since(began)
	c.cfg.Logger.Info("sharestate: loaded partition", "partition", partitionID, "records", rep.Records, "skipped", rep.Skipped,
		"bytes", rep.Bytes, "share_partitions", rep.SharePartitions, "took", rep.Duration)
	return rep, nil
}

// replay reads p's log from its start offset to its end offset and
// returns the share partitions' states; ErrClosed once p is dropped.
func (c *Coordinator) replay(p *partition, rep *LoadReport) (map[Key]*shareState, error) {
	states := map[Key]*shareState{}
	n, err := segment.Replay(p.log, replayReadBytes, func(rec segment.Record) error {
		if p.dropped.Load() {
			return ErrClosed
		}
		rep.Records++
		c.replayRecord(p.id, states, rec, rep)
		return nil
	})
	rep.Bytes += n
	if err != nil {
		return nil, err
	}
	return states, nil
}

// replayRecord applies one record to states.
func (c *Coordinator) replayRecord(partitionID int, states map[Key]*shareState, rec segment.Record, rep *LoadReport) {
	typ, k, v, err := decodeRecord(rec.Key, rec.Value)
	if err == nil && c.PartitionFor(k) != partitionID {
		err = fmt.Errorf("share partition %s belongs to partition %d (was share.coordinator.state.topic.num.partitions changed?)", CoordinatorKey(k), c.PartitionFor(k))
	}
	if err != nil {
		rep.Skipped++
		c.cfg.Logger.Warn("sharestate: skipping record of __share_group_state", "partition", partitionID, "offset", rec.Offset, "err", err)
		return
	}
	cur := states[k]
	switch {
	case typ == keySnapshot && v == nil:
		delete(states, k)
	case typ == keyUpdate && v == nil:
		if cur != nil {
			cur.sinceSnapshot = nil
		}
	case typ == keySnapshot:
		states[k] = &shareState{snapshotEpoch: v.SnapshotEpoch, stateEpoch: v.StateEpoch, leaderEpoch: v.LeaderEpoch,
			startOffset: v.StartOffset, deliveryComplete: v.DeliveryCompleteCount, batches: v.Batches}
	case cur == nil:
		// An update without its snapshot (as Kafka: it becomes the state).
		states[k] = &shareState{snapshotEpoch: v.SnapshotEpoch, leaderEpoch: v.LeaderEpoch, startOffset: v.StartOffset,
			deliveryComplete: v.DeliveryCompleteCount, batches: combine(nil, v.Batches, v.StartOffset), sinceSnapshot: v.Batches, updates: 1}
	case v.SnapshotEpoch != cur.snapshotEpoch:
		// Written before the snapshot that replaced it.
	default:
		if v.LeaderEpoch != -1 {
			cur.leaderEpoch = v.LeaderEpoch
		}
		if v.StartOffset != -1 {
			cur.startOffset = v.StartOffset
		}
		if v.DeliveryCompleteCount != -1 {
			cur.deliveryComplete = v.DeliveryCompleteCount
		}
		cur.batches = combine(cur.batches, v.Batches, cur.startOffset)
		cur.sinceSnapshot = v.Batches
		cur.updates++
	}
}
