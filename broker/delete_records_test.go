package broker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/tiering"
)

// deleteRecordsRaw sends a DeleteRecords of one partition at version v
// over a raw connection to s and returns its result.
func deleteRecordsRaw(t *testing.T, s *Server, v int16, topic string, partition int32, offset int64, timeoutMs int32) kmsg.DeleteRecordsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.Version, req.TimeoutMillis = v, timeoutMs
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = partition, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := dialRaw(t, s).request(1, req).(*kmsg.DeleteRecordsResponse)
	return resp.Topics[0].Partitions[0]
}

// produceN writes n records ("v<i>", 64 bytes each) to partition 0 of
// topic with the client's acks, in batches of 10.
func produceN(t *testing.T, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i += 10 {
		var rs []*kgo.Record
		for j := i; j < min(i+10, from+n); j++ {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(fmt.Sprintf("v%-63d", j))})
		}
		if err := cl.ProduceSync(testCtx(t), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDeleteRecordsReplicated runs kadm's DeleteRecords against a
// two-broker ZooKeeper cluster: the answer comes once the follower's log
// start has moved too (the low watermark), ListOffsets earliest and Fetch
// honour the new start on the leader, and the errors are Kafka's.
func TestDeleteRecordsReplicated(t *testing.T) {
	zk := zktest.Start(t)
	connect := zk.ConnectString("/strata-delete-records")
	var srv []*Server
	for id := 1; id <= 2; id++ {
		srv = append(srv, startServer(t, map[string]string{"broker.id": fmt.Sprint(id), "zookeeper.connect": connect,
			"log.segment.bytes": "1024"}))
	}
	waitFor(t, "both brokers registered", func() bool { return len(srv[0].coord.Snapshot().Brokers) == 2 })
	const topic = "dr"
	cl := newClient(t, srv[0], kgo.RequiredAcks(kgo.AllISRAcks()))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(testCtx(t), 1, 2, map[string]*string{"segment.bytes": kmsg.StringPtr("1024"), "file.delete.delay.ms": kmsg.StringPtr("0")}, topic); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "dr-0 with ISR of two", func() bool {
		p := partitionInfo(srv[0], topic, 0)
		return len(p.State.ISR) == 2 && srv[0].topic(topic) != nil && srv[1].topic(topic) != nil
	})
	produceN(t, cl, topic, 0, 200)
	leaderID := partitionInfo(srv[0], topic, 0).State.Leader
	leader, follower := srv[leaderID-1], srv[2-leaderID]
	lp, fp := leader.topic(topic).local(0), follower.topic(topic).local(0)
	waitFor(t, "follower at the high watermark", func() bool { return fp.log.LogEndOffset() == 200 && fp.log.HighWatermark() == 200 })
	segsBefore := len(fp.log.Segments())

	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 120})
	start := time.Now()
	res, err := adm.DeleteRecords(testCtx(t), offs)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := res.Lookup(topic, 0)
	t.Logf("DeleteRecords to 120 answered in %v", time.Since(start))
	if r.Err != nil || r.LowWatermark != 120 {
		t.Fatalf("DeleteRecords to 120: low watermark %d, %v", r.LowWatermark, r.Err)
	}
	// The answer waited for the follower: its log start is there already.
	if got := fp.log.LogStartOffset(); got != 120 {
		t.Fatalf("follower's log start %d after the answer, want 120", got)
	}
	if got := lp.log.LogStartOffset(); got != 120 {
		t.Fatalf("leader's log start %d, want 120", got)
	}
	if after := len(fp.log.Segments()); after >= segsBefore {
		t.Errorf("follower kept %d segments (had %d): those wholly below 120 were not deleted", after, segsBefore)
	}
	lo, err := adm.ListStartOffsets(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := lo.Lookup(topic, 0); o.Err != nil || o.Offset != 120 {
		t.Fatalf("ListOffsets earliest: %d %v, want 120", o.Offset, o.Err)
	}
	lrc := dialRaw(t, leader)
	if p := lrc.fetch(2, topic, 0, 50, 1<<20); p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LogStartOffset != 120 {
		t.Fatalf("fetch at 50: error %v, log start %d, want OFFSET_OUT_OF_RANGE and 120", kerr.ErrorForCode(p.ErrorCode), p.LogStartOffset)
	}
	if p := lrc.fetch(3, topic, 0, 120, 1<<20); p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
		t.Fatalf("fetch at 120: error %v, %d bytes", kerr.ErrorForCode(p.ErrorCode), len(p.RecordBatches))
	}

	// Each version, on the raw protocol: -1 is the high watermark, a
	// lower offset changes nothing, above the high watermark and on the
	// follower are errors.
	if p := deleteRecordsRaw(t, leader, 0, topic, 0, 100, 10000); p.ErrorCode != 0 || p.LowWatermark != 120 {
		t.Fatalf("v0 to 100 (below the start): %v low watermark %d, want 120", kerr.ErrorForCode(p.ErrorCode), p.LowWatermark)
	}
	if p := deleteRecordsRaw(t, leader, 1, topic, 0, 201, 10000); p.ErrorCode != kerr.OffsetOutOfRange.Code || p.LowWatermark != -1 {
		t.Fatalf("v1 to 201 (above the high watermark 200): %v low watermark %d", kerr.ErrorForCode(p.ErrorCode), p.LowWatermark)
	}
	if p := deleteRecordsRaw(t, leader, 1, topic, 0, -2, 10000); p.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("v1 to -2: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	if p := deleteRecordsRaw(t, follower, 2, topic, 0, 150, 10000); p.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("v2 on the follower: %v, want NOT_LEADER_OR_FOLLOWER", kerr.ErrorForCode(p.ErrorCode))
	}
	if p := deleteRecordsRaw(t, leader, 2, "nope", 0, 1, 10000); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	if p := deleteRecordsRaw(t, leader, 2, topic, 3, 1, 10000); p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown partition: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	var commit kadm.Offsets
	commit.Add(kadm.Offset{Topic: topic, Partition: 0, At: 150, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(testCtx(t), "dr-group", commit); err != nil {
		t.Fatal(err) // creates __consumer_offsets
	}
	if p := deleteRecordsRaw(t, leader, 2, "__consumer_offsets", 0, 0, 10000); p.ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("__consumer_offsets: %v, want INVALID_TOPIC_EXCEPTION", kerr.ErrorForCode(p.ErrorCode))
	}
	produceN(t, cl, topic, 200, 10)
	if p := deleteRecordsRaw(t, leader, 2, topic, 0, -1, 10000); p.ErrorCode != 0 || p.LowWatermark != 210 {
		t.Fatalf("v2 to -1 (the high watermark 210): %v low watermark %d", kerr.ErrorForCode(p.ErrorCode), p.LowWatermark)
	}
	if got := fp.log.LogStartOffset(); got != 210 {
		t.Fatalf("follower's log start %d, want 210", got)
	}

	// The new leader keeps the start: fail over to the follower.
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, []int32{follower.cfg.BrokerID, leader.cfg.BrokerID})
	mustAlter(t, adm, req)
	waitNoReassignment(t, adm, topic, 0)
	elect := kmsg.NewPtrElectLeadersRequest()
	et := kmsg.NewElectLeadersRequestTopic()
	et.Topic, et.Partitions = topic, []int32{0}
	elect.Topics = append(elect.Topics, et)
	elect.TimeoutMillis = 10000
	if _, err := elect.RequestWith(testCtx(t), cl); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the follower leads dr-0", func() bool { return partitionInfo(srv[0], topic, 0).State.Leader == follower.cfg.BrokerID })
	waitFor(t, "earliest 210 from the new leader", func() bool {
		lo, err := adm.ListStartOffsets(testCtx(t), topic)
		o, _ := lo.Lookup(topic, 0)
		return err == nil && o.Err == nil && o.Offset == 210
	})
	produceN(t, cl, topic, 210, 5)
	if p := deleteRecordsRaw(t, follower, 2, topic, 0, 212, 10000); p.ErrorCode != 0 || p.LowWatermark != 212 {
		t.Fatalf("on the new leader to 212: %v low watermark %d", kerr.ErrorForCode(p.ErrorCode), p.LowWatermark)
	}
	if got := lp.log.LogStartOffset(); got != 212 {
		t.Fatalf("old leader (now follower) log start %d, want 212", got)
	}
	// Nothing acknowledged at or above the low watermark was lost: a
	// consumer from the start reads exactly 212..214, in order.
	got := consumePartition(t, follower, topic, 0, 3)
	for i, v := range got {
		if want := fmt.Sprintf("v%-63d", 212+i); v != want {
			t.Fatalf("record %d after DeleteRecords: %q, want %q", 212+i, strings.TrimSpace(v), strings.TrimSpace(want))
		}
	}
}

// TestDeleteRecordsTimesOut: a live replica that never reports its log
// start (a broker registered in ZooKeeper that never fetches, a bare
// coordinator session) holds the low watermark at -1, and the answer is
// REQUEST_TIMED_OUT with it once TimeoutMillis passes, as Kafka's
// DelayedDeleteRecords answers; once that broker is gone, only live
// replicas count (Kafka's lowWatermarkIfLeader) and the answer is at once.
func TestDeleteRecordsTimesOut(t *testing.T) {
	zk := zktest.Start(t)
	connect := zk.ConnectString("/strata-delete-records-timeout")
	s := startServer(t, map[string]string{"broker.id": "1", "zookeeper.connect": connect, "replica.lag.time.max.ms": "1000"})
	ctx := testCtx(t)
	phantom, err := coord.Open(ctx, coord.Config{ZooKeeperConnect: connect, SessionTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = phantom.Close() })
	if _, err := phantom.Register(ctx, coord.BrokerInfo{ID: 9, Host: "127.0.0.1", Port: 1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "broker 9 registered", func() bool { return s.coord.Snapshot().Live(9) })
	const topic = "drt"
	cl := newClient(t, s, kgo.RequiredAcks(kgo.LeaderAck()))
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{1, 9}
	ct.ReplicaAssignment = append(ct.ReplicaAssignment, ra)
	create.Topics = append(create.Topics, ct)
	create.TimeoutMillis = 10000
	if resp, err := create.RequestWith(ctx, cl); err != nil || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create %s on [1 9]: %v %+v", topic, err, resp)
	}
	waitFor(t, "broker 1 leads drt-0", func() bool {
		return partitionInfo(s, topic, 0).State.Leader == 1 && s.topic(topic) != nil && s.topic(topic).local(0) != nil
	})
	produceN(t, cl, topic, 0, 20)
	lp := s.topic(topic).local(0)
	// acks=1: the high watermark waits for the ISR, which holds broker 9
	// until it is shrunk; the test needs one above 10.
	waitFor(t, "the ISR shrunk to broker 1 and the high watermark at 20", func() bool {
		if st := partitionInfo(s, topic, 0).State; len(st.ISR) == 2 {
			return false
		}
		return lp.log.HighWatermark() == 20
	})
	start := time.Now()
	p := deleteRecordsRaw(t, s, 2, topic, 0, 10, 1500)
	took := time.Since(start)
	t.Logf("answered after %v", took)
	if p.ErrorCode != kerr.RequestTimedOut.Code || p.LowWatermark != -1 {
		t.Fatalf("with a live replica that never reports: %v low watermark %d, want REQUEST_TIMED_OUT and -1", kerr.ErrorForCode(p.ErrorCode), p.LowWatermark)
	}
	if took < 1500*time.Millisecond {
		t.Fatalf("answered after %v, before the request's timeout", took)
	}
	if got := lp.log.LogStartOffset(); got != 10 {
		t.Fatalf("leader's log start %d, want 10 (the move is not undone)", got)
	}
	if err := phantom.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "broker 9 gone", func() bool { return !s.coord.Snapshot().Live(9) })
	if p := deleteRecordsRaw(t, s, 2, topic, 0, 12, 30000); p.ErrorCode != 0 || p.LowWatermark != 12 {
		t.Fatalf("with the replica's broker gone: %v low watermark %d, want 12", kerr.ErrorForCode(p.ErrorCode), p.LowWatermark)
	}
	// Nothing acknowledged at or above the low watermark was lost.
	got := consumePartition(t, s, topic, 0, 8)
	for i, v := range got {
		if want := fmt.Sprintf("v%-63d", 12+i); v != want {
			t.Fatalf("record %d after DeleteRecords: %q, want %q", 12+i, strings.TrimSpace(v), strings.TrimSpace(want))
		}
	}
}

// TestDeleteRecordsTiered moves the log start of a tiered partition below
// its local log: the remote log start moves, the segments wholly below it
// leave the manifest and their objects the bucket (the local-directory
// store), and ListOffsets earliest and Fetch honour it.
func TestDeleteRecordsTiered(t *testing.T) {
	s := startServer(t, tieredProps)
	cl := newClient(t, s)
	const topic, n = "dr-tiered", 1500
	createTopic(t, cl, topic, 1, tieredTopicConfigs)
	produceTiered(t, cl, topic, 0, n)
	p := waitTiered(t, s, topic)
	var m *tiering.Manifest
	// Uploads go on after the produce: wait until the third remote
	// segment is wholly below the local log (which only moves up).
	waitFor(t, "four remote segments, the third below the local log", func() bool {
		m = p.remoteManifest()
		return m != nil && len(m.Segments) >= 4 && p.log.LogStartOffset() >= m.Segments[2].NextOffset
	})
	target := m.Segments[2].BaseOffset + 3
	below := []tiering.RemoteSegment{m.Segments[0], m.Segments[1]}
	kept := m.Segments[2]
	topicID := s.topic(topic).id.String()

	start := time.Now()
	r := deleteRecordsRaw(t, s, 2, topic, 0, target, 30000)
	t.Logf("DeleteRecords to %d (remote) answered in %v", target, time.Since(start))
	if r.ErrorCode != 0 || r.LowWatermark != target {
		t.Fatalf("DeleteRecords to %d: %v low watermark %d", target, kerr.ErrorForCode(r.ErrorCode), r.LowWatermark)
	}
	if m := p.remoteManifest(); m == nil || m.LogStartOffset != target || m.Segments[0].BaseOffset != kept.BaseOffset {
		t.Fatalf("remote manifest after DeleteRecords: %+v", m)
	}
	if off, code := tierListEarliest(t, cl, topic); code != 0 || off != target {
		t.Fatalf("ListOffsets earliest %d (error %d), want %d", off, code, target)
	}
	if fp := fetchRaw(t, cl, topic, 0, target-1, 1<<20); fp.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch at %d: error %v, want OFFSET_OUT_OF_RANGE", target-1, kerr.ErrorForCode(fp.ErrorCode))
	}
	if fp := fetchRaw(t, cl, topic, 0, target, 1<<20); fp.ErrorCode != 0 || len(fp.RecordBatches) == 0 {
		t.Fatalf("fetch at %d: error %v, %d bytes", target, kerr.ErrorForCode(fp.ErrorCode), len(fp.RecordBatches))
	}
	// The objects of the segments wholly below leave the bucket (the
	// topic's file.delete.delay.ms is 0); the segment holding the new
	// start stays.
	waitFor(t, "the objects below the new start deleted", func() bool {
		objs, err := s.tier.store.List(context.Background(), tiering.PartitionPrefix(topic, topicID, 0))
		if err != nil {
			return false
		}
		var names []string
		for _, o := range objs {
			names = append(names, o.Key)
		}
		all := strings.Join(names, "\n")
		for _, seg := range below {
			if strings.Contains(all, seg.ObjectName()) {
				return false
			}
		}
		if !strings.Contains(all, kept.ObjectName()) {
			t.Fatalf("the object of the segment holding the new start (%s) is gone:\n%s", kept.ObjectName(), all)
		}
		return true
	})

	// Into the local log: the local log start moves too.
	local := p.log.LogStartOffset()
	r = deleteRecordsRaw(t, s, 2, topic, 0, local+5, 30000)
	if r.ErrorCode != 0 || r.LowWatermark != local+5 || p.log.LogStartOffset() != local+5 {
		t.Fatalf("DeleteRecords to %d (local): %v low watermark %d, local start %d", local+5, kerr.ErrorForCode(r.ErrorCode), r.LowWatermark, p.log.LogStartOffset())
	}
	if off, code := tierListEarliest(t, cl, topic); code != 0 || off != local+5 {
		t.Fatalf("ListOffsets earliest %d (error %d), want %d", off, code, local+5)
	}
	// The archiver goes on uploading above the new start.
	end := p.remoteManifest()
	produceTiered(t, cl, topic, n, n+500)
	waitFor(t, "uploads above the new start", func() bool {
		m := p.remoteManifest()
		return m != nil && m.LogStartOffset >= local+5 && (end == nil || m.EndOffset() > end.EndOffset()) && m.EndOffset() > int64(n)
	})
	consumeFrom := dialRaw(t, s)
	if fp := consumeFrom.fetch(1, topic, 0, local+5, 1<<20); fp.ErrorCode != 0 || len(fp.RecordBatches) == 0 {
		t.Fatalf("fetch at the new start %d: error %v, %d bytes", local+5, kerr.ErrorForCode(fp.ErrorCode), len(fp.RecordBatches))
	}
}

// TestDeleteRecordsCleanupPolicy: a topic whose cleanup.policy lacks
// delete refuses DeleteRecords (Kafka's POLICY_VIOLATION), by override or
// by the broker's default.
func TestDeleteRecordsCleanupPolicy(t *testing.T) {
	s := &Server{cfg: Config{TopicDefaults: map[string]string{"cleanup.policy": "delete"}}}
	for _, c := range []struct {
		overrides map[string]string
		def       string
		want      bool
	}{
		{nil, "delete", true},
		{map[string]string{"cleanup.policy": "compact"}, "delete", false},
		{map[string]string{"cleanup.policy": "compact, delete"}, "delete", true},
		{nil, "compact", false},
	} {
		s.cfg.TopicDefaults["cleanup.policy"] = c.def
		if got := cleanupDeletes(s, &topicState{overrides: c.overrides}); got != c.want {
			t.Errorf("overrides %v, default %q: %v, want %v", c.overrides, c.def, got, c.want)
		}
	}
}
