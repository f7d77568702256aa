package broker

import (
	"context"
	"time"

	"github.com/stratastream/strata/broker/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnCheck says how a partition leader (or group coordinator) checks a
// producer's first transactional write to a partition with the
// transaction coordinator.
type txnCheck struct {
	// abortable: the request's version may be answered
	// TRANSACTION_ABORTABLE (Produce v11+, TxnOffsetCommit v4+).
	abortable bool
	// add: transaction version 2 (Produce v12+, TxnOffsetCommit v5+ with
	// transaction.version 2 finalized; KIP-890 part 2): the partition is
	// added to the transaction (AddPartitionsToTxn v5 with VerifyOnly
	// false, as Kafka's AddPartitionsToTxnManager sends it) instead of
	// verified.
	add bool
}

// verifyTxnPartition is KIP-890: before a partition leader appends the
// first transactional batch of a producer's transaction, it asks the
// transaction coordinator whether the partition was added to that
// transaction (part 1), or, under transaction version 2, adds it (part
// 2). It returns nil when it was (or now is); else an error wrapping the
// *kerr.Error the Produce is answered with, as Kafka's
// AddPartitionsToTxnManager and ReplicaManager map them:
//   - TRANSACTION_ABORTABLE when abortable (the client's request version
//     handles it: Produce v11+, TxnOffsetCommit v4+, KIP-890), else
//     INVALID_TXN_STATE: the partition is not in the ongoing transaction
//     (a hanging transaction is prevented), as Kafka's
//     AddPartitionsToTxnManager maps it by transactionSupportedOperation;
//   - INVALID_PRODUCER_EPOCH: the producer is fenced (the coordinator's
//     PRODUCER_FENCED), a late write of an epoch a version 2 EndTxn
//     bumped among them;
//   - INVALID_PRODUCER_ID_MAPPING: the id has another producer id;
//   - NOT_ENOUGH_REPLICAS, which clients retry: the coordinator is not
//     reachable, moving, loading, or the transaction is ending
//     (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
//     COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS; the last is
//     asked again here for up to 100 ms first, as Kafka does).
//
// The coordinator is asked in process when this broker coordinates the
// id, else over the Transactions gRPC service with an AddPartitionsToTxn
// v4 VerifyOnly request (v5, VerifyOnly false, to add). Nothing is
// cached here.
func (s *Server) verifyTxnPartition(ctx context.Context, chk txnCheck, transactionalID string, producerID int64, epoch int16, topic string, partition int32) error {
	tp := txn.TopicPartition{Topic: topic, Partition: partition}
	if s.txns == nil {
		return newKafkaError(kerr.NotEnoughReplicas, "transaction coordinator not started")
	}
	code, err := s.askTxnCoordinator(ctx, chk, transactionalID, producerID, epoch, tp)
	// CONCURRENT_TRANSACTIONS (the previous transaction completing, or
	// another leader's add of the same transaction being written) is
	// retried here for a while, as Kafka's ReplicaManager does
	// (add.partitions.to.txn.retry.backoff.ms and .max.ms): the client
	// would otherwise wait for its next metadata refresh before it
	// retries the produce.
	backoff, waited := txnAddRetryBackoff, time.Duration(0)
	for err == nil && code == kerr.ConcurrentTransactions.Code && waited < txnAddRetryMax {
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return newKafkaError(kerr.NotEnoughReplicas, "transaction of %q: %v", transactionalID, ctx.Err())
		case <-t.C:
		}
		waited += backoff
		backoff = min(2*backoff, txnAddRetryMax-waited)
		code, err = s.askTxnCoordinator(ctx, chk, transactionalID, producerID, epoch, tp)
	}
	if err != nil {
		return err
	}
	if code == 0 {
		return nil
	}
	ke := kerr.ErrorForCode(code).(*kerr.Error)
	switch ke {
	case kerr.ProducerFenced:
		ke = kerr.InvalidProducerEpoch
	case kerr.TransactionAbortable:
		if !chk.abortable {
			ke = kerr.InvalidTxnState
		}
	case kerr.NotCoordinator, kerr.CoordinatorNotAvailable, kerr.CoordinatorLoadInProgress, kerr.ConcurrentTransactions:
		ke = kerr.NotEnoughReplicas
	}
	return newKafkaError(ke, "transaction of %q: %s-%d not verified", transactionalID, topic, partition)
}

// Kafka's add.partitions.to.txn.retry.backoff.ms and
// add.partitions.to.txn.retry.backoff.max.ms defaults: the first wait and
// the whole time a verification answered CONCURRENT_TRANSACTIONS is
// retried.
const (
	txnAddRetryBackoff = 20 * time.Millisecond
	txnAddRetryMax     = 100 * time.Millisecond
)

// askTxnCoordinator asks the coordinator of transactionalID once (see
// verifyTxnPartition) and returns its code for tp, or an error when it
// could not be asked.
func (s *Server) askTxnCoordinator(ctx context.Context, chk txnCheck, transactionalID string, producerID int64, epoch int16, tp txn.TopicPartition) (int16, error) {
	b, err := s.txnCoordinator(transactionalID, false)
	if err != nil {
		return 0, newKafkaError(kerr.NotEnoughReplicas, "transaction coordinator of %q: %v", transactionalID, err)
	}
	var code int16
	switch {
	case b.ID == s.cfg.BrokerID && chk.add:
		if ke := s.txns.AddPartitionsV2(transactionalID, producerID, epoch, []txn.TopicPartition{tp}); ke != nil {
			code = ke.Code
		}
	case b.ID == s.cfg.BrokerID:
		per, ke := s.txns.VerifyPartitions(transactionalID, producerID, epoch, []txn.TopicPartition{tp})
		switch {
		case ke != nil:
			code = ke.Code
		case per[tp] != nil:
			code = per[tp].Code
		}
	default:
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version = verifyTxnVersion
		if chk.add {
			req.Version = addTxnPartitionVersion
		}
		tr := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tr.VerifyOnly = transactionalID, producerID, epoch, !chk.add
		rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		rt.Topic, rt.Partitions = tp.Topic, []int32{tp.Partition}
		tr.Topics = []kmsg.AddPartitionsToTxnRequestTransactionTopic{rt}
		req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{tr}
		resp, err := s.txnPeers.verify(ctx, s, b.ID, req)
		if err != nil {
			return 0, newKafkaError(kerr.NotEnoughReplicas, "verifying with the transaction coordinator, broker %d: %v", b.ID, err)
		}
		code = verifyCode(resp, transactionalID, tp)
	}
	return code, nil
}

// verifyCode finds the partition's code in a verification response: the
// top-level code if set, else the partition's; a response that does not
// name the partition is COORDINATOR_NOT_AVAILABLE (retried).
func verifyCode(resp *kmsg.AddPartitionsToTxnResponse, id string, tp txn.TopicPartition) int16 {
	if resp.ErrorCode != 0 {
		return resp.ErrorCode
	}
	for _, tr := range resp.Transactions {
		if tr.TransactionalID != id {
			continue
		}
		for _, t := range tr.Topics {
			if t.Topic != tp.Topic {
				continue
			}
			for _, p := range t.Partitions {
				if p.Partition == tp.Partition {
					return p.ErrorCode
				}
			}
		}
	}
	return kerr.CoordinatorNotAvailable.Code
}
