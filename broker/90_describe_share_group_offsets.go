package broker

import (
	"context"
	"slices"

	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeShareGroupOffsets: v0-1 (KIP-932)
//
// Behavior (share_group_offsets.go has where a group's partitions come
// from):
// * Per group: DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED;
//   NOT_COORDINATOR unless this broker coordinates it
//   (COORDINATOR_NOT_AVAILABLE while it shuts down); GROUP_ID_NOT_FOUND
//   for a classic or consumer group of that id, and for an id that is
//   neither a share group (with members or Empty) nor has state in the
//   share coordinator.
// * Topics null: every share partition of the group with state, on the
//   topics the principal may DESCRIBE (the others left out, as Kafka).
//   Topics empty: no topics.
// * Named topics: each partition's start offset and leader epoch from
//   the share coordinator's summary (ReadShareGroupStateSummary);
//   start offset -1 (leader epoch 0) for a partition without state, of
//   an unknown topic (topic id zero) or one the share coordinator
//   answered with an error, as Kafka ("absence of data, not an error");
//   a topic without DESCRIBE: start offset -1 and
//   TOPIC_AUTHORIZATION_FAILED.
// * Lag (v1, KIP-1226): the partition's end offset (its leader's high
//   watermark) minus the start offset minus the delivery-complete count
//   (records past the start already acknowledged or archived); -1 when
//   the start offset or the count is unknown. An end offset the leader
//   cannot tell answers the partition with NOT_LEADER_OR_FOLLOWER.
//
// Version notes:
// * v1: Lag (Kafka 4.2)

func init() { register(90, 0, 1, handleDescribeShareGroupOffsets) }

func handleDescribeShareGroupOffsets(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	for _, g := range req.Groups {
		resp.Groups = append(resp.Groups, s.describeShareGroupOffsets(groupCtx(r), r, g))
	}
	return reply{msg: resp}, nil
}

func (s *Server) describeShareGroupOffsets(ctx context.Context, r *request, g kmsg.DescribeShareGroupOffsetsRequestGroup) kmsg.DescribeShareGroupOffsetsResponseGroup {
	rg := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
	rg.GroupID = g.GroupID
	fail := func(code int16) kmsg.DescribeShareGroupOffsetsResponseGroup {
		rg.ErrorCode, rg.ErrorMessage = errMessageOf(code)
		rg.Topics = nil
		return rg
	}
	if !s.authorize(r, acl.OpDescribe, acl.Group(g.GroupID)) {
		return fail(kerr.GroupAuthorizationFailed.Code)
	}
	if code := s.shareCoordinatorCode(g.GroupID); code != 0 {
		return fail(code)
	}
	if g.Topics != nil && len(g.Topics) == 0 {
		return rg
	}
	mayDescribe := s.topicAuthorizer(r, acl.OpDescribe)
	var sums map[sharePart]shareSummary
	var err error
	var unauthorized []kmsg.DescribeShareGroupOffsetsRequestGroupTopic
	var unknown []string
	if g.Topics == nil {
		code, err := s.shareGroupCode(ctx, r, g.GroupID, true, false)
		if err != nil {
			return fail(kerr.CoordinatorNotAvailable.Code)
		}
		if code != 0 {
			return fail(code)
		}
		if sums, err = s.groupShareParts(ctx, g.GroupID); err != nil {
			return fail(kerr.CoordinatorNotAvailable.Code)
		}
		for k := range sums {
			if !mayDescribe(k.topic) {
				delete(sums, k)
			}
		}
	} else {
		snap := s.coord.Snapshot()
		var parts []sharePart
		for _, t := range g.Topics {
			ti, ok := snap.Topic(t.Topic)
			switch {
			case !mayDescribe(t.Topic):
				unauthorized = append(unauthorized, t)
				continue
			case !ok || isInternalTopic(t.Topic):
				unknown = append(unknown, t.Topic)
				continue
			}
			for _, p := range t.Partitions {
				parts = append(parts, sharePart{topic: t.Topic, id: [16]byte(ti.ID), part: p})
			}
		}
		if sums, err = s.readShareSummaries(ctx, g.GroupID, parts); err != nil {
			return fail(kerr.CoordinatorNotAvailable.Code)
		}
		if !s.anyShareState(sums) {
			code, err := s.shareGroupCode(ctx, r, g.GroupID, true, false)
			if err != nil {
				return fail(kerr.CoordinatorNotAvailable.Code)
			}
			if code != 0 {
				return fail(code)
			}
		}
	}
	rg.Topics = s.shareOffsetTopics(ctx, sums)
	for _, name := range unknown {
		for _, t := range g.Topics {
			if t.Topic == name {
				rg.Topics = append(rg.Topics, shareOffsetsTopicWith(t, 0))
			}
		}
	}
	for _, t := range unauthorized {
		rg.Topics = append(rg.Topics, shareOffsetsTopicWith(t, kerr.TopicAuthorizationFailed.Code))
	}
	return rg
}

// anyShareState reports whether a summary has a start offset.
func (s *Server) anyShareState(sums map[sharePart]shareSummary) bool {
	for _, sum := range sums {
		if sum.code == 0 && sum.start >= 0 {
			return true
		}
	}
	return false
}

// shareOffsetTopics builds the answer's topics from summaries, by topic
// name and partition, with the lag from the leaders' end offsets.
func (s *Server) shareOffsetTopics(ctx context.Context, sums map[sharePart]shareSummary) []kmsg.DescribeShareGroupOffsetsResponseGroupTopic {
	parts := make([]sharePart, 0, len(sums))
	var lagged []sharePart
	for k, sum := range sums {
		parts = append(parts, k)
		if sum.code == 0 && sum.start >= 0 && sum.complete >= 0 {
			lagged = append(lagged, k)
		}
	}
	slices.SortFunc(parts, func(a, b sharePart) int {
		if a.topic != b.topic {
			if a.topic < b.topic {
				return -1
			}
			return 1
		}
		return int(a.part - b.part)
	})
	ends := s.shareEndOffsets(ctx, lagged)
	var out []kmsg.DescribeShareGroupOffsetsResponseGroupTopic
	for _, k := range parts {
		if n := len(out); n == 0 || out[n-1].Topic != k.topic {
			t := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			t.Topic, t.TopicID = k.topic, k.id
			out = append(out, t)
		}
		sum := sums[k]
		rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
		rp.Partition, rp.StartOffset, rp.LeaderEpoch, rp.Lag = k.part, -1, 0, -1
		if sum.code == 0 && sum.start >= 0 {
			rp.StartOffset, rp.LeaderEpoch = sum.start, sum.leaderEpoch
			if sum.complete >= 0 {
				if end, ok := ends[k]; ok {
					rp.Lag = end - sum.start - int64(sum.complete)
				} else {
					rp.ErrorCode, rp.ErrorMessage = errMessageOf(kerr.NotLeaderForPartition.Code)
				}
			}
		}
		t := &out[len(out)-1]
		t.Partitions = append(t.Partitions, rp)
	}
	return out
}

// shareOffsetsTopicWith answers every partition of t with start offset
// -1 and code.
func shareOffsetsTopicWith(t kmsg.DescribeShareGroupOffsetsRequestGroupTopic, code int16) kmsg.DescribeShareGroupOffsetsResponseGroupTopic {
	rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
	rt.Topic = t.Topic
	for _, p := range t.Partitions {
		rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
		rp.Partition, rp.StartOffset = p, -1
		rp.ErrorCode, rp.ErrorMessage = errMessageOf(code)
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

// errMessageOf is a Kafka error code with its message for a response;
// nil for code 0.
func errMessageOf(code int16) (int16, *string) {
	if code == 0 {
		return 0, nil
	}
	e := kerr.ErrorForCode(code).(*kerr.Error)
	m := e.Description
	return code, &m
}
