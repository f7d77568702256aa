package broker

import (
	"context"
	"slices"
	"time"

	"github.com/stratastream/strata/coord"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file holds what the share-group offsets admin APIs
// (90_describe_share_group_offsets.go, 91_alter_share_group_offsets.go,
// 92_delete_share_group_offsets.go) share: which share partitions a group
// has, read from the share coordinator, whether the group exists and is
// empty, and the end offsets their lag is computed from.
//
// Kafka's group coordinator keeps, per share group, the share partitions
// whose state it initialized (its ShareGroupStatePartitionMetadata
// record in __consumer_offsets) and the group itself while it is empty.
// Strata keeps the group in __consumer_offsets too (package share: it is
// Empty without members), but its partition leaders initialize share
// state on first use, unknown to the coordinator, so the record is not
// written: "all its partitions" are the partitions of the cluster's
// topics the share coordinator has state for, and an id with such state
// but no group (its records gone) is still a share group here.

// shareAdminTimeout bounds the share coordinator calls of one admin
// request.
const shareAdminTimeout = 10 * time.Second

// sharePart is one share partition of a group an admin request names.
type sharePart struct {
	topic string
	id    [16]byte
	part  int32
}

// shareSummary is a share partition's state as the share coordinator
// summarizes it: start offset -1 when it has none.
type shareSummary struct {
	code                    int16
	stateEpoch, leaderEpoch int32
	start                   int64
	complete                int32 // delivery-complete count, -1 unknown
}

// readShareSummaries reads the share coordinator's summary of group's
// share partitions parts. A part the persister did not answer has
// COORDINATOR_NOT_AVAILABLE.
func (s *Server) readShareSummaries(ctx context.Context, group string, parts []sharePart) (map[sharePart]shareSummary, error) {
	out := make(map[sharePart]shareSummary, len(parts))
	if len(parts) == 0 {
		return out, nil
	}
	req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
	req.Version = 1
	req.GroupID = group
	byID := map[[16]byte]int{}
	names := map[[16]byte]string{}
	for _, p := range parts {
		i, ok := byID[p.id]
		if !ok {
			i = len(req.Topics)
			byID[p.id] = i
			names[p.id] = p.topic
			t := kmsg.NewReadShareGroupStateSummaryRequestTopic()
			t.TopicID = p.id
			req.Topics = append(req.Topics, t)
		}
		rp := kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()
		rp.Partition, rp.LeaderEpoch = p.part, -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	ctx, cancel := context.WithTimeout(ctx, shareAdminTimeout)
	defer cancel()
	resp, err := s.sharePersister.ReadShareGroupStateSummary(ctx, req)
	if err != nil {
		return nil, err
	}
	for _, p := range parts {
		out[p] = shareSummary{code: kerr.CoordinatorNotAvailable.Code, start: -1, complete: -1}
	}
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			k := sharePart{topic: names[t.TopicID], id: t.TopicID, part: rp.Partition}
			if _, asked := out[k]; !asked {
				continue
			}
			sum := shareSummary{code: rp.ErrorCode, start: -1, complete: -1}
			if rp.ErrorCode == 0 {
				sum = shareSummary{stateEpoch: rp.StateEpoch, leaderEpoch: rp.LeaderEpoch, start: rp.StartOffset, complete: rp.DeliveryCompleteCount}
			}
			out[k] = sum
		}
	}
	return out, nil
}

// topicShareParts are every partition of the named topics that exist,
// sorted; unknown names are left out.
func topicShareParts(snap *coord.Snapshot, names []string) []sharePart {
	var out []sharePart
	for _, name := range names {
		ti, ok := snap.Topic(name)
		if !ok || isInternalTopic(name) {
			continue
		}
		for p := range ti.Partitions {
			out = append(out, sharePart{topic: name, id: [16]byte(ti.ID), part: int32(p)})
		}
	}
	return out
}

// groupShareParts returns the share partitions of group that have state
// (a start offset) in the share coordinator, over every topic of the
// cluster, with their summaries. It asks the share coordinator about every
// partition: an admin call's cost, not a fetch path's.
func (s *Server) groupShareParts(ctx context.Context, group string) (map[sharePart]shareSummary, error) {
	snap := s.coord.Snapshot()
	names := snap.TopicNames()
	slices.Sort(names)
	sums, err := s.readShareSummaries(ctx, group, topicShareParts(snap, names))
	if err != nil {
		return nil, err
	}
	for k, sum := range sums {
		if sum.code != 0 || sum.start < 0 {
			delete(sums, k)
		}
	}
	return sums, nil
}

// shareGroupCode is the group-level error of a share-group offsets
// request that needs an existing share group (exists) and, with
// needEmpty, one without members: GROUP_ID_NOT_FOUND for a classic or
// consumer group of that id, or (exists) for no share group at all
// (neither a group here, with members or Empty, nor state);
// NON_EMPTY_GROUP when it has members.
func (s *Server) shareGroupCode(ctx context.Context, r *request, group string, exists, needEmpty bool) (int16, error) {
	isShare, members := s.shares.Groups.Exists(group), s.shares.Groups.HasMembers(group)
	switch {
	case !isShare && s.classicGroupExists(r, group):
		return kerr.GroupIDNotFound.Code, nil
	case members && needEmpty:
		return kerr.NonEmptyGroup.Code, nil
	case isShare || !exists:
		return 0, nil
	}
	parts, err := s.groupShareParts(ctx, group)
	if err != nil {
		return 0, err
	}
	if len(parts) == 0 {
		return kerr.GroupIDNotFound.Code, nil
	}
	return 0, nil
}

// staleSharePartitions marks this broker's loaded share partitions of
// group to be read from the share coordinator again on their next use
// (after an admin call changed or deleted their state).
func (s *Server) staleSharePartitions(group string) { s.shares.MarkStale(group) }

// shareEndOffsets returns the end offset (the high watermark) of each of
// parts, from its leader: this broker's log when it leads the partition,
// else the leader's answer over the replication listener
// (txnPeers.shareState with a ListOffsets request), as Kafka's group
// coordinator asks the leaders (its PartitionMetadataClient). A part whose
// leader cannot tell is left out.
func (s *Server) shareEndOffsets(ctx context.Context, parts []sharePart) map[sharePart]int64 {
	out := map[sharePart]int64{}
	snap := s.coord.Snapshot()
	remote := map[int32][]sharePart{}
	for _, p := range parts {
		if hw, ok := s.localHighWatermark(p.topic, p.part); ok {
			out[p] = hw
			continue
		}
		pi, ok := snap.Partition(coord.TopicPartition{Topic: p.topic, Partition: p.part})
		if !ok || pi.State.Leader < 0 || pi.State.Leader == s.cfg.BrokerID {
			continue
		}
		remote[pi.State.Leader] = append(remote[pi.State.Leader], p)
	}
	for id, ps := range remote {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 1
		req.ReplicaID = s.cfg.BrokerID
		idx := map[string]int{}
		for _, p := range ps {
			i, ok := idx[p.topic]
			if !ok {
				i = len(req.Topics)
				idx[p.topic] = i
				t := kmsg.NewListOffsetsRequestTopic()
				t.Topic = p.topic
				req.Topics = append(req.Topics, t)
			}
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp = p.part, -1
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		}
		resp, err := s.txnPeers.shareState(ctx, s, id, req)
		if err != nil {
			s.log.Warn("share group lag: the leader's end offsets are unknown", "broker", id, "err", err)
			continue
		}
		lo := resp.(*kmsg.ListOffsetsResponse)
		for _, t := range lo.Topics {
			for _, rp := range t.Partitions {
				if rp.ErrorCode == 0 && rp.Offset >= 0 {
					for _, p := range ps {
						if p.topic == t.Topic && p.part == rp.Partition {
							out[p] = rp.Offset
						}
					}
				}
			}
		}
	}
	return out
}

// localHighWatermark is the high watermark of a partition this broker
// leads.
func (s *Server) localHighWatermark(topic string, part int32) (int64, bool) {
	t := s.topic(topic)
	if t == nil || !t.hasPartition(part) {
		return 0, false
	}
	p := t.local(part)
	if p == nil {
		return 0, false
	}
	if _, err := p.leaderCheck(s.cfg.BrokerID); err != nil {
		return 0, false
	}
	return p.log.HighWatermark(), true
}

// listOffsetsKey is ListOffsets' API key, which the replication
// listener's ShareGroupState call also carries (leaderEndOffsets).
const listOffsetsKey = 2

// leaderEndOffsets answers another broker's ListOffsets (latest only)
// for the lag of a share group: the high watermark of each partition this
// broker leads, else NOT_LEADER_OR_FOLLOWER.
func (s *Server) leaderEndOffsets(req *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition, rp.Timestamp, rp.Offset = p.Partition, -1, -1
			switch hw, ok := s.localHighWatermark(t.Topic, p.Partition); {
			case p.Timestamp != -1:
				rp.ErrorCode = kerr.InvalidRequest.Code
			case !ok:
				rp.ErrorCode = kerr.NotLeaderForPartition.Code
			default:
				rp.Offset = hw
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
