package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/broker/strataapi"
	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/segment/poll"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// describeShareParts sends DescribeSharePartitions for group on a
// connection of its own.
func describeShareParts(t *testing.T, s *Server, group string, topics []strataapi.DescribeSharePartitionsRequestTopic) *strataapi.DescribeSharePartitionsResponse {
	t.Helper()
	req := &strataapi.DescribeSharePartitionsRequest{GroupID: group, Topics: topics}
	return dialRaw(t, s).request(1, req).(*strataapi.DescribeSharePartitionsResponse)
}

// wholeTopic asks for every partition of topic led there.
func wholeTopic(topic string) []strataapi.DescribeSharePartitionsRequestTopic {
	return []strataapi.DescribeSharePartitionsRequestTopic{{Topic: topic, Partitions: []int32{}}}
}

// TestDescribeSharePartitionsLoaded: before a member used them the share
// partitions of a group are answered not loaded, with -1 figures; while a
// member holds records they are loaded, with the held records acquired
// and counts that fill the in-flight window; once the records are
// accepted the start offset moves past them.
func TestDescribeSharePartitionsLoaded(t *testing.T) {
	s, _ := startShareServer(t, 30*time.Second)
	createTopic(t, newClient(t, s), "queue", 1, nil)
	var rs []*kgo.Record
	for i := range 10 {
		rs = append(rs, &kgo.Record{Topic: "queue", Value: fmt.Appendf(nil, "v%d", i)})
	}
	if err := newClient(t, s).ProduceSync(testCtx(t), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	resp := describeShareParts(t, s, "dq", wholeTopic("queue"))
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("before any member: %+v", resp)
	}
	if got, want := resp.Topics[0].Partitions[0], strataapi.NewDescribeSharePartition(0, 0); got != want {
		t.Fatalf("before any member: got %+v, want %+v (not loaded, figures -1)", got, want)
	}
	if resp = describeShareParts(t, s, "dq", nil); len(resp.Topics) != 0 {
		t.Fatalf("topics null before any member: got %+v, want no topics", resp.Topics)
	}

	cl := newClient(t, s, kgo.ShareGroup("dq"), kgo.ConsumeTopics("queue"), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ShareMaxRecords(4), kgo.ShareMaxRecordsStrict())
	var held []*kgo.Record
	poll.Until(t, 20*time.Second, "the member holds records", func() bool {
		held = append(held, cl.PollRecords(testCtx(t), 4).Records()...)
		return len(held) > 0
	})
	p := describeShareParts(t, s, "dq", nil)
	if len(p.Topics) != 1 || p.Topics[0].Topic != "queue" || len(p.Topics[0].Partitions) != 1 {
		t.Fatalf("topics null while held: %+v", p)
	}
	got := p.Topics[0].Partitions[0]
	sum := int64(got.Available + got.Acquired + got.Acknowledged + got.Archiving + got.Archived)
	switch {
	case !got.Loaded || got.ErrorCode != 0:
		t.Fatalf("while held: %+v, want loaded", got)
	case got.StartOffset != 0 || int(got.Acquired) < len(held) || got.AcquiredTotal < int64(len(held)):
		t.Errorf("while %d records are held: %+v, want start 0 and at least that many acquired", len(held), got)
	case sum != got.EndOffset-got.StartOffset:
		t.Errorf("counts %+v add up to %d, want the window's %d", got, sum, got.EndOffset-got.StartOffset)
	}

	cl.MarkAcks(kgo.AckAccept)
	if err := cl.FlushAcks(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 20*time.Second, "the start offset passes the accepted records", func() bool {
		p := describeShareParts(t, s, "dq", wholeTopic("queue")).Topics[0].Partitions[0]
		return p.Loaded && p.StartOffset >= int64(len(held))
	})
}

// TestDescribeSharePartitionsErrors: a partition the topic does not have
// is UNKNOWN_TOPIC_OR_PARTITION with -1 figures, an unknown topic is
// UNKNOWN_TOPIC_OR_PARTITION on the topic, an empty group id
// INVALID_GROUP_ID.
func TestDescribeSharePartitionsErrors(t *testing.T) {
	s, _ := startShareServer(t, 30*time.Second)
	createTopic(t, newClient(t, s), "queue", 1, nil)
	resp := describeShareParts(t, s, "g", []strataapi.DescribeSharePartitionsRequestTopic{
		{Topic: "queue", Partitions: []int32{7}}, {Topic: "nosuch", Partitions: []int32{0}}})
	if len(resp.Topics) != 2 || resp.Topics[0].Partitions[0] != strataapi.NewDescribeSharePartition(7, kerr.UnknownTopicOrPartition.Code) ||
		resp.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code || len(resp.Topics[1].Partitions) != 0 {
		t.Errorf("unknown partition and topic: %+v", resp.Topics)
	}
	if resp = describeShareParts(t, s, "", nil); resp.ErrorCode != kerr.InvalidGroupID.Code {
		t.Errorf("empty group id: %v, want INVALID_GROUP_ID", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// TestDescribeSharePartitionsAuthorization: without DESCRIBE on the group
// the answer is GROUP_AUTHORIZATION_FAILED with no topics; with it but
// not on the topic, TOPIC_AUTHORIZATION_FAILED on the topic; with both,
// the partition.
func TestDescribeSharePartitionsAuthorization(t *testing.T) {
	s, _ := startShareServerWith(t, 30*time.Second, map[string]string{"authorizer.class.name": acl.ClassAclAuthorizer}, nil)
	grantAll(t, s, []acl.Binding{binding(anonymous, acl.OpCreate, acl.ResourceCluster, acl.ClusterName)})
	createTopic(t, newClient(t, s), "queue", 1, nil)
	resp := describeShareParts(t, s, "ag", wholeTopic("queue"))
	if resp.ErrorCode != kerr.GroupAuthorizationFailed.Code || len(resp.Topics) != 0 {
		t.Fatalf("without DESCRIBE on the group: %+v", resp)
	}
	grantAll(t, s, []acl.Binding{binding(anonymous, acl.OpDescribe, acl.ResourceGroup, "ag")})
	resp = describeShareParts(t, s, "ag", wholeTopic("queue"))
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code || len(resp.Topics[0].Partitions) != 0 {
		t.Fatalf("without DESCRIBE on the topic: %+v", resp)
	}
	grantAll(t, s, []acl.Binding{binding(anonymous, acl.OpDescribe, acl.ResourceTopic, "queue")})
	resp = describeShareParts(t, s, "ag", wholeTopic("queue"))
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 1 ||
		resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("granted: %+v", resp)
	}
}

// TestDescribeSharePartitionsNotLeader: on a two-broker cluster the
// follower of a partition answers it NOT_LEADER_OR_FOLLOWER and leaves it
// out of a whole-topic request; the leader answers it.
func TestDescribeSharePartitionsNotLeader(t *testing.T) {
	zk := zktest.Start(t)
	connect := zk.ConnectString("/strata-describe-share")
	var srv []*Server
	for id := 1; id <= 2; id++ {
		srv = append(srv, startServer(t, map[string]string{"broker.id": fmt.Sprint(id), "zookeeper.connect": connect}))
	}
	waitFor(t, "both brokers registered", func() bool { return len(srv[0].coord.Snapshot().Brokers) == 2 })
	if _, err := kadm.NewClient(newClient(t, srv[0])).CreateTopic(testCtx(t), 1, 2, nil, "queue"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "queue-0 led and open on both brokers", func() bool {
		p := partitionInfo(srv[0], "queue", 0)
		return p.State.Leader > 0 && srv[0].topic("queue") != nil && srv[1].topic("queue") != nil
	})
	leaderID := partitionInfo(srv[0], "queue", 0).State.Leader
	leader, follower := srv[leaderID-1], srv[2-leaderID]
	var resp *strataapi.DescribeSharePartitionsResponse
	// The follower applies the partition's state after the snapshot the
	// test read shows it: ask until it answers as a follower.
	poll.Until(t, 20*time.Second, "the follower answers NOT_LEADER_OR_FOLLOWER", func() bool {
		resp = describeShareParts(t, follower, "g", []strataapi.DescribeSharePartitionsRequestTopic{{Topic: "queue", Partitions: []int32{0}}})
		return len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 && resp.Topics[0].Partitions[0].ErrorCode == kerr.NotLeaderForPartition.Code
	})
	if got := resp.Topics[0].Partitions[0]; got != strataapi.NewDescribeSharePartition(0, kerr.NotLeaderForPartition.Code) {
		t.Errorf("follower: got %+v, want -1 figures", got)
	}
	if resp = describeShareParts(t, follower, "g", wholeTopic("queue")); len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 0 {
		t.Errorf("follower, whole topic: %+v, want no partitions", resp.Topics)
	}
	poll.Until(t, 20*time.Second, "the leader answers the partition", func() bool {
		resp = describeShareParts(t, leader, "g", wholeTopic("queue"))
		return len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 && resp.Topics[0].Partitions[0] == strataapi.NewDescribeSharePartition(0, 0)
	})
}
