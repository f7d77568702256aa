package group

import (
	"bytes"
	"regexp"
	"slices"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file holds the state of a consumer group of KIP-848's protocol
// (ConsumerGroupHeartbeat): the group epoch, the target assignment and its
// epoch, the members with their epochs and their current assignments, and
// which member owns each partition. doc.go describes the protocol.

// Member epochs with a meaning of their own, as Kafka's
// ConsumerGroupHeartbeat defines them.
const (
	joinEpoch        int32 = 0  // a member (re)joining
	leaveEpoch       int32 = -1 // a member leaving
	staticLeaveEpoch int32 = -2 // a static member leaving for now, keeping its assignment
)

// memberState is where a consumer member stands in its reconciliation,
// as Kafka's MemberState.
type memberState int8

const (
	// memberStable: the member has its whole target assignment (or waits
	// for a newer one).
	memberStable memberState = iota
	// memberUnrevoked: the member was asked to revoke partitions and has
	// not confirmed it yet; it stays at its epoch until it does.
	memberUnrevoked
	// memberUnreleased: the member is at the target epoch but some of its
	// target partitions are still owned by others.
	memberUnreleased
)

func (s memberState) String() string {
	switch s {
	case memberStable:
		return "stable"
	case memberUnrevoked:
		return "unrevoked_partitions"
	case memberUnreleased:
		return "unreleased_partitions"
	}
	return "unknown"
}

// topicPartition names a partition by topic id, as the 848 protocol does.
type topicPartition struct {
	topic     [16]byte
	partition int32
}

// partitionSet is a set of partitions.
type partitionSet map[topicPartition]struct{}

func (s partitionSet) has(p topicPartition) bool { _, ok := s[p]; return ok }

func (s partitionSet) clone() partitionSet {
	out := make(partitionSet, len(s))
	for p := range s {
		out[p] = struct{}{}
	}
	return out
}

func (s partitionSet) equal(o partitionSet) bool {
	if len(s) != len(o) {
		return false
	}
	for p := range s {
		if !o.has(p) {
			return false
		}
	}
	return true
}

// sorted returns the partitions ordered by topic id, then partition.
func (s partitionSet) sorted() []topicPartition {
	out := make([]topicPartition, 0, len(s))
	for p := range s {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if c := bytes.Compare(out[i].topic[:], out[j].topic[:]); c != 0 {
			return c < 0
		}
		return out[i].partition < out[j].partition
	})
	return out
}

// byTopic groups the partitions per topic id, topics and partitions in
// order, calling fn once per topic.
func (s partitionSet) byTopic(fn func(topic [16]byte, partitions []int32)) {
	ps := s.sorted()
	for i := 0; i < len(ps); {
		j := i
		parts := make([]int32, 0, 4)
		for j < len(ps) && ps[j].topic == ps[i].topic {
			parts = append(parts, ps[j].partition)
			j++
		}
		fn(ps[i].topic, parts)
		i = j
	}
}

// responseAssignment encodes the set as a heartbeat response's assignment.
func (s partitionSet) responseAssignment() *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
	a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	s.byTopic(func(topic [16]byte, parts []int32) {
		t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		t.TopicID, t.Partitions = topic, parts
		a.Topics = append(a.Topics, t)
	})
	return &a
}

// describeAssignment encodes the set as ConsumerGroupDescribe shows it.
func (s partitionSet) describeAssignment() kmsg.Assignment {
	var a kmsg.Assignment
	a.TopicPartitions = []kmsg.AssignmentTopicPartition{}
	s.byTopic(func(topic [16]byte, parts []int32) {
		t := kmsg.NewAssignmentTopicPartition()
		t.TopicID, t.Partitions = topic, parts
		a.TopicPartitions = append(a.TopicPartitions, t)
	})
	return a
}

// ownedPartitions decodes a heartbeat's owned partitions; nil stays nil
// ("unchanged since the last heartbeat").
func ownedPartitions(ts []kmsg.ConsumerGroupHeartbeatRequestTopic) partitionSet {
	if ts == nil {
		return nil
	}
	s := make(partitionSet)
	for _, t := range ts {
		for _, p := range t.Partitions {
			s[topicPartition{t.TopicID, p}] = struct{}{}
		}
	}
	return s
}

// consumerMember is one member of a consumer group.
type consumerMember struct {
	id         string
	instanceID *string // static membership
	rackID     *string
	clientID   string
	clientHost string

	// epoch is the member's epoch, previousEpoch the one before its last
	// bump (a member whose response was lost may come back with it).
	epoch, previousEpoch int32
	state                memberState

	rebalanceTimeout time.Duration
	assignor         string // the ServerAssignor it asked for; "" none

	// The subscription: topic names (sorted, unique) and a regular
	// expression (Kafka's full-name match), either or both.
	topics  []string
	regex   string
	regexRE *regexp.Regexp
	// regexTopics is what the regex resolved to at the last refresh of
	// the subscriptions: the existing topics it matches that the
	// member's principal may describe (auth).
	regexTopics map[string]struct{}
	// auth is the topic authorization of the member's last heartbeat;
	// nil for a member restored by Load that has not heartbeated since
	// (its regexTopics then stay as the log had them).
	auth *TopicAuthorizer

	// classic is set for a member that speaks the classic protocol
	// (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) in a consumer group
	// (consumer_classic.go); nil for a member of KIP-848's protocol.
	classic *classicMember

	// assigned is what the member was given and may consume; revoking
	// what it was asked to give up and still owns until it confirms.
	assigned partitionSet
	revoking partitionSet

	sessionTimer   timer  // fences the member when its heartbeats stop
	sessionSeq     uint64 // counts session restarts; a timer of an older one does nothing
	rebalanceTimer timer  // fences the member when it does not revoke in time
	rebalanceEpoch int32  // the epoch rebalanceTimer was started for
}

// subscribes reports whether the member's subscription includes topic.
func (m *consumerMember) subscribes(topic string) bool {
	if _, ok := slices.BinarySearch(m.topics, topic); ok {
		return true
	}
	_, ok := m.regexTopics[topic]
	return ok
}

// owner is who holds a partition, and at which epoch they took it.
type owner struct {
	member string
	epoch  int32
}

// consumerGroup is the 848 part of a group; group.consumer is set for a
// consumer group and nil for a classic one. It is guarded by group.mu.
type consumerGroup struct {
	// epoch is the group epoch: bumped whenever a member joins or
	// leaves, a subscription changes, or the subscribed topics' metadata
	// does. assignmentEpoch is the epoch of the target assignment.
	epoch, assignmentEpoch int32
	assignor               string // the assignor of the target assignment

	members map[string]*consumerMember
	static  map[string]string       // instance id -> member id
	target  map[string]partitionSet // member id -> target assignment
	owners  map[topicPartition]owner

	// subscribedTopics is the metadata of the topics some member
	// subscribes to, as the last target assignment saw it; topicsSeen is
	// the snapshot it was resolved from, so an unchanged snapshot and
	// unchanged subscriptions skip the resolution.
	subscribedTopics map[string]TopicMeta
	topicsSeen       *TopicSnapshot
	subsChanged      bool

	written *consumerWritten // what the log holds (consumer_store.go)
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{
		members: make(map[string]*consumerMember),
		static:  make(map[string]string),
		written: newConsumerWritten(),
		target:  make(map[string]partitionSet),
		owners:  make(map[topicPartition]owner),
	}
}

// state is the group's state as Kafka names a consumer group's.
func (cg *consumerGroup) state() string {
	switch {
	case len(cg.members) == 0:
		return "Empty"
	case cg.epoch != cg.assignmentEpoch:
		return "Assigning"
	}
	for _, m := range cg.members {
		if m.epoch != cg.assignmentEpoch || m.state != memberStable {
			return "Reconciling"
		}
	}
	return "Stable"
}

// sortedMembers returns the members ordered by id.
func (cg *consumerGroup) sortedMembers() []*consumerMember {
	ms := make([]*consumerMember, 0, len(cg.members))
	for _, m := range cg.members {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].id < ms[j].id })
	return ms
}

// release drops the member's partitions from the owners map.
func (cg *consumerGroup) release(m *consumerMember) {
	for _, s := range []partitionSet{m.assigned, m.revoking} {
		for p := range s {
			if o, ok := cg.owners[p]; ok && o.member == m.id {
				delete(cg.owners, p)
			}
		}
	}
}

// claim records the member as the owner of its assigned and revoking
// partitions at its epoch. It returns the partitions another member
// owns, which it leaves alone: reconciliation never gives a member a
// partition before its previous owner released it, so this is empty
// unless there is a bug.
func (cg *consumerGroup) claim(m *consumerMember) []topicPartition {
	var conflicts []topicPartition
	for _, s := range []partitionSet{m.assigned, m.revoking} {
		for p := range s {
			if o, ok := cg.owners[p]; ok && o.member != m.id {
				conflicts = append(conflicts, p)
				continue
			}
			cg.owners[p] = owner{member: m.id, epoch: m.epoch}
		}
	}
	return conflicts
}

// ownerEpoch is Kafka's currentPartitionEpoch: the epoch of the member
// owning the partition, -1 when it is free.
func (cg *consumerGroup) ownerEpoch(p topicPartition) (string, int32) {
	if o, ok := cg.owners[p]; ok {
		return o.member, o.epoch
	}
	return "", -1
}

// checkMemberEpoch checks a member id and epoch sent with an offset
// request (Kafka's validateMemberEpoch): UNKNOWN_MEMBER_ID,
// FENCED_MEMBER_EPOCH for an epoch newer than the member's,
// STALE_MEMBER_EPOCH for an older one; for a classic member, whose
// generation is its epoch, ILLEGAL_GENERATION for any other.
func (cg *consumerGroup) checkMemberEpoch(memberID string, epoch int32) int16 {
	m := cg.members[memberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case m.classic != nil && epoch != m.epoch:
		return kerr.IllegalGeneration.Code
	case epoch > m.epoch:
		return kerr.FencedMemberEpoch.Code
	case epoch < m.epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// validateCommit checks an OffsetCommit or TxnOffsetCommit to the group
// as Kafka's ConsumerGroup.validateOffsetCommit: a commit with a negative
// epoch only while the group has no members, a member's (not
// transactional) with OffsetCommit v9 or later (oldVersion: before v9)
// unless it is a classic member, whose generation is its epoch.
func (cg *consumerGroup) validateCommit(memberID string, epoch int32, oldVersion bool) int16 {
	if epoch < 0 && len(cg.members) == 0 {
		return 0
	}
	m := cg.members[memberID]
	if m == nil {
		return kerr.UnknownMemberID.Code
	}
	if oldVersion && m.classic == nil {
		return kerr.UnsupportedVersion.Code
	}
	return cg.checkMemberEpoch(memberID, epoch)
}
