package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// JoinGroup: v0-7
//
// Behavior (group/join.go has the details):
// * Blocks this connection until the group's join phase completes (every
//   member rejoined, the rebalance timeout passed, or for a new group
//   group.initial.rebalance.delay.ms after the last newcomer), as Kafka
//   answers requests of one connection one at a time. The leader alone
//   gets the member list; the protocol chosen is one every member
//   supports.
// * v4+: a dynamic member without a member id gets one back with
//   MEMBER_ID_REQUIRED and joins again with it (KIP-394). Static members
//   (group.instance.id, v5+) replace their previous member.
// * A session timeout outside group.min.session.timeout.ms and
//   group.max.session.timeout.ms: INVALID_SESSION_TIMEOUT. No common
//   protocol: INCONSISTENT_GROUP_PROTOCOL.
// * When the client disconnects, or the server shuts down, while the join
//   waits, the member is withdrawn from the rebalance and no answer is
//   sent; the connection is closed.
// * A consumer group (KIP-848) with members takes a classic member in
//   (online migration, group/consumer_classic.go): the server assigns,
//   the join is answered at once with the member epoch as generation and
//   no leader, and the member's SyncGroup gets its assignment.
// * A share group's id (with members or Empty) is
//   INCONSISTENT_GROUP_PROTOCOL, as Kafka: one id namespace for every
//   group type.
// * Member ids are "<client.id>-<uuid>"; the client id and the peer's
//   address show in DescribeGroups.
// * Authorization (with an authorizer): READ on the group, else
//   GROUP_AUTHORIZATION_FAILED (generation -1, no member id).
//
// Version notes:
// * v1: RebalanceTimeoutMillis
// * v2: ThrottleMillis
// * v4: MEMBER_ID_REQUIRED
// * v5: InstanceID (static membership)
// * v6: flexible versions
// * v7: ProtocolType and ProtocolName in the response

func init() { registerGroupAPI(11, handleJoinGroup) }

func handleJoinGroup(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.JoinGroupRequest)
	if !s.authorize(r, acl.OpRead, acl.Group(req.Group)) {
		return joinGroupError(req, kerr.GroupAuthorizationFailed.Code), nil
	}
	if s.shares != nil && s.shares.Groups.Exists(req.Group) {
		return joinGroupError(req, kerr.InconsistentGroupProtocol.Code), nil // as Kafka: a share group's id is not a classic group's
	}
	return blockingGroupReply(r, s.groups.JoinGroup(groupCtx(r), req)), nil
}

// joinGroupError is a JoinGroup answer of only an error.
func joinGroupError(req *kmsg.JoinGroupRequest, code int16) reply {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.ErrorCode = code
	resp.Generation = -1
	if req.Version < 7 {
		resp.Protocol = kmsg.StringPtr("")
	}
	return reply{msg: resp}
}
