package broker

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/stratastream/strata/broker/producer"
	"github.com/stratastream/strata/broker/replica"
	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
)

// topicState is a topic as the handlers see it: every topic of the
// cluster has one, whether or not this broker hosts a replica of it. It is
// immutable once published in Server.mu.topics: a change builds a new
// topicState (sharing the partitions) and swaps it in, so a handler
// holding one sees a consistent topic without holding a lock.
type topicState struct {
	name      string
	id        coord.TopicID
	overrides map[string]string
	cfg       topicConfig
	// defaultsGen is the generation of the broker's topic defaults cfg
	// was resolved with (dynamic_broker_config.go).
	defaultsGen uint64
	// parts has one entry per partition of the topic; nil where this
	// broker is not a replica (or the log failed to open).
	parts []*partition
}

// local returns the open partition index, or nil if the topic has no
// such partition or this broker does not host it.
func (t *topicState) local(index int32) *partition {
	if index < 0 || int(index) >= len(t.parts) {
		return nil
	}
	return t.parts[index]
}

// hasPartition reports whether the topic has partition index.
func (t *topicState) hasPartition(index int32) bool { return index >= 0 && int(index) < len(t.parts) }

// partition is one partition log this broker hosts as a replica, with the
// leadership the coordinator gives it.
//
// appendMu serializes the produce path of the partition: the idempotence
// check, the append and the producer-state update happen under it, so two
// batches of one producer cannot pass the sequence check together. Lock
// order: appendMu, then the producer.StateManager's own lock.
type partition struct {
	topic string
	index int32
	// ldir is the log directory holding the partition's directory: it
	// changes when AlterReplicaLogDirs moves it (logdir_move.go), as
	// does log.Dir().
	ldir atomic.Pointer[logDir]
	log  *segment.Log
	// future is the partition's move to another log directory in
	// progress, or nil (logdir_move.go).
	future atomic.Pointer[futureReplica]
	// tier is the partition's tiered storage gate and archiver
	// (tiering.go).
	tier *partTier

	// lead is the partition's leadership as this broker last learned it
	// from the coordinator (see metadata_apply.go).
	lead atomic.Pointer[leadership]

	// repl is the partition's replication state (package replica): its
	// leadership as this broker holds it, ISR and high watermark.
	repl *replica.Partition

	appendMu  sync.Mutex
	producers *producer.StateManager
	// txns is the partition's aborted-transaction index (txn_partition.go).
	txns *segment.TxnIndex
	// snapshotEnd is the log end offset of the last producer-state
	// snapshot; guarded by appendMu.
	snapshotEnd int64
	// clean is the partition's log cleaner state, guarded by
	// logCleaner.mu (log_cleaner.go).
	clean partClean
	// rollSnaps are the producer states at the latest segment rolls
	// (idempotence.go), for the archiver to upload with those segments.
	rollSnaps rollSnapshots
}

// leadership is a partition's leader and leader epoch.
type leadership struct {
	leader, epoch int32
}

// path is the partition's directory.
func (p *partition) path() string { return p.log.Dir() }

// logDir is the log directory holding the partition.
func (p *partition) logDir() *logDir { return p.ldir.Load() }

// leadership returns the partition's current leader and epoch.
func (p *partition) leadership() leadership { return *p.lead.Load() }

// leaderEpoch is the partition's current leader epoch.
func (p *partition) leaderEpoch() int32 { return p.lead.Load().epoch }

// leaderCheck returns the partition's leadership if broker self leads it,
// else a NOT_LEADER_OR_FOLLOWER error for the client, which then refreshes
// its metadata and goes to the leader.
func (p *partition) leaderCheck(self int32) (leadership, error) {
	l := p.leadership()
	if l.leader != self {
		return l, notLeaderError(p.topic, p.index, l.leader)
	}
	return l, nil
}

func notLeaderError(topic string, index, leader int32) error {
	if leader < 0 {
		return newKafkaError(kerr.NotLeaderForPartition, "partition %s-%d has no leader", topic, index)
	}
	return newKafkaError(kerr.NotLeaderForPartition, "broker %d leads partition %s-%d", leader, topic, index)
}

// openPartition opens (creating or recovering) the log of one partition of
// topic id and records the topic ID in its directory. isNew says the
// partition appeared after this broker started (logDirs.locate). A
// partition whose replica is offline, or goes offline here (its disk
// failed, or a file of it is damaged past rebuilding), gives an error
// wrapping errLogDirOffline.
func (s *Server) openPartition(topic string, id coord.TopicID, index int32, lead leadership, cfg topicConfig, isNew bool) (*partition, error) {
	name := segment.PartitionDirName(topic, index)
	ld, dir, err := s.dirs.locate(name, isNew)
	if err != nil {
		return nil, err
	}
	// failed decides what a failure to open means: a failing disk takes
	// the whole directory offline, a damaged file this partition.
	failed := func(err error) error {
		err = fmt.Errorf("broker: open partition %s-%d: %w", topic, index, err)
		switch {
		case isStorageError(err):
			s.logDirFailed(ld, err)
			return fmt.Errorf("%w: %w", errLogDirOffline, err)
		case isDamagedFile(err):
			s.log.Error("partition offline: a file of it is damaged", "topic", topic, "partition", index, "dir", dir, "err", err)
			s.dirs.markPartitionOffline(name, dir, err)
			return fmt.Errorf("%w: %w", errLogDirOffline, err)
		}
		return err
	}
	var owner atomic.Pointer[partition] // set once opened: its log directory changes when it moves
	opts := append([]segment.Option{
		segment.WithLogger(s.log.With("topic", topic, "partition", index)),
		segment.WithOnPoison(func(err error) {
			d := ld
			if p := owner.Load(); p != nil {
				d = p.logDir()
			}
			s.logDirFailed(d, fmt.Errorf("partition %s-%d: %w", topic, index, err))
		}),
	}, s.cfg.LogOptions...)
	pt := newPartTier(topic, cfg)
	opts = append(opts, pt.gate.SegmentOptions()...)
	l, err := segment.Open(dir, pt.segConfig(cfg), opts...)
	if err != nil {
		return nil, failed(err)
	}
	if r := l.Recovery(); r.DroppedBytes > 0 || r.DroppedBatches > 0 || len(r.RebuiltIndexes) > 0 || len(r.RebuiltCheckpoints) > 0 {
		s.log.Warn("partition recovered", "topic", topic, "partition", index, "dir", dir,
			"truncated_at", r.TruncatedAt, "dropped_bytes", r.DroppedBytes, "dropped_batches", r.DroppedBatches,
			"rebuilt_indexes", r.RebuiltIndexes, "rebuilt_checkpoints", r.RebuiltCheckpoints, "reason", r.Reason)
	}
	if have, ok, err := readPartitionTopicID(dir); err != nil || !ok || have != id {
		if err == nil {
			err = writePartitionTopicID(dir, id)
		}
		if err != nil {
			_ = l.Close()
			return nil, failed(err)
		}
	}
	p := &partition{topic: topic, index: index, log: l, tier: pt}
	p.ldir.Store(ld)
	owner.Store(p)
	p.lead.Store(&lead)
	p.repl = replica.NewPartition(topic, id, index, s.cfg.BrokerID, l, partitionAppender{s: s, p: p, id: id})
	// Nothing is committed until a leader says so: a log without a
	// high-watermark checkpoint starts with its log start. The leader
	// raises it as soon as its ISR has the records (at once when the ISR
	// is itself).
	l.InitHighWatermark(l.LogStartOffset())
	if err := p.loadProducers(s.log); err != nil {
		_ = l.Close()
		return nil, failed(err)
	}
	return p, nil
}

// closePartition snapshots the producer state and closes the log.
func closePartition(p *partition) []error {
	p.tierStop()
	var errs []error
	if err := p.snapshotProducers(); err != nil {
		errs = append(errs, fmt.Errorf("broker: producer snapshot %s-%d: %w", p.topic, p.index, err))
	}
	if err := p.log.Close(); err != nil {
		errs = append(errs, fmt.Errorf("broker: close %s-%d: %w", p.topic, p.index, err))
	}
	return errs
}

// closeLogs closes every open log and returns the errors.
func (s *Server) closeLogs() []error {
	s.mu.Lock()
	topics := s.mu.topics
	s.mu.topics = map[string]*topicState{}
	s.mu.byID = map[coord.TopicID]*topicState{}
	s.mu.Unlock()
	var errs []error
	for _, t := range topics {
		for _, p := range t.parts {
			if p != nil {
				errs = append(errs, closePartition(p)...)
			}
		}
	}
	return errs
}

// topic returns the named topic, or nil.
func (s *Server) topic(name string) *topicState {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.topics[name]
}

// topicByID returns the topic with that ID, or nil.
func (s *Server) topicByID(id coord.TopicID) *topicState {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.mu.byID[id]
}

// topicsSorted returns every topic ordered by name.
func (s *Server) topicsSorted() []*topicState {
	s.mu.RLock()
	out := make([]*topicState, 0, len(s.mu.topics))
	for _, t := range s.mu.topics {
		out = append(out, t)
	}
	s.mu.RUnlock()
	sortTopics(out)
	return out
}

func sortTopics(ts []*topicState) {
	slices.SortFunc(ts, func(a, b *topicState) int { return strings.Compare(a.name, b.name) })
}

// allPartitions returns every open partition.
func (s *Server) allPartitions() []*partition {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*partition
	for _, t := range s.mu.topics {
		for _, p := range t.parts {
			if p != nil {
				out = append(out, p)
			}
		}
	}
	return out
}

// leaderPartition finds a partition this broker leads, for Produce, Fetch,
// ListOffsets and OffsetForLeaderEpoch: UNKNOWN_TOPIC_OR_PARTITION if the
// topic or partition does not exist, KAFKA_STORAGE_ERROR if this broker's
// replica of it is offline (logdirs.go), NOT_LEADER_OR_FOLLOWER if another
// broker leads it (or nobody does).
func (s *Server) leaderPartition(t *topicState, topic string, index int32) (*partition, leadership, error) {
	if t == nil || !t.hasPartition(index) {
		return nil, leadership{}, newKafkaError(kerr.UnknownTopicOrPartition, "topic %q has no partition %d", topic, index)
	}
	p := t.local(index)
	if p == nil {
		if err := s.offlineError(topic, index); err != nil {
			return nil, leadership{}, err
		}
		leader := int32(coord.NoLeader)
		if pi, ok := s.coord.Snapshot().Partition(coord.TopicPartition{Topic: topic, Partition: index}); ok {
			leader = pi.State.Leader
		}
		return nil, leadership{}, notLeaderError(topic, index, leader)
	}
	l, err := p.leaderCheck(s.cfg.BrokerID)
	return p, l, err
}
