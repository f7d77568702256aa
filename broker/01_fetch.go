package broker

import (
	"errors"
	"reflect"
	"time"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch: v4-12
//
// Behavior:
// * Returns whole record batches, verbatim from the segment files and sent
//   with sendfile (zero copy): an offset inside a batch returns that whole
//   batch, and a read never ends in a partial batch.
// * Limits: each partition gets at most PartitionMaxBytes and the response
//   at most MaxBytes, except that the first partition with data always
//   returns at least one whole batch even if it is larger (KIP-74).
// * Only offsets below the high watermark are returned. HighWatermark,
//   LastStableOffset and LogStartOffset are filled for every partition.
// * IsolationLevel 1 (read_committed) returns only offsets below the last
//   stable offset (the high watermark, held at the first offset of the
//   earliest transaction that is open or whose marker is not replicated),
//   with AbortedTransactions: the aborted transactions (producer id,
//   first offset) from the partition's .txnindex whose marker is at or
//   after the fetch offset and whose first offset is below the end of the
//   returned records, as Kafka's collectAbortedTransactions; an empty
//   array when there are none. read_uncommitted (0) reads up to the high
//   watermark and gets a null array. Records served from the object store
//   (tiered) get theirs from the remote segments' .txnindex objects; when
//   those cannot be read the partition returns no records and
//   KAFKA_STORAGE_ERROR, which consumers retry.
// * A fetch offset below the log start or above the log end is
//   OFFSET_OUT_OF_RANGE; one at the end returns no records.
// * CurrentLeaderEpoch (v9+), unless -1, is checked against the
//   partition's (from the coordinator's partition state): older is
//   FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH.
// * Only the leader serves fetches: a partition another broker leads, or
//   that this broker does not host, is NOT_LEADER_OR_FOLLOWER (after the
//   epoch check, as in Kafka). Consumers cannot fetch from followers
//   (KIP-392), and followers do not replicate through this API: they use
//   the leaders' Replication service (package replica).
// * Long polling: when fewer than MinBytes are available and no partition
//   has an error, the request waits up to MaxWaitMillis, woken by appends
//   and high-watermark rises (Log.AppendNotify), never by polling;
//   shutdown wakes it too. The last stable offset moves only with those
//   (a marker's append, or the high watermark passing it), so
//   read_committed waits wake when it moves.
// * Fetch sessions (KIP-227) are declined: every response is full and
//   carries session id 0. A request for an incremental fetch (epoch other
//   than 0 or -1) is FETCH_SESSION_ID_NOT_FOUND.
// * ThrottleMillis is 0; there are no preferred read replicas (-1).
// * Unknown topics are UNKNOWN_TOPIC_OR_PARTITION; fetch never creates
//   topics.
// * Authorization (with an authorizer): each topic needs READ, else its
//   partitions are TOPIC_AUTHORIZATION_FAILED (before its existence is
//   checked). Replicas do not fetch here (replication is gRPC), so there
//   is no CLUSTER_ACTION path.
//
// Version notes:
// * v4: LastStableOffset, AbortedTransactions, IsolationLevel
// * v5: LogStartOffset
// * v7: sessions (declined), top-level ErrorCode
// * v9: CurrentLeaderEpoch
// * v11: Rack, PreferredReadReplica
// * v12: flexible versions

func init() { register(1, 4, 12, handleFetch) }

func handleFetch(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.FetchRequest)
	if req.Version >= 7 && req.SessionEpoch != 0 && req.SessionEpoch != -1 {
		res := &fetchResult{version: req.Version, errorCode: kerr.FetchSessionIDNotFound.Code}
		return s.fetchReply(res), nil
	}
	deadline := s.nowFn().Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	mayRead := s.topicAuthorizer(r, acl.OpRead)
	for {
		// Take the append notifiers before reading, so an append that
		// lands after the read still wakes us.
		var notify []<-chan struct{}
		wait := req.MaxWaitMillis > 0 && !s.shuttingDown()
		if wait {
			notify = s.fetchNotifiers(req, mayRead)
		}
		res, bytes, anyErr := s.fetchOnce(req, mayRead)
		if !wait || anyErr || bytes >= int64(req.MinBytes) || len(req.Topics) == 0 {
			return s.fetchReply(res), nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return s.fetchReply(res), nil
		}
		res.releaseAll() // not sent: unpin its remote chunks
		if !s.waitForAppend(notify, left) {
			// Timed out or shutting down: answer with what there is now.
			res, _, _ = s.fetchOnce(req, mayRead)
			return s.fetchReply(res), nil
		}
	}
}

// fetchNotifiers returns the append notifiers of the requested partitions
// that exist.
func (s *Server) fetchNotifiers(req *kmsg.FetchRequest, mayRead func(string) bool) []<-chan struct{} {
	var out []<-chan struct{}
	for _, rt := range req.Topics {
		t := s.topic(rt.Topic)
		if t == nil || !mayRead(rt.Topic) {
			continue
		}
		for _, rp := range rt.Partitions {
			if p := t.local(rp.Partition); p != nil {
				out = append(out, p.log.AppendNotify())
			}
		}
	}
	return out
}

// waitForAppend blocks until one of notify fires (true), or d passes or
// the server shuts down (false).
func (s *Server) waitForAppend(notify []<-chan struct{}, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	cases := make([]reflect.SelectCase, 0, len(notify)+2)
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s.closed)},
	)
	seen := make(map[<-chan struct{}]bool, len(notify))
	for _, ch := range notify {
		if !seen[ch] {
			seen[ch] = true
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
		}
	}
	s.progress.fetchesWaiting.Add(1)
	chosen, _, _ := reflect.Select(cases)
	s.progress.fetchesWaiting.Add(-1)
	return chosen >= 2
}

// fetchOnce reads every requested partition once. It returns the result,
// the record bytes in it and whether any partition had an error.
func (s *Server) fetchOnce(req *kmsg.FetchRequest, mayRead func(string) bool) (*fetchResult, int64, bool) {
	res := &fetchResult{version: req.Version}
	budget := int64(req.MaxBytes)
	minOne := true
	var total int64
	anyErr := false
	readCommitted := req.IsolationLevel == 1
	for _, rt := range req.Topics {
		tr := fetchTopicResult{topic: rt.Topic}
		t := s.topic(rt.Topic)
		for _, rp := range rt.Partitions {
			pr := fetchPartResult{partition: rp.Partition, highWatermark: -1, lastStableOffset: -1, logStartOffset: -1, emptyAborted: readCommitted}
			switch {
			case !mayRead(rt.Topic):
				pr.errorCode = kerr.TopicAuthorizationFailed.Code
			case t == nil || !t.hasPartition(rp.Partition):
				pr.errorCode = kerr.UnknownTopicOrPartition.Code
			case t.local(rp.Partition) == nil:
				pr.errorCode = s.notHostedCode(rt.Topic, rp.Partition)
			default:
				s.fetchPartition(t.local(rp.Partition), req.Version, readCommitted, &rp, &budget, &minOne, &pr)
			}
			if pr.errorCode != 0 {
				anyErr = true
			}
			total += pr.size
			tr.parts = append(tr.parts, pr)
		}
		res.topics = append(res.topics, tr)
	}
	return res, total, anyErr
}

// fetchPartition reads one partition into pr, within the partition's and
// the response's remaining byte budget.
func (s *Server) fetchPartition(p *partition, version int16, readCommitted bool, rp *kmsg.FetchRequestTopicPartition, budget *int64, minOne *bool, pr *fetchPartResult) {
	if version >= 9 && rp.CurrentLeaderEpoch != -1 {
		if pr.errorCode = checkLeaderEpoch(p, rp.CurrentLeaderEpoch); pr.errorCode != 0 {
			return
		}
	}
	if _, err := p.leaderCheck(s.cfg.BrokerID); err != nil {
		pr.errorCode = kerr.NotLeaderForPartition.Code
		return
	}
	hw := p.log.HighWatermark()
	lso := p.lastStableOffsetAt(hw)
	pr.highWatermark = hw
	pr.lastStableOffset = lso
	pr.logStartOffset = p.logStart()
	upTo := hw
	if readCommitted {
		upTo = lso
		defer func() {
			if pr.size == 0 {
				return
			}
			var err error
			if pr.aborted, err = s.abortedTxns(p, rp.FetchOffset, pr.nextOffset); err != nil {
				// Records without their aborted transactions would
				// show aborted data: none, and a retriable error.
				s.log.Warn("fetch: aborted transactions not read", "topic", p.topic, "partition", p.index, "err", err)
				*budget += pr.size
				for _, rel := range pr.releases {
					rel()
				}
				pr.ranges, pr.size, pr.releases, pr.aborted = nil, 0, nil, nil
				pr.errorCode = kerr.KafkaStorageError.Code
			}
		}()
	}
	hw = upTo
	limit := min(int64(rp.PartitionMaxBytes), *budget)
	off := rp.FetchOffset
	if readCommitted && off >= upTo && off >= p.logStart() && off <= p.log.LogEndOffset() {
		return // nothing stable yet (remote reads are not bounded by it)
	}
	for {
		if limit <= 0 && !*minOne {
			return
		}
		sl, err := s.readPartition(p, off, int(max(limit, 0)), hw, pr)
		if err != nil {
			pr.errorCode = readErrorCode(s, p, err)
			if pr.size > 0 {
				// Keep what was read; the error shows on the next fetch.
				pr.errorCode = 0
			}
			return
		}
		if sl.Size == 0 {
			return
		}
		if !*minOne && sl.Size > limit {
			return
		}
		pr.add(recordRange{file: sl.File, pos: sl.Pos, size: sl.Size})
		pr.nextOffset = sl.NextOffset
		*minOne = false
		limit -= sl.Size
		*budget -= sl.Size
		off = sl.NextOffset
		if off >= hw {
			return
		}
	}
}

// readErrorCode maps a Log.Read failure to a Kafka error code.
func readErrorCode(s *Server, p *partition, err error) int16 {
	switch {
	case errors.Is(err, segment.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, segment.ErrClosed):
		return kerr.NotLeaderForPartition.Code
	default:
		s.log.Error("fetch read failed", "topic", p.topic, "partition", p.index, "err", err)
		s.storageFailure(p, err)
		return kerr.KafkaStorageError.Code
	}
}
