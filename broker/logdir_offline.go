package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
)

// This file is the broker's reaction to a failed log directory
// (logdirs.go): the partitions in it are closed and dropped from the
// topics the handlers see, replication forgets them, and the controller
// is told; see the list at the top of logdirs.go.

// offlineReportTimeout bounds one wait for the controller's answer to an
// offline-replica report; the report stays filed, and is made again
// (with the replicas not yet acknowledged) after offlineReportBackoff.
const (
	offlineReportTimeout = 15 * time.Second
	offlineReportBackoff = time.Second
)

// storageFailure takes p's log directory offline if err is a failure of
// its disk. It reports whether it was.
func (s *Server) storageFailure(p *partition, err error) bool {
	if p == nil || p.logDir() == nil || !isStorageError(err) {
		return false
	}
	s.logDirFailed(p.logDir(), fmt.Errorf("partition %s-%d: %w", p.topic, p.index, err))
	return true
}

// logDirFailed takes d offline (once) and wakes the loop that closes its
// partitions and tells the controller. It never blocks: it is called
// from a log's poison callback and from under applyMu.
func (s *Server) logDirFailed(d *logDir, cause error) {
	if !s.dirs.fail(d, cause) {
		return
	}
	s.log.Error("log directory offline: its partitions are no longer served by this broker",
		"dir", d.path, "err", cause, "online_dirs", len(s.dirs.online()))
}

// logDirLoop closes the partitions of directories that went offline and
// reports the offline replicas to the controller, until shutdown.
func (s *Server) logDirLoop() {
	defer s.bgWG.Done()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-s.closed:
			return
		case <-s.dirs.wake:
		case <-retry.C:
		}
		for _, d := range s.dirs.toClose() {
			s.takeLogDirOffline(d)
		}
		if len(s.dirs.online()) == 0 {
			var causes []string
			for _, st := range s.dirs.states() {
				causes = append(causes, fmt.Sprintf("%s: %v", st.path, st.cause))
			}
			err := fmt.Errorf("broker: every log directory is offline (%s)", strings.Join(causes, "; "))
			select {
			case s.fatal <- err:
			default:
			}
			return
		}
		if !s.reportOffline() {
			retry.Reset(offlineReportBackoff)
		}
	}
}

// takeLogDirOffline closes the open partitions in d and drops them from
// the topics: handlers answer KAFKA_STORAGE_ERROR for them from now on,
// replication neither leads nor follows them.
func (s *Server) takeLogDirOffline(d *logDir) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.apply.closed {
		return
	}
	s.mu.RLock()
	cur := maps.Clone(s.mu.topics)
	s.mu.RUnlock()
	var closing []*partition
	for name, t := range cur {
		var nt *topicState
		for i, p := range t.parts {
			if p == nil || p.logDir() != d {
				continue
			}
			if nt == nil {
				c := *t
				c.parts = slices.Clone(t.parts)
				nt = &c
			}
			nt.parts[i] = nil
			closing = append(closing, p)
		}
		if nt != nil {
			cur[name] = nt
		}
	}
	s.swapTopics(cur)
	for _, p := range closing {
		if s.repl != nil {
			s.repl.Forget(p.repl)
		}
		p.tierStop()
		s.cleanerStop(p)
		// The disk failed: nothing is flushed or checkpointed (a
		// poisoned log closes without), and the close error is the
		// failure already logged.
		if err := p.log.Close(); err != nil && !errors.Is(err, segment.ErrPoisoned) {
			s.log.Debug("closing a partition of an offline log directory", "topic", p.topic, "partition", p.index, "err", err)
		}
	}
	s.log.Warn("log directory offline: partitions closed", "dir", d.path, "partitions", len(closing))
}

// reportOffline tells the controller the offline replicas it has not
// acknowledged yet. It reports whether nothing is left to report.
func (s *Server) reportOffline() bool {
	names := s.dirs.unreported()
	if len(names) == 0 || s.coord == nil {
		return true
	}
	var tps []coord.TopicPartition
	for _, n := range names {
		if topic, index, ok := splitPartitionDir(n); ok {
			tps = append(tps, coord.TopicPartition{Topic: topic, Partition: index})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), offlineReportTimeout)
	defer cancel()
	go func() {
		select {
		case <-s.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	start := s.nowFn()
	remaining, err := s.coord.ReportOfflineReplicas(ctx, s.cfg.BrokerID, tps)
	if err != nil {
		s.log.Warn("reporting offline replicas to the controller failed; retrying", "partitions", len(tps), "err", err)
		return false
	}
	s.dirs.setReported(names, true)
	s.log.Info("controller acknowledged offline replicas", "partitions", len(tps), "still_leads", len(remaining),
		"elapsed", s.nowFn().Sub(start).Round(time.Millisecond).String())
	return true
}

// offlineError is the Kafka error for a partition hosted here whose
// replica is offline, or nil.
func (s *Server) offlineError(topic string, index int32) error {
	o, ok := s.dirs.offlineReason(segment.PartitionDirName(topic, index))
	if !ok {
		return nil
	}
	return newKafkaError(kerr.KafkaStorageError, "partition %s-%d is offline on this broker: %v", topic, index, o.reason)
}

// notHostedCode is the error code for a partition that has no open log
// here: KAFKA_STORAGE_ERROR when this broker's replica is offline, else
// NOT_LEADER_OR_FOLLOWER.
func (s *Server) notHostedCode(topic string, index int32) int16 {
	if s.offlineError(topic, index) != nil {
		return kerr.KafkaStorageError.Code
	}
	return kerr.NotLeaderForPartition.Code
}
