package broker

import (
	"slices"

	"github.com/stratastream/strata/broker/acl"
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
// * Authorization (with an authorizer; Kafka's rules): all topics lists
//   only those the principal may DESCRIBE; a named topic it may not
//   DESCRIBE is TOPIC_AUTHORIZATION_FAILED whether it exists or not (by
//   ID: the ID is answered, not the name). Auto-creation also needs CREATE
//   on the cluster or the topic, else TOPIC_AUTHORIZATION_FAILED.
// * Authorized operations (v8+), when asked for: the topic's operations
//   the principal is allowed (every one without an authorizer); the
//   cluster's (v8-10) when it may DESCRIBE the cluster, else 0.
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

// opsNotRequested is the authorized-operations field's default,
// Integer.MIN_VALUE: not asked for (or, for a topic, not authorized).
const opsNotRequested int32 = -2147483648

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
	if req.IncludeClusterAuthorizedOperations && req.Version <= 10 {
		resp.AuthorizedOperations = 0
		if s.authorize(r, acl.OpDescribe, acl.Cluster) {
			resp.AuthorizedOperations = s.authorizedOperations(r, acl.Cluster)
		}
	}
	mayDescribe := s.topicAuthorizer(r, acl.OpDescribe)
	topicOps := func(mt *kmsg.MetadataResponseTopic) {
		if req.IncludeTopicAuthorizedOperations && mt.Topic != nil {
			mt.AuthorizedOperations = s.authorizedOperations(r, acl.Topic(*mt.Topic))
		}
	}

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	if all {
		for _, name := range snap.TopicNames() {
			if !mayDescribe(name) {
				continue // hidden, as Kafka lists only DESCRIBE-able topics
			}
			mt := metadataTopic(snap, snap.Topics[name], req, lis)
			topicOps(&mt)
			resp.Topics = append(resp.Topics, mt)
		}
		return reply{msg: resp}, nil
	}
	autoCreate := (req.Version < 4 || req.AllowAutoTopicCreation) && s.cfg.AutoCreateTopics
	for _, rt := range req.Topics {
		var t *coord.TopicInfo
		var err error
		// described is whether the error answer may carry the topic's
		// authorized operations: the principal may DESCRIBE it.
		described, createDenied := false, false
		switch {
		case rt.Topic == nil && rt.TopicID != [16]byte{}:
			var ok bool
			if t, ok = snap.TopicByID(coord.TopicID(rt.TopicID)); !ok {
				err = newKafkaError(kerr.UnknownTopicID, "no topic with id %s", coord.TopicID(rt.TopicID))
			} else if !mayDescribe(t.Name) {
				// Topic IDs are not secret (Kafka): the ID is answered, not the name.
				err = newKafkaError(kerr.TopicAuthorizationFailed, "not authorized to describe topic id %s", coord.TopicID(rt.TopicID))
				t = nil
			}
		case rt.Topic == nil:
			err = newKafkaError(kerr.InvalidRequest, "topic with neither name nor id")
		case !mayDescribe(*rt.Topic):
			// Checked before existence, which stays undisclosed.
			err = newKafkaError(kerr.TopicAuthorizationFailed, "not authorized to describe topic %q", *rt.Topic)
		default:
			described = true
			var ok bool
			if t, ok = snap.Topic(*rt.Topic); !ok {
				if err = validTopicName(*rt.Topic); err == nil {
					switch {
					case autoCreate && !s.mayCreateTopic(r, *rt.Topic):
						described, createDenied = false, true
						err = newKafkaError(kerr.TopicAuthorizationFailed, "not authorized to create topic %q (CREATE on the cluster or the topic)", *rt.Topic)
					case autoCreate:
						if _, err = s.autoCreateTopic(*rt.Topic); err == nil {
							snap = s.coord.Snapshot()
							if t, ok = snap.Topic(*rt.Topic); !ok {
								err = newKafkaError(kerr.UnknownTopicOrPartition, "topic %q was deleted right after its creation", *rt.Topic)
							}
						}
					default:
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
			if described {
				topicOps(&mt)
			}
			if createDenied {
				mt.IsInternal = isInternalTopic(*rt.Topic)
			}
			if mt.Partitions == nil {
				mt.Partitions = []kmsg.MetadataResponseTopicPartition{}
			}
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		mt := metadataTopic(snap, t, req, lis)
		topicOps(&mt)
		resp.Topics = append(resp.Topics, mt)
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
