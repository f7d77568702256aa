package broker

import (
	"errors"
	"strings"
	"time"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/broker/replica"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteRecords: v0-2
//
// Behavior (Kafka's ReplicaManager.deleteRecords, Partition.deleteRecordsOnLeader
// and DelayedDeleteRecords):
// * Per partition, the leader moves its log start offset to Offset (-1:
//   the high watermark); segments wholly below it are deleted, and
//   ListOffsets earliest and Fetch (OFFSET_OUT_OF_RANGE below it) honour
//   it at once. Moving it backwards does nothing.
// * A tiered partition's remote log start moves too: the archiver drops
//   the remote segments wholly below it from the manifest and deletes
//   their objects from the bucket (remote retention's path).
// * Followers learn the leader's log start from the replication stream,
//   move theirs up to it and report it; the answer waits, at most
//   TimeoutMillis, until the low watermark (the smallest log start over
//   the leader, remote log included, and the live followers) reaches the
//   offset, and gives it. Past the timeout the partition is
//   REQUEST_TIMED_OUT with the low watermark reached so far.
// * Errors (low watermark -1): TOPIC_AUTHORIZATION_FAILED without DELETE
//   on the topic (with an authorizer), UNKNOWN_TOPIC_OR_PARTITION,
//   INVALID_TOPIC_EXCEPTION for an internal topic, NOT_LEADER_OR_FOLLOWER
//   on a replica that does not lead (or when leadership moves during the
//   wait), OFFSET_OUT_OF_RANGE for an offset above the high watermark or
//   below -1, POLICY_VIOLATION when cleanup.policy lacks delete,
//   KAFKA_STORAGE_ERROR when the log start could not be written.
//
// Version notes:
// * v1: same as v0
// * v2: flexible versions

func init() { register(21, 0, 2, handleDeleteRecords) }

// deleteRecordsHighWatermark is the offset that means "the high watermark".
const deleteRecordsHighWatermark = -1

// tieredLowWatermarkRecheck is how often a DeleteRecords of a tiered
// partition looks at its remote log start while it waits for the
// archiver to commit it.
const tieredLowWatermarkRecheck = 50 * time.Millisecond

func handleDeleteRecords(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	mayDelete := s.topicAuthorizer(r, acl.OpDelete)
	deadline := time.Now().Add(time.Duration(max(req.TimeoutMillis, 0)) * time.Millisecond)
	type pending struct {
		sp     *kmsg.DeleteRecordsResponseTopicPartition
		p      *partition
		epoch  int32
		target int64
	}
	var waits []pending
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.DeleteRecordsResponseTopicPartition, 0, len(rt.Partitions))
		t := s.topic(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition, sp.LowWatermark = rp.Partition, -1
			var wait *pending
			switch {
			case !mayDelete(rt.Topic):
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case t == nil || !t.hasPartition(rp.Partition):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case isInternalTopic(rt.Topic):
				sp.ErrorCode = kerr.InvalidTopicException.Code
			case t.local(rp.Partition) == nil:
				sp.ErrorCode = s.notHostedCode(rt.Topic, rp.Partition)
			case !cleanupDeletes(s, t):
				sp.ErrorCode = kerr.PolicyViolation.Code
			default:
				p := t.local(rp.Partition)
				epoch, target, code := s.deleteRecordsOnLeader(p, rp.Offset)
				sp.ErrorCode = code
				if code == 0 {
					wait = &pending{p: p, epoch: epoch, target: target}
				}
			}
			// Partitions has its final capacity: the element's
			// address stays valid.
			st.Partitions = append(st.Partitions, sp)
			if wait != nil {
				wait.sp = &st.Partitions[len(st.Partitions)-1]
				waits = append(waits, *wait)
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	for _, w := range waits {
		recheck := time.Duration(0)
		if w.p.tier.archiver() != nil {
			recheck = tieredLowWatermarkRecheck
		}
		res, low := s.repl.AwaitLowWatermark(groupCtx(r), w.p.repl, w.epoch, w.target, deadline, w.p.logStart, recheck)
		switch res {
		case replica.Replicated:
			w.sp.LowWatermark = low
		case replica.DeadlinePassed, replica.Cancelled:
			w.sp.ErrorCode, w.sp.LowWatermark = kerr.RequestTimedOut.Code, low
		default: // leadership moved, or shutting down
			w.sp.ErrorCode = kerr.NotLeaderForPartition.Code
		}
	}
	return reply{msg: resp}, nil
}

// deleteRecordsOnLeader moves the log start of p, which this broker must
// lead, to offset (-1: the high watermark). It returns the leader epoch
// and the offset the low watermark must reach, or a Kafka error code.
func (s *Server) deleteRecordsOnLeader(p *partition, offset int64) (epoch int32, target int64, code int16) {
	lead, err := p.leaderCheck(s.cfg.BrokerID)
	if err != nil {
		return 0, 0, kerr.NotLeaderForPartition.Code
	}
	hw := p.log.HighWatermark()
	if offset == deleteRecordsHighWatermark {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return 0, 0, kerr.OffsetOutOfRange.Code
	}
	if a := p.tier.archiver(); a != nil {
		a.SetLogStartOffset(offset)
	}
	if offset > p.log.LogStartOffset() {
		if err := p.log.SetLogStartOffset(offset); err != nil {
			if errors.Is(err, segment.ErrClosed) {
				return 0, 0, kerr.NotLeaderForPartition.Code
			}
			return 0, 0, readErrorCode(s, p, err)
		}
		s.log.Info("log start moved by DeleteRecords", "topic", p.topic, "partition", p.index, "offset", offset)
	}
	p.repl.NotifyLogStart()
	return lead.epoch, offset, 0
}

// cleanupDeletes reports whether the topic's cleanup.policy includes
// delete (Kafka refuses DeleteRecords on a compact-only topic).
func cleanupDeletes(s *Server, t *topicState) bool {
	v, ok := t.overrides["cleanup.policy"]
	if !ok {
		v = s.topicDefaults()["cleanup.policy"]
	}
	for _, p := range strings.Split(v, ",") {
		if strings.TrimSpace(p) == "delete" {
			return true
		}
	}
	return false
}
