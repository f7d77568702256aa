package group

// SyncGroup: versions 0-5.
//
// Behavior:
//   - An empty group id: INVALID_GROUP_ID. Unknown group or member:
//     UNKNOWN_MEMBER_ID; a static member whose instance id maps to another
//     member id: FENCED_INSTANCE_ID; another generation: ILLEGAL_GENERATION.
//   - v5: a protocol type or name other than the group's:
//     INCONSISTENT_GROUP_PROTOCOL.
//   - PreparingRebalance: REBALANCE_IN_PROGRESS. Empty: UNKNOWN_MEMBER_ID.
//   - CompletingRebalance: the request waits. When the leader's arrives,
//     its assignment (members it left out get an empty one; in a
//     "consumer" group an encoded empty assignment, never zero bytes) is
//     written to __consumer_offsets; once the append returns every waiting
//     member gets its own assignment and the group is Stable. A failed
//     append answers NOT_COORDINATOR and starts a new rebalance.
//   - Stable: the member's assignment at once.
//   - If ctx is done first, the member counts as not synced again: if it
//     does not sync before the rebalance timeout, it is dropped.
//   - A classic member of a consumer group gets its current assignment at
//     once, encoded with the consumer protocol; REBALANCE_IN_PROGRESS when
//     the group epoch moved past its epoch since it joined
//     (consumer_classic.go).

import (
	"bytes"
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup handles a SyncGroup request; it blocks until the leader's
// assignment is stored, or ctx is done. See sync.go for the behavior.
func (c *Coordinator) SyncGroup(ctx context.Context, req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	r := c.sync(ctx, req)
	resp.ErrorCode = r.code
	if r.code == 0 {
		resp.ProtocolType = kmsg.StringPtr(r.protocolType)
		resp.Protocol = kmsg.StringPtr(r.protocol)
		resp.MemberAssignment = r.assignment
	}
	return resp
}

func (c *Coordinator) sync(ctx context.Context, req *kmsg.SyncGroupRequest) syncResult {
	if !validGroupID(req.Group, false) {
		return syncResult{code: kerr.InvalidGroupID.Code}
	}
	g, code := c.memberGroup(req.Group, false)
	if code != 0 {
		return syncResult{code: code}
	}

	g.mu.Lock()
	if g.state != StateDead && g.consumer != nil {
		r := g.classicSyncConsumerLocked(req) // consumer_classic.go
		g.mu.Unlock()
		return r
	}
	m, wait, r := g.syncLocked(req)
	g.mu.Unlock()
	return awaitPhase(ctx, wait, r, func() syncResult { return g.abandonSync(m, wait) })
}

func (g *group) syncLocked(req *kmsg.SyncGroupRequest) (*member, chan syncResult, syncResult) {
	if g.state == StateDead {
		return nil, nil, syncResult{code: kerr.CoordinatorNotAvailable.Code}
	}
	if code := g.validateMemberLocked(req.MemberID, req.InstanceID); code != 0 {
		return nil, nil, syncResult{code: code}
	}
	switch {
	case req.Generation != g.generation:
		return nil, nil, syncResult{code: kerr.IllegalGeneration.Code}
	case req.ProtocolType != nil && *req.ProtocolType != g.protocolType,
		req.Protocol != nil && *req.Protocol != g.protocol:
		return nil, nil, syncResult{code: kerr.InconsistentGroupProtocol.Code}
	}
	m := g.members[req.MemberID]
	switch g.state {
	case StatePreparingRebalance:
		return nil, nil, syncResult{code: kerr.RebalanceInProgress.Code}
	case StateStable:
		delete(g.pendingSync, m.id)
		g.heartbeatLocked(m)
		return nil, nil, g.syncResultLocked(m)
	case StateCompletingRebalance:
		// A sync of the same member still waiting is superseded by this one.
		g.deliverSyncLocked(m, syncResult{code: kerr.RebalanceInProgress.Code})
		wait := make(chan syncResult, 1)
		m.syncWait = wait
		delete(g.pendingSync, m.id)
		if m.id == g.leader && g.storingGen != g.generation {
			g.storeAssignmentLocked(req.GroupAssignment)
		}
		return m, wait, syncResult{}
	}
	return nil, nil, syncResult{code: kerr.UnknownMemberID.Code}
}

func (g *group) syncResultLocked(m *member) syncResult {
	return syncResult{protocolType: g.protocolType, protocol: g.protocol, assignment: m.assignment}
}

// storeAssignmentLocked writes the leader's assignment and, once the
// append returned, hands it out and makes the group Stable.
func (g *group) storeAssignmentLocked(given []kmsg.SyncGroupRequestGroupAssignment) {
	assignments := make(map[string][]byte, len(g.members))
	for _, a := range given {
		if g.members[a.MemberID] != nil {
			assignments[a.MemberID] = bytes.Clone(a.MemberAssignment)
		}
	}
	for id := range g.members {
		assignments[id] = g.assignmentOrEmpty(assignments[id])
	}
	gen := g.generation
	g.storingGen = gen
	fail := func() {
		g.resetAssignmentsLocked(kerr.NotCoordinator.Code)
		g.prepareRebalanceLocked()
	}
	err := g.storeLocked(assignments, func(err error) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.storingGen == gen {
			g.storingGen = -1
		}
		if g.state != StateCompletingRebalance || g.generation != gen {
			return // a new rebalance began while the assignment was written
		}
		if err != nil {
			fail()
			return
		}
		// Every session deadline moves before any answer leaves: a
		// member told its assignment may act on it (and on the time)
		// at once.
		for _, m := range g.members {
			m.assignment = assignments[m.id]
			g.heartbeatLocked(m)
		}
		for _, m := range g.members {
			g.deliverSyncLocked(m, g.syncResultLocked(m))
		}
		g.transitionLocked(StateStable)
		g.c.cfg.Logger.Debug("group: stable", "group", g.id, "generation", gen, "members", len(g.members))
	})
	if err != nil {
		g.storingGen = -1
		fail()
	}
}

// abandonSync handles a SyncGroup whose ctx ended before its answer.
func (g *group) abandonSync(m *member, wait chan syncResult) syncResult {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m.syncWait != wait {
		return <-wait
	}
	m.syncWait = nil
	if g.members[m.id] == m && g.state == StateCompletingRebalance && g.pendingSync != nil {
		g.pendingSync[m.id] = struct{}{}
	}
	return syncResult{code: kerr.CoordinatorNotAvailable.Code}
}
