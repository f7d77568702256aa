package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateTopics: v2-7
//
// Behavior:
// * Names must be 1-249 characters of [a-zA-Z0-9._-], not "." or "..",
//   and must not collide with an existing topic once '.' is read as '_'
//   (INVALID_TOPIC_EXCEPTION). An existing name is TOPIC_ALREADY_EXISTS.
// * NumPartitions must be > 0, or -1 for num.partitions
//   (INVALID_PARTITIONS). ReplicationFactor must be > 0 and no larger than
//   the live brokers (one), or -1 for default.replication.factor
//   (INVALID_REPLICATION_FACTOR).
// * A manual ReplicaAssignment requires NumPartitions and
//   ReplicationFactor -1 (else INVALID_REQUEST), partitions numbered from 0
//   without gaps, and only this broker as replica
//   (INVALID_REPLICA_ASSIGNMENT).
// * Configs use Kafka's topic config names; an unknown name or a bad value
//   is INVALID_CONFIG (see topic_config.go for the supported set).
// * A topic named twice in one request is INVALID_REQUEST.
// * ValidateOnly checks everything and creates nothing.
// * The topic and its configs are persisted in the coordinator before the
//   response; its partition logs are open when the response leaves.
//
// Version notes:
// * v4: -1 for default partitions and replication factor
// * v5: flexible versions; NumPartitions, ReplicationFactor and Configs in
//   the response
// * v7: TopicID in the response

func init() { register(19, 2, 7, handleCreateTopics) }

func handleCreateTopics(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	count := map[string]int{}
	for _, rt := range req.Topics {
		count[rt.Topic]++
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		var err error
		spec := createTopicSpec{name: rt.Topic, partitions: rt.NumPartitions, replFactor: rt.ReplicationFactor, configs: map[string]string{}}
		if count[rt.Topic] > 1 {
			err = newKafkaError(kerr.InvalidRequest, "create topics request contains topic %q more than once", rt.Topic)
		}
		if err == nil && len(rt.ReplicaAssignment) > 0 {
			err = s.checkAssignment(&spec, rt.ReplicaAssignment)
		}
		if err == nil {
			for _, c := range rt.Configs {
				if cerr := checkTopicConfig(c.Name, c.Value); cerr != nil {
					err = newKafkaError(kerr.InvalidConfig, "%v", cerr)
					break
				}
				spec.configs[c.Name] = *c.Value
			}
		}
		if err == nil {
			if req.ValidateOnly {
				err = s.checkCreateTopic(&spec)
			} else {
				var t *topicState
				if t, err = s.createTopic(spec); err == nil {
					st.TopicID = t.id
					spec.partitions = int32(len(t.parts))
					if spec.replFactor == -1 {
						spec.replFactor = s.cfg.DefaultReplicationFactor
					}
				}
			}
		}
		if err != nil {
			code, msg := errorCode(err)
			st.ErrorCode = code
			st.ErrorMessage = &msg
		} else if req.Version >= 5 {
			st.NumPartitions = spec.partitions
			st.ReplicationFactor = spec.replFactor
			for _, e := range s.cfg.topicConfigEntries(spec.configs) {
				c := kmsg.NewCreateTopicsResponseTopicConfig()
				v := e.value
				c.Name, c.Value, c.Source = e.name, &v, int8(e.source)
				st.Configs = append(st.Configs, c)
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	return reply{msg: resp}, nil
}

// checkAssignment validates a manual replica assignment and sets the
// spec's partition count and replication factor from it.
func (s *Server) checkAssignment(spec *createTopicSpec, as []kmsg.CreateTopicsRequestTopicReplicaAssignment) error {
	if spec.partitions != -1 || spec.replFactor != -1 {
		return newKafkaError(kerr.InvalidRequest, "both numPartitions or replicationFactor and replicasAssignments were set; both cannot be used at the same time")
	}
	seen := make([]bool, len(as))
	for _, a := range as {
		if a.Partition < 0 || int(a.Partition) >= len(as) || seen[a.Partition] {
			return newKafkaError(kerr.InvalidReplicaAssignment, "partitions should be a consecutive 0-based integer sequence")
		}
		seen[a.Partition] = true
		if len(a.Replicas) == 0 {
			return newKafkaError(kerr.InvalidReplicaAssignment, "partition %d has no replicas", a.Partition)
		}
		if len(a.Replicas) != len(as[0].Replicas) {
			return newKafkaError(kerr.InvalidReplicaAssignment, "all partitions should have the same number of replicas")
		}
		for _, b := range a.Replicas {
			if b != s.cfg.BrokerID {
				return newKafkaError(kerr.InvalidReplicaAssignment, "broker %d in the assignment of partition %d is not a live broker", b, a.Partition)
			}
		}
		if len(a.Replicas) > 1 {
			return newKafkaError(kerr.InvalidReplicaAssignment, "partition %d names broker %d more than once", a.Partition, s.cfg.BrokerID)
		}
	}
	spec.partitions = int32(len(as))
	spec.replFactor = int16(len(as[0].Replicas))
	return nil
}
