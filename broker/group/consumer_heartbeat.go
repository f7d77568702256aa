package group

// ConsumerGroupHeartbeat: versions 0-1 (KIP-848).
//
// Behavior:
//   - The request is checked as Kafka checks it (INVALID_REQUEST): a
//     group id; a member id (always from v1, where the client makes it;
//     v0 joins with none get "<client.id>-<uuid>"); on a join (epoch 0)
//     a rebalance timeout, an empty owned-partitions list and topic names
//     or a regex; an instance id to leave with epoch -2; no epoch below
//     -2; instance and rack ids that are not empty. A ServerAssignor not in
//     Consumer.Assignors: UNSUPPORTED_ASSIGNOR; a regex that does not
//     compile: INVALID_REGULAR_EXPRESSION.
//   - Epoch 0 joins, or rejoins in place a member the group still has
//     (it keeps its assignment). A group at Consumer.MaxSize members:
//     GROUP_MAX_SIZE_REACHED. A static member (instance id) whose
//     instance is held by an active member: UNRELEASED_INSTANCE_ID; one
//     that left with epoch -2 is replaced and its assignment inherited.
//     An Empty classic group becomes a consumer group, keeping its
//     offsets; a classic group with members is upgraded when the
//     migration policy allows it (consumer_migration.go), and
//     GROUP_ID_NOT_FOUND otherwise.
//   - Epoch -1 leaves; -2 leaves a static member for now: it keeps its
//     assignment (no one else gets its partitions) until it rejoins or
//     its session times out.
//   - Any other epoch must be the member's, or its previous one with
//     owned partitions that are a subset of its assignment (a response
//     was lost): FENCED_MEMBER_EPOCH otherwise. Unknown member:
//     UNKNOWN_MEMBER_ID (FENCED_INSTANCE_ID when its instance id belongs
//     to another member); unknown group: GROUP_ID_NOT_FOUND.
//   - A join, a leave, a subscription change, or a change of the
//     subscribed topics (created, deleted, more partitions) bumps the
//     group epoch; the next heartbeat computes a new target assignment
//     with the assignor most members named. Then the member reconciles
//     (consumer_reconcile.go) and the response carries its epoch, the
//     heartbeat interval, and its assignment when it joined, sent a full
//     request, or its assignment changed.
//   - A member whose heartbeats stop for the session timeout is removed;
//     one that does not revoke within its rebalance timeout too.

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupHeartbeat handles a ConsumerGroupHeartbeat request. It
// does not block.
func (c *Coordinator) ConsumerGroupHeartbeat(ctx context.Context, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	if !c.cfg.Consumer.Enabled {
		resp.ErrorCode = kerr.UnsupportedVersion.Code
		return resp
	}
	if code, msg := c.checkConsumerHeartbeat(req); code != 0 {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		return resp
	}
	g, code := c.consumerGroupFor(req.Group, req.MemberEpoch == joinEpoch)
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	g.mu.Lock()
	code, wait := g.consumerHeartbeatLocked(ctx, req, resp)
	g.mu.Unlock()
	if code == 0 {
		code = AwaitStore(ctx.Done(), wait)
	}
	if code != 0 {
		// The state changed in memory but the log does not hold it:
		// the partition moved or failed, and the client looks up the
		// coordinator again.
		*resp = *req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = code
	}
	return resp
}

// consumerHeartbeatLocked applies the heartbeat and queues its records;
// the channel gets the append's result.
func (g *group) consumerHeartbeatLocked(ctx context.Context, req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) (int16, chan error) {
	resp.HeartbeatIntervalMillis = int32(g.consumerTimeoutsLocked().heartbeat.Milliseconds())
	if g.state == StateDead {
		resp.ErrorCode = kerr.NotCoordinator.Code
		return 0, nil
	}
	var extra []kv
	if g.consumer == nil {
		switch {
		case req.MemberEpoch != joinEpoch:
			resp.ErrorCode = kerr.GroupIDNotFound.Code
			return 0, nil
		case g.convertibleToConsumerLocked():
			g.toConsumerLocked()
		case !g.upgradeLocked(): // online migration (consumer_migration.go)
			resp.ErrorCode = kerr.GroupIDNotFound.Code
			resp.ErrorMessage = kmsg.StringPtr("Group " + g.id + " is not a consumer group.")
			return 0, nil
		}
		extra = append(extra, kv{key: groupKey(g.id)}) // the classic group's record goes
	}
	switch req.MemberEpoch {
	case joinEpoch:
		g.consumerJoinLocked(ctx, req, resp)
	case leaveEpoch:
		if recs := g.consumerLeaveLocked(req, resp); recs != nil {
			return g.appendLocked(recs, nil) // the group became a classic group
		}
	case staticLeaveEpoch:
		g.consumerStaticLeaveLocked(req, resp)
	default:
		g.consumerBeatLocked(ctx, req, resp)
	}
	return g.storeConsumerLocked(extra...)
}

// checkConsumerHeartbeat validates the request as Kafka's
// throwIfConsumerGroupHeartbeatRequestIsInvalid does.
func (c *Coordinator) checkConsumerHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest) (int16, string) {
	bad := func(msg string) (int16, string) { return kerr.InvalidRequest.Code, msg }
	switch {
	case (req.Version >= 1 || req.MemberEpoch > 0 || req.MemberEpoch == leaveEpoch || req.MemberEpoch == staticLeaveEpoch) && req.MemberID == "":
		return bad("MemberId can't be empty.")
	case req.Group == "" || !validGroupID(req.Group, false):
		return bad("GroupId can't be empty.")
	case req.InstanceID != nil && *req.InstanceID == "":
		return bad("InstanceId can't be empty.")
	case req.RackID != nil && *req.RackID == "":
		return bad("RackId can't be empty.")
	case len(req.MemberID) > maxStringLen:
		return bad("MemberId is too long.")
	}
	switch {
	case req.MemberEpoch == joinEpoch:
		switch {
		case req.RebalanceTimeoutMillis == -1:
			return bad("RebalanceTimeoutMs must be provided in first request.")
		case req.Topics == nil || len(req.Topics) > 0:
			return bad("TopicPartitions must be empty when (re-)joining.")
		case len(req.SubscribedTopicNames) == 0 && (req.SubscribedTopicRegex == nil || *req.SubscribedTopicRegex == ""):
			return bad("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
		}
	case req.MemberEpoch == staticLeaveEpoch:
		if req.InstanceID == nil {
			return bad("InstanceId can't be null.")
		}
	case req.MemberEpoch < staticLeaveEpoch:
		return bad("MemberEpoch is invalid.")
	}
	if req.ServerAssignor != nil && !slices.Contains(c.cfg.Consumer.Assignors, *req.ServerAssignor) {
		return kerr.UnsupportedAssignor.Code, "ServerAssignor " + *req.ServerAssignor + " is not supported. Supported assignors: " + strings.Join(c.cfg.Consumer.Assignors, ", ") + "."
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		if _, err := compileSubscriptionRegex(*req.SubscribedTopicRegex); err != nil {
			return kerr.InvalidRegularExpression.Code, err.Error()
		}
	}
	return 0, ""
}

// consumerGroupFor finds the group of a heartbeat, creating it for a
// join. A group the coordinator does not have: GROUP_ID_NOT_FOUND.
func (c *Coordinator) consumerGroupFor(id string, create bool) (*group, int16) {
	g, code := c.lookup(id, create)
	if code == 0 && g == nil {
		return nil, kerr.GroupIDNotFound.Code
	}
	return g, code
}

// convertibleToConsumerLocked reports whether a classic group may become
// a consumer group: it has no members, nor any waiting to join.
func (g *group) convertibleToConsumerLocked() bool {
	return g.state == StateEmpty && len(g.members) == 0 && len(g.pending) == 0
}

// toConsumerLocked makes the (empty, classic) group a consumer group; its
// offsets stay.
func (g *group) toConsumerLocked() {
	g.consumer = newConsumerGroup()
	g.protocolType = consumerProtocolType
	g.protocol, g.leader, g.generation = "", "", 0
	g.subscribed = nil
}

// consumerTimeouts are a group's session timeout and heartbeat interval.
type consumerTimeouts struct{ session, heartbeat time.Duration }

func (g *group) consumerTimeoutsLocked() consumerTimeouts {
	cc := &g.c.cfg.Consumer
	t := consumerTimeouts{session: cc.SessionTimeout, heartbeat: cc.HeartbeatInterval}
	if cc.GroupTimeouts != nil {
		s, h := cc.GroupTimeouts(g.id)
		if s > 0 {
			t.session = s
		}
		if h > 0 {
			t.heartbeat = h
		}
	}
	return t
}

func (g *group) consumerJoinLocked(ctx context.Context, req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) {
	cg := g.consumer
	memberID := req.MemberID
	cl := clientFrom(ctx)
	if memberID == "" {
		memberID = newMemberID(cl.ID, req.InstanceID)
	}
	m := cg.members[memberID]
	var inherit *consumerMember
	if req.InstanceID != nil {
		if oldID, ok := cg.static[*req.InstanceID]; ok && oldID != memberID {
			old := cg.members[oldID]
			if old != nil && old.epoch != staticLeaveEpoch {
				resp.ErrorCode = kerr.UnreleasedInstanceID.Code
				return
			}
			inherit = old
		}
	}
	if m == nil && inherit == nil && len(cg.members) >= g.c.cfg.Consumer.MaxSize {
		resp.ErrorCode = kerr.GroupMaxSizeReached.Code
		return
	}
	changed := false
	if m == nil {
		m = &consumerMember{id: strings.Clone(memberID), assigned: make(partitionSet), revoking: make(partitionSet)}
		changed = true
		if inherit != nil {
			// The static member comes back under a new id: it takes the
			// old one's place, assignment and epoch, and the old id is
			// gone.
			m.epoch, m.previousEpoch, m.state = inherit.epoch, inherit.previousEpoch, inherit.state
			m.assigned, m.revoking = inherit.assigned, inherit.revoking
			m.topics, m.regex, m.regexRE, m.regexTopics, m.assignor = inherit.topics, inherit.regex, inherit.regexRE, inherit.regexTopics, inherit.assignor
			cg.release(inherit)
			g.removeConsumerMemberLocked(inherit, false)
			if t, ok := cg.target[inherit.id]; ok {
				cg.target[m.id] = t
			}
			delete(cg.target, inherit.id)
			changed = false
		}
		cg.members[m.id] = m
		if req.InstanceID != nil {
			inst := strings.Clone(*req.InstanceID)
			m.instanceID = &inst
			cg.static[inst] = m.id
		}
		cg.claim(m)
	}
	m.clientID, m.clientHost = cl.ID, cl.Host
	if m.epoch == staticLeaveEpoch {
		// Back from a static leave under the same id.
		m.epoch = m.previousEpoch
	}
	if g.updateSubscriptionLocked(m, req) {
		changed = true
	}
	if changed {
		cg.epoch++
		cg.subsChanged = true
	}
	if m.setAuth(topicAuthorizerFrom(ctx)) {
		cg.subsChanged = true
	}
	g.consumerReconcileLocked(m, partitionSet{}, true, resp)
}

// updateSubscriptionLocked applies the request's non-null subscription
// fields to the member and reports whether its subscription changed.
func (g *group) updateSubscriptionLocked(m *consumerMember, req *kmsg.ConsumerGroupHeartbeatRequest) bool {
	changed := false
	if req.RackID != nil {
		rack := strings.Clone(*req.RackID)
		m.rackID = &rack
	}
	if req.RebalanceTimeoutMillis > 0 {
		m.rebalanceTimeout = time.Duration(req.RebalanceTimeoutMillis) * time.Millisecond
	}
	if req.SubscribedTopicNames != nil {
		ts := make([]string, len(req.SubscribedTopicNames))
		for i, t := range req.SubscribedTopicNames {
			ts[i] = strings.Clone(t)
		}
		slices.Sort(ts)
		ts = slices.Compact(ts)
		if !slices.Equal(ts, m.topics) {
			m.topics = ts
			changed = true
		}
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != m.regex {
		m.regex = strings.Clone(*req.SubscribedTopicRegex)
		m.regexRE = nil
		if m.regex != "" {
			m.regexRE, _ = compileSubscriptionRegex(m.regex) // compiled by checkConsumerHeartbeat already
		}
		changed = true
	}
	if req.ServerAssignor != nil && *req.ServerAssignor != m.assignor {
		m.assignor = strings.Clone(*req.ServerAssignor)
		changed = true
	}
	return changed
}

func (g *group) consumerBeatLocked(ctx context.Context, req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) {
	cg := g.consumer
	m := cg.members[req.MemberID]
	if m == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		if req.InstanceID != nil {
			if id, ok := cg.static[*req.InstanceID]; ok && id != req.MemberID {
				resp.ErrorCode = kerr.FencedInstanceID.Code
			}
		}
		return
	}
	if req.InstanceID != nil && (m.instanceID == nil || *m.instanceID != *req.InstanceID) {
		resp.ErrorCode = kerr.FencedInstanceID.Code
		return
	}
	owned := ownedPartitions(req.Topics)
	if m.epoch == staticLeaveEpoch {
		resp.ErrorCode = kerr.FencedMemberEpoch.Code
		return
	}
	if req.MemberEpoch != m.epoch {
		lost := req.MemberEpoch == m.previousEpoch && owned != nil && subsetOf(owned, m.assigned)
		if !lost || req.MemberEpoch > m.epoch {
			resp.ErrorCode = kerr.FencedMemberEpoch.Code
			return
		}
	}
	if g.updateSubscriptionLocked(m, req) {
		cg.epoch++
		cg.subsChanged = true
	}
	if m.setAuth(topicAuthorizerFrom(ctx)) {
		cg.subsChanged = true
	}
	full := req.RebalanceTimeoutMillis != -1 && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Topics != nil
	g.consumerReconcileLocked(m, owned, full, resp)
}

func subsetOf(s, of partitionSet) bool {
	for p := range s {
		if !of.has(p) {
			return false
		}
	}
	return true
}

// consumerReconcileLocked brings the target assignment up to date,
// reconciles the member, restarts its session and fills the response.
func (g *group) consumerReconcileLocked(m *consumerMember, owned partitionSet, sendAssignment bool, resp *kmsg.ConsumerGroupHeartbeatResponse) {
	if g.reconcileMemberLocked(m, owned) {
		sendAssignment = true
	}
	resp.MemberID = kmsg.StringPtr(m.id)
	resp.MemberEpoch = m.epoch
	if sendAssignment {
		resp.Assignment = m.assigned.responseAssignment()
	}
}

// reconcileMemberLocked brings the target assignment up to date,
// reconciles the member (of either protocol) with the partitions it says
// it owns, and restarts its session. It reports whether the member's
// assignment changed.
func (g *group) reconcileMemberLocked(m *consumerMember, owned partitionSet) bool {
	cg := g.consumer
	cg.refreshSubscriptions(g.c.topics())
	g.syncConsumerStateLocked()
	if cg.epoch != cg.assignmentEpoch {
		g.computeTargetLocked()
	}
	next := cg.reconcile(m, cg.assignmentEpoch, cg.target[m.id], owned)
	changed := !next.assigned.equal(m.assigned)
	if next.epoch != m.epoch {
		m.previousEpoch = m.epoch
	}
	cg.release(m)
	m.state, m.epoch, m.assigned, m.revoking = next.state, next.epoch, next.assigned, next.revoking
	if bad := cg.claim(m); len(bad) > 0 {
		g.c.cfg.Logger.Error("group: consumer group partition claimed by two members; kept with its owner", "group", g.id, "member", m.id, "partitions", len(bad))
	}
	cg.written.touch(m.id)
	g.consumerRebalanceTimerLocked(m)
	g.consumerSessionLocked(m)
	return changed
}

// computeTargetLocked computes the target assignment at the group epoch.
func (g *group) computeTargetLocked() {
	cg := g.consumer
	members := cg.sortedMembers()
	cg.assignor = preferredAssignor(members, g.c.cfg.Consumer.Assignors)
	cg.target = assignorFunc(cg.assignor)(assignInput{members: members, topics: cg.subscribedTopics, prev: cg.target})
	cg.assignmentEpoch = cg.epoch
	cg.written.all = true
}

// consumerRebalanceTimerLocked runs the member's rebalance timeout while
// it has partitions to revoke at its epoch: a member that does not revoke
// in time is removed, so that the others get its partitions.
func (g *group) consumerRebalanceTimerLocked(m *consumerMember) {
	if m.state != memberUnrevoked {
		if m.rebalanceTimer != nil {
			m.rebalanceTimer.Stop()
			m.rebalanceTimer = nil
		}
		return
	}
	if m.rebalanceTimer != nil && m.rebalanceEpoch == m.epoch {
		return
	}
	if m.rebalanceTimer != nil {
		m.rebalanceTimer.Stop()
	}
	d := m.rebalanceTimeout
	if d <= 0 {
		d = g.consumerTimeoutsLocked().session
	}
	epoch := m.epoch
	m.rebalanceEpoch = epoch
	m.rebalanceTimer = g.c.cfg.timers.afterFunc(d, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.consumer == nil || g.consumer.members[m.id] != m || m.state != memberUnrevoked || m.epoch != epoch {
			return
		}
		g.c.cfg.Logger.Info("group: consumer group member did not revoke within its rebalance timeout; removed", "group", g.id, "member", m.id, "epoch", m.epoch)
		g.expireConsumerMemberLocked(m)
	})
}

// consumerSessionLocked restarts the member's session timeout: the
// group's, or a classic member's own.
func (g *group) consumerSessionLocked(m *consumerMember) {
	d := g.consumerTimeoutsLocked().session
	if m.classic != nil && m.classic.sessionTimeout > 0 {
		d = m.classic.sessionTimeout
	}
	if m.sessionTimer != nil {
		m.sessionTimer.Stop()
	}
	m.sessionSeq++
	seq := m.sessionSeq
	m.sessionTimer = g.c.cfg.timers.afterFunc(d, func() { g.onConsumerSessionTimer(m, seq) })
}

// onConsumerSessionTimer removes the member unless a heartbeat restarted
// its session since the timer was set (seq).
func (g *group) onConsumerSessionTimer(m *consumerMember, seq uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.consumer == nil || g.consumer.members[m.id] != m || m.sessionSeq != seq {
		return
	}
	g.c.cfg.Logger.Info("group: consumer group member session expired", "group", g.id, "member", m.id, "epoch", m.epoch)
	g.expireConsumerMemberLocked(m)
}

// fenceConsumerMemberLocked removes the member (it left, or timed out):
// its partitions are free and the group epoch goes up.
func (g *group) fenceConsumerMemberLocked(m *consumerMember) {
	cg := g.consumer
	cg.release(m)
	g.removeConsumerMemberLocked(m, true)
	delete(cg.target, m.id)
	cg.epoch++
	cg.subsChanged = true
	g.syncConsumerStateLocked()
}

// syncConsumerStateLocked keeps the classic fields the offset code reads
// in step with the consumer group: the state is Stable while it has
// members and Empty once it has none (from then offsets age towards
// expiry), and subscribed lists the topics its members subscribe to.
func (g *group) syncConsumerStateLocked() {
	cg := g.consumer
	if len(cg.members) == 0 {
		if g.state != StateEmpty {
			g.transitionLocked(StateEmpty)
		}
		g.subscribed = nil
		return
	}
	if g.state != StateStable {
		g.transitionLocked(StateStable)
	}
	sub := make(map[string]struct{}, len(cg.subscribedTopics))
	for name := range cg.subscribedTopics {
		sub[name] = struct{}{}
	}
	for _, m := range cg.members {
		for _, name := range m.topics {
			sub[name] = struct{}{}
		}
	}
	g.subscribed = sub
}

// removeConsumerMemberLocked drops the member and its timers; the static
// mapping goes too unless another member took it over.
func (g *group) removeConsumerMemberLocked(m *consumerMember, dropStatic bool) {
	delete(g.consumer.members, m.id)
	if m.sessionTimer != nil {
		m.sessionTimer.Stop()
	}
	if m.rebalanceTimer != nil {
		m.rebalanceTimer.Stop()
	}
	if m.classic != nil {
		m.classic.stopTimers()
	}
	if dropStatic && m.instanceID != nil && g.consumer.static[*m.instanceID] == m.id {
		delete(g.consumer.static, *m.instanceID)
	}
}

// consumerLeaveLocked is epoch -1: the member leaves. When that
// downgrades the group to a classic group it returns the records to
// append (consumer_migration.go).
func (g *group) consumerLeaveLocked(req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) []kv {
	m := g.consumer.members[req.MemberID]
	if m == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return nil
	}
	resp.MemberID = kmsg.StringPtr(m.id)
	resp.MemberEpoch = leaveEpoch
	return g.leaveConsumerLocked(m)
}

// consumerStaticLeaveLocked is epoch -2: the static member keeps its
// assigned partitions (its pending revocations are released) at epoch
// -2, so nobody else gets them, until it rejoins or its session expires.
func (g *group) consumerStaticLeaveLocked(req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) {
	cg := g.consumer
	id, ok := cg.static[*req.InstanceID]
	m := cg.members[id]
	switch {
	case !ok || m == nil:
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return
	case id != req.MemberID:
		resp.ErrorCode = kerr.FencedInstanceID.Code
		return
	}
	cg.release(m)
	if m.epoch != staticLeaveEpoch {
		m.previousEpoch = m.epoch
	}
	m.epoch, m.state = staticLeaveEpoch, memberStable
	cg.written.touch(m.id)
	m.revoking = make(partitionSet)
	cg.claim(m)
	if m.rebalanceTimer != nil {
		m.rebalanceTimer.Stop()
		m.rebalanceTimer = nil
	}
	g.consumerSessionLocked(m)
	resp.MemberID = kmsg.StringPtr(m.id)
	resp.MemberEpoch = staticLeaveEpoch
}

// toClassicLocked makes the (empty) consumer group a classic group; its
// offsets stay.
func (g *group) toClassicLocked() {
	if code, _ := g.appendLocked(g.consumerTombstonesLocked(), nil); code != 0 {
		g.c.cfg.Logger.Warn("group: writing the tombstones of a consumer group failed", "group", g.id, "code", code)
	}
	g.consumer = nil
	g.protocolType = ""
	g.subscribed = nil
	g.transitionLocked(StateEmpty)
}
