package group

// JoinGroup: versions 0-9.
//
// Behavior:
//   - An empty group id: INVALID_GROUP_ID. A session timeout outside
//     [MinSessionTimeout, MaxSessionTimeout]: INVALID_SESSION_TIMEOUT.
//     v0 has no rebalance timeout; the session timeout serves as one.
//   - A member id for a group the coordinator does not know:
//     UNKNOWN_MEMBER_ID.
//   - The protocol type must be the group's, and at least one protocol
//     must be supported by every member: INCONSISTENT_GROUP_PROTOCOL.
//   - An empty member id gets "<client.id>-<uuid>" ("<instance.id>-<uuid>"
//     for a static member). From v4 a dynamic member gets it back with
//     MEMBER_ID_REQUIRED and must join again with it (KIP-394); v0-3
//     members and static members join at once.
//   - A static member joining with an empty member id replaces the member
//     its instance id maps to; the old member id is fenced
//     (FENCED_INSTANCE_ID). In a Stable group whose protocol would not
//     change, there is no rebalance: the new id is written to the log and
//     the member gets the current generation (KIP-345). Before v9 the
//     answer names the previous leader id, so that a replaced leader does
//     not run an assignment the Stable group would never distribute; from
//     v9 a replaced leader is told it leads, gets the members and
//     SkipAssignment (KIP-814), so it keeps watching metadata without
//     running the assignor.
//   - A join blocks until the join phase completes: every member rejoined,
//     or the rebalance timeout passed (members that did not rejoin are
//     dropped), or for the first rebalance of an Empty group the initial
//     rebalance delay. Only the leader's response lists the members.
//   - A known follower joining a Stable or CompletingRebalance group with
//     unchanged protocols gets the current generation at once; the
//     leader's join, or changed protocols, start a rebalance.
//   - If ctx is done first, the join is abandoned: a member that joined in
//     this rebalance is dropped, an existing one counts as not rejoined.
//   - A consumer group (KIP-848) without members becomes a classic group,
//     keeping its offsets; one with members takes the member in as a
//     classic member of the consumer group (consumer_classic.go): the
//     server assigns, the join is answered at once with the member epoch
//     as generation and no leader.
//   - v8+: the client's Reason is logged with the join (KIP-800).

import (
	"context"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup handles a JoinGroup request; it blocks until the rebalance
// lets the member in, or ctx is done. See join.go for the behavior.
func (c *Coordinator) JoinGroup(ctx context.Context, req *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	r := c.join(ctx, req)
	resp.ErrorCode = r.code
	resp.Generation = r.generation
	resp.MemberID = r.memberID
	resp.LeaderID = r.leader
	resp.Members = r.members
	resp.SkipAssignment = r.skipAssignment
	if r.code == 0 {
		resp.ProtocolType = kmsg.StringPtr(r.protocolType)
		resp.Protocol = kmsg.StringPtr(r.protocol)
	}
	return resp
}

func (c *Coordinator) join(ctx context.Context, req *kmsg.JoinGroupRequest) joinResult {
	if !validGroupID(req.Group, false) {
		return joinError(kerr.InvalidGroupID.Code, req.MemberID)
	}
	session := time.Duration(req.SessionTimeoutMillis) * time.Millisecond
	if session < c.cfg.MinSessionTimeout || session > c.cfg.MaxSessionTimeout {
		return joinError(kerr.InvalidSessionTimeout.Code, req.MemberID)
	}
	rebalance := time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	if req.Version == 0 || rebalance <= 0 {
		rebalance = session
	}
	if req.Reason != nil {
		c.cfg.Logger.Debug("group: join", "group", req.Group, "member", req.MemberID, "reason", *req.Reason)
	}
	g, code := c.memberGroup(req.Group, req.MemberID == "")
	if code != 0 {
		return joinError(code, req.MemberID)
	}

	g.mu.Lock()
	if g.state != StateDead && g.consumer != nil && len(g.consumer.members) > 0 {
		if replaced := g.replacedLastConsumerLocked(req); replaced != nil {
			if code := g.downgradeForJoinLocked(replaced); code != 0 {
				g.mu.Unlock()
				return joinError(code, req.MemberID)
			}
		}
	}
	if g.state != StateDead && g.consumer != nil && len(g.consumer.members) > 0 {
		// A classic member joins a consumer group (consumer_classic.go).
		r, wait := g.classicJoinConsumerLocked(clientFrom(ctx), req, session, rebalance)
		g.mu.Unlock()
		if code := AwaitStore(ctx.Done(), wait); code != 0 {
			return joinError(code, r.memberID)
		}
		return r
	}
	m, wait, r := g.joinLocked(clientFrom(ctx), req, session, rebalance)
	g.mu.Unlock()
	return awaitPhase(ctx, wait, r, func() joinResult { return g.abandonJoin(m, wait) })
}

// joinLocked applies a join. It returns either a result to answer at once
// or the member and the channel its answer will arrive on.
func (g *group) joinLocked(cl Client, req *kmsg.JoinGroupRequest, session, rebalance time.Duration) (*member, chan joinResult, joinResult) {
	if g.state == StateDead {
		return nil, nil, joinError(kerr.CoordinatorNotAvailable.Code, req.MemberID)
	}
	if g.consumer != nil { // without members: join routes the others to classicJoinConsumerLocked
		g.toClassicLocked()
	}
	if !g.supportsProtocolsLocked(req.ProtocolType, req.Protocols) {
		return nil, nil, joinError(kerr.InconsistentGroupProtocol.Code, req.MemberID)
	}
	if req.MemberID == "" {
		newID := newMemberID(cl.ID, req.InstanceID)
		if req.InstanceID != nil {
			if oldID, ok := g.static[*req.InstanceID]; ok {
				return g.replaceStaticLocked(oldID, newID, cl, req, session, rebalance)
			}
			return g.addMemberAndRebalanceLocked(newID, cl, req, session, rebalance)
		}
		if req.Version >= 4 {
			g.addPendingLocked(newID, session)
			return nil, nil, joinError(kerr.MemberIDRequired.Code, newID)
		}
		return g.addMemberAndRebalanceLocked(newID, cl, req, session, rebalance)
	}
	if _, ok := g.pending[req.MemberID]; ok && req.InstanceID == nil {
		g.removePendingLocked(req.MemberID)
		return g.addMemberAndRebalanceLocked(req.MemberID, cl, req, session, rebalance)
	}
	if code := g.validateMemberLocked(req.MemberID, req.InstanceID); code != 0 {
		return nil, nil, joinError(code, req.MemberID)
	}
	m := g.members[req.MemberID]
	switch g.state {
	case StatePreparingRebalance:
		return g.updateMemberAndRebalanceLocked(m, req, session, rebalance)
	case StateCompletingRebalance:
		if m.matches(req.Protocols) {
			// It lost the answer of this generation's join: send it again.
			return nil, nil, g.joinResultLocked(m.id)
		}
		return g.updateMemberAndRebalanceLocked(m, req, session, rebalance)
	case StateStable:
		if m.id == g.leader || !m.matches(req.Protocols) {
			// The leader rejoins to have metadata changes (new topics,
			// new partitions) reassigned; others when their protocols
			// changed.
			return g.updateMemberAndRebalanceLocked(m, req, session, rebalance)
		}
		return nil, nil, g.joinResultLocked(m.id)
	}
	return nil, nil, joinError(kerr.UnknownMemberID.Code, req.MemberID)
}

func (g *group) addMemberAndRebalanceLocked(id string, cl Client, req *kmsg.JoinGroupRequest, session, rebalance time.Duration) (*member, chan joinResult, joinResult) {
	m := &member{
		id:               id,
		clientID:         strings.Clone(cl.ID),
		clientHost:       strings.Clone(cl.Host),
		protocolType:     strings.Clone(req.ProtocolType),
		protocols:        uniqueProtocols(req.Protocols),
		rebalanceTimeout: rebalance,
		sessionTimeout:   session,
		isNew:            true,
		joinWait:         make(chan joinResult, 1),
	}
	if req.InstanceID != nil {
		inst := strings.Clone(*req.InstanceID)
		m.instanceID = &inst
	}
	if g.state == StatePreparingRebalance && g.initialDelay {
		g.newMemberAdded = true
	}
	wait := m.joinWait
	g.addMemberLocked(m)
	g.maybePrepareRebalanceLocked()
	g.tryCompleteJoinLocked()
	return m, wait, joinResult{}
}

func (g *group) updateMemberAndRebalanceLocked(m *member, req *kmsg.JoinGroupRequest, session, rebalance time.Duration) (*member, chan joinResult, joinResult) {
	g.setProtocolsLocked(m, req.Protocols)
	m.sessionTimeout, m.rebalanceTimeout = session, rebalance
	// A join of the same member still waiting is superseded by this one.
	g.deliverJoinLocked(m, joinError(kerr.RebalanceInProgress.Code, m.id))
	wait := make(chan joinResult, 1)
	m.joinWait = wait
	g.awaitingJoin++
	g.maybePrepareRebalanceLocked()
	g.tryCompleteJoinLocked()
	return m, wait, joinResult{}
}

// replaceStaticLocked gives the static member mapped to oldID the member
// id newID (KIP-345): the old id is fenced, assignment and join order
// kept.
func (g *group) replaceStaticLocked(oldID, newID string, cl Client, req *kmsg.JoinGroupRequest, session, rebalance time.Duration) (*member, chan joinResult, joinResult) {
	m := g.members[oldID]
	if m == nil { // cannot happen: the static map only holds members
		delete(g.static, *req.InstanceID)
		return g.addMemberAndRebalanceLocked(newID, cl, req, session, rebalance)
	}
	prevLeader := g.leader
	g.failWaitersLocked(m, kerr.FencedInstanceID.Code, oldID)
	delete(g.members, oldID)
	delete(g.pendingSync, oldID)
	m.id = newID
	g.members[newID] = m
	g.static[*m.instanceID] = newID
	if g.leader == oldID {
		g.leader = newID
	}
	m.clientID, m.clientHost = strings.Clone(cl.ID), strings.Clone(cl.Host)
	g.setProtocolsLocked(m, req.Protocols)
	m.sessionTimeout, m.rebalanceTimeout = session, rebalance
	wait := make(chan joinResult, 1)
	m.joinWait = wait
	g.awaitingJoin++
	g.heartbeatLocked(m)
	g.c.cfg.Logger.Info("group: static member replaced", "group", g.id, "instance", *req.InstanceID, "old", oldID, "new", newID)

	switch g.state {
	case StateStable:
		if g.selectProtocolLocked() != g.protocol {
			g.prepareRebalanceLocked()
			break
		}
		// No rebalance: persist the new member id, then hand out the
		// current generation. The previous leader id is returned so that
		// a replaced leader does not run an assignment a Stable group
		// would never distribute.
		assignments := make(map[string][]byte, len(g.members))
		for _, o := range g.members {
			assignments[o.id] = o.assignment
		}
		r := joinResult{memberID: newID, generation: g.generation, protocolType: g.protocolType, protocol: g.protocol, leader: prevLeader}
		if req.Version >= 9 {
			r = g.joinResultLocked(newID)
			r.skipAssignment = newID == g.leader
		}
		err := g.storeLocked(assignments, func(err error) {
			g.mu.Lock()
			defer g.mu.Unlock()
			if m.joinWait != wait {
				return // answered by a rebalance or fenced meanwhile
			}
			if err != nil {
				g.deliverJoinLocked(m, joinError(kerr.NotCoordinator.Code, newID))
				return
			}
			g.deliverJoinLocked(m, r)
		})
		if err != nil {
			g.deliverJoinLocked(m, joinError(kerr.NotCoordinator.Code, newID))
		}
	case StateCompletingRebalance:
		// The leader may be assigning to the old id: start over.
		g.prepareRebalanceLocked()
	case StatePreparingRebalance:
		g.tryCompleteJoinLocked()
	}
	return m, wait, joinResult{}
}

// abandonJoin handles a JoinGroup whose ctx ended before its answer.
func (g *group) abandonJoin(m *member, wait chan joinResult) joinResult {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m.joinWait != wait {
		return <-wait // answered meanwhile; the answer is in the channel
	}
	m.joinWait = nil
	g.awaitingJoin--
	if g.members[m.id] == m {
		if m.isNew {
			g.removeMemberAndUpdateLocked(m)
		} else {
			g.heartbeatLocked(m)
		}
	}
	return joinError(kerr.CoordinatorNotAvailable.Code, m.id)
}
