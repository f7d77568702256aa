package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareGroupHeartbeat: v0-1 (KIP-932)
//
// Behavior (package share's doc has the details):
// * Served by the group's coordinator (the leader of its partition of
//   __consumer_offsets); elsewhere NOT_COORDINATOR.
// * MemberEpoch 0 joins with the client's MemberID (INVALID_REQUEST when
//   empty or longer than 36) and SubscribedTopicNames (required); -1
//   leaves, and the member's records on this broker are released; any
//   other epoch must be the member's current or previous one, else
//   FENCED_MEMBER_EPOCH; an unknown member is UNKNOWN_MEMBER_ID and a
//   heartbeat to a group that does not exist GROUP_ID_NOT_FOUND.
// * The simple assignor spreads each subscribed topic's partitions over
//   its subscribers; with more subscribers than partitions a partition
//   goes to several. The member epoch moves to the group's assignment
//   epoch on the member's heartbeat; the assignment is sent on join, on
//   a full request (SubscribedTopicNames set) and when the epoch moved.
// * HeartbeatIntervalMillis is the group's share.heartbeat.interval.ms;
//   a member silent for share.session.timeout.ms is removed. The group
//   outlives its members (Empty) until DeleteGroups deletes it.
// * Every change of the group (created, members, subscriptions, epochs,
//   assignments) is appended to __consumer_offsets with Kafka's
//   ShareGroup* records before the answer; a failed append is
//   NOT_COORDINATOR. The coordinator that loads the partition next
//   restores the group with its epochs and members (their sessions
//   restarted), so members heartbeat on after a coordinator move.
// * group.share.max.size and group.share.max.groups:
//   GROUP_MAX_SIZE_REACHED.
// * A group id a classic group uses is GROUP_ID_NOT_FOUND on join, as
//   Kafka ("not a share group").
// * Authorization (with an authorizer): READ on the group, else
//   GROUP_AUTHORIZATION_FAILED.
//
// Version notes:
// * v1: no change to the schema (Kafka 4.1: KIP-1222's share groups GA)

func init() { register(76, 0, 1, handleShareGroupHeartbeat) }

func handleShareGroupHeartbeat(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.ShareGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	fail := func(code int16) (reply, error) {
		resp.ErrorCode = code
		return reply{msg: resp}, nil
	}
	if !s.authorize(r, acl.OpRead, acl.Group(req.GroupID)) {
		return fail(kerr.GroupAuthorizationFailed.Code)
	}
	if code := s.shareCoordinatorCode(req.GroupID); code != 0 {
		return fail(code)
	}
	if req.MemberEpoch == 0 && !s.shares.Groups.Exists(req.GroupID) && s.classicGroupExists(r, req.GroupID) {
		return fail(kerr.GroupIDNotFound.Code)
	}
	host := ""
	if r.conn != nil {
		host = r.conn.nc.RemoteAddr().String()
	}
	out := s.shares.Groups.Heartbeat(groupCtx(r), req, nonNilString(r.clientID), host, shareTopics{s.coord.Snapshot()})
	return reply{msg: out}, nil
}

// classicGroupExists reports whether the consumer group coordinator has
// a group of that id.
func (s *Server) classicGroupExists(r *request, id string) bool {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{id}
	resp := s.groups.DescribeGroups(groupCtx(r), req)
	return len(resp.Groups) == 1 && resp.Groups[0].ErrorCode == 0 && resp.Groups[0].State != "Dead"
}

// nonNilString returns *p, or "" for nil.
func nonNilString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
