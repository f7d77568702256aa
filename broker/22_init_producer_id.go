package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/broker/producer"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerId: v0-5
//
// Behavior:
// * Without a transactional id, hands out a new producer id with epoch 0.
//   Ids come from blocks reserved durably in the data directory
//   (producer-id-block), so they stay unique across restarts.
// * v3+: a producer that names its current id and epoch (KIP-360) gets the
//   same id with the epoch bumped, or a new id once the epoch is
//   exhausted.
// * With a transactional id, the transaction coordinator answers (package
//   txn, on the broker FindCoordinator named): a new producer id for a new
//   id, else the epoch bumped (fencing older producers), a new producer
//   id once the epoch is exhausted; an ongoing transaction is aborted
//   first and CONCURRENT_TRANSACTIONS answered until it is (the client
//   retries). A timeout above transaction.max.timeout.ms (or below 1) is
//   INVALID_TRANSACTION_TIMEOUT; NOT_COORDINATOR and
//   COORDINATOR_LOAD_IN_PROGRESS as the coordinator answers;
//   PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v4. An empty
//   transactional id is INVALID_REQUEST.
// * Authorization (with an authorizer, as Kafka): a transactional id needs
//   WRITE on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent
//   producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic
//   (KIP-679), else CLUSTER_AUTHORIZATION_FAILED.
// * If no id block can be reserved (disk failure), COORDINATOR_LOAD_IN_PROGRESS,
//   which clients retry.
// * v5 (KIP-890) adds TRANSACTION_ABORTABLE to the codes a client
//   handles; Kafka 3.9 never answers it to InitProducerId (its
//   coordinator has no such path), so v5 is answered as v4.

func init() {
	register(22, producer.InitProducerIDMinVersion, producer.InitProducerIDMaxVersion, handleInitProducerID)
}

func handleInitProducerID(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	var denied *kerr.Error
	switch {
	case req.TransactionalID != nil:
		if !s.authorize(r, acl.OpWrite, acl.TransactionalID(*req.TransactionalID)) {
			denied = kerr.TransactionalIDAuthorizationFailed
		}
	case !s.authorize(r, acl.OpIdempotentWrite, acl.Cluster) && !s.authorizeByResourceType(r, acl.OpWrite, acl.ResourceTopic):
		denied = kerr.ClusterAuthorizationFailed
	}
	if denied != nil {
		resp.ErrorCode = denied.Code
		return reply{msg: resp}, nil
	}
	if req.TransactionalID == nil {
		return reply{msg: s.pids.InitProducerID(req)}, nil
	}
	pid, epoch := int64(-1), int16(-1)
	if req.Version >= 3 {
		pid, epoch = req.ProducerID, req.ProducerEpoch
	}
	switch {
	case *req.TransactionalID == "" || (pid != -1 || epoch != -1) && (pid < 0 || epoch < 0):
		resp.ErrorCode = kerr.InvalidRequest.Code
	case s.txns == nil:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	default:
		id, ep, ke := s.txns.InitProducerID(*req.TransactionalID, req.TransactionTimeoutMillis, pid, epoch)
		if ke != nil {
			resp.ErrorCode = txnErr(ke, req.Version, 4)
		} else {
			resp.ProducerID, resp.ProducerEpoch = id, ep
		}
	}
	return reply{msg: resp}, nil
}
