package broker

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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
