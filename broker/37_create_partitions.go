package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreatePartitions: v0-3
//
// Behavior:
// * Grows a topic to Count partitions; the new partitions are persisted in
//   the coordinator before the response, and this broker's replicas of
//   them opened. Their replicas continue the topic's assignment
//   (coord.AssignReplicas from the topic's start broker), with the topic's
//   replication factor, which must not exceed the live brokers
//   (INVALID_REPLICATION_FACTOR).
// * Count must exceed the current number (INVALID_PARTITIONS); an unknown
//   topic is UNKNOWN_TOPIC_OR_PARTITION; a topic named twice is
//   INVALID_REQUEST.
// * A manual Assignment must list one replica list per new partition, each
//   with the topic's replication factor of distinct live brokers
//   (INVALID_REPLICA_ASSIGNMENT).
// * __consumer_offsets keeps its partition count (groups are mapped to
//   partitions by it): INVALID_TOPIC_EXCEPTION.
// * A request adding more than strata.max.partitions.per.request
//   partitions over all its topics is refused for every topic, and an
//   addition that would put more than strata.max.broker.partitions
//   replicas on a broker is refused, both with POLICY_VIOLATION
//   (partition_limits.go), before anything sized by the request is
//   allocated.
// * ValidateOnly checks and changes nothing.
// * Authorization (with an authorizer, as Kafka): ALTER on the topic, else
//   TOPIC_AUTHORIZATION_FAILED (after the duplicate check).
//
// Version notes:
// * v2: flexible versions

func init() { register(37, 0, 3, handleCreatePartitions) }

func handleCreatePartitions(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	count := map[string]int{}
	snap := s.coord.Snapshot()
	var total int64 // partitions the request would add
	for _, rt := range req.Topics {
		count[rt.Topic]++
		if t, ok := snap.Topic(rt.Topic); ok {
			total += max(int64(rt.Count)-int64(len(t.Partitions)), 0)
		}
	}
	// Checked before anything is sized by the request.
	limitErr := s.partitionsPerRequestError(total)
	mayAlter := s.topicAuthorizer(r, acl.OpAlter)
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		var err error
		var asg [][]int32
		if count[rt.Topic] > 1 {
			err = newKafkaError(kerr.InvalidRequest, "duplicate topic %q in the request", rt.Topic)
		} else if !mayAlter(rt.Topic) {
			err = newKafkaError(kerr.TopicAuthorizationFailed, "not authorized to alter topic %q", rt.Topic)
		} else if limitErr != nil {
			err = limitErr
		} else if rt.Assignment != nil {
			asg = make([][]int32, len(rt.Assignment))
			for i, a := range rt.Assignment {
				asg[i] = a.Replicas
			}
		}
		if err == nil {
			err = s.addPartitions(rt.Topic, rt.Count, asg, req.ValidateOnly)
		}
		if err != nil {
			code, msg := errorCode(err)
			st.ErrorCode = code
			st.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{msg: resp}, nil
}
