package broker

import (
	"fmt"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/coord"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kgoLog keeps a franz-go client's log lines without printing them
// (debug logging is verbose).
type kgoLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *kgoLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.Split(strings.TrimRight(string(p), "\n"), "\n")...)
	return len(p), nil
}

func (l *kgoLog) containing(sub string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return out
}

// TestProduceLeaderDiscovery moves a partition's leadership away from
// broker 1 (a reassignment from [1,2] to [2,3], three brokers on
// ZooKeeper), then:
//   - a raw Produce v10 and v11 to broker 1 is NOT_LEADER_OR_FOLLOWER with
//     CurrentLeader the new leader and its epoch and NodeEndpoints that
//     leader's address (KIP-951); v9 carries neither;
//   - a franz-go producer (which uses v11) that still believes broker 1
//     leads takes the new leader from that response: its log shows the
//     move to the new leader at the new epoch, and every record it was
//     acknowledged is read back from the new leader, in order.
func TestProduceLeaderDiscovery(t *testing.T) {
	srv := reassignCluster(t, 3)
	ctx := testCtx(t)
	adm := kadm.NewClient(newClient(t, srv[1]))
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, "ld"); err != nil {
		t.Fatal(err)
	}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("ld", 0, []int32{1, 2})
	mustAlter(t, adm, req)
	waitNoReassignment(t, adm, "ld", 0)
	waitFor(t, "ld-0 led by 1 on [1 2], both in sync", func() bool {
		for _, s := range srv {
			p := partitionInfo(s, "ld", 0)
			if !slices.Equal(p.Replicas, []int32{1, 2}) || len(p.State.ISR) != 2 || p.State.Leader != 1 {
				return false
			}
		}
		return true
	})

	log := &kgoLog{}
	prod := newClient(t, srv[1], kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("ld"),
		kgo.WithLogger(kgo.BasicLogger(log, kgo.LogLevelDebug, nil)))
	var want []string
	produce := func(n int) {
		t.Helper()
		for range n {
			v := fmt.Sprintf("r%d", len(want))
			if err := prod.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
			want = append(want, v)
		}
	}
	produce(10)
	if len(log.containing("move:")) != 0 {
		t.Fatalf("franz-go moved a partition before the reassignment: %q", log.containing("move:"))
	}

	req = nil
	req.Assign("ld", 0, []int32{2, 3})
	mustAlter(t, adm, req)
	waitNoReassignment(t, adm, "ld", 0)
	var leader, epoch int32
	waitFor(t, "ld-0 on [2 3] with the same leader on every broker", func() bool {
		p := partitionInfo(srv[0], "ld", 0)
		leader, epoch = p.State.Leader, p.State.LeaderEpoch
		if leader != 2 && leader != 3 {
			return false
		}
		for _, s := range srv {
			q := partitionInfo(s, "ld", 0)
			if !slices.Equal(q.Replicas, []int32{2, 3}) || q.State.Leader != leader || q.State.LeaderEpoch != epoch {
				return false
			}
		}
		return true
	})
	host, port, err := net.SplitHostPort(srv[leader-1].Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ld-0 now led by %d at epoch %d (%s:%s)", leader, epoch, host, port)

	rc := dialRaw(t, srv[0])
	for i, version := range []int16{9, 10, 11} {
		preq := produceRequest("ld", 0, buildBatch(t, 0, 1))
		preq.Version = version
		resp := rc.request(int32(i+1), preq).(*kmsg.ProduceResponse)
		sp := resp.Topics[0].Partitions[0]
		if sp.ErrorCode != kerr.NotLeaderForPartition.Code {
			t.Fatalf("v%d to broker 1: got %v, want NOT_LEADER_OR_FOLLOWER", version, kerr.ErrorForCode(sp.ErrorCode))
		}
		if version < 10 {
			if sp.CurrentLeader.LeaderID != -1 || sp.CurrentLeader.LeaderEpoch != -1 || len(resp.Brokers) != 0 {
				t.Errorf("v%d: CurrentLeader %+v, NodeEndpoints %+v; want neither before v10", version, sp.CurrentLeader, resp.Brokers)
			}
			continue
		}
		if sp.CurrentLeader.LeaderID != leader || sp.CurrentLeader.LeaderEpoch != epoch {
			t.Errorf("v%d: CurrentLeader %d at epoch %d, want %d at %d", version, sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch, leader, epoch)
		}
		if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != leader || resp.Brokers[0].Host != host || fmt.Sprint(resp.Brokers[0].Port) != port {
			t.Errorf("v%d: NodeEndpoints %+v, want broker %d at %s:%s", version, resp.Brokers, leader, host, port)
		}
	}

	// franz-go still has broker 1 as the leader (its metadata is not
	// refreshed until an error asks for it): the NOT_LEADER_OR_FOLLOWER
	// answer carries the new leader, which it moves to.
	start := time.Now()
	produce(10)
	t.Logf("10 records produced across the leader change in %v", time.Since(start))
	moved := log.containing(fmt.Sprintf("move:%d:%d@", leader, epoch))
	if len(moved) == 0 {
		t.Errorf("franz-go did not move ld-0 to broker %d at epoch %d from the Produce response; its produce log: %q", leader, epoch, log.containing("produced"))
	} else {
		t.Logf("franz-go: %s", moved[0])
	}

	got := consumePartition(t, srv[leader-1], "ld", 0, len(want))
	if !slices.Equal(got, want) {
		t.Fatalf("read back %q, want %q", got, want)
	}
}

// TestAddProduceLeaders holds addProduceLeaders against a snapshot: which
// partitions get CurrentLeader, which leaders get NodeEndpoints (alive,
// with the client's listener, once each), and that versions before 10
// and other errors are left alone.
func TestAddProduceLeaders(t *testing.T) {
	rack := "r1"
	snap := &coord.Snapshot{
		Brokers: []coord.BrokerInfo{
			{ID: 1, Host: "b1", Port: 9091, Rack: rack, Endpoints: []coord.Endpoint{{Listener: "CLIENT", Host: "c1", Port: 19091}, {Listener: "REPL", Host: "i1", Port: 29091}}},
			{ID: 2, Host: "b2", Port: 9092, Endpoints: []coord.Endpoint{{Listener: "REPL", Host: "i2", Port: 29092}}},
		},
		Topics: map[string]*coord.TopicInfo{"t": {Name: "t", Partitions: []coord.PartitionInfo{
			{State: coord.PartitionState{Leader: 1, LeaderEpoch: 7}},
			{State: coord.PartitionState{Leader: 1, LeaderEpoch: 3}},
			{State: coord.PartitionState{Leader: 2, LeaderEpoch: 4}},              // no CLIENT listener
			{State: coord.PartitionState{Leader: 3, LeaderEpoch: 5}},              // not registered: dead
			{State: coord.PartitionState{Leader: coord.NoLeader, LeaderEpoch: 6}}, // offline
		}}},
	}
	type part struct {
		topic         string
		index         int32
		code          int16
		leader, epoch int32
	}
	notLeader, fenced := kerr.NotLeaderForPartition.Code, kerr.FencedLeaderEpoch.Code
	for i, tt := range []struct {
		version int16
		lis     string
		parts   []part // in: topic, index, code; want: leader, epoch
		brokers []kmsg.ProduceResponseBroker
	}{
		{10, "CLIENT", []part{{"t", 0, notLeader, 1, 7}, {"t", 1, fenced, 1, 3}, {"t", 2, notLeader, 2, 4}, {"t", 3, notLeader, 3, 5}, {"t", 4, notLeader, -1, 6}, {"gone", 0, notLeader, -1, -1}, {"t", 0, 0, -1, -1}, {"t", 0, kerr.UnknownTopicOrPartition.Code, -1, -1}},
			[]kmsg.ProduceResponseBroker{{NodeID: 1, Host: "c1", Port: 19091, Rack: &rack}}},
		{11, "REPL", []part{{"t", 2, notLeader, 2, 4}, {"t", 0, notLeader, 1, 7}},
			[]kmsg.ProduceResponseBroker{{NodeID: 2, Host: "i2", Port: 29092}, {NodeID: 1, Host: "i1", Port: 29091, Rack: &rack}}},
		{11, "", []part{{"t", 2, notLeader, 2, 4}}, // no listener: the registered address
			[]kmsg.ProduceResponseBroker{{NodeID: 2, Host: "b2", Port: 9092}}},
		{9, "CLIENT", []part{{"t", 0, notLeader, -1, -1}}, nil},
	} {
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = tt.version
		for _, p := range tt.parts {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = p.topic
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p.index, p.code
			rt.Partitions = append(rt.Partitions, sp)
			resp.Topics = append(resp.Topics, rt)
		}
		calls := 0
		addProduceLeaders(func() *coord.Snapshot { calls++; return snap }, tt.lis, resp)
		for j, p := range tt.parts {
			got := resp.Topics[j].Partitions[0].CurrentLeader
			if got.LeaderID != p.leader || got.LeaderEpoch != p.epoch {
				t.Errorf("#%d: %s-%d (code %d): got leader %d epoch %d, want %d %d", i, p.topic, p.index, p.code, got.LeaderID, got.LeaderEpoch, p.leader, p.epoch)
			}
		}
		if !reflect.DeepEqual(resp.Brokers, tt.brokers) {
			t.Errorf("#%d: got NodeEndpoints %+v, want %+v", i, resp.Brokers, tt.brokers)
		}
		if tt.version < 10 && calls != 0 {
			t.Errorf("#%d: v%d took %d snapshots, want none", i, tt.version, calls)
		}
		if calls > 1 {
			t.Errorf("#%d: %d snapshots taken, want at most one", i, calls)
		}
	}
}
