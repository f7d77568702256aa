package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat: v0-4
//
// Behavior (group/heartbeat.go has the details):
// * Keeps a member's session alive. REBALANCE_IN_PROGRESS tells it to
//   rejoin; UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION and FENCED_INSTANCE_ID
//   as Kafka.
// * Authorization (with an authorizer): READ on the group, else
//   GROUP_AUTHORIZATION_FAILED.
//
// Version notes:
// * v1: ThrottleMillis
// * v3: InstanceID
// * v4: flexible versions

func init() { registerGroupAPI(12, handleHeartbeat) }

func handleHeartbeat(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.HeartbeatRequest)
	if !s.authorize(r, acl.OpRead, acl.Group(req.Group)) {
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return reply{msg: resp}, nil
	}
	return reply{msg: s.groups.Heartbeat(groupCtx(r), req)}, nil
}
