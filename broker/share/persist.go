package share

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file moves a share partition's state to and from the Persister.
// The state written is the whole window: the start offset and one state
// batch per run of records with the same state and delivery count, an
// acquired record written as available with its delivery count (a lock
// does not survive the leader), so the share coordinator's merge of new
// batches over old ones yields exactly the window.

// stateRun is one run of the window as persisted.
type stateRun struct {
	first, last int64
	state       RecordState
	deliveries  int16
}

// runsLocked returns the window as runs, and how many records in it are
// finished (acknowledged or archived).
func (p *Partition) runsLocked() ([]stateRun, int32) {
	var out []stateRun
	var done int32
	for o := p.mu.start; o < p.mu.end; o++ {
		r := p.mu.inflight[o]
		st := r.state
		if st == Acquired {
			st = Available
		}
		if st == Acknowledged || st == Archived {
			done++
		}
		if k := len(out); k > 0 && out[k-1].last == o-1 && out[k-1].state == st && out[k-1].deliveries == r.deliveries {
			out[k-1].last = o
			continue
		}
		out = append(out, stateRun{first: o, last: o, state: st, deliveries: r.deliveries})
	}
	return out, done
}

// loadLocked sets the window from persisted state: offsets in
// [start, end of the last run) that no run names are available, never
// delivered. Runs below start are dropped. A window longer than maxLocks
// is cut there (the rest is read again as new records).
func (p *Partition) loadLocked(start int64, stateEpoch int32, runs []stateRun, maxLocks int) {
	p.mu.start, p.mu.end = start, start
	p.mu.stateEpoch = stateEpoch
	p.mu.inflight = map[int64]*record{}
	for _, r := range runs {
		for o := max(r.first, start); o <= r.last && o-start < int64(maxLocks); o++ {
			for ; p.mu.end < o; p.mu.end++ {
				p.mu.inflight[p.mu.end] = &record{}
			}
			st := r.state
			if st == Acquired {
				st = Available
			}
			p.mu.inflight[o] = &record{state: st, deliveries: r.deliveries}
			p.mu.end = o + 1
		}
	}
	p.mu.loaded = true
	p.advanceLocked()
}

// Key names a share partition.
type Key struct {
	Group     string
	TopicID   [16]byte
	Partition int32
}

// persistError is a failure with the Kafka error to answer with: a
// Persister's, or the share partition's own.
type persistError struct {
	code int16
	msg  string
}

func (e *persistError) Error() string { return "share: persist: " + e.msg }

// ErrorCode returns the Kafka error code of err: a persister's code, or
// COORDINATOR_NOT_AVAILABLE (retriable) for any other failure.
func ErrorCode(err error) int16 {
	if pe, ok := err.(*persistError); ok {
		return pe.code
	}
	return kerr.CoordinatorNotAvailable.Code
}

// persistTimeout bounds one Persister call.
const persistTimeout = 10 * time.Second

// writeLocked persists the window. The partition's own lock is held
// across the call, so writes of one partition are applied in order;
// other partitions are not held up.
func (m *Manager) writeLocked(ctx context.Context, k Key, p *Partition) error {
	runs, done := p.runsLocked()
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.GroupID = k.Group
	t := kmsg.NewWriteShareGroupStateRequestTopic()
	t.TopicID = k.TopicID
	tp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
	tp.Partition = k.Partition
	tp.StateEpoch = p.mu.stateEpoch
	tp.LeaderEpoch = p.leaderEpoch
	tp.StartOffset = p.mu.start
	tp.DeliveryCompleteCount = done
	for _, r := range runs {
		b := kmsg.NewWriteShareGroupStateRequestTopicPartitionStateBatch()
		b.FirstOffset, b.LastOffset, b.DeliveryState, b.DeliveryCount = r.first, r.last, int8(r.state), r.deliveries
		tp.StateBatches = append(tp.StateBatches, b)
	}
	t.Partitions = append(t.Partitions, tp)
	req.Topics = append(req.Topics, t)
	ctx, cancel := context.WithTimeout(ctx, persistTimeout)
	defer cancel()
	resp, err := m.cfg.Persister.WriteShareGroupState(ctx, req)
	if err != nil {
		return err
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				return &persistError{code: rp.ErrorCode, msg: fmt.Sprintf("write %s partition %d: %v", k.Group, k.Partition, kerr.ErrorForCode(rp.ErrorCode))}
			}
		}
	}
	if p.mu.unsaved {
		// The whole window was written: what earlier writes lost is in.
		p.mu.unsaved = false
		m.cfg.Logger.Info("share: state persisted again", "group", k.Group, "partition", k.Partition)
	}
	return nil
}

// loadLocked reads the share partition's state, initializing it at
// startAt() when the share coordinator has none.
func (m *Manager) loadLocked(ctx context.Context, k Key, p *Partition, startAt func() (int64, error)) error {
	ctx, cancel := context.WithTimeout(ctx, persistTimeout)
	defer cancel()
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = k.Group
	t := kmsg.NewReadShareGroupStateRequestTopic()
	t.TopicID = k.TopicID
	tp := kmsg.NewReadShareGroupStateRequestTopicPartition()
	tp.Partition, tp.LeaderEpoch = k.Partition, p.leaderEpoch
	t.Partitions = append(t.Partitions, tp)
	req.Topics = append(req.Topics, t)
	resp, err := m.cfg.Persister.ReadShareGroupState(ctx, req)
	if err != nil {
		return err
	}
	var got *kmsg.ReadShareGroupStateResponseTopicPartition
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if rp := &resp.Topics[i].Partitions[j]; rp.Partition == k.Partition {
				got = rp
			}
		}
	}
	switch {
	case got == nil:
		return &persistError{code: kerr.UnknownServerError.Code, msg: "read: partition missing from the response"}
	case got.ErrorCode == kerr.UnknownTopicOrPartition.Code || got.ErrorCode == 0 && got.StartOffset < 0:
		return m.initializeLocked(ctx, k, p, startAt)
	case got.ErrorCode != 0:
		return &persistError{code: got.ErrorCode, msg: fmt.Sprintf("read %s partition %d: %v", k.Group, k.Partition, kerr.ErrorForCode(got.ErrorCode))}
	}
	runs := make([]stateRun, 0, len(got.StateBatches))
	for _, b := range got.StateBatches {
		if b.FirstOffset > b.LastOffset {
			continue
		}
		runs = append(runs, stateRun{first: b.FirstOffset, last: b.LastOffset, state: RecordState(b.DeliveryState), deliveries: b.DeliveryCount})
	}
	p.loadLocked(got.StartOffset, got.StateEpoch, runs, m.cfg.PartitionMaxRecordLocks)
	return nil
}

// initializeLocked initializes a share partition's state at startAt().
func (m *Manager) initializeLocked(ctx context.Context, k Key, p *Partition, startAt func() (int64, error)) error {
	start, err := startAt()
	if err != nil {
		return err
	}
	req := kmsg.NewPtrInitializeShareGroupStateRequest()
	req.GroupID = k.Group
	t := kmsg.NewInitializeShareGroupStateRequestTopic()
	t.TopicID = k.TopicID
	tp := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
	tp.Partition, tp.StartOffset = k.Partition, start
	t.Partitions = append(t.Partitions, tp)
	req.Topics = append(req.Topics, t)
	resp, err := m.cfg.Persister.InitializeShareGroupState(ctx, req)
	if err != nil {
		return err
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				return &persistError{code: rp.ErrorCode, msg: fmt.Sprintf("initialize %s partition %d: %v", k.Group, k.Partition, kerr.ErrorForCode(rp.ErrorCode))}
			}
		}
	}
	p.loadLocked(start, 0, nil, m.cfg.PartitionMaxRecordLocks)
	return nil
}
