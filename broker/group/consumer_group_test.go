package group

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicSet is a mutable set of topics that the coordinator reads as its
// Config.Topics; every change makes a new snapshot.
type topicSet struct {
	mu   sync.Mutex
	snap *TopicSnapshot
	ts   map[string]TopicMeta
}

func newTopicSet() *topicSet {
	return &topicSet{ts: map[string]TopicMeta{}, snap: NewTopicSnapshot(nil)}
}

func (s *topicSet) get() *TopicSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snap
}

// set creates the topic or changes its partition count; 0 deletes it.
func (s *topicSet) set(name string, partitions int32) [16]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	var id [16]byte
	copy(id[:], name)
	id[15] = 1
	if partitions == 0 {
		delete(s.ts, name)
	} else {
		s.ts[name] = TopicMeta{Name: name, ID: id, Partitions: partitions}
	}
	var all []TopicMeta
	for _, t := range s.ts {
		all = append(all, t)
	}
	s.snap = NewTopicSnapshot(all)
	return id
}

// newConsumerEnv is a fake-time coordinator whose topics are topics.
func newConsumerEnv(t *testing.T, topics *topicSet, mod func(*Config)) *env {
	t.Helper()
	return newFakeTimeEnv(t, func(cfg *Config) {
		cfg.Topics = topics.get
		cfg.Consumer.HeartbeatInterval = time.Second
		cfg.Consumer.SessionTimeout = 10 * time.Second
		if mod != nil {
			mod(cfg)
		}
	})
}

// sim is a client member of a consumer group: it owns what the last
// response assigned it (revoking the rest at once, as a client that
// commits nothing in its revoke callback) and reports it on every
// heartbeat.
type sim struct {
	e        *env
	group    string
	id       string
	instance *string
	epoch    int32
	owned    partitionSet
	topics   []string
	regex    *string
	assignor *string
}

func newSim(e *env, group, id string, topics ...string) *sim {
	return &sim{e: e, group: group, id: id, owned: partitionSet{}, topics: topics}
}

func (s *sim) request() *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group = s.group
	req.MemberID = s.id
	req.MemberEpoch = s.epoch
	req.InstanceID = s.instance
	req.RebalanceTimeoutMillis = 5000
	req.SubscribedTopicNames = s.topics
	req.SubscribedTopicRegex = s.regex
	req.ServerAssignor = s.assignor
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if s.epoch != 0 {
		s.owned.byTopic(func(id [16]byte, parts []int32) {
			t := kmsg.NewConsumerGroupHeartbeatRequestTopic()
			t.TopicID, t.Partitions = id, parts
			req.Topics = append(req.Topics, t)
		})
	}
	return req
}

// beat sends a full heartbeat and applies the answer; it returns the
// error code.
func (s *sim) beat() int16 {
	resp := s.e.c.ConsumerGroupHeartbeat(s.e.ctx(s.id), s.request())
	if resp.ErrorCode != 0 {
		return resp.ErrorCode
	}
	s.epoch = resp.MemberEpoch
	if resp.Assignment != nil {
		s.owned = partitionSet{}
		for _, t := range resp.Assignment.Topics {
			for _, p := range t.Partitions {
				s.owned[topicPartition{t.TopicID, p}] = struct{}{}
			}
		}
	}
	return 0
}

func (s *sim) mustBeat(t *testing.T) {
	t.Helper()
	if code := s.beat(); code != 0 {
		t.Fatalf("member %s: heartbeat: %v", s.id, kerr.ErrorForCode(code))
	}
}

// leave sends epoch -1 (-2 for a static member when static is set).
func (s *sim) leave(static bool) int16 {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Version = 1
	req.Group, req.MemberID, req.InstanceID = s.group, s.id, s.instance
	req.MemberEpoch = leaveEpoch
	if static {
		req.MemberEpoch = staticLeaveEpoch
	}
	resp := s.e.c.ConsumerGroupHeartbeat(s.e.ctx(s.id), req)
	if resp.ErrorCode == 0 {
		s.epoch, s.owned = 0, partitionSet{}
	}
	return resp.ErrorCode
}

// checkExclusive fails when two members own one partition.
func checkExclusive(t *testing.T, sims []*sim) {
	t.Helper()
	by := map[topicPartition]string{}
	for _, s := range sims {
		for p := range s.owned {
			if o, ok := by[p]; ok {
				t.Fatalf("partition %v owned by %s and %s", p, o, s.id)
			}
			by[p] = s.id
		}
	}
}

// settle heartbeats every member until a full round changes nothing,
// checking exclusivity after each heartbeat; it returns the owners.
func settle(t *testing.T, sims []*sim) map[topicPartition]string {
	t.Helper()
	for round := 0; round < 20; round++ {
		changed := false
		for _, s := range sims {
			before, epoch := s.owned.clone(), s.epoch
			s.mustBeat(t)
			checkExclusive(t, sims)
			changed = changed || !before.equal(s.owned) || epoch != s.epoch
		}
		if !changed {
			by := map[topicPartition]string{}
			for _, s := range sims {
				for p := range s.owned {
					by[p] = s.id
				}
			}
			return by
		}
	}
	t.Fatalf("the group did not settle in 20 rounds")
	return nil
}

func TestConsumerGroupJoinAssignsEverything(t *testing.T) {
	topics := newTopicSet()
	topics.set("t", 6)
	e := newConsumerEnv(t, topics, nil)
	a := newSim(e, "g", "a", "t")
	a.mustBeat(t)
	if a.epoch != 1 || len(a.owned) != 6 {
		t.Fatalf("first member: epoch %d, %d partitions; want 1, 6", a.epoch, len(a.owned))
	}
	b := newSim(e, "g", "b", "t")
	sims := []*sim{a, b}
	b.mustBeat(t)
	if len(b.owned) != 0 || b.epoch != 2 {
		// b's partitions are a's until a revokes them.
		t.Fatalf("second member before a revokes: epoch %d, %d partitions; want 2, 0", b.epoch, len(b.owned))
	}
	checkExclusive(t, sims)
	owners := settle(t, sims)
	if len(owners) != 6 || len(a.owned) != 3 || len(b.owned) != 3 {
		t.Fatalf("settled: %d partitions owned, a %d, b %d; want 6, 3, 3", len(owners), len(a.owned), len(b.owned))
	}
	d := e.c.ConsumerGroupDescribe(e.ctx("x"), &kmsg.ConsumerGroupDescribeRequest{Groups: []string{"g"}, Version: 1})
	if g := d.Groups[0]; g.ErrorCode != 0 || g.State != "Stable" || g.Epoch != 2 || g.AssignmentEpoch != 2 || len(g.Members) != 2 || g.AssignorName != AssignorUniform {
		t.Fatalf("describe: %+v", g)
	}
}

// TestConsumerGroupReconciliationRandom runs members that join, leave,
// time out, change subscriptions, and topics that grow, in random order:
// no partition is ever owned by two members, and once every member has
// heartbeated enough every partition of a subscribed topic is owned
// exactly once, counts differing by at most one.
func TestConsumerGroupReconciliationRandom(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runRandomReconciliation(t, seed) })
	}
}

func runRandomReconciliation(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed))
	topics := newTopicSet()
	topics.set("x", 4)
	topics.set("y", 3)
	e := newConsumerEnv(t, topics, nil)
	var sims []*sim
	next := 0
	for step := 0; step < 300; step++ {
		switch op := rng.IntN(10); {
		case op == 0 && len(sims) < 6:
			sims = append(sims, newSim(e, "g", fmt.Sprintf("m%d", next), "x", "y"))
			next++
		case op == 1 && len(sims) > 1:
			i := rng.IntN(len(sims))
			if code := sims[i].leave(false); code != 0 && code != kerr.UnknownMemberID.Code {
				t.Fatalf("leave: %v", kerr.ErrorForCode(code))
			}
			sims = append(sims[:i], sims[i+1:]...)
		case op == 2:
			topics.set("x", 4+int32(rng.IntN(4)))
		default:
			if len(sims) == 0 {
				continue
			}
			s := sims[rng.IntN(len(sims))]
			if code := s.beat(); code != 0 {
				t.Fatalf("step %d member %s: %v", step, s.id, kerr.ErrorForCode(code))
			}
		}
		checkExclusive(t, sims)
	}
	if len(sims) == 0 {
		return
	}
	owners := settle(t, sims)
	snap := topics.get()
	want := 0
	for _, t := range snap.byName {
		want += int(t.Partitions)
	}
	if len(owners) != want {
		t.Fatalf("settled: %d partitions owned, want %d", len(owners), want)
	}
	lo, hi := want, 0
	for _, s := range sims {
		lo, hi = min(lo, len(s.owned)), max(hi, len(s.owned))
	}
	if hi-lo > 1 {
		t.Fatalf("settled unevenly: %d to %d partitions a member", lo, hi)
	}
}

func TestConsumerGroupHeartbeatErrors(t *testing.T) {
	topics := newTopicSet()
	topics.set("t", 2)
	e := newConsumerEnv(t, topics, func(cfg *Config) { cfg.Consumer.MaxSize = 2 })
	a := newSim(e, "g", "a", "t")
	a.mustBeat(t)
	str := func(s string) *string { return &s }
	for i, tc := range []struct {
		mod  func(r *kmsg.ConsumerGroupHeartbeatRequest)
		want int16
	}{
		{func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "" }, kerr.InvalidRequest.Code},
		{func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group = "" }, kerr.InvalidRequest.Code},
		{func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RackID = str("") }, kerr.InvalidRequest.Code},
		{func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = str("") }, kerr.InvalidRequest.Code},
		{func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = 0; r.RebalanceTimeoutMillis = -1 }, kerr.InvalidRequest.Code},
		{func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = 0; r.Topics = nil }, kerr.InvalidRequest.Code},
		{func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.MemberEpoch = 0
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{Partitions: []int32{0}}}
		}, kerr.InvalidRequest.Code},
		{func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = 0; r.SubscribedTopicNames = nil }, kerr.InvalidRequest.Code},
		{func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -2 }, kerr.InvalidRequest.Code},
		{func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -3 }, kerr.InvalidRequest.Code},
		{func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = str("sticky") }, kerr.UnsupportedAssignor.Code},
		{func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicRegex = str("(") }, kerr.InvalidRegularExpression.Code},
		{func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "nobody" }, kerr.UnknownMemberID.Code},
		{func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch++ }, kerr.FencedMemberEpoch.Code},
		{func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = 7; r.Group = "nogroup" }, kerr.GroupIDNotFound.Code},
		{func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -1; r.MemberID = "nobody" }, kerr.UnknownMemberID.Code},
	} {
		req := a.request()
		tc.mod(req)
		if got := e.c.ConsumerGroupHeartbeat(e.ctx("a"), req); got.ErrorCode != tc.want {
			t.Errorf("#%d: got %v, want %v", i, kerr.ErrorForCode(got.ErrorCode), kerr.ErrorForCode(tc.want))
		} else if got.HeartbeatIntervalMillis != 1000 && tc.want != kerr.InvalidRequest.Code && tc.want != kerr.UnsupportedAssignor.Code && tc.want != kerr.InvalidRegularExpression.Code && tc.want != kerr.GroupIDNotFound.Code {
			t.Errorf("#%d: heartbeat interval %d, want 1000", i, got.HeartbeatIntervalMillis)
		}
	}
	newSim(e, "g", "b", "t").mustBeat(t)
	if code := newSim(e, "g", "c", "t").beat(); code != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("third member of a group of at most 2: %v, want GROUP_MAX_SIZE_REACHED", kerr.ErrorForCode(code))
	}
}

// TestConsumerGroupPreviousEpoch: a member whose response was lost comes
// back with its previous epoch and a subset of its assignment, and is
// taken; with partitions it was not given it is fenced.
func TestConsumerGroupPreviousEpoch(t *testing.T) {
	topics := newTopicSet()
	id := topics.set("t", 2)
	e := newConsumerEnv(t, topics, nil)
	a := newSim(e, "g", "a", "t")
	a.mustBeat(t)
	b := newSim(e, "g", "b", "t")
	b.mustBeat(t)
	settle(t, []*sim{a, b})
	prev := b.epoch
	topics.set("t", 4) // the group epoch goes up
	b.mustBeat(t)
	if b.epoch == prev {
		t.Fatalf("member epoch stayed %d after the topic grew", prev)
	}
	lost := *b
	lost.epoch = prev
	lost.owned = partitionSet{}
	if code := lost.beat(); code != 0 {
		t.Fatalf("previous epoch with a subset: %v", kerr.ErrorForCode(code))
	}
	lost = *b
	lost.epoch = prev
	lost.owned = partitionSet{{id, 0}: {}, {id, 1}: {}, {id, 2}: {}, {id, 3}: {}}
	if code := lost.beat(); code != kerr.FencedMemberEpoch.Code {
		t.Fatalf("previous epoch with partitions it does not have: %v, want FENCED_MEMBER_EPOCH", kerr.ErrorForCode(code))
	}
}

func TestConsumerGroupSessionTimeout(t *testing.T) {
	topics := newTopicSet()
	topics.set("t", 4)
	e := newConsumerEnv(t, topics, nil)
	a, b := newSim(e, "g", "a", "t"), newSim(e, "g", "b", "t")
	sims := []*sim{a, b}
	a.mustBeat(t)
	b.mustBeat(t)
	settle(t, sims)
	e.clock.Advance(9 * time.Second)
	a.mustBeat(t)
	e.clock.Advance(9 * time.Second) // b is silent for 18 s
	if code := b.beat(); code != kerr.UnknownMemberID.Code {
		t.Fatalf("member after its session timeout: %v, want UNKNOWN_MEMBER_ID", kerr.ErrorForCode(code))
	}
	b.owned = partitionSet{}
	a.mustBeat(t)
	if len(a.owned) != 4 {
		t.Fatalf("after b's session expired a owns %d partitions, want 4", len(a.owned))
	}
}

// TestConsumerGroupRebalanceTimeout: a member that does not revoke
// within its rebalance timeout is removed, and the partitions go on.
func TestConsumerGroupRebalanceTimeout(t *testing.T) {
	topics := newTopicSet()
	topics.set("t", 2)
	e := newConsumerEnv(t, topics, nil)
	a := newSim(e, "g", "a", "t")
	a.mustBeat(t)
	b := newSim(e, "g", "b", "t")
	b.mustBeat(t)
	// a learns it must revoke one but never confirms: its heartbeats
	// keep reporting both partitions.
	stubborn := a.owned.clone()
	a.mustBeat(t)
	a.owned = stubborn
	for range 3 {
		e.clock.Advance(2 * time.Second)
		b.mustBeat(t)
		if code := a.beat(); code != 0 {
			break
		}
		a.owned = stubborn
	}
	e.clock.Advance(5 * time.Second)
	if code := a.beat(); code != kerr.UnknownMemberID.Code {
		t.Fatalf("member past its rebalance timeout: %v, want UNKNOWN_MEMBER_ID", kerr.ErrorForCode(code))
	}
	b.mustBeat(t)
	if len(b.owned) != 2 {
		t.Fatalf("b owns %d partitions, want 2", len(b.owned))
	}
}

// TestConsumerGroupStaticMember: a static member's temporary leave (-2)
// keeps its partitions from the others; it comes back under a new member
// id with its assignment; a leave that lasts past the session timeout
// frees them.
func TestConsumerGroupStaticMember(t *testing.T) {
	topics := newTopicSet()
	topics.set("t", 4)
	e := newConsumerEnv(t, topics, nil)
	inst := "i1"
	a := newSim(e, "g", "a", "t")
	a.instance = &inst
	b := newSim(e, "g", "b", "t")
	a.mustBeat(t)
	b.mustBeat(t)
	settle(t, []*sim{a, b})
	held := a.owned.clone()
	if code := a.leave(true); code != 0 {
		t.Fatalf("static leave: %v", kerr.ErrorForCode(code))
	}
	b.mustBeat(t)
	b.mustBeat(t)
	if len(b.owned) != 2 {
		t.Fatalf("while the static member is away b owns %d partitions, want 2", len(b.owned))
	}
	dup := newSim(e, "g", "a-again-too-early", "t")
	dup.instance = &inst
	a2 := newSim(e, "g", "a2", "t")
	a2.instance = &inst
	a2.mustBeat(t)
	if !a2.owned.equal(held) {
		t.Fatalf("static member back: owns %v, want its old %v", a2.owned.sorted(), held.sorted())
	}
	if code := dup.beat(); code != kerr.UnreleasedInstanceID.Code {
		t.Fatalf("second member with the instance id: %v, want UNRELEASED_INSTANCE_ID", kerr.ErrorForCode(code))
	}
	if code := a.beat(); code != kerr.UnreleasedInstanceID.Code {
		t.Fatalf("the old member id joining again: %v, want UNRELEASED_INSTANCE_ID", kerr.ErrorForCode(code))
	}
	a.epoch = 3
	if code := a.beat(); code != kerr.FencedInstanceID.Code {
		t.Fatalf("the replaced member id: %v, want FENCED_INSTANCE_ID", kerr.ErrorForCode(code))
	}

	if code := a2.leave(true); code != 0 {
		t.Fatalf("static leave: %v", kerr.ErrorForCode(code))
	}
	e.clock.Advance(5 * time.Second)
	b.mustBeat(t)
	e.clock.Advance(6 * time.Second) // a2's session is over
	b.mustBeat(t)
	b.mustBeat(t)
	if len(b.owned) != 4 {
		t.Fatalf("after the static member's session b owns %d partitions, want 4", len(b.owned))
	}
}

// TestConsumerGroupRegex: a regex matches whole topic names, and topics
// created later that match are assigned.
func TestConsumerGroupRegex(t *testing.T) {
	topics := newTopicSet()
	topics.set("orders", 2)
	topics.set("orders-eu", 1)
	topics.set("xorders", 1)
	e := newConsumerEnv(t, topics, nil)
	re := "orders.*"
	a := newSim(e, "g", "a")
	a.regex = &re
	a.mustBeat(t)
	if len(a.owned) != 3 {
		t.Fatalf("regex %q: %d partitions, want 3 (orders, orders-eu; not xorders)", re, len(a.owned))
	}
	id := topics.set("orders-us", 2)
	a.mustBeat(t)
	if len(a.owned) != 5 || !a.owned.has(topicPartition{id, 1}) {
		t.Fatalf("after orders-us was created: %d partitions, want 5", len(a.owned))
	}
	topics.set("orders", 0)
	a.mustBeat(t)
	if len(a.owned) != 3 {
		t.Fatalf("after orders was deleted: %d partitions, want 3", len(a.owned))
	}
}

func TestAssignors(t *testing.T) {
	idOf := func(name string) [16]byte { var id [16]byte; copy(id[:], name); return id }
	in := assignInput{topics: map[string]TopicMeta{
		"a": {Name: "a", ID: idOf("a"), Partitions: 5},
		"b": {Name: "b", ID: idOf("b"), Partitions: 2},
	}}
	for _, id := range []string{"m1", "m2", "m3"} {
		in.members = append(in.members, &consumerMember{id: id, topics: []string{"a", "b"}})
	}
	r := assignRange(in)
	want := map[string][]topicPartition{
		"m1": {{idOf("a"), 0}, {idOf("a"), 1}, {idOf("b"), 0}},
		"m2": {{idOf("a"), 2}, {idOf("a"), 3}, {idOf("b"), 1}},
		"m3": {{idOf("a"), 4}},
	}
	for m, ps := range want {
		got := r[m].sorted()
		if fmt.Sprint(got) != fmt.Sprint(ps) {
			t.Errorf("range: %s got %v, want %v", m, got, ps)
		}
	}

	u := assignUniform(in)
	for _, m := range in.members {
		if n := len(u[m.id]); n < 2 || n > 3 {
			t.Errorf("uniform: %s has %d partitions, want 2 or 3", m.id, n)
		}
	}
	// A fourth member takes partitions from the others; nobody else
	// loses or swaps one.
	in.prev = u
	in.members = append(in.members, &consumerMember{id: "m4", topics: []string{"a", "b"}})
	u2 := assignUniform(in)
	moved := 0
	for _, m := range in.members[:3] {
		for p := range u2[m.id] {
			if !u[m.id].has(p) {
				t.Errorf("uniform: %s gained %v when m4 joined", m.id, p)
			}
		}
		moved += len(u[m.id]) - len(u2[m.id])
	}
	if moved != len(u2["m4"]) || len(u2["m4"]) != 1 && len(u2["m4"]) != 2 {
		t.Errorf("uniform: m4 got %d partitions, %d moved", len(u2["m4"]), moved)
	}
	// Members subscribing to different topics get only theirs.
	in = assignInput{topics: in.topics, members: []*consumerMember{
		{id: "m1", topics: []string{"a"}},
		{id: "m2", topics: []string{"a", "b"}},
	}}
	u = assignUniform(in)
	for p := range u["m1"] {
		if p.topic != idOf("a") {
			t.Errorf("uniform: m1 subscribes to a only, got %v", p)
		}
	}
	if len(u["m1"])+len(u["m2"]) != 7 || len(u["m1"]) < 3 {
		t.Errorf("uniform with different subscriptions: m1 %d, m2 %d", len(u["m1"]), len(u["m2"]))
	}
}

func TestCompileSubscriptionRegex(t *testing.T) {
	for i, tc := range []struct {
		re, topic string
		want      bool
	}{
		{"foo", "foo", true},
		{"foo", "foobar", false},
		{"foo", "xfoo", false},
		{"foo.*", "foobar", true},
		{".*bar", "foobar", true},
		{"a|b", "a", true},
		{"a|b", "ab", false},
	} {
		re, err := compileSubscriptionRegex(tc.re)
		if err != nil {
			t.Fatalf("#%d: %v", i, err)
		}
		if got := re.MatchString(tc.topic); got != tc.want {
			t.Errorf("#%d: %q matches %q: got %v, want %v", i, tc.re, tc.topic, got, tc.want)
		}
	}
	if _, err := compileSubscriptionRegex("(?<name>x"); err == nil {
		t.Error("a bad regex compiled")
	}
}

// TestConsumerGroupOffsets: OffsetCommit v9 and OffsetFetch v9 of a
// consumer group check the member epoch as Kafka does.
func TestConsumerGroupOffsets(t *testing.T) {
	topics := newTopicSet()
	topics.set("t", 2)
	e := newConsumerEnv(t, topics, nil)
	a := newSim(e, "g", "a", "t")
	a.mustBeat(t)
	for i, tc := range []struct {
		version int16
		member  string
		epoch   int32
		want    int16
	}{
		{9, "a", a.epoch, 0},
		{9, "a", a.epoch - 1, kerr.StaleMemberEpoch.Code},
		{9, "a", a.epoch + 1, kerr.FencedMemberEpoch.Code},
		{9, "b", a.epoch, kerr.UnknownMemberID.Code},
		{9, "", -1, kerr.UnknownMemberID.Code}, // the group has members
		{8, "a", a.epoch, kerr.UnsupportedVersion.Code},
	} {
		codes := commitCodes(e.c.OffsetCommit(e.ctx("a"), commitReq(tc.version, "g", tc.member, tc.epoch, "t", 2, 10, nil)))
		if codes[0] != tc.want || codes[1] != tc.want {
			t.Errorf("#%d: commit got %v, want %v", i, kerr.ErrorForCode(codes[0]), kerr.ErrorForCode(tc.want))
		}
	}
	fetch := func(member *string, epoch int32) int16 {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version = 9
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group, rg.MemberID, rg.MemberEpoch = "g", member, epoch
		req.Groups = append(req.Groups, rg)
		resp := e.c.OffsetFetch(e.ctx("a"), req)
		if g := resp.Groups[0]; g.ErrorCode == 0 && (len(g.Topics) != 1 || g.Topics[0].Partitions[1].Offset != 11) {
			t.Fatalf("fetch: %+v, want t/1 at 11", g.Topics)
		}
		return resp.Groups[0].ErrorCode
	}
	id := "a"
	if code := fetch(&id, a.epoch); code != 0 {
		t.Fatalf("fetch as the member: %v", kerr.ErrorForCode(code))
	}
	if code := fetch(&id, a.epoch-1); code != kerr.StaleMemberEpoch.Code {
		t.Fatalf("fetch with an old epoch: %v, want STALE_MEMBER_EPOCH", kerr.ErrorForCode(code))
	}
	if code := fetch(nil, -1); code != 0 {
		t.Fatalf("fetch as an admin: %v", kerr.ErrorForCode(code))
	}
}

// TestConsumerGroupConversion: an Empty classic group with offsets
// becomes a consumer group and back, keeping its offsets; neither
// protocol joins a group of the other that has members.
func TestConsumerGroupConversion(t *testing.T) {
	topics := newTopicSet()
	topics.set("t", 2)
	e := newConsumerEnv(t, topics, nil)
	if codes := commitCodes(e.c.OffsetCommit(e.ctx("admin"), commitReq(9, "g", "", -1, "t", 2, 5, nil))); codes[0] != 0 {
		t.Fatalf("simple commit: %v", kerr.ErrorForCode(codes[0]))
	}
	a := newSim(e, "g", "a", "t")
	a.mustBeat(t)
	join := memberSpec{version: 9, group: "g", client: "c", protocols: []string{"range"}}
	other := join
	other.ptype = "connect"
	if r := e.c.JoinGroup(e.ctx("c"), other.request("")); r.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("join of another protocol type to a consumer group with members: %v, want INCONSISTENT_GROUP_PROTOCOL", kerr.ErrorForCode(r.ErrorCode))
	}
	list := e.c.ListGroups(e.ctx("x"), &kmsg.ListGroupsRequest{Version: 5, TypesFilter: []string{"consumer"}})
	if len(list.Groups) != 1 || list.Groups[0].GroupType != "consumer" {
		t.Fatalf("ListGroups consumer: %+v", list.Groups)
	}
	if code := a.leave(false); code != 0 {
		t.Fatalf("leave: %v", kerr.ErrorForCode(code))
	}
	if r := e.c.JoinGroup(e.ctx("c"), join.request("")); r.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("classic join to an empty consumer group: %v, want MEMBER_ID_REQUIRED (a classic group again)", kerr.ErrorForCode(r.ErrorCode))
	}
	got, code := e.fetchAll("g")
	if code != 0 || got[tp{"t", 1}].Offset != 6 {
		t.Fatalf("offsets after the conversions: %v %v, want t/1 at 6", got, kerr.ErrorForCode(code))
	}
	d := e.c.ConsumerGroupDescribe(e.ctx("x"), &kmsg.ConsumerGroupDescribeRequest{Groups: []string{"g", "nope"}})
	for _, g := range d.Groups {
		if g.ErrorCode != kerr.GroupIDNotFound.Code {
			t.Errorf("describe %s as a consumer group: %v, want GROUP_ID_NOT_FOUND", g.Group, kerr.ErrorForCode(g.ErrorCode))
		}
	}
}

func TestConsumerGroupProtocolDisabled(t *testing.T) {
	e := newConsumerEnv(t, newTopicSet(), func(cfg *Config) { cfg.Consumer.Enabled = false })
	if code := newSim(e, "g", "a", "t").beat(); code != kerr.UnsupportedVersion.Code {
		t.Fatalf("heartbeat with the consumer protocol disabled: %v, want UNSUPPORTED_VERSION", kerr.ErrorForCode(code))
	}
}

// TestConsumerGroupLoadAfterMove: a coordinator that loads the partition
// (after a move or a restart) has the group with its epochs, members,
// targets and current assignments: the members heartbeat on without
// rejoining, a revocation in flight completes, and no partition is
// handed out twice.
func TestConsumerGroupLoadAfterMove(t *testing.T) {
	topics := newTopicSet()
	topics.set("t", 4)
	e := newConsumerEnv(t, topics, nil)
	inst := "static-1"
	a, b := newSim(e, "g", "a", "t"), newSim(e, "g", "b", "t")
	b.instance = &inst
	sims := []*sim{a, b}
	a.mustBeat(t)
	b.mustBeat(t) // a must revoke two partitions, b waits for them
	before := e.c.ConsumerGroupDescribe(e.ctx("x"), &kmsg.ConsumerGroupDescribeRequest{Groups: []string{"g"}, Version: 1}).Groups[0]

	e.restart()
	after := e.c.ConsumerGroupDescribe(e.ctx("x"), &kmsg.ConsumerGroupDescribeRequest{Groups: []string{"g"}, Version: 1}).Groups[0]
	for _, g := range []*kmsg.ConsumerGroupDescribeResponseGroup{&before, &after} {
		for i := range g.Members {
			if id := g.Members[i].InstanceID; id != nil {
				g.Members[i].ClientID += "/" + *id // compared by value below
				g.Members[i].InstanceID = nil
			}
		}
	}
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("after the load the group is\n%+v\nwant\n%+v", after, before)
	}
	for _, s := range sims {
		s.e = e
	}
	owners := settle(t, sims)
	if len(owners) != 4 || len(a.owned) != 2 || len(b.owned) != 2 {
		t.Fatalf("after the load: %d partitions owned, a %d, b %d; want 4, 2, 2", len(owners), len(a.owned), len(b.owned))
	}
	if code := a.leave(false); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	e.restart()
	b.e = e
	b.mustBeat(t)
	b.mustBeat(t)
	if len(b.owned) != 4 {
		t.Fatalf("after a left and another load b owns %d, want 4", len(b.owned))
	}
	if code := b.leave(false); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	del := e.c.DeleteGroups(e.ctx("x"), &kmsg.DeleteGroupsRequest{Groups: []string{"g"}})
	if del.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(del.Groups[0].ErrorCode))
	}
	e.restart()
	d := e.c.ConsumerGroupDescribe(e.ctx("x"), &kmsg.ConsumerGroupDescribeRequest{Groups: []string{"g"}})
	if d.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("deleted group after a load: %v, want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(d.Groups[0].ErrorCode))
	}
}

// TestConsumerGroupOffsetExpiry: offsets of topics no member subscribes
// to expire from their commit; once the group is Empty for
// offsets.retention.minutes its offsets expire and the group is deleted,
// also from the log.
func TestConsumerGroupOffsetExpiry(t *testing.T) {
	topics := newTopicSet()
	topics.set("t", 1)
	topics.set("old", 1)
	e := newConsumerEnv(t, topics, func(cfg *Config) {
		cfg.OffsetsRetention = time.Hour
		cfg.Consumer.SessionTimeout = 3 * time.Hour // the member outlives the retention
	})
	a := newSim(e, "g", "a", "t")
	a.mustBeat(t)
	for _, topic := range []string{"t", "old"} {
		if codes := commitCodes(e.c.OffsetCommit(e.ctx("a"), commitReq(9, "g", "a", a.epoch, topic, 1, 5, nil))); codes[0] != 0 {
			t.Fatalf("commit %s: %v", topic, kerr.ErrorForCode(codes[0]))
		}
	}
	e.clock.Advance(61 * time.Minute)
	a.mustBeat(t)
	e.c.expireOffsets()
	waitFor(t, "the offset of the unsubscribed topic to expire", func() bool {
		got, _ := e.fetchAll("g")
		_, old := got[tp{"old", 0}]
		_, kept := got[tp{"t", 0}]
		return !old && kept
	})
	if code := a.leave(false); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	e.clock.Advance(61 * time.Minute)
	e.c.expireOffsets()
	waitFor(t, "the empty group to be deleted", func() bool {
		d := e.c.ConsumerGroupDescribe(e.ctx("x"), &kmsg.ConsumerGroupDescribeRequest{Groups: []string{"g"}})
		return d.Groups[0].ErrorCode == kerr.GroupIDNotFound.Code
	})
	e.restart()
	if d := e.c.ConsumerGroupDescribe(e.ctx("x"), &kmsg.ConsumerGroupDescribeRequest{Groups: []string{"g"}}); d.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("expired group after a load: %v, want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(d.Groups[0].ErrorCode))
	}
}

// TestConsumerGroupOffsetDelete: OffsetDelete of a consumer group with
// members deletes offsets of topics nobody subscribes to and refuses the
// subscribed ones (GROUP_SUBSCRIBED_TO_TOPIC); DeleteGroups refuses the
// group while it has members.
func TestConsumerGroupOffsetDelete(t *testing.T) {
	topics := newTopicSet()
	topics.set("t", 1)
	e := newConsumerEnv(t, topics, nil)
	a := newSim(e, "g", "a", "t")
	a.mustBeat(t)
	for _, topic := range []string{"t", "other"} {
		e.c.OffsetCommit(e.ctx("a"), commitReq(9, "g", "a", a.epoch, topic, 1, 5, nil))
	}
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = "g"
	for _, topic := range []string{"t", "other"} {
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = topic
		rt.Partitions = []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}
		req.Topics = append(req.Topics, rt)
	}
	resp := e.c.OffsetDelete(e.ctx("x"), req)
	if resp.ErrorCode != 0 || resp.Topics[0].Partitions[0].ErrorCode != kerr.GroupSubscribedToTopic.Code || resp.Topics[1].Partitions[0].ErrorCode != 0 {
		t.Fatalf("OffsetDelete: %+v", resp)
	}
	if got, _ := e.fetchAll("g"); len(got) != 1 {
		t.Fatalf("after OffsetDelete: %v, want t/0 only", got)
	}
	if d := e.c.DeleteGroups(e.ctx("x"), &kmsg.DeleteGroupsRequest{Groups: []string{"g"}}); d.Groups[0].ErrorCode != kerr.NonEmptyGroup.Code {
		t.Fatalf("DeleteGroups of a group with members: %v, want NON_EMPTY_GROUP", kerr.ErrorForCode(d.Groups[0].ErrorCode))
	}
}
