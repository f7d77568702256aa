package broker

import (
	"context"

	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteShareGroupOffsets: v0 (KIP-932)
//
// Behavior:
// * Top-level errors, with no topics: DELETE on the group, else
//   GROUP_AUTHORIZATION_FAILED; INVALID_GROUP_ID for an empty id;
//   NOT_COORDINATOR unless this broker coordinates it;
//   GROUP_ID_NOT_FOUND for a classic or consumer group of that id and
//   for an id that is neither a share group (with members or Empty) nor
//   has state in the share coordinator;
//   NON_EMPTY_GROUP while the share group has members.
// * Per topic: READ on the topic, else TOPIC_AUTHORIZATION_FAILED; an
//   unknown topic, or one without share state for the group,
//   UNKNOWN_TOPIC_OR_PARTITION; else the state of each of its share
//   partitions is deleted through the share coordinator
//   (DeleteShareGroupState) and the first partition's error, if any, is
//   the topic's.
// * This broker's loaded share partitions of the group are marked to be
//   read again (a leader elsewhere marked its own when the group's last
//   share session there closed); a member that uses the topic later
//   starts by share.auto.offset.reset.
// * Topics null: an empty answer.

func init() { register(92, 0, 0, handleDeleteShareGroupOffsets) }

func handleDeleteShareGroupOffsets(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.DeleteShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	fail := func(code int16) (reply, error) {
		resp.ErrorCode, resp.ErrorMessage = errMessageOf(code)
		resp.Topics = nil
		return reply{msg: resp}, nil
	}
	ctx := groupCtx(r)
	switch {
	case !s.authorize(r, acl.OpDelete, acl.Group(req.GroupID)):
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
	mayRead := s.topicAuthorizer(r, acl.OpRead)
	snap := s.coord.Snapshot()
	codes := map[string]int16{}
	var names []string
	for _, t := range req.Topics {
		switch _, ok := snap.Topic(t.Topic); {
		case !mayRead(t.Topic):
			codes[t.Topic] = kerr.TopicAuthorizationFailed.Code
		case !ok || isInternalTopic(t.Topic):
			codes[t.Topic] = kerr.UnknownTopicOrPartition.Code
		default:
			names = append(names, t.Topic)
		}
	}
	sums, err := s.readShareSummaries(ctx, req.GroupID, topicShareParts(snap, names))
	if err != nil {
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
	if !s.anyShareState(sums) {
		if code, err := s.shareGroupCode(ctx, r, req.GroupID, true, true); err != nil || code != 0 {
			if err != nil {
				code = kerr.CoordinatorNotAvailable.Code
			}
			return fail(code)
		}
	}
	if err := s.deleteShareOffsets(ctx, req.GroupID, names, sums, codes); err != nil {
		s.log.Warn("share group offsets not deleted", "group", req.GroupID, "err", err)
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
	for _, t := range req.Topics {
		rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		rt.Topic = t.Topic
		if ti, ok := snap.Topic(t.Topic); ok {
			rt.TopicID = [16]byte(ti.ID)
		}
		rt.ErrorCode, rt.ErrorMessage = errMessageOf(codes[t.Topic])
		if rt.ErrorCode == kerr.UnknownTopicOrPartition.Code && rt.TopicID != [16]byte{} {
			m := "There is no offset information to delete."
			rt.ErrorMessage = &m
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply{msg: resp}, nil
}

// deleteShareOffsets deletes the share state of the partitions of the
// topics names that have it (sums) and sets each topic's code.
func (s *Server) deleteShareOffsets(ctx context.Context, group string, names []string, sums map[sharePart]shareSummary, codes map[string]int16) error {
	del := kmsg.NewPtrDeleteShareGroupStateRequest()
	del.GroupID = group
	byID := map[[16]byte]int{}
	topicOf := map[[16]byte]string{}
	for _, name := range names {
		codes[name] = kerr.UnknownTopicOrPartition.Code // until a partition with state is found
	}
	for k, sum := range sums {
		if sum.code != 0 || sum.start < 0 {
			continue
		}
		i, ok := byID[k.id]
		if !ok {
			i = len(del.Topics)
			byID[k.id] = i
			topicOf[k.id] = k.topic
			t := kmsg.NewDeleteShareGroupStateRequestTopic()
			t.TopicID = k.id
			del.Topics = append(del.Topics, t)
		}
		dp := kmsg.NewDeleteShareGroupStateRequestTopicPartition()
		dp.Partition = k.part
		del.Topics[i].Partitions = append(del.Topics[i].Partitions, dp)
		codes[k.topic] = 0
	}
	if len(del.Topics) == 0 {
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, shareAdminTimeout)
	defer cancel()
	resp, err := s.sharePersister.DeleteShareGroupState(dctx, del)
	s.staleSharePartitions(group)
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, rp := range t.Partitions {
			if rp.ErrorCode != 0 && codes[topicOf[t.TopicID]] == 0 {
				codes[topicOf[t.TopicID]] = rp.ErrorCode
			}
		}
	}
	return nil
}
