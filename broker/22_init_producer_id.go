package broker

import (
	"github.com/stratastream/strata/broker/producer"
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
// * If no id block can be reserved (disk failure), COORDINATOR_LOAD_IN_PROGRESS,
//   which clients retry.

func init() {
	register(22, producer.InitProducerIDMinVersion, producer.InitProducerIDMaxVersion, handleInitProducerID)
}

func handleInitProducerID(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.InitProducerIDRequest)
	return reply{msg: s.pids.InitProducerID(req)}, nil
}
