package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreatePartitions: v0-3
//
// Behavior:
// * Grows a topic to Count partitions; the new partitions are persisted in
//   the coordinator and their logs opened before the response.
// * Count must exceed the current number (INVALID_PARTITIONS); an unknown
//   topic is UNKNOWN_TOPIC_OR_PARTITION; a topic named twice is
//   INVALID_REQUEST.
// * A manual Assignment must list one replica list per new partition, each
//   naming only this broker (INVALID_REPLICA_ASSIGNMENT).
// * __consumer_offsets keeps its partition count (groups are mapped to
//   partitions by it): INVALID_TOPIC_EXCEPTION.
// * ValidateOnly checks and changes nothing.
//
// Version notes:
// * v2: flexible versions

func init() { register(37, 0, 3, handleCreatePartitions) }

func handleCreatePartitions(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	count := map[string]int{}
	for _, rt := range req.Topics {
		count[rt.Topic]++
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		var err error
		switch {
		case count[rt.Topic] > 1:
			err = newKafkaError(kerr.InvalidRequest, "duplicate topic %q in the request", rt.Topic)
		case rt.Assignment != nil:
			err = s.checkNewAssignment(rt)
		}
		if err == nil {
			err = s.addPartitions(rt.Topic, rt.Count, req.ValidateOnly)
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

func (s *Server) checkNewAssignment(rt kmsg.CreatePartitionsRequestTopic) error {
	t := s.topic(rt.Topic)
	if t == nil {
		return newKafkaError(kerr.UnknownTopicOrPartition, "topic %q does not exist", rt.Topic)
	}
	if want := int(rt.Count) - len(t.parts); want > 0 && len(rt.Assignment) != want {
		return newKafkaError(kerr.InvalidReplicaAssignment, "increasing the number of partitions by %d but %d assignments provided", want, len(rt.Assignment))
	}
	for _, a := range rt.Assignment {
		if len(a.Replicas) != 1 || a.Replicas[0] != s.cfg.BrokerID {
			return newKafkaError(kerr.InvalidReplicaAssignment, "replica assignment %v: the only live broker is %d", a.Replicas, s.cfg.BrokerID)
		}
	}
	return nil
}
