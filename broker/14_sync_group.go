package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup: v0-5
//
// Behavior (group/sync.go has the details):
// * Followers wait for the leader's SyncGroup; the leader's assignment is
//   written to __consumer_offsets, then every member gets its own part
//   (members the leader left out get an empty assignment) and the group
//   is Stable. This connection is blocked while the request waits.
// * Outside the current generation or membership: ILLEGAL_GENERATION,
//   UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID; during PreparingRebalance
//   REBALANCE_IN_PROGRESS; v5 with another protocol type or name:
//   INCONSISTENT_GROUP_PROTOCOL.
// * When the client disconnects, or the server shuts down, while the sync
//   waits, no answer is sent and the connection is closed; the member is
//   dropped if it does not sync again within the rebalance timeout.
// * Authorization (with an authorizer): READ on the group, else
//   GROUP_AUTHORIZATION_FAILED with an empty assignment.
//
// Version notes:
// * v1: ThrottleMillis
// * v3: InstanceID
// * v4: flexible versions
// * v5: ProtocolType and Protocol

func init() { registerGroupAPI(14, handleSyncGroup) }

func handleSyncGroup(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.SyncGroupRequest)
	if !s.authorize(r, acl.OpRead, acl.Group(req.Group)) {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		resp.MemberAssignment = []byte{}
		return reply{msg: resp}, nil
	}
	return blockingGroupReply(r, s.groups.SyncGroup(groupCtx(r), req)), nil
}
