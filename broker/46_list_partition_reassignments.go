package broker

import (
	"slices"

	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListPartitionReassignments: v0
//
// Behavior:
// * Needs DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
// * Served by any broker from its metadata cache, which holds each
//   partition's reassignment (kept with the topic's assignment in the
//   coordinator).
// * Topics null: every partition being reassigned. Otherwise the named
//   partitions that are being reassigned; the others, and unknown topics
//   and partitions, are left out, as in Kafka.
// * Each partition: its replicas (the full set while it moves: target
//   first, then the original replicas leaving), the replicas being added
//   and those being removed.
//
// Version notes:
// * v0: flexible from the start (KIP-455)

func init() { register(46, 0, 0, handleListPartitionReassignments) }

func handleListPartitionReassignments(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if !s.authorize(r, acl.OpDescribe, acl.Cluster) {
		msg := "not authorized to DESCRIBE the cluster (partition reassignments)"
		resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, &msg
		return reply{msg: resp}, nil
	}
	snap := s.coord.Snapshot()
	want := map[string][]int32{}
	var names []string
	if req.Topics == nil {
		names = snap.TopicNames()
	}
	for _, t := range req.Topics {
		if _, ok := want[t.Topic]; !ok {
			names = append(names, t.Topic)
		}
		want[t.Topic] = append(want[t.Topic], t.Partitions...)
	}
	for _, name := range names {
		ti, ok := snap.Topic(name)
		if !ok {
			continue
		}
		rt := kmsg.NewListPartitionReassignmentsResponseTopic()
		rt.Topic = name
		for i, p := range ti.Partitions {
			if req.Topics != nil && !slices.Contains(want[name], int32(i)) {
				continue
			}
			if !p.Reassigning() {
				continue
			}
			rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			rp.Partition = int32(i)
			rp.Replicas = nonNil(p.Replicas)
			rp.AddingReplicas = nonNil(p.Adding)
			rp.RemovingReplicas = nonNil(p.Removing)
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(rt.Partitions) > 0 {
			resp.Topics = append(resp.Topics, rt)
		}
	}
	return reply{msg: resp}, nil
}

// nonNil returns ids, or an empty list for nil (the arrays are not
// nullable on the wire).
func nonNil(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return slices.Clone(ids)
}
