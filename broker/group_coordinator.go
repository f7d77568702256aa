package broker

import (
	"context"
	"fmt"
	"github.com/stratastream/strata/broker/sharestate"
	"strconv"
	"time"

	"github.com/stratastream/strata/broker/group"
	"github.com/stratastream/strata/broker/txn"
	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file connects the consumer group coordinator (package group) to the
// server. A group is coordinated by the leader of its partition of the
// internal topic __consumer_offsets (group.PartitionFor): FindCoordinator
// names that broker, and each broker loads into its coordinator the
// partitions it leads and unloads those it stops leading (groupLoader), so
// a group request on any other broker gets NOT_COORDINATOR and the client
// looks the coordinator up again. The handlers 08_offset_commit.go to
// 47_offset_delete.go hand their requests to the coordinator.
//
// __consumer_offsets is created with offsets.topic.num.partitions
// partitions and min(offsets.topic.replication.factor, live brokers)
// replicas: by a single node (embedded coordinator) at its first start,
// before it serves; in a ZooKeeper cluster by the first FindCoordinator
// for a group, as Kafka does, so that it is not created with one replica
// by the first broker of a cluster that is still starting. A single node
// loads every partition before it accepts connections.
//
// __consumer_offsets is an ordinary partitioned topic of segment logs with
// these differences:
//   - Metadata reports it as internal (IsInternal).
//   - Clients cannot produce to it (INVALID_TOPIC_EXCEPTION, as Kafka
//     answers every client but its own admin tools), delete it or change its
//     partition count (INVALID_TOPIC_EXCEPTION): the coordinator is its
//     only writer, and groups map to partitions by the partition count.
//     Fetching from it is allowed, as in Kafka.
//   - It is created with cleanup.policy=compact, as in Kafka: the log
//     cleaner (log_cleaner.go) keeps the latest commit of every key, and
//     retention by time and size is off. The coordinator writes a
//     tombstone for every offset or group it deletes (package group's
//     doc), so a coordinator taking over replays one record per key plus
//     what was written since the last cleaning. Config changes that would
//     let retention delete segments (cleanup.policy with delete and a
//     limited retention.ms or retention.bytes) are refused
//     (INVALID_CONFIG): they would lose committed offsets that were
//     never overwritten. A topic created before compaction existed keeps
//     cleanup.policy=delete with unlimited retention until an operator
//     sets cleanup.policy=compact.
//   - Segments roll at offsets.topic.segment.bytes (Kafka's setting,
//     default 100 MiB).

// offsetsTopicConfigs are the config overrides __consumer_offsets is
// created with.
func (s *Server) offsetsTopicConfigs() map[string]string {
	return map[string]string{
		"cleanup.policy":  "compact",
		"retention.ms":    "-1",
		"retention.bytes": "-1",
		"segment.bytes":   strconv.Itoa(int(s.cfg.OffsetsTopicSegmentBytes)),
	}
}

// isInternalTopic reports whether name is a topic that only the broker
// writes.
func isInternalTopic(name string) bool {
	return name == group.Topic || name == txn.Topic || name == sharestate.Topic
}

// checkInternalTopicConfig refuses an effective config of an internal topic
// that would delete data the coordinator still needs.
func checkInternalTopicConfig(name string, cfg topicConfig) error {
	if !isInternalTopic(name) {
		return nil
	}
	if cfg.seg.RetentionMs != -1 || cfg.seg.RetentionBytes >= 0 {
		return newKafkaError(kerr.InvalidConfig, "%s keeps cleanup.policy=compact (or retention.ms=-1 and retention.bytes=-1): retention would delete what its coordinator still needs (committed offsets, transaction state)", name)
	}
	return nil
}

// offsetsLog is one partition of __consumer_offsets as the coordinator
// writes it: batches are stamped with the partition's leader epoch and
// appended under the partition's append lock, like produced batches. An
// append after the partition's leadership moved away fails, and the
// coordinator answers the write NOT_COORDINATOR. Like Kafka's offset
// commits (acks=all), Append returns once the ISR has the batch (the high
// watermark passed it), or fails after offsetsCommitTimeout.
type offsetsLog struct {
	*segment.Log
	s    *Server
	p    *partition
	self int32
}

// recordProducersLocked records the transactional batches of
// TxnOffsetCommit in the partition's producer state, as appendProduced does
// for produced batches (followers do it in appendReplicatedLocked), so the
// state knows where each producer's transaction began. Append rewrote the
// base offsets in place. __consumer_offsets is never tiered: no roll
// snapshots. Caller holds appendMu.
func (l offsetsLog) recordProducersLocked(batches []byte) {
	for off := 0; off < len(batches); {
		h, err := segment.ParseHeader(batches[off:])
		if err != nil {
			return // validated by Append: not reached
		}
		if h.ProducerID >= 0 && !h.Control() {
			l.p.producers.Update(h, h.BaseOffset)
		}
		off += h.Size()
	}
}

// offsetsCommitTimeout is Kafka's offsets.commit.timeout.ms default.
const offsetsCommitTimeout = 5 * time.Second

// Append appends the coordinator's batches with the partition's epoch
// and waits for them to be replicated.
func (l offsetsLog) Append(batches []byte, o segment.AppendOptions) (segment.AppendResult, error) {
	l.p.appendMu.Lock()
	lead, err := l.p.leaderCheck(l.self)
	if err != nil {
		l.p.appendMu.Unlock()
		return segment.AppendResult{}, err
	}
	o.LeaderEpoch = lead.epoch
	res, err := l.Log.Append(batches, o)
	if err == nil {
		l.recordProducersLocked(batches)
	}
	l.p.appendMu.Unlock()
	if err != nil {
		return res, err
	}
	l.p.repl.AdvanceHighWatermark()
	if err := l.s.awaitHighWatermark(context.Background(), l.p, lead.epoch, res.LastOffset+1, 0, l.s.nowFn().Add(offsetsCommitTimeout)); err != nil {
		return segment.AppendResult{}, err
	}
	return res, nil
}

// ensureOffsetsTopic creates __consumer_offsets if the cluster does not
// have it, with the group coordinator's partition count and
// min(offsets.topic.replication.factor, live brokers) replicas
// (ensureInternalTopic).
func (s *Server) ensureOffsetsTopic(partitions int) (t *coord.TopicInfo, fresh bool, err error) {
	return s.ensureInternalTopic(group.Topic, partitions, s.cfg.OffsetsTopicReplicationFactor, func(int) map[string]string { return s.offsetsTopicConfigs() })
}

// startGroups creates the group coordinator over __consumer_offsets:
// with the topic's partition count if it exists, else the setting. A
// single node (embedded coordinator) creates the topic first.
func (s *Server) startGroups() error {
	n := s.cfg.Groups.NumPartitions
	if s.cfg.ZooKeeperConnect == "" {
		if _, _, err := s.ensureOffsetsTopic(n); err != nil {
			return fmt.Errorf("broker: create %s: %w", group.Topic, err)
		}
	}
	if t, ok := s.coord.Snapshot().Topic(group.Topic); ok {
		if len(t.Partitions) != n {
			// Kafka does the same: the topic, not the setting, decides.
			s.log.Warn("offsets.topic.num.partitions differs from the existing topic; using the topic's partition count",
				"topic", group.Topic, "setting", n, "partitions", len(t.Partitions))
		}
		n = len(t.Partitions)
		if ts := s.topic(group.Topic); ts != nil {
			if err := checkInternalTopicConfig(ts.name, ts.cfg); err != nil {
				s.log.Warn("internal topic has limited retention; committed offsets may be lost", "topic", ts.name, "err", err)
			}
		}
	}
	cfg := s.cfg.Groups
	cfg.NumPartitions = n
	cfg.Logger = s.log.With("component", "group")
	cfg.PartitionExists = s.partitionExists
	cfg.Topics = s.groupTopicSnapshot
	cfg.Consumer.GroupTimeouts = func(id string) (session, heartbeat time.Duration) {
		g := s.groupConfig(id) // consumer.session.timeout.ms, consumer.heartbeat.interval.ms within the broker's bounds
		return g.ConsumerSessionTimeout, g.ConsumerHeartbeatInterval
	}
	c, err := group.New(cfg)
	if err != nil {
		return fmt.Errorf("broker: group coordinator: %w", err)
	}
	s.groups = c
	return nil
}

// groupLoading is the loader of __consumer_offsets' partitions into the
// group coordinator; it keeps each partition's load report for the
// metrics. The leader epoch does not matter: a partition stays loaded
// while this broker leads it.
func (s *Server) groupLoading() coordinatorLoader {
	return coordinatorLoader{
		s: s, topic: group.Topic, what: "consumer groups",
		numPartitions: func() int {
			if s.groups == nil {
				return 0
			}
			return s.groups.NumPartitions()
		},
		load: func(_ *topicState, lp *partition, p int, _ int32) error {
			rep, err := s.groups.Load(p, offsetsLog{Log: lp.log, s: s, p: lp, self: s.cfg.BrokerID})
			if err == nil && s.shares != nil {
				// Before the partition counts as loaded, so no share
				// heartbeat comes before its group is back.
				s.shares.Groups.Restore(rep.ShareGroups, shareTopics{s.coord.Snapshot()})
			}
			rep.ShareGroups = nil // package share holds them now; the report is kept for the metrics
			if err == nil {
				s.groupReports.Lock()
				s.groupReports.m[p] = rep
				s.groupReports.Unlock()
			}
			return err
		},
		unload: func(p int) {
			s.groups.Unload(p)
			if s.shares != nil {
				s.shares.Groups.Unload(func(g string) bool { return s.groups.PartitionFor(g) == p })
			}
			s.groupReports.Lock()
			delete(s.groupReports.m, p)
			s.groupReports.Unlock()
		},
	}
}

// groupLoadReports returns the load reports of the loaded
// __consumer_offsets partitions.
func (s *Server) groupLoadReports() []group.LoadReport {
	s.groupReports.Lock()
	defer s.groupReports.Unlock()
	out := make([]group.LoadReport, 0, len(s.groupReports.m))
	for _, r := range s.groupReports.m {
		out = append(out, r)
	}
	return out
}

// partitionExists tells the coordinator whether a commit names a partition
// that exists in the cluster (Config.PartitionExists). It reads only the
// coordinator's snapshot.
func (s *Server) partitionExists(topic string, index int32) bool {
	_, ok := s.coord.Snapshot().Partition(coord.TopicPartition{Topic: topic, Partition: index})
	return ok
}

// groupTopicSnapshot gives the coordinator the cluster's topics
// (Config.Topics): the same snapshot while the metadata snapshot is the
// same, a new one after any change of the metadata, so that consumer
// groups resolve their subscriptions again after a topic is created,
// deleted or grows.
func (s *Server) groupTopicSnapshot() *group.TopicSnapshot {
	snap := s.coord.Snapshot()
	s.groupTopics.Lock()
	defer s.groupTopics.Unlock()
	if s.groupTopics.from == snap && s.groupTopics.snap != nil {
		return s.groupTopics.snap
	}
	names := snap.TopicNames()
	ts := make([]group.TopicMeta, 0, len(names))
	for _, name := range names {
		if t, ok := snap.Topic(name); ok {
			ts = append(ts, group.TopicMeta{Name: t.Name, ID: t.ID, Partitions: int32(len(t.Partitions))})
		}
	}
	s.groupTopics.from, s.groupTopics.snap = snap, group.NewTopicSnapshot(ts)
	return s.groupTopics.snap
}

// groupCoordinator returns the broker that coordinates group id: the
// leader of its partition of __consumer_offsets, which is created here if
// the cluster does not have it yet. COORDINATOR_NOT_AVAILABLE when this
// call created the topic, the partition has no live leader, failed to
// load on this broker, or the broker shuts down.
func (s *Server) groupCoordinator(id string) (coord.BrokerInfo, error) {
	if s.shuttingDown() {
		return coord.BrokerInfo{}, newKafkaError(kerr.CoordinatorNotAvailable, "broker is shutting down")
	}
	t, fresh, err := s.ensureOffsetsTopic(s.groups.NumPartitions())
	if err != nil {
		return coord.BrokerInfo{}, newKafkaError(kerr.CoordinatorNotAvailable, "%s: %v", group.Topic, err)
	}
	if fresh {
		// As Kafka's FindCoordinator after creating the topic: its
		// leaders learn of it and load their partitions after this
		// broker's snapshot shows it, and a coordinator named now could
		// answer the client's next request NOT_COORDINATOR, which not
		// every client retries for every API (franz-go does not for
		// AlterShareGroupOffsets). The client asks again.
		return coord.BrokerInfo{}, newKafkaError(kerr.CoordinatorNotAvailable, "%s was just created; its partitions are being loaded", group.Topic)
	}
	return s.groupLoader.coordinatorOf(t, s.groups.PartitionFor(id))
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
