package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeTransactions: v0
//
// Behavior (KIP-664):
// * Each transactional id is answered on its own from this broker's
//   coordinator: state, timeout, start time, producer id and epoch, and
//   the partitions of the ongoing transaction. NOT_COORDINATOR when this
//   broker does not coordinate it, COORDINATOR_LOAD_IN_PROGRESS while its
//   partition loads, TRANSACTIONAL_ID_NOT_FOUND for an unknown id.
// * Authorization: DESCRIBE on the transactional id
//   (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); partitions of topics the
//   principal may not DESCRIBE are left out, as Kafka does.

func init() { register(65, 0, 0, handleDescribeTransactions) }

func handleDescribeTransactions(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.ProducerEpoch = id, -1, -1
		if !s.authorize(r, acl.OpDescribe, acl.TransactionalID(id)) {
			st.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		if s.txns == nil {
			st.ErrorCode = kerr.CoordinatorNotAvailable.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		md, ke := s.txns.Describe(id)
		if ke != nil {
			st.ErrorCode = ke.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		st.State, st.TimeoutMillis, st.StartTimestamp = md.State.String(), md.TimeoutMs, md.StartMs
		st.ProducerID, st.ProducerEpoch = md.ProducerID, md.ProducerEpoch
		for _, tp := range md.SortedPartitions() {
			if !s.authorize(r, acl.OpDescribe, acl.Topic(tp.Topic)) {
				continue
			}
			if n := len(st.Topics); n > 0 && st.Topics[n-1].Topic == tp.Topic {
				st.Topics[n-1].Partitions = append(st.Topics[n-1].Partitions, tp.Partition)
				continue
			}
			t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
			t.Topic, t.Partitions = tp.Topic, []int32{tp.Partition}
			st.Topics = append(st.Topics, t)
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return reply{msg: resp}, nil
}
