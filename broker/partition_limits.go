package broker

import (
	"github.com/stratastream/strata/coord"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The partition limits of topic changes (CreateTopics, CreatePartitions,
// auto-creation), checked before anything is sized by the request:
//
//   - strata.max.partitions.per.request bounds the partitions one request
//     creates over all its topics. Kafka's KRaft controller refuses an
//     operation that would write more than 10000 metadata records
//     (QuorumController.MAX_RECORDS_PER_USER_OP) with POLICY_VIOLATION;
//     Strata counts partitions, with the same default and error.
//   - strata.max.broker.partitions bounds the partition replicas any
//     broker hosts after the change (KIP-578 proposed this limit as
//     max.broker.partitions; Kafka never adopted it, hence the strata.
//     prefix). The limit of the broker handling the request applies to
//     every broker, as KIP-578 meant it for homogeneous clusters. Refused
//     with POLICY_VIOLATION, since Kafka has no error of its own for it.

// partitionsPerRequestError is the error of a request that would create
// n partitions, or nil if that is within strata.max.partitions.per.request.
func (s *Server) partitionsPerRequestError(n int64) error {
	if limit := int64(s.cfg.MaxPartitionsPerRequest); n > limit {
		return newKafkaError(kerr.PolicyViolation, "unable to perform excessively large batch operation: the request would create %d partitions, strata.max.partitions.per.request is %d", n, limit)
	}
	return nil
}

// replicaCounts counts the partition replicas of every topic in snap, by
// broker.
func replicaCounts(snap *coord.Snapshot) map[int32]int64 {
	out := map[int32]int64{}
	for _, t := range snap.Topics {
		for _, p := range t.Partitions {
			for _, b := range p.Replicas {
				out[b]++
			}
		}
	}
	return out
}

// replicaBudgetError refuses adding partitions × rf replicas when even
// spread evenly over the live brokers they would put one above
// strata.max.broker.partitions: a check by arithmetic, before the
// assignment is computed.
func (s *Server) replicaBudgetError(snap *coord.Snapshot, partitions int64, rf int64) error {
	limit := int64(s.cfg.MaxBrokerPartitions)
	counts := replicaCounts(snap)
	var free int64
	for _, b := range snap.Brokers {
		free += max(limit-counts[b.ID], 0)
	}
	if need := partitions * rf; need > free {
		return newKafkaError(kerr.PolicyViolation, "%d new partition replicas exceed the room left on the %d live brokers (%d) under strata.max.broker.partitions %d", need, len(snap.Brokers), free, limit)
	}
	return nil
}

// brokerPartitionsError checks an assignment of new partitions against
// strata.max.broker.partitions on each broker it names.
func (s *Server) brokerPartitionsError(snap *coord.Snapshot, assignment [][]int32) error {
	limit := int64(s.cfg.MaxBrokerPartitions)
	counts := replicaCounts(snap)
	for _, reps := range assignment {
		for _, b := range reps {
			counts[b]++
			if counts[b] > limit {
				return newKafkaError(kerr.PolicyViolation, "broker %d would host more than strata.max.broker.partitions (%d) partition replicas", b, limit)
			}
		}
	}
	return nil
}
