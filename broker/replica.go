package broker

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/stratastream/strata/coord"
	"github.com/twmb/franz-go/pkg/kerr"
)

// This file is a partition's replication state as its leader keeps it
// (Kafka's Partition and its replica states), and the produce purgatory
// that waits on it:
//
//   - Each follower's log end offset, as its fetcher reports it on the
//     replication stream (replica_server.go), and the last time it was
//     caught up: when it reported an offset at or past the leader's log
//     end as of the last data the leader sent it.
//   - The high watermark: the smallest log end offset over the ISR
//     (leader included). It only goes up while this broker leads, is kept
//     in the segment log (which checkpoints it) and bounds what consumers
//     see.
//   - The ISR as the coordinator holds it, with its znode version. The
//     leader shrinks it when a follower has not caught up for
//     replica.lag.time.max.ms and expands it when a follower reaches the
//     high watermark (and the start of the current leader epoch), by a
//     compare-and-set write. While a write is in flight, the high
//     watermark counts both the old and the proposed members, so neither
//     a shrink nor an expansion can let it pass a record that the ISR
//     finally written lacks (Kafka's "maximal ISR", KIP-497).
//
// Lock order: partition.appendMu, then replicaState.mu; the segment log's
// own lock is taken under either. replicaState.mu is never held across a
// network call.

// replicaState is one hosted partition's replication state.
type replicaState struct {
	mu sync.Mutex
	// leading is true while this broker leads the partition at epoch.
	leading bool
	epoch   int32
	// epochStart is the log end offset when this broker became leader at
	// epoch: a follower joins the ISR only once it has reached it.
	epochStart int64
	// seenEnd is the log end offset the bookkeeping last saw: a follower
	// at it was caught up until the log grew past it.
	seenEnd         int64
	replicas        []int32
	isr             []int32 // committed ISR (the coordinator's)
	isrVersion      int32
	controllerEpoch int32
	// proposed is an ISR write in flight, nil if none.
	proposed  []int32
	followers map[int32]*followerProgress
	// changed is closed (and replaced) whenever the high watermark, the
	// ISR or the leadership changes: acks=all produces wait on it.
	changed chan struct{}
	// clock, when set (by tests), replaces time.Now as the time the
	// log's growth stamps on the followers that were at its end
	// (advanceHighWatermarkLocked).
	clock func() time.Time
}

// followerProgress is what the leader knows of one follower.
type followerProgress struct {
	// leo is the follower's log end offset, -1 until it reports.
	leo int64
	// lastCaughtUp is the last time the follower was caught up.
	lastCaughtUp time.Time
	// sentEnd and sentAt are the leader's log end offset when it last
	// sent the follower data, and when.
	sentEnd int64
	sentAt  time.Time
}

func (rs *replicaState) init() {
	rs.changed = make(chan struct{})
	rs.followers = map[int32]*followerProgress{}
}

// notifyLocked wakes the waiters. Caller holds mu.
func (rs *replicaState) notifyLocked() {
	close(rs.changed)
	rs.changed = make(chan struct{})
}

// effectiveISRLocked is the committed ISR plus the proposed one's new
// members: the set the high watermark must wait for.
func (rs *replicaState) effectiveISRLocked() []int32 {
	out := slices.Clone(rs.isr)
	for _, id := range rs.proposed {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// syncLeadership applies the coordinator's view of the partition: its
// leader, epoch, replicas and ISR with the znode version. It returns
// true when this broker has just become the leader.
func (p *partition) syncLeadership(self int32, pi coord.PartitionInfo, now time.Time) (became bool) {
	rs := &p.repl
	rs.mu.Lock()
	defer rs.mu.Unlock()
	st := pi.State
	leading := st.Leader == self
	changed := false
	if leading && (!rs.leading || rs.epoch != st.LeaderEpoch) {
		became = true
		rs.leading, rs.epoch = true, st.LeaderEpoch
		rs.epochStart = p.log.LogEndOffset()
		rs.seenEnd = rs.epochStart
		rs.followers = map[int32]*followerProgress{}
		rs.proposed = nil
		rs.isr, rs.isrVersion = nil, -1 // taken below
		changed = true
	} else if !leading && rs.leading {
		rs.leading = false
		rs.proposed = nil
		changed = true
	}
	rs.epoch = st.LeaderEpoch
	rs.replicas = slices.Clone(pi.Replicas)
	rs.controllerEpoch = st.ControllerEpoch
	if pi.Version > rs.isrVersion || !slices.Equal(rs.isr, st.ISR) && pi.Version >= rs.isrVersion {
		rs.isr, rs.isrVersion = slices.Clone(st.ISR), pi.Version
		changed = true
	}
	if rs.leading {
		for _, id := range pi.Replicas {
			if id != self && rs.followers[id] == nil {
				// A follower in the ISR gets the full lag time to
				// show up, as in Kafka.
				rs.followers[id] = &followerProgress{leo: -1, lastCaughtUp: now, sentEnd: -1}
			}
		}
		for id := range rs.followers {
			if !slices.Contains(pi.Replicas, id) {
				delete(rs.followers, id)
			}
		}
	}
	if changed {
		rs.notifyLocked()
	}
	return became
}

// leaderEpochIfLeading returns the epoch this broker leads the partition
// at, or ok false.
func (p *partition) leaderEpochIfLeading() (int32, bool) {
	rs := &p.repl
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.epoch, rs.leading
}

// isrSize is the committed ISR's size.
func (p *partition) isrSize() int {
	rs := &p.repl
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return len(rs.isr)
}

// isrSnapshot returns the committed ISR, and whether this broker leads.
func (p *partition) isrSnapshot() ([]int32, bool) {
	rs := &p.repl
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Clone(rs.isr), rs.leading
}

// advanceHighWatermark recomputes the high watermark from the ISR's log
// end offsets and raises it if it moved. It is called after every append
// on the leader and every follower report. self is this broker's id.
func (p *partition) advanceHighWatermark(self int32) {
	rs := &p.repl
	rs.mu.Lock()
	defer rs.mu.Unlock()
	p.advanceHighWatermarkLocked(self)
}

func (p *partition) advanceHighWatermarkLocked(self int32) {
	rs := &p.repl
	if !rs.leading {
		return
	}
	hw := p.log.LogEndOffset()
	if hw > rs.seenEnd {
		// Followers that were at the log end were caught up until now
		// (an idle follower sends no reports: Kafka's followers fetch
		// all the time, ours are pushed to).
		now := time.Now()
		if rs.clock != nil {
			now = rs.clock()
		}
		for _, f := range rs.followers {
			if f.leo >= rs.seenEnd {
				f.lastCaughtUp = now
			}
		}
		rs.seenEnd = hw
	}
	for _, id := range rs.effectiveISRLocked() {
		if id == self {
			continue
		}
		f := rs.followers[id]
		if f == nil || f.leo < 0 {
			return // an ISR member that has not reported holds it back
		}
		hw = min(hw, f.leo)
	}
	if hw > p.log.HighWatermark() {
		p.log.SetHighWatermark(hw)
		rs.notifyLocked()
	}
}

// noteSent records that the leader sent follower id data up to its log
// end offset leo at now.
func (p *partition) noteSent(id int32, leo int64, now time.Time) {
	rs := &p.repl
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if f := rs.followers[id]; f != nil {
		f.sentEnd, f.sentAt = leo, now
	}
}

// followerReport records follower id's log end offset, updates its
// caught-up time, advances the high watermark and returns the ISR this
// broker should propose to add the follower, or nil. epoch is the leader
// epoch the follower fetches at. registered says whether the follower is a
// registered broker in the metadata: one whose session expired may still
// be fetching for a moment, but the controller would take it out again at
// once, so it is not added until it has registered again.
func (p *partition) followerReport(self, id int32, epoch int32, leo int64, now time.Time, registered bool) (expand []int32) {
	rs := &p.repl
	rs.mu.Lock()
	defer rs.mu.Unlock()
	f := rs.followers[id]
	if !rs.leading || rs.epoch != epoch || f == nil {
		return nil
	}
	end := p.log.LogEndOffset()
	leo = min(leo, end)
	f.leo = leo
	switch {
	case leo >= end:
		f.lastCaughtUp = now
	case f.sentEnd >= 0 && leo >= f.sentEnd && f.sentAt.After(f.lastCaughtUp):
		f.lastCaughtUp = f.sentAt
	}
	p.advanceHighWatermarkLocked(self)
	if registered && rs.proposed == nil && !slices.Contains(rs.isr, id) && leo >= p.log.HighWatermark() && leo >= rs.epochStart {
		isr := append(slices.Clone(rs.isr), id)
		slices.Sort(isr)
		rs.proposed = isr
		return isr
	}
	return nil
}

// laggingISR returns the ISR without the followers that have not caught
// up within lag, or nil when nothing is to change (or a write is in
// flight, or this broker does not lead).
func (p *partition) laggingISR(self int32, lag time.Duration, now time.Time) []int32 {
	rs := &p.repl
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !rs.leading || rs.proposed != nil {
		return nil
	}
	var keep []int32
	end := p.log.LogEndOffset()
	for _, id := range rs.isr {
		if id == self {
			keep = append(keep, id)
			continue
		}
		// Kafka's rule (Partition.isFollowerOutOfSync): out of sync is
		// behind the log end and not caught up within the lag. A
		// follower at the log end stays, even if this leader has not
		// heard from it lately (a leader that was itself stalled would
		// otherwise drop every follower of its idle partitions).
		f := rs.followers[id]
		if f != nil && (f.leo >= end || now.Sub(f.lastCaughtUp) <= lag) {
			keep = append(keep, id)
		}
	}
	if len(keep) == len(rs.isr) || len(keep) == 0 {
		return nil
	}
	rs.proposed = keep
	return keep
}

// errISRNotLeader means the ISR write was dropped: this broker no longer
// leads the partition at the epoch the write was for.
var errISRNotLeader = errors.New("broker: no longer the partition's leader")

// writeISR writes the proposed ISR with compare-and-set on the version
// the leader last saw, and applies it on success. On a version conflict it
// takes the coordinator's current state (so the next check decides
// again). The proposal is cleared either way.
func (s *Server) writeISR(ctx context.Context, p *partition, isr []int32) error {
	rs := &p.repl
	rs.mu.Lock()
	if !rs.leading || !slices.Equal(rs.proposed, isr) {
		rs.mu.Unlock()
		return errISRNotLeader
	}
	st := coord.PartitionState{Leader: s.cfg.BrokerID, LeaderEpoch: rs.epoch, ISR: isr, ControllerEpoch: rs.controllerEpoch}
	version, epoch := rs.isrVersion, rs.epoch
	rs.mu.Unlock()

	newVersion, err := s.coord.UpdatePartitionState(ctx, p.topic, p.index, st, version)
	if errors.Is(err, coord.ErrVersionConflict) {
		cur, v, rerr := s.coord.PartitionState(ctx, p.topic, p.index)
		rs.mu.Lock()
		if rerr == nil && rs.leading && rs.epoch == epoch && cur.Leader == s.cfg.BrokerID && cur.LeaderEpoch == epoch && v > rs.isrVersion {
			rs.isr, rs.isrVersion, rs.controllerEpoch = slices.Clone(cur.ISR), v, cur.ControllerEpoch
		}
		rs.proposed = nil
		rs.notifyLocked()
		rs.mu.Unlock()
		return err
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.proposed = nil
	if err != nil {
		rs.notifyLocked()
		return err
	}
	if rs.leading && rs.epoch == epoch && newVersion > rs.isrVersion {
		rs.isr, rs.isrVersion = slices.Clone(isr), newVersion
	}
	p.advanceHighWatermarkLocked(s.cfg.BrokerID)
	rs.notifyLocked()
	return nil
}

// awaitHighWatermark parks an acks=all produce (or a group commit) until
// the high watermark reaches target, the deadline passes, the leadership
// moves or the server closes. It never polls: it wakes on the partition's
// replication changes. minISR > 0 also requires that many in-sync
// replicas when the batch is committed.
func (s *Server) awaitHighWatermark(ctx context.Context, p *partition, epoch int32, target int64, minISR int, deadline time.Time) error {
	rs := &p.repl
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	s.repl.purgatory.Inc()
	defer s.repl.purgatory.Dec()
	for {
		rs.mu.Lock()
		leading, curEpoch, isr, ch := rs.leading, rs.epoch, len(rs.isr), rs.changed
		rs.mu.Unlock()
		if !leading || curEpoch != epoch {
			return newKafkaError(kerr.NotLeaderForPartition, "leadership of %s-%d moved while the produce waited for replication", p.topic, p.index)
		}
		if p.log.HighWatermark() >= target {
			if isr < minISR {
				return newKafkaError(kerr.NotEnoughReplicasAfterAppend, "in-sync replicas %d fell below min.insync.replicas %d", isr, minISR)
			}
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			if isr < minISR {
				return newKafkaError(kerr.NotEnoughReplicasAfterAppend, "in-sync replicas %d are below min.insync.replicas %d", isr, minISR)
			}
			return newKafkaError(kerr.RequestTimedOut, "followers did not replicate the batch of %s-%d within the request timeout", p.topic, p.index)
		}
		if timer == nil {
			timer = time.NewTimer(left)
		} else {
			timer.Reset(left)
		}
		select {
		case <-ch:
		case <-timer.C:
		case <-s.closed:
			return newKafkaError(kerr.NotLeaderForPartition, "broker shutting down")
		case <-ctx.Done():
			return newKafkaError(kerr.RequestTimedOut, "client went away")
		}
	}
}
