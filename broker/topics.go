package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/stratastream/strata/broker/producer"
	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/segment"
)

// topicState is a topic as the handlers see it. It is immutable once
// published in Server.mu.topics: a change builds a new topicState (sharing
// the partitions) and swaps it in, so a handler holding one sees a
// consistent topic without holding a lock.
type topicState struct {
	name      string
	id        coord.TopicID
	parts     []*partition
	overrides map[string]string
	cfg       topicConfig
}

// partition is one open partition log. The leader epoch is fixed while the
// partition is open on a single node.
//
// appendMu serializes the produce path of the partition: the idempotence
// check, the append and the producer-state update happen under it, so two
// batches of one producer cannot pass the sequence check together. Lock
// order: appendMu, then the producer.StateManager's own lock.
type partition struct {
	topic       string
	index       int32
	dir         string
	log         *segment.Log
	leaderEpoch int32

	appendMu  sync.Mutex
	producers *producer.StateManager
	// snapshotEnd is the log end offset of the last producer-state
	// snapshot; guarded by appendMu.
	snapshotEnd int64
}

// partitionDir is Kafka's directory name for a partition: topic-partition.
func (s *Server) partitionDir(topic string, index int32) string {
	return filepath.Join(s.cfg.LogDir, topic+"-"+strconv.Itoa(int(index)))
}

// loadTopics opens the logs of every topic in the metadata. Partition
// directories that no topic owns are leftovers of a deletion interrupted
// by a crash and are removed, but only when the metadata file already
// existed: a data directory with partitions and no metadata is refused.
func (s *Server) loadTopics(metadataExisted bool) error {
	topics := s.meta.Topics()
	owned := map[string]bool{}
	for _, t := range topics {
		for i := range t.Partitions {
			owned[filepath.Base(s.partitionDir(t.Name, int32(i)))] = true
		}
	}
	ents, err := os.ReadDir(s.cfg.LogDir)
	if err != nil {
		return fmt.Errorf("broker: read data directory: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() || owned[e.Name()] || !looksLikePartitionDir(e.Name()) {
			continue
		}
		if !metadataExisted {
			return fmt.Errorf("broker: %s holds partition directory %s but no %s; refusing to start without the metadata that names its topics", s.cfg.LogDir, e.Name(), coord.MetadataFile)
		}
		s.log.Warn("removing partition directory of a deleted topic", "dir", e.Name())
		if err := os.RemoveAll(filepath.Join(s.cfg.LogDir, e.Name())); err != nil {
			return fmt.Errorf("broker: remove stray partition directory: %w", err)
		}
	}
	for _, t := range topics {
		ts, err := s.openTopic(t)
		if err != nil {
			return err
		}
		s.mu.topics[ts.name] = ts
		s.mu.byID[ts.id] = ts
	}
	return nil
}

func looksLikePartitionDir(name string) bool {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return false
	}
	_, err := strconv.ParseUint(name[i+1:], 10, 31)
	return err == nil && validTopicName(name[:i]) == nil
}

// openTopic opens the logs of t's partitions.
func (s *Server) openTopic(t coord.Topic) (*topicState, error) {
	cfg, err := resolveTopicConfig(s.cfg.TopicDefaults, t.Configs)
	if err != nil {
		return nil, fmt.Errorf("broker: topic %s: %w", t.Name, err)
	}
	ts := &topicState{name: t.Name, id: t.ID, overrides: t.Configs, cfg: cfg}
	for i, p := range t.Partitions {
		part, err := s.openPartition(t.Name, int32(i), p.LeaderEpoch, cfg)
		if err != nil {
			for _, q := range ts.parts {
				_ = q.log.Close()
			}
			return nil, err
		}
		ts.parts = append(ts.parts, part)
	}
	return ts, nil
}

func (s *Server) openPartition(topic string, index, epoch int32, cfg topicConfig) (*partition, error) {
	dir := s.partitionDir(topic, index)
	opts := append([]segment.Option{segment.WithLogger(s.log.With("topic", topic, "partition", index))}, s.cfg.LogOptions...)
	l, err := segment.Open(dir, cfg.seg, opts...)
	if err != nil {
		return nil, fmt.Errorf("broker: open partition %s-%d: %w", topic, index, err)
	}
	if r := l.Recovery(); r.DroppedBytes > 0 || r.DroppedBatches > 0 || len(r.RebuiltIndexes) > 0 {
		s.log.Warn("partition recovered", "topic", topic, "partition", index,
			"truncated_at", r.TruncatedAt, "dropped_bytes", r.DroppedBytes, "dropped_batches", r.DroppedBatches,
			"rebuilt_indexes", r.RebuiltIndexes, "reason", r.Reason)
	}
	p := &partition{topic: topic, index: index, dir: dir, log: l, leaderEpoch: epoch}
	if err := p.loadProducers(s.log); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("broker: open partition %s-%d: %w", topic, index, err)
	}
	return p, nil
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
			if err := p.snapshotProducers(); err != nil {
				errs = append(errs, fmt.Errorf("broker: producer snapshot %s-%d: %w", p.topic, p.index, err))
			}
			if err := p.log.Close(); err != nil {
				errs = append(errs, fmt.Errorf("broker: close %s-%d: %w", p.topic, p.index, err))
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
		out = append(out, t.parts...)
	}
	return out
}

// lookupPartition finds a partition: the topic (nil if unknown) and the
// partition (nil if the topic or the partition is unknown).
func (s *Server) lookupPartition(topic string, index int32) (*topicState, *partition) {
	t := s.topic(topic)
	if t == nil || index < 0 || int(index) >= len(t.parts) {
		return t, nil
	}
	return t, t.parts[index]
}
