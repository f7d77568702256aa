package broker

import (
	"context"
	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit: v0-8
//
// Behavior (group/commit.go has the details):
// * Committed by the group coordinator to the group's partition of
//   __consumer_offsets; the answer leaves after the append (fsynced as
//   that partition's flush settings say), and the offsets are visible to
//   OffsetFetch from then on. Metadata is stored as given, "" for null.
// * A partition this broker does not have: UNKNOWN_TOPIC_OR_PARTITION, as
//   Kafka. Metadata longer than offset.metadata.max.bytes:
//   OFFSET_METADATA_TOO_LARGE.
// * Generation -1 with no member id is a "simple" commit, accepted while
//   the group has no members; a member commit must name a current member
//   of the current generation (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
//   FENCED_INSTANCE_ID; REBALANCE_IN_PROGRESS while the group waits for
//   its assignment).
// * The commit is not abandoned when the client disconnects or the server
//   shuts down: the append finishes and the answer goes out if the
//   connection is still there.
// * Authorization (with an authorizer, as Kafka): READ on the group, else
//   every partition is GROUP_AUTHORIZATION_FAILED; READ on each topic,
//   else its partitions are TOPIC_AUTHORIZATION_FAILED while the others
//   are committed.
// * A share group's id: every partition GROUP_ID_NOT_FOUND, as Kafka.
//
// Version notes:
// * v0: no generation or member id: a simple commit. Kafka 3.9 keeps v0
//   commits in ZooKeeper, apart from the others (an OffsetFetch v1+ does
//   not see them); Strata keeps them in __consumer_offsets like every
//   commit, so every version sees them.
// * v1: generation, member id and a commit timestamp per partition
// * v2-4: RetentionTimeMillis (sets the offsets' expire time)
// * v5: no retention time
// * v6: committed leader epoch
// * v7: GroupInstanceID
// * v8: flexible versions
// * v9: KIP-848 consumer groups commit with their member id and member
//   epoch (STALE_MEMBER_EPOCH, FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID)

func init() { registerGroupAPI(8, handleOffsetCommit) }

func handleOffsetCommit(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.OffsetCommitRequest)
	// Kafka: READ on the group, else every partition is
	// GROUP_AUTHORIZATION_FAILED; READ on each topic, else its partitions
	// are TOPIC_AUTHORIZATION_FAILED and the others are committed.
	if !s.authorize(r, acl.OpRead, acl.Group(req.Group)) {
		return reply{msg: offsetCommitErrors(req, req.Topics, kerr.GroupAuthorizationFailed.Code)}, nil
	}
	if s.isShareGroup(req.Group) {
		return reply{msg: offsetCommitErrors(req, req.Topics, kerr.GroupIDNotFound.Code)}, nil
	}
	mayRead := s.topicAuthorizer(r, acl.OpRead)
	allowed := *req
	allowed.Topics = nil
	var denied []kmsg.OffsetCommitRequestTopic
	for _, t := range req.Topics {
		if mayRead(t.Topic) {
			allowed.Topics = append(allowed.Topics, t)
		} else {
			denied = append(denied, t)
		}
	}
	if len(denied) == 0 {
		return reply{msg: s.groups.OffsetCommit(context.WithoutCancel(groupCtx(r)), req)}, nil
	}
	resp := offsetCommitErrors(req, denied, kerr.TopicAuthorizationFailed.Code)
	if len(allowed.Topics) > 0 {
		committed := s.groups.OffsetCommit(context.WithoutCancel(groupCtx(r)), &allowed)
		resp.Topics = append(committed.Topics, resp.Topics...)
	}
	return reply{msg: resp}, nil
}

// offsetCommitErrors answers code for every partition of topics.
func offsetCommitErrors(req *kmsg.OffsetCommitRequest, topics []kmsg.OffsetCommitRequestTopic, code int16) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
