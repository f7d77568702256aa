package broker

import (
	"context"
	"errors"
	"time"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/coord"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterPartitionReassignments: v0-1
//
// Behavior:
// * Needs ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED at the
//   top and on every partition.
// * Served by any broker (clients send it to the controller): the change
//   is written to the topic's assignment in the coordinator, where the
//   controller, wherever it runs, picks it up (coord/reassignment.go has
//   the sequence). The answer says the reassignment is stored, not done;
//   ListPartitionReassignments shows it until it completes.
// * Replicas set: the partition is reassigned to them, replacing a
//   reassignment in progress. Empty, duplicate or negative ids, or a new
//   replica on a broker that is not live: INVALID_REPLICA_ASSIGNMENT.
// * Replicas null: the reassignment in progress is cancelled, the
//   partition returns to its original replicas; none in progress:
//   NO_REASSIGNMENT_IN_PROGRESS.
// * A change (cancel or new target) whose replicas would keep none of the
//   partition's in-sync replicas: INVALID_REPLICA_ASSIGNMENT, unless
//   unclean.leader.election.enable holds for the topic (Kafka refuses
//   such a cancel the same way).
// * Unknown topics and partitions (and topics being deleted):
//   UNKNOWN_TOPIC_OR_PARTITION. The coordination service unreachable:
//   REQUEST_TIMED_OUT for each partition (the outcome is unknown; list to
//   see).
// * v1, AllowReplicationFactorChange false: a target whose length is not
//   the partition's replication factor is INVALID_REPLICA_ASSIGNMENT.
//
// Version notes:
// * v0: flexible from the start (KIP-455)
// * v1: AllowReplicationFactorChange (KIP-860)

func init() { register(45, 0, 1, handleAlterPartitionReassignments) }

// alterReassignmentsMaxWait bounds the coordinator writes of one request.
const alterReassignmentsMaxWait = 60 * time.Second

func handleAlterPartitionReassignments(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	if !s.authorize(r, acl.OpAlter, acl.Cluster) {
		// As Kafka: the error at the top and on every partition.
		msg := "not authorized to ALTER the cluster (partition reassignments)"
		resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, &msg
		for _, t := range req.Topics {
			rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.ErrorMessage = p.Partition, kerr.ClusterAuthorizationFailed.Code, &msg
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return reply{msg: resp}, nil
	}
	wait := time.Duration(req.TimeoutMillis) * time.Millisecond
	if wait <= 0 || wait > alterReassignmentsMaxWait {
		wait = alterReassignmentsMaxWait
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()

	snap := s.coord.Snapshot()
	checkRF := req.Version >= 1 && !req.AllowReplicationFactorChange
	var changes []coord.ReassignmentChange
	type slot struct{ topic, part int }
	var slots []slot            // changes[i] answers resp.Topics[slots[i].topic].Partitions[slots[i].part]
	results := map[slot]error{} // refused here, before the coordinator
	for ti, t := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for pi, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
			sl := slot{ti, pi}
			if checkRF && p.Replicas != nil {
				if cur, ok := snap.Partition(coord.TopicPartition{Topic: t.Topic, Partition: p.Partition}); ok && len(cur.OriginalReplicas()) != len(p.Replicas) {
					results[sl] = newKafkaError(kerr.InvalidReplicaAssignment, "the replication factor would change from %d to %d", len(cur.OriginalReplicas()), len(p.Replicas))
					continue
				}
			}
			unclean := s.cfg.TopicDefaults[coord.UncleanConfig] == "true"
			if ti, ok := snap.Topic(t.Topic); ok {
				unclean = ti.UncleanLeaderElection(unclean)
			}
			changes = append(changes, coord.ReassignmentChange{
				TopicPartition: coord.TopicPartition{Topic: t.Topic, Partition: p.Partition},
				Target:         p.Replicas,
				AllowUnclean:   unclean,
			})
			slots = append(slots, sl)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(changes) > 0 {
		for i, err := range s.coord.AlterPartitionReassignments(ctx, changes) {
			results[slots[i]] = err
			if err == nil {
				s.log.Info("partition reassignment stored", "partition", changes[i].TopicPartition.String(),
					"target", changes[i].Target, "cancel", changes[i].Target == nil)
			}
		}
	}
	for sl, err := range results {
		code, msg := reassignmentErrorCode(err)
		rp := &resp.Topics[sl.topic].Partitions[sl.part]
		rp.ErrorCode = code
		if code != 0 {
			rp.ErrorMessage = &msg
		}
	}
	return reply{msg: resp}, nil
}

// reassignmentErrorCode maps a reassignment outcome to a Kafka error code.
func reassignmentErrorCode(err error) (int16, string) {
	switch {
	case err == nil:
		return 0, ""
	case errors.Is(err, coord.ErrNoReassignmentInProgress):
		return kerr.NoReassignmentInProgress.Code, err.Error()
	case errors.Is(err, coord.ErrUnknownPartition):
		return kerr.UnknownTopicOrPartition.Code, err.Error()
	}
	return errorCode(coordError(err, "partition reassignment"))
}
