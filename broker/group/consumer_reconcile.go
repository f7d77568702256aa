package group

// This file is the reconciliation of KIP-848 (Kafka's
// CurrentAssignmentBuilder): how a member's current assignment moves
// towards its target assignment without any partition being owned by two
// members at once. A member first revokes what it must give up, staying
// at its epoch until its heartbeat no longer lists those partitions; only
// then does it move to the target epoch and get new partitions, and only
// those no other member still owns (the others stay "unreleased" until
// their owner lets them go).

// reconciled is a member's next reconciliation state.
type reconciled struct {
	state    memberState
	epoch    int32
	assigned partitionSet
	revoking partitionSet
}

// reconcile computes the member's next state from its target assignment
// at targetEpoch, the group's owners, and the partitions the member's
// heartbeat says it owns (nil: not sent, unchanged).
func (cg *consumerGroup) reconcile(m *consumerMember, targetEpoch int32, target partitionSet, owned partitionSet) reconciled {
	cur := reconciled{state: m.state, epoch: m.epoch, assigned: m.assigned, revoking: m.revoking}
	switch m.state {
	case memberStable:
		if m.epoch == targetEpoch {
			return cur
		}
	case memberUnrevoked:
		if ownsAny(owned, m.revoking) {
			return cur
		}
	case memberUnreleased:
	}
	return cg.nextAssignment(m, m.epoch, targetEpoch, target, owned)
}

// ownsAny reports whether owned holds any partition of s; nil owned
// (the heartbeat did not say) counts as holding all of them.
func ownsAny(owned, s partitionSet) bool {
	if owned == nil {
		return len(s) > 0
	}
	for p := range s {
		if owned.has(p) {
			return true
		}
	}
	return false
}

func (cg *consumerGroup) nextAssignment(m *consumerMember, epoch, targetEpoch int32, target, owned partitionSet) reconciled {
	assigned := make(partitionSet)
	revoking := make(partitionSet)
	pending := make(partitionSet)
	unreleased := false
	for p := range m.assigned {
		if target.has(p) {
			assigned[p] = struct{}{}
		} else {
			revoking[p] = struct{}{}
		}
	}
	for p := range target {
		if assigned.has(p) {
			continue
		}
		holder, ownerEpoch := cg.ownerEpoch(p)
		if ownerEpoch != -1 && holder != m.id {
			unreleased = true
			continue
		}
		if ownerEpoch != -1 && !m.revoking.has(p) {
			// Owned by this member but neither assigned nor being
			// revoked: not reached (the owners map follows the sets).
			unreleased = true
			continue
		}
		pending[p] = struct{}{}
	}
	switch {
	case len(revoking) > 0 && ownsAny(owned, revoking):
		// Revoke first: the member stays at its epoch until it confirms.
		return reconciled{state: memberUnrevoked, epoch: epoch, assigned: assigned, revoking: revoking}
	case len(pending) > 0:
		for p := range pending {
			assigned[p] = struct{}{}
		}
		state := memberStable
		if unreleased {
			state = memberUnreleased
		}
		return reconciled{state: state, epoch: targetEpoch, assigned: assigned, revoking: make(partitionSet)}
	case unreleased:
		return reconciled{state: memberUnreleased, epoch: targetEpoch, assigned: assigned, revoking: make(partitionSet)}
	default:
		return reconciled{state: memberStable, epoch: targetEpoch, assigned: assigned, revoking: make(partitionSet)}
	}
}
