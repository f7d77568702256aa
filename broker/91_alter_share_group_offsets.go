package broker

import (
	"context"

	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterShareGroupOffsets: v0 (KIP-932)
//
// Behavior:
// * Top-level errors, with no topics: READ on the group, else
//   GROUP_AUTHORIZATION_FAILED; NOT_COORDINATOR unless this broker
//   coordinates it (checked after INVALID_GROUP_ID for an empty id);
//   GROUP_ID_NOT_FOUND for a classic or consumer group of that id;
//   NON_EMPTY_GROUP while the share group has members. A group that
//   does not exist yet is created by its state (Kafka 4.2, KAFKA-19662:
//   offsets can be set before a share group is first used).
// * Per partition: READ on the topic, else TOPIC_AUTHORIZATION_FAILED;
//   an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION; else the
//   share partition's state is initialized at the given start offset
//   through the share coordinator (InitializeShareGroupState, at the
//   next state epoch, so that a share partition still loaded somewhere
//   with the old state is fenced on its next write) and the
//   coordinator's code is the partition's.
// * This broker's loaded share partitions of the group are marked to
//   be read again; a leader elsewhere marked its own when the group's last
//   share session there closed (share_groups.go), so the next member
//   starts at the new offset everywhere.
// * Topics null: an empty answer.

func init() { register(91, 0, 0, handleAlterShareGroupOffsets) }

func handleAlterShareGroupOffsets(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.AlterShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	fail := func(code int16) (reply, error) {
		resp.ErrorCode, resp.ErrorMessage = errMessageOf(code)
		return reply{msg: resp}, nil
	}
	ctx := groupCtx(r)
	switch {
	case !s.authorize(r, acl.OpRead, acl.Group(req.GroupID)):
		return fail(kerr.GroupAuthorizationFailed.Code)
	case req.GroupID == "":
		return fail(kerr.InvalidGroupID.Code)
	case s.shareCoordinatorCode(req.GroupID) != 0:
		return fail(s.shareCoordinatorCode(req.GroupID))
	case req.Topics == nil:
		return reply{msg: resp}, nil
	}
	if code, err := s.shareGroupCode(ctx, r, req.GroupID, false, true); err != nil || code != 0 {
		if err != nil {
			code = kerr.CoordinatorNotAvailable.Code
		}
		return fail(code)
	}
	codes, err := s.alterShareOffsets(ctx, r, req)
	if err != nil {
		s.log.Warn("share group offsets not altered", "group", req.GroupID, "err", err)
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
	snap := s.coord.Snapshot()
	for _, t := range req.Topics {
		rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		if ti, ok := snap.Topic(t.Topic); ok {
			rt.TopicID = [16]byte(ti.ID)
		}
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode, rp.ErrorMessage = errMessageOf(codes[topicPartitionName{t.Topic, p.Partition}])
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply{msg: resp}, nil
}

// topicPartitionName names a partition by topic name.
type topicPartitionName struct {
	topic string
	part  int32
}

// alterShareOffsets initializes the share partitions req names and
// returns each partition's code.
func (s *Server) alterShareOffsets(ctx context.Context, r *request, req *kmsg.AlterShareGroupOffsetsRequest) (map[topicPartitionName]int16, error) {
	codes := map[topicPartitionName]int16{}
	mayRead := s.topicAuthorizer(r, acl.OpRead)
	snap := s.coord.Snapshot()
	starts := map[sharePart]int64{}
	var parts []sharePart
	for _, t := range req.Topics {
		ti, ok := snap.Topic(t.Topic)
		for _, p := range t.Partitions {
			tp := topicPartitionName{t.Topic, p.Partition}
			switch {
			case !mayRead(t.Topic):
				codes[tp] = kerr.TopicAuthorizationFailed.Code
			case !ok || isInternalTopic(t.Topic) || p.Partition < 0 || int(p.Partition) >= len(ti.Partitions):
				codes[tp] = kerr.UnknownTopicOrPartition.Code
			default:
				sp := sharePart{topic: t.Topic, id: [16]byte(ti.ID), part: p.Partition}
				if _, dup := starts[sp]; !dup {
					parts = append(parts, sp)
				}
				starts[sp] = p.StartOffset
			}
		}
	}
	if len(parts) == 0 {
		return codes, nil
	}
	sums, err := s.readShareSummaries(ctx, req.GroupID, parts)
	if err != nil {
		return nil, err
	}
	init := kmsg.NewPtrInitializeShareGroupStateRequest()
	init.GroupID = req.GroupID
	byID := map[[16]byte]int{}
	for _, p := range parts {
		tp := topicPartitionName{p.topic, p.part}
		sum := sums[p]
		if sum.code != 0 {
			codes[tp] = sum.code
			continue
		}
		i, ok := byID[p.id]
		if !ok {
			i = len(init.Topics)
			byID[p.id] = i
			t := kmsg.NewInitializeShareGroupStateRequestTopic()
			t.TopicID = p.id
			init.Topics = append(init.Topics, t)
		}
		ip := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
		ip.Partition, ip.StateEpoch, ip.StartOffset = p.part, sum.stateEpoch+1, starts[p]
		init.Topics[i].Partitions = append(init.Topics[i].Partitions, ip)
		codes[tp] = kerr.CoordinatorNotAvailable.Code // until answered
	}
	if len(init.Topics) == 0 {
		return codes, nil
	}
	ictx, cancel := context.WithTimeout(ctx, shareAdminTimeout)
	defer cancel()
	resp, err := s.sharePersister.InitializeShareGroupState(ictx, init)
	s.staleSharePartitions(req.GroupID)
	if err != nil {
		return nil, err
	}
	names := map[[16]byte]string{}
	for _, p := range parts {
		names[p.id] = p.topic
	}
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			codes[topicPartitionName{names[t.TopicID], rp.Partition}] = rp.ErrorCode
		}
	}
	return codes, nil
}
