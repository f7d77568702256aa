package group

// Online migration between the classic and the consumer protocol (KIP-848),
// as Kafka 4's GroupMetadataManager does it, under
// group.consumer.migration.policy (ConsumerConfig.MigrationPolicy):
//
//   - Upgrade: a ConsumerGroupHeartbeat joining a classic group with
//     members whose protocol type is "consumer" makes it a consumer group
//     (ConsumerGroup.fromClassicGroup). Every classic member stays, with
//     the subscription of its metadata for the selected protocol and the
//     assignment of the last generation decoded from the consumer
//     protocol; group epoch, target epoch and member epochs are the
//     generation, and each member's target is its assignment. Waiting
//     JoinGroups and SyncGroups are answered REBALANCE_IN_PROGRESS. The
//     log gets a tombstone of the group key and the consumer group's
//     records in the same batch as the joining member's.
//   - Downgrade: when the last member of the consumer protocol leaves or
//     is removed and classic members remain, or a classic JoinGroup with
//     its instance id replaces it (static membership; then the group may
//     have no other member), the group becomes a classic
//     group (ClassicGroup.fromConsumerGroup): Stable at the group epoch
//     as generation, the protocol every member supports, each member's
//     assignment its target encoded with the consumer protocol; then a
//     rebalance, which the members join as in any classic group. The log
//     gets the tombstones of every consumer group record and the classic
//     group's record in one batch.
//
// An empty group converts either way under every policy, keeping its
// offsets (consumer_heartbeat.go, join.go).

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The values of group.consumer.migration.policy.
const (
	MigrationBidirectional = "bidirectional"
	MigrationUpgrade       = "upgrade"
	MigrationDowngrade     = "downgrade"
	MigrationDisabled      = "disabled"
)

func (cc *ConsumerConfig) upgradeEnabled() bool {
	return cc.MigrationPolicy == "" || cc.MigrationPolicy == MigrationBidirectional || cc.MigrationPolicy == MigrationUpgrade
}

func (cc *ConsumerConfig) downgradeEnabled() bool {
	return cc.MigrationPolicy == "" || cc.MigrationPolicy == MigrationBidirectional || cc.MigrationPolicy == MigrationDowngrade
}

// upgradeLocked makes the classic group with members a consumer group
// (see the file comment). It reports false, changing nothing, when the
// policy does not allow it, the group's members do not use the consumer
// protocol or have no generation yet, there are more than
// Consumer.MaxSize of them, or a member's metadata or assignment does not
// decode.
func (g *group) upgradeLocked() bool {
	cfg := &g.c.cfg.Consumer
	switch {
	case !cfg.upgradeEnabled():
		g.c.cfg.Logger.Info("group: classic group not upgraded to a consumer group: group.consumer.migration.policy", "group", g.id, "policy", cfg.MigrationPolicy)
		return false
	case g.protocolType != consumerProtocolType || g.protocol == "":
		g.c.cfg.Logger.Info("group: classic group not upgraded to a consumer group: it does not use the consumer protocol", "group", g.id, "protocol_type", g.protocolType)
		return false
	case len(g.members) > cfg.MaxSize:
		g.c.cfg.Logger.Info("group: classic group not upgraded to a consumer group: more members than group.consumer.max.size", "group", g.id, "members", len(g.members))
		return false
	}
	snap := g.c.topics()
	cg := newConsumerGroup()
	cg.epoch, cg.assignmentEpoch = g.generation, g.generation
	for _, m := range g.sortedMembersLocked() {
		var md kmsg.ConsumerMemberMetadata
		if err := md.ReadFrom(m.metadataFor(g.protocol)); err != nil {
			g.c.cfg.Logger.Warn("group: classic group not upgraded to a consumer group: a member's subscription does not decode", "group", g.id, "member", m.id, "err", err)
			return false
		}
		assigned := make(partitionSet)
		if len(m.assignment) > 0 {
			var a kmsg.ConsumerMemberAssignment
			if err := a.ReadFrom(m.assignment); err != nil {
				g.c.cfg.Logger.Warn("group: classic group not upgraded to a consumer group: a member's assignment does not decode", "group", g.id, "member", m.id, "err", err)
				return false
			}
			for _, t := range a.Topics {
				meta, ok := snap.byName[t.Topic]
				if !ok {
					continue
				}
				for _, p := range t.Partitions {
					assigned[topicPartition{meta.ID, p}] = struct{}{}
				}
			}
		}
		topics := slices.Clone(md.Topics)
		slices.Sort(topics)
		cm := &consumerMember{
			id:               m.id,
			instanceID:       m.instanceID,
			clientID:         m.clientID,
			clientHost:       m.clientHost,
			epoch:            g.generation,
			previousEpoch:    g.generation,
			state:            memberStable,
			rebalanceTimeout: m.rebalanceTimeout,
			topics:           slices.Compact(topics),
			assigned:         assigned,
			revoking:         make(partitionSet),
			classic:          &classicMember{sessionTimeout: m.sessionTimeout, protocols: m.protocols},
		}
		if md.Rack != nil {
			rack := strings.Clone(*md.Rack)
			cm.rackID = &rack
		}
		cg.members[cm.id] = cm
		if cm.instanceID != nil {
			cg.static[*cm.instanceID] = cm.id
		}
		cg.target[cm.id] = assigned.clone()
		if bad := cg.claim(cm); len(bad) > 0 {
			g.c.cfg.Logger.Warn("group: classic group assigns a partition to two members; kept with the first", "group", g.id, "member", cm.id, "partitions", len(bad))
		}
	}

	// The classic group ends: its waiters rejoin the consumer group.
	for _, m := range g.members {
		g.failWaitersLocked(m, kerr.RebalanceInProgress.Code, m.id)
		if m.timer != nil {
			m.timer.Stop()
		}
	}
	for id := range g.pending {
		g.removePendingLocked(id)
	}
	if g.rebalanceTimer != nil {
		g.rebalanceTimer.Stop()
		g.rebalanceTimer = nil
	}
	g.stopSyncTimerLocked()
	g.members = make(map[string]*member)
	g.static = make(map[string]string)
	g.votes = make(map[string]int)
	g.awaitingJoin = 0
	g.protocol, g.leader = "", ""
	g.storingGen = -1

	g.consumer = cg
	g.subscribed = nil
	cg.written.all = true
	g.syncConsumerStateLocked()
	for _, m := range cg.members {
		g.consumerSessionLocked(m)
	}
	g.c.cfg.Logger.Info("group: classic group upgraded to a consumer group", "group", g.id, "epoch", cg.epoch, "members", len(cg.members))
	return true
}

// downgradableWithoutLocked reports whether removing m leaves a group to
// downgrade: m is the last member of the consumer protocol, classic
// members remain, and the policy allows it (Kafka's
// validateOnlineDowngradeWithFencedMember).
func (g *group) downgradableWithoutLocked(m *consumerMember) bool {
	return len(g.consumer.members) > 1 && g.lastConsumerMayGoLocked(m)
}

// lastConsumerMayGoLocked reports whether m is the group's only member of
// the consumer protocol (every other one is classic) and the policy lets
// the group downgrade when it goes.
func (g *group) lastConsumerMayGoLocked(m *consumerMember) bool {
	if m.classic != nil {
		return false
	}
	for _, o := range g.consumer.members {
		if o != m && o.classic == nil {
			return false
		}
	}
	if !g.c.cfg.Consumer.downgradeEnabled() {
		g.c.cfg.Logger.Info("group: consumer group not downgraded to a classic group: group.consumer.migration.policy", "group", g.id, "policy", g.c.cfg.Consumer.MigrationPolicy)
		return false
	}
	return true
}

// replacedLastConsumerLocked returns the static member of the consumer
// protocol that a classic JoinGroup replaces (no member id, the static
// member's instance id) when it is the group's last member of that
// protocol and the policy allows a downgrade: the join then downgrades
// the group before it is served as a classic join (Kafka's
// validateOnlineDowngradeWithReplacedMember). Nil otherwise.
func (g *group) replacedLastConsumerLocked(req *kmsg.JoinGroupRequest) *consumerMember {
	cg := g.consumer
	if req.MemberID != "" || req.InstanceID == nil {
		return nil
	}
	id, ok := cg.static[*req.InstanceID]
	if !ok {
		return nil
	}
	if replaced := cg.members[id]; replaced != nil && g.lastConsumerMayGoLocked(replaced) {
		return replaced
	}
	return nil
}

// downgradeForJoinLocked downgrades the group for a classic join that
// replaces its last static member of the consumer protocol: with classic
// members left, as when that member leaves (downgradeLocked); alone, it
// is removed and the empty group becomes a classic one on the join
// (joinLocked). It returns a nonzero code when the downgrade's records
// could not be appended.
func (g *group) downgradeForJoinLocked(replaced *consumerMember) int16 {
	if len(g.consumer.members) == 1 {
		g.fenceConsumerMemberLocked(replaced)
		return 0
	}
	code, wait := g.appendLocked(g.downgradeLocked(replaced), nil)
	if code != 0 {
		return code
	}
	go func() {
		if err := <-wait; err != nil {
			g.c.cfg.Logger.Warn("group: writing the downgrade of a consumer group failed", "group", g.id, "err", err)
		}
	}()
	return 0
}

// downgradeLocked removes the leaving member and makes the consumer group
// a classic group that rebalances (see the file comment). It returns the
// records of the change: every consumer group record's tombstone and the
// classic group's record.
func (g *group) downgradeLocked(leaving *consumerMember) []kv {
	cg := g.consumer
	recs := g.consumerTombstonesLocked()
	snap := g.c.topics()
	remaining := make([]*consumerMember, 0, len(cg.members))
	for _, m := range cg.sortedMembers() {
		g.removeConsumerMemberLocked(m, true)
		if m != leaving {
			remaining = append(remaining, m)
		}
	}
	g.consumer = nil
	g.protocolType = consumerProtocolType
	g.generation = cg.epoch
	g.leader, g.protocol = "", ""
	for _, cm := range remaining {
		g.addMemberLocked(&member{
			id:               cm.id,
			instanceID:       cm.instanceID,
			clientID:         cm.clientID,
			clientHost:       cm.clientHost,
			protocolType:     consumerProtocolType,
			protocols:        cm.classic.protocols,
			rebalanceTimeout: cm.rebalanceTimeout,
			sessionTimeout:   cm.classic.sessionTimeout,
		})
	}
	g.protocol = g.selectProtocolLocked()
	g.subscribed = g.subscribedTopicsLocked()
	assignments := make(map[string][]byte, len(remaining))
	for _, cm := range remaining {
		m := g.members[cm.id]
		m.assignment = encodeClassicAssignment(cg.target[cm.id], snap, metadataVersion(m.metadataFor(g.protocol)))
		assignments[m.id] = m.assignment
	}
	g.transitionLocked(StateStable)
	recs = append(recs, kv{key: groupKey(g.id), value: g.groupValueLocked(assignments)})
	for _, m := range g.members {
		g.heartbeatLocked(m)
	}
	g.c.cfg.Logger.Info("group: consumer group downgraded to a classic group", "group", g.id, "generation", g.generation, "members", len(g.members))
	g.prepareRebalanceLocked()
	return recs
}

// leaveConsumerLocked removes the member of a consumer group (it left,
// or a timeout removed it); when that downgrades the group it returns
// the records of the downgrade, which the caller appends instead of the
// consumer group's.
func (g *group) leaveConsumerLocked(m *consumerMember) (downgrade []kv) {
	if g.downgradableWithoutLocked(m) {
		return g.downgradeLocked(m)
	}
	g.fenceConsumerMemberLocked(m)
	return nil
}

// expireConsumerMemberLocked removes a member whose session, rebalance,
// join or sync timeout passed, and writes the change; no request waits
// for it.
func (g *group) expireConsumerMemberLocked(m *consumerMember) {
	recs := g.leaveConsumerLocked(m)
	if recs == nil {
		g.storeConsumerAsyncLocked()
		return
	}
	code, wait := g.appendLocked(recs, nil)
	if code != 0 {
		g.c.cfg.Logger.Warn("group: writing the downgrade of a consumer group failed", "group", g.id, "code", code)
		return
	}
	go func() {
		if err := <-wait; err != nil {
			g.c.cfg.Logger.Warn("group: writing the downgrade of a consumer group failed", "group", g.id, "err", err)
		}
	}()
}
