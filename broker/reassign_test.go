package broker

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/segment/poll"
)

// reassignCluster starts brokers 1..n on one ZooKeeper chroot.
func reassignCluster(t *testing.T, n int) []*Server {
	t.Helper()
	return reassignClusterWith(t, n, nil)
}

// reassignClusterWith is reassignCluster with extra settings on every
// broker.
func reassignClusterWith(t *testing.T, n int, extra map[string]string) []*Server {
	t.Helper()
	zk := zktest.Start(t)
	connect := zk.ConnectString("/strata-reassign")
	out := make([]*Server, n)
	for i := range out {
		props := maps.Clone(extra)
		if props == nil {
			props = map[string]string{}
		}
		props["broker.id"], props["zookeeper.connect"] = fmt.Sprint(i+1), connect
		out[i] = startServer(t, props)
	}
	waitFor(t, "every broker registered", func() bool { return len(out[0].coord.Snapshot().Brokers) == n })
	return out
}

// waitNoReassignment polls ListPartitionReassignments until tp is no
// longer listed.
func waitNoReassignment(t *testing.T, adm *kadm.Client, topic string, partition int32) time.Duration {
	t.Helper()
	start := time.Now()
	var last kadm.ListPartitionReassignmentsResponses
	var lastErr error
	done := poll.For(60*time.Second, func() bool {
		last, lastErr = adm.ListPartitionReassignments(testCtx(t), kadm.TopicsSet{topic: {partition: {}}})
		_, listed := last[topic][partition]
		return lastErr == nil && !listed
	})
	if !done {
		t.Fatalf("%s-%d still being reassigned after 60s: %+v (err %v)", topic, partition, last, lastErr)
	}
	return time.Since(start)
}

// TestAlterPartitionReassignments moves a partition with acknowledged
// records from brokers [1,2] to [2,3] through kadm, against three brokers
// on ZooKeeper: ListPartitionReassignments shows it until it completes,
// then the replicas and ISR are [2,3], broker 1 has deleted its copy,
// and every record is read back from the new leader.
func TestAlterPartitionReassignments(t *testing.T) {
	srv := reassignCluster(t, 3)
	cl := newClient(t, srv[1], kgo.RequiredAcks(kgo.AllISRAcks()))
	adm := kadm.NewClient(cl)
	ctx := testCtx(t)
	if _, err := adm.CreateTopic(ctx, -1, -1, nil, "mv"); err != nil {
		t.Fatal(err)
	}
	// Replace the automatic assignment with [1,2] for a known start.
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("mv", 0, []int32{1, 2})
	mustAlter(t, adm, req)
	waitNoReassignment(t, adm, "mv", 0)
	waitFor(t, "mv-0 on [1 2] with both in sync", func() bool {
		p := partitionInfo(srv[0], "mv", 0)
		return slices.Equal(p.Replicas, []int32{1, 2}) && len(p.State.ISR) == 2
	})

	const records = 200
	for i := range records {
		r := &kgo.Record{Topic: "mv", Partition: 0, Value: []byte(fmt.Sprintf("r%d", i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	dir1 := filepath.Join(srv[0].cfg.LogDirs[0], segment.PartitionDirName("mv", 0))
	if _, err := os.Stat(dir1); err != nil {
		t.Fatalf("broker 1 has no copy before the move: %v", err)
	}

	req = nil
	req.Assign("mv", 0, []int32{2, 3})
	start := time.Now()
	mustAlter(t, adm, req)
	took := waitNoReassignment(t, adm, "mv", 0)
	t.Logf("reassignment [1 2] -> [2 3] of %d records listed as done after %v", records, took)
	waitFor(t, "replicas and ISR [2 3] everywhere", func() bool {
		for _, s := range srv {
			p := partitionInfo(s, "mv", 0)
			isr := slices.Sorted(slices.Values(p.State.ISR))
			if !slices.Equal(p.Replicas, []int32{2, 3}) || !slices.Equal(isr, []int32{2, 3}) || p.Reassigning() {
				return false
			}
		}
		return true
	})
	waitFor(t, "broker 1's copy deleted", func() bool {
		_, err := os.Stat(dir1)
		return errors.Is(err, os.ErrNotExist)
	})
	t.Logf("moved and deleted after %v", time.Since(start))

	got := consumePartition(t, srv[2], "mv", 0, records)
	for i, v := range got {
		if want := fmt.Sprintf("r%d", i); v != want {
			t.Fatalf("record %d: got %q, want %q", i, v, want)
		}
	}
}

// TestAlterPartitionReassignmentsRefused checks Kafka's refusals, as kadm
// reports them.
func TestAlterPartitionReassignmentsRefused(t *testing.T) {
	srv := reassignCluster(t, 2)
	adm := kadm.NewClient(newClient(t, srv[0]))
	ctx := testCtx(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "rf"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		topic     string
		partition int32
		replicas  []int32
		want      error
	}{
		{"rf", 0, []int32{}, kerr.InvalidReplicaAssignment},
		{"rf", 0, []int32{1, 1}, kerr.InvalidReplicaAssignment},
		{"rf", 0, []int32{1, 9}, kerr.InvalidReplicaAssignment},
		{"rf", 0, []int32{-1}, kerr.InvalidReplicaAssignment},
		{"rf", 0, nil, kerr.NoReassignmentInProgress},
		{"rf", 7, []int32{1}, kerr.UnknownTopicOrPartition},
		{"nope", 0, []int32{1}, kerr.UnknownTopicOrPartition},
	}
	for i, tc := range cases {
		var req kadm.AlterPartitionAssignmentsReq
		req.Assign(tc.topic, tc.partition, tc.replicas)
		res, err := adm.AlterPartitionAssignments(ctx, req)
		if err != nil {
			t.Fatalf("#%d: %v", i, err)
		}
		if got := res[tc.topic][tc.partition].Err; !errors.Is(got, tc.want) {
			t.Errorf("#%d: got %v, want %v", i, got, tc.want)
		}
	}
	l, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"rf": {0: {}}, "nope": {0: {}}})
	if err != nil || len(l) != 0 {
		t.Fatalf("list after refusals: %+v %v", l, err)
	}
}

// TestPartitionReassignmentPendingAndCancel keeps a reassignment pending
// by adding a broker that is registered in ZooKeeper but never fetches (a
// bare coordinator session), and checks ListPartitionReassignments, with
// null topics too, then the cancel; and the v1 refusal of a replication
// factor change.
func TestPartitionReassignmentPendingAndCancel(t *testing.T) {
	zk := zktest.Start(t)
	connect := zk.ConnectString("/strata-reassign-pending")
	s1 := startServer(t, map[string]string{"broker.id": "1", "zookeeper.connect": connect})
	ctx := testCtx(t)
	cl := newClient(t, s1)
	adm := kadm.NewClient(cl)
	// Created before broker 9 registers, so that it lands on broker 1.
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "pend"); err != nil {
		t.Fatal(err)
	}
	phantom, err := coord.Open(ctx, coord.Config{ZooKeeperConnect: connect, SessionTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = phantom.Close() })
	if _, err := phantom.Register(ctx, coord.BrokerInfo{ID: 9, Host: "127.0.0.1", Port: 1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "broker 9 registered", func() bool { return s1.coord.Snapshot().Live(9) })

	// v1 without AllowReplicationFactorChange: 1 -> 2 replicas refused.
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.Version, req.AllowReplicationFactorChange = 1, false
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = "pend"
	rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	rp.Partition, rp.Replicas = 0, []int32{1, 9}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Topics[0].Partitions[0].ErrorCode; got != kerr.InvalidReplicaAssignment.Code {
		t.Fatalf("v1 replication factor change: error %d, want INVALID_REPLICA_ASSIGNMENT", got)
	}

	var alter kadm.AlterPartitionAssignmentsReq
	alter.Assign("pend", 0, []int32{9, 1})
	mustAlter(t, adm, alter)
	all, err := kmsg.NewPtrListPartitionReassignmentsRequest().RequestWith(ctx, cl) // null topics: all
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Topics) != 1 || all.Topics[0].Topic != "pend" || len(all.Topics[0].Partitions) != 1 {
		t.Fatalf("list all: %+v", all.Topics)
	}
	lp := all.Topics[0].Partitions[0]
	if !slices.Equal(lp.Replicas, []int32{9, 1}) || !slices.Equal(lp.AddingReplicas, []int32{9}) || len(lp.RemovingReplicas) != 0 {
		t.Fatalf("listed %+v, want replicas [9 1] adding [9] removing []", lp)
	}
	if p := partitionInfo(s1, "pend", 0); !p.Reassigning() || slices.Contains(p.State.ISR, 9) {
		t.Fatalf("partition %+v: want still reassigning, 9 out of the ISR", p)
	}

	var cancel kadm.AlterPartitionAssignmentsReq
	cancel.CancelAssign("pend", 0)
	mustAlter(t, adm, cancel)
	waitNoReassignment(t, adm, "pend", 0)
	if p := partitionInfo(s1, "pend", 0); !slices.Equal(p.Replicas, []int32{1}) || !slices.Equal(p.State.ISR, []int32{1}) {
		t.Fatalf("after cancel: replicas %v isr %v, want [1] [1]", p.Replicas, p.State.ISR)
	}
	res, err := adm.AlterPartitionAssignments(ctx, cancel)
	if err != nil || !errors.Is(res["pend"][0].Err, kerr.NoReassignmentInProgress) {
		t.Fatalf("second cancel: %v %+v", err, res)
	}
}

func mustAlter(t *testing.T, adm *kadm.Client, req kadm.AlterPartitionAssignmentsReq) {
	t.Helper()
	res, err := adm.AlterPartitionAssignments(testCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Sorted() {
		if r.Err != nil {
			t.Fatalf("%s-%d: %v %s", r.Topic, r.Partition, r.Err, r.ErrMessage)
		}
	}
}

func partitionInfo(s *Server, topic string, partition int32) coord.PartitionInfo {
	p, _ := s.coord.Snapshot().Partition(coord.TopicPartition{Topic: topic, Partition: partition})
	return p
}

// consumePartition reads n records of one partition from offset 0
// through s (following the leader).
func consumePartition(t *testing.T, s *Server, topic string, partition int32, n int) []string {
	t.Helper()
	cl := newClient(t, s, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().AtStart()}}))
	var out []string
	ctx := testCtx(t)
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records: %v", len(out), n, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	return out
}
