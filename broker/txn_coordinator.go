package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/stratastream/strata/broker/txn"
	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
)

// This file connects the transaction coordinator (package txn) to the
// server, as group_coordinator.go connects the group coordinator. A
// transactional id is coordinated by the leader of its partition of the
// internal topic __transaction_state (txn.PartitionFor); the coordinator
// epoch is that partition's leader epoch. Each broker loads the partitions
// it leads (txnLoader) and unloads those it stops leading; a broker that
// does not coordinate an id answers NOT_COORDINATOR.
//
// __transaction_state is created by the first FindCoordinator or
// InitProducerId for a transactional id, as Kafka does, with
// transaction.state.log.num.partitions partitions,
// min(transaction.state.log.replication.factor, live brokers) replicas,
// cleanup.policy=compact, segment.bytes=transaction.state.log.segment.bytes
// and min.insync.replicas=min(transaction.state.log.min.isr, replicas).
// Clients cannot produce to it, delete it or add partitions to it.
//
// Markers (txn_markers.go) go to each partition's leader: this broker's
// writeTxnMarkers for the partitions it leads, the Transactions gRPC
// service on the replication listener for the others.

// TransactionConfig holds the transaction coordinator's settings.
type TransactionConfig struct {
	// StateLogNumPartitions is transaction.state.log.num.partitions.
	StateLogNumPartitions int
	// StateLogReplicationFactor is transaction.state.log.replication.factor.
	StateLogReplicationFactor int16
	// StateLogMinISR is transaction.state.log.min.isr.
	StateLogMinISR int
	// StateLogSegmentBytes is transaction.state.log.segment.bytes.
	StateLogSegmentBytes int32
	// MaxTimeout is transaction.max.timeout.ms.
	MaxTimeout time.Duration
	// IDExpiration is transactional.id.expiration.ms.
	IDExpiration time.Duration
	// AbortInterval is transaction.abort.timed.out.transaction.cleanup.interval.ms.
	AbortInterval time.Duration
	// RemoveExpiredInterval is transaction.remove.expired.transaction.cleanup.interval.ms.
	RemoveExpiredInterval time.Duration
	// EndWait is strata.transaction.end.wait.ms.
	EndWait time.Duration
	// PartitionVerification is transaction.partition.verification.enable.
	PartitionVerification bool
}

// txnStateTopicConfigs are the config overrides __transaction_state is
// created with, for rf replicas.
func (s *Server) txnStateTopicConfigs(rf int) map[string]string {
	return map[string]string{
		"cleanup.policy":      "compact",
		"retention.ms":        "-1",
		"retention.bytes":     "-1",
		"segment.bytes":       strconv.Itoa(int(s.cfg.Transactions.StateLogSegmentBytes)),
		"min.insync.replicas": strconv.Itoa(max(1, min(s.cfg.Transactions.StateLogMinISR, rf))),
	}
}

// ensureTxnStateTopic creates __transaction_state if the cluster does not
// have it and returns it as the snapshot after the creation shows it.
func (s *Server) ensureTxnStateTopic(partitions int) (*coord.TopicInfo, error) {
	t, _, err := s.ensureInternalTopic(txn.Topic, partitions, s.cfg.Transactions.StateLogReplicationFactor, s.txnStateTopicConfigs)
	return t, err
}

// internalTopicPartitions is the partition count of a coordinator's
// internal topic: the existing topic's (as Kafka: the topic, not the
// setting, decides; a difference is logged), else the setting's n.
func (s *Server) internalTopicPartitions(topic, setting string, n int) int {
	t, ok := s.coord.Snapshot().Topic(topic)
	if !ok {
		return n
	}
	if len(t.Partitions) != n {
		s.log.Warn(setting+" differs from the existing topic; using the topic's partition count",
			"topic", topic, "setting", n, "partitions", len(t.Partitions))
	}
	return len(t.Partitions)
}

// ensureInternalTopic creates the internal topic name if the cluster does
// not have it, with min(replicationFactor, live brokers) replicas and the
// configs configs gives for that count, and returns it as the snapshot
// after the creation shows it. fresh says the topic was not in this
// broker's snapshot when asked: this call created it, or another broker
// just did, and its leaders may not have loaded their partitions yet.
func (s *Server) ensureInternalTopic(name string, partitions int, replicationFactor int16, configs func(rf int) map[string]string) (t *coord.TopicInfo, fresh bool, err error) {
	if t, ok := s.coord.Snapshot().Topic(name); ok {
		return t, false, nil
	}
	live := len(s.coord.Snapshot().Brokers)
	rf := min(int(replicationFactor), live)
	if rf < 1 {
		return nil, true, newKafkaError(kerr.CoordinatorNotAvailable, "no live broker to host %s", name)
	}
	_, err = s.createTopic(createTopicSpec{
		name:       name,
		partitions: int32(partitions),
		replFactor: int16(rf),
		configs:    configs(rf),
	})
	var ke *kafkaError
	if err != nil && !(errors.As(err, &ke) && ke.err == kerr.TopicAlreadyExists) {
		return nil, true, err
	}
	t, ok := s.coord.Snapshot().Topic(name)
	if !ok {
		return nil, true, newKafkaError(kerr.CoordinatorNotAvailable, "%s is being created", name)
	}
	return t, true, nil
}

// startTxns creates the transaction coordinator: with the partition count
// of __transaction_state if it exists, else the setting.
func (s *Server) startTxns() error {
	tc := s.cfg.Transactions
	n := s.internalTopicPartitions(txn.Topic, "transaction.state.log.num.partitions", tc.StateLogNumPartitions)
	c, err := txn.New(txn.Config{
		NumPartitions:  n,
		MaxTimeout:     tc.MaxTimeout,
		IDExpiration:   tc.IDExpiration,
		AbortInterval:  tc.AbortInterval,
		ExpireInterval: tc.RemoveExpiredInterval,
		NewProducerID:  s.pids.Next,
		Markers:        txnMarkerWriter{s},
		EndWait:        tc.EndWait,
		Now:            s.nowFn,
		Logger:         s.log.With("component", "txn"),
	})
	if err != nil {
		return fmt.Errorf("broker: transaction coordinator: %w", err)
	}
	s.txns = c
	return nil
}

// closeTxns stops the transaction coordinator (its marker senders and
// timers) and the connections to other brokers' Transactions services.
// It runs before the logs are closed.
func (s *Server) closeTxns() error {
	if s.txns == nil {
		return nil
	}
	err := s.txns.Close()
	s.txnPeers.close()
	return err
}

// txnStateLog is one partition of __transaction_state as the coordinator
// writes it: like offsetsLog, stamped with the leader epoch under the
// partition's append lock, and acknowledged once the ISR has it
// (acks=all) with at least the topic's min.insync.replicas in sync
// (NOT_ENOUGH_REPLICAS before the append, NOT_ENOUGH_REPLICAS_AFTER_APPEND
// after, as Kafka's acks=-1 write of the transaction log). It appends only
// at the leader epoch the partition was loaded at (the coordinator
// epoch): a write of a coordinator that was unloaded, still in flight
// when this broker loaded the partition again at a newer epoch, gets
// NOT_LEADER_OR_FOLLOWER instead of landing after the new coordinator's.
type txnStateLog struct {
	*segment.Log
	s      *Server
	p      *partition
	minISR int
	epoch  int32
	self   int32
}

// txnStateWriteTimeout bounds the wait for replication of one write
// (Kafka uses request.timeout.ms for it).
const txnStateWriteTimeout = 5 * time.Second

// Append appends the coordinator's batch and waits for it to be
// replicated.
func (l txnStateLog) Append(batches []byte, o segment.AppendOptions) (segment.AppendResult, error) {
	if n := l.p.repl.ISRSize(); n < l.minISR {
		return segment.AppendResult{}, newKafkaError(kerr.NotEnoughReplicas, "in-sync replicas %d are below min.insync.replicas %d", n, l.minISR)
	}
	l.p.appendMu.Lock()
	lead, err := l.p.leaderCheck(l.self)
	if err == nil && lead.epoch != l.epoch {
		err = newKafkaError(kerr.NotLeaderForPartition, "%s-%d is led at epoch %d, the coordinator loaded it at %d", l.p.topic, l.p.index, lead.epoch, l.epoch)
	}
	if err != nil {
		l.p.appendMu.Unlock()
		return segment.AppendResult{}, err
	}
	o.LeaderEpoch = lead.epoch
	res, err := l.Log.Append(batches, o)
	l.p.appendMu.Unlock()
	if err != nil {
		return res, err
	}
	l.p.repl.AdvanceHighWatermark()
	if err := l.s.awaitHighWatermark(context.Background(), l.p, l.epoch, res.LastOffset+1, l.minISR, l.s.nowFn().Add(txnStateWriteTimeout)); err != nil {
		return segment.AppendResult{}, err
	}
	return res, nil
}

// txnLoading is the loader of __transaction_state's partitions into the
// transaction coordinator: reloaded at each new leader epoch, which is the
// coordinator epoch its markers carry.
func (s *Server) txnLoading() coordinatorLoader {
	return coordinatorLoader{
		s: s, topic: txn.Topic, what: "transactions", reloadOnEpoch: true,
		numPartitions: func() int {
			if s.txns == nil {
				return 0
			}
			return s.txns.NumPartitions()
		},
		load: func(t *topicState, lp *partition, p int, epoch int32) error {
			l := txnStateLog{Log: lp.log, s: s, p: lp, minISR: int(t.cfg.minInsyncReps), epoch: epoch, self: s.cfg.BrokerID}
			_, err := s.txns.Load(p, epoch, l)
			return err
		},
		unload: func(p int) { s.txns.Unload(p) },
	}
}

// txnCoordinator returns the broker that coordinates transactional id:
// the leader of its partition of __transaction_state, which is created
// here when create is set and the cluster does not have it yet.
// COORDINATOR_NOT_AVAILABLE when the partition has no live leader, failed
// to load on this broker, or the broker shuts down.
func (s *Server) txnCoordinator(id string, create bool) (coord.BrokerInfo, error) {
	if s.shuttingDown() || s.txns == nil {
		return coord.BrokerInfo{}, newKafkaError(kerr.CoordinatorNotAvailable, "broker is shutting down")
	}
	var t *coord.TopicInfo
	if create {
		var err error
		if t, err = s.ensureTxnStateTopic(s.txns.NumPartitions()); err != nil {
			s.log.Warn("transaction coordinator unavailable: the transaction state topic could not be created", "topic", txn.Topic, "err", err)
			return coord.BrokerInfo{}, newKafkaError(kerr.CoordinatorNotAvailable, "%s: %v", txn.Topic, err)
		}
	} else if ti, ok := s.coord.Snapshot().Topic(txn.Topic); ok {
		t = ti
	} else {
		return coord.BrokerInfo{}, newKafkaError(kerr.CoordinatorNotAvailable, "%s does not exist", txn.Topic)
	}
	return s.txnLoader.coordinatorOf(t, s.txns.PartitionFor(id))
}

// txnErr turns a coordinator error into a response code, answering
// PRODUCER_FENCED as INVALID_PRODUCER_EPOCH to versions below fencedSince
// (the clients before KIP-588 do not know it), as Kafka's KafkaApis does.
func txnErr(ke *kerr.Error, version, fencedSince int16) int16 {
	if ke == nil {
		return 0
	}
	if ke == kerr.ProducerFenced && version < fencedSince {
		return kerr.InvalidProducerEpoch.Code
	}
	return ke.Code
}

// txnPartitions converts kmsg topics to the coordinator's partitions.
func txnPartitions(topic string, parts []int32, out []txn.TopicPartition) []txn.TopicPartition {
	for _, p := range parts {
		out = append(out, txn.TopicPartition{Topic: topic, Partition: p})
	}
	return out
}
