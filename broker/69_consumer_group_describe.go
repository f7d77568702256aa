package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/broker/group"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupDescribe: v0-1
//
// Behavior (group/consumer_describe.go has the details):
// * Describes KIP-848 consumer groups: state, group and assignment
//   epochs, assignor, and each member's epoch, subscription, current and
//   target assignment. A classic or unknown group: GROUP_ID_NOT_FOUND.
// * Authorization (with an authorizer, as Kafka): DESCRIBE on each group,
//   else that group alone is GROUP_AUTHORIZATION_FAILED; a group whose
//   members are assigned a topic the principal may not DESCRIBE is
//   TOPIC_AUTHORIZATION_FAILED.
// * IncludeAuthorizedOperations: the group operations the principal is
//   allowed.
//
// Version notes:
// * v1: MemberType (KIP-1099)

func init() { registerGroupAPI(69, handleConsumerGroupDescribe) }

func handleConsumerGroupDescribe(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.ConsumerGroupDescribeRequest)
	resp := s.groups.ConsumerGroupDescribe(groupCtx(r), req)
	if s.authz == nil {
		return reply{msg: resp}, nil
	}
	names := s.groupTopicSnapshot()
	allowed := s.topicAuthorizer(r, acl.OpDescribe)
	for i := range resp.Groups {
		g := &resp.Groups[i]
		if !s.authorize(r, acl.OpDescribe, acl.Group(g.Group)) {
			*g = kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group = req.Groups[i]
			g.ErrorCode = kerr.GroupAuthorizationFailed.Code
			continue
		}
		if g.ErrorCode != 0 {
			continue
		}
		if req.IncludeAuthorizedOperations {
			g.AuthorizedOperations = s.authorizedOperations(r, acl.Group(g.Group))
		}
		if !consumerGroupTopicsAllowed(g, names, allowed) {
			id := g.Group
			*g = kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group = id
			g.ErrorCode = kerr.TopicAuthorizationFailed.Code
		}
	}
	return reply{msg: resp}, nil
}

// consumerGroupTopicsAllowed reports whether every topic in the group's
// current and target assignments may be described (a topic deleted since
// is left out).
func consumerGroupTopicsAllowed(g *kmsg.ConsumerGroupDescribeResponseGroup, topics *group.TopicSnapshot, allowed func(string) bool) bool {
	for _, m := range g.Members {
		for _, a := range []kmsg.Assignment{m.Assignment, m.TargetAssignment} {
			for _, tp := range a.TopicPartitions {
				if t, ok := topics.TopicByID(tp.TopicID); ok && !allowed(t.Name) {
					return false
				}
			}
		}
	}
	return true
}
