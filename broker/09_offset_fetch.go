package broker

import (
	"fmt"
	"slices"

	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetFetch: v0-8
//
// Behavior (group/fetch.go has the details):
// * The group's committed offsets with their leader epoch and metadata
//   (never null). A partition without a commit, or a group without any,
//   answers offset -1 and no error. Null topics (v2+) ask for every
//   committed offset of the group.
// * Errors of the group (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS):
//   v2+ in the top-level error code, v0-1 on every partition.
// * v8 asks for several groups, each answered on its own.
// * A share group's id: GROUP_ID_NOT_FOUND (v8 for that group, v2+
//   top-level, v0-1 on every partition), as Kafka.
// * RequireStable (v7+, KIP-447): a partition with a commit still pending
//   (a transactional one before its marker, or a plain one being written)
//   answers UNSTABLE_OFFSET_COMMIT, which clients retry.
// * Authorization (with an authorizer, as Kafka): DESCRIBE on the group,
//   else GROUP_AUTHORIZATION_FAILED (v2+ top-level, v1 per partition, v8
//   per group); a named topic the principal may not DESCRIBE answers
//   offset -1 with TOPIC_AUTHORIZATION_FAILED, and null topics (all)
//   leave such topics out.
//
// Version notes:
// * v0: as v1 (Kafka 3.9 answers v0 from ZooKeeper, where it keeps v0
//   commits; Strata answers every version from __consumer_offsets)
// * v2: top-level ErrorCode, null topics for all
// * v3: ThrottleMillis
// * v5: committed leader epoch
// * v6: flexible versions
// * v7: RequireStable
// * v8: several groups
// * v9: MemberID and MemberEpoch of a KIP-848 consumer group member,
//   checked (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH, FENCED_MEMBER_EPOCH)

func init() { registerGroupAPI(9, handleOffsetFetch) }

func handleOffsetFetch(s *Server, r *request) (reply, error) {
	rep, err := offsetFetch(s, r)
	if resp, ok := rep.msg.(*kmsg.OffsetFetchResponse); ok && err == nil {
		refuseShareGroupFetch(s, r.kreq.(*kmsg.OffsetFetchRequest), resp)
	}
	return rep, err
}

// refuseShareGroupFetch answers GROUP_ID_NOT_FOUND for the share groups
// resp answers (group ids are one namespace), where the group's
// authorization did not fail already.
func refuseShareGroupFetch(s *Server, req *kmsg.OffsetFetchRequest, resp *kmsg.OffsetFetchResponse) {
	code := kerr.GroupIDNotFound.Code
	if req.Version >= 8 {
		for i, g := range resp.Groups {
			if g.ErrorCode != kerr.GroupAuthorizationFailed.Code && s.isShareGroup(g.Group) {
				rg := kmsg.NewOffsetFetchResponseGroup()
				rg.Group, rg.ErrorCode = g.Group, code
				resp.Groups[i] = rg
			}
		}
		return
	}
	if resp.ErrorCode == kerr.GroupAuthorizationFailed.Code || !s.isShareGroup(req.Group) {
		return
	}
	if req.Version >= 2 {
		resp.ErrorCode, resp.Topics = code, nil
		return
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			p := &resp.Topics[i].Partitions[j]
			if p.ErrorCode != kerr.GroupAuthorizationFailed.Code {
				p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, nil, code
			}
		}
	}
}

func offsetFetch(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.OffsetFetchRequest)
	if s.authz == nil {
		return reply{msg: s.groups.OffsetFetch(groupCtx(r), req)}, nil
	}
	mayDescribe := s.topicAuthorizer(r, acl.OpDescribe)
	if req.Version >= 8 {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		for _, g := range req.Groups {
			sub := *req
			sub.Groups = []kmsg.OffsetFetchRequestGroup{g}
			var denied []kmsg.OffsetFetchRequestGroupTopic
			if !s.authorize(r, acl.OpDescribe, acl.Group(g.Group)) {
				rg := kmsg.NewOffsetFetchResponseGroup()
				rg.Group = g.Group
				rg.ErrorCode = kerr.GroupAuthorizationFailed.Code
				resp.Groups = append(resp.Groups, rg)
				continue
			}
			if g.Topics != nil {
				sub.Groups[0].Topics = []kmsg.OffsetFetchRequestGroupTopic{}
				for _, t := range g.Topics {
					if mayDescribe(t.Topic) {
						sub.Groups[0].Topics = append(sub.Groups[0].Topics, t)
					} else {
						denied = append(denied, t)
					}
				}
			}
			got := s.groups.OffsetFetch(groupCtx(r), &sub).Groups
			if len(got) != 1 {
				return reply{}, fmt.Errorf("offset fetch of one group answered %d", len(got))
			}
			rg := got[0]
			if rg.ErrorCode == 0 {
				if g.Topics == nil {
					rg.Topics = slices.DeleteFunc(rg.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) bool { return !mayDescribe(t.Topic) })
				}
				for _, t := range denied {
					rt := kmsg.NewOffsetFetchResponseGroupTopic()
					rt.Topic = t.Topic
					for _, p := range t.Partitions {
						rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
						rp.Partition = p
						rp.Offset = -1
						rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
						rt.Partitions = append(rt.Partitions, rp)
					}
					rg.Topics = append(rg.Topics, rt)
				}
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return reply{msg: resp}, nil
	}
	if !s.authorize(r, acl.OpDescribe, acl.Group(req.Group)) {
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		if req.Version >= 2 {
			resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
			return reply{msg: resp}, nil
		}
		for _, t := range req.Topics {
			resp.Topics = append(resp.Topics, offsetFetchDenied(t, kerr.GroupAuthorizationFailed.Code))
		}
		return reply{msg: resp}, nil
	}
	sub := *req
	var denied []kmsg.OffsetFetchRequestTopic
	if req.Topics != nil {
		sub.Topics = []kmsg.OffsetFetchRequestTopic{}
		for _, t := range req.Topics {
			if mayDescribe(t.Topic) {
				sub.Topics = append(sub.Topics, t)
			} else {
				denied = append(denied, t)
			}
		}
	}
	resp := s.groups.OffsetFetch(groupCtx(r), &sub)
	if req.Version >= 2 && resp.ErrorCode != 0 {
		return reply{msg: resp}, nil
	}
	if req.Topics == nil {
		resp.Topics = slices.DeleteFunc(resp.Topics, func(t kmsg.OffsetFetchResponseTopic) bool { return !mayDescribe(t.Topic) })
	}
	for _, t := range denied {
		resp.Topics = append(resp.Topics, offsetFetchDenied(t, kerr.TopicAuthorizationFailed.Code))
	}
	return reply{msg: resp}, nil
}

// offsetFetchDenied answers t's partitions with code and no offset.
func offsetFetchDenied(t kmsg.OffsetFetchRequestTopic, code int16) kmsg.OffsetFetchResponseTopic {
	rt := kmsg.NewOffsetFetchResponseTopic()
	rt.Topic = t.Topic
	for _, p := range t.Partitions {
		rp := kmsg.NewOffsetFetchResponseTopicPartition()
		rp.Partition = p
		rp.Offset = -1
		rp.Metadata = kmsg.StringPtr("")
		rp.ErrorCode = code
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}
