package broker

import (
	"errors"
	"reflect"
	"time"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch: v0-17 (v0-v3: down-converted, fetch_legacy.go)
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
// * Offsets only in the remote log (tiered) are read on the remote read
//   pool (remote.log.reader.threads, remote.log.reader.max.pending.tasks)
//   within the remote fetch quota (remote.log.manager.fetch.max.bytes.per.second,
//   KIP-956). A partition whose read the quota holds back, the full queue
//   turns away, or that is not done within remote.fetch.max.wait.ms
//   answers no records and no error, as Kafka's; the other partitions are
//   answered as usual (local reads never wait for remote ones), and a
//   long-polling fetch reads the held-back partition again when the quota
//   allows, within MaxWaitMillis. Kafka answers a full queue with
//   UNKNOWN_SERVER_ERROR, which consumers do not retry.
// * Fetch sessions (KIP-227) are declined: every response is full and
//   carries session id 0. A request for an incremental fetch (epoch other
//   than 0 or -1) is FETCH_SESSION_ID_NOT_FOUND.
// * ThrottleMillis is 0; there are no preferred read replicas (-1).
// * Unknown topics are UNKNOWN_TOPIC_OR_PARTITION; fetch never creates
//   topics. From v13 topics are named by id, in the request and the
//   response: an id no topic has (the zero id included) is
//   UNKNOWN_TOPIC_ID for each of its partitions, before authorization,
//   as Kafka. There is no fetch session cache to key by id: sessions are
//   declined (above), so ForgottenTopicsData is ignored.
// * ReplicaID (v0-v14) and ReplicaState (v15+) are not read: every fetch
//   is served as a consumer's, and ReplicaDirectoryId (v17, KIP-853) is
//   ignored likewise.
// * From v16 (KIP-951) a partition answered NOT_LEADER_OR_FOLLOWER or
//   FENCED_LEADER_EPOCH carries CurrentLeader, the leader and leader
//   epoch the coordinator knows (leader -1 when it has none or it is not
//   live), and the response's NodeEndpoints hold the address of each
//   leader named that is live and reachable on the request's listener.
// * Authorization (with an authorizer): each topic needs READ, else its
//   partitions are TOPIC_AUTHORIZATION_FAILED (before its existence is
//   checked). Replicas do not fetch here (replication is gRPC), so there
//   is no CLUSTER_ACTION path.
//
// Version notes:
// * v0-v3: message sets of magic 0 (v0-v1) and 1 (v2-v3), down-converted
// * v1: ThrottleMillis
// * v3: MaxBytes
// * v4: LastStableOffset, AbortedTransactions, IsolationLevel
// * v5: LogStartOffset
// * v7: sessions (declined), top-level ErrorCode
// * v9: CurrentLeaderEpoch
// * v11: Rack, PreferredReadReplica
// * v12: flexible versions
// * v13: TopicID instead of Topic (UNKNOWN_TOPIC_ID)
// * v14: no change (KIP-405's OFFSET_MOVED_TO_TIERED_STORAGE is internal)
// * v15: ReplicaState instead of ReplicaID (KIP-903; not read)
// * v16: CurrentLeader and NodeEndpoints (KIP-951)
// * v17: ReplicaDirectoryId (KIP-853; ignored)

func init() { register(1, 0, 17, handleFetch) }

func handleFetch(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.FetchRequest)
	if req.Version >= 7 && req.SessionEpoch != 0 && req.SessionEpoch != -1 {
		res := &fetchResult{version: req.Version, errorCode: kerr.FetchSessionIDNotFound.Code}
		return s.fetchReply(res), nil
	}
	deadline := s.nowFn().Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	mayRead := s.topicAuthorizer(r, acl.OpRead)
	lis := r.listenerName()
	consumer := req.ReplicaID < 0 && req.ReplicaState.ID < 0
	if consumer {
		s.capFetchToQuota(r, req)
	}
	var waited time.Duration // not work, for request_percentage
	answer := func(res *fetchResult) (reply, error) {
		if !consumer {
			return s.fetchReply(res), nil
		}
		return s.fetchQuotaReply(r, res, waited), nil
	}
	for {
		// Take the append notifiers before reading, so an append that
		// lands after the read still wakes us.
		var notify []<-chan struct{}
		wait := req.MaxWaitMillis > 0 && !s.shuttingDown()
		if wait {
			notify = s.fetchNotifiers(req, mayRead)
		}
		res, bytes, anyErr := s.fetchOnce(req, mayRead, lis)
		if !wait || anyErr || bytes >= int64(req.MinBytes) || len(req.Topics) == 0 {
			return answer(res)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return answer(res)
		}
		// A remote read held back (quota, queue) is tried again when
		// it may go ahead, within MaxWait.
		retry := res.remote.held && res.remote.retry < left
		if retry {
			left = res.remote.retry
		}
		res.releaseAll() // not sent: unpin its remote chunks
		w0 := time.Now()
		ok := s.waitForAppend(notify, left)
		waited += time.Since(w0)
		if !ok && (!retry || s.shuttingDown()) {
			// Timed out or shutting down: answer with what there is now.
			res, _, _ = s.fetchOnce(req, mayRead, lis)
			return answer(res)
		}
	}
}

// fetchNotifiers returns the append notifiers of the requested partitions
// that exist.
func (s *Server) fetchNotifiers(req *kmsg.FetchRequest, mayRead func(string) bool) []<-chan struct{} {
	var out []<-chan struct{}
	for i := range req.Topics {
		rt := &req.Topics[i]
		t, name := s.fetchTopic(req.Version, rt)
		if t == nil || !mayRead(name) {
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

// fetchTopic resolves a requested topic: by name before v13, by id from
// v13. It returns nil when there is no such topic, and the topic's name
// (the requested one before v13, "" for an unknown id).
func (s *Server) fetchTopic(version int16, rt *kmsg.FetchRequestTopic) (*topicState, string) {
	if version < 13 {
		return s.topic(rt.Topic), rt.Topic
	}
	t := s.topicByID(coord.TopicID(rt.TopicID))
	if t == nil {
		return nil, ""
	}
	return t, t.name
}

// fetchOnce reads every requested partition once. It returns the result,
// the record bytes in it and whether any partition had an error. lis is
// the request's listener, whose addresses v16's NodeEndpoints carry.
func (s *Server) fetchOnce(req *kmsg.FetchRequest, mayRead func(string) bool, lis string) (*fetchResult, int64, bool) {
	res := &fetchResult{version: req.Version}
	budget := int64(req.MaxBytes)
	minOne := true
	var total int64
	anyErr := false
	readCommitted := req.IsolationLevel == 1
	var leaders leaderHints
	for i := range req.Topics {
		rt := &req.Topics[i]
		t, name := s.fetchTopic(req.Version, rt)
		tr := fetchTopicResult{topic: name, id: rt.TopicID}
		for _, rp := range rt.Partitions {
			pr := fetchPartResult{partition: rp.Partition, highWatermark: -1, lastStableOffset: -1, logStartOffset: -1, emptyAborted: readCommitted}
			switch {
			case req.Version >= 13 && t == nil:
				pr.errorCode = kerr.UnknownTopicID.Code
			case !mayRead(name):
				pr.errorCode = kerr.TopicAuthorizationFailed.Code
			case t == nil || !t.hasPartition(rp.Partition):
				pr.errorCode = kerr.UnknownTopicOrPartition.Code
			case t.local(rp.Partition) == nil:
				pr.errorCode = s.notHostedCode(name, rp.Partition)
			case req.Version < 4: // message sets of magic 0 and 1: fetch_legacy.go
				s.fetchPartitionLegacy(&res.remote, t, t.local(rp.Partition), req.Version, &rp, &budget, &minOne, &pr)
			default:
				s.fetchPartition(&res.remote, t.local(rp.Partition), req.Version, readCommitted, &rp, &budget, &minOne, &pr)
			}
			if pr.errorCode != 0 {
				anyErr = true
			}
			if req.Version >= 16 && (pr.errorCode == kerr.NotLeaderForPartition.Code || pr.errorCode == kerr.FencedLeaderEpoch.Code) {
				pr.leaderSet = true
				pr.leaderID, pr.leaderEpoch = leaders.lookup(s, name, rp.Partition, lis)
			}
			total += pr.size
			tr.parts = append(tr.parts, pr)
		}
		res.topics = append(res.topics, tr)
	}
	res.nodeEndpoints = leaders.endpoints()
	return res, total, anyErr
}

// fetchPartition reads one partition into pr, within the partition's and
// the response's remaining byte budget.
func (s *Server) fetchPartition(remote *remotePass, p *partition, version int16, readCommitted bool, rp *kmsg.FetchRequestTopicPartition, budget *int64, minOne *bool, pr *fetchPartResult) {
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
	limit := min(int64(rp.PartitionMaxBytes), *budget)
	off := rp.FetchOffset
	for {
		if limit <= 0 && !*minOne {
			return
		}
		sl, err := s.readPartition(remote, p, off, int(max(limit, 0)), upTo, pr)
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
		if off >= upTo {
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
