package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// EndTxn: v0-4
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
// * v5 (transaction version 2, KIP-890 part 2: an epoch bump per
//   transaction) is not served.
//
// Version notes:
// * v2: PRODUCER_FENCED
// * v3: flexible versions
// * v4: same as v3 (KIP-890 client error handling)

func init() { register(26, 0, 4, handleEndTxn) }

func handleEndTxn(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	switch {
	case !s.authorize(r, acl.OpWrite, acl.TransactionalID(req.TransactionalID)):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case s.txns == nil:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	default:
		resp.ErrorCode = txnErr(s.txns.EndTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit), req.Version, 2)
	}
	return reply{msg: resp}, nil
}
