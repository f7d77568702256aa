package broker

import (
	"slices"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/broker/share"
	"github.com/stratastream/strata/broker/strataapi"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeSharePartitions (Strata's own API, key 10001): v0
//
// The encoding is in package strataapi (doc.go). The key is not listed in
// ApiVersions. A share partition lives on the leader of its topic
// partition, so a client asks each partition's leader.
//
// Behavior:
// * Needs DESCRIBE on the group, as Kafka's share-group admin APIs:
//   denied, the answer is GROUP_AUTHORIZATION_FAILED at the top with no
//   topics; INVALID_GROUP_ID for an empty group id.
// * DESCRIBE on each topic, else TOPIC_AUTHORIZATION_FAILED on the topic
//   with no partitions. A listed topic the broker does not know (or an
//   internal one): UNKNOWN_TOPIC_OR_PARTITION on the topic.
// * Topics null: every share partition of the group this broker holds in
//   memory, on the partitions it leads and the topics the principal may
//   DESCRIBE (the others left out), by topic and partition.
// * A listed topic with no partitions: every partition of it this broker
//   leads. A listed partition: UNKNOWN_TOPIC_OR_PARTITION when the topic
//   has no such partition, NOT_LEADER_OR_FOLLOWER when this broker does
//   not lead it, KAFKA_STORAGE_ERROR for an offline replica; its figures
//   -1.
// * Per partition led here: Loaded, with the start offset, the end of the
//   in-flight window, the in-flight records by state and the totals
//   since it was loaded, when the share partition is in memory here and
//   current; not Loaded (figures -1) when no member used it on this
//   leader yet, or it is marked to be read again from the share
//   coordinator (an admin call changed its state, or the group's last
//   share session here closed) and holds no acquired records. Asking
//   never loads a share partition.

func init() {
	registerStrata(strataapi.KeyDescribeSharePartitions, 0, 0,
		func() kmsg.Request { return new(strataapi.DescribeSharePartitionsRequest) }, handleDescribeSharePartitions)
}

func handleDescribeSharePartitions(s *Server, r *request) (reply, error) {
	req := r.kreq.(*strataapi.DescribeSharePartitionsRequest)
	resp := req.ResponseKind().(*strataapi.DescribeSharePartitionsResponse)
	resp.Topics = []strataapi.DescribeSharePartitionsResponseTopic{}
	switch {
	case !s.authorize(r, acl.OpDescribe, acl.Group(req.GroupID)):
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return reply{msg: resp}, nil
	case req.GroupID == "":
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return reply{msg: resp}, nil
	}
	mayDescribe := s.topicAuthorizer(r, acl.OpDescribe)
	if req.Topics == nil {
		loaded := s.shares.Describe(req.GroupID, nil)
		for _, t := range s.topicsSorted() {
			if isInternalTopic(t.name) || !mayDescribe(t.name) {
				continue
			}
			rt := strataapi.DescribeSharePartitionsResponseTopic{Topic: t.name}
			for i, p := range t.parts {
				k := share.Key{Group: req.GroupID, TopicID: [16]byte(t.id), Partition: int32(i)}
				st, ok := loaded[k]
				if p == nil || !ok {
					continue
				}
				if _, err := p.leaderCheck(s.cfg.BrokerID); err != nil {
					continue
				}
				rt.Partitions = append(rt.Partitions, sharePartitionOf(int32(i), st))
			}
			if len(rt.Partitions) > 0 {
				resp.Topics = append(resp.Topics, rt)
			}
		}
		return reply{msg: resp}, nil
	}
	for _, qt := range req.Topics {
		rt := strataapi.DescribeSharePartitionsResponseTopic{Topic: qt.Topic, Partitions: []strataapi.DescribeSharePartition{}}
		t := s.topic(qt.Topic)
		switch {
		case !mayDescribe(qt.Topic):
			rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		case t == nil || isInternalTopic(qt.Topic):
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		}
		if rt.ErrorCode != 0 {
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		want := qt.Partitions
		if len(want) == 0 {
			for i, p := range t.parts {
				if p == nil {
					continue
				}
				if _, err := p.leaderCheck(s.cfg.BrokerID); err == nil {
					want = append(want, int32(i))
				}
			}
		}
		loaded := s.shares.Describe(req.GroupID, func(k share.Key) bool { return k.TopicID == [16]byte(t.id) })
		for _, index := range slices.Compact(slices.Sorted(slices.Values(want))) {
			if _, _, err := s.leaderPartition(t, qt.Topic, index); err != nil {
				code, _ := errorCode(err)
				rt.Partitions = append(rt.Partitions, strataapi.NewDescribeSharePartition(index, code))
				continue
			}
			st, ok := loaded[share.Key{Group: req.GroupID, TopicID: [16]byte(t.id), Partition: index}]
			if !ok {
				rt.Partitions = append(rt.Partitions, strataapi.NewDescribeSharePartition(index, 0))
				continue
			}
			rt.Partitions = append(rt.Partitions, sharePartitionOf(index, st))
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return reply{msg: resp}, nil
}

// sharePartitionOf is the answer for a share partition loaded here.
func sharePartitionOf(index int32, st share.PartitionState) strataapi.DescribeSharePartition {
	c := st.Counts
	return strataapi.DescribeSharePartition{Partition: index, Loaded: true, StartOffset: st.Start, EndOffset: st.End,
		Available: int32(c.Available), Acquired: int32(c.Acquired), Acknowledged: int32(c.Acknowledged),
		Archiving: int32(c.Archiving), Archived: int32(c.Archived),
		AcquiredTotal: st.Totals.Acquired, RedeliveredTotal: st.Totals.Redelivered, ArchivedTotal: st.Totals.Archived}
}
