package broker

import (
	"context"
	"errors"
	"github.com/stratastream/strata/broker/acl"
	"slices"
	"time"

	"github.com/stratastream/strata/coord"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ElectLeaders: v0-2
//
// Behavior:
// * Served by any broker (clients send it to the controller): the
//   election is made through the coordinator, so it reaches the
//   controller wherever it runs.
// * Preferred (ElectionType 0, and v0): the controller makes each
//   partition's preferred replica (first in its assignment) the leader if
//   it is live and in the ISR, leader epoch + 1. Already leading:
//   ELECTION_NOT_NEEDED; not live or not in sync:
//   PREFERRED_LEADER_NOT_AVAILABLE.
// * Unclean (ElectionType 1): a partition without a live leader gets its
//   first live replica as leader, with an ISR of itself and leader epoch
//   + 1, whatever it lacks of the log (acknowledged records may be lost).
//   It is written by the broker serving the request, with compare-and-set
//   on the partition state like every leadership change, since the
//   controller elects from the ISR by itself. A partition with a live
//   leader: ELECTION_NOT_NEEDED; no live replica:
//   ELIGIBLE_LEADERS_NOT_AVAILABLE.
// * Null topics elect every partition of every topic; then, as in Kafka,
//   partitions that needed no election are left out of the response.
// * Unknown topics and partitions: UNKNOWN_TOPIC_OR_PARTITION. Another
//   ElectionType: INVALID_REQUEST. The coordination service unreachable
//   (or no controller answering within TimeoutMillis):
//   REQUEST_TIMED_OUT for each partition.
// * Authorization (with an authorizer, as Kafka): ALTER on the cluster,
//   else CLUSTER_AUTHORIZATION_FAILED at the top level and on every named
//   partition.
//
// Version notes:
// * v1: ElectionType, top-level ErrorCode
// * v2: flexible versions

func init() { register(43, 0, 2, handleElectLeaders) }

// Election types of ElectLeaders.
const (
	electionPreferred int8 = 0
	electionUnclean   int8 = 1
)

// electLeadersMaxWait bounds the wait for the controller's answer.
const electLeadersMaxWait = 60 * time.Second

func handleElectLeaders(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	all := req.Topics == nil
	var tps []coord.TopicPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tps = append(tps, coord.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	wait := time.Duration(req.TimeoutMillis) * time.Millisecond
	if wait <= 0 || wait > electLeadersMaxWait {
		wait = electLeadersMaxWait
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()

	var results []coord.ElectionResult
	switch {
	case !s.authorize(r, acl.OpAlter, acl.Cluster):
		// Kafka: the top-level error, and on each named partition (none
		// for all partitions, whose names stay undisclosed).
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		if !all {
			results = failAll(nil, tps, newKafkaError(kerr.ClusterAuthorizationFailed, "not authorized to alter the cluster"))
		}
	case req.Version >= 1 && req.ElectionType == electionUnclean:
		results = s.electUnclean(ctx, tps)
	case req.Version == 0 || req.ElectionType == electionPreferred:
		var err error
		if results, err = s.coord.ElectPreferredLeaders(ctx, tps); err != nil {
			results = failAll(s.coord.Snapshot(), tps, err)
		}
	default:
		resp.ErrorCode = kerr.InvalidRequest.Code
		results = failAll(s.coord.Snapshot(), tps, newKafkaError(kerr.InvalidRequest, "unknown election type %d", req.ElectionType))
	}

	byTopic := map[string]int{}
	for _, res := range results {
		code, msg := electionErrorCode(res.Err)
		if all && code == kerr.ElectionNotNeeded.Code {
			continue
		}
		i, ok := byTopic[res.Topic]
		if !ok {
			i = len(resp.Topics)
			byTopic[res.Topic] = i
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = res.Topic
			resp.Topics = append(resp.Topics, rt)
		}
		rp := kmsg.NewElectLeadersResponseTopicPartition()
		rp.Partition, rp.ErrorCode = res.Partition, code
		if code != 0 {
			rp.ErrorMessage = &msg
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	return reply{msg: resp}, nil
}

// failAll gives every requested partition (all of them for nil) err.
func failAll(snap *coord.Snapshot, tps []coord.TopicPartition, err error) []coord.ElectionResult {
	if tps == nil {
		tps = snapshotPartitions(snap)
	}
	out := make([]coord.ElectionResult, len(tps))
	for i, tp := range tps {
		out[i] = coord.ElectionResult{TopicPartition: tp, Err: err}
	}
	return out
}

func snapshotPartitions(snap *coord.Snapshot) []coord.TopicPartition {
	var out []coord.TopicPartition
	for _, name := range snap.TopicNames() {
		for i := range snap.Topics[name].Partitions {
			out = append(out, coord.TopicPartition{Topic: name, Partition: int32(i)})
		}
	}
	return out
}

// electionErrorCode maps an election outcome to a Kafka error code.
func electionErrorCode(err error) (int16, string) {
	switch {
	case err == nil:
		return 0, ""
	case errors.Is(err, coord.ErrElectionNotNeeded):
		return kerr.ElectionNotNeeded.Code, err.Error()
	case errors.Is(err, coord.ErrPreferredLeaderNotAvailable):
		return kerr.PreferredLeaderNotAvailable.Code, err.Error()
	case errors.Is(err, errNoEligibleLeader):
		return kerr.EligibleLeadersNotAvailable.Code, err.Error()
	case errors.Is(err, coord.ErrUnknownTopic), errors.Is(err, coord.ErrUnknownPartition):
		return kerr.UnknownTopicOrPartition.Code, err.Error()
	case errors.Is(err, coord.ErrVersionConflict), errors.Is(err, coord.ErrNotController):
		return kerr.RequestTimedOut.Code, err.Error() + "; retry"
	}
	return errorCode(coordError(err, "leader election"))
}

// errNoEligibleLeader: an unclean election found no live replica.
var errNoEligibleLeader = errors.New("broker: no live replica to elect")

// electUnclean elects a live replica for each partition that has no live
// leader; see the Behavior list.
func (s *Server) electUnclean(ctx context.Context, tps []coord.TopicPartition) []coord.ElectionResult {
	snap := s.coord.Snapshot()
	if tps == nil {
		tps = snapshotPartitions(snap)
	}
	out := make([]coord.ElectionResult, len(tps))
	for i, tp := range tps {
		out[i] = coord.ElectionResult{TopicPartition: tp, Err: s.electUncleanOne(ctx, snap, tp)}
	}
	return out
}

func (s *Server) electUncleanOne(ctx context.Context, snap *coord.Snapshot, tp coord.TopicPartition) error {
	pi, ok := snap.Partition(tp)
	if !ok {
		return coord.ErrUnknownPartition
	}
	st, version, err := s.coord.PartitionState(ctx, tp.Topic, tp.Partition)
	if err != nil {
		return err
	}
	if st.Leader != coord.NoLeader && snap.Live(st.Leader) {
		return coord.ErrElectionNotNeeded
	}
	i := slices.IndexFunc(pi.Replicas, snap.Live)
	if i < 0 {
		return errNoEligibleLeader
	}
	next := st.Clone()
	next.Leader = pi.Replicas[i]
	next.LeaderEpoch++
	next.ISR = []int32{next.Leader}
	if _, err := s.coord.UpdatePartitionState(ctx, tp.Topic, tp.Partition, next, version); err != nil {
		return err
	}
	s.log.Warn("unclean leader election: an out-of-sync replica leads; records it lacks are lost",
		"partition", tp.String(), "leader", next.Leader, "leader_epoch", next.LeaderEpoch)
	return nil
}
