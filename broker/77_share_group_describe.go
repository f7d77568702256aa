package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareGroupDescribe: v0-1 (KIP-932)
//
// Behavior:
// * Per group: NOT_COORDINATOR unless this broker coordinates it;
//   GROUP_ID_NOT_FOUND for no share group of that id (a classic or
//   consumer group's id included, as Kafka); else its state (Stable with
//   members, Empty without: a share group outlives its members), group
//   and assignment epochs, assignor "simple" and members with their
//   subscriptions and assignments (topic id and name).
// * AuthorizedOperations is not computed (INT32_MIN, "not asked").
// * Authorization (with an authorizer): DESCRIBE on each group, else
//   GROUP_AUTHORIZATION_FAILED for it.
//
// Version notes:
// * v1: no change to the schema

func init() { register(77, 0, 1, handleShareGroupDescribe) }

func handleShareGroupDescribe(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.ShareGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ShareGroupDescribeResponse)
	topics := shareTopics{s.coord.Snapshot()}
	for _, id := range req.GroupIDs {
		var rg kmsg.ShareGroupDescribeResponseGroup
		switch {
		case !s.authorize(r, acl.OpDescribe, acl.Group(id)):
			rg = kmsg.NewShareGroupDescribeResponseGroup()
			rg.GroupID, rg.ErrorCode = id, kerr.GroupAuthorizationFailed.Code
		case s.shareCoordinatorCode(id) != 0:
			rg = kmsg.NewShareGroupDescribeResponseGroup()
			rg.GroupID, rg.ErrorCode = id, s.shareCoordinatorCode(id)
		default:
			rg = s.shares.Groups.Describe(id, topics)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return reply{msg: resp}, nil
}
