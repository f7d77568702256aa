package broker

import (
	"fmt"
	"strconv"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/broker/group"
	"github.com/stratastream/strata/broker/sharestate"
	"github.com/stratastream/strata/coord"
	"github.com/twmb/franz-go/pkg/kerr"
)

// This file connects the share coordinator (package sharestate) to the
// server, as txn_coordinator.go connects the transaction coordinator. A
// share partition's state is kept by the leader of its partition of the
// internal topic __share_group_state (sharestate.PartitionFor of its
// coordinator key "group:topicId:partition"); each broker loads the
// partitions it leads (shareStateLoader), reloading at each new leader epoch,
// and unloads those it stops leading.
//
// __share_group_state is created on first need (FindCoordinator key type
// 2, or the first persister call), as __consumer_offsets and
// __transaction_state are, with share.coordinator.state.topic.num.partitions
// partitions, min(share.coordinator.state.topic.replication.factor, live
// brokers) replicas, cleanup.policy=compact,
// segment.bytes=share.coordinator.state.topic.segment.bytes and
// min.insync.replicas=min(share.coordinator.state.topic.min.isr,
// replicas); writes are acknowledged by the ISR (acks=all), as the
// transaction coordinator's (txnStateLog). Clients cannot produce to it or
// delete it.
//
// Share groups store their state through s.sharePersister
// (share_persister.go), which routes each share partition to its
// coordinator.

// shareStateTopicConfigs are the config overrides __share_group_state is
// created with, for rf replicas.
func (s *Server) shareStateTopicConfigs(rf int) map[string]string {
	return map[string]string{
		"cleanup.policy":      "compact",
		"retention.ms":        "-1",
		"retention.bytes":     "-1",
		"segment.bytes":       strconv.Itoa(int(s.cfg.ShareCoordinator.StateTopicSegmentBytes)),
		"min.insync.replicas": strconv.Itoa(max(1, min(s.cfg.ShareCoordinator.StateTopicMinISR, rf))),
	}
}

// startShareCoordinator creates the share coordinator: with the partition count of
// __share_group_state if it exists, else the setting.
func (s *Server) startShareCoordinator() error {
	sc := s.cfg.ShareCoordinator
	n := s.internalTopicPartitions(sharestate.Topic, "share.coordinator.state.topic.num.partitions", sc.StateTopicNumPartitions)
	c, err := sharestate.New(sharestate.Config{
		NumPartitions:      n,
		UpdatesPerSnapshot: sc.UpdatesPerSnapshot,
		PartitionExists: func(id [16]byte, p int32) bool {
			t := s.topicByID(coord.TopicID(id))
			return t != nil && p >= 0 && int(p) < len(t.parts)
		},
		Now:    s.nowFn,
		Logger: s.log.With("component", "sharestate"),
	})
	if err != nil {
		return fmt.Errorf("broker: share coordinator: %w", err)
	}
	s.shareCoord = c
	return nil
}

// closeShareCoordinator stops the share coordinator, before the logs are closed.
func (s *Server) closeShareCoordinator() {
	if s.shareCoord != nil {
		s.shareCoord.Close()
	}
}

// shareLoading is the loader of __share_group_state's partitions into the
// share coordinator, reloaded at each new leader epoch (its appends are
// fenced by the epoch they were loaded at).
func (s *Server) shareLoading() coordinatorLoader {
	return coordinatorLoader{
		s: s, topic: sharestate.Topic, what: "share partitions", reloadOnEpoch: true,
		numPartitions: func() int {
			if s.shareCoord == nil {
				return 0
			}
			return s.shareCoord.NumPartitions()
		},
		load: func(t *topicState, lp *partition, p int, epoch int32) error {
			l := txnStateLog{Log: lp.log, s: s, p: lp, minISR: int(t.cfg.minInsyncReps), epoch: epoch, self: s.cfg.BrokerID}
			_, err := s.shareCoord.Load(p, l)
			return err
		},
		unload: func(p int) { s.shareCoord.Unload(p) },
	}
}

// shareCoordinator returns the broker that keeps the state of the share
// partition of coordinator key ("group:topicId:partition"): the leader of
// its partition of __share_group_state, created here when the cluster
// does not have it. COORDINATOR_NOT_AVAILABLE when the partition has no
// live leader, failed to load on this broker, or the broker shuts down.
func (s *Server) shareCoordinator(key string) (coord.BrokerInfo, int, error) {
	if s.shuttingDown() || s.shareCoord == nil {
		return coord.BrokerInfo{}, 0, newKafkaError(kerr.CoordinatorNotAvailable, "broker is shutting down")
	}
	t, _, err := s.ensureInternalTopic(sharestate.Topic, s.shareCoord.NumPartitions(), s.cfg.ShareCoordinator.StateTopicReplicationFactor, s.shareStateTopicConfigs)
	if err != nil {
		s.log.Warn("share coordinator unavailable: the share state topic could not be created", "topic", sharestate.Topic, "err", err)
		return coord.BrokerInfo{}, 0, newKafkaError(kerr.CoordinatorNotAvailable, "%s: %v", sharestate.Topic, err)
	}
	p := group.PartitionFor(key, s.shareCoord.NumPartitions())
	b, err := s.shareStateLoader.coordinatorOf(t, p)
	return b, p, err
}

// handleShareState serves the share coordinator RPCs (83-87) from this
// broker's share coordinator.
func handleShareState(s *Server, r *request) (reply, error) {
	if !s.authorize(r, acl.OpClusterAction, acl.Cluster) {
		return reply{msg: sharestate.ErrorResponse(r.kreq, kerr.ClusterAuthorizationFailed)}, nil
	}
	return reply{msg: s.serveShareState(groupCtx(r), r.kreq)}, nil
}
