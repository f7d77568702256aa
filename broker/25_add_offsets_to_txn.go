package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/broker/group"
	"github.com/stratastream/strata/broker/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AddOffsetsToTxn: v0-4
//
// Behavior:
// * Adds the group's partition of __consumer_offsets to the producer's
//   transaction, so that its TxnOffsetCommit offsets get the
//   transaction's marker. Errors as AddPartitionsToTxn's, one for the
//   request; PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2.
// * Authorization (as Kafka): WRITE on the transactional id
//   (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the group
//   (GROUP_AUTHORIZATION_FAILED).
//
// Version notes:
// * v2: PRODUCER_FENCED
// * v3: flexible versions
// * v4: same as v3 (KIP-890 client error handling)

func init() { register(25, 0, 4, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	switch {
	case !s.authorize(r, acl.OpWrite, acl.TransactionalID(req.TransactionalID)):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case !s.authorize(r, acl.OpRead, acl.Group(req.Group)):
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
	case s.txns == nil || s.groups == nil:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	default:
		tp := txn.TopicPartition{Topic: group.Topic, Partition: int32(s.groups.PartitionFor(req.Group))}
		resp.ErrorCode = txnErr(s.txns.AddPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, []txn.TopicPartition{tp}), req.Version, 2)
	}
	return reply{msg: resp}, nil
}
