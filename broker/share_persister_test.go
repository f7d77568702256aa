package broker

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stratastream/strata/broker/sharestate"
	"github.com/stratastream/strata/coord/zktest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// persistCtx bounds one persister call of a test.
func persistCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func initShare(t *testing.T, p sharestate.Persister, group string, topic [16]byte, partition, stateEpoch int32, start int64) int16 {
	t.Helper()
	req := kmsg.NewPtrInitializeShareGroupStateRequest()
	req.GroupID = group
	rt := kmsg.NewInitializeShareGroupStateRequestTopic()
	rt.TopicID = topic
	rp := kmsg.NewInitializeShareGroupStateRequestTopicPartition()
	rp.Partition, rp.StateEpoch, rp.StartOffset = partition, stateEpoch, start
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := p.InitializeShareGroupState(persistCtx(t), req)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// writeShare writes one state batch (first..last, acked, count 1) of a
// share partition and returns its code.
func writeShare(t *testing.T, p sharestate.Persister, group string, topic [16]byte, partition, leaderEpoch int32, start, first, last int64) int16 {
	t.Helper()
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.Version, req.GroupID = 1, group
	rt := kmsg.NewWriteShareGroupStateRequestTopic()
	rt.TopicID = topic
	rp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
	rp.Partition, rp.StateEpoch, rp.LeaderEpoch, rp.StartOffset, rp.DeliveryCompleteCount = partition, 1, leaderEpoch, start, int32(last-start+1)
	sb := kmsg.NewWriteShareGroupStateRequestTopicPartitionStateBatch()
	sb.FirstOffset, sb.LastOffset, sb.DeliveryState, sb.DeliveryCount = first, last, sharestate.Acked, 1
	rp.StateBatches = append(rp.StateBatches, sb)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := p.WriteShareGroupState(persistCtx(t), req)
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

func readShare(t *testing.T, p sharestate.Persister, group string, topic [16]byte, partition int32) kmsg.ReadShareGroupStateResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = group
	rt := kmsg.NewReadShareGroupStateRequestTopic()
	rt.TopicID = topic
	rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch = partition, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := p.ReadShareGroupState(persistCtx(t), req)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return resp.Topics[0].Partitions[0]
}

// wantShare checks a read: code 0, the start offset and one batch.
func wantShare(t *testing.T, what string, got kmsg.ReadShareGroupStateResponseTopicPartition, start, first, last int64) {
	t.Helper()
	if got.ErrorCode != 0 || got.StartOffset != start || len(got.StateBatches) != 1 ||
		got.StateBatches[0].FirstOffset != first || got.StateBatches[0].LastOffset != last || got.StateBatches[0].DeliveryState != sharestate.Acked {
		t.Fatalf("%s: got %v %+v, want start %d and batch %d..%d acked", what, kerr.ErrorForCode(got.ErrorCode), got, start, first, last)
	}
}

var shareTestProps = map[string]string{
	"share.coordinator.state.topic.num.partitions":     "3",
	"share.coordinator.state.topic.replication.factor": "1",
	"share.coordinator.state.topic.min.isr":            "1",
}

// TestSharePersisterOneBroker: the persister of one broker (embedded
// coordinator) creates __share_group_state on first use and initializes,
// writes, reads, summarizes and deletes share partition state; fencing and
// unknown partitions are answered per partition; the state survives a
// restart (replayed from the log).
func TestSharePersisterOneBroker(t *testing.T) {
	props := map[string]string{"log.dirs": t.TempDir(), "share.coordinator.snapshot.update.records.per.snapshot": "2"}
	for k, v := range shareTestProps {
		props[k] = v
	}
	s := startServer(t, props)
	cl := newClient(t, s)
	createTopic(t, cl, "sp", 2, nil)
	tid := [16]byte(s.topic("sp").id)
	p := s.sharePersister

	for part := range int32(2) {
		if code := initShare(t, p, "g", tid, part, 1, 0); code != 0 {
			t.Fatalf("initialize %d: %v", part, kerr.ErrorForCode(code))
		}
	}
	for i := range int64(5) { // updates and snapshots
		if code := writeShare(t, p, "g", tid, 0, 3, i, i, i+4); code != 0 {
			t.Fatalf("write %d: %v", i, kerr.ErrorForCode(code))
		}
	}
	wantShare(t, "read", readShare(t, p, "g", tid, 0), 4, 4, 8)
	if code := writeShare(t, p, "g", tid, 0, 2, -1, 9, 9); code != kerr.FencedLeaderEpoch.Code {
		t.Errorf("older leader epoch: got %v", kerr.ErrorForCode(code))
	}
	if code := writeShare(t, p, "g", [16]byte{0xee}, 0, 3, 0, 0, 0); code != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown topic id: got %v", kerr.ErrorForCode(code))
	}

	sreq := kmsg.NewPtrReadShareGroupStateSummaryRequest()
	sreq.Version, sreq.GroupID = 1, "g"
	st := kmsg.NewReadShareGroupStateSummaryRequestTopic()
	st.TopicID = tid
	sp := kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()
	sp.LeaderEpoch = 3
	st.Partitions = append(st.Partitions, sp)
	sreq.Topics = append(sreq.Topics, st)
	sresp, err := p.ReadShareGroupStateSummary(persistCtx(t), sreq)
	if err != nil {
		t.Fatal(err)
	}
	if got := sresp.Topics[0].Partitions[0]; got.ErrorCode != 0 || got.StartOffset != 4 || got.LeaderEpoch != 3 || got.StateEpoch != 1 || got.DeliveryCompleteCount != 5 {
		t.Errorf("summary: %+v", got)
	}

	dreq := kmsg.NewPtrDeleteShareGroupStateRequest()
	dreq.GroupID = "g"
	dt := kmsg.NewDeleteShareGroupStateRequestTopic()
	dt.TopicID = tid
	dp := kmsg.NewDeleteShareGroupStateRequestTopicPartition()
	dp.Partition = 1
	dt.Partitions = append(dt.Partitions, dp)
	dreq.Topics = append(dreq.Topics, dt)
	if dresp, err := p.DeleteShareGroupState(persistCtx(t), dreq); err != nil || dresp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("delete: %v %+v", err, dresp)
	}

	shutdown(t, s)
	s2 := startServer(t, props)
	wantShare(t, "after a restart", readShare(t, s2.sharePersister, "g", tid, 0), 4, 4, 8)
	if got := readShare(t, s2.sharePersister, "g", tid, 1); got.ErrorCode != 0 || got.StartOffset != -1 || len(got.StateBatches) != 0 {
		t.Errorf("deleted partition after a restart: %+v", got)
	}
}

// TestSharePersisterRoutes: three brokers on a real ZooKeeper,
// __share_group_state with three replicas. State written through broker
// A's persister for a share partition whose coordinator is broker B is
// read back through the third broker; B shuts down without handing its
// leadership over (controlled.shutdown.enable=false: the controller moves
// it when B's registration goes), the new leader of the state partition
// loads it, and A's persister reads it from there.
func TestSharePersisterRoutes(t *testing.T) {
	zks := zktest.Start(t)
	connect := zks.ConnectString(fmt.Sprintf("/strata-share-%d", time.Now().UnixNano()))
	srv := map[int32]*Server{}
	for id := int32(1); id <= 3; id++ {
		srv[id] = startServer(t, map[string]string{
			"broker.id": strconv.Itoa(int(id)), "zookeeper.connect": connect, "offsets.topic.replication.factor": "1",
			"share.coordinator.state.topic.num.partitions": "3", "share.coordinator.state.topic.replication.factor": "3",
			"share.coordinator.state.topic.min.isr": "2", "controlled.shutdown.enable": "false",
		})
	}
	cl := newClient(t, srv[1])
	createAssigned(t, cl, "sr", []int32{1, 2, 3}, nil)
	waitFor(t, "topic sr on broker 1", func() bool { return srv[1].topic("sr") != nil })
	tid := [16]byte(srv[1].topic("sr").id)

	// The first call creates __share_group_state; then pick a group whose
	// share partition's coordinator is not broker 1.
	if code := initShare(t, srv[1].sharePersister, "probe", tid, 0, 1, 0); code != 0 {
		t.Fatalf("initialize probe: %v", kerr.ErrorForCode(code))
	}
	var group string
	var b int32
	for i := range 30 {
		g := fmt.Sprintf("g%d", i)
		ti, _ := srv[1].coord.Snapshot().Topic(sharestate.Topic)
		leader := ti.Partitions[sharestate.PartitionFor(sharestate.Key{GroupID: g, TopicID: tid, Partition: 0}, 3)].State.Leader
		if leader != 1 {
			group, b = g, leader
			break
		}
	}
	if group == "" {
		t.Fatal("every partition of __share_group_state is led by broker 1")
	}
	third := int32(6) - 1 - b
	t.Logf("group %s: coordinator broker %d, reading through broker %d", group, b, third)
	if code := initShare(t, srv[1].sharePersister, group, tid, 0, 1, 0); code != 0 {
		t.Fatalf("initialize: %v", kerr.ErrorForCode(code))
	}
	for i := range int64(3) {
		if code := writeShare(t, srv[1].sharePersister, group, tid, 0, 1, 10*i, 10*i, 10*i+9); code != 0 {
			t.Fatalf("write %d: %v", i, kerr.ErrorForCode(code))
		}
	}
	wantShare(t, "through the third broker", readShare(t, srv[third].sharePersister, group, tid, 0), 20, 20, 29)

	shutdown(t, srv[b])
	wantShare(t, "after the coordinator's shutdown", readShare(t, srv[1].sharePersister, group, tid, 0), 20, 20, 29)
}
