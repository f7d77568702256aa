package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/broker/txn"
	"github.com/stratastream/strata/coord"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AddPartitionsToTxn: v0-5
//
// Behavior:
// * v0-v3 (clients): adds the partitions to the producer's transaction,
//   beginning it if none is ongoing (package txn). The coordinator's
//   error applies to every partition: NOT_COORDINATOR,
//   COORDINATOR_LOAD_IN_PROGRESS, INVALID_PRODUCER_ID_MAPPING,
//   PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2),
//   CONCURRENT_TRANSACTIONS while the previous transaction's markers go
//   out.
// * v4+ (KIP-890, brokers): many transactions per request, each answered
//   on its own; VerifyOnly answers, per partition, whether it is in the
//   ongoing transaction (TRANSACTION_ABORTABLE if not, as Kafka 3.9)
//   without adding it. Needs CLUSTER_ACTION on the cluster
//   (CLUSTER_AUTHORIZATION_FAILED at the top level) and nothing else, as
//   in Kafka: clients send v3 at most, and a client of transaction
//   version 2 none (its Produce v12 and TxnOffsetCommit v5 add the
//   partitions through their leader).
// * Each partition is checked first: before v4 WRITE on its topic
//   (TOPIC_AUTHORIZATION_FAILED; always for an internal topic, which only
//   AddOffsetsToTxn adds), then that the partition exists
//   (UNKNOWN_TOPIC_OR_PARTITION); if one fails the others get
//   OPERATION_NOT_ATTEMPTED and nothing is added. Before v4 a
//   transactional id without WRITE gets
//   TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition.
//
// Version notes:
// * v2: PRODUCER_FENCED
// * v3: flexible versions
// * v4: batched transactions, VerifyOnly, top-level ErrorCode
// * v5: TRANSACTION_ABORTABLE may be answered (not by Strata); from a
//   partition leader without VerifyOnly (transaction version 2, KIP-890
//   part 2), the partitions are added to a transaction of version 2

// addPartitionsToTxnMaxVersion is the highest version served.
const addPartitionsToTxnMaxVersion = 5

func init() { register(24, 0, addPartitionsToTxnMaxVersion, handleAddPartitionsToTxn) }

func handleAddPartitionsToTxn(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.AddPartitionsToTxnRequest)
	if req.Version >= 4 {
		if !s.authorize(r, acl.OpClusterAction, acl.Cluster) {
			resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return reply{msg: resp}, nil
		}
		return reply{msg: s.addPartitionsBatched(req)}, nil
	}
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	var tps []txn.TopicPartition
	for _, t := range req.Topics {
		tps = txnPartitions(t.Topic, t.Partitions, tps)
	}
	codes := s.addPartitionsOne(r, req.Version, req.TransactionalID, req.ProducerID, req.ProducerEpoch, false, tps)
	idx := map[string]int{}
	for _, tp := range tps {
		i, ok := idx[tp.Topic]
		if !ok {
			i = len(resp.Topics)
			idx[tp.Topic] = i
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = tp.Topic
			resp.Topics = append(resp.Topics, rt)
		}
		rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
		rp.Partition, rp.ErrorCode = tp.Partition, codes[tp]
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return reply{msg: resp}, nil
}

// addPartitionsBatched answers a v4+ request (its CLUSTER_ACTION already
// checked; r is nil for a call from another broker through the
// Transactions service): the transactions are not authorized one by one.
func (s *Server) addPartitionsBatched(req *kmsg.AddPartitionsToTxnRequest) *kmsg.AddPartitionsToTxnResponse {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	resp.Version = req.Version
	for _, tr := range req.Transactions {
		var tps []txn.TopicPartition
		for _, t := range tr.Topics {
			tps = txnPartitions(t.Topic, t.Partitions, tps)
		}
		codes := s.addPartitionsOne(nil, req.Version, tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tr.VerifyOnly, tps)
		rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rt.TransactionalID = tr.TransactionalID
		idx := map[string]int{}
		for _, tp := range tps {
			i, ok := idx[tp.Topic]
			if !ok {
				i = len(rt.Topics)
				idx[tp.Topic] = i
				t := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				t.Topic = tp.Topic
				rt.Topics = append(rt.Topics, t)
			}
			p := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
			p.Partition, p.ErrorCode = tp.Partition, codes[tp]
			rt.Topics[i].Partitions = append(rt.Topics[i].Partitions, p)
		}
		resp.Transactions = append(resp.Transactions, rt)
	}
	return resp
}

// addPartitionsOne adds (or verifies) one transaction's partitions and
// returns each partition's code. r is the client's request before v4, nil
// (no authorization of the transaction) for v4+.
func (s *Server) addPartitionsOne(r *request, version int16, id string, pid int64, epoch int16, verifyOnly bool, tps []txn.TopicPartition) map[txn.TopicPartition]int16 {
	codes := make(map[txn.TopicPartition]int16, len(tps))
	all := func(code int16) map[txn.TopicPartition]int16 {
		for _, tp := range tps {
			codes[tp] = code
		}
		return codes
	}
	if r != nil && !s.authorize(r, acl.OpWrite, acl.TransactionalID(id)) {
		return all(kerr.TransactionalIDAuthorizationFailed.Code)
	}
	snap := s.coord.Snapshot()
	failed := false
	for _, tp := range tps {
		switch {
		case r != nil && (isInternalTopic(tp.Topic) || !s.authorize(r, acl.OpWrite, acl.Topic(tp.Topic))):
			codes[tp] = kerr.TopicAuthorizationFailed.Code
		case !partitionInSnapshot(snap, tp):
			codes[tp] = kerr.UnknownTopicOrPartition.Code
		default:
			continue
		}
		failed = true
	}
	if failed {
		for _, tp := range tps {
			if codes[tp] == 0 {
				codes[tp] = kerr.OperationNotAttempted.Code
			}
		}
		return codes
	}
	if s.txns == nil {
		return all(kerr.CoordinatorNotAvailable.Code)
	}
	if verifyOnly {
		per, ke := s.txns.VerifyPartitions(id, pid, epoch, tps)
		if ke != nil {
			return all(ke.Code)
		}
		for _, tp := range tps {
			codes[tp] = txnErr(per[tp], version, 2)
		}
		return codes
	}
	if version >= addTxnPartitionVersion {
		// A partition leader adding a partition of transaction
		// version 2 (Produce v12+, TxnOffsetCommit v5+).
		return all(txnErr(s.txns.AddPartitionsV2(id, pid, epoch, tps), version, 2))
	}
	return all(txnErr(s.txns.AddPartitions(id, pid, epoch, tps), version, 2))
}

// partitionInSnapshot reports whether the cluster has the partition.
func partitionInSnapshot(snap *coord.Snapshot, tp txn.TopicPartition) bool {
	_, ok := snap.Partition(coord.TopicPartition{Topic: tp.Topic, Partition: tp.Partition})
	return ok
}
