package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetForLeaderEpoch: v0-4
//
// Behavior:
// * Answers from the partition's leader-epoch cache (KIP-101, KIP-279):
//   the end offset of the requested epoch is the start of the next larger
//   epoch, or the log end offset for the latest epoch, with the largest
//   epoch at or below the requested one. An epoch newer than every known
//   one (or an empty cache) answers epoch -1, offset -1.
// * CurrentLeaderEpoch, unless -1, is checked: older is
//   FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH. Then a partition this
//   broker does not lead is NOT_LEADER_OR_FOLLOWER. Strata's followers do
//   not ask this API: they ask the leader's Replication service
//   (EpochEnds, package replica), which answers from the same cache.
// * Unknown topics and partitions are UNKNOWN_TOPIC_OR_PARTITION.
// * Authorization (with an authorizer): CLUSTER_ACTION on the cluster
//   allows every topic; otherwise each topic needs DESCRIBE (KIP-320's
//   consumers), else its partitions are TOPIC_AUTHORIZATION_FAILED.
//
// Version notes:
// * v0: the end offset alone; v1: LeaderEpoch in the response
// * v2: CurrentLeaderEpoch (v0-1 cannot send it: no fencing check),
//   ThrottleMillis
// * v3: ReplicaID
// * v4: flexible versions

func init() { register(23, 0, 4, handleOffsetForLeaderEpoch) }

func handleOffsetForLeaderEpoch(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	// CLUSTER_ACTION is what Kafka's followers have; consumers (KIP-320)
	// need DESCRIBE on the topic.
	mayDescribe := s.topicAuthorizer(r, acl.OpDescribe)
	if s.authorize(r, acl.OpClusterAction, acl.Cluster) {
		mayDescribe = func(string) bool { return true }
	}
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		t := s.topic(rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			switch {
			case !mayDescribe(rt.Topic):
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case t == nil || !t.hasPartition(rp.Partition):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case t.local(rp.Partition) == nil:
				sp.ErrorCode = s.notHostedCode(rt.Topic, rp.Partition)
			default:
				p := t.local(rp.Partition)
				if rp.CurrentLeaderEpoch != -1 {
					sp.ErrorCode = checkLeaderEpoch(p, rp.CurrentLeaderEpoch)
				}
				if _, err := p.leaderCheck(s.cfg.BrokerID); err != nil && sp.ErrorCode == 0 {
					sp.ErrorCode = kerr.NotLeaderForPartition.Code
				}
				if sp.ErrorCode == 0 {
					sp.LeaderEpoch, sp.EndOffset = p.log.Epochs().EndOffsetFor(rp.LeaderEpoch)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{msg: resp}, nil
}
