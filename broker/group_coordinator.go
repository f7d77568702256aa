package broker

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/stratastream/strata/broker/group"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file connects the consumer group coordinator (package group) to the
// server: the internal topic __consumer_offsets is created at the first
// start and each of its partitions is loaded into the coordinator before
// the server accepts connections; the handlers 08_offset_commit.go to
// 47_offset_delete.go hand their requests to the coordinator.
//
// __consumer_offsets is an ordinary partitioned topic of segment logs with
// these differences:
//   - Metadata reports it as internal (IsInternal).
//   - Clients cannot produce to it (INVALID_TOPIC_EXCEPTION, as Kafka
//     answers every client but its own admin tools), delete it or change its
//     partition count (INVALID_TOPIC_EXCEPTION): the coordinator is its
//     only writer, and groups map to partitions by the partition count.
//     Fetching from it is allowed, as in Kafka.
//   - Retention is unlimited (retention.ms=-1, retention.bytes=-1) and
//     config changes that would limit it are refused (INVALID_CONFIG):
//     Kafka compacts this topic, Strata does not compact yet, so deleting
//     old segments would lose committed offsets that were never
//     overwritten. The log grows with every commit until compaction
//     exists; a restart replays it all. cleanup.policy stays delete.
//   - Segments roll at 100 MiB (Kafka's offsets.topic.segment.bytes).

// offsetsTopicConfigs are the config overrides __consumer_offsets is
// created with.
func offsetsTopicConfigs() map[string]string {
	return map[string]string{
		"retention.ms":    "-1",
		"retention.bytes": "-1",
		"segment.bytes":   "104857600",
	}
}

// isInternalTopic reports whether name is a topic that only the broker
// writes.
func isInternalTopic(name string) bool { return name == group.Topic }

// checkInternalTopicConfig refuses an effective config of an internal topic
// that would delete data the coordinator still needs.
func checkInternalTopicConfig(name string, cfg topicConfig) error {
	if !isInternalTopic(name) {
		return nil
	}
	if cfg.seg.RetentionMs != -1 || cfg.seg.RetentionBytes >= 0 {
		return newKafkaError(kerr.InvalidConfig, "%s keeps retention.ms=-1 and retention.bytes=-1: it is not compacted, and retention would delete committed offsets", name)
	}
	return nil
}

// offsetsLog is one partition of __consumer_offsets as the coordinator
// writes it: batches are stamped with the partition's leader epoch and
// appended under the partition's append lock, like produced batches.
type offsetsLog struct {
	*segment.Log
	p *partition
}

// Append appends the coordinator's batches with the partition's epoch.
func (l offsetsLog) Append(batches []byte, o segment.AppendOptions) (segment.AppendResult, error) {
	l.p.appendMu.Lock()
	defer l.p.appendMu.Unlock()
	o.LeaderEpoch = l.p.leaderEpoch
	return l.Log.Append(batches, o)
}

// startGroups creates __consumer_offsets if it is missing, starts the
// coordinator and loads every partition into it, several at a time. A
// partition that fails to load is logged and its groups are answered
// COORDINATOR_NOT_AVAILABLE by FindCoordinator; the other groups and all
// data are served.
func (s *Server) startGroups() error {
	t := s.topic(group.Topic)
	if t == nil {
		var err error
		t, err = s.createTopic(createTopicSpec{
			name:       group.Topic,
			partitions: int32(s.cfg.Groups.NumPartitions),
			replFactor: 1,
			configs:    offsetsTopicConfigs(),
		})
		if err != nil {
			return fmt.Errorf("broker: create %s: %w", group.Topic, err)
		}
	}
	if len(t.parts) != s.cfg.Groups.NumPartitions {
		// Kafka does the same: the topic, not the setting, decides.
		s.log.Warn("offsets.topic.num.partitions differs from the existing topic; using the topic's partition count",
			"topic", group.Topic, "setting", s.cfg.Groups.NumPartitions, "partitions", len(t.parts))
	}
	if err := checkInternalTopicConfig(t.name, t.cfg); err != nil {
		s.log.Warn("internal topic has limited retention; committed offsets may be lost", "topic", t.name, "err", err)
	}

	cfg := s.cfg.Groups
	cfg.NumPartitions = len(t.parts)
	cfg.Logger = s.log.With("component", "group")
	cfg.PartitionExists = s.partitionExists
	c, err := group.New(cfg)
	if err != nil {
		return fmt.Errorf("broker: group coordinator: %w", err)
	}
	s.groups = c
	s.groupLoadErrs = map[int]error{}

	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))
	for _, p := range t.parts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := c.Load(int(p.index), offsetsLog{Log: p.log, p: p}); err != nil {
				s.log.Error("loading consumer groups failed; their coordinator is unavailable", "topic", group.Topic, "partition", p.index, "err", err)
				mu.Lock()
				s.groupLoadErrs[int(p.index)] = err
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return nil
}

// partitionExists tells the coordinator whether a commit names a partition
// this broker has (Config.PartitionExists). It takes only Server.mu.
func (s *Server) partitionExists(topic string, index int32) bool {
	_, p := s.lookupPartition(topic, index)
	return p != nil
}

// groupCoordinatorError returns why no coordinator serves the group on
// this broker, or nil.
func (s *Server) groupCoordinatorError(id string) error {
	p := s.groups.PartitionFor(id)
	if err := s.groupLoadErrs[p]; err != nil {
		return newKafkaError(kerr.CoordinatorNotAvailable, "partition %d of %s failed to load", p, group.Topic)
	}
	if s.shuttingDown() {
		return newKafkaError(kerr.CoordinatorNotAvailable, "broker is shutting down")
	}
	return nil
}

// closeGroups stops the coordinator: waiting members are answered and
// queued writes appended. It runs before the logs are closed.
func (s *Server) closeGroups() error {
	if s.groups == nil {
		return nil
	}
	return s.groups.Close()
}

// groupCtx is the context a coordinator call runs under: the request's,
// which the connection cancels.
func groupCtx(r *request) context.Context {
	if r.ctx == nil {
		return context.Background()
	}
	return r.ctx
}

// registerGroupAPI registers a handler for an API the group coordinator
// serves, at exactly the versions group.APIs lists for it.
func registerGroupAPI(key int16, fn handlerFunc) {
	for _, a := range group.APIs() {
		if a.Key == key {
			register(key, a.Min, a.Max, fn)
			return
		}
	}
	panic(fmt.Sprintf("broker: api key %d is not served by the group coordinator", key))
}

// blockingGroupReply is the reply to a JoinGroup or SyncGroup that the
// coordinator answered: nothing, and the connection closed, when the
// connection's context was cancelled while it waited (the client is gone
// or the server shuts down), so that no answer goes out for a member the
// group no longer counts.
func blockingGroupReply(r *request, resp kmsg.Response) reply {
	if r.ctx != nil && r.ctx.Err() != nil {
		return reply{none: true, closeConn: true}
	}
	return reply{msg: resp}
}
