package e2e

import (
	"context"
	"encoding/base64"
	"testing"
	"time"

	"github.com/stratastream/strata/segment/poll"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShareCoordinatorKilled: three broker processes, __share_group_state
// with three replicas and min.insync.replicas 2. A share partition's
// state is written to its share coordinator (found with FindCoordinator
// key type 2) one acknowledged record at a time, then the coordinator's
// broker is killed with SIGKILL. The new leader of the state partition
// loads it and answers every acknowledged write: nothing acknowledged is
// lost, and writes go on there.
func TestShareCoordinatorKilled(t *testing.T) {
	c := StartCluster(t, 3,
		"share.coordinator.state.topic.num.partitions=3",
		"share.coordinator.state.topic.replication.factor=3",
		"share.coordinator.state.topic.min.isr=2",
		"share.coordinator.snapshot.update.records.per.snapshot=4")
	md := c.createTopic(t, "shk", 1, 3)
	tid := md.Topics["shk"].ID
	key := "g:" + base64.RawURLEncoding.EncodeToString(tid[:]) + ":0"
	cl := c.Client(t)
	ctx := context.Background()

	coordinator := func(not int32) int32 {
		t.Helper()
		var id int32 = -1
		if !poll.For(60*time.Second, func() bool {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.CoordinatorType, req.CoordinatorKeys = 2, []string{key}
			resp, err := req.RequestWith(ctx, cl)
			if err != nil || resp.Coordinators[0].ErrorCode != 0 || resp.Coordinators[0].NodeID == not {
				return false
			}
			id = resp.Coordinators[0].NodeID
			return true
		}) {
			t.Fatalf("no share coordinator for %s (other than %d)", key, not)
		}
		return id
	}
	// send sends req to broker id until its share partition's code is not
	// a coordinator's retriable one, and returns that code.
	send := func(id int32, req kmsg.Request, code func(kmsg.Response) int16) (kmsg.Response, int16) {
		t.Helper()
		var resp kmsg.Response
		got := int16(-1)
		poll.For(60*time.Second, func() bool {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			r, err := cl.Broker(int(id)).Request(rctx, req)
			if err != nil {
				return false
			}
			resp, got = r, code(r)
			return got != kerr.CoordinatorLoadInProgress.Code && got != kerr.NotCoordinator.Code && got != kerr.CoordinatorNotAvailable.Code
		})
		return resp, got
	}
	write := func(id int32, offset int64) int16 {
		req := kmsg.NewPtrWriteShareGroupStateRequest()
		req.GroupID = "g"
		rt := kmsg.NewWriteShareGroupStateRequestTopic()
		rt.TopicID = tid
		rp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
		rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset = 1, 1, 0
		sb := kmsg.NewWriteShareGroupStateRequestTopicPartitionStateBatch()
		sb.FirstOffset, sb.LastOffset, sb.DeliveryState, sb.DeliveryCount = offset, offset, 2 /* acked */, 1
		rp.StateBatches = append(rp.StateBatches, sb)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		_, code := send(id, req, func(r kmsg.Response) int16 {
			return r.(*kmsg.WriteShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode
		})
		return code
	}
	read := func(id int32) kmsg.ReadShareGroupStateResponseTopicPartition {
		req := kmsg.NewPtrReadShareGroupStateRequest()
		req.GroupID = "g"
		rt := kmsg.NewReadShareGroupStateRequestTopic()
		rt.TopicID = tid
		rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
		rp.LeaderEpoch = 1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, code := send(id, req, func(r kmsg.Response) int16 {
			return r.(*kmsg.ReadShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode
		})
		if code != 0 {
			t.Fatalf("read from broker %d: %v", id, kerr.ErrorForCode(code))
		}
		return resp.(*kmsg.ReadShareGroupStateResponse).Topics[0].Partitions[0]
	}
	// acked checks the state holds offsets 0..n-1 acknowledged.
	acked := func(what string, p kmsg.ReadShareGroupStateResponseTopicPartition, n int64) {
		t.Helper()
		if p.StartOffset != 0 || len(p.StateBatches) != 1 || p.StateBatches[0].FirstOffset != 0 || p.StateBatches[0].LastOffset != n-1 {
			t.Fatalf("%s: got start %d batches %+v, want 0..%d acknowledged", what, p.StartOffset, p.StateBatches, n-1)
		}
	}

	old := coordinator(-1)
	const n = 25
	for i := range int64(n) {
		if code := write(old, i); code != 0 {
			t.Fatalf("write %d to broker %d: %v", i, old, kerr.ErrorForCode(code))
		}
	}
	acked("before the kill", read(old), n)

	c.Broker(old).Kill(t)
	next := coordinator(old)
	t.Logf("share coordinator: broker %d killed, now broker %d", old, next)
	acked("after the kill", read(next), n)
	if code := write(next, n); code != 0 {
		t.Fatalf("write to the new coordinator: %v", kerr.ErrorForCode(code))
	}
	acked("after a write to the new coordinator", read(next), n+1)
}
