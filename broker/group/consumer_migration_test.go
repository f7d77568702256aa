package group

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/segment/poll"
)

// classicSim is a classic consumer (JoinGroup, SyncGroup, Heartbeat) that
// owns what its last SyncGroup assigned. A cooperative one reports what it
// owns in its subscription, gives up what an assignment lost and rejoins
// at once; an eager one revokes everything before it joins.
type classicSim struct {
	e           *env
	topics      *topicSet
	group, id   string
	gen         int32
	subscribe   []string
	owned       partitionSet
	cooperative bool
	rejoin      bool // the last assignment lost partitions (cooperative)
	// between, when set, runs between the member's JoinGroup and its
	// SyncGroup (the others heartbeat meanwhile).
	between func()
}

func (c *classicSim) protocol() string {
	if c.cooperative {
		return "cooperative-sticky"
	}
	return "range"
}

func (c *classicSim) metadata() []byte {
	md := kmsg.NewConsumerMemberMetadata()
	md.Version = 0
	md.Topics = c.subscribe
	if c.cooperative {
		md.Version = 1
		snap := c.topics.get()
		c.owned.byTopic(func(id [16]byte, parts []int32) {
			t, _ := snap.TopicByID(id)
			op := kmsg.NewConsumerMemberMetadataOwnedPartition()
			op.Topic, op.Partitions = t.Name, parts
			md.OwnedPartitions = append(md.OwnedPartitions, op)
		})
	}
	return md.AppendTo(nil)
}

func (c *classicSim) joinRequest() *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = 9
	r.Group, r.MemberID, r.ProtocolType = c.group, c.id, consumerProtocolType
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 10000, 10000
	r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: c.protocol(), Metadata: c.metadata()}}
	return r
}

// join sends JoinGroup (twice for MEMBER_ID_REQUIRED) to a consumer
// group, whose answer comes at once.
func (c *classicSim) join(t *testing.T) int16 {
	t.Helper()
	if !c.cooperative {
		c.owned = partitionSet{}
	}
	for range 2 {
		r := c.e.c.JoinGroup(c.e.ctx(c.id), c.joinRequest())
		if r.ErrorCode == kerr.MemberIDRequired.Code {
			c.id = r.MemberID
			continue
		}
		if r.ErrorCode == 0 {
			c.gen, c.id = r.Generation, r.MemberID
			if r.LeaderID != "" || len(r.Members) > 0 || r.Protocol == nil || *r.Protocol != c.protocol() {
				t.Fatalf("%s: classic join to a consumer group answered leader %q, %d members, protocol %v", c.id, r.LeaderID, len(r.Members), r.Protocol)
			}
		}
		return r.ErrorCode
	}
	t.Fatalf("%s: MEMBER_ID_REQUIRED twice", c.id)
	return 0
}

// sync sends SyncGroup and takes the assignment.
func (c *classicSim) sync(t *testing.T) int16 {
	t.Helper()
	req := syncReq(5, c.group, c.id, c.gen, nil)
	req.ProtocolType, req.Protocol = kmsg.StringPtr(consumerProtocolType), kmsg.StringPtr(c.protocol())
	r := c.e.c.SyncGroup(c.e.ctx(c.id), req)
	if r.ErrorCode != 0 {
		return r.ErrorCode
	}
	c.take(t, r.MemberAssignment)
	return 0
}

func (c *classicSim) take(t *testing.T, assignment []byte) {
	t.Helper()
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(assignment); err != nil {
		t.Fatalf("%s: assignment does not decode: %v", c.id, err)
	}
	snap := c.topics.get()
	next := partitionSet{}
	for _, at := range a.Topics {
		meta, ok := snap.Topic(at.Topic)
		if !ok {
			t.Fatalf("%s: assigned unknown topic %q", c.id, at.Topic)
		}
		for _, p := range at.Partitions {
			next[topicPartition{meta.ID, p}] = struct{}{}
		}
	}
	c.rejoin = c.cooperative && !subsetOf(c.owned, next)
	c.owned = next
}

func (c *classicSim) heartbeat() int16 { return c.e.heartbeat(c.group, c.id, c.gen, "") }

// step heartbeats and, when told to (or after losing partitions),
// rejoins and syncs; it reports whether the member's state changed.
func (c *classicSim) step(t *testing.T) bool {
	t.Helper()
	code := c.heartbeat()
	switch {
	case code == 0 && !c.rejoin:
		return false
	case code == 0, code == kerr.RebalanceInProgress.Code, code == kerr.IllegalGeneration.Code:
	default:
		t.Fatalf("%s: heartbeat: %s", c.id, errName(code))
	}
	for range 3 {
		if code := c.join(t); code != 0 {
			t.Fatalf("%s: join: %s", c.id, errName(code))
		}
		if c.between != nil {
			c.between()
		}
		switch code := c.sync(t); code {
		case 0:
			return true
		case kerr.RebalanceInProgress.Code:
		default:
			t.Fatalf("%s: sync: %s", c.id, errName(code))
		}
	}
	t.Fatalf("%s: REBALANCE_IN_PROGRESS on three syncs", c.id)
	return false
}

// mixed is a group's members of both protocols, checked together.
type mixed struct {
	t       *testing.T
	sims    []*sim
	classic []*classicSim
}

// exclusive fails when two members own one partition.
func (x *mixed) exclusive() map[topicPartition]string {
	x.t.Helper()
	by := map[topicPartition]string{}
	own := func(id string, s partitionSet) {
		for p := range s {
			if o, ok := by[p]; ok {
				x.t.Fatalf("partition %v owned by %s and %s", p, o, id)
			}
			by[p] = id
		}
	}
	for _, s := range x.sims {
		own(s.id, s.owned)
	}
	for _, c := range x.classic {
		own(c.id, c.owned)
	}
	return by
}

// settle steps every member until a round changes nothing, checking
// exclusivity after every step; it returns the owners.
func (x *mixed) settle() map[topicPartition]string {
	x.t.Helper()
	for range 20 {
		changed := false
		for _, s := range x.sims {
			before, epoch := s.owned.clone(), s.epoch
			s.mustBeat(x.t)
			x.exclusive()
			changed = changed || !before.equal(s.owned) || epoch != s.epoch
		}
		for _, c := range x.classic {
			// The others act while the member is between its join and
			// its sync, still owning what it owned when it joined.
			c.between = func() {
				for _, s := range x.sims {
					s.mustBeat(x.t)
					x.exclusive()
				}
			}
			if c.step(x.t) {
				changed = true
			}
			c.between = nil
			x.exclusive()
		}
		if !changed {
			return x.exclusive()
		}
	}
	x.t.Fatal("the group did not settle in 20 rounds")
	return nil
}

// classicGroupOf forms a Stable classic group of the members, the first
// leading, and assigns the topic's partitions round-robin with the
// consumer protocol.
func classicGroupOf(t *testing.T, e *env, topics *topicSet, topic string, members ...*classicSim) int32 {
	t.Helper()
	specs := make([]memberSpec, len(members))
	for i, c := range members {
		c := c
		specs[i] = memberSpec{version: 9, group: c.group, client: "classic", protocols: []string{c.protocol()}, meta: func(string) []byte { return c.metadata() }}
	}
	resps := e.joinAll(specs)
	gen := resps[0].Generation
	meta, _ := topics.get().Topic(topic)
	parts := make([][]int32, len(members))
	for p := range meta.Partitions {
		parts[int(p)%len(members)] = append(parts[int(p)%len(members)], p)
	}
	assign := map[string][]byte{}
	for i, r := range resps {
		members[i].id, members[i].gen = r.MemberID, gen
		a := kmsg.NewConsumerMemberAssignment()
		a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: topic, Partitions: parts[i]}}
		assign[r.MemberID] = a.AppendTo(nil)
	}
	var chans []<-chan *kmsg.SyncGroupResponse
	for _, c := range members[1:] {
		chans = append(chans, e.goSync(syncReq(5, c.group, c.id, gen, nil)))
	}
	if r := e.c.SyncGroup(context.Background(), syncReq(5, members[0].group, members[0].id, gen, assign)); r.ErrorCode != 0 {
		t.Fatalf("leader sync: %s", errName(r.ErrorCode))
	} else {
		members[0].take(t, r.MemberAssignment)
	}
	for i, ch := range chans {
		r := recv(t, ch)
		if r.ErrorCode != 0 {
			t.Fatalf("sync: %s", errName(r.ErrorCode))
		}
		members[i+1].take(t, r.MemberAssignment)
	}
	return gen
}

// logKinds lists the key types of the group's partition's records in log
// order, a tombstone as the negated type (offsets are 1, the group 2,
// consumer group records 3-8).
func logKinds(t *testing.T, l *memLog) []int16 {
	t.Helper()
	var kinds []int16
	buf, err := l.ReadCopy(0, 1<<30, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	err = segment.SplitBatches(buf, func(_ segment.Header, batch []byte) error {
		it, err := segment.NewRecordIter(batch, segment.DefaultMaxDecompressed)
		if err != nil {
			return err
		}
		for {
			rec, ok, err := it.Next()
			if err != nil || !ok {
				return err
			}
			k := int16(binary.BigEndian.Uint16(rec.Key))
			if rec.Value == nil {
				k = -k
			}
			kinds = append(kinds, k)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return kinds
}

func groupType(t *testing.T, e *env, group string) string {
	t.Helper()
	list := e.c.ListGroups(e.ctx("x"), &kmsg.ListGroupsRequest{Version: 5})
	for _, g := range list.Groups {
		if g.Group == group {
			return g.GroupType
		}
	}
	t.Fatalf("ListGroups has no %s", group)
	return ""
}

func memberTypes(t *testing.T, e *env, group string) map[string]int8 {
	t.Helper()
	d := e.c.ConsumerGroupDescribe(e.ctx("x"), &kmsg.ConsumerGroupDescribeRequest{Version: 1, Groups: []string{group}}).Groups[0]
	if d.ErrorCode != 0 {
		t.Fatalf("ConsumerGroupDescribe: %s", errName(d.ErrorCode))
	}
	out := map[string]int8{}
	for _, m := range d.Members {
		out[m.MemberID] = m.MemberType
	}
	return out
}

// TestConsumerGroupOnlineUpgrade: a Stable classic group whose member
// count stays while a member of the consumer protocol joins becomes a
// consumer group; its classic members keep their assignments, rejoin when
// told, revoke before anyone gets their partitions, and the group's
// offsets, records and load after a move are a consumer group's.
func TestConsumerGroupOnlineUpgrade(t *testing.T) {
	for _, cooperative := range []bool{true, false} {
		t.Run(fmt.Sprintf("cooperative=%v", cooperative), func(t *testing.T) {
			topics := newTopicSet()
			topics.set("t", 6)
			e := newConsumerEnv(t, topics, nil)
			a := &classicSim{e: e, topics: topics, group: "g", subscribe: []string{"t"}, owned: partitionSet{}, cooperative: cooperative}
			b := &classicSim{e: e, topics: topics, group: "g", subscribe: []string{"t"}, owned: partitionSet{}, cooperative: cooperative}
			gen := classicGroupOf(t, e, topics, "t", a, b)
			if codes := commitCodes(e.c.OffsetCommit(e.ctx("a"), commitReq(8, "g", a.id, gen, "t", 6, 100, nil))); codes[0] != 0 {
				t.Fatalf("classic commit: %s", errName(codes[0]))
			}
			before := len(logKinds(t, e.logOf("g")))

			c := newSim(e, "g", "c", "t")
			c.mustBeat(t)
			if c.epoch != gen+1 || len(c.owned) != 0 {
				t.Fatalf("848 member after the upgrade: epoch %d with %d partitions, want %d with none (the classic members hold them)", c.epoch, len(c.owned), gen+1)
			}
			kinds := logKinds(t, e.logOf("g"))[before:]
			if kinds[0] != -2 || !slices.Contains(kinds, 5) || !slices.Contains(kinds, 8) {
				t.Fatalf("upgrade records %v, want the group tombstone (-2) first, then consumer group records", kinds)
			}
			if typ := groupType(t, e, "g"); typ != "consumer" {
				t.Fatalf("ListGroups type %s, want consumer", typ)
			}
			types := memberTypes(t, e, "g")
			if types[a.id] != 0 || types[b.id] != 0 || types[c.id] != 1 {
				t.Fatalf("member types %v, want 0 for the classic members and 1 for %s", types, c.id)
			}
			if code := a.heartbeat(); code != kerr.RebalanceInProgress.Code {
				t.Fatalf("classic heartbeat after the upgrade: %s, want REBALANCE_IN_PROGRESS", errName(code))
			}
			x := &mixed{t: t, sims: []*sim{c}, classic: []*classicSim{a, b}}
			owners := x.settle()
			if len(owners) != 6 || len(c.owned) != 2 || len(a.owned) != 2 || len(b.owned) != 2 {
				t.Fatalf("after settling: %d partitions owned, a %d b %d c %d; want 6, two each", len(owners), len(a.owned), len(b.owned), len(c.owned))
			}
			got, code := e.fetchAll("g")
			if code != 0 || got[tp{"t", 5}].Offset != 105 {
				t.Fatalf("offsets after the upgrade: %v %s, want t/5 at 105", got, errName(code))
			}
			// A classic member commits with its generation, the member epoch.
			if codes := commitCodes(e.c.OffsetCommit(e.ctx("a"), commitReq(8, "g", a.id, a.gen, "t", 6, 200, nil))); codes[0] != 0 {
				t.Fatalf("classic commit in the consumer group: %s", errName(codes[0]))
			}
			if codes := commitCodes(e.c.OffsetCommit(e.ctx("a"), commitReq(8, "g", a.id, a.gen-1, "t", 6, 300, nil))); codes[0] != kerr.IllegalGeneration.Code {
				t.Fatalf("classic commit with an old generation: %s, want ILLEGAL_GENERATION", errName(codes[0]))
			}

			// A coordinator move: the group loads as a consumer group whose
			// classic members heartbeat on with their generation.
			e.restart()
			for _, s := range []*classicSim{a, b} {
				s.e = e
			}
			c.e = e
			if typ := groupType(t, e, "g"); typ != "consumer" {
				t.Fatalf("after the load: ListGroups type %s, want consumer", typ)
			}
			if types := memberTypes(t, e, "g"); types[a.id] != 0 || types[c.id] != 1 {
				t.Fatalf("after the load: member types %v", types)
			}
			if code := a.heartbeat(); code != 0 {
				t.Fatalf("classic heartbeat after the load: %s", errName(code))
			}
			x.settle()
		})
	}
}

// TestConsumerGroupOnlineDowngrade: when the last member of the consumer
// protocol leaves a group whose other members are classic, the group
// becomes a classic group that rebalances; its members rejoin as in any
// classic group, and a load finds a classic group.
func TestConsumerGroupOnlineDowngrade(t *testing.T) {
	topics := newTopicSet()
	topics.set("t", 4)
	e := newConsumerEnv(t, topics, nil)
	c := newSim(e, "g", "c", "t")
	c.mustBeat(t)
	a := &classicSim{e: e, topics: topics, group: "g", subscribe: []string{"t"}, owned: partitionSet{}, cooperative: true}
	if code := a.join(t); code != 0 {
		t.Fatalf("classic join to the consumer group: %s", errName(code))
	}
	x := &mixed{t: t, sims: []*sim{c}, classic: []*classicSim{a}}
	x.settle()
	if len(a.owned) != 2 || len(c.owned) != 2 {
		t.Fatalf("classic member %d partitions, 848 member %d; want 2 each", len(a.owned), len(c.owned))
	}
	epoch := memberEpochOf(t, e, "g", c.id)
	before := len(logKinds(t, e.logOf("g")))
	if code := c.leave(false); code != 0 {
		t.Fatalf("leave: %s", errName(code))
	}
	kinds := logKinds(t, e.logOf("g"))[before:]
	if kinds[len(kinds)-1] != 2 || !slices.Contains(kinds, -3) || !slices.Contains(kinds, -8) {
		t.Fatalf("downgrade records %v, want the consumer group's tombstones, then the group record (2)", kinds)
	}
	if typ := groupType(t, e, "g"); typ != "classic" {
		t.Fatalf("ListGroups type %s after the downgrade, want classic", typ)
	}
	d := e.describe("g")
	if d.State != StatePreparingRebalance.String() || d.ProtocolType != consumerProtocolType || len(d.Members) != 1 {
		t.Fatalf("after the downgrade: %s %q with %d members, want PreparingRebalance consumer with 1", d.State, d.ProtocolType, len(d.Members))
	}
	if gen := e.describeGeneration("g"); gen != epoch {
		t.Fatalf("classic generation %d, want the group epoch %d", gen, epoch)
	}
	if code := a.heartbeat(); code != kerr.RebalanceInProgress.Code && code != kerr.IllegalGeneration.Code {
		t.Fatalf("classic heartbeat after the downgrade: %s, want REBALANCE_IN_PROGRESS or ILLEGAL_GENERATION", errName(code))
	}
	// The member rejoins the classic group: it alone completes the join
	// phase, leads, and assigns.
	r := e.c.JoinGroup(e.ctx("a"), a.joinRequest())
	if r.ErrorCode != 0 || r.LeaderID != a.id || r.Generation != epoch+1 {
		t.Fatalf("rejoin: %s leader %q generation %d, want the leader at %d", errName(r.ErrorCode), r.LeaderID, r.Generation, epoch+1)
	}
	a.gen = r.Generation
	asg := kmsg.NewConsumerMemberAssignment()
	asg.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "t", Partitions: []int32{0, 1, 2, 3}}}
	if s := e.c.SyncGroup(e.ctx("a"), syncReq(5, "g", a.id, a.gen, map[string][]byte{a.id: asg.AppendTo(nil)})); s.ErrorCode != 0 {
		t.Fatalf("leader sync: %s", errName(s.ErrorCode))
	}
	e.restart()
	a.e = e
	if d := e.describe("g"); d.State != StateStable.String() || len(d.Members) != 1 {
		t.Fatalf("after the load: %s with %d members, want Stable with 1", d.State, len(d.Members))
	}
	if code := a.heartbeat(); code != 0 {
		t.Fatalf("heartbeat after the load: %s", errName(code))
	}
}

func memberEpochOf(t *testing.T, e *env, group, member string) int32 {
	t.Helper()
	d := e.c.ConsumerGroupDescribe(e.ctx("x"), &kmsg.ConsumerGroupDescribeRequest{Version: 1, Groups: []string{group}}).Groups[0]
	for _, m := range d.Members {
		if m.MemberID == member {
			return d.Epoch
		}
	}
	t.Fatalf("no member %s", member)
	return 0
}

// TestConsumerGroupMigrationPolicy: "disabled" keeps a classic group
// with members from upgrading (GROUP_ID_NOT_FOUND) and a consumer group
// from downgrading when its last 848 member leaves; "upgrade" allows
// only the upgrade.
func TestConsumerGroupMigrationPolicy(t *testing.T) {
	for _, policy := range []string{MigrationDisabled, MigrationUpgrade, MigrationDowngrade} {
		t.Run(policy, func(t *testing.T) {
			topics := newTopicSet()
			topics.set("t", 2)
			e := newConsumerEnv(t, topics, func(cfg *Config) { cfg.Consumer.MigrationPolicy = policy })
			a := &classicSim{e: e, topics: topics, group: "g", subscribe: []string{"t"}, owned: partitionSet{}}
			classicGroupOf(t, e, topics, "t", a)
			code := newSim(e, "g", "c", "t").beat()
			if up := policy == MigrationUpgrade; (code == 0) != up {
				t.Fatalf("848 join to a classic group with members: %s (upgrade allowed: %v)", errName(code), up)
			}

			e2 := newConsumerEnv(t, topics, func(cfg *Config) { cfg.Consumer.MigrationPolicy = policy })
			c := newSim(e2, "h", "c", "t")
			c.mustBeat(t)
			b := &classicSim{e: e2, topics: topics, group: "h", subscribe: []string{"t"}, owned: partitionSet{}}
			if code := b.join(t); code != 0 {
				t.Fatalf("classic join to a consumer group: %s", errName(code))
			}
			if code := c.leave(false); code != 0 {
				t.Fatalf("leave: %s", errName(code))
			}
			want := "consumer"
			if policy == MigrationDowngrade {
				want = "classic"
			}
			if typ := groupType(t, e2, "h"); typ != want {
				t.Fatalf("after the last 848 member left: %s, want %s", typ, want)
			}
		})
	}
}

// TestConsumerGroupClassicMemberTimeouts: a classic member of a consumer
// group that does not sync within its rebalance timeout after its join,
// or does not rejoin within it after being told to, is removed and its
// partitions go to the others.
func TestConsumerGroupClassicMemberTimeouts(t *testing.T) {
	topics := newTopicSet()
	topics.set("t", 2)
	e := newConsumerEnv(t, topics, nil)
	c := newSim(e, "g", "c", "t")
	c.mustBeat(t)
	a := &classicSim{e: e, topics: topics, group: "g", subscribe: []string{"t"}, owned: partitionSet{}}
	if code := a.join(t); code != 0 {
		t.Fatalf("join: %s", errName(code))
	}
	e.clock.Advance(9 * time.Second) // the rebalance timeout is 10 s
	if n := len(memberTypes(t, e, "g")); n != 2 {
		t.Fatalf("%d members before the sync timeout, want 2", n)
	}
	c.mustBeat(t) // the sessions (10 s) go on
	if code := a.heartbeat(); code != 0 {
		t.Fatalf("heartbeat before the sync: %s", errName(code))
	}
	e.clock.Advance(2 * time.Second)
	if _, ok := memberTypes(t, e, "g")[a.id]; ok {
		t.Fatal("classic member that never synced is still in the group")
	}

	b := &classicSim{e: e, topics: topics, group: "g", subscribe: []string{"t"}, owned: partitionSet{}}
	x := &mixed{t: t, sims: []*sim{c}, classic: []*classicSim{b}}
	if code := b.join(t); code != 0 {
		t.Fatalf("join: %s", errName(code))
	}
	x.settle()
	// Another member joins: b is told to rejoin, and never does.
	d := newSim(e, "g", "d", "t")
	d.mustBeat(t)
	if code := b.heartbeat(); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat after a join: %s, want REBALANCE_IN_PROGRESS", errName(code))
	}
	e.clock.Advance(5 * time.Second)
	if code := b.heartbeat(); code != kerr.RebalanceInProgress.Code { // keeps its session, not its place
		t.Fatalf("heartbeat: %s, want REBALANCE_IN_PROGRESS", errName(code))
	}
	c.mustBeat(t)
	d.mustBeat(t)
	e.clock.Advance(6 * time.Second)
	if code := b.heartbeat(); code != kerr.UnknownMemberID.Code {
		t.Fatalf("heartbeat after the join timeout: %s, want UNKNOWN_MEMBER_ID", errName(code))
	}
	x = &mixed{t: t, sims: []*sim{c, d}}
	if owners := x.settle(); len(owners) != 2 {
		t.Fatalf("%d partitions owned after the classic member was removed, want 2", len(owners))
	}
}

// TestConsumerGroupClassicRequestErrors: the classic APIs against a
// consumer group answer as Kafka's: a member of the consumer protocol is
// unknown to them, other generations are illegal, other protocols
// inconsistent.
func TestConsumerGroupClassicRequestErrors(t *testing.T) {
	topics := newTopicSet()
	topics.set("t", 2)
	e := newConsumerEnv(t, topics, nil)
	c := newSim(e, "g", "c", "t")
	c.mustBeat(t)
	a := &classicSim{e: e, topics: topics, group: "g", subscribe: []string{"t"}, owned: partitionSet{}, cooperative: true}
	if code := a.join(t); code != 0 {
		t.Fatalf("join: %s", errName(code))
	}
	if code := e.heartbeat("g", c.id, c.epoch, ""); code != kerr.UnknownMemberID.Code {
		t.Errorf("classic heartbeat of an 848 member: %s, want UNKNOWN_MEMBER_ID", errName(code))
	}
	if code := e.heartbeat("g", a.id, a.gen+1, ""); code != kerr.IllegalGeneration.Code {
		t.Errorf("heartbeat with another generation: %s, want ILLEGAL_GENERATION", errName(code))
	}
	req := syncReq(5, "g", a.id, a.gen, nil)
	req.ProtocolType, req.Protocol = kmsg.StringPtr(consumerProtocolType), kmsg.StringPtr("range")
	if r := e.c.SyncGroup(e.ctx("a"), req); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Errorf("sync with another protocol: %s, want INCONSISTENT_GROUP_PROTOCOL", errName(r.ErrorCode))
	}
	other := &classicSim{e: e, topics: topics, group: "g", subscribe: []string{"t"}, owned: partitionSet{}}
	if code := other.join(t); code != kerr.InconsistentGroupProtocol.Code {
		t.Errorf("join with a protocol the classic members do not support: %s, want INCONSISTENT_GROUP_PROTOCOL", errName(code))
	}
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version = 5
	leave.Group = "g"
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: c.id}, {MemberID: a.id}}
	resp := e.c.LeaveGroup(e.ctx("a"), leave)
	if resp.ErrorCode != 0 || resp.Members[0].ErrorCode != kerr.UnknownMemberID.Code || resp.Members[1].ErrorCode != 0 {
		t.Fatalf("LeaveGroup: %s, members %v; want the 848 member UNKNOWN_MEMBER_ID, the classic one gone", errName(resp.ErrorCode), resp.Members)
	}
	if types := memberTypes(t, e, "g"); len(types) != 1 {
		t.Fatalf("members after the leave: %v, want the 848 member alone", types)
	}
}

// TestClassicMemberRecordRoundTrip: a classic member's
// ConsumerGroupMemberMetadataValue carries ClassicMemberMetadata in tag
// 0, and decodes back.
func TestClassicMemberRecordRoundTrip(t *testing.T) {
	m := &consumerMember{id: "m", clientID: "c", clientHost: "/h", topics: []string{"a", "b"}, rebalanceTimeout: 3 * time.Second,
		classic: &classicMember{sessionTimeout: 45 * time.Second, protocols: []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 1, 2}}, {Name: "sticky", Metadata: nil}}}}
	v := consumerMemberValue(m)
	_, rec, err := decodeConsumerRecord(keyConsumerMemberV5, consumerKey(keyConsumerMemberV5, "g", "m"), v)
	if err != nil {
		t.Fatal(err)
	}
	got := rec.memberMeta.classic
	if got == nil || got.sessionTimeout != 45*time.Second || len(got.protocols) != 2 || got.protocols[0].Name != "range" ||
		string(got.protocols[0].Metadata) != "\x00\x01\x02" || got.protocols[1].Name != "sticky" || len(got.protocols[1].Metadata) != 0 {
		t.Fatalf("decoded classic metadata %+v", got)
	}
	m.classic = nil
	_, rec, err = decodeConsumerRecord(keyConsumerMemberV5, consumerKey(keyConsumerMemberV5, "g", "m"), consumerMemberValue(m))
	if err != nil || rec.memberMeta.classic != nil {
		t.Fatalf("consumer protocol member: %v, classic %+v", err, rec.memberMeta.classic)
	}
}

// TestConsumerGroupRegexAuthorization: a topic that a member's regex
// matches but its principal may not describe is not assigned to it; a
// member allowed to gets it, and the change of principal resolves again.
func TestConsumerGroupRegexAuthorization(t *testing.T) {
	topics := newTopicSet()
	topics.set("logs-a", 2)
	topics.set("logs-secret", 2)
	e := newConsumerEnv(t, topics, nil)
	noSecret := TopicAuthorizer{Principal: "User:alice", MayDescribe: func(topic string) bool { return topic != "logs-secret" }}
	alice := newSim(e, "g", "alice")
	alice.regex = kmsg.StringPtr("logs-.*")
	beat := func(s *sim, a TopicAuthorizer) {
		t.Helper()
		resp := e.c.ConsumerGroupHeartbeat(WithTopicAuthorizer(e.ctx(s.id), a), s.request())
		if resp.ErrorCode != 0 {
			t.Fatalf("%s: heartbeat: %s", s.id, errName(resp.ErrorCode))
		}
		s.epoch = resp.MemberEpoch
		if resp.Assignment != nil {
			s.owned = partitionSet{}
			for _, tt := range resp.Assignment.Topics {
				for _, p := range tt.Partitions {
					s.owned[topicPartition{tt.TopicID, p}] = struct{}{}
				}
			}
		}
	}
	secret, _ := topics.get().Topic("logs-secret")
	beat(alice, noSecret)
	beat(alice, noSecret)
	if len(alice.owned) != 2 {
		t.Fatalf("alice owns %d partitions, want logs-a's 2", len(alice.owned))
	}
	for p := range alice.owned {
		if p.topic == secret.ID {
			t.Fatalf("alice was assigned %v of a topic she may not describe", p)
		}
	}
	// A topic created later is filtered the same way.
	topics.set("logs-secret2", 1)
	noSecret.MayDescribe = func(topic string) bool { return topic == "logs-a" }
	beat(alice, TopicAuthorizer{Principal: "User:alice", MayDescribe: noSecret.MayDescribe})
	if len(alice.owned) != 2 {
		t.Fatalf("alice owns %d partitions after a new topic, want 2", len(alice.owned))
	}
	// The same member heartbeating with a principal that may describe
	// everything resolves again and gets the rest.
	for range 3 {
		beat(alice, TopicAuthorizer{Principal: "User:admin"})
	}
	if len(alice.owned) != 5 {
		t.Fatalf("with every topic allowed alice owns %d partitions, want 5", len(alice.owned))
	}
}

// TestConsumerGroupStaticClassicReplacementDowngrades: a classic JoinGroup
// with no member id and the instance id of the group's last KIP-848
// member (a static member restarted with the classic protocol) makes the
// group a classic one in which it replaces that member: alone, the join
// completes at once with it leading; beside a classic member, both are
// members of the classic group that rebalances.
func TestConsumerGroupStaticClassicReplacementDowngrades(t *testing.T) {
	staticJoin := func(e *env, topics *topicSet, group, inst string) *kmsg.JoinGroupRequest {
		c := &classicSim{e: e, topics: topics, group: group, subscribe: []string{"t"}, owned: partitionSet{}, cooperative: true}
		r := c.joinRequest()
		r.InstanceID = kmsg.StringPtr(inst)
		return r
	}
	t.Run("alone", func(t *testing.T) {
		topics := newTopicSet()
		topics.set("t", 4)
		e := newConsumerEnv(t, topics, nil)
		c := newSim(e, "g", "c", "t")
		c.instance = kmsg.StringPtr("i1")
		c.mustBeat(t)
		r := answered(t, e, e.goJoin(e.ctx("c2"), staticJoin(e, topics, "g", "i1")))
		if r.ErrorCode != 0 || r.LeaderID == "" || r.LeaderID != r.MemberID {
			t.Fatalf("static classic join: %s, leader %q, member %q; want it to lead", errName(r.ErrorCode), r.LeaderID, r.MemberID)
		}
		if typ := groupType(t, e, "g"); typ != "classic" {
			t.Fatalf("ListGroups type %s after the replacement, want classic", typ)
		}
		if code := c.beat(); code == 0 {
			t.Fatal("the replaced KIP-848 member's heartbeat was accepted")
		}
	})
	t.Run("beside a classic member", func(t *testing.T) {
		topics := newTopicSet()
		topics.set("t", 4)
		e := newConsumerEnv(t, topics, nil)
		c := newSim(e, "g", "c", "t")
		c.instance = kmsg.StringPtr("i1")
		c.mustBeat(t)
		a := &classicSim{e: e, topics: topics, group: "g", subscribe: []string{"t"}, owned: partitionSet{}, cooperative: true}
		if code := a.join(t); code != 0 {
			t.Fatalf("classic join to the consumer group: %s", errName(code))
		}
		x := &mixed{t: t, sims: []*sim{c}, classic: []*classicSim{a}}
		x.settle()
		static := e.goJoin(e.ctx("c2"), staticJoin(e, topics, "g", "i1"))
		poll.Until(t, 10*time.Second, "the group downgraded", func() bool { return groupType(t, e, "g") == "classic" })
		// The classic member rejoins; the join phase completes with both.
		r := answered(t, e, e.goJoin(e.ctx("a"), a.joinRequest()))
		if r.ErrorCode != 0 {
			t.Fatalf("classic member's rejoin: %s", errName(r.ErrorCode))
		}
		s := answered(t, e, static)
		if s.ErrorCode != 0 || s.Generation != r.Generation {
			t.Fatalf("static classic join: %s generation %d, want generation %d", errName(s.ErrorCode), s.Generation, r.Generation)
		}
		if d := e.describe("g"); len(d.Members) != 2 {
			t.Fatalf("classic group with %d members after the replacement, want 2", len(d.Members))
		}
	})
}

// answered waits for a JoinGroup's answer, letting the initial rebalance
// delay pass on a fake clock.
func answered(t *testing.T, e *env, ch <-chan *kmsg.JoinGroupResponse) *kmsg.JoinGroupResponse {
	t.Helper()
	var r *kmsg.JoinGroupResponse
	poll.Until(t, 30*time.Second, "the JoinGroup answered", func() bool {
		if e.fakeTime {
			e.clock.Advance(e.cfg.InitialRebalanceDelay)
		}
		select {
		case r = <-ch:
			return true
		default:
			return false
		}
	})
	return r
}
