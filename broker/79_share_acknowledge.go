package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/broker/share"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareAcknowledge: v0-2 (KIP-932, KIP-1222)
//
// Behavior:
// * Needs the member's share session on this broker: ShareSessionEpoch
//   0 is INVALID_SHARE_SESSION_EPOCH, a positive epoch must be the
//   session's next (INVALID_SHARE_SESSION_EPOCH; no session:
//   SHARE_SESSION_NOT_FOUND), -1 closes the session after the
//   acknowledgements and releases the records the member still holds in
//   its partitions.
// * Each partition's batches are validated (INVALID_REQUEST), must name
//   only records this member acquired (INVALID_RECORD_STATE) and are
//   persisted before the answer; ACCEPT, RELEASE, REJECT, and RENEW
//   (v2, with IsRenewAck) extending the acquisition lock.
// * Partitions this broker does not lead are NOT_LEADER_OR_FOLLOWER with
//   CurrentLeader and NodeEndpoints.
// * Authorization (with an authorizer): READ on the group, else
//   GROUP_AUTHORIZATION_FAILED; READ on each topic, else
//   TOPIC_AUTHORIZATION_FAILED.
//
// Version notes:
// * v1: no change to the schema
// * v2: IsRenewAck, AcquisitionLockTimeoutMillis (KIP-1222)

func init() { register(79, 0, 2, handleShareAcknowledge) }

func handleShareAcknowledge(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.ShareAcknowledgeRequest)
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	group, member := nonNilString(req.GroupID), nonNilString(req.MemberID)
	resp.AcquisitionLockTimeoutMillis = s.shareLockMillis(group)
	fail := func(code int16) (reply, error) {
		resp.ErrorCode = code
		return reply{msg: resp}, nil
	}
	if code := s.shareRequestCode(r, group, member); code != 0 {
		return fail(code)
	}
	key := share.SessionKey{Group: group, Member: member}
	switch req.ShareSessionEpoch {
	case 0:
		return fail(kerr.InvalidShareSessionEpoch.Code)
	case -1:
		if s.shares.Sessions.Parts(key) == nil {
			return fail(kerr.ShareSessionNotFound.Code)
		}
	default:
		if _, code := s.shares.Sessions.Update(key, req.ShareSessionEpoch, nil, nil); code != 0 {
			return fail(code)
		}
	}
	maxType := share.AckReject
	if req.Version >= 2 && req.IsRenewAck {
		maxType = share.AckRenew
	}
	mayRead := s.topicAuthorizer(r, acl.OpRead)
	var leaders leaderHints
	for _, rt := range req.Topics {
		ot := kmsg.NewShareAcknowledgeResponseTopic()
		ot.TopicID = rt.TopicID
		for _, rp := range rt.Partitions {
			tp := share.TopicPartition{TopicID: rt.TopicID, Partition: rp.Partition}
			batches := shareAckBatches(rp.AcknowledgementBatches, func(b kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch) share.AckBatch {
				return share.AckBatch{First: b.FirstOffset, Last: b.LastOffset, Types: b.AcknowledgeTypes}
			})
			op := kmsg.NewShareAcknowledgeResponseTopicPartition()
			op.Partition = rp.Partition
			op.CurrentLeader.LeaderID, op.CurrentLeader.LeaderEpoch = -1, -1
			op.ErrorCode = s.shareAcknowledge(groupCtx(r), group, member, tp, batches, maxType, mayRead)
			if t := s.topicByID([16]byte(rt.TopicID)); op.ErrorCode == kerr.NotLeaderForPartition.Code && t != nil {
				op.CurrentLeader.LeaderID, op.CurrentLeader.LeaderEpoch = leaders.lookup(s, t.name, rp.Partition, r.listenerName())
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	for _, b := range leaders.endpoints() {
		ne := kmsg.NewShareAcknowledgeResponseNodeEndpoint()
		ne.NodeID, ne.Host, ne.Port, ne.Rack = b.NodeID, b.Host, b.Port, b.Rack
		resp.NodeEndpoints = append(resp.NodeEndpoints, ne)
	}
	if req.ShareSessionEpoch == -1 {
		if closed, code := s.shares.Sessions.Close(key); code == 0 {
			s.releaseSessionRecords(key, closed)
		}
	}
	return reply{msg: resp}, nil
}
