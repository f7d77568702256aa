package broker

import (
	"context"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/broker/group"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TxnOffsetCommit: v0-5
//
// Behavior (group/txn.go has the details):
// * The consumed offsets of a transactional producer (sendOffsetsToTransaction),
//   sent to the group's coordinator after AddOffsetsToTxn. They are
//   appended to the group's partition of __consumer_offsets as one
//   transactional batch of the producer (its id and epoch, sequence -1)
//   and stay invisible to OffsetFetch until the transaction's COMMIT
//   marker lands on that partition; an ABORT drops them. OffsetFetch with
//   require_stable answers UNSTABLE_OFFSET_COMMIT meanwhile.
// * Before anything is written, the partition of __consumer_offsets is
//   verified against the producer's transaction coordinator (KIP-890):
//   a partition not in the ongoing transaction answers INVALID_TXN_STATE
//   (v4+: TRANSACTION_ABORTABLE, KIP-890, which Kafka passes through
//   its offset commit error conversion unchanged),
//   an old epoch INVALID_PRODUCER_EPOCH, and so on, converted as Kafka
//   converts offset commit errors.
// * v3 (KIP-447) carries the member: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
//   FENCED_INSTANCE_ID as for OffsetCommit; without a member (v0-v2) any
//   group is committed to. An empty group id: INVALID_GROUP_ID; a share
//   group's id: every partition GROUP_ID_NOT_FOUND, as Kafka.
// * A partition that does not exist: UNKNOWN_TOPIC_OR_PARTITION; metadata
//   longer than offset.metadata.max.bytes: OFFSET_METADATA_TOO_LARGE.
// * Authorization (with an authorizer, as Kafka): WRITE on the
//   transactional id, else every partition is
//   TRANSACTIONAL_ID_AUTHORIZATION_FAILED; READ on the group, else
//   GROUP_AUTHORIZATION_FAILED; READ on each topic, else its partitions are
//   TOPIC_AUTHORIZATION_FAILED and the others are committed.
// * v0-1: COORDINATOR_LOAD_IN_PROGRESS is answered COORDINATOR_NOT_AVAILABLE,
//   which clients before Kafka 2.0 retry (Kafka does the same).
//
// Version notes:
// * v2: committed leader epoch
// * v3: flexible versions; GenerationID, MemberID, GroupInstanceID (KIP-447)
// * v4: TRANSACTION_ABORTABLE (KIP-890) where v0-3 get INVALID_TXN_STATE
// * v5: transaction version 2 (KIP-890 part 2): while transaction.version
//   2 is finalized the offsets partition is added to the transaction
//   (Kafka's implicit AddOffsetsToTxn) instead of verified; else as v4

// txnOffsetCommitAbortableVersion is the first TxnOffsetCommit version
// that may be answered TRANSACTION_ABORTABLE (KIP-890).
const txnOffsetCommitAbortableVersion = 4

// txnOffsetCommitV2Version is the first TxnOffsetCommit version of
// transaction version 2 (KIP-890 part 2): with transaction.version 2
// finalized, the group's partition of __consumer_offsets is added to the
// transaction (the client sent no AddOffsetsToTxn) instead of verified.
const txnOffsetCommitV2Version = 5

func init() { registerGroupAPI(28, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.TxnOffsetCommitRequest)
	if !s.authorize(r, acl.OpWrite, acl.TransactionalID(req.TransactionalID)) {
		return reply{msg: txnOffsetCommitErrors(req, req.Topics, kerr.TransactionalIDAuthorizationFailed.Code)}, nil
	}
	if !s.authorize(r, acl.OpRead, acl.Group(req.Group)) {
		return reply{msg: txnOffsetCommitErrors(req, req.Topics, kerr.GroupAuthorizationFailed.Code)}, nil
	}
	if s.isShareGroup(req.Group) {
		return reply{msg: txnOffsetCommitErrors(req, req.Topics, kerr.GroupIDNotFound.Code)}, nil
	}
	mayRead := s.topicAuthorizer(r, acl.OpRead)
	allowed := *req
	allowed.Topics = nil
	var denied []kmsg.TxnOffsetCommitRequestTopic
	for _, t := range req.Topics {
		if mayRead(t.Topic) {
			allowed.Topics = append(allowed.Topics, t)
		} else {
			denied = append(denied, t)
		}
	}
	resp := txnOffsetCommitErrors(req, denied, kerr.TopicAuthorizationFailed.Code)
	if len(allowed.Topics) > 0 {
		verify := func(ctx context.Context, partition int) error {
			chk := txnCheck{abortable: req.Version >= txnOffsetCommitAbortableVersion, add: req.Version >= txnOffsetCommitV2Version && s.transactionsV2()}
			return s.verifyTxnPartition(ctx, chk, req.TransactionalID, req.ProducerID, req.ProducerEpoch, group.Topic, int32(partition))
		}
		// As for OffsetCommit, the append is not abandoned when the
		// client goes away.
		committed := s.groups.TxnOffsetCommit(context.WithoutCancel(groupCtx(r)), &allowed, verify)
		resp.Topics = append(committed.Topics, resp.Topics...)
	}
	return reply{msg: resp}, nil
}

// txnOffsetCommitErrors answers code for every partition of topics.
func txnOffsetCommitErrors(req *kmsg.TxnOffsetCommitRequest, topics []kmsg.TxnOffsetCommitRequestTopic, code int16) *kmsg.TxnOffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, t := range topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
