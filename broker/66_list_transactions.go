package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/broker/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListTransactions: v0-1
//
// Behavior (KIP-664, KIP-994):
// * Lists the transactions this broker coordinates, filtered by state
//   names (Kafka's: Empty, Ongoing, PrepareCommit, ...; unknown names
//   are echoed in UnknownStateFilters and match nothing), producer ids
//   and, v1, DurationFilterMillis (only transactions begun more than
//   that long ago; -1: all). COORDINATOR_LOAD_IN_PROGRESS while one of
//   its partitions of __transaction_state loads.
// * Authorization: only the transactional ids the principal may DESCRIBE
//   are listed.
// * v2 (TransactionalIdPattern, Kafka 4.1) is not served.

func init() { register(66, 0, 1, handleListTransactions) }

func handleListTransactions(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	f := txn.ListFilter{ProducerIDs: req.ProducerIDFilters, MinDurationMs: -1}
	if req.Version >= 1 {
		f.MinDurationMs = req.DurationFilterMillis
	}
	for _, name := range req.StateFilters {
		st, ok := txn.ParseState(name)
		if !ok {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
			continue
		}
		f.States = append(f.States, st)
	}
	if s.txns == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return reply{msg: resp}, nil
	}
	if len(req.StateFilters) > 0 && len(f.States) == 0 {
		return reply{msg: resp}, nil // only unknown states: nothing matches
	}
	mds, ke := s.txns.List(f)
	if ke != nil {
		resp.ErrorCode = ke.Code
		return reply{msg: resp}, nil
	}
	for _, md := range mds {
		if !s.authorize(r, acl.OpDescribe, acl.TransactionalID(md.TransactionalID)) {
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = md.TransactionalID, md.ProducerID, md.State.String()
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return reply{msg: resp}, nil
}
