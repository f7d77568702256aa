package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets: v0-9 (v0: list_offsets_v0.go)
//
// Behavior:
// * Timestamp -1 (latest): the high watermark, or with IsolationLevel 1
//   (read_committed) the last stable offset; timestamp -1, the current
//   leader epoch. Under read_committed the max-timestamp and timestamp
//   lookups also only answer offsets below the last stable offset, as
//   Kafka's fetchOffsetForTimestamp.
// * Timestamp -2 (earliest): the log start offset, timestamp -1, the epoch
//   that wrote it.
// * Timestamp -3 (max timestamp, v7): the offset of the largest timestamp
//   in the log and that timestamp.
// * Timestamp -4 (earliest local, v8, KIP-1005): for a tiered partition
//   (remote.storage.enable, or a remote log still readable) the first
//   offset of the local log, with the epoch that wrote it; otherwise the
//   same as -2, as Kafka.
// * Timestamp -5 (latest tiered, v9, KIP-1005): for a tiered partition
//   the highest offset in the object store (the last remote segment's
//   last offset) with its epoch, offset -1 and epoch -1 when nothing is
//   there yet; offset -1 for an untiered partition. Like a timestamp
//   lookup it answers only an offset below the high watermark (the last
//   stable offset under read_committed), else -1.
// * A negative timestamp the version does not know (-3 before v7, -4
//   before v8, -5 before v9, any other) is UNSUPPORTED_VERSION.
// * Any other timestamp: the first offset whose timestamp is at or after
//   it, with that timestamp; offset and timestamp -1 when there is none
//   below the high watermark.
// * CurrentLeaderEpoch (v4+), unless -1, is checked against the
//   partition's leader epoch (the coordinator's): older is
//   FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH. Then a partition this
//   broker does not lead is NOT_LEADER_OR_FOLLOWER.
// * Unknown topics and partitions are UNKNOWN_TOPIC_OR_PARTITION; a
//   partition named twice is INVALID_REQUEST.
// * Authorization (with an authorizer): each topic needs DESCRIBE, else
//   its partitions are TOPIC_AUTHORIZATION_FAILED, checked first.
//
// Version notes:
// * v0: MaxNumOffsets, OldStyleOffsets (list_offsets_v0.go)
// * v1: single offset per partition with timestamp
// * v2: IsolationLevel
// * v4: CurrentLeaderEpoch, LeaderEpoch in the response
// * v6: flexible versions
// * v7: max timestamp (-3)
// * v8: earliest local (-4)
// * v9: latest tiered (-5)

func init() { register(2, 0, 9, handleListOffsets) }

// Special ListOffsets timestamps.
const (
	listLatest        = -1
	listEarliest      = -2
	listMaxTimestamp  = -3
	listEarliestLocal = -4
	listLatestTiered  = -5
)

func handleListOffsets(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	type tp struct {
		t string
		p int32
	}
	mayDescribe := s.topicAuthorizer(r, acl.OpDescribe)
	seen := map[tp]int{}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			seen[tp{rt.Topic, rp.Partition}]++
		}
	}
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		t := s.topic(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
			switch {
			case !mayDescribe(rt.Topic):
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case seen[tp{rt.Topic, rp.Partition}] > 1:
				sp.ErrorCode = kerr.InvalidRequest.Code
			case t == nil || !t.hasPartition(rp.Partition):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case t.local(rp.Partition) == nil:
				sp.ErrorCode = s.notHostedCode(rt.Topic, rp.Partition)
			default:
				s.listOffset(t.local(rp.Partition), req.Version, req.IsolationLevel == 1, &rp, &sp)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{msg: resp}, nil
}

func (s *Server) listOffset(p *partition, version int16, readCommitted bool, rp *kmsg.ListOffsetsRequestTopicPartition, sp *kmsg.ListOffsetsResponseTopicPartition) {
	if version == 0 { // OldStyleOffsets: list_offsets_v0.go
		s.listOffsetV0(p, rp, sp)
		return
	}
	if version >= 4 && rp.CurrentLeaderEpoch != -1 {
		if code := checkLeaderEpoch(p, rp.CurrentLeaderEpoch); code != 0 {
			sp.ErrorCode = code
			return
		}
	}
	lead, err := p.leaderCheck(s.cfg.BrokerID)
	if err != nil {
		sp.ErrorCode = kerr.NotLeaderForPartition.Code
		return
	}
	// hw is the last offset a consumer of the isolation level may read.
	hw := p.log.HighWatermark()
	if readCommitted {
		hw = p.lastStableOffsetAt(hw)
	}
	switch rp.Timestamp {
	case listLatest:
		sp.Offset, sp.LeaderEpoch = hw, lead.epoch
	case listEarliest:
		start := p.remoteEarliest()
		sp.Offset, sp.LeaderEpoch = start, epochForOffset(p, start)
	case listEarliestLocal:
		if version < 8 {
			sp.ErrorCode = kerr.UnsupportedVersion.Code
			return
		}
		start := p.remoteEarliest()
		if p.remoteLogEnabled() {
			start = max(p.log.LogStartOffset(), start)
		}
		sp.Offset, sp.LeaderEpoch = start, epochForOffset(p, start)
	case listLatestTiered:
		if version < 9 {
			sp.ErrorCode = kerr.UnsupportedVersion.Code
			return
		}
		if !p.remoteLogEnabled() {
			return // offset -1
		}
		if off, epoch := p.highestRemoteOffset(); off < hw {
			sp.Offset, sp.LeaderEpoch = off, epoch
		}
	case listMaxTimestamp:
		if version < 7 {
			sp.ErrorCode = kerr.UnsupportedVersion.Code
			return
		}
		ts, off := p.log.MaxTimestamp()
		if off >= 0 && off < hw {
			off = recordWithTimestamp(p, off, ts, hw)
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = ts, off, epochForOffset(p, off)
		}
	default:
		if rp.Timestamp < 0 {
			sp.ErrorCode = kerr.UnsupportedVersion.Code
			return
		}
		off, ts, found, err := s.remoteOffsetForTimestamp(p, rp.Timestamp)
		if err == nil && !found {
			off, ts, found, err = p.log.OffsetForTimestamp(rp.Timestamp)
		}
		if err != nil {
			sp.ErrorCode = readErrorCode(s, p, err)
			return
		}
		if found && off < hw {
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = ts, off, epochForOffset(p, off)
		}
	}
}

// recordWithTimestamp narrows a max-timestamp answer from the batch that
// holds it to the record that holds it (as Kafka answers since
// KAFKA-16310): the first record of the batch at off whose timestamp is
// ts. With broker (LogAppendTime) timestamps every record has it, so the
// batch's first offset is the answer. On any read problem off stands.
func recordWithTimestamp(p *partition, off, ts, hw int64) int64 {
	b, err := p.log.ReadCopy(off, 1, hw)
	if err != nil || len(b) == 0 {
		return off
	}
	h, err := segment.ParseHeader(b)
	if err != nil || h.Size() > len(b) {
		return off
	}
	if h.LogAppendTime() {
		return h.BaseOffset
	}
	it, err := segment.NewRecordIter(b[:h.Size()], segment.DefaultMaxDecompressed)
	if err != nil {
		return off
	}
	for {
		rec, ok, err := it.Next()
		if err != nil || !ok {
			return off
		}
		if rec.Timestamp == ts {
			return rec.Offset
		}
	}
}

// checkLeaderEpoch compares a client's idea of the leader epoch with the
// partition's: 0 if equal, FENCED_LEADER_EPOCH if the client's is older,
// UNKNOWN_LEADER_EPOCH if newer.
func checkLeaderEpoch(p *partition, clientEpoch int32) int16 {
	epoch := p.leaderEpoch()
	switch {
	case clientEpoch < epoch:
		return kerr.FencedLeaderEpoch.Code
	case clientEpoch > epoch:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}

// epochForOffset is the leader epoch that wrote offset, from the epoch
// cache; -1 if unknown.
func epochForOffset(p *partition, offset int64) int32 {
	epoch := int32(-1)
	for _, e := range p.log.Epochs().Entries() {
		if e.StartOffset > offset {
			break
		}
		epoch = e.Epoch
	}
	return epoch
}
