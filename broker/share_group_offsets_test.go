package broker

import (
	"context"
	"testing"
	"time"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/segment/poll"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startShareAdminServer starts a server whose share groups keep their
// state in its share coordinator (__share_group_state), with topic q of
// one partition holding ten records.
func startShareAdminServer(t *testing.T, props map[string]string) (*Server, *kgo.Client) {
	t.Helper()
	s, _ := startShareServerWith(t, 30*time.Second, props, func(c *Config) { c.SharePersister = nil })
	cl := newClient(t, s)
	createTopic(t, cl, "q", 1, nil)
	var rs []*kgo.Record
	for range 10 {
		rs = append(rs, &kgo.Record{Topic: "q", Value: []byte("x")})
	}
	if err := cl.ProduceSync(testCtx(t), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return s, cl
}

// alterShareOffset sends AlterShareGroupOffsets for one partition of q
// and returns the top-level and the partition's codes.
func alterShareOffset(t *testing.T, s *Server, cl *kgo.Client, group, topic string, part int32, start int64) (top, code int16) {
	t.Helper()
	req := kmsg.NewPtrAlterShareGroupOffsetsRequest()
	req.GroupID = group
	rt := kmsg.NewAlterShareGroupOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewAlterShareGroupOffsetsRequestTopicPartition()
	rp.Partition, rp.StartOffset = part, start
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := brokerRequest(t, s, cl, req).(*kmsg.AlterShareGroupOffsetsResponse)
	if resp.ErrorCode != 0 {
		return resp.ErrorCode, 0
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Topic != topic {
		t.Fatalf("alter: answer %+v", resp.Topics)
	}
	return 0, resp.Topics[0].Partitions[0].ErrorCode
}

// describeShareOffsets sends DescribeShareGroupOffsets v1 for group
// (all partitions when topics is nil).
func describeShareOffsets(t *testing.T, s *Server, cl *kgo.Client, group string, topics []kmsg.DescribeShareGroupOffsetsRequestGroupTopic) kmsg.DescribeShareGroupOffsetsResponseGroup {
	t.Helper()
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID, rg.Topics = group, topics
	req.Groups = append(req.Groups, rg)
	resp := brokerRequest(t, s, cl, req).(*kmsg.DescribeShareGroupOffsetsResponse)
	if len(resp.Groups) != 1 || resp.Groups[0].GroupID != group {
		t.Fatalf("describe: answer %+v", resp.Groups)
	}
	return resp.Groups[0]
}

// deleteShareOffsets sends DeleteShareGroupOffsets for topic and returns
// the top-level and the topic's codes.
func deleteShareOffsets(t *testing.T, s *Server, cl *kgo.Client, group, topic string) (top, code int16) {
	t.Helper()
	req := kmsg.NewPtrDeleteShareGroupOffsetsRequest()
	req.GroupID = group
	rt := kmsg.NewDeleteShareGroupOffsetsRequestTopic()
	rt.Topic = topic
	req.Topics = append(req.Topics, rt)
	resp := brokerRequest(t, s, cl, req).(*kmsg.DeleteShareGroupOffsetsResponse)
	if resp.ErrorCode != 0 {
		return resp.ErrorCode, 0
	}
	if len(resp.Topics) != 1 {
		t.Fatalf("delete: answer %+v", resp.Topics)
	}
	return 0, resp.Topics[0].ErrorCode
}

// firstShareOffset starts a share consumer of q in group, returns the
// offset of the first record it gets, and closes it (its member leaves,
// the group is empty again).
func firstShareOffset(t *testing.T, s *Server, group string) int64 {
	t.Helper()
	cl := newShareConsumer(t, s, group, "q")
	defer cl.Close()
	ctx, cancel := context.WithTimeout(testCtx(t), 20*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		fs := cl.PollRecords(ctx, 1)
		var first *kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			if first == nil {
				first = r
			}
		})
		if first != nil {
			return first.Offset
		}
	}
	t.Fatalf("share group %s got no record", group)
	return 0
}

// waitShareGroupEmpty waits until group has no members on s.
func waitShareGroupEmpty(t *testing.T, s *Server, group string) {
	t.Helper()
	if !poll.For(20*time.Second, func() bool { return !s.shares.Groups.HasMembers(group) }) {
		t.Fatalf("share group %s still has members", group)
	}
}

func TestShareGroupOffsetsAlterDescribeDelete(t *testing.T) {
	s, cl := startShareAdminServer(t, nil)

	// A group nobody used: Describe and Delete do not know it; Alter
	// creates it by its state.
	if g := describeShareOffsets(t, s, cl, "fresh", nil); g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe an unknown group: %+v", g)
	}
	if top, _ := deleteShareOffsets(t, s, cl, "fresh", "q"); top != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete for an unknown group: %d", top)
	}
	if top, code := alterShareOffset(t, s, cl, "fresh", "q", 0, 4); top != 0 || code != 0 {
		t.Fatalf("alter a fresh group: %d %d", top, code)
	}
	for _, c := range []struct {
		topic string
		part  int32
	}{{"nope", 0}, {"q", 1}} {
		if top, code := alterShareOffset(t, s, cl, "fresh", c.topic, c.part, 0); top != 0 || code != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("alter %s-%d: %d %d, want UNKNOWN_TOPIC_OR_PARTITION", c.topic, c.part, top, code)
		}
	}
	g := describeShareOffsets(t, s, cl, "fresh", nil)
	if g.ErrorCode != 0 || len(g.Topics) != 1 || g.Topics[0].Topic != "q" || len(g.Topics[0].Partitions) != 1 {
		t.Fatalf("describe all: %+v", g)
	}
	if p := g.Topics[0].Partitions[0]; p.StartOffset != 4 || p.Lag != 6 || p.ErrorCode != 0 {
		t.Errorf("describe all: start %d lag %d code %d, want 4 6 0", p.StartOffset, p.Lag, p.ErrorCode)
	}
	// Named topics: an unknown topic and a partition without state are
	// absent data (start -1), not errors, as Kafka.
	g = describeShareOffsets(t, s, cl, "fresh", []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{
		{Topic: "q", Partitions: []int32{0}}, {Topic: "nope", Partitions: []int32{0}}})
	if g.ErrorCode != 0 || len(g.Topics) != 2 || g.Topics[0].Partitions[0].StartOffset != 4 ||
		g.Topics[1].Topic != "nope" || g.Topics[1].Partitions[0].StartOffset != -1 || g.Topics[1].Partitions[0].ErrorCode != 0 {
		t.Errorf("describe named topics: %+v", g)
	}

	// The first member starts at the altered offset; then the group is
	// empty again, its share partition still loaded on the broker, and
	// a second alter must reach the next member.
	if off := firstShareOffset(t, s, "fresh"); off != 4 {
		t.Errorf("first member: first offset %d, want 4", off)
	}
	waitShareGroupEmpty(t, s, "fresh")
	if top, code := alterShareOffset(t, s, cl, "fresh", "q", 0, 2); top != 0 || code != 0 {
		t.Fatalf("alter again: %d %d", top, code)
	}
	if off := firstShareOffset(t, s, "fresh"); off != 2 {
		t.Errorf("after the second alter: first offset %d, want 2", off)
	}
	waitShareGroupEmpty(t, s, "fresh")

	// Delete: the state goes; the group stays (Empty, its records in
	// __consumer_offsets), with no offsets to describe.
	if top, code := deleteShareOffsets(t, s, cl, "fresh", "nope"); top != 0 || code != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("delete an unknown topic: %d %d", top, code)
	}
	if top, code := deleteShareOffsets(t, s, cl, "fresh", "q"); top != 0 || code != 0 {
		t.Fatalf("delete: %d %d", top, code)
	}
	if g := describeShareOffsets(t, s, cl, "fresh", nil); g.ErrorCode != 0 || len(g.Topics) != 0 {
		t.Errorf("describe after delete: %+v, want the group without topics", g)
	}
}

func TestShareGroupOffsetsNonEmptyAndClassicGroups(t *testing.T) {
	s, cl := startShareAdminServer(t, nil)
	// A share group with a member: offsets cannot change.
	sc := newShareConsumer(t, s, "busy", "q")
	if !poll.For(20*time.Second, func() bool { return s.shares.Groups.HasMembers("busy") }) {
		t.Fatal("the share consumer did not join")
	}
	if top, _ := alterShareOffset(t, s, cl, "busy", "q", 0, 0); top != kerr.NonEmptyGroup.Code {
		t.Errorf("alter a group with members: %d, want NON_EMPTY_GROUP", top)
	}
	if top, _ := deleteShareOffsets(t, s, cl, "busy", "q"); top != kerr.NonEmptyGroup.Code {
		t.Errorf("delete for a group with members: %d, want NON_EMPTY_GROUP", top)
	}
	if g := describeShareOffsets(t, s, cl, "busy", nil); g.ErrorCode != 0 {
		t.Errorf("describe a group with members: %+v", g)
	}
	sc.Close()

	// A classic group's id is not a share group's.
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = "classic", -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "q"
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Offset = 1
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	if r := brokerRequest(t, s, cl, commit).(*kmsg.OffsetCommitResponse); r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("commit for group classic: %d", r.Topics[0].Partitions[0].ErrorCode)
	}
	if top, _ := alterShareOffset(t, s, cl, "classic", "q", 0, 0); top != kerr.GroupIDNotFound.Code {
		t.Errorf("alter a classic group: %d, want GROUP_ID_NOT_FOUND", top)
	}
	if top, _ := deleteShareOffsets(t, s, cl, "classic", "q"); top != kerr.GroupIDNotFound.Code {
		t.Errorf("delete for a classic group: %d, want GROUP_ID_NOT_FOUND", top)
	}
	if g := describeShareOffsets(t, s, cl, "classic", nil); g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("describe a classic group: %+v", g)
	}
	if top, _ := alterShareOffset(t, s, cl, "", "q", 0, 0); top != kerr.InvalidGroupID.Code {
		t.Errorf("alter group \"\": %d, want INVALID_GROUP_ID", top)
	}
}

func TestShareGroupOffsetsACLs(t *testing.T) {
	s, admin := startShareAdminServer(t, authzSASLProps([]string{"alice"}, nil))
	if top, code := alterShareOffset(t, s, admin, "sg", "q", 0, 3); top != 0 || code != 0 {
		t.Fatalf("admin alter: %d %d", top, code)
	}
	alice := plainClient(t, s, "alice")
	if g := describeShareOffsets(t, s, alice, "sg", nil); g.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("describe without DESCRIBE on the group: %+v", g)
	}
	if top, _ := alterShareOffset(t, s, alice, "sg", "q", 0, 1); top != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("alter without READ on the group: %d", top)
	}
	if top, _ := deleteShareOffsets(t, s, alice, "sg", "q"); top != kerr.GroupAuthorizationFailed.Code {
		t.Errorf("delete without DELETE on the group: %d", top)
	}
	grantAll(t, s, []acl.Binding{
		binding("User:alice", acl.OpRead, acl.ResourceGroup, "sg"),
		binding("User:alice", acl.OpDelete, acl.ResourceGroup, "sg"),
	})
	// The group is allowed (READ implies DESCRIBE), the topic is not.
	g := describeShareOffsets(t, s, alice, "sg", nil)
	if g.ErrorCode != 0 || len(g.Topics) != 0 {
		t.Errorf("describe all without DESCRIBE on the topic: %+v, want no topics", g)
	}
	g = describeShareOffsets(t, s, alice, "sg", []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: "q", Partitions: []int32{0}}})
	if g.ErrorCode != 0 || len(g.Topics) != 1 || g.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code || g.Topics[0].Partitions[0].StartOffset != -1 {
		t.Errorf("describe q without DESCRIBE on it: %+v", g)
	}
	if top, code := alterShareOffset(t, s, alice, "sg", "q", 0, 1); top != 0 || code != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("alter without READ on the topic: %d %d", top, code)
	}
	if top, code := deleteShareOffsets(t, s, alice, "sg", "q"); top != 0 || code != kerr.TopicAuthorizationFailed.Code {
		t.Errorf("delete without READ on the topic: %d %d", top, code)
	}
	grantAll(t, s, []acl.Binding{binding("User:alice", acl.OpRead, acl.ResourceTopic, "q")})
	if top, code := alterShareOffset(t, s, alice, "sg", "q", 0, 1); top != 0 || code != 0 {
		t.Errorf("alter with READ: %d %d", top, code)
	}
	if g := describeShareOffsets(t, s, alice, "sg", nil); g.ErrorCode != 0 || len(g.Topics) != 1 || g.Topics[0].Partitions[0].StartOffset != 1 {
		t.Errorf("describe with READ: %+v", g)
	}
	if top, code := deleteShareOffsets(t, s, alice, "sg", "q"); top != 0 || code != 0 {
		t.Errorf("delete with DELETE and READ: %d %d", top, code)
	}
}
