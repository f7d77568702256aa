package broker

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/segment"
)

// This file keeps the broker's topics and partition logs in line with the
// cluster metadata: applySnapshot takes a coordinator snapshot (from the
// subscription's events, or right after this broker changed the metadata
// itself) and
//   - deletes the logs of topics that left the snapshot, or whose ID
//     changed (deleted and created again), matched by topic ID;
//   - opens the logs of partitions this broker is a replica of, as
//     partitions appear (new topics, added partitions, a reassignment
//     adding this broker), and deletes those it no longer is a replica
//     of (a reassignment moved them away);
//   - applies topic config changes to the open logs;
//   - records each hosted partition's leader and leader epoch, which the
//     Produce, Fetch, ListOffsets and OffsetForLeaderEpoch handlers check;
//   - hands the snapshot to the replication manager (package replica,
//     wired in replication.go), which takes each hosted partition's
//     leadership, ISR and leader epoch from it and fetches from the
//     leader the partitions this broker follows;
//   - tells the group coordinator which __consumer_offsets partitions this
//     broker now leads (group_coordinator.go loads and unloads them), and
//     which topics were deleted: it removes their committed offsets with
//     tombstones (group.Coordinator.DeleteTopicOffsets, Kafka's
//     onPartitionsDeleted), in the background, so that the metadata is
//     never held up by an append to __consumer_offsets.
//
// Snapshots carry a sequence number; an older snapshot than the last one
// applied is ignored, so the event loop and an admin request applying
// concurrently cannot roll the broker back. applyMu serializes
// applications; it is taken after adminMu and before mu.

// applyState is guarded by Server.applyMu.
type applyState struct {
	seq     uint64
	applied bool // seq is valid
	closed  bool // Shutdown has closed the logs: apply nothing more
	// defaultsGen is the topic defaults' generation last applied.
	defaultsGen uint64
}

// applySnapshot brings the broker's topics and logs in line with snap.
func (s *Server) applySnapshot(snap *coord.Snapshot) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	gen := s.dynCfg.gen.Load()
	if s.apply.closed || (s.apply.applied && snap.Seq <= s.apply.seq && gen == s.apply.defaultsGen) {
		return
	}
	first := !s.apply.applied
	if !s.apply.applied || snap.Seq > s.apply.seq {
		s.apply.seq = snap.Seq
	} else {
		snap = s.coord.Snapshot() // the topic defaults changed: re-resolve with the latest
		s.apply.seq = max(s.apply.seq, snap.Seq)
	}
	s.apply.applied, s.apply.defaultsGen = true, gen

	s.mu.RLock()
	cur := maps.Clone(s.mu.topics)
	s.mu.RUnlock()

	// Deletions first: a topic created again under the same name reuses
	// the directory names of the old one.
	var gone []*topicState
	for name, t := range cur {
		if nt, ok := snap.Topics[name]; !ok || nt.ID != t.id {
			gone = append(gone, t)
			delete(cur, name)
		}
	}
	if len(gone) > 0 {
		s.swapTopics(cur)
		for _, t := range gone {
			s.deleteTopicLogs(t)
		}
		s.deleteGroupOffsets(gone)
	}

	next := make(map[string]*topicState, len(snap.Topics))
	var removed []*partition
	for name, ti := range snap.Topics {
		var rm []*partition
		next[name], rm = s.syncTopic(cur[name], ti, first, gen)
		removed = append(removed, rm...)
	}
	s.swapTopics(next)
	for _, p := range removed {
		s.deleteRemovedReplica(p)
	}
	if s.repl != nil {
		s.repl.Sync(snap)
	}
	s.groupLoader.noteLeadership(snap)
	s.txnLoader.noteLeadership(snap)
	s.shareStateLoader.noteLeadership(snap)
}

func (s *Server) swapTopics(topics map[string]*topicState) {
	byID := make(map[coord.TopicID]*topicState, len(topics))
	for _, t := range topics {
		byID[t.id] = t
	}
	s.mu.Lock()
	s.mu.topics = topics
	s.mu.byID = byID
	s.mu.Unlock()
}

// deleteTopicLogs closes and deletes the logs of a topic that is gone.
func (s *Server) deleteTopicLogs(t *topicState) {
	n := 0
	for i, p := range t.parts {
		s.dirs.forget(segment.PartitionDirName(t.name, int32(i)))
		if p == nil {
			continue
		}
		n++
		if s.repl != nil {
			s.repl.Forget(p.repl)
		}
		s.tierDelete(p, t.id.String(), t.cfg.remoteStorage)
		s.cleanerStop(p)
		if err := p.log.Delete(); err != nil {
			// The topic is gone from the metadata: the next start
			// removes what is left (by topic ID).
			s.log.Error("deleting partition data failed", "topic", t.name, "partition", p.index, "err", err)
		}
	}
	s.metrics.forgetTopic(t.name)
	s.log.Info("topic deleted", "topic", t.name, "id", t.id.String(), "local_partitions", n)
}

// deleteRemovedReplica closes and deletes this broker's copy of a
// partition it is no longer a replica of (a reassignment moved it away),
// once it is out of the served topics: replication stops, the archiver
// stops (the remote data belongs to the partition, which lives on), the
// local log is deleted.
func (s *Server) deleteRemovedReplica(p *partition) {
	s.dirs.forget(segment.PartitionDirName(p.topic, p.index))
	if s.repl != nil {
		s.repl.Forget(p.repl)
	}
	p.tierStop()
	s.cleanerStop(p)
	if err := p.log.Delete(); err != nil {
		// Not served any more; the next start removes what is left
		// (removeStrayPartitions).
		s.log.Error("deleting a removed replica failed", "topic", p.topic, "partition", p.index, "err", err)
		return
	}
	s.log.Info("replica removed by a reassignment: local data deleted", "topic", p.topic, "partition", p.index)
}

// syncTopic returns the topicState for ti, reusing old (the same topic as
// this broker last knew it, or nil) where nothing changed, and the open
// partitions this broker is no longer a replica of, for the caller to
// delete once they are out of the served topics. A removed replica that
// still leads is kept until the controller has moved leadership off it.
func (s *Server) syncTopic(old *topicState, ti *coord.TopicInfo, first bool, gen uint64) (*topicState, []*partition) {
	self := s.cfg.BrokerID
	ts := &topicState{name: ti.Name, id: ti.ID, overrides: ti.Configs, defaultsGen: gen}
	configChanged := old == nil || !maps.Equal(old.overrides, ti.Configs) || old.defaultsGen != gen
	if configChanged {
		ts.cfg = s.resolveStoredConfig(ti.Name, ti.Configs)
	} else {
		ts.overrides, ts.cfg = old.overrides, old.cfg
	}
	changed := old == nil || configChanged || len(old.parts) != len(ti.Partitions)
	var removed []*partition
	ts.parts = make([]*partition, len(ti.Partitions))
	for i, pi := range ti.Partitions {
		idx := int32(i)
		lead := leadership{leader: pi.State.Leader, epoch: pi.State.LeaderEpoch}
		var p *partition
		if old != nil {
			p = old.local(idx)
		}
		if p == nil && slices.Contains(pi.Replicas, self) {
			if _, offline := s.dirs.offlineReason(segment.PartitionDirName(ti.Name, idx)); offline {
				continue // KAFKA_STORAGE_ERROR; reported to the controller
			}
			var err error
			if p, err = s.openPartition(ti.Name, ti.ID, idx, lead, ts.cfg, !first); err != nil {
				if !errors.Is(err, errLogDirOffline) {
					// Not served (NOT_LEADER_OR_FOLLOWER); tried
					// again at the next metadata change.
					s.log.Error("opening a hosted partition failed", "topic", ti.Name, "partition", idx, "err", err)
				}
				continue
			}
			changed = true
			s.tierStart(p, ti.ID.String(), ts.cfg, ti.Configs, int32(len(ti.Partitions)))
			if !first {
				s.log.Debug("partition replica opened", "topic", ti.Name, "partition", idx, "leader", lead.leader, "leader_epoch", lead.epoch, "replicas", pi.Replicas)
			}
		}
		if p == nil {
			continue
		}
		if !slices.Contains(pi.Replicas, self) && pi.State.Leader != self {
			removed = append(removed, p)
			changed = true
			continue
		}
		if configChanged && old != nil {
			s.tierConfigChanged(p, ts)
		}
		s.applyThrottledReplicas(p, ts.cfg)
		if prev := p.leadership(); prev != lead {
			p.lead.Store(&lead)
			s.tierLeadership(p)
			switch {
			case lead.leader == self && prev.leader != self:
				s.log.Info("became leader", "topic", ti.Name, "partition", idx, "leader_epoch", lead.epoch, "isr", pi.State.ISR)
			case lead.leader != self && prev.leader == self:
				s.log.Info("no longer leader", "topic", ti.Name, "partition", idx, "leader", lead.leader, "leader_epoch", lead.epoch)
			}
		}
		ts.parts[i] = p
	}
	if !changed {
		for i := range ts.parts {
			if ts.parts[i] != old.parts[i] {
				changed = true
				break
			}
		}
	}
	if !changed {
		return old, nil
	}
	return ts, removed
}

// resolveStoredConfig resolves a topic's stored config overrides. An
// override this broker cannot use (written by another broker version) is
// logged and left out rather than making the topic unusable.
func (s *Server) resolveStoredConfig(name string, overrides map[string]string) topicConfig {
	cfg, err := resolveTopicConfig(s.topicDefaults(), overrides)
	if err == nil {
		return cfg
	}
	usable := map[string]string{}
	for k, v := range overrides {
		if checkTopicConfig(k, &v) == nil {
			usable[k] = v
		} else {
			s.log.Error("ignoring a topic config override this broker cannot apply", "topic", name, "config", k, "value", v)
		}
	}
	cfg, err = resolveTopicConfig(s.topicDefaults(), usable)
	if err != nil {
		s.log.Error("topic configs do not resolve; using the broker defaults", "topic", name, "err", err)
		cfg, _ = resolveTopicConfig(s.topicDefaults(), nil)
	}
	return cfg
}

// deleteGroupOffsets has the group coordinator delete the committed
// offsets of topics that are gone, in the background (bounded by
// adminTimeout and by Shutdown); a failure is logged: the partition's
// coordinator moved, and its new one holds the offsets, as in Kafka.
func (s *Server) deleteGroupOffsets(gone []*topicState) {
	if s.groups == nil {
		return
	}
	var names []string
	for _, t := range gone {
		if !isInternalTopic(t.name) {
			names = append(names, t.name)
		}
	}
	if len(names) == 0 {
		return
	}
	s.closeMu.Lock()
	closing := s.done
	if !closing {
		s.bgWG.Add(1)
	}
	s.closeMu.Unlock()
	if closing {
		return
	}
	go func() {
		defer s.bgWG.Done()
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		defer cancel()
		go func() {
			select {
			case <-s.closed:
				cancel()
			case <-ctx.Done():
			}
		}()
		n, err := s.groups.DeleteTopicOffsets(ctx, names)
		if err != nil {
			s.log.Warn("deleting the committed offsets of deleted topics failed", "topics", names, "deleted", n, "err", err)
			return
		}
		if n > 0 {
			s.log.Info("committed offsets of deleted topics deleted", "topics", names, "offsets", n)
		}
	}()
}
