package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EndTxn: v0-5
//
// Behavior:
// * Commits or aborts the producer's transaction (package txn): answered
//   once PrepareCommit or PrepareAbort is in __transaction_state (acks=all);
//   the markers then go to every partition's leader and CompleteCommit or
//   CompleteAbort is written. The producer's next AddPartitionsToTxn
//   gets CONCURRENT_TRANSACTIONS until then, and retries.
// * A retry of the decision taken answers NONE once completed,
//   CONCURRENT_TRANSACTIONS before; the other decision, or no ongoing
//   transaction, INVALID_TXN_STATE. A producer with another id
//   INVALID_PRODUCER_ID_MAPPING; an older epoch PRODUCER_FENCED
//   (INVALID_PRODUCER_EPOCH before v2). NOT_COORDINATOR,
//   COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE as the
//   coordinator answers.
// * Authorization: WRITE on the transactional id
//   (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
// * v5 with transaction.version 2 finalized (KIP-890 part 2): every
//   commit and abort bumps the producer epoch (a new producer id with
//   epoch 0 when the epoch would be exhausted), and the response carries
//   the id and epoch of the producer's next transaction; the markers are
//   written with the bumped epoch (WriteTxnMarkers v2), so a late write
//   of the ended transaction's epoch is refused. A retry with the epoch
//   before the bump answers as the first EndTxn (NONE with the current
//   id and epoch once completed, CONCURRENT_TRANSACTIONS before); an
//   abort with no transaction ongoing is allowed and bumps the epoch (as
//   Kafka 4.x, which franz-go relies on). v5 while transaction.version is
//   below 2 answers as v4, with the producer's id and epoch unchanged in
//   the response.
//
// Version notes:
// * v2: PRODUCER_FENCED
// * v3: flexible versions
// * v4: same as v3 (KIP-890 client error handling)
// * v5: ProducerID and ProducerEpoch in the response (transaction version 2)

// endTxnV2Version is the first EndTxn version of transaction version 2.
const endTxnV2Version = 5

func init() { register(26, 0, endTxnV2Version, handleEndTxn) }

func handleEndTxn(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	switch {
	case !s.authorize(r, acl.OpWrite, acl.TransactionalID(req.TransactionalID)):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case s.txns == nil:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	case req.Version >= endTxnV2Version && s.transactionsV2():
		pid, epoch, ke := s.txns.EndTxnV2(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit)
		resp.ErrorCode = txnErr(ke, req.Version, 2)
		if ke == nil {
			resp.ProducerID, resp.ProducerEpoch = pid, epoch
		}
	default:
		ke := s.txns.EndTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit)
		resp.ErrorCode = txnErr(ke, req.Version, 2)
		if ke == nil {
			resp.ProducerID, resp.ProducerEpoch = req.ProducerID, req.ProducerEpoch
		}
	}
	return reply{msg: resp}, nil
}
