package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/segment/poll"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// migrationSettings are consumerGroupSettings with classic groups that
// form quickly.
var migrationSettings = append([]string{"group.initial.rebalance.delay.ms=100"}, consumerGroupSettings...)

// partitionOwners records which member holds each partition, as the
// members' assignment callbacks report it, and fails the test when a
// partition is assigned to a member while another still holds it.
type partitionOwners struct {
	t  *testing.T
	mu sync.Mutex
	by map[int32]string
}

func (o *partitionOwners) assigned(member string, parts []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range parts {
		if cur, ok := o.by[p]; ok && cur != member {
			o.t.Errorf("partition %d assigned to %s while %s holds it", p, member, cur)
		}
		o.by[p] = member
	}
}

func (o *partitionOwners) released(member string, parts []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range parts {
		if o.by[p] == member {
			delete(o.by, p)
		}
	}
}

// migrationMember is a franz-go member of a group, on the classic
// protocol (the cooperative-sticky balancer) or on KIP-848's, that reads
// and commits (marks autocommitted, and committed on revoke) and reports
// its assignments to owners.
type migrationMember struct {
	name    string
	classic bool
	cl      *kgo.Client
	mu      sync.Mutex
	seen    map[string]bool
	done    chan struct{}
	closed  sync.Once
}

func startMigrationMember(t *testing.T, addr, group, topic, name string, classic bool, owners *partitionOwners) *migrationMember {
	t.Helper()
	m := &migrationMember{name: name, classic: classic, seen: map[string]bool{}, done: make(chan struct{})}
	opts := []kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ClientID(name),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(200 * time.Millisecond),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.RetryTimeout(60 * time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) { owners.assigned(name, a[topic]) }),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, r map[string][]int32) {
			if err := cl.CommitMarkedOffsets(ctx); err != nil {
				t.Logf("%s: commit on revoke: %v", name, err)
			}
			owners.released(name, r[topic])
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) {
			t.Logf("%s: lost %v", name, l[topic])
			owners.released(name, l[topic])
		}),
	}
	if classic {
		opts = append(opts,
			kgo.Balancers(kgo.CooperativeStickyBalancer()),
			kgo.SessionTimeout(10*time.Second),
			kgo.HeartbeatInterval(250*time.Millisecond),
			kgo.RebalanceTimeout(20*time.Second))
	} else {
		opts = append(opts, kgo.ServerSideBalancer(), kgo.RebalanceTimeout(20*time.Second))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	go func() {
		defer close(m.done)
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				cl.MarkCommitRecords(r)
				m.mu.Lock()
				m.seen[string(r.Value)] = true
				m.mu.Unlock()
			})
		}
	}()
	t.Cleanup(m.close)
	return m
}

// close leaves the group (revoking, and so committing, first).
func (m *migrationMember) close() {
	m.closed.Do(func() {
		m.cl.Close()
		<-m.done
	})
}

func (m *migrationMember) read(v string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen[v]
}

// readAllBy reports whether the members together read every value of the
// round (prefix-partition-i, n a partition).
func readAllBy(ms []*migrationMember, prefix string, partitions, n int) bool {
	for p := range partitions {
		for i := range n {
			v := fmt.Sprintf("%s-%d-%d", prefix, p, i)
			found := false
			for _, m := range ms {
				found = found || m.read(v)
			}
			if !found {
				return false
			}
		}
	}
	return true
}

// listGroupType is the group's type and state as ListGroups v5 shows
// them; "" when it is not listed.
func listGroupType(t *testing.T, cl *kgo.Client, group string) (typ, state string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrListGroupsRequest()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("ListGroups: %v", err)
	}
	for _, g := range resp.Groups {
		if g.Group == group {
			return g.GroupType, g.GroupState
		}
	}
	return "", ""
}

// waitMixedGroup waits until the group is a Stable consumer group with
// the given numbers of classic (member type 0) and 848 (type 1) members,
// every partition assigned, as ConsumerGroupDescribe, ListGroups and
// DescribeGroups show it.
func waitMixedGroup(t *testing.T, cl *kgo.Client, group string, classic, consumer, partitions int, when string) {
	t.Helper()
	var g kmsg.ConsumerGroupDescribeResponseGroup
	ok := poll.For(60*time.Second, func() bool {
		var ok bool
		if g, ok = describe848(cl, group); !ok || g.State != "Stable" {
			return false
		}
		types, held := map[int8]int{}, 0
		for _, m := range g.Members {
			types[m.MemberType]++
			for _, tp := range m.Assignment.TopicPartitions {
				held += len(tp.Partitions)
			}
		}
		return types[0] == classic && types[1] == consumer && held == partitions
	})
	if !ok {
		t.Fatalf("%s: the group is not a Stable consumer group with %d classic and %d consumer members holding %d partitions: %+v", when, classic, consumer, partitions, g)
	}
	if typ, state := listGroupType(t, cl, group); typ != "consumer" || state != "Stable" {
		t.Fatalf("%s: ListGroups shows the group as %s %s, want consumer Stable", when, typ, state)
	}
	if d := describeGroupE2E(t, cl, group); d.ProtocolType != "consumer" || len(d.Members) != classic+consumer {
		t.Fatalf("%s: DescribeGroups: protocol type %q, %d members", when, d.ProtocolType, len(d.Members))
	}
}

// waitClassicGroup waits until the group is a Stable classic group of n
// members, as DescribeGroups, ListGroups and ConsumerGroupDescribe show
// it.
func waitClassicGroup(t *testing.T, cl *kgo.Client, group string, n int, when string) {
	t.Helper()
	var d kmsg.DescribeGroupsResponseGroup
	if !poll.For(60*time.Second, func() bool {
		typ, _ := listGroupType(t, cl, group)
		d = describeGroupE2E(t, cl, group)
		return typ == "classic" && d.State == "Stable" && len(d.Members) == n
	}) {
		t.Fatalf("%s: the group is not a Stable classic group of %d: %+v", when, n, d)
	}
	if d.Protocol != "cooperative-sticky" {
		t.Fatalf("%s: classic group protocol %q, want cooperative-sticky", when, d.Protocol)
	}
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil || resp.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("%s: ConsumerGroupDescribe of the classic group: %+v %v, want GROUP_ID_NOT_FOUND", when, resp, err)
	}
}

// TestConsumerGroupProtocolMigration runs three franz-go members of a
// classic group (cooperative-sticky) and restarts them one by one on the
// KIP-848 protocol, then one by one back on the classic protocol, while
// records are produced: the group becomes a consumer group at the first
// 848 member and a classic group again when the last one leaves, every
// record is read, no partition is ever assigned to a member while
// another holds it, the group's type shows in ListGroups,
// DescribeGroups and ConsumerGroupDescribe at every step, and the
// committed offsets carry over every conversion and a broker restart.
func TestConsumerGroupProtocolMigration(t *testing.T) {
	const topic, group, partitions, perRound = "migrate", "migrate-g", 6, 30
	b := StartBroker(t, migrationSettings...)
	b.CreateTopic(t, topic, partitions)
	admin := b.Client(t)
	producer := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	owners := &partitionOwners{t: t, by: map[int32]string{}}
	parts := []int32{0, 1, 2, 3, 4, 5}

	var all []*migrationMember // every member ever started: together they read every record
	rounds := 0
	round := func(when string) {
		t.Helper()
		prefix := "r" + strconv.Itoa(rounds)
		rounds++
		produceTo(t, producer, topic, parts, perRound, prefix)
		if !poll.For(60*time.Second, func() bool { return readAllBy(all, prefix, partitions, perRound) }) {
			t.Fatalf("%s: the members did not read every record of round %s", when, prefix)
		}
	}
	start := func(name string, classic bool) *migrationMember {
		m := startMigrationMember(t, b.Addr, group, topic, name, classic, owners)
		all = append(all, m)
		return m
	}

	live := []*migrationMember{start("classic-0", true), start("classic-1", true), start("classic-2", true)}
	waitClassicGroup(t, admin, group, 3, "three classic members")
	round("three classic members")

	// Upgrade, one member at a time.
	for i := range live {
		live[i].close()
		live[i] = start(fmt.Sprintf("consumer-%d", i), false)
		waitMixedGroup(t, admin, group, 2-i, i+1, partitions, fmt.Sprintf("%d members on the 848 protocol", i+1))
		round(fmt.Sprintf("%d members on the 848 protocol", i+1))
	}

	// A restart of the broker in the middle: the group loads as the
	// consumer group it is.
	b.Stop(t)
	b.Restart(t)
	waitMixedGroup(t, admin, group, 0, 3, partitions, "after the restart")
	round("after the restart")

	// Downgrade, one member at a time: the last 848 member's leave makes
	// it a classic group again.
	for i := range live {
		live[i].close()
		live[i] = start(fmt.Sprintf("classic-again-%d", i), true)
		if i < 2 {
			waitMixedGroup(t, admin, group, i+1, 2-i, partitions, fmt.Sprintf("%d members back on the classic protocol", i+1))
		} else {
			waitClassicGroup(t, admin, group, 3, "every member back on the classic protocol")
		}
		round(fmt.Sprintf("%d members back on the classic protocol", i+1))
	}

	for _, m := range live {
		m.close()
	}
	committed := committedOffsets(t, admin, group, topic, partitions)
	for p, off := range committed {
		if off != int64(rounds*perRound) {
			t.Fatalf("partition %d committed at %d, want %d (every round read and committed)", p, off, rounds*perRound)
		}
	}
	b.RequireAlive(t)
}

// TestConsumerGroupProtocolKcatClassicMember runs a librdkafka classic
// member (kcat -G, the eager range assignor) in a consumer group with a
// franz-go member of the 848 protocol: kcat joins the consumer group as
// a classic member, the server assigns both, each record is read by one
// of them; when the 848 member leaves, the group becomes a classic group
// that kcat alone leads and reads everything of.
func TestConsumerGroupProtocolKcatClassicMember(t *testing.T) {
	requireKcat(t)
	const topic, group, partitions, perRound = "migrate-kcat", "migrate-kcat-g", 4, 25
	b := StartBroker(t, migrationSettings...)
	b.CreateTopic(t, topic, partitions)
	admin := b.Client(t)
	producer := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	owners := &partitionOwners{t: t, by: map[int32]string{}}
	parts := []int32{0, 1, 2, 3}

	franz := startMigrationMember(t, b.Addr, group, topic, "franz-848", false, owners)
	waitMixedGroup(t, admin, group, 0, 1, partitions, "the 848 member alone")
	kcat := startLineProc(t, "kcat", "-b", b.Addr, "-G", group, "-q", "-u",
		"-X", "client.id=kcat-classic", "-X", "auto.offset.reset=earliest",
		"-X", "session.timeout.ms=10000", "-X", "heartbeat.interval.ms=250",
		"-f", `%p %s\n`, topic)
	waitMixedGroup(t, admin, group, 1, 1, partitions, "kcat joined")

	var mu sync.Mutex
	kcatSeen := map[string]int32{}
	go func() {
		for line := range kcat.lines {
			p, v, ok := strings.Cut(line, " ")
			n, err := strconv.Atoi(p)
			if !ok || err != nil {
				continue
			}
			mu.Lock()
			kcatSeen[v] = int32(n)
			mu.Unlock()
		}
	}()
	readByKcat := func(v string) (int32, bool) {
		mu.Lock()
		defer mu.Unlock()
		p, ok := kcatSeen[v]
		return p, ok
	}
	checkRound := func(prefix string, wantKcatOnly bool) {
		t.Helper()
		produceTo(t, producer, topic, parts, perRound, prefix)
		ok := poll.For(60*time.Second, func() bool {
			for p := range partitions {
				for i := range perRound {
					v := fmt.Sprintf("%s-%d-%d", prefix, p, i)
					if _, k := readByKcat(v); !k && (wantKcatOnly || !franz.read(v)) {
						return false
					}
				}
			}
			return true
		})
		if !ok {
			t.Fatalf("round %s not read; kcat stderr:\n%s", prefix, tailString(kcat.stderr.String(), 2048))
		}
		byKcat, byFranz := map[int32]bool{}, map[int32]bool{}
		for p := range int32(partitions) {
			for i := range perRound {
				v := fmt.Sprintf("%s-%d-%d", prefix, p, i)
				if _, k := readByKcat(v); k {
					byKcat[p] = true
				}
				if franz.read(v) {
					byFranz[p] = true
				}
			}
		}
		if !wantKcatOnly {
			if len(byKcat) == 0 || len(byFranz) == 0 {
				t.Fatalf("round %s: kcat read partitions %v, franz-go %v; want both some", prefix, keysOf(byKcat), keysOf(byFranz))
			}
			for p := range byKcat {
				if byFranz[p] {
					t.Fatalf("round %s: partition %d read by both members of the stable group", prefix, p)
				}
			}
		}
	}
	checkRound("mixed", false)

	franz.close()
	if !poll.For(60*time.Second, func() bool {
		typ, _ := listGroupType(t, admin, group)
		d := describeGroupE2E(t, admin, group)
		return typ == "classic" && d.State == "Stable" && len(d.Members) == 1 && d.Members[0].ClientID == "kcat-classic"
	}) {
		t.Fatalf("after the 848 member left the group is not a Stable classic group of kcat: %+v", describeGroupE2E(t, admin, group))
	}
	checkRound("kcat-alone", true)
	kcat.stop()
	b.RequireAlive(t)
}

// TestConsumerGroupProtocolRegexACL: a member subscribed with a regular
// expression is assigned only the matching topics its principal may
// DESCRIBE (SASL PLAIN users and ACLs on a real broker); an admin member
// of another group with the same regex gets them all.
func TestConsumerGroupProtocolRegexACL(t *testing.T) {
	addrs := listenerAddrs(t, "PLAINTEXT", "SASL_PLAINTEXT")
	b := StartBroker(t, append([]string{
		"listeners=" + listenersValue(addrs, "PLAINTEXT", "SASL_PLAINTEXT"),
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
		"inter.broker.listener.name=PLAINTEXT",
		"listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN",
		`listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-pw";`,
		"authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
		"super.users=User:ANONYMOUS",
	}, consumerGroupSettings...)...)
	b.Addr = addrs["PLAINTEXT"]
	const group = "regex-acl-g"
	for _, topic := range []string{"acl-open", "acl-secret"} {
		b.CreateTopic(t, topic, 2)
	}
	admin := b.Client(t)
	createACLs(t, admin, "User:alice",
		aclSpec{kmsg.ACLResourceTypeGroup, group, kmsg.ACLOperationRead},
		aclSpec{kmsg.ACLResourceTypeTopic, "acl-open", kmsg.ACLOperationDescribe},
		aclSpec{kmsg.ACLResourceTypeTopic, "acl-open", kmsg.ACLOperationRead})

	alice, err := kgo.NewClient(
		kgo.SeedBrokers(addrs["SASL_PLAINTEXT"]),
		kgo.SASL(plain.Auth{User: "alice", Pass: "alice-pw"}.AsMechanism()),
		kgo.RetryTimeout(20*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(alice.Close)
	ids := topicIDs(t, admin, "acl-open", "acl-secret")

	assigned := joinRegexMember(t, alice, group, "acl-.*")
	if n := len(assigned[ids["acl-open"]]); n != 2 {
		t.Fatalf("alice's regex member has %d partitions of acl-open, want 2 (assignment %v)", n, assigned)
	}
	if n := len(assigned[ids["acl-secret"]]); n != 0 {
		t.Fatalf("alice's regex member was assigned %d partitions of acl-secret, which she may not describe", n)
	}
	// The same regex as a principal that may describe everything.
	all := joinRegexMember(t, admin, group+"-admin", "acl-.*")
	if len(all[ids["acl-open"]]) != 2 || len(all[ids["acl-secret"]]) != 2 {
		t.Fatalf("the admin's regex member has %v, want both topics' partitions", all)
	}
	// A topic created later that alice may not describe stays out too.
	b.CreateTopic(t, "acl-later", 1)
	later := topicIDs(t, admin, "acl-later")["acl-later"]
	if !poll.For(20*time.Second, func() bool { return len(heartbeatRegexMember(t, admin, group+"-admin", "acl-.*")[later]) == 1 }) {
		t.Fatal("a new topic is not assigned to a regex member that may describe it")
	}
	if got := heartbeatRegexMember(t, alice, group, "acl-.*"); len(got[later]) != 0 || len(got[ids["acl-open"]]) != 2 {
		t.Fatalf("after a new topic alice's member has %v, want acl-open's partitions alone", got)
	}
	b.RequireAlive(t)
}

type aclSpec struct {
	typ  kmsg.ACLResourceType
	name string
	op   kmsg.ACLOperation
}

// createACLs allows principal the operations, on literal resources, from
// any host.
func createACLs(t *testing.T, cl *kgo.Client, principal string, specs ...aclSpec) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	for _, s := range specs {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = s.typ, s.name, kmsg.ACLResourcePatternTypeLiteral
		c.Principal, c.Host, c.Operation, c.PermissionType = principal, "*", s.op, kmsg.ACLPermissionTypeAllow
		req.Creations = append(req.Creations, c)
	}
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatalf("CreateACLs: %v", err)
	}
	for _, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			t.Fatalf("CreateACLs: %v", err)
		}
	}
}

// topicIDs returns the topics' ids from Metadata.
func topicIDs(t *testing.T, cl *kgo.Client, topics ...string) map[string][16]byte {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	for _, n := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatalf("Metadata: %v", err)
	}
	out := map[string][16]byte{}
	for _, rt := range resp.Topics {
		if rt.ErrorCode != 0 || rt.Topic == nil {
			t.Fatalf("Metadata of %v: %v", rt.Topic, kerr.ErrorForCode(rt.ErrorCode))
		}
		out[*rt.Topic] = rt.TopicID
	}
	return out
}

// regexMembers are the members joinRegexMember started, by group, for
// heartbeatRegexMember.
var regexMembers = struct {
	sync.Mutex
	by map[string]*kmsg.ConsumerGroupHeartbeatRequest
}{by: map[string]*kmsg.ConsumerGroupHeartbeatRequest{}}

// joinRegexMember joins a member subscribed to regex to a new consumer
// group with ConsumerGroupHeartbeat and heartbeats until its assignment
// stops changing; it returns the assignment by topic id.
func joinRegexMember(t *testing.T, cl *kgo.Client, group, regex string) map[[16]byte][]int32 {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group = group
	req.MemberID = "regex-" + group
	req.MemberEpoch = 0
	req.RebalanceTimeoutMillis = 10000
	req.SubscribedTopicRegex = kmsg.StringPtr(regex)
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	regexMembers.Lock()
	regexMembers.by[group] = req
	regexMembers.Unlock()
	return heartbeatRegexMember(t, cl, group, regex)
}

// heartbeatRegexMember heartbeats the member of group (full requests,
// owning what it was assigned) until two answers in a row leave its
// epoch and assignment as they were.
func heartbeatRegexMember(t *testing.T, cl *kgo.Client, group, regex string) map[[16]byte][]int32 {
	t.Helper()
	regexMembers.Lock()
	req := regexMembers.by[group]
	regexMembers.Unlock()
	owned := map[[16]byte][]int32{}
	for _, tp := range req.Topics {
		owned[tp.TopicID] = tp.Partitions
	}
	same := 0
	if !poll.For(20*time.Second, func() bool {
		resp, err := req.RequestWith(t.Context(), cl)
		if err != nil {
			t.Fatalf("ConsumerGroupHeartbeat %s: %v", group, err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			t.Fatalf("ConsumerGroupHeartbeat %s: %v", group, err)
		}
		changed := resp.MemberEpoch != req.MemberEpoch
		req.MemberEpoch = resp.MemberEpoch
		if resp.Assignment != nil {
			next := map[[16]byte][]int32{}
			for _, tp := range resp.Assignment.Topics {
				next[tp.TopicID] = tp.Partitions
			}
			changed = changed || fmt.Sprint(next) != fmt.Sprint(owned)
			owned = next
		}
		req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for id, ps := range owned {
			rt := kmsg.NewConsumerGroupHeartbeatRequestTopic()
			rt.TopicID, rt.Partitions = id, ps
			req.Topics = append(req.Topics, rt)
		}
		req.SubscribedTopicRegex = kmsg.StringPtr(regex)
		if changed {
			same = 0
			return false
		}
		same++
		return same >= 2
	}) {
		t.Fatalf("the regex member of %s did not settle", group)
	}
	return owned
}
