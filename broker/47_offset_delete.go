package broker

import (
	"context"
	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetDelete: v0
//
// Behavior (group/delete.go has the details):
// * Deletes committed offsets of a group (KIP-496), tombstones appended
//   before the answer: any offset of an Empty group; in a "consumer"
//   group with members only those of topics no member subscribes to
//   (GROUP_SUBSCRIBED_TO_TOPIC otherwise). An unknown group, or a share
//   group's id (as Kafka): GROUP_ID_NOT_FOUND.
// * Like OffsetCommit, the appends finish even when the client
//   disconnects.
// * Authorization (with an authorizer, as Kafka): DELETE on the group,
//   else GROUP_AUTHORIZATION_FAILED; READ on each topic, else its
//   partitions are TOPIC_AUTHORIZATION_FAILED while the others' offsets
//   are deleted.

func init() { registerGroupAPI(47, handleOffsetDelete) }

func handleOffsetDelete(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.OffsetDeleteRequest)
	// Kafka: DELETE on the group, else GROUP_AUTHORIZATION_FAILED; READ on
	// each topic, else its partitions are TOPIC_AUTHORIZATION_FAILED and
	// the others' offsets are deleted.
	if !s.authorize(r, acl.OpDelete, acl.Group(req.Group)) {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return reply{msg: resp}, nil
	}
	if s.isShareGroup(req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return reply{msg: resp}, nil
	}
	mayRead := s.topicAuthorizer(r, acl.OpRead)
	allowed := *req
	allowed.Topics = nil
	var denied []kmsg.OffsetDeleteResponseTopic
	for _, t := range req.Topics {
		if mayRead(t.Topic) {
			allowed.Topics = append(allowed.Topics, t)
			continue
		}
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		denied = append(denied, rt)
	}
	resp := s.groups.OffsetDelete(context.WithoutCancel(groupCtx(r)), &allowed)
	resp.Topics = append(resp.Topics, denied...)
	return reply{msg: resp}, nil
}
