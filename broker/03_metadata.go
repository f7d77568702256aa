package broker

import (
	"github.com/stratastream/strata/coord"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metadata: v0-12
//
// Behavior:
// * Brokers: this broker at its advertised address; it is also the
//   controller. The cluster ID is the one generated when the data
//   directory was first used.
// * Topics: all of them for a null list (v1+) or an empty one (v0);
//   otherwise those named, by name or (v10+) by topic ID. Topic IDs are
//   the random UUIDs stored with each topic.
// * An unknown topic is created with num.partitions when
//   auto.create.topics.enable is on and the request allows it
//   (AllowAutoTopicCreation, v4+; always before v4), and answered with its
//   partitions at once; else UNKNOWN_TOPIC_OR_PARTITION. An illegal name is
//   INVALID_TOPIC_EXCEPTION, an unknown ID UNKNOWN_TOPIC_ID.
// * __consumer_offsets is reported with IsInternal (v1+).
// * Every partition is led by this broker, with replicas and ISR [this
//   broker] and the partition's leader epoch.
// * Authorized operations (v8+), when asked for, are all operations: there
//   is no authorizer.
//
// Version notes:
// * v1: IsInternal, ControllerID, null topics for all
// * v2: ClusterID
// * v4: AllowAutoTopicCreation
// * v7: LeaderEpoch
// * v8: authorized operations
// * v9: flexible versions
// * v10: TopicID
// * v12: topics by ID, null topic names

func init() { register(3, 0, 12, handleMetadata) }

// Authorized-operation bit sets reported without an authorizer: topic
// READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS,
// ALTER_CONFIGS; cluster CREATE, ALTER, DESCRIBE, CLUSTER_ACTION,
// DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE.
const (
	topicAuthorizedOps   int32 = 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11
	clusterAuthorizedOps int32 = 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12
	opsNotRequested      int32 = -2147483648
)

func handleMetadata(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	for _, b := range s.meta.Brokers() {
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port, mb.Rack = b.ID, b.Host, b.Port, b.Rack
		resp.Brokers = append(resp.Brokers, mb)
	}
	cid := s.meta.ClusterID()
	resp.ClusterID = &cid
	resp.ControllerID = s.meta.Controller()
	resp.AuthorizedOperations = opsNotRequested
	if req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = clusterAuthorizedOps
	}

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, t := range s.topicsSorted() {
			resp.Topics = append(resp.Topics, s.metadataTopic(t, req))
		}
		return reply{msg: resp}, nil
	}
	autoCreate := req.Version < 4 || req.AllowAutoTopicCreation
	for _, rt := range req.Topics {
		var t *topicState
		var err error
		switch {
		case rt.Topic == nil && rt.TopicID != [16]byte{}:
			if t = s.topicByID(coord.TopicID(rt.TopicID)); t == nil {
				err = newKafkaError(kerr.UnknownTopicID, "no topic with id %s", coord.TopicID(rt.TopicID))
			}
		case rt.Topic == nil:
			err = newKafkaError(kerr.InvalidRequest, "topic with neither name nor id")
		default:
			if t = s.topic(*rt.Topic); t == nil {
				if err = validTopicName(*rt.Topic); err == nil {
					if autoCreate {
						t, err = s.autoCreateTopic(*rt.Topic)
					} else {
						err = newKafkaError(kerr.UnknownTopicOrPartition, "topic %q does not exist", *rt.Topic)
					}
				}
			}
		}
		if err != nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = rt.Topic
			mt.TopicID = rt.TopicID
			mt.ErrorCode, _ = errorCode(err)
			mt.AuthorizedOperations = opsNotRequested
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		resp.Topics = append(resp.Topics, s.metadataTopic(t, req))
	}
	return reply{msg: resp}, nil
}

func (s *Server) metadataTopic(t *topicState, req *kmsg.MetadataRequest) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.name
	mt.Topic = &name
	mt.TopicID = t.id
	mt.IsInternal = isInternalTopic(t.name)
	mt.AuthorizedOperations = opsNotRequested
	if req.IncludeTopicAuthorizedOperations {
		mt.AuthorizedOperations = topicAuthorizedOps
	}
	id := s.cfg.BrokerID
	for _, p := range t.parts {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = p.index
		mp.Leader = id
		mp.LeaderEpoch = p.leaderEpoch
		mp.Replicas = []int32{id}
		mp.ISR = []int32{id}
		mp.OfflineReplicas = []int32{}
		mt.Partitions = append(mt.Partitions, mp)
	}
	if mt.Partitions == nil {
		mt.Partitions = []kmsg.MetadataResponseTopicPartition{}
	}
	return mt
}
