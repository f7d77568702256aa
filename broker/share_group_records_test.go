package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/group"
	"github.com/stratastream/strata/segment/poll"
)

// describeShareGroup asks s for ShareGroupDescribe of id, until s
// coordinates it (after a start or a move the partition loads first).
func describeShareGroup(t *testing.T, s *Server, id string) kmsg.ShareGroupDescribeResponseGroup {
	t.Helper()
	cl := newClient(t, s)
	var g kmsg.ShareGroupDescribeResponseGroup
	poll.Until(t, 20*time.Second, "broker "+fmt.Sprint(s.cfg.BrokerID)+" coordinates "+id, func() bool {
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.GroupIDs = []string{id}
		g = brokerRequest(t, s, cl, req).(*kmsg.ShareGroupDescribeResponse).Groups[0]
		return g.ErrorCode != kerr.NotCoordinator.Code && g.ErrorCode != kerr.CoordinatorLoadInProgress.Code
	})
	return g
}

// listShareGroups lists s's groups with the states filter.
func listShareGroups(t *testing.T, s *Server, states ...string) map[string]string {
	t.Helper()
	req := kmsg.NewPtrListGroupsRequest()
	req.StatesFilter, req.TypesFilter = states, []string{"share"}
	resp := brokerRequest(t, s, newClient(t, s), req).(*kmsg.ListGroupsResponse)
	out := map[string]string{}
	for _, g := range resp.Groups {
		if g.GroupType != "share" || g.ProtocolType != "share" {
			t.Errorf("ListGroups: %+v, want type and protocol type share", g)
		}
		out[g.Group] = g.GroupState
	}
	return out
}

// wantShareGroup checks a described share group's state, epoch and
// members.
func wantShareGroup(t *testing.T, step string, g kmsg.ShareGroupDescribeResponseGroup, state string, epoch int32, members ...string) {
	t.Helper()
	var got []string
	for _, m := range g.Members {
		got = append(got, m.MemberID)
	}
	if g.ErrorCode != 0 || g.GroupState != state || g.GroupEpoch != epoch || fmt.Sprint(got) != fmt.Sprint(members) {
		t.Fatalf("%s: got %s %s epoch %d members %v, want %s epoch %d members %v",
			step, kerr.ErrorForCode(g.ErrorCode), g.GroupState, g.GroupEpoch, got, state, epoch, members)
	}
}

// refuseOffsetAPIs checks that OffsetCommit, OffsetFetch and
// OffsetDelete of a share group's id answer GROUP_ID_NOT_FOUND, as
// Kafka's ShareGroup does ("not a consumer group").
func refuseOffsetAPIs(t *testing.T, s *Server, id string) {
	t.Helper()
	cl := newClient(t, s)
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = id, -1
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "q", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	if resp := brokerRequest(t, s, cl, commit).(*kmsg.OffsetCommitResponse); len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("OffsetCommit of a share group's id: %+v", resp.Topics)
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: id}}
	if resp := brokerRequest(t, s, cl, fetch).(*kmsg.OffsetFetchResponse); len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("OffsetFetch of a share group's id: %+v", resp.Groups)
	}
	del := kmsg.NewPtrOffsetDeleteRequest()
	del.Group = id
	del.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "q", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	if resp := brokerRequest(t, s, cl, del).(*kmsg.OffsetDeleteResponse); resp.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("OffsetDelete of a share group's id: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// restartServer shuts s down and starts a server on the same config (and
// data directory).
func restartServer(t *testing.T, s *Server, cfg Config) *Server {
	t.Helper()
	shutdown(t, s)
	return startServerConfig(t, cfg)
}

// TestShareGroupOutlivesMembersAndRestarts: a share group is kept in
// __consumer_offsets. After a broker restart it is back with its epoch
// and its member, who heartbeats on at its epoch; once the member left
// it is listed Empty (and only under that state filter), describes, and
// its id is still refused to classic and consumer groups and by the
// offset APIs; it survives
// another restart at its epoch; DeleteGroups deletes it for good, and a
// new group of its id starts at epoch 1.
func TestShareGroupOutlivesMembersAndRestarts(t *testing.T) {
	cfg, _ := shareTestConfig(t, time.Second, nil)
	s := startServerConfig(t, cfg)
	createTopic(t, newClient(t, s), "q", 1, nil)
	id := [16]byte(s.topic("q").id)
	m1 := &shareRaw{t: t, rc: dialRaw(t, s), group: "pg", member: "m1", topic: id}
	m2 := &shareRaw{t: t, rc: dialRaw(t, s), group: "pg", member: "m2", topic: id}
	m1.heartbeat(0)
	hb := m2.heartbeat(0)
	if r := m1.heartbeat(-1); hb.ErrorCode != 0 || r.ErrorCode != 0 {
		t.Fatalf("m2 joins, m1 leaves: %+v, %+v", hb, r)
	}
	epoch := describeShareGroup(t, s, "pg").GroupEpoch
	wantShareGroup(t, "before the restart", describeShareGroup(t, s, "pg"), "Stable", epoch, "m2")

	s = restartServer(t, s, cfg)
	wantShareGroup(t, "after a restart", describeShareGroup(t, s, "pg"), "Stable", epoch, "m2")
	m2 = &shareRaw{t: t, rc: dialRaw(t, s), group: "pg", member: "m2", topic: id}
	// m2 is known at its epoch; m1's leave moved the group epoch, so
	// the heartbeat brings m2 to it.
	if r := m2.heartbeat(hb.MemberEpoch); r.ErrorCode != 0 || r.MemberEpoch != epoch {
		t.Fatalf("m2's heartbeat after the restart: %v epoch %d, want the group epoch %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch, epoch)
	}
	if r := m2.heartbeat(-1); r.ErrorCode != 0 {
		t.Fatalf("m2 leaves: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	epoch++
	wantShareGroup(t, "without members", describeShareGroup(t, s, "pg"), "Empty", epoch)
	if got := listShareGroups(t, s); got["pg"] != "Empty" {
		t.Errorf("ListGroups: %v, want pg Empty", got)
	}
	if got := listShareGroups(t, s, "Stable"); len(got) != 0 {
		t.Errorf("ListGroups of Stable groups: %v, want none", got)
	}
	if got := listShareGroups(t, s, "empty"); got["pg"] != "Empty" {
		t.Errorf("ListGroups of Empty groups: %v, want pg", got)
	}
	admin := newClient(t, s)
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "pg", "consumer", 10000, 10000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	if resp := brokerRequest(t, s, admin, join).(*kmsg.JoinGroupResponse); resp.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Errorf("JoinGroup of an Empty share group's id: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	chb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	chb.Group, chb.MemberID, chb.RebalanceTimeoutMillis, chb.SubscribedTopicNames = "pg", "c-1", 10000, []string{"q"}
	if resp := brokerRequest(t, s, admin, chb).(*kmsg.ConsumerGroupHeartbeatResponse); resp.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("ConsumerGroupHeartbeat of an Empty share group's id: %v", kerr.ErrorForCode(resp.ErrorCode))
	}

	refuseOffsetAPIs(t, s, "pg")

	s = restartServer(t, s, cfg)
	wantShareGroup(t, "Empty, after a restart", describeShareGroup(t, s, "pg"), "Empty", epoch)
	if got := deleteGroupCodes(t, s, "pg"); got["pg"] != 0 {
		t.Fatalf("DeleteGroups: %v", kerr.ErrorForCode(got["pg"]))
	}
	if g := describeShareGroup(t, s, "pg"); g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("describe after the delete: %+v", g)
	}
	s = restartServer(t, s, cfg)
	if g := describeShareGroup(t, s, "pg"); g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("describe after the delete and a restart: %+v", g)
	}
	if got := listShareGroups(t, s); len(got) != 0 {
		t.Errorf("ListGroups after the delete and a restart: %v", got)
	}
	m1 = &shareRaw{t: t, rc: dialRaw(t, s), group: "pg", member: "m1", topic: id}
	if r := m1.heartbeat(0); r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Errorf("a join after the delete: %v epoch %d, want a new group at epoch 1", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch)
	}
}

// TestShareGroupFollowsCoordinatorMove: three brokers on a real
// ZooKeeper, __consumer_offsets with three replicas, cleaned by the log
// cleaner. Members come and go (enough records for the partition to
// roll and be compacted); the share group's coordinator moves (a
// preferred-replica election), and the new one has the group at its
// epoch with its member, who heartbeats on there without joining again;
// after it leaves, the group is Empty on the new coordinator, and after
// a second move still there.
func TestShareGroupFollowsCoordinatorMove(t *testing.T) {
	srv := offsetsCluster(t)
	createTopic(t, newClient(t, srv[0]), "q", 1, nil)
	waitFor(t, "topic q on every broker", func() bool {
		for _, s := range srv {
			if s.topic("q") == nil {
				return false
			}
		}
		return true
	})
	id := [16]byte(srv[0].topic("q").id)
	p := group.PartitionFor("mg", srv[0].groups.NumPartitions())
	// FindCoordinator creates __consumer_offsets, as a client's first
	// lookup does.
	admin := newClient(t, srv[0])
	poll.Until(t, 30*time.Second, "FindCoordinator of mg answers", func() bool {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = "mg"
		resp, err := req.RequestWith(testCtx(t), admin)
		return err == nil && resp.ErrorCode == 0
	})
	coordinator := func() *Server {
		var c *Server
		waitFor(t, "a loaded coordinator of the group's partition", func() bool {
			lead := partitionInfo(srv[0], group.Topic, int32(p)).State.Leader
			for _, s := range srv {
				if s.cfg.BrokerID == lead && coordinatorLoaded(s, p) {
					c = s
					return true
				}
			}
			return false
		})
		return c
	}
	c := coordinator()
	m := &shareRaw{t: t, rc: dialRaw(t, c), group: "mg", member: "m", topic: id}
	if hb := m.heartbeat(0); hb.ErrorCode != 0 {
		t.Fatalf("join: %v", kerr.ErrorForCode(hb.ErrorCode))
	}
	for i := range 30 {
		x := &shareRaw{t: t, rc: m.rc, corr: 1000 * int32(i+1), group: "mg", member: fmt.Sprintf("x%d", i), topic: id}
		if j, l := x.heartbeat(0), x.heartbeat(-1); j.ErrorCode != 0 || l.ErrorCode != 0 {
			t.Fatalf("x%d joins and leaves: %v, %v", i, kerr.ErrorForCode(j.ErrorCode), kerr.ErrorForCode(l.ErrorCode))
		}
	}
	m.corr = 100000
	hb := m.heartbeat(1)
	if hb.ErrorCode != 0 || hb.MemberEpoch != 61 {
		t.Fatalf("m's heartbeat after 30 joins and leaves: %v epoch %d, want 61", kerr.ErrorForCode(hb.ErrorCode), hb.MemberEpoch)
	}
	waitOffsetsCleaned(t, srv, p)
	wantShareGroup(t, "before the move", describeShareGroup(t, c, "mg"), "Stable", hb.MemberEpoch, "m")

	electCoordinator(t, srv, p)
	c = coordinator()
	wantShareGroup(t, "after a move", describeShareGroup(t, c, "mg"), "Stable", hb.MemberEpoch, "m")
	m = &shareRaw{t: t, rc: dialRaw(t, c), group: "mg", member: "m", topic: id}
	if r := m.heartbeat(hb.MemberEpoch); r.ErrorCode != 0 || r.MemberEpoch != hb.MemberEpoch {
		t.Fatalf("heartbeat to the new coordinator: %v epoch %d, want %d", kerr.ErrorForCode(r.ErrorCode), r.MemberEpoch, hb.MemberEpoch)
	}
	if r := m.heartbeat(-1); r.ErrorCode != 0 {
		t.Fatalf("leave: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	wantShareGroup(t, "Empty on the new coordinator", describeShareGroup(t, c, "mg"), "Empty", hb.MemberEpoch+1)

	electCoordinator(t, srv, p)
	c = coordinator()
	wantShareGroup(t, "Empty after a second move", describeShareGroup(t, c, "mg"), "Empty", hb.MemberEpoch+1)
	if got := listShareGroups(t, c); got["mg"] != "Empty" {
		t.Errorf("ListGroups on the coordinator: %v, want mg Empty", got)
	}
}
