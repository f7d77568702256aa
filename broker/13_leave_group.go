package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LeaveGroup: v0-4
//
// Behavior (group/leave.go has the details):
// * Removes the member (v0-2) or the listed members (v3+, each with its
//   own error; by instance id alone for an administrator removing a
//   static member). A group with members left rebalances.
// * Unknown members: UNKNOWN_MEMBER_ID; a fenced static member:
//   FENCED_INSTANCE_ID.
// * Authorization (with an authorizer): READ on the group, else
//   GROUP_AUTHORIZATION_FAILED.
//
// Version notes:
// * v1: ThrottleMillis
// * v3: Members (batch, KIP-345)
// * v4: flexible versions

func init() { registerGroupAPI(13, handleLeaveGroup) }

func handleLeaveGroup(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.LeaveGroupRequest)
	if !s.authorize(r, acl.OpRead, acl.Group(req.Group)) {
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return reply{msg: resp}, nil
	}
	return reply{msg: s.groups.LeaveGroup(groupCtx(r), req)}, nil
}
