package coord

import "slices"

// This file holds the controller's decisions as pure functions of a
// partition's assignment and state and of which brokers are live: no I/O,
// so the rules are unit-tested directly (election_test.go).

// Reason says why the controller changes a partition's state.
type Reason string

// Reasons, as logged.
const (
	ReasonLeaderLost         Reason = "leader lost"
	ReasonControlledShutdown Reason = "controlled shutdown"
	ReasonUnclean            Reason = "unclean election"
	ReasonOffline            Reason = "no live in-sync replica"
	ReasonISRShrink          Reason = "replica lost"
	ReasonPreferred          Reason = "preferred leader"
)

// Liveness tells the decisions which brokers may lead or stay in an ISR.
type Liveness struct {
	// Live reports whether a broker is registered.
	Live func(id int32) bool
	// ShuttingDown reports whether a broker asked for a controlled
	// shutdown: it is live but must not lead or be a follower in an ISR.
	ShuttingDown func(id int32) bool
}

func (l Liveness) eligible(id int32) bool { return l.Live(id) && !l.ShuttingDown(id) }

// withOffline returns l for one partition whose replicas on brokers
// offline are offline (their log directory failed): for this partition
// those brokers count as not live, so they neither lead nor stay in the
// ISR, exactly as if they were gone.
func (l Liveness) withOffline(offline []int32) Liveness {
	if len(offline) == 0 {
		return l
	}
	live := l.Live
	l.Live = func(id int32) bool { return live(id) && !slices.Contains(offline, id) }
	return l
}

// PlanOptions are the per-topic settings of a decision.
type PlanOptions struct {
	// Unclean is unclean.leader.election.enable for the topic: with no
	// live in-sync replica, elect a live out-of-sync replica (losing
	// what it lacks) rather than leave the partition offline.
	Unclean bool
	// Preferred moves leadership to the preferred replica (the first in
	// the assignment) when it is eligible and in the ISR
	// (auto.leader.rebalance.enable).
	Preferred bool
}

// PlanPartition decides a partition's next state, by these rules:
//
//  1. The leader is missing, not live, shutting down, or no longer a
//     replica (a cancelled reassignment took it out): the new leader
//     is the first replica in assignment order that is eligible (live and
//     not shutting down) and in the ISR; the ISR becomes its eligible
//     members; the leader epoch goes up by one. If no such replica exists:
//     a live but shutting-down leader keeps leading (controlled shutdown
//     cannot move it; the broker is told); a shutting-down live ISR
//     member is elected rather than going offline; with Unclean, the
//     first eligible replica leads with an ISR of itself; otherwise the
//     partition goes offline: leader NoLeader, epoch up by one, ISR cut
//     to its live members or, if none is live, left as it was so that the
//     last in-sync replicas can lead again when they return.
//  2. The leader is fine: followers that are not live or shutting down,
//     or no longer replicas (a cancelled reassignment), leave the ISR (no
//     epoch change); with Preferred, an eligible
//     preferred replica in the ISR takes over (epoch up by one).
//
// Every change carries controllerEpoch. changed is false when the state
// is to stay as it is.
func PlanPartition(p PartitionInfo, l Liveness, opts PlanOptions, controllerEpoch int32) (next PartitionState, reason Reason, changed bool) {
	st := p.State.Clone()
	if st.Leader == NoLeader || !l.eligible(st.Leader) || !slices.Contains(p.Replicas, st.Leader) {
		return planElection(p, l, opts, controllerEpoch)
	}
	isr := filterISR(st.ISR, func(b int32) bool {
		return (b == st.Leader || l.eligible(b)) && slices.Contains(p.Replicas, b)
	})
	if len(isr) == 0 {
		isr = st.ISR // a leader outside its own ISR: leave the ISR to it
	}
	reason = ReasonISRShrink
	if opts.Preferred && len(p.Replicas) > 0 {
		if pref := p.Replicas[0]; pref != st.Leader && l.eligible(pref) && slices.Contains(isr, pref) {
			st.Leader = pref
			st.LeaderEpoch++
			reason = ReasonPreferred
		}
	}
	if st.Leader == p.State.Leader && slices.Equal(isr, st.ISR) {
		return p.State, "", false
	}
	st.ISR = isr
	st.ControllerEpoch = controllerEpoch
	return st, reason, true
}

func planElection(p PartitionInfo, l Liveness, opts PlanOptions, controllerEpoch int32) (PartitionState, Reason, bool) {
	st := p.State.Clone()
	old := st.Leader
	reason := ReasonLeaderLost
	if old != NoLeader && l.Live(old) {
		reason = ReasonControlledShutdown
		if !slices.Contains(p.Replicas, old) {
			reason = ReasonReassignment
		}
	}
	assigned := func(b int32) bool { return slices.Contains(p.Replicas, b) }
	for _, r := range p.Replicas {
		if l.eligible(r) && slices.Contains(st.ISR, r) {
			st.Leader = r
			st.LeaderEpoch++
			st.ISR = filterISR(st.ISR, func(b int32) bool { return l.eligible(b) && assigned(b) })
			st.ControllerEpoch = controllerEpoch
			return st, reason, true
		}
	}
	if old != NoLeader && l.Live(old) {
		return p.State, "", false // shutting down, nobody to take over
	}
	for _, r := range p.Replicas {
		if l.Live(r) && slices.Contains(st.ISR, r) {
			st.Leader = r // shutting down, but better than offline
			st.LeaderEpoch++
			st.ISR = filterISR(st.ISR, func(b int32) bool { return l.Live(b) && assigned(b) })
			st.ControllerEpoch = controllerEpoch
			return st, reason, true
		}
	}
	if opts.Unclean {
		for _, r := range p.Replicas {
			if l.eligible(r) {
				st.Leader = r
				st.LeaderEpoch++
				st.ISR = []int32{r}
				st.ControllerEpoch = controllerEpoch
				return st, ReasonUnclean, true
			}
		}
	}
	if old == NoLeader {
		return p.State, "", false // already offline
	}
	st.Leader = NoLeader
	st.LeaderEpoch++
	if live := filterISR(st.ISR, l.Live); len(live) > 0 {
		st.ISR = live
	}
	st.ControllerEpoch = controllerEpoch
	return st, ReasonOffline, true
}

// PlanPreferred decides an on-demand preferred election: the new state, or
// ErrElectionNotNeeded (the preferred replica leads) or
// ErrPreferredLeaderNotAvailable (not eligible or not in the ISR).
func PlanPreferred(p PartitionInfo, l Liveness, controllerEpoch int32) (PartitionState, error) {
	if len(p.Replicas) == 0 {
		return p.State, ErrPreferredLeaderNotAvailable
	}
	pref := p.Replicas[0]
	if p.State.Leader == pref {
		return p.State, ErrElectionNotNeeded
	}
	if !l.eligible(pref) || !slices.Contains(p.State.ISR, pref) {
		return p.State, ErrPreferredLeaderNotAvailable
	}
	st := p.State.Clone()
	st.Leader = pref
	st.LeaderEpoch++
	st.ISR = filterISR(st.ISR, func(b int32) bool { return b == pref || l.eligible(b) })
	st.ControllerEpoch = controllerEpoch
	return st, nil
}

// filterISR keeps the members keep accepts, in order.
func filterISR(isr []int32, keep func(int32) bool) []int32 {
	out := make([]int32, 0, len(isr))
	for _, b := range isr {
		if keep(b) {
			out = append(out, b)
		}
	}
	return out
}
