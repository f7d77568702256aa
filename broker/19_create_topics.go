package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreateTopics: v0-7
//
// Behavior:
// * Names must be 1-249 characters of [a-zA-Z0-9._-], not "." or "..",
//   and must not collide with an existing topic once '.' is read as '_'
//   (INVALID_TOPIC_EXCEPTION). An existing name is TOPIC_ALREADY_EXISTS.
// * NumPartitions must be > 0, or -1 for num.partitions
//   (INVALID_PARTITIONS). ReplicationFactor must be > 0 and no larger than
//   the live brokers, or -1 for default.replication.factor
//   (INVALID_REPLICATION_FACTOR).
// * Replicas are assigned as Kafka does (coord.AssignReplicas): preferred
//   leaders round-robin from a random broker so leaders spread evenly,
//   followers shifted, and with broker.rack on every broker a partition's
//   replicas on distinct racks. Each partition's first live replica
//   leads, with the live replicas as ISR, at leader epoch 0.
// * A manual ReplicaAssignment requires NumPartitions and
//   ReplicationFactor -1 (else INVALID_REQUEST), partitions numbered from 0
//   without gaps, the same number of distinct replicas for each, and only
//   live brokers (INVALID_REPLICA_ASSIGNMENT).
// * Configs use Kafka's topic config names; an unknown name or a bad value
//   is INVALID_CONFIG (see topic_config.go for the supported set).
// * A topic named twice in one request is INVALID_REQUEST.
// * A request creating more than strata.max.partitions.per.request
//   partitions over all its topics is refused for every topic, and a
//   topic that would put more than strata.max.broker.partitions replicas
//   on a broker is refused, both with POLICY_VIOLATION
//   (partition_limits.go); nothing sized by the request is allocated
//   before these checks.
// * ValidateOnly checks everything and creates nothing.
// * The topic, its assignment and configs are persisted in the
//   coordinator (ZooKeeper, or the embedded file) before the response;
//   this broker's replicas are open when the response leaves, the other
//   brokers open theirs when their metadata watches fire.
// * Authorization (with an authorizer, as Kafka): CREATE on the cluster or
//   on the topic, else TOPIC_AUTHORIZATION_FAILED (after the duplicate
//   check); a created topic's configs (v5+) are answered only with
//   DESCRIBE_CONFIGS on it, else TopicConfigErrorCode is
//   TOPIC_AUTHORIZATION_FAILED.
//
// Version notes:
// * v0: no ValidateOnly; v1: ValidateOnly and ErrorMessage; v2:
//   ThrottleMillis
// * v4: -1 for default partitions and replication factor (clients check
//   the version; the broker accepts -1 in every version, as Kafka does)
// * v5: flexible versions; NumPartitions, ReplicationFactor and Configs in
//   the response
// * v7: TopicID in the response

func init() { register(19, 0, 7, handleCreateTopics) }

func handleCreateTopics(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	count := map[string]int{}
	var total int64 // partitions the request would create
	for _, rt := range req.Topics {
		count[rt.Topic]++
		switch {
		case len(rt.ReplicaAssignment) > 0:
			total += int64(len(rt.ReplicaAssignment))
		case rt.NumPartitions == -1:
			total += int64(s.cfg.NumPartitions)
		case rt.NumPartitions > 0:
			total += int64(rt.NumPartitions)
		}
	}
	// Checked before anything is sized by the request.
	limitErr := s.partitionsPerRequestError(total)
	mayCreate := s.topicAuthorizer(r, acl.OpCreate)
	if s.authorize(r, acl.OpCreate, acl.Cluster) {
		mayCreate = func(string) bool { return true }
	}
	mayDescribeConfigs := s.topicAuthorizer(r, acl.OpDescribeConfigs)
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		var err error
		spec := createTopicSpec{name: rt.Topic, partitions: rt.NumPartitions, replFactor: rt.ReplicationFactor, configs: map[string]string{}}
		if count[rt.Topic] > 1 {
			err = newKafkaError(kerr.InvalidRequest, "create topics request contains topic %q more than once", rt.Topic)
		} else if !mayCreate(rt.Topic) {
			err = newKafkaError(kerr.TopicAuthorizationFailed, "not authorized to create topic %q (CREATE on the cluster or the topic)", rt.Topic)
		}
		if err == nil {
			err = limitErr
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
				err = s.checkCreateTopic(&spec, s.coord.Snapshot())
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
			if !mayDescribeConfigs(rt.Topic) {
				// Kafka: created, but its configs are not shown.
				st.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
				resp.Topics = append(resp.Topics, st)
				continue
			}
			for _, e := range s.topicConfigEntries(spec.configs) {
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

// checkAssignment validates the form of a manual replica assignment and
// sets the spec's assignment, partition count and replication factor
// from it; checkCreateTopic checks its brokers are live.
func (s *Server) checkAssignment(spec *createTopicSpec, as []kmsg.CreateTopicsRequestTopicReplicaAssignment) error {
	if spec.partitions != -1 || spec.replFactor != -1 {
		return newKafkaError(kerr.InvalidRequest, "both numPartitions or replicationFactor and replicasAssignments were set; both cannot be used at the same time")
	}
	asg := make([][]int32, len(as))
	for _, a := range as {
		if a.Partition < 0 || int(a.Partition) >= len(as) || asg[a.Partition] != nil {
			return newKafkaError(kerr.InvalidReplicaAssignment, "partitions should be a consecutive 0-based integer sequence")
		}
		if len(a.Replicas) == 0 {
			return newKafkaError(kerr.InvalidReplicaAssignment, "partition %d has no replicas", a.Partition)
		}
		if len(a.Replicas) != len(as[0].Replicas) {
			return newKafkaError(kerr.InvalidReplicaAssignment, "all partitions should have the same number of replicas")
		}
		for j, b := range a.Replicas {
			if slices.Contains(a.Replicas[:j], b) {
				return newKafkaError(kerr.InvalidReplicaAssignment, "partition %d names broker %d more than once", a.Partition, b)
			}
		}
		asg[a.Partition] = slices.Clone(a.Replicas)
	}
	spec.assignment = asg
	spec.partitions = int32(len(as))
	spec.replFactor = int16(len(as[0].Replicas))
	return nil
}
