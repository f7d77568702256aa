package group

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// State is a classic group's state; doc.go draws the transitions.
type State int8

// The states of a classic group, as Kafka names them.
const (
	StateEmpty State = iota
	StatePreparingRebalance
	StateCompletingRebalance
	StateStable
	StateDead
)

// String returns Kafka's name for the state, as DescribeGroups and
// ListGroups show it.
func (s State) String() string {
	switch s {
	case StateEmpty:
		return "Empty"
	case StatePreparingRebalance:
		return "PreparingRebalance"
	case StateCompletingRebalance:
		return "CompletingRebalance"
	case StateStable:
		return "Stable"
	case StateDead:
		return "Dead"
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// consumerProtocolType is the protocol type of Kafka consumers, whose
// metadata and assignments the coordinator can read (kmsg.ConsumerMember*).
const consumerProtocolType = "consumer"

// emptyConsumerAssignment is a serialized ConsumerMemberAssignment with no
// partitions. A member of a "consumer" group that the leader assigned
// nothing gets it instead of zero bytes, which some clients cannot decode.
var emptyConsumerAssignment = func() []byte {
	var a kmsg.ConsumerMemberAssignment
	return a.AppendTo(nil)
}()

// joinResult is what a JoinGroup gets back; the handler turns it into the
// response of the request's version.
type joinResult struct {
	code         int16
	memberID     string
	generation   int32
	protocolType string
	protocol     string
	leader       string
	members      []kmsg.JoinGroupResponseMember // the leader's only
	// skipAssignment tells a static leader replaced in a Stable group
	// (v9+, KIP-814) not to run the assignor.
	skipAssignment bool
}

func joinError(code int16, memberID string) joinResult {
	return joinResult{code: code, memberID: memberID, generation: -1}
}

// syncResult is what a SyncGroup gets back.
type syncResult struct {
	code         int16
	protocolType string
	protocol     string
	assignment   []byte
}

// member is one member of a group.
type member struct {
	id               string
	instanceID       *string // static membership (KIP-345)
	clientID         string
	clientHost       string
	protocolType     string
	protocols        []kmsg.JoinGroupRequestProtocol // preference order, names unique
	rebalanceTimeout time.Duration
	sessionTimeout   time.Duration
	assignment       []byte
	seq              uint64 // join order: the leader is the earliest joiner

	// isNew: joined in the current rebalance and not yet answered; a new
	// member whose JoinGroup is abandoned is dropped at once.
	isNew bool
	// joinWait and syncWait are set while the member's JoinGroup or
	// SyncGroup waits; each holds at most one reply and is cleared when
	// the reply is put in, so every waiter is answered exactly once.
	joinWait chan joinResult
	syncWait chan syncResult

	deadline time.Time // session expiry (on Config.timers)
	timer    timer     // fires at the deadline or later
}

func (m *member) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// matches reports whether protocols are the member's, in the same order
// with the same metadata.
func (m *member) matches(protocols []kmsg.JoinGroupRequestProtocol) bool {
	ps := uniqueProtocols(protocols)
	if len(ps) != len(m.protocols) {
		return false
	}
	for i := range ps {
		if ps[i].Name != m.protocols[i].Name || !bytes.Equal(ps[i].Metadata, m.protocols[i].Metadata) {
			return false
		}
	}
	return true
}

// uniqueProtocols copies protocols, keeping the first of each name and
// copying the metadata away from the request buffer.
func uniqueProtocols(protocols []kmsg.JoinGroupRequestProtocol) []kmsg.JoinGroupRequestProtocol {
	out := make([]kmsg.JoinGroupRequestProtocol, 0, len(protocols))
	seen := make(map[string]bool, len(protocols))
	for _, p := range protocols {
		if seen[p.Name] {
			continue
		}
		seen[p.Name] = true
		out = append(out, kmsg.JoinGroupRequestProtocol{Name: strings.Clone(p.Name), Metadata: bytes.Clone(p.Metadata)})
	}
	return out
}

// tp names a topic partition.
type tp struct {
	topic     string
	partition int32
}

// group is one classic group. Everything below mu is guarded by it. Lock
// order: group.mu, then Coordinator.mu or writer.mu; never the reverse.
// Methods ending in Locked need mu held.
type group struct {
	c    *Coordinator
	id   string
	part *partition

	mu sync.Mutex

	state        State
	stateSince   time.Time // Config.Now at the last transition
	protocolType string    // of the first member; "" for a group that only commits
	protocol     string    // selected for the current generation; "" when none
	generation   int32
	leader       string
	members      map[string]*member
	nextSeq      uint64
	static       map[string]string       // instance id -> member id
	pending      map[string]*pendingJoin // member ids handed out with MEMBER_ID_REQUIRED
	votes        map[string]int          // protocol name -> members supporting it
	awaitingJoin int                     // members with joinWait set

	// The current PreparingRebalance phase: its timer, whether it is
	// still in the initial delay, and whether a member joined during it.
	rebalanceSeq   uint64
	rebalanceTimer timer
	initialDelay   bool
	delayRemaining time.Duration
	newMemberAdded bool

	// Members that got their JoinGroup answer but have not sent SyncGroup;
	// the timer drops them after the rebalance timeout.
	pendingSync map[string]struct{}
	syncTimer   timer
	storingGen  int32 // generation whose leader assignment is being written; -1 none

	subscribed map[string]struct{} // topics of a "consumer" group's members; nil: unknown

	// consumer is set for a consumer group of KIP-848's protocol
	// (consumer_group.go), nil for a classic group.
	consumer *consumerGroup

	offsets        map[string]map[int32]offsetEntry
	pendingCommits map[tp]int // commits queued for the log, not applied yet
	// txnOffsets holds, per producer id, the transactional commits
	// waiting for the producer's marker (TxnOffsetCommit, TxnMarker).
	txnOffsets map[int64]map[tp]*txnPending
}

type pendingJoin struct{ timer timer }

func newGroup(c *Coordinator, id string, p *partition) *group {
	return &group{
		c:              c,
		id:             strings.Clone(id),
		part:           p,
		state:          StateEmpty,
		stateSince:     c.cfg.Now(),
		members:        make(map[string]*member),
		static:         make(map[string]string),
		pending:        make(map[string]*pendingJoin),
		votes:          make(map[string]int),
		storingGen:     -1,
		offsets:        make(map[string]map[int32]offsetEntry),
		pendingCommits: make(map[tp]int),
		txnOffsets:     make(map[int64]map[tp]*txnPending),
	}
}

// newMemberID returns "<prefix>-<uuid>", the prefix being the instance id
// of a static member and the client id otherwise, as Kafka does.
func newMemberID(clientID string, instanceID *string) string {
	prefix := clientID
	if instanceID != nil {
		prefix = *instanceID
	}
	if len(prefix) > 1024 { // keep the id well inside the record format's string limit
		prefix = prefix[:1024]
	}
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails (Go 1.24+)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

func (g *group) transitionLocked(s State) {
	g.state = s
	g.stateSince = g.c.cfg.Now()
}

func (g *group) sortedMembersLocked() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].seq < ms[j].seq })
	return ms
}

// validateMemberLocked checks the member id, and for a static member that
// the instance id maps to it: UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID.
func (g *group) validateMemberLocked(memberID string, instanceID *string) int16 {
	if instanceID != nil {
		cur, ok := g.static[*instanceID]
		switch {
		case !ok:
			return kerr.UnknownMemberID.Code
		case cur != memberID:
			return kerr.FencedInstanceID.Code
		}
		return 0
	}
	if g.members[memberID] == nil {
		return kerr.UnknownMemberID.Code
	}
	return 0
}

// supportsProtocolsLocked reports whether a member with these protocols
// may join: into a group without members any non-empty protocol type and
// list; otherwise the group's protocol type and at least one protocol that
// every current member supports.
func (g *group) supportsProtocolsLocked(protocolType string, protocols []kmsg.JoinGroupRequestProtocol) bool {
	if len(g.members) == 0 {
		return protocolType != "" && len(protocols) > 0
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range protocols {
		if g.votes[p.Name] == len(g.members) {
			return true
		}
	}
	return false
}

func (g *group) addMemberLocked(m *member) {
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	m.seq = g.nextSeq
	g.nextSeq++
	g.members[m.id] = m
	if g.leader == "" {
		g.leader = m.id
	}
	for _, p := range m.protocols {
		g.votes[p.Name]++
	}
	if m.instanceID != nil {
		g.static[*m.instanceID] = m.id
	}
	if m.joinWait != nil {
		g.awaitingJoin++
	}
}

// setProtocolsLocked replaces the member's protocols, keeping the votes.
func (g *group) setProtocolsLocked(m *member, protocols []kmsg.JoinGroupRequestProtocol) {
	for _, p := range m.protocols {
		if g.votes[p.Name]--; g.votes[p.Name] <= 0 {
			delete(g.votes, p.Name)
		}
	}
	m.protocols = uniqueProtocols(protocols)
	for _, p := range m.protocols {
		g.votes[p.Name]++
	}
}

func (g *group) deliverJoinLocked(m *member, r joinResult) {
	if m.joinWait == nil {
		return
	}
	ch := m.joinWait
	m.joinWait = nil
	g.awaitingJoin--
	ch <- r
}

func (g *group) deliverSyncLocked(m *member, r syncResult) {
	if m.syncWait == nil {
		return
	}
	ch := m.syncWait
	m.syncWait = nil
	ch <- r
}

// failWaitersLocked answers the member's waiting JoinGroup and SyncGroup
// with code.
func (g *group) failWaitersLocked(m *member, code int16, memberID string) {
	g.deliverJoinLocked(m, joinError(code, memberID))
	g.deliverSyncLocked(m, syncResult{code: code})
}

// removeMemberLocked drops the member without touching the state; its
// waiters get code.
func (g *group) removeMemberLocked(m *member, code int16) {
	g.failWaitersLocked(m, code, "")
	delete(g.members, m.id)
	for _, p := range m.protocols {
		if g.votes[p.Name]--; g.votes[p.Name] <= 0 {
			delete(g.votes, p.Name)
		}
	}
	if m.instanceID != nil && g.static[*m.instanceID] == m.id {
		delete(g.static, *m.instanceID)
	}
	delete(g.pendingSync, m.id)
	if m.timer != nil {
		m.timer.Stop()
	}
	if g.leader == m.id {
		g.leader = ""
		if ms := g.sortedMembersLocked(); len(ms) > 0 {
			g.leader = ms[0].id
		}
	}
}

// removeMemberAndUpdateLocked drops the member (it left, or its session
// expired) and moves the group on: a rebalance from Stable or
// CompletingRebalance, a completion check in PreparingRebalance.
func (g *group) removeMemberAndUpdateLocked(m *member) {
	g.removeMemberLocked(m, kerr.UnknownMemberID.Code)
	switch g.state {
	case StateStable, StateCompletingRebalance:
		g.prepareRebalanceLocked()
	case StatePreparingRebalance:
		g.tryCompleteJoinLocked()
	}
}

// killLocked marks the group Dead (deleted, unloaded, or the coordinator
// closed): timers stop and waiting members get code.
func (g *group) killLocked(code int16) {
	for _, m := range g.members {
		g.failWaitersLocked(m, code, m.id)
		if m.timer != nil {
			m.timer.Stop()
		}
	}
	for id := range g.pending {
		g.removePendingLocked(id)
	}
	if g.rebalanceTimer != nil {
		g.rebalanceTimer.Stop()
	}
	g.stopSyncTimerLocked()
	if g.consumer != nil {
		for _, m := range g.consumer.members {
			g.removeConsumerMemberLocked(m, false)
		}
	}
	g.transitionLocked(StateDead)
}

// storeLocked queues the group's metadata record (with the given
// assignments) for the log; done runs after the append, with no lock held.
func (g *group) storeLocked(assignments map[string][]byte, done func(error)) error {
	batch, err := buildBatch(g.c.cfg.Now().UnixMilli(), []kv{{key: groupKey(g.id), value: g.groupValueLocked(assignments)}})
	if err != nil {
		return err
	}
	return g.part.w.enqueue(batch, func(_ int64, err error) { done(err) })
}

// groupValueLocked encodes the group's metadata record with the given
// assignments (the members only when the group is not Empty).
func (g *group) groupValueLocked(assignments map[string][]byte) []byte {
	v := kmsg.NewGroupMetadataValue()
	v.Version = valueGroupV3
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	v.CurrentStateTimestamp = g.stateSince.UnixMilli()
	if g.protocol != "" {
		v.Protocol = kmsg.StringPtr(g.protocol)
	}
	if g.leader != "" {
		v.Leader = kmsg.StringPtr(g.leader)
	}
	if g.state != StateEmpty {
		for _, m := range g.sortedMembersLocked() {
			v.Members = append(v.Members, kmsg.GroupMetadataValueMember{
				MemberID:               m.id,
				InstanceID:             m.instanceID,
				ClientID:               m.clientID,
				ClientHost:             m.clientHost,
				RebalanceTimeoutMillis: int32(m.rebalanceTimeout.Milliseconds()),
				SessionTimeoutMillis:   int32(m.sessionTimeout.Milliseconds()),
				Subscription:           m.metadataFor(g.protocol),
				Assignment:             assignments[m.id],
			})
		}
	}
	return v.AppendTo(nil)
}

// assignmentOrEmpty returns a, or for a "consumer" group an encoded empty
// assignment when a is empty.
func (g *group) assignmentOrEmpty(a []byte) []byte {
	if len(a) == 0 && g.protocolType == consumerProtocolType {
		return emptyConsumerAssignment
	}
	return a
}
