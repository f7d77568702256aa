package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/broker/producer"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerId: v0-4
//
// Behavior:
// * Without a transactional id, hands out a new producer id with epoch 0.
//   Ids come from blocks reserved durably in the data directory
//   (producer-id-block), so they stay unique across restarts.
// * v3+: a producer that names its current id and epoch (KIP-360) gets the
//   same id with the epoch bumped, or a new id once the epoch is
//   exhausted.
// * A transactional id is answered with UNSUPPORTED_VERSION: Strata does
//   not support transactions. An empty transactional id is INVALID_REQUEST.
// * Authorization (with an authorizer, as Kafka): a transactional id needs
//   WRITE on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, checked before it
//   is refused as unsupported); an idempotent producer needs
//   IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679),
//   else CLUSTER_AUTHORIZATION_FAILED.
// * If no id block can be reserved (disk failure), COORDINATOR_LOAD_IN_PROGRESS,
//   which clients retry.

func init() {
	register(22, producer.InitProducerIDMinVersion, producer.InitProducerIDMaxVersion, handleInitProducerID)
}

func handleInitProducerID(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.InitProducerIDRequest)
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
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		resp.ErrorCode = denied.Code
		return reply{msg: resp}, nil
	}
	return reply{msg: s.pids.InitProducerID(req)}, nil
}
