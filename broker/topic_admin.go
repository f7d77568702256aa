package broker

import (
	"errors"
	"maps"
	"strings"

	"github.com/stratastream/strata/coord"
	"github.com/twmb/franz-go/pkg/kerr"
)

// validTopicName applies Kafka's rules: 1 to 249 characters of
// [a-zA-Z0-9._-], and not "." or "..".
func validTopicName(name string) error {
	if name == "" {
		return newKafkaError(kerr.InvalidTopicException, "topic name is empty")
	}
	if name == "." || name == ".." {
		return newKafkaError(kerr.InvalidTopicException, "topic name cannot be %q", name)
	}
	if len(name) > 249 {
		return newKafkaError(kerr.InvalidTopicException, "topic name is %d characters, the limit is 249", len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return newKafkaError(kerr.InvalidTopicException, "topic name %q holds %q; legal characters are [a-zA-Z0-9._-]", name, c)
		}
	}
	return nil
}

// collisionName is what Kafka compares to reject topics that differ only
// in '.' versus '_' (their metric names would collide).
func collisionName(name string) string { return strings.ReplaceAll(name, ".", "_") }

// createTopicSpec is a validated topic creation.
type createTopicSpec struct {
	name       string
	partitions int32
	replFactor int16
	configs    map[string]string
}

// checkCreateTopic validates a creation against the current topics and
// the single live broker.
func (s *Server) checkCreateTopic(spec *createTopicSpec) error {
	if err := validTopicName(spec.name); err != nil {
		return err
	}
	if spec.partitions == -1 {
		spec.partitions = s.cfg.NumPartitions
	}
	if spec.replFactor == -1 {
		spec.replFactor = s.cfg.DefaultReplicationFactor
	}
	if spec.partitions <= 0 {
		return newKafkaError(kerr.InvalidPartitions, "number of partitions must be larger than 0")
	}
	if spec.replFactor <= 0 {
		return newKafkaError(kerr.InvalidReplicationFactor, "replication factor must be larger than 0")
	}
	if live := len(s.meta.Brokers()); int(spec.replFactor) > live {
		return newKafkaError(kerr.InvalidReplicationFactor, "replication factor: %d larger than available brokers: %d", spec.replFactor, live)
	}
	for k, v := range spec.configs {
		if err := checkTopicConfig(k, &v); err != nil {
			return newKafkaError(kerr.InvalidConfig, "%v", err)
		}
	}
	if _, err := resolveTopicConfig(s.cfg.TopicDefaults, spec.configs); err != nil {
		return newKafkaError(kerr.InvalidConfig, "%v", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if _, ok := s.mu.topics[spec.name]; ok {
		return newKafkaError(kerr.TopicAlreadyExists, "topic %q already exists", spec.name)
	}
	cn := collisionName(spec.name)
	for name := range s.mu.topics {
		if collisionName(name) == cn {
			return newKafkaError(kerr.InvalidTopicException, "topic %q collides with existing topic %q", spec.name, name)
		}
	}
	return nil
}

// createTopic validates, persists and opens a new topic.
func (s *Server) createTopic(spec createTopicSpec) (*topicState, error) {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	if s.shuttingDown() {
		return nil, newKafkaError(kerr.NotController, "broker is shutting down")
	}
	if err := s.checkCreateTopic(&spec); err != nil {
		return nil, err
	}
	t := coord.Topic{Name: spec.name, ID: coord.NewTopicID(), Configs: maps.Clone(spec.configs)}
	for i := int32(0); i < spec.partitions; i++ {
		t.Partitions = append(t.Partitions, s.newPartitionAssignment())
	}
	if err := s.meta.CreateTopic(t); err != nil {
		if errors.Is(err, coord.ErrTopicExists) {
			return nil, newKafkaError(kerr.TopicAlreadyExists, "topic %q already exists", spec.name)
		}
		return nil, newKafkaError(kerr.KafkaStorageError, "persist topic: %v", err)
	}
	ts, err := s.openTopic(t)
	if err != nil {
		if derr := s.meta.DeleteTopic(t.Name); derr != nil {
			s.log.Error("rolling back topic creation failed", "topic", t.Name, "err", derr)
		}
		return nil, newKafkaError(kerr.KafkaStorageError, "%v", err)
	}
	s.mu.Lock()
	s.mu.topics[ts.name] = ts
	s.mu.byID[ts.id] = ts
	s.mu.Unlock()
	s.log.Info("topic created", "topic", ts.name, "id", ts.id.String(), "partitions", len(ts.parts), "configs", spec.configs)
	return ts, nil
}

func (s *Server) newPartitionAssignment() coord.Partition {
	id := s.cfg.BrokerID
	return coord.Partition{Replicas: []int32{id}, ISR: []int32{id}, Leader: id, LeaderEpoch: 0}
}

// autoCreateTopic creates a topic with the broker defaults if
// auto.create.topics.enable is on. It returns the topic (which may have
// been created concurrently by someone else) or an error for the client.
func (s *Server) autoCreateTopic(name string) (*topicState, error) {
	if !s.cfg.AutoCreateTopics {
		return nil, newKafkaError(kerr.UnknownTopicOrPartition, "topic %q does not exist and auto.create.topics.enable is false", name)
	}
	ts, err := s.createTopic(createTopicSpec{name: name, partitions: -1, replFactor: -1})
	var te *kafkaError
	if errors.As(err, &te) && te.err == kerr.TopicAlreadyExists {
		if t := s.topic(name); t != nil {
			return t, nil
		}
	}
	return ts, err
}

// deleteTopic removes a topic from the metadata and deletes its data.
func (s *Server) deleteTopic(name string) error {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	ts := s.topic(name)
	if ts == nil {
		return newKafkaError(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
	}
	if isInternalTopic(name) {
		return newKafkaError(kerr.InvalidTopicException, "topic %q is internal and cannot be deleted", name)
	}
	if err := s.meta.DeleteTopic(name); err != nil {
		return newKafkaError(kerr.KafkaStorageError, "persist deletion: %v", err)
	}
	s.mu.Lock()
	delete(s.mu.topics, name)
	delete(s.mu.byID, ts.id)
	s.mu.Unlock()
	for _, p := range ts.parts {
		if err := p.log.Delete(); err != nil {
			// The metadata no longer names it: the next start
			// removes what is left.
			s.log.Error("deleting partition data failed", "topic", name, "partition", p.index, "err", err)
		}
	}
	s.log.Info("topic deleted", "topic", name, "id", ts.id.String())
	return nil
}

// addPartitions grows a topic to count partitions. With validateOnly it
// only checks.
func (s *Server) addPartitions(name string, count int32, validateOnly bool) error {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	ts := s.topic(name)
	if ts == nil {
		return newKafkaError(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
	}
	if isInternalTopic(name) {
		return newKafkaError(kerr.InvalidTopicException, "topic %q is internal: groups map to its partitions by their count, which cannot change", name)
	}
	have := int32(len(ts.parts))
	if count < have {
		return newKafkaError(kerr.InvalidPartitions, "topic currently has %d partitions, which is higher than the requested %d", have, count)
	}
	if count == have {
		return newKafkaError(kerr.InvalidPartitions, "topic already has %d partitions", have)
	}
	if validateOnly {
		return nil
	}
	var add []coord.Partition
	for i := have; i < count; i++ {
		add = append(add, s.newPartitionAssignment())
	}
	if err := s.meta.AddPartitions(name, add); err != nil {
		return newKafkaError(kerr.KafkaStorageError, "persist partitions: %v", err)
	}
	next := *ts
	next.parts = append([]*partition(nil), ts.parts...)
	for i := have; i < count; i++ {
		p, err := s.openPartition(name, i, 0, ts.cfg)
		if err != nil {
			// The metadata names the partition; a restart opens it.
			s.swapTopic(&next)
			return newKafkaError(kerr.KafkaStorageError, "%v", err)
		}
		next.parts = append(next.parts, p)
	}
	s.swapTopic(&next)
	s.log.Info("partitions added", "topic", name, "partitions", count)
	return nil
}

// setTopicConfig replaces a topic's config overrides, persists them and
// applies them to the open logs. With validateOnly it only checks.
func (s *Server) setTopicConfig(name string, overrides map[string]string, validateOnly bool) error {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	ts := s.topic(name)
	if ts == nil {
		return newKafkaError(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
	}
	for k, v := range overrides {
		if err := checkTopicConfig(k, &v); err != nil {
			return newKafkaError(kerr.InvalidConfig, "%v", err)
		}
	}
	cfg, err := resolveTopicConfig(s.cfg.TopicDefaults, overrides)
	if err != nil {
		return newKafkaError(kerr.InvalidConfig, "%v", err)
	}
	if err := checkInternalTopicConfig(name, cfg); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	if err := s.meta.SetTopicConfig(name, overrides); err != nil {
		return newKafkaError(kerr.KafkaStorageError, "persist configs: %v", err)
	}
	next := *ts
	next.overrides = maps.Clone(overrides)
	next.cfg = cfg
	for _, p := range ts.parts {
		p.log.UpdateConfig(cfg.seg)
	}
	s.swapTopic(&next)
	s.log.Info("topic configs changed", "topic", name, "configs", overrides)
	return nil
}

func (s *Server) swapTopic(ts *topicState) {
	s.mu.Lock()
	s.mu.topics[ts.name] = ts
	s.mu.byID[ts.id] = ts
	s.mu.Unlock()
}
