package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/stratastream/strata/broker/producer"
	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/tiering"
)

// Restore from the bucket (tiered storage, issue 7 §4).
//
// With strata.remote.restore.topics set (a comma-separated list of topic
// names, or * for every topic with a manifest in the store), a broker
// recreates at start each listed topic that does not exist in its cluster
// from what the bucket holds: same topic ID, partition count and config
// overrides (with remote.storage.enable=true), each partition's local log
// started empty at the remote end (TruncateFullyAndStartAt), the producer
// state of the last remote segment installed, and the archiver taking over
// the manifest. Consumers then read from offset 0 (remote) and producers
// continue after the last remote offset.
//
// The new cluster's leader epochs start again at 0 while the manifest may
// carry a higher one; the archiver of a restored partition uploads as
// leader epoch (new epoch + the manifest's epoch at restore time), stored
// in the partition directory (remote-epoch-base), so it is never fenced by
// the old cluster's manifest and stays monotonic.

// restoreTimeout bounds the whole restore at start.
const restoreTimeout = 10 * time.Minute

// epochBaseFile holds a restored partition's leader epoch base.
const epochBaseFile = "remote-epoch-base"

// restoreTopics restores the topics of strata.remote.restore.topics that
// do not exist yet. Failures are logged; the broker serves regardless.
func (s *Server) restoreTopics() {
	if s.tier == nil || len(s.cfg.Tiering.Restore) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(s.tier.ctx, restoreTimeout)
	defer cancel()
	names := s.cfg.Tiering.Restore
	if len(names) == 1 && names[0] == "*" {
		var err error
		if names, err = tiering.ListRemoteTopics(ctx, s.tier.store); err != nil {
			s.log.Error("restore: listing the topics in the object store failed", "store", s.tier.what, "err", err)
			return
		}
	}
	for _, name := range names {
		if err := s.restoreTopic(ctx, name); err != nil {
			s.log.Error("restore: topic not restored", "topic", name, "err", err)
		}
	}
}

func (s *Server) restoreTopic(ctx context.Context, name string) error {
	if s.topic(name) != nil {
		s.log.Info("restore: topic exists; skipped", "topic", name)
		return nil
	}
	rt, err := tiering.LoadRemoteTopic(ctx, s.tier.store, name, func(done, total int) {
		s.log.Info("restore: reading manifests", "topic", name, "done", done, "total", total)
	})
	if err != nil {
		return err
	}
	if len(rt.OtherIDs) > 0 {
		s.log.Warn("restore: the store holds other incarnations of the topic name; restoring the newest",
			"topic", name, "id", rt.TopicID, "other_ids", rt.OtherIDs)
	}
	id, err := coord.ParseTopicID(rt.TopicID)
	if err != nil {
		return fmt.Errorf("topic id %q in the manifests: %w", rt.TopicID, err)
	}
	configs := map[string]string{}
	for k, v := range rt.Configs {
		if err := checkTopicConfig(k, &v); err != nil {
			s.log.Warn("restore: config override left out", "topic", name, "config", k, "err", err)
			continue
		}
		configs[k] = v
	}
	configs["remote.storage.enable"] = "true"

	// Seed each partition's directory before the log opens: an empty log
	// at the remote end, the producer snapshot, the epoch base.
	for _, rp := range rt.Partitions {
		if err := s.seedPartitionDir(ctx, name, rp); err != nil {
			return fmt.Errorf("partition %d: %w", rp.Partition, err)
		}
	}

	s.adminMu.Lock()
	defer s.adminMu.Unlock()
	snap := s.coord.Snapshot()
	asg, err := coord.AssignReplicas(snap.Brokers, int(rt.NumPartitions), int(min(int16(len(snap.Brokers)), s.cfg.DefaultReplicationFactor)), coord.RandomStart)
	if err != nil {
		return err
	}
	cctx, ccancel := context.WithTimeout(ctx, adminTimeout)
	defer ccancel()
	if _, err := s.coord.CreateTopic(cctx, coord.TopicSpec{Name: name, ID: id, Assignment: asg, Configs: configs}); err != nil {
		return err
	}
	s.applySnapshot(s.coord.Snapshot())
	var end int64
	for _, rp := range rt.Partitions {
		end += rp.Manifest.EndOffset() - rp.Manifest.LogStartOffset
	}
	s.log.Info("restore: topic restored from the object store", "topic", name, "id", rt.TopicID,
		"partitions", rt.NumPartitions, "remote_partitions", len(rt.Partitions), "remote_records", end, "configs", configs)
	return nil
}

// seedPartitionDir prepares the directory of a partition about to be
// created: it records the epoch base, which marks it restored. The log is
// started at the remote end when it opens (restoredStart).
func (s *Server) seedPartitionDir(ctx context.Context, topic string, rp tiering.RemotePartition) error {
	_, dir, err := s.dirs.locate(segment.PartitionDirName(topic, rp.Partition), true /* isNew */)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := rp.Manifest.LeaderEpoch
	return os.WriteFile(filepath.Join(dir, epochBaseFile), []byte(strconv.Itoa(int(base))+"\n"), 0o644)
}

// readEpochBase returns a restored partition's leader epoch base (0 when
// the partition was not restored).
func readEpochBase(dir string) int32 {
	b, err := os.ReadFile(filepath.Join(dir, epochBaseFile))
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 32)
	if err != nil || n < 0 {
		return 0
	}
	return int32(n)
}

// seedLog starts an empty, never-written log of a restored partition at
// the remote end of its manifest and reloads its producer state (from
// the restored snapshot). It does nothing to a log that holds data.
func (s *Server) seedLog(ctx context.Context, p *partition, m *tiering.Manifest) error {
	if p.log.LogEndOffset() != 0 || m == nil || m.EndOffset() == 0 {
		return nil
	}
	if err := p.log.TruncateFullyAndStartAt(m.EndOffset()); err != nil {
		return err
	}
	if off, data, ok, err := tiering.FetchProducerSnapshot(ctx, s.tier.store, m); err != nil {
		s.log.Warn("restore: producer state not restored; idempotent producers start over", "topic", p.topic, "partition", p.index, "err", err)
	} else if ok {
		if err := producer.WriteSnapshot(p.path(), off, data); err != nil {
			return err
		}
	}
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	return p.loadProducers(s.log)
}

// restoredStart seeds a newly opened partition of a tiered topic from its
// manifest in the store if the partition was restored (its directory has
// an epoch base) and its log is still empty. It blocks on the store.
func (s *Server) restoredStart(p *partition, topicID string) {
	if _, err := os.Stat(filepath.Join(p.path(), epochBaseFile)); err != nil || p.log.LogEndOffset() != 0 {
		return
	}
	ctx, cancel := context.WithTimeout(s.tier.ctx, time.Minute)
	defer cancel()
	m, _, err := tiering.LoadManifest(ctx, s.tier.store, p.topic, topicID, p.index)
	if err != nil {
		if !errors.Is(err, tiering.ErrNotFound) {
			s.log.Error("restore: manifest not loaded; partition starts empty", "topic", p.topic, "partition", p.index, "err", err)
		}
		return
	}
	if err := s.seedLog(ctx, p, m); err != nil {
		s.log.Error("restore: starting the log at the remote end failed", "topic", p.topic, "partition", p.index, "err", err)
		return
	}
	s.log.Info("restore: partition starts at the remote end", "topic", p.topic, "partition", p.index,
		"remote_log_start", m.LogStartOffset, "remote_end", m.EndOffset())
}

// HasTopic reports whether the broker knows the topic (for `strata tier
// restore`, which runs a broker in-process to restore).
func (s *Server) HasTopic(name string) bool { return s.topic(name) != nil }
