package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeProducers: v0 (KIP-664)
//
// Behavior:
// * For each requested partition that this broker leads, the producers
//   its producer state knows: producer id and epoch, last sequence (-1
//   when the producer only wrote markers or sequence-less batches), last
//   timestamp, the coordinator epoch of its last marker (-1 before one)
//   and the first offset of its open transaction (-1 when none), by
//   producer id.
// * Per partition: UNKNOWN_TOPIC_OR_PARTITION for an unknown topic or
//   partition, NOT_LEADER_OR_FOLLOWER when another broker leads it (or
//   this broker does not host it), KAFKA_STORAGE_ERROR for an offline
//   replica.
// * Authorization (with an authorizer): READ on the topic, else its
//   partitions are TOPIC_AUTHORIZATION_FAILED (checked first), as Kafka.

func init() { register(61, 0, 0, handleDescribeProducers) }

func handleDescribeProducers(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	mayRead := s.topicAuthorizer(r, acl.OpRead)
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		ts := s.topic(rt.Topic)
		for _, index := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = index
			var err error
			var p *partition
			if !mayRead(rt.Topic) {
				err = newKafkaError(kerr.TopicAuthorizationFailed, "not authorized to read topic %q", rt.Topic)
			} else {
				p, _, err = s.leaderPartition(ts, rt.Topic, index)
			}
			if err != nil {
				code, msg := errorCode(err)
				sp.ErrorCode = code
				if msg != "" {
					sp.ErrorMessage = &msg
				}
			} else {
				for _, pi := range p.producers.Describe() {
					ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
					ap.ProducerID, ap.ProducerEpoch = pi.ProducerID, int32(pi.Epoch)
					ap.LastSequence, ap.LastTimestamp = pi.LastSequence, pi.LastTimestamp
					ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pi.CoordinatorEpoch, pi.TxnStartOffset
					sp.ActiveProducers = append(sp.ActiveProducers, ap)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{msg: resp}, nil
}
