package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups: v0-5
//
// Behavior (group/describe.go has the details):
// * Each group's state (Empty, PreparingRebalance, CompletingRebalance,
//   Stable, Dead), protocol type and members with their client id and
//   host; a Stable group also shows its protocol and each member's
//   metadata and assignment, as in Kafka.
// * A KIP-848 consumer group as Kafka 4 shows it: protocol type
//   "consumer", its assignor as protocol, its state (Empty, Assigning,
//   Reconciling, Stable), each member's subscription and assignment in the
//   classic consumer encoding.
// * An unknown group is "Dead" with no error (GROUP_ID_NOT_FOUND is v6+).
// * Authorization (with an authorizer, as Kafka): DESCRIBE on each group,
//   else that group alone is GROUP_AUTHORIZATION_FAILED.
// * IncludeAuthorizedOperations (v3+): the group operations the principal
//   is allowed (every one without an authorizer).
//
// Version notes:
// * v1: ThrottleMillis
// * v3: authorized operations
// * v4: InstanceID
// * v5: flexible versions

func init() { registerGroupAPI(15, handleDescribeGroups) }

func handleDescribeGroups(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.DescribeGroupsRequest)
	// Kafka: each group needs DESCRIBE, else it is answered
	// GROUP_AUTHORIZATION_FAILED alone; the others are described, in the
	// request's order, with their authorized operations (v3+) when asked.
	allowed := *req
	allowed.Groups = nil
	for _, id := range req.Groups {
		if s.authorize(r, acl.OpDescribe, acl.Group(id)) {
			allowed.Groups = append(allowed.Groups, id)
		}
	}
	described := s.groups.DescribeGroups(groupCtx(r), &allowed)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	next := 0
	for _, id := range req.Groups {
		if next < len(allowed.Groups) && next < len(described.Groups) && allowed.Groups[next] == id && described.Groups[next].Group == id {
			g := described.Groups[next]
			next++
			if req.IncludeAuthorizedOperations && req.Version >= 3 && g.ErrorCode == 0 {
				g.AuthorizedOperations = s.authorizedOperations(r, acl.Group(id))
			}
			resp.Groups = append(resp.Groups, g)
			continue
		}
		g := kmsg.NewDescribeGroupsResponseGroup()
		g.Group = id
		g.ErrorCode = kerr.GroupAuthorizationFailed.Code
		resp.Groups = append(resp.Groups, g)
	}
	return reply{msg: resp}, nil
}
