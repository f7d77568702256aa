package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// DescribeGroups: v0-5
//
// Behavior (group/describe.go has the details):
// * Each group's state (Empty, PreparingRebalance, CompletingRebalance,
//   Stable, Dead), protocol type and members with their client id and
//   host; a Stable group also shows its protocol and each member's
//   metadata and assignment, as in Kafka.
// * An unknown group is "Dead" with no error (GROUP_ID_NOT_FOUND is v6+).
// * IncludeAuthorizedOperations (v3+): every group operation, as there is
//   no authorizer.
//
// Version notes:
// * v1: ThrottleMillis
// * v3: authorized operations
// * v4: InstanceID
// * v5: flexible versions

func init() { registerGroupAPI(15, handleDescribeGroups) }

func handleDescribeGroups(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.DescribeGroupsRequest)
	return reply{msg: s.groups.DescribeGroups(groupCtx(r), req)}, nil
}
