package coord

import (
	"errors"
	"fmt"
	"slices"
)

// This file holds partition reassignment (Kafka's KIP-455 model) as pure
// functions of a partition's assignment and state: what an
// AlterPartitionReassignments change makes of the assignment, and what the
// controller does next. The coordinators store the result (zk_topics.go,
// local_session.go) and the controller writes it (controller.go).
//
// A reassignment is kept with the topic's assignment, as Kafka keeps it in
// /brokers/topics/<topic>: the partition's replicas are the full set
// (target first, then the original replicas not in the target), and two
// lists say which replicas are being added (full minus original) and
// removed (full minus target). So the target is replicas minus removing,
// the original replicas minus adding, and the state survives a controller
// failover or a restart of every broker with nothing else stored. As in
// Kafka, a cancelled reassignment returns to the original replica set but
// not always to its order (target replicas come first in the full set).
//
// The controller's sequence (Kafka's onPartitionReassignment):
//
//	replicas = target + original, adding = target - original, removing = original - target
//	    (written by AlterPartitionReassignments; the brokers in adding open the
//	    partition and follow the leader, which adds them to the ISR once caught up)
//	every target replica in the ISR, in one atomic write:
//	    leader not in target (or not eligible): elect the first eligible target
//	        replica in the ISR, leader epoch + 1; ISR = ISR ∩ target;
//	    replicas = target, adding = removing = [] (the brokers in removing
//	        stop replicating and delete their copy)
//
// Kafka's controller writes the state and the assignment one after the
// other from its single event thread, so a cancel cannot come in between;
// here a cancel is a write of its own, so the two are one transaction: a
// cancel never finds the ISR already cut to a target it abandons.
//
// Cancel (a nil target) reassigns to the original replicas: adding and
// removing become empty at once, replicas the original ones; the controller
// then takes the replicas that were being added out of the ISR (and moves
// leadership off them) as it does for any replica not in the assignment.

// ErrNoReassignmentInProgress is returned for a cancel of a partition that
// is not being reassigned (Kafka's NO_REASSIGNMENT_IN_PROGRESS).
var ErrNoReassignmentInProgress = errors.New("coord: no reassignment in progress")

// ReasonReassignment is the controller's reason for the state writes of a
// reassignment.
const ReasonReassignment Reason = "reassignment"

// ReassignmentChange is one partition's entry of an
// AlterPartitionReassignments request.
type ReassignmentChange struct {
	TopicPartition
	// Target is the new replica list, preferred leader first; nil
	// cancels the partition's reassignment.
	Target []int32
	// AllowUnclean is unclean.leader.election.enable for the topic: a
	// change whose replicas keep none of the partition's in-sync
	// replicas is refused without it (keepsISR).
	AllowUnclean bool
}

// Reassigning reports whether the partition is being reassigned.
func (p PartitionInfo) Reassigning() bool { return len(p.Adding) > 0 || len(p.Removing) > 0 }

// TargetReplicas is the replica list the partition is being reassigned to
// (its replicas when it is not being reassigned).
func (p PartitionInfo) TargetReplicas() []int32 { return minusIDs(p.Replicas, p.Removing) }

// OriginalReplicas is the replica list the partition had before its
// reassignment (its replicas when it is not being reassigned).
func (p PartitionInfo) OriginalReplicas() []int32 { return minusIDs(p.Replicas, p.Adding) }

// minusIDs returns the members of list not in drop, in order.
func minusIDs(list, drop []int32) []int32 {
	out := make([]int32, 0, len(list))
	for _, r := range list {
		if !slices.Contains(drop, r) {
			out = append(out, r)
		}
	}
	return out
}

// reassignTo is Kafka's ReplicaAssignment.reassignTo: the full replica
// set target + original (duplicates dropped), with what is being added and
// removed. Reassigning to the original replicas ends a reassignment.
func reassignTo(p PartitionInfo, target []int32) (replicas, adding, removing []int32) {
	orig := p.OriginalReplicas()
	replicas = slices.Clone(target)
	for _, r := range orig {
		if !slices.Contains(replicas, r) {
			replicas = append(replicas, r)
		}
	}
	adding = minusIDs(replicas, orig)
	removing = minusIDs(replicas, target)
	if len(adding) == 0 {
		adding = nil
	}
	if len(removing) == 0 {
		removing = nil
	}
	return replicas, adding, removing
}

// applyReassignment applies ch to p, checking it as Kafka's controller
// does (validateReplicas): a target must be non-empty, without duplicates
// or negative ids, and every broker it adds must be live
// (ErrInvalidAssignment); a cancel needs a reassignment in progress
// (ErrNoReassignmentInProgress). p.State must be the partition's current
// state: a change that would leave no in-sync replica among the replicas
// is refused too (keepsISR).
func applyReassignment(p *PartitionInfo, ch ReassignmentChange, live func(int32) bool) error {
	target := ch.Target
	if target == nil {
		if !p.Reassigning() {
			return fmt.Errorf("%w: %s", ErrNoReassignmentInProgress, ch.TopicPartition)
		}
		target = p.OriginalReplicas()
	}
	if len(target) == 0 {
		return fmt.Errorf("%w: %s: empty replica list", ErrInvalidAssignment, ch.TopicPartition)
	}
	for i, r := range target {
		if r < 0 {
			return fmt.Errorf("%w: %s: broker id %d", ErrInvalidAssignment, ch.TopicPartition, r)
		}
		if slices.Contains(target[:i], r) {
			return fmt.Errorf("%w: %s: broker %d listed twice", ErrInvalidAssignment, ch.TopicPartition, r)
		}
	}
	replicas, adding, removing := reassignTo(*p, target)
	for _, r := range adding {
		if !live(r) {
			return fmt.Errorf("%w: %s: broker %d is not live", ErrInvalidAssignment, ch.TopicPartition, r)
		}
	}
	if !ch.AllowUnclean && !keepsISR(replicas, p.State.ISR) {
		return fmt.Errorf("%w: %s: replicas %v would keep none of the in-sync replicas %v, which needs an unclean leader election "+
			"(records only they hold would be lost); wait until a kept replica is back in the ISR, or set unclean.leader.election.enable on the topic",
			ErrInvalidAssignment, ch.TopicPartition, replicas, p.State.ISR)
	}
	p.Replicas, p.Adding, p.Removing = replicas, adding, removing
	return nil
}

// keepsISR reports whether replicas keep a member of isr, or isr is empty
// (an offline partition has no in-sync replica to lose). A cancel whose
// original replicas all fell out of the ISR while the replicas being
// added joined it, or a new target that drops the only replicas in sync,
// would otherwise take every in-sync copy out of the assignment: Kafka's
// controller refuses such a revert unless unclean leader election is
// enabled for the topic (PartitionReassignmentRevert), and Strata refuses
// any such change.
func keepsISR(replicas, isr []int32) bool {
	if len(isr) == 0 {
		return true
	}
	return slices.ContainsFunc(replicas, func(r int32) bool { return slices.Contains(isr, r) })
}

// PlanReassignment decides whether the controller can complete p's
// reassignment now (see the sequence at the top of this file): ready once
// every target replica is in the ISR and some target replica can lead.
// next is the state to write with the completion, in the same atomic
// write: the leader moved into the target if it is not in it (or not
// eligible), leader epoch + 1, the ISR cut to the target. stateChanged is
// false when the state is right as it is.
func PlanReassignment(p PartitionInfo, l Liveness, controllerEpoch int32) (ready bool, next PartitionState, stateChanged bool) {
	target := p.TargetReplicas()
	st := p.State
	for _, r := range target {
		if !slices.Contains(st.ISR, r) {
			return false, st, false
		}
	}
	leaderOK := st.Leader != NoLeader && slices.Contains(target, st.Leader) && l.eligible(st.Leader)
	isr := filterISR(st.ISR, func(b int32) bool { return slices.Contains(target, b) })
	if leaderOK && slices.Equal(isr, st.ISR) {
		return true, st, false
	}
	next = st.Clone()
	if !leaderOK {
		next.Leader = NoLeader
		for _, r := range target {
			if l.eligible(r) && slices.Contains(st.ISR, r) {
				next.Leader = r
				break
			}
		}
		if next.Leader == NoLeader {
			return false, st, false
		}
		next.LeaderEpoch++
	}
	next.ISR = isr
	next.ControllerEpoch = controllerEpoch
	return true, next, true
}

// changesByTopic groups changes by topic: the topics in the order they
// first appear, and each topic's indexes into changes.
func changesByTopic(changes []ReassignmentChange) (order []string, byTopic map[string][]int) {
	byTopic = map[string][]int{}
	for i, ch := range changes {
		if _, ok := byTopic[ch.Topic]; !ok {
			order = append(order, ch.Topic)
		}
		byTopic[ch.Topic] = append(byTopic[ch.Topic], i)
	}
	return order, byTopic
}
