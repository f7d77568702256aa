package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratastream/strata/broker/e2e/history"
	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/segment/poll"
)

// TestReassignRetriesZooKeeperStall pauses ZooKeeper (SIGSTOP) under a
// two-broker cluster and runs, while it is paused, `strata topic
// reassign --execute` (AlterPartitionReassignments) and then `strata
// cluster rebalance --execute --throttle` (IncrementalAlterConfigs of
// the brokers' throttle rates, dynamic broker configs stored in
// ZooKeeper, and of the topic's throttled replicas, then
// AlterPartitionReassignments): the
// brokers answer REQUEST_TIMED_OUT, the commands say they retry, and
// once ZooKeeper is resumed they finish. Every record acknowledged
// before is read back at the end.
func TestReassignRetriesZooKeeperStall(t *testing.T) {
	if raceDetector {
		// In-process brokers reconnect to the paused ZooKeeper, which
		// trips go-zookeeper's known race (see the Makefile's unit
		// target); make unit runs this test without -race.
		t.Skip("in-process ZooKeeper reconnects race in go-zookeeper (upstream); run without -race")
	}
	start := time.Now()
	zk := zktest.Start(t)
	connect := zk.ConnectString("/strata-cli-stall")
	// A short session: the brokers notice the stall within seconds.
	props := func(id string) map[string]string {
		return map[string]string{"broker.id": id, "zookeeper.connect": connect, "zookeeper.session.timeout.ms": "6000"}
	}
	_, addr := startBrokerProps(t, props("1"))
	startBrokerProps(t, props("2"))
	b := []string{"--bootstrap-server", addr}
	if !poll.For(30*time.Second, func() bool {
		r := cli(t, append([]string{"cluster"}, b...)...)
		return r.code == 0 && strings.Count(r.stdout, "127.0.0.1:") == 2
	}) {
		t.Fatal("two brokers never listed")
	}
	createAssigned(t, addr, "stall", [][]int32{{1}, {1}, {1}, {1}})
	h := produceHistory(t, addr, "stall", 4, 20, 0)

	// 1. topic reassign --execute while ZooKeeper is paused.
	plan := filepath.Join(t.TempDir(), "move.json")
	writePlan(t, plan, `{"version":1,"partitions":[{"topic":"stall","partition":0,"replicas":[2]}]}`)
	r := runStalled(t, zk, append([]string{"topic", "reassign", "--file", plan, "--execute"}, b...), "AlterPartitionReassignments of stall-0: REQUEST_TIMED_OUT")
	t.Logf("topic reassign stderr:\n%s", r.stderr)
	if r.code != 0 || !strings.HasSuffix(r.stdout, "Successfully started partition reassignment of stall-0.\n") || !strings.Contains(r.stderr, "AlterPartitionReassignments succeeded after") {
		t.Fatalf("topic reassign across the stall: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	adm := kadm.NewClient(newTestClient(t, addr))
	var desc string
	if !poll.For(60*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
		defer cancel()
		md, err := adm.Metadata(ctx, "stall")
		if err != nil {
			desc = err.Error()
			return false
		}
		p := md.Topics["stall"].Partitions[0]
		desc = fmt.Sprintf("leader %d replicas %v isr %v", p.Leader, p.Replicas, p.ISR)
		return cli(t, append([]string{"topic", "reassign", "--list"}, b...)...).stdout == "No partition reassignments found.\n" &&
			p.Leader == 2 && slices.Equal(p.Replicas, []int32{2}) && slices.Equal(p.ISR, []int32{2})
	}) {
		t.Fatalf("stall-0 not moved to broker 2: %s", desc)
	}

	// 2. cluster rebalance --execute --throttle while ZooKeeper is paused:
	// partitions 1-3 are on broker 1, one of them moves.
	r = runStalled(t, zk, append([]string{"cluster", "rebalance", "--execute", "--throttle", "50000000"}, b...), "REQUEST_TIMED_OUT: write the dynamic broker configs")
	if r.code != 0 || !strings.Contains(r.stdout, "Verified: ") || !strings.Contains(r.stderr, "IncrementalAlterConfigs succeeded after") {
		t.Fatalf("cluster rebalance across the stall: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "Removed the replication throttles.") {
		t.Errorf("rebalance did not remove its throttles:\n%s", r.stdout)
	}

	// A plain INVALID_* answer fails at once, without a retry.
	writePlan(t, plan, `{"version":1,"partitions":[{"topic":"stall","partition":0,"replicas":[2,7]}]}`)
	r = cli(t, append([]string{"topic", "reassign", "--file", plan, "--execute"}, b...)...)
	if r.code != 1 || !strings.Contains(r.stderr, "INVALID_REPLICA_ASSIGNMENT") || strings.Contains(r.stderr, "retrying") {
		t.Errorf("broker 7: exit %d, stderr %q", r.code, r.stderr)
	}

	checkHistory(t, addr, h, "stall", 4)
	t.Logf("whole test %v", time.Since(start).Round(time.Millisecond))
}

// runStalled pauses ZooKeeper, runs the CLI with args until its stderr
// holds retried (it is retrying), resumes ZooKeeper and returns what the
// CLI printed once it ends.
func runStalled(t *testing.T, zk *zktest.Server, args []string, retried string) result {
	t.Helper()
	var stdout, stderr lockedBuffer
	zk.Pause()
	paused := time.Now()
	done := make(chan int, 1)
	go func() { done <- dispatch(args, &stdout, &stderr) }()
	resumed := false
	resume := func() {
		if !resumed {
			zk.Resume()
			resumed = true
		}
	}
	defer resume()
	if !poll.For(90*time.Second, func() bool { return strings.Contains(stderr.String(), retried) }) {
		resume()
		select {
		case code := <-done:
			t.Fatalf("strata %s never said %q while ZooKeeper was paused: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), retried, code, stdout.String(), stderr.String())
		case <-time.After(3 * time.Minute):
			t.Fatalf("strata %s: still running", strings.Join(args, " "))
		}
	}
	t.Logf("strata %s: retrying %v after ZooKeeper was paused", args[0]+" "+args[1], time.Since(paused).Round(time.Millisecond))
	resume()
	select {
	case code := <-done:
		t.Logf("strata %s: done %v after ZooKeeper was paused", args[0]+" "+args[1], time.Since(paused).Round(time.Millisecond))
		return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
	case <-time.After(3 * time.Minute):
		t.Fatalf("strata %s: still running 3 minutes after ZooKeeper was resumed\nstderr:\n%s", strings.Join(args, " "), stderr.String())
		return result{}
	}
}

// produceHistory produces n records acks=all, of about pad bytes each,
// to each of parts partitions of topic, uncompressed in batches of at
// most 16 KiB,
// and records them in a history.
func produceHistory(t *testing.T, addr, topic string, parts int32, n, pad int) *history.History {
	t.Helper()
	h := history.New()
	cl := newTestClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchMaxBytes(16<<10), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for p := range parts {
		tp := history.TP{Topic: topic, Partition: p}
		for i := range n {
			v := fmt.Sprintf("%s-%d-%d-%s", topic, p, i, strings.Repeat("x", pad))
			h.Sent("cli-test", tp, v)
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}, func(r *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					h.Answered(tp, v, history.Unknown, -1, err.Error())
					return
				}
				h.Answered(tp, v, history.Acked, r.Offset, "")
			})
		}
	}
	wg.Wait()
	return h
}

// checkHistory reads every partition of topic from the start to its end
// and fails the test unless the history holds: nothing acknowledged lost,
// nothing duplicated or inconsistent.
func checkHistory(t *testing.T, addr string, h *history.History, topic string, parts int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cl := newTestClient(t, addr)
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	final := map[history.TP][]history.Record{}
	offsets := map[string]map[int32]kgo.Offset{topic: {}}
	want := int64(0)
	for p := range parts {
		final[history.TP{Topic: topic, Partition: p}] = nil
		offsets[topic][p] = kgo.NewOffset().AtStart()
		e, _ := ends.Lookup(topic, p)
		if e.Err != nil {
			t.Fatalf("end offset of %s-%d: %v", topic, p, e.Err)
		}
		want += e.Offset
	}
	ccl := newTestClient(t, addr, kgo.ConsumePartitions(offsets))
	got := int64(0)
	deadline := time.Now().Add(60 * time.Second)
	for got < want && time.Now().Before(deadline) {
		fctx, fcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := ccl.PollFetches(fctx)
		fcancel()
		fs.EachRecord(func(r *kgo.Record) {
			tp := history.TP{Topic: r.Topic, Partition: r.Partition}
			final[tp] = append(final[tp], history.Record{Offset: r.Offset, Value: string(r.Value)})
			got++
		})
	}
	if got < want {
		t.Fatalf("read %d records of %d below the end offsets", got, want)
	}
	rep := h.Check(final)
	t.Logf("history: %s", rep)
	if !rep.OK() || rep.Lost != 0 {
		t.Fatalf("history check failed: %s\n%s", rep, strings.Join(rep.Problems, "\n"))
	}
}
