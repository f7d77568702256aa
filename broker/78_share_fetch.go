package broker

import (
	"time"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/broker/share"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareFetch: v0-2 (KIP-932, KIP-1206, KIP-1222)
//
// Behavior:
// * Share sessions: ShareSessionEpoch 0 opens one with the request's
//   partitions (piggybacked acknowledgements then are INVALID_REQUEST),
//   a positive epoch must be the session's next (else
//   INVALID_SHARE_SESSION_EPOCH; no session: SHARE_SESSION_NOT_FOUND)
//   and adds Topics and removes ForgottenTopicsData, -1 closes it after
//   its acknowledgements and releases the records the member holds in
//   its partitions. group.share.max.share.sessions bounds the sessions:
//   SHARE_SESSION_LIMIT_REACHED. A closed connection closes its
//   sessions likewise.
// * Acknowledgements (AcknowledgementBatches) are applied and persisted
//   before the answer, per partition in AcknowledgeErrorCode:
//   INVALID_REQUEST for a malformed batch, INVALID_RECORD_STATE for an
//   offset this member has not acquired (nothing of that partition is
//   applied then).
// * Then the session's partitions are read through the fetch path
//   (local segments, the bucket for tiered offsets) from the first
//   available record, up to the high watermark (the last stable offset
//   with share.isolation.level=read_committed), and up to MaxRecords
//   (500 when unset) are acquired, whole batches past that unless
//   ShareAcquireMode is 1 (record limit); AcquiredRecords gives the
//   ranges, split at BatchSize, with their delivery counts, and Records
//   the whole batches holding them. MaxBytes bounds what is read.
// * With nothing acquired, the request waits up to MaxWaitMillis for an
//   append, a release or a lock expiry on its partitions; it answers as
//   soon as it acquired anything (MinBytes is not read).
// * IsRenewAck (v2): only acknowledgements, RENEW allowed, no fetch; the
//   fetch fields must be 0 and every partition must carry
//   acknowledgements, else INVALID_REQUEST.
// * Partitions this broker does not lead are NOT_LEADER_OR_FOLLOWER with
//   CurrentLeader and NodeEndpoints.
// * AcquisitionLockTimeoutMillis is the group's record lock duration.
// * Authorization (with an authorizer): READ on the group, else
//   GROUP_AUTHORIZATION_FAILED; READ on each topic, else
//   TOPIC_AUTHORIZATION_FAILED for its partitions.
//
// Version notes:
// * v1: MaxRecords, BatchSize, AcquisitionLockTimeoutMillis (KIP-1206)
// * v2: ShareAcquireMode, IsRenewAck (KIP-1222)

func init() { register(78, 0, 2, handleShareFetch) }

// shareDefaultMaxRecords is what a ShareFetch without MaxRecords
// acquires at most (v0 has no MaxRecords), as Kafka's default
// max.poll.records.
const shareDefaultMaxRecords = 500

// shareFetchAnswer builds a ShareFetch response partition by partition.
type shareFetchAnswer struct {
	resp    *kmsg.ShareFetchResponse
	idx     map[share.TopicPartition]int
	topics  map[[16]byte]int
	leaders leaderHints
}

func (a *shareFetchAnswer) part(tp share.TopicPartition) *kmsg.ShareFetchResponseTopicPartition {
	ti, ok := a.topics[tp.TopicID]
	if !ok {
		ti = len(a.resp.Topics)
		a.topics[tp.TopicID] = ti
		t := kmsg.NewShareFetchResponseTopic()
		t.TopicID = tp.TopicID
		a.resp.Topics = append(a.resp.Topics, t)
	}
	t := &a.resp.Topics[ti]
	for i := range t.Partitions {
		if t.Partitions[i].Partition == tp.Partition {
			return &t.Partitions[i]
		}
	}
	p := kmsg.NewShareFetchResponseTopicPartition()
	p.Partition = tp.Partition
	p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = -1, -1
	t.Partitions = append(t.Partitions, p)
	return &t.Partitions[len(t.Partitions)-1]
}

// fail answers a partition with an error, with the leader hint for
// NOT_LEADER_OR_FOLLOWER.
func (a *shareFetchAnswer) fail(s *Server, r *request, t shareTarget, code int16) {
	p := a.part(t.tp)
	p.ErrorCode = code
	if code == kerr.NotLeaderForPartition.Code && t.name != "" {
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = a.leaders.lookup(s, t.name, t.tp.Partition, r.listenerName())
	}
}

func handleShareFetch(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.ShareFetchRequest)
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	group, member := nonNilString(req.GroupID), nonNilString(req.MemberID)
	resp.AcquisitionLockTimeoutMillis = s.shareLockMillis(group)
	fail := func(code int16) (reply, error) {
		resp.ErrorCode = code
		return reply{msg: resp}, nil
	}
	if code := s.shareRequestCode(r, group, member); code != 0 {
		return fail(code)
	}
	renew := req.Version >= 2 && req.IsRenewAck
	acks := map[share.TopicPartition][]share.AckBatch{}
	var named []share.TopicPartition
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			tp := share.TopicPartition{TopicID: rt.TopicID, Partition: rp.Partition}
			named = append(named, tp)
			if len(rp.AcknowledgementBatches) > 0 {
				acks[tp] = shareAckBatches(rp.AcknowledgementBatches, func(b kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) share.AckBatch {
					return share.AckBatch{First: b.FirstOffset, Last: b.LastOffset, Types: b.AcknowledgeTypes}
				})
			} else if renew {
				return fail(kerr.InvalidRequest.Code)
			}
		}
	}
	if renew && (req.MaxBytes != 0 || req.MinBytes != 0 || req.MaxRecords != 0 || req.MaxWaitMillis != 0) {
		return fail(kerr.InvalidRequest.Code)
	}
	key := share.SessionKey{Group: group, Member: member}
	var parts []share.TopicPartition
	switch req.ShareSessionEpoch {
	case 0:
		if len(acks) > 0 {
			return fail(kerr.InvalidRequest.Code)
		}
		if _, code := s.shares.Sessions.Open(key, named, r.conn); code != 0 {
			return fail(code)
		}
		parts = s.shares.Sessions.Parts(key)
	case -1:
	default:
		var forget []share.TopicPartition
		for _, ft := range req.ForgottenTopicsData {
			for _, p := range ft.Partitions {
				forget = append(forget, share.TopicPartition{TopicID: ft.TopicID, Partition: p})
			}
		}
		var code int16
		if parts, code = s.shares.Sessions.Update(key, req.ShareSessionEpoch, named, forget); code != 0 {
			return fail(code)
		}
	}
	a := &shareFetchAnswer{resp: resp, idx: map[share.TopicPartition]int{}, topics: map[[16]byte]int{}, leaders: leaderHints{}}
	mayRead := s.topicAuthorizer(r, acl.OpRead)
	maxType := share.AckReject
	if renew {
		maxType = share.AckRenew
	}
	for _, tp := range named {
		if b, ok := acks[tp]; ok {
			a.part(tp).AcknowledgeErrorCode = s.shareAcknowledge(groupCtx(r), group, member, tp, b, maxType, mayRead)
		}
	}
	if req.ShareSessionEpoch == -1 {
		closed, code := s.shares.Sessions.Close(key)
		if code != 0 {
			return fail(code)
		}
		s.releaseSessionRecords(key, closed)
		return s.shareFetchReply(a), nil
	}
	if renew {
		return s.shareFetchReply(a), nil
	}
	s.shareFetchRecords(r, req, a, group, member, parts, mayRead)
	return s.shareFetchReply(a), nil
}

// shareFetchRecords acquires records of the session's partitions into
// a, waiting up to MaxWaitMillis for some when there are none.
func (s *Server) shareFetchRecords(r *request, req *kmsg.ShareFetchRequest, a *shareFetchAnswer, group, member string, parts []share.TopicPartition, mayRead func(string) bool) {
	maxRecords := int(req.MaxRecords)
	if maxRecords <= 0 {
		maxRecords = shareDefaultMaxRecords
	}
	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = 1 << 20
	}
	strict := req.Version >= 2 && req.ShareAcquireMode == 1
	deadline := s.nowFn().Add(time.Duration(req.MaxWaitMillis) * time.Millisecond)
	if n := len(parts); n > 1 {
		// Start at another partition each request, so that one busy
		// partition does not starve the others of MaxRecords.
		k := int(req.ShareSessionEpoch) % n
		parts = append(parts[k:len(parts):len(parts)], parts[:k]...)
	}
	for {
		var notify []<-chan struct{}
		acquired := 0
		for _, tp := range parts {
			t, code := s.resolveShareTarget(groupCtx(r), group, tp, mayRead)
			if code != 0 {
				a.fail(s, r, t, code)
				continue
			}
			notify = append(notify, t.p.log.AppendNotify(), t.sp.Changed())
			if acquired >= maxRecords || maxBytes <= 0 {
				continue
			}
			raw, ranges, err := s.shareAcquire(t, member, maxRecords-acquired, strict, maxBytes)
			if err != nil {
				a.fail(s, r, t, readErrorCode(s, t.p, err))
				continue
			}
			if len(ranges) == 0 {
				if req.ShareSessionEpoch == 0 {
					a.part(tp) // a new session's answer names every partition
				}
				continue
			}
			p := a.part(tp)
			p.Records = raw
			for _, ar := range splitAcquired(ranges, int64(req.BatchSize)) {
				k := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
				k.FirstOffset, k.LastOffset, k.DeliveryCount = ar.First, ar.Last, ar.DeliveryCount
				p.AcquiredRecords = append(p.AcquiredRecords, k)
				acquired += int(ar.Last - ar.First + 1)
			}
			maxBytes -= len(raw)
		}
		left := time.Until(deadline)
		if acquired > 0 || len(notify) == 0 || left <= 0 || s.shuttingDown() || (r.ctx != nil && r.ctx.Err() != nil) {
			return
		}
		if !s.waitForAppend(notify, left) {
			return
		}
	}
}

// splitAcquired splits acquired ranges into ranges of at most size
// offsets (BatchSize; 0: no split).
func splitAcquired(in []share.AcquiredRange, size int64) []share.AcquiredRange {
	if size <= 0 {
		return in
	}
	var out []share.AcquiredRange
	for _, r := range in {
		for f := r.First; f <= r.Last; f += size {
			out = append(out, share.AcquiredRange{First: f, Last: min(f+size-1, r.Last), DeliveryCount: r.DeliveryCount})
		}
	}
	return out
}

// shareFetchReply is the reply to a ShareFetch, with the addresses of the
// leaders its partitions were pointed to.
func (s *Server) shareFetchReply(a *shareFetchAnswer) reply {
	for _, b := range a.leaders.endpoints() {
		ne := kmsg.NewShareFetchResponseNodeEndpoint()
		ne.NodeID, ne.Host, ne.Port, ne.Rack = b.NodeID, b.Host, b.Port, b.Rack
		a.resp.NodeEndpoints = append(a.resp.NodeEndpoints, ne)
	}
	return reply{msg: a.resp}
}
