package broker

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/stratastream/strata/coord"
	"github.com/twmb/franz-go/pkg/kerr"
)

// This file holds the topic changes the admin APIs (and auto-creation)
// make: each is written to the coordinator, which makes it durable and
// tells every broker; this broker then applies the new metadata at once
// (metadata_apply.go), so its own logs are open or deleted when the
// response leaves. Other brokers apply it when their watches fire.

// adminTimeout bounds one admin change's calls to the coordinator.
const adminTimeout = 30 * time.Second

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

// coordError maps a coordinator error to a Kafka error for the client.
func coordError(err error, what string) error {
	var ke *kafkaError
	switch {
	case errors.As(err, &ke):
		return err
	case errors.Is(err, coord.ErrTopicDeletionPending):
		return newKafkaError(kerr.TopicAlreadyExists, "%s: the topic is marked for deletion", what)
	case errors.Is(err, coord.ErrTopicExists):
		return newKafkaError(kerr.TopicAlreadyExists, "%s: %v", what, err)
	case errors.Is(err, coord.ErrUnknownTopic):
		return newKafkaError(kerr.UnknownTopicOrPartition, "%s: %v", what, err)
	case errors.Is(err, coord.ErrInvalidPartitions):
		return newKafkaError(kerr.InvalidPartitions, "%s: %v", what, err)
	case errors.Is(err, coord.ErrInvalidAssignment):
		return newKafkaError(kerr.InvalidReplicaAssignment, "%s: %v", what, err)
	case errors.Is(err, coord.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		// The outcome is unknown: the client retries, and finds it done
		// or not.
		return newKafkaError(kerr.RequestTimedOut, "%s: %v", what, err)
	case errors.Is(err, coord.ErrClosed):
		return newKafkaError(kerr.NotController, "%s: broker is shutting down", what)
	default:
		return newKafkaError(kerr.KafkaStorageError, "%s: %v", what, err)
	}
}

// createTopicSpec is a validated topic creation.
type createTopicSpec struct {
	name       string
	partitions int32
	replFactor int16
	configs    map[string]string
	// assignment is a manual replica assignment (CreateTopics), nil to
	// let AssignReplicas place the replicas.
	assignment [][]int32
}

// checkCreateTopic validates a creation against the cluster's topics and
// live brokers in snap, filling in the defaults.
func (s *Server) checkCreateTopic(spec *createTopicSpec, snap *coord.Snapshot) error {
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
	if live := len(snap.Brokers); int(spec.replFactor) > live {
		return newKafkaError(kerr.InvalidReplicationFactor, "replication factor: %d larger than available brokers: %d", spec.replFactor, live)
	}
	if err := s.partitionsPerRequestError(int64(spec.partitions)); err != nil {
		return err
	}
	for i, reps := range spec.assignment {
		for _, b := range reps {
			if !snap.Live(b) {
				return newKafkaError(kerr.InvalidReplicaAssignment, "broker %d in the assignment of partition %d is not a live broker", b, i)
			}
		}
	}
	if spec.assignment != nil {
		if err := s.brokerPartitionsError(snap, spec.assignment); err != nil {
			return err
		}
	} else if err := s.replicaBudgetError(snap, int64(spec.partitions), int64(spec.replFactor)); err != nil {
		return err
	}
	for k, v := range spec.configs {
		if err := checkTopicConfig(k, &v); err != nil {
			return newKafkaError(kerr.InvalidConfig, "%v", err)
		}
	}
	if _, err := resolveTopicConfig(s.topicDefaults(), spec.configs); err != nil {
		return newKafkaError(kerr.InvalidConfig, "%v", err)
	}
	if _, ok := snap.Topics[spec.name]; ok {
		return newKafkaError(kerr.TopicAlreadyExists, "topic %q already exists", spec.name)
	}
	if _, ok := snap.PendingDeletion[spec.name]; ok {
		return newKafkaError(kerr.TopicAlreadyExists, "topic %q is marked for deletion", spec.name)
	}
	cn := collisionName(spec.name)
	for name := range snap.Topics {
		if collisionName(name) == cn {
			return newKafkaError(kerr.InvalidTopicException, "topic %q collides with existing topic %q", spec.name, name)
		}
	}
	return nil
}

// createTopic validates a topic, assigns its replicas over the live
// brokers (rack-aware, leaders spread evenly) unless the spec carries an
// assignment, creates it in the coordinator and opens this broker's
// replicas.
func (s *Server) createTopic(spec createTopicSpec) (*topicState, error) {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	if s.shuttingDown() {
		return nil, newKafkaError(kerr.NotController, "broker is shutting down")
	}
	snap := s.coord.Snapshot()
	if err := s.checkCreateTopic(&spec, snap); err != nil {
		return nil, err
	}
	asg := spec.assignment
	if asg == nil {
		var err error
		asg, err = coord.AssignReplicas(snap.Brokers, int(spec.partitions), int(spec.replFactor), coord.RandomStart)
		if err != nil {
			return nil, coordError(err, "assign replicas")
		}
		if err := s.brokerPartitionsError(snap, asg); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	ti, err := s.coord.CreateTopic(ctx, coord.TopicSpec{Name: spec.name, Assignment: asg, Configs: maps.Clone(spec.configs)})
	if err != nil {
		return nil, coordError(err, "create topic")
	}
	s.applySnapshot(s.coord.Snapshot())
	ts := s.topic(spec.name)
	if ts == nil || ts.id != ti.ID {
		return nil, newKafkaError(kerr.UnknownServerError, "topic %q was created and deleted again at once", spec.name)
	}
	s.log.Info("topic created", "topic", ts.name, "id", ts.id.String(), "partitions", len(ts.parts),
		"replication_factor", len(asg[0]), "assignment", asg, "configs", spec.configs)
	return ts, nil
}

// autoCreateTopic creates a topic with the broker defaults
// (num.partitions, default.replication.factor) if
// auto.create.topics.enable is on. It returns the topic (which may have
// been created concurrently by someone else) or an error for the client.
func (s *Server) autoCreateTopic(name string) (*topicState, error) {
	if !s.cfg.AutoCreateTopics {
		return nil, newKafkaError(kerr.UnknownTopicOrPartition, "topic %q does not exist and auto.create.topics.enable is false", name)
	}
	ts, err := s.createTopic(createTopicSpec{name: name, partitions: -1, replFactor: -1})
	var te *kafkaError
	if errors.As(err, &te) && te.err == kerr.TopicAlreadyExists {
		// Created elsewhere, maybe not applied here yet.
		s.applySnapshot(s.coord.Snapshot())
		if t := s.topic(name); t != nil {
			return t, nil
		}
		return nil, newKafkaError(kerr.UnknownTopicOrPartition, "topic %q is being created or deleted", name)
	}
	return ts, err
}

// deleteTopic deletes a topic in the coordinator, then this broker's logs
// of it; the other brokers delete theirs when they see it go.
func (s *Server) deleteTopic(name string) error {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	if _, ok := s.coord.Snapshot().Topic(name); !ok {
		return newKafkaError(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
	}
	if isInternalTopic(name) {
		return newKafkaError(kerr.InvalidTopicException, "topic %q is internal and cannot be deleted", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := s.coord.DeleteTopic(ctx, name); err != nil {
		return coordError(err, "delete topic")
	}
	s.applySnapshot(s.coord.Snapshot())
	return nil
}

// addPartitions grows a topic to count partitions, with the given replica
// assignment of the new partitions or, if nil, Kafka's assignment
// continued from the topic's. With validateOnly it only checks.
func (s *Server) addPartitions(name string, count int32, assignment [][]int32, validateOnly bool) error {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	snap := s.coord.Snapshot()
	t, ok := snap.Topic(name)
	if !ok {
		return newKafkaError(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
	}
	if isInternalTopic(name) {
		return newKafkaError(kerr.InvalidTopicException, "topic %q is internal: groups map to its partitions by their count, which cannot change", name)
	}
	have := int32(len(t.Partitions))
	if count < have {
		return newKafkaError(kerr.InvalidPartitions, "topic currently has %d partitions, which is higher than the requested %d", have, count)
	}
	if count == have {
		return newKafkaError(kerr.InvalidPartitions, "topic already has %d partitions", have)
	}
	if err := s.partitionsPerRequestError(int64(count) - int64(have)); err != nil {
		return err
	}
	rf := len(t.Partitions[0].Replicas)
	if assignment != nil {
		if len(assignment) != int(count-have) {
			return newKafkaError(kerr.InvalidReplicaAssignment, "increasing the number of partitions by %d but %d assignments provided", count-have, len(assignment))
		}
		for i, reps := range assignment {
			if len(reps) != rf {
				return newKafkaError(kerr.InvalidReplicaAssignment, "replica assignment %v of new partition %d: the topic's replication factor is %d", reps, have+int32(i), rf)
			}
			for j, b := range reps {
				if !snap.Live(b) {
					return newKafkaError(kerr.InvalidReplicaAssignment, "broker %d in the assignment of new partition %d is not a live broker", b, have+int32(i))
				}
				if slices.Contains(reps[:j], b) {
					return newKafkaError(kerr.InvalidReplicaAssignment, "the assignment of new partition %d names broker %d more than once", have+int32(i), b)
				}
			}
		}
	} else {
		if rf > len(snap.Brokers) {
			return newKafkaError(kerr.InvalidReplicationFactor, "replication factor: %d larger than available brokers: %d", rf, len(snap.Brokers))
		}
		if err := s.replicaBudgetError(snap, int64(count)-int64(have), int64(rf)); err != nil {
			return err
		}
		var err error
		opts := coord.AssignOptions{StartIndex: coord.AddStartIndex(snap.Brokers, t), StartPartition: int(have)}
		if assignment, err = coord.AssignReplicas(snap.Brokers, int(count-have), rf, opts); err != nil {
			return coordError(err, "assign replicas")
		}
	}
	if err := s.brokerPartitionsError(snap, assignment); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := s.coord.AddPartitions(ctx, name, have, assignment); err != nil {
		return coordError(err, "add partitions")
	}
	s.applySnapshot(s.coord.Snapshot())
	s.log.Info("partitions added", "topic", name, "partitions", count, "assignment", assignment)
	return nil
}

// setTopicConfig replaces a topic's config overrides in the coordinator
// and applies them to this broker's logs. With validateOnly it only
// checks.
func (s *Server) setTopicConfig(name string, overrides map[string]string, validateOnly bool) error {
	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	if _, ok := s.coord.Snapshot().Topic(name); !ok {
		return newKafkaError(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
	}
	for k, v := range overrides {
		if err := checkTopicConfig(k, &v); err != nil {
			return newKafkaError(kerr.InvalidConfig, "%v", err)
		}
	}
	cfg, err := resolveTopicConfig(s.topicDefaults(), overrides)
	if err != nil {
		return newKafkaError(kerr.InvalidConfig, "%v", err)
	}
	if err := checkInternalTopicConfig(name, cfg); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := s.coord.SetTopicConfig(ctx, name, overrides); err != nil {
		return coordError(err, "set topic configs")
	}
	s.applySnapshot(s.coord.Snapshot())
	s.log.Info("topic configs changed", "topic", name, "configs", overrides)
	return nil
}
