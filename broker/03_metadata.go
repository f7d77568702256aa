package broker

import (
	"slices"

	"github.com/stratastream/strata/coord"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Metadata: v0-12
//
// Behavior:
// * Answers from this broker's metadata cache: the coordinator's snapshot,
//   fed by ZooKeeper watches (or the embedded coordinator). While
//   ZooKeeper is unreachable it is the last known state.
// * Brokers: every live (registered) broker at its advertised address,
//   with its rack; ControllerID the elected controller (-1 while there is
//   none); the cluster ID, created once for the cluster.
// * Topics: all of them for a null list (v1+) or an empty one (v0);
//   otherwise those named, by name or (v10+) by topic ID. Topic IDs are
//   the random UUIDs stored with each topic.
// * An unknown topic is created (with num.partitions and
//   default.replication.factor) when auto.create.topics.enable is on and
//   the request allows it (AllowAutoTopicCreation, v4+; always before v4),
//   and answered with its partitions at once; else
//   UNKNOWN_TOPIC_OR_PARTITION. An illegal name is
//   INVALID_TOPIC_EXCEPTION, an unknown ID UNKNOWN_TOPIC_ID.
// * __consumer_offsets is reported with IsInternal (v1+).
// * Per partition: the leader, leader epoch, replicas (preferred leader
//   first), ISR and offline replicas (replicas whose broker is not live).
//   A partition without a live leader is LEADER_NOT_AVAILABLE with leader
//   -1, as Kafka answers, so clients wait and ask again.
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
	snap := s.coord.Snapshot()
	lis := r.listenerName()
	for _, b := range snap.Brokers {
		host, port, ok := endpointFor(b, lis)
		if !ok {
			continue // not reachable on this listener
		}
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port, mb.Rack = b.ID, host, port, rackOf(b)
		resp.Brokers = append(resp.Brokers, mb)
	}
	cid := snap.ClusterID
	resp.ClusterID = &cid
	resp.ControllerID = snap.Controller.ID
	resp.AuthorizedOperations = opsNotRequested
	if req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = clusterAuthorizedOps
	}

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, name := range snap.TopicNames() {
			resp.Topics = append(resp.Topics, metadataTopic(snap, snap.Topics[name], req, lis))
		}
		return reply{msg: resp}, nil
	}
	autoCreate := req.Version < 4 || req.AllowAutoTopicCreation
	for _, rt := range req.Topics {
		var t *coord.TopicInfo
		var err error
		switch {
		case rt.Topic == nil && rt.TopicID != [16]byte{}:
			var ok bool
			if t, ok = snap.TopicByID(coord.TopicID(rt.TopicID)); !ok {
				err = newKafkaError(kerr.UnknownTopicID, "no topic with id %s", coord.TopicID(rt.TopicID))
			}
		case rt.Topic == nil:
			err = newKafkaError(kerr.InvalidRequest, "topic with neither name nor id")
		default:
			var ok bool
			if t, ok = snap.Topic(*rt.Topic); !ok {
				if err = validTopicName(*rt.Topic); err == nil {
					if autoCreate {
						if _, err = s.autoCreateTopic(*rt.Topic); err == nil {
							snap = s.coord.Snapshot()
							if t, ok = snap.Topic(*rt.Topic); !ok {
								err = newKafkaError(kerr.UnknownTopicOrPartition, "topic %q was deleted right after its creation", *rt.Topic)
							}
						}
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
		resp.Topics = append(resp.Topics, metadataTopic(snap, t, req, lis))
	}
	return reply{msg: resp}, nil
}

// rackOf is a broker's rack as Kafka responses carry it: null for none.
func rackOf(b coord.BrokerInfo) *string {
	if b.Rack == "" {
		return nil
	}
	r := b.Rack
	return &r
}

// metadataTopic is t's Metadata answer for a client on listener lis: a
// partition whose leader has no address on lis has no leader there
// (LISTENER_NOT_FOUND from v6, LEADER_NOT_AVAILABLE before, as Kafka).
func metadataTopic(snap *coord.Snapshot, t *coord.TopicInfo, req *kmsg.MetadataRequest, lis string) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = isInternalTopic(t.Name)
	mt.AuthorizedOperations = opsNotRequested
	if req.IncludeTopicAuthorizedOperations {
		mt.AuthorizedOperations = topicAuthorizedOps
	}
	for i, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = int32(i)
		mp.Leader = p.State.Leader
		mp.LeaderEpoch = p.State.LeaderEpoch
		if mp.Leader != coord.NoLeader && !snap.Live(mp.Leader) {
			mp.Leader = coord.NoLeader // dead; the controller elects another
		}
		if mp.Leader == coord.NoLeader {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		} else if b, _ := snap.Broker(mp.Leader); !hasEndpoint(b, lis) {
			mp.Leader = coord.NoLeader
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
			if req.Version >= 6 {
				mp.ErrorCode = kerr.ListenerNotFound.Code
			}
		}
		mp.Replicas = slices.Clone(p.Replicas)
		mp.ISR = slices.Clone(p.State.ISR)
		mp.OfflineReplicas = snap.OfflineReplicas(p)
		if mp.OfflineReplicas == nil {
			mp.OfflineReplicas = []int32{}
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	if mt.Partitions == nil {
		mt.Partitions = []kmsg.MetadataResponseTopicPartition{}
	}
	return mt
}
