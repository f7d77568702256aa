package broker

import (
	"fmt"
	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/broker/sharestate"
	"github.com/stratastream/strata/coord"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FindCoordinator: v0-6
//
// Behavior:
// * Key type 0 (group, the only type before v1): the leader of the
//   group's partition of __consumer_offsets (Kafka's hash of the group id
//   modulo the partition count), at its advertised address. The topic is
//   created by the first FindCoordinator in a cluster that lacks it, which
//   answers COORDINATOR_NOT_AVAILABLE, as Kafka, so that the client asks
//   again once the leaders have loaded their partitions. Any
//   group id is accepted, including "" (OffsetCommit and OffsetFetch
//   accept it, as in Kafka). COORDINATOR_NOT_AVAILABLE while the broker
//   shuts down, while the partition has no live leader, or when it failed
//   to load on this broker, its leader.
// * Key type 1 (transaction): the leader of the transactional id's
//   partition of __transaction_state (the same hash modulo
//   transaction.state.log.num.partitions), which the first such
//   FindCoordinator creates (txn_coordinator.go). Errors as for groups.
// * Key type 2 (share coordinator, KIP-932) from v6: the key is a share
//   partition's "group:topicId:partition"; the answer is the leader of
//   its partition of __share_group_state (Kafka's hash of the key modulo
//   share.coordinator.state.topic.num.partitions), which the first such
//   FindCoordinator creates (share_coordinator.go); a key that is not of
//   that form is INVALID_REQUEST. Errors as for groups;
//   CLUSTER_AUTHORIZATION_FAILED without CLUSTER_ACTION on the cluster
//   (with an authorizer), as Kafka.
// * Key type 2 before v6, and any other key type: INVALID_REQUEST, as
//   Kafka answers an unknown coordinator type.
// * v4 (KIP-699) batches keys: each key gets its own entry with its own
//   error; the top-level fields stay empty. Before v4 the answer is in the
//   top-level fields.
// * On error the node is Kafka's "no node": id -1, host "", port -1.
// * Authorization (with an authorizer, checked first, as Kafka): a group
//   key needs DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED), a
//   transaction key DESCRIBE on the transactional id
//   (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
//
// Version notes:
// * v1: CoordinatorType, ErrorMessage, ThrottleMillis
// * v3: flexible versions
// * v4: CoordinatorKeys, Coordinators
// * v5: TRANSACTION_ABORTABLE (KIP-890) may be answered; Kafka 3.9 never
//   answers it here, so v5 is answered as v4
// * v6: key type 2, share groups (KIP-932)

func init() { register(10, 0, 6, handleFindCoordinator) }

// Coordinator key types of FindCoordinator.
const (
	coordinatorTypeGroup       int8 = 0
	coordinatorTypeTransaction int8 = 1
	coordinatorTypeShare       int8 = 2
)

// findCoordinatorShareVersion is the first FindCoordinator version with
// the share key type.
const findCoordinatorShareVersion = 6

func handleFindCoordinator(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if req.Version >= 4 {
		for _, key := range req.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key = key
			c.NodeID, c.Host, c.Port, c.ErrorCode, c.ErrorMessage = s.findCoordinator(r, req.Version, req.CoordinatorType, key, r.listenerName())
			resp.Coordinators = append(resp.Coordinators, c)
		}
		return reply{msg: resp}, nil
	}
	resp.NodeID, resp.Host, resp.Port, resp.ErrorCode, resp.ErrorMessage = s.findCoordinator(r, req.Version, req.CoordinatorType, req.CoordinatorKey, r.listenerName())
	return reply{msg: resp}, nil
}

// findCoordinator answers one key: the coordinator's node, host and port
// on listener lis, or "no node" with an error code and message.
func (s *Server) findCoordinator(r *request, version int16, keyType int8, key, lis string) (node int32, host string, port int32, code int16, msg *string) {
	var err error
	var b coord.BrokerInfo
	switch keyType {
	case coordinatorTypeGroup:
		if !s.authorize(r, acl.OpDescribe, acl.Group(key)) {
			err = newKafkaError(kerr.GroupAuthorizationFailed, "not authorized to describe group %q", key)
			break
		}
		b, err = s.groupCoordinator(key)
	case coordinatorTypeTransaction:
		if !s.authorize(r, acl.OpDescribe, acl.TransactionalID(key)) {
			err = newKafkaError(kerr.TransactionalIDAuthorizationFailed, "not authorized to describe transactional id %q", key)
			break
		}
		b, err = s.txnCoordinator(key, true)
	case coordinatorTypeShare:
		switch {
		case version < findCoordinatorShareVersion:
			err = newKafkaError(kerr.InvalidRequest, "share coordinators are asked for from FindCoordinator v%d, not v%d", findCoordinatorShareVersion, version)
		case !s.authorize(r, acl.OpClusterAction, acl.Cluster):
			err = newKafkaError(kerr.ClusterAuthorizationFailed, "not authorized for CLUSTER_ACTION on the cluster")
		default:
			if _, perr := sharestate.ParseCoordinatorKey(key); perr != nil {
				err = newKafkaError(kerr.InvalidRequest, "%v", perr)
				break
			}
			b, _, err = s.shareCoordinator(key)
		}
	default:
		err = newKafkaError(kerr.InvalidRequest, "unknown coordinator type %d", keyType)
	}
	if err != nil {
		c, m := errorCode(err)
		return -1, "", -1, c, &m
	}
	host, port, ok := endpointFor(b, lis)
	if !ok {
		m := fmt.Sprintf("the coordinator, broker %d, has no listener %s", b.ID, lis)
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code, &m
	}
	return b.ID, host, port, 0, nil
}
