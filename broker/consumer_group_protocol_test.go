package broker

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumerGroupProps are the settings of the tests of KIP-848 groups: a
// heartbeat interval short enough that reassignments take a fraction of
// a second.
func consumerGroupProps(dir string) map[string]string {
	return map[string]string{
		"listeners":                    "PLAINTEXT://127.0.0.1:0",
		"metrics.listener":             "",
		"log.dirs":                     dir,
		"offsets.topic.num.partitions": "3",
		"group.consumer.min.heartbeat.interval.ms": "50",
		"group.consumer.heartbeat.interval.ms":     "100",
	}
}

// ownership records which member holds each partition, as the members'
// assignment callbacks report it, and fails the test when a partition
// is assigned to a member while another still holds it.
type ownership struct {
	t  *testing.T
	mu sync.Mutex
	by map[int32]string
}

func (o *ownership) assigned(member string, parts []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range parts {
		if cur, ok := o.by[p]; ok && cur != member {
			o.t.Errorf("partition %d assigned to %s while %s holds it", p, member, cur)
		}
		o.by[p] = member
	}
}

func (o *ownership) released(member string, parts []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range parts {
		if o.by[p] == member {
			delete(o.by, p)
		}
	}
}

// startConsumerMember starts a franz-go member of group on the KIP-848
// protocol (ServerSideBalancer), autocommitting, recording what it reads
// and reporting its assignments to own.
func startConsumerMember(t *testing.T, addr, group, name, topic string, own *ownership, opts ...kgo.Opt) *groupMember {
	t.Helper()
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(addr),
		kgo.ClientID(name),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ServerSideBalancer(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.RetryTimeout(10 * time.Second),
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(200 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.assigned(name, m[topic]) }),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
			if err := cl.CommitMarkedOffsets(ctx); err != nil {
				t.Logf("%s: commit on revoke: %v", name, err)
			}
			own.released(name, m[topic])
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.released(name, m[topic]) }),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return runGroupMember(t, name, cl, true)
}

// describeConsumerGroup answers ConsumerGroupDescribe for one group.
func describeConsumerGroup(t *testing.T, cl *kgo.Client, group string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Groups) != 1 {
		t.Fatalf("describe %s: %d groups", group, len(resp.Groups))
	}
	return resp.Groups[0]
}

// waitConsumerGroup waits until the group is Stable with n members that
// together hold every one of its partitions.
func waitConsumerGroup(t *testing.T, cl *kgo.Client, group string, n, partitions int) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	var g kmsg.ConsumerGroupDescribeResponseGroup
	waitFor(t, fmt.Sprintf("group %s Stable with %d members holding %d partitions", group, n, partitions), func() bool {
		g = describeConsumerGroup(t, cl, group)
		held := 0
		for _, m := range g.Members {
			for _, tp := range m.Assignment.TopicPartitions {
				held += len(tp.Partitions)
			}
		}
		return g.ErrorCode == 0 && g.State == "Stable" && len(g.Members) == n && held == partitions
	})
	return g
}

// readEvery reports whether the members together read every record tagged
// tag of each partition (n a partition).
func readEvery(ms []*groupMember, tag string, partitions int32, n int) bool {
	seen := map[string]bool{}
	for _, m := range ms {
		for _, r := range m.records() {
			if strings.HasPrefix(string(r.Value), tag+"-") {
				seen[string(r.Value)] = true
			}
		}
	}
	return len(seen) == int(partitions)*n
}

// TestConsumerGroupProtocolMembersJoinAndLeave runs franz-go members on
// the KIP-848 protocol against a broker: members join and leave while
// records are produced; every record is read, no partition is ever
// assigned to a member while another holds it, the group's epochs and
// assignments show in ConsumerGroupDescribe, DescribeGroups and
// ListGroups, and the committed offsets survive a restart of the broker.
func TestConsumerGroupProtocolMembersJoinAndLeave(t *testing.T) {
	const topic, group, partitions, perStep = "cg848", "g848", int32(6), 20
	cfg := testConfig(t, consumerGroupProps(t.TempDir()))
	s := startServerConfig(t, cfg)
	admin := newClient(t, s)
	createTopic(t, admin, topic, partitions, nil)
	producer := newClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	own := &ownership{t: t, by: map[int32]string{}}
	addr := s.Addr().String()

	var ms []*groupMember
	step := func(i int, change func()) {
		change()
		tag := fmt.Sprintf("step%d", i)
		produceEach(t, producer, topic, partitions, perStep, tag)
		waitFor(t, "every record of "+tag, func() bool { return readEvery(ms, tag, partitions, perStep) })
	}
	step(0, func() { ms = append(ms, startConsumerMember(t, addr, group, "a", topic, own)) })
	waitConsumerGroup(t, admin, group, 1, int(partitions))
	step(1, func() { ms = append(ms, startConsumerMember(t, addr, group, "b", topic, own)) })
	step(2, func() { ms = append(ms, startConsumerMember(t, addr, group, "c", topic, own)) })
	g := waitConsumerGroup(t, admin, group, 3, int(partitions))
	checkConsumerGroupDescribed(t, g, partitions)
	checkClassicViews(t, admin, group)
	step(3, func() { ms[0].close() })
	waitConsumerGroup(t, admin, group, 2, int(partitions))
	step(4, func() { ms[1].close() })
	waitConsumerGroup(t, admin, group, 1, int(partitions))

	ms[2].close()
	waitFor(t, "the group empty", func() bool { return describeConsumerGroup(t, admin, group).State == "Empty" })
	before := committedN(t, admin, group, topic, partitions)
	for p, off := range before {
		if off != 5*perStep {
			t.Fatalf("partition %d committed at %d, want %d", p, off, 5*perStep)
		}
	}
	admin.Close()
	producer.Close()
	if err := s.Shutdown(testCtx(t)); err != nil {
		t.Fatal(err)
	}

	s = startServerConfig(t, cfg)
	addr = s.Addr().String()
	admin = newClient(t, s)
	producer = newClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if got := committedN(t, admin, group, topic, partitions); !equalOffsets(got, before) {
		t.Fatalf("after restart: committed %v, want %v", got, before)
	}
	d := startConsumerMember(t, addr, group, "d", topic, own)
	produceEach(t, producer, topic, partitions, 1, "last")
	waitFor(t, "the last record of every partition", func() bool { return readEvery([]*groupMember{d}, "last", partitions, 1) })
	for _, r := range d.records() {
		if r.Offset < before[r.Partition] {
			t.Fatalf("after restart the group read %d/%d, below its commit %d", r.Partition, r.Offset, before[r.Partition])
		}
	}
}

// checkConsumerGroupDescribed checks a Stable group of three members as
// ConsumerGroupDescribe shows it: every member at the assignment epoch,
// its assignment its target, two partitions each (uniform).
func checkConsumerGroupDescribed(t *testing.T, g kmsg.ConsumerGroupDescribeResponseGroup, partitions int32) {
	t.Helper()
	if g.AssignorName != "uniform" || g.AssignmentEpoch != g.Epoch || g.Epoch < 3 {
		t.Fatalf("group: assignor %q epoch %d assignment epoch %d, want uniform and equal epochs >= 3", g.AssignorName, g.Epoch, g.AssignmentEpoch)
	}
	for _, m := range g.Members {
		n := 0
		for _, tp := range m.Assignment.TopicPartitions {
			n += len(tp.Partitions)
		}
		if m.MemberEpoch != g.AssignmentEpoch || n != int(partitions)/3 || m.MemberType != 1 || !slices.Equal(m.SubscribedTopics, []string{"cg848"}) {
			t.Fatalf("member %s (%s): epoch %d, %d partitions, type %d, topics %v; want epoch %d, %d partitions, type 1", m.MemberID, m.ClientID, m.MemberEpoch, n, m.MemberType, m.SubscribedTopics, g.AssignmentEpoch, partitions/3)
		}
	}
}

// checkClassicViews checks a consumer group as the classic APIs show it:
// ListGroups v5 with its type, DescribeGroups with protocol type
// "consumer", the assignor as protocol, and its members.
func checkClassicViews(t *testing.T, cl *kgo.Client, group string) {
	t.Helper()
	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.TypesFilter = []string{"consumer"}
	lresp, err := lreq.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(lresp.Groups) != 1 || lresp.Groups[0].Group != group || lresp.Groups[0].GroupType != "consumer" || lresp.Groups[0].GroupState != "Stable" {
		t.Fatalf("ListGroups of type consumer: %+v", lresp.Groups)
	}
	lreq.TypesFilter = []string{"classic"}
	if lresp, err = lreq.RequestWith(testCtx(t), cl); err != nil || len(lresp.Groups) != 0 {
		t.Fatalf("ListGroups of type classic: %+v, %v; want none", lresp, err)
	}
	g := describeGroup(t, cl, group)
	if g.ProtocolType != "consumer" || g.Protocol != "uniform" || g.State != "Stable" || len(g.Members) != 3 {
		t.Fatalf("DescribeGroups: protocol type %q protocol %q state %s, %d members", g.ProtocolType, g.Protocol, g.State, len(g.Members))
	}
}

// committedN returns the group's committed offsets of topic's partitions
// [0, partitions).
func committedN(t *testing.T, cl *kgo.Client, group, topic string, partitions int32) map[int32]int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if p.ErrorCode != 0 || p.Metadata == nil {
				t.Fatalf("offset fetch %s/%d: %v, metadata %v", tp.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode), p.Metadata)
			}
			out[p.Partition] = p.Offset
		}
	}
	return out
}

func equalOffsets(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for p, o := range a {
		if b[p] != o {
			return false
		}
	}
	return true
}
