package group

// Classic members of a consumer group (KIP-848's online migration): a
// consumer group may hold members that speak the classic protocol
// (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) beside members of the
// consumer protocol, as Kafka's GroupMetadataManager serves them
// (classicGroupJoinToConsumerGroup and its siblings). The server
// assigns for them too: a classic member is a consumer member whose
// subscription and owned partitions come from its JoinGroup's consumer
// protocol metadata, whose generation is its member epoch, and whose
// SyncGroup returns its current assignment encoded as the consumer
// protocol's assignment. It reconciles as any member, revocation first:
//
//	Heartbeat ──► member epoch < group epoch, partitions to revoke, or
//	              partitions released that it waits for?
//	              yes: REBALANCE_IN_PROGRESS (rejoin within the rebalance timeout)
//	JoinGroup ──► subscription and owned partitions from the metadata ──► reconcile:
//	              still owns what it must revoke: same epoch, assignment without them
//	              else: the target epoch, with the partitions no one else owns
//	              answered at once: generation = member epoch, no leader
//	SyncGroup ──► its assignment (within the rebalance timeout after the join)
//
// A cooperative client revokes what its assignment lost and rejoins at
// once; an eager one revoked everything before it joined.

import (
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicMember is what a consumer group keeps of a member that uses the
// classic protocol: Kafka's ClassicMemberMetadata (persisted in the
// member's ConsumerGroupMemberMetadataValue) and its join and sync
// timeouts.
type classicMember struct {
	sessionTimeout time.Duration
	protocols      []kmsg.JoinGroupRequestProtocol // preference order, names unique

	// joinTimer fences the member when it does not rejoin within its
	// rebalance timeout after being told to (REBALANCE_IN_PROGRESS);
	// syncTimer when it does not send SyncGroup within it after its
	// join.
	joinTimer timer
	syncTimer timer
}

// protocol is the protocol a classic member's JoinGroup and SyncGroup
// are answered with: the first it supports, as Kafka answers.
func (cm *classicMember) protocol() string {
	if len(cm.protocols) == 0 {
		return ""
	}
	return cm.protocols[0].Name
}

// assignmentVersion is the consumer protocol version of the member's
// first protocol's metadata, which its assignments are encoded at.
func (cm *classicMember) assignmentVersion() int16 {
	if len(cm.protocols) == 0 {
		return 0
	}
	return metadataVersion(cm.protocols[0].Metadata)
}

// metadataVersion reads the int16 version a consumer protocol
// subscription starts with (0 if it is too short), capped at the newest
// assignment version kmsg encodes.
func metadataVersion(meta []byte) int16 {
	if len(meta) < 2 {
		return 0
	}
	return min(int16(be16(meta)), 3)
}

// stopTimers stops the member's join and sync timers.
func (cm *classicMember) stopTimers() {
	if cm.joinTimer != nil {
		cm.joinTimer.Stop()
		cm.joinTimer = nil
	}
	if cm.syncTimer != nil {
		cm.syncTimer.Stop()
		cm.syncTimer = nil
	}
}

// classicProtocolsSupportedLocked reports whether a classic member with
// these protocols may join the consumer group: protocol type "consumer",
// and, when the group has classic members, a protocol all of them
// support (Kafka's supportsClassicProtocols).
func (cg *consumerGroup) classicProtocolsSupported(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if protocolType != consumerProtocolType || len(protocols) == 0 {
		return false
	}
	classic := 0
	votes := make(map[string]int)
	for _, m := range cg.members {
		if m.classic == nil {
			continue
		}
		classic++
		for _, p := range m.classic.protocols {
			votes[p.Name]++
		}
	}
	if classic == 0 {
		return true
	}
	for _, p := range protocols {
		if votes[p.Name] == classic {
			return true
		}
	}
	return false
}

// classicMemberLocked finds the classic member a SyncGroup, Heartbeat or
// LeaveGroup names: UNKNOWN_MEMBER_ID for an unknown one or one of the
// consumer protocol, FENCED_INSTANCE_ID for an instance id held by
// another member id.
func (g *group) classicMemberLocked(memberID string, instanceID *string) (*consumerMember, int16) {
	cg := g.consumer
	var m *consumerMember
	if instanceID != nil {
		id, ok := cg.static[*instanceID]
		if !ok {
			return nil, kerr.UnknownMemberID.Code
		}
		m = cg.members[id]
		if m == nil {
			return nil, kerr.UnknownMemberID.Code
		}
		if memberID != "" && id != memberID {
			return nil, kerr.FencedInstanceID.Code
		}
	} else if m = cg.members[memberID]; m == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	if m.classic == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	return m, 0
}

// classicJoinConsumerLocked is a JoinGroup to a consumer group with
// members. It returns the answer and the channel that gets the append's
// result of the member's records (nil: nothing to wait for).
func (g *group) classicJoinConsumerLocked(cl Client, req *kmsg.JoinGroupRequest, session, rebalance time.Duration) (joinResult, chan error) {
	cg := g.consumer
	memberID := req.MemberID
	unknown := memberID == ""
	if unknown {
		memberID = newMemberID(cl.ID, req.InstanceID)
	}
	m := cg.members[memberID]
	var replaced *consumerMember
	if req.InstanceID != nil {
		oldID, ok := cg.static[*req.InstanceID]
		switch {
		case ok && oldID == memberID:
		case ok && unknown:
			replaced = cg.members[oldID]
		case ok:
			return joinError(kerr.FencedInstanceID.Code, memberID), nil
		case !unknown && m == nil:
			return joinError(kerr.UnknownMemberID.Code, memberID), nil
		}
	}
	if m == nil && replaced == nil && len(cg.members) >= g.c.cfg.Consumer.MaxSize {
		return joinError(kerr.GroupMaxSizeReached.Code, memberID), nil
	}
	if !cg.classicProtocolsSupported(req.ProtocolType, req.Protocols) {
		return joinError(kerr.InconsistentGroupProtocol.Code, memberID), nil
	}
	if unknown && req.InstanceID == nil && req.Version >= 4 {
		// KIP-394: the member comes back with its id. Nothing is kept
		// meanwhile: a join with an id the group does not have creates
		// the member, as Kafka's consumer group does.
		return joinError(kerr.MemberIDRequired.Code, memberID), nil
	}
	protocols := uniqueProtocols(req.Protocols)
	var md kmsg.ConsumerMemberMetadata
	if err := md.ReadFrom(protocols[0].Metadata); err != nil {
		return joinError(kerr.InconsistentGroupProtocol.Code, memberID), nil
	}

	changed := false
	if m == nil {
		m = &consumerMember{id: strings.Clone(memberID), assigned: make(partitionSet), revoking: make(partitionSet)}
		changed = true
		if replaced != nil {
			// The static member restarted under a new id: it takes the
			// old one's place, epochs and assignment.
			m.epoch, m.previousEpoch, m.state = replaced.epoch, replaced.previousEpoch, replaced.state
			m.assigned, m.revoking = replaced.assigned, replaced.revoking
			m.topics, m.assignor = replaced.topics, replaced.assignor
			cg.release(replaced)
			g.removeConsumerMemberLocked(replaced, false)
			if t, ok := cg.target[replaced.id]; ok {
				cg.target[m.id] = t
			}
			delete(cg.target, replaced.id)
			changed = replaced.regex != ""
		}
		cg.members[m.id] = m
		if req.InstanceID != nil {
			inst := strings.Clone(*req.InstanceID)
			m.instanceID = &inst
			cg.static[inst] = m.id
		}
		cg.claim(m)
	}
	m.clientID, m.clientHost = strings.Clone(cl.ID), strings.Clone(cl.Host)
	if m.epoch == staticLeaveEpoch {
		m.epoch = m.previousEpoch
	}
	if md.Rack != nil {
		rack := strings.Clone(*md.Rack)
		m.rackID = &rack
	}
	m.rebalanceTimeout = rebalance
	topics := make([]string, len(md.Topics))
	for i, t := range md.Topics {
		topics[i] = strings.Clone(t)
	}
	slices.Sort(topics)
	topics = slices.Compact(topics)
	if !slices.Equal(topics, m.topics) {
		m.topics = topics
		changed = true
	}
	if m.regex != "" {
		// A classic subscription is topic names only.
		m.regex, m.regexRE, m.regexTopics = "", nil, nil
		changed = true
	}
	if m.classic == nil {
		m.classic = &classicMember{}
	}
	m.classic.sessionTimeout = session
	m.classic.protocols = protocols
	if changed {
		cg.epoch++
		cg.subsChanged = true
	}
	g.reconcileMemberLocked(m, g.ownedFromMetadata(&md))

	// The join is answered: the member must sync within its rebalance
	// timeout, and is no longer waited for to rejoin.
	if m.classic.joinTimer != nil {
		m.classic.joinTimer.Stop()
		m.classic.joinTimer = nil
	}
	g.classicSyncTimerLocked(m)
	r := joinResult{
		memberID:     m.id,
		generation:   m.epoch,
		protocolType: consumerProtocolType,
		protocol:     m.classic.protocol(),
	}
	code, wait := g.storeConsumerLocked()
	if code != 0 {
		return joinError(code, m.id), nil
	}
	return r, wait
}

// ownedFromMetadata is the partitions a classic member's subscription says
// it owns (consumer protocol v1+), by topic id; topics the cluster does
// not have are left out.
func (g *group) ownedFromMetadata(md *kmsg.ConsumerMemberMetadata) partitionSet {
	snap := g.c.topics()
	owned := make(partitionSet)
	for _, t := range md.OwnedPartitions {
		meta, ok := snap.byName[t.Topic]
		if !ok {
			continue
		}
		for _, p := range t.Partitions {
			owned[topicPartition{meta.ID, p}] = struct{}{}
		}
	}
	return owned
}

// classicSyncConsumerLocked is a SyncGroup of a classic member of a
// consumer group (Kafka's classicGroupSyncToConsumerGroup).
func (g *group) classicSyncConsumerLocked(req *kmsg.SyncGroupRequest) syncResult {
	cg := g.consumer
	m, code := g.classicMemberLocked(req.MemberID, req.InstanceID)
	switch {
	case code != 0:
		return syncResult{code: code}
	case req.Generation != m.epoch:
		return syncResult{code: kerr.IllegalGeneration.Code}
	case req.ProtocolType != nil && *req.ProtocolType != consumerProtocolType,
		req.Protocol != nil && *req.Protocol != m.classic.protocol():
		return syncResult{code: kerr.InconsistentGroupProtocol.Code}
	case cg.epoch > m.epoch && m.state != memberUnrevoked:
		// A new rebalance began since the join: rejoin to catch up (a
		// member revoking rejoins once it has, as it must anyway).
		g.classicJoinTimerLocked(m)
		return syncResult{code: kerr.RebalanceInProgress.Code}
	}
	if m.classic.syncTimer != nil {
		m.classic.syncTimer.Stop()
		m.classic.syncTimer = nil
	}
	g.consumerSessionLocked(m)
	return syncResult{
		protocolType: consumerProtocolType,
		protocol:     m.classic.protocol(),
		assignment:   encodeClassicAssignment(m.assigned, g.c.topics(), m.classic.assignmentVersion()),
	}
}

// encodeClassicAssignment encodes partitions as the consumer protocol's
// assignment of the given version, topics by name (those the cluster no
// longer has left out), as Kafka's toConsumerProtocolAssignment.
func encodeClassicAssignment(s partitionSet, snap *TopicSnapshot, version int16) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	a.Version = version
	var topics []kmsg.ConsumerMemberAssignmentTopic
	s.byTopic(func(id [16]byte, parts []int32) {
		t, ok := snap.byID[id]
		if !ok {
			return
		}
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = t.Name, parts
		topics = append(topics, at)
	})
	slices.SortFunc(topics, func(a, b kmsg.ConsumerMemberAssignmentTopic) int { return strings.Compare(a.Topic, b.Topic) })
	a.Topics = topics
	return a.AppendTo(nil)
}

// classicHeartbeatConsumerLocked is a Heartbeat of a classic member of a
// consumer group (Kafka's classicGroupHeartbeatToConsumerGroup):
// REBALANCE_IN_PROGRESS when the member must rejoin, because the group
// epoch moved past its epoch, it has partitions to revoke, or the
// partitions it waits for were released.
func (g *group) classicHeartbeatConsumerLocked(req *kmsg.HeartbeatRequest) int16 {
	cg := g.consumer
	m, code := g.classicMemberLocked(req.MemberID, req.InstanceID)
	switch {
	case code != 0:
		return code
	case req.Generation != m.epoch:
		return kerr.IllegalGeneration.Code
	}
	g.consumerSessionLocked(m)
	if m.epoch < cg.epoch || m.state == memberUnrevoked ||
		(m.state == memberUnreleased && !cg.waitingOnUnreleased(m)) {
		g.classicJoinTimerLocked(m)
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

// waitingOnUnreleased reports whether a partition of the member's target
// that it does not have yet is still owned by another member.
func (cg *consumerGroup) waitingOnUnreleased(m *consumerMember) bool {
	if m.state != memberUnreleased {
		return false
	}
	for p := range cg.target[m.id] {
		if m.assigned.has(p) {
			continue
		}
		if _, epoch := cg.ownerEpoch(p); epoch != -1 {
			return true
		}
	}
	return false
}

// classicLeaveConsumerLocked is a LeaveGroup of one classic member of a
// consumer group (Kafka's classicGroupLeaveToConsumerGroup): the member
// is removed and the group epoch goes up. The caller stores the group.
func (g *group) classicLeaveConsumerLocked(memberID string, instanceID, reason *string) int16 {
	m, code := g.classicMemberLocked(memberID, instanceID)
	if code != 0 {
		return code
	}
	if reason != nil {
		g.c.cfg.Logger.Info("group: classic member left the consumer group", "group", g.id, "member", m.id, "reason", *reason)
	} else {
		g.c.cfg.Logger.Info("group: classic member left the consumer group", "group", g.id, "member", m.id)
	}
	g.fenceConsumerMemberLocked(m)
	return 0
}

// classicJoinTimerLocked starts the member's join timeout unless it runs:
// a member told to rejoin that does not within its rebalance timeout is
// removed.
func (g *group) classicJoinTimerLocked(m *consumerMember) {
	if m.classic.joinTimer != nil {
		return
	}
	m.classic.joinTimer = g.classicTimeoutLocked(m, "the classic member did not rejoin within its rebalance timeout", func(cm *classicMember) timer { return cm.joinTimer })
}

// classicSyncTimerLocked restarts the member's sync timeout.
func (g *group) classicSyncTimerLocked(m *consumerMember) {
	if m.classic.syncTimer != nil {
		m.classic.syncTimer.Stop()
	}
	m.classic.syncTimer = nil
	m.classic.syncTimer = g.classicTimeoutLocked(m, "the classic member did not sync within its rebalance timeout", func(cm *classicMember) timer { return cm.syncTimer })
}

// classicTimeoutLocked starts a timer of the member's rebalance timeout
// that removes it, unless the timer is no longer the one which (of the
// member's classic state) returns.
func (g *group) classicTimeoutLocked(m *consumerMember, why string, which func(*classicMember) timer) timer {
	d := m.rebalanceTimeout
	if d <= 0 {
		d = m.classic.sessionTimeout
	}
	var t timer
	t = g.c.cfg.timers.afterFunc(d, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.consumer == nil || g.consumer.members[m.id] != m || m.classic == nil || which(m.classic) != t {
			return
		}
		g.c.cfg.Logger.Info("group: consumer group member removed: "+why, "group", g.id, "member", m.id, "epoch", m.epoch)
		g.expireConsumerMemberLocked(m)
	})
	return t
}
