package replica

import (
	"slices"
	"sync"
	"time"

	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/segment"
)

// This file is a partition's replication state as its leader keeps it
// (Kafka's Partition and its replica states):
//
//   - Each follower's log end offset, as its fetcher reports it on the
//     replication stream (service.go), and the last time it was caught
//     up: when it reported an offset at or past the leader's log end as
//     of the last data the leader sent it.
//   - The high watermark: the smallest log end offset over the ISR
//     (leader included). It only goes up while this broker leads, is kept
//     in the segment log (which checkpoints it) and bounds what consumers
//     see.
//   - The ISR as the coordinator holds it, with its znode version. The
//     leader shrinks it when a follower has not caught up for
//     replica.lag.time.max.ms and expands it when a follower reaches the
//     high watermark (and the start of the current leader epoch), by a
//     compare-and-set write (isr.go). While a write is in flight, the high
//     watermark counts both the old and the proposed members, so neither
//     a shrink nor an expansion can let it pass a record that the ISR
//     finally written lacks (Kafka's "maximal ISR", KIP-497).
//
// Lock order: the Appender's lock, then Partition.mu; the segment log's
// own lock is taken under either. Partition.mu is never held across a
// network call.

// Partition is one hosted partition's replication state. The broker
// creates one with NewPartition when it opens the partition's log and
// keeps it beside the log; the Manager drives it from the metadata and
// the replication streams.
type Partition struct {
	topic   string
	topicID coord.TopicID
	index   int32
	// self is this broker's id.
	self int32
	log  *segment.Log
	app  Appender

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
	// throttleLeader and throttleFollower say this replica is listed in
	// the topic's leader.replication.throttled.replicas and
	// follower.replication.throttled.replicas (SetThrottled).
	throttleLeader, throttleFollower bool
	// clock, when set (by tests), replaces time.Now as the time the
	// log's growth stamps on the followers that were at its end
	// (advanceHighWatermarkLocked).
	clock func() time.Time
}

// NewPartition returns the replication state of partition index of
// topic (whose topic ID is topicID) on broker self, over its log. app
// is the broker's side of the partition: the lock its appends take and
// the producer state beside the log. The partition follows nobody and
// leads nothing until the Manager syncs it with the metadata.
func NewPartition(topic string, topicID coord.TopicID, index, self int32, log *segment.Log, app Appender) *Partition {
	return &Partition{topic: topic, topicID: topicID, index: index, self: self, log: log, app: app,
		changed: make(chan struct{}), followers: map[int32]*followerProgress{}}
}

// SetThrottled marks the replica as throttled when this broker leads it
// (leader.replication.throttled.replicas lists it, with this broker's
// id, or is "*") and when it follows (follower.replication.throttled.replicas).
// The broker calls it whenever the topic's configs apply.
func (p *Partition) SetThrottled(leader, follower bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.throttleLeader, p.throttleFollower = leader, follower
}

// Throttled reports what SetThrottled set.
func (p *Partition) Throttled() (leader, follower bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.throttleLeader, p.throttleFollower
}

// leaderThrottle says whether the data this leader sends to follower
// counts against the leader quota (counted), and whether it may be held
// back (follower is not in the ISR: Kafka's shouldLeaderThrottle).
func (p *Partition) leaderThrottle(follower int32) (counted, holdable bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.throttleLeader {
		return false, false
	}
	return true, !slices.Contains(p.isr, follower)
}

// followerThrottled says whether this follower's fetches count against
// the follower quota.
func (p *Partition) followerThrottled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.throttleFollower
}

// followerProgress is what the leader knows of one follower.
type followerProgress struct {
	// leo is the follower's log end offset, -1 until it reports.
	leo int64
	// logStart is the follower's log start offset, -1 until it reports.
	logStart int64
	// lastCaughtUp is the last time the follower was caught up.
	lastCaughtUp time.Time
	// sentEnd and sentAt are the leader's log end offset when it last
	// sent the follower data, and when.
	sentEnd int64
	sentAt  time.Time
}

// notifyLocked wakes the waiters. Caller holds mu.
func (p *Partition) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// effectiveISRLocked is the committed ISR plus the proposed one's new
// members: the set the high watermark must wait for.
func (p *Partition) effectiveISRLocked() []int32 {
	out := slices.Clone(p.isr)
	for _, id := range p.proposed {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// syncLeadership applies the coordinator's view of the partition: its
// leader, epoch, replicas and ISR with the znode version. It returns
// true when this broker has just become the leader.
func (p *Partition) syncLeadership(pi coord.PartitionInfo, now time.Time) (became bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := pi.State
	leading := st.Leader == p.self
	changed := false
	if leading && (!p.leading || p.epoch != st.LeaderEpoch) {
		became = true
		p.leading, p.epoch = true, st.LeaderEpoch
		p.epochStart = p.log.LogEndOffset()
		p.seenEnd = p.epochStart
		p.followers = map[int32]*followerProgress{}
		p.proposed = nil
		p.isr, p.isrVersion = nil, -1 // taken below
		changed = true
	} else if !leading && p.leading {
		p.leading = false
		p.proposed = nil
		changed = true
	}
	p.epoch = st.LeaderEpoch
	p.replicas = slices.Clone(pi.Replicas)
	p.controllerEpoch = st.ControllerEpoch
	if pi.Version > p.isrVersion || !slices.Equal(p.isr, st.ISR) && pi.Version >= p.isrVersion {
		p.isr, p.isrVersion = slices.Clone(st.ISR), pi.Version
		changed = true
	}
	if p.leading {
		for _, id := range pi.Replicas {
			if id != p.self && p.followers[id] == nil {
				// A follower in the ISR gets the full lag time to
				// show up, as in Kafka.
				p.followers[id] = &followerProgress{leo: -1, logStart: -1, lastCaughtUp: now, sentEnd: -1}
			}
		}
		for id := range p.followers {
			if !slices.Contains(pi.Replicas, id) {
				delete(p.followers, id)
			}
		}
	}
	if changed {
		p.notifyLocked()
	}
	return became
}

// stopLeading ends this broker's leadership of the partition as far as
// replication goes, and wakes whoever waits on it.
func (p *Partition) stopLeading() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.leading {
		p.leading = false
		p.proposed = nil
		p.notifyLocked()
	}
}

// leaderEpochIfLeading returns the epoch this broker leads the partition
// at, or ok false.
func (p *Partition) leaderEpochIfLeading() (int32, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.epoch, p.leading
}

// ISRSize is the committed ISR's size: the ISR the coordinator holds,
// not counting a change this broker has proposed and not yet written.
func (p *Partition) ISRSize() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.isr)
}

// isrSnapshot returns the committed ISR, and whether this broker leads.
func (p *Partition) isrSnapshot() ([]int32, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.isr), p.leading
}

// AdvanceHighWatermark recomputes the high watermark from the ISR's log
// end offsets and raises it if it moved (waking the waits of Await). The
// broker calls it after every append it makes as the leader (produce,
// group commits); follower reports call it here. It does nothing while
// this broker does not lead the partition.
func (p *Partition) AdvanceHighWatermark() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advanceHighWatermarkLocked()
}

func (p *Partition) advanceHighWatermarkLocked() {
	if !p.leading {
		return
	}
	hw := p.log.LogEndOffset()
	if hw > p.seenEnd {
		// Followers that were at the log end were caught up until now
		// (an idle follower sends no reports: Kafka's followers fetch
		// all the time, ours are pushed to).
		now := time.Now()
		if p.clock != nil {
			now = p.clock()
		}
		for _, f := range p.followers {
			if f.leo >= p.seenEnd {
				f.lastCaughtUp = now
			}
		}
		p.seenEnd = hw
	}
	for _, id := range p.effectiveISRLocked() {
		if id == p.self {
			continue
		}
		f := p.followers[id]
		if f == nil || f.leo < 0 {
			return // an ISR member that has not reported holds it back
		}
		hw = min(hw, f.leo)
	}
	if hw > p.log.HighWatermark() {
		p.log.SetHighWatermark(hw)
		p.notifyLocked()
	}
}

// noteSent records that the leader sent follower id data up to its log
// end offset leo at now.
func (p *Partition) noteSent(id int32, leo int64, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f := p.followers[id]; f != nil {
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
func (p *Partition) followerReport(id int32, epoch int32, leo, logStart int64, now time.Time, registered bool) (expand []int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.followers[id]
	if !p.leading || p.epoch != epoch || f == nil {
		return nil
	}
	if logStart != f.logStart {
		f.logStart = logStart
		p.notifyLocked() // the low watermark may have moved
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
	p.advanceHighWatermarkLocked()
	if registered && p.proposed == nil && !slices.Contains(p.isr, id) && leo >= p.log.HighWatermark() && leo >= p.epochStart {
		isr := append(slices.Clone(p.isr), id)
		slices.Sort(isr)
		p.proposed = isr
		return isr
	}
	return nil
}

// laggingISR returns the ISR without the followers that have not caught
// up within lag, or nil when nothing is to change (or a write is in
// flight, or this broker does not lead).
func (p *Partition) laggingISR(lag time.Duration, now time.Time) []int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.leading || p.proposed != nil {
		return nil
	}
	var keep []int32
	end := p.log.LogEndOffset()
	for _, id := range p.isr {
		if id == p.self {
			keep = append(keep, id)
			continue
		}
		// Kafka's rule (Partition.isFollowerOutOfSync): out of sync is
		// behind the log end and not caught up within the lag. A
		// follower at the log end stays, even if this leader has not
		// heard from it lately (a leader that was itself stalled would
		// otherwise drop every follower of its idle partitions).
		f := p.followers[id]
		if f != nil && (f.leo >= end || now.Sub(f.lastCaughtUp) <= lag) {
			keep = append(keep, id)
		}
	}
	if len(keep) == len(p.isr) || len(keep) == 0 {
		return nil
	}
	p.proposed = keep
	return keep
}
