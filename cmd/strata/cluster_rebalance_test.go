package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/segment/poll"
)

// TestClusterAddBrokerDecommission runs three brokers on ZooKeeper with
// two topics on them and records in every partition, starts broker 4,
// fills it with `strata cluster add-broker 4 --execute --throttle`, then
// drains broker 1 with `strata cluster decommission --broker 1 --execute`;
// every record produced before is still read at the end.
func TestClusterAddBrokerDecommission(t *testing.T) {
	start := time.Now()
	zk := zktest.Start(t)
	connect := zk.ConnectString("/strata-cli-rebalance")
	_, addr := startBrokerProps(t, map[string]string{"broker.id": "1", "zookeeper.connect": connect})
	for _, id := range []string{"2", "3"} {
		startBrokerProps(t, map[string]string{"broker.id": id, "zookeeper.connect": connect})
	}
	b := []string{"--bootstrap-server", addr}
	cluster := func(args ...string) result { return cli(t, append(append([]string{"cluster"}, args...), b...)...) }
	waitBrokers := func(n int) {
		t.Helper()
		if !poll.For(30*time.Second, func() bool {
			r := cluster()
			return r.code == 0 && strings.Count(r.stdout, "127.0.0.1:") == n
		}) {
			t.Fatalf("%d brokers never listed: %q", n, cluster().stdout)
		}
	}
	waitBrokers(3)
	createAssigned(t, addr, "wide", [][]int32{{1, 2}, {2, 3}, {3, 1}, {1, 2}, {2, 3}, {3, 1}})
	createAssigned(t, addr, "deep", [][]int32{{1, 2, 3}, {2, 3, 1}})
	adm := kadm.NewClient(newTestClient(t, addr))

	// Records in every partition, acknowledged by all in-sync replicas.
	const perPartition = 50
	pcl := newTestClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	want := map[string]bool{}
	var recs []*kgo.Record
	for _, tp := range []struct {
		topic string
		n     int32
	}{{"wide", 6}, {"deep", 2}} {
		for p := range tp.n {
			for i := range perPartition {
				v := fmt.Sprintf("%s-%d-%d", tp.topic, p, i)
				want[v] = true
				recs = append(recs, &kgo.Record{Topic: tp.topic, Partition: p, Value: []byte(v)})
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	// Already balanced over brokers 1-3; broker 5 is not there.
	if r := cluster("rebalance"); r.code != 0 || r.stdout != "The assignment is already balanced: nothing to move.\n" {
		t.Fatalf("rebalance of a balanced cluster: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := cluster("add-broker", "5"); r.code != 1 || !strings.Contains(r.stderr, "broker 5 is not in the cluster (live brokers: 1,2,3)") {
		t.Fatalf("add-broker 5: exit %d %q", r.code, r.stderr)
	}

	startBrokerProps(t, map[string]string{"broker.id": "4", "zookeeper.connect": connect})
	waitBrokers(4)
	before := describeAll(t, adm)

	// The dry run prints the plan, writes the file, changes nothing.
	planFile := filepath.Join(t.TempDir(), "plan.json")
	r := cluster("add-broker", "4", "--output", planFile)
	if r.code != 0 || !strings.Contains(r.stdout, "4 replica moves") || !strings.Contains(r.stdout, "Dry run: nothing was changed") {
		t.Fatalf("add-broker dry run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("add-broker plan:\n%s", r.stdout)
	data, err := os.ReadFile(planFile)
	if err != nil {
		t.Fatal(err)
	}
	fp, err := parseReassignPlan(data, false)
	if err != nil {
		t.Fatalf("--output file: %v", err)
	}
	moved := 0
	for _, p := range fp.Partitions {
		if slices.Contains(p.Replicas, 4) {
			moved++
		}
	}
	if moved != 4 {
		t.Fatalf("the plan file puts %d replicas on broker 4, want 4: %s", moved, data)
	}
	// The same plan as --format json: the moves and the file's assignment.
	var jp jsonPlan
	if r := cluster("add-broker", "4", "--format", "json"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &jp) != nil {
		t.Fatalf("add-broker --format json: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var planJSON, fileJSON bytes.Buffer
	if err := json.Compact(&planJSON, jp.ProposedAssignment); err != nil {
		t.Fatal(err)
	}
	if err := json.Compact(&fileJSON, data); err != nil {
		t.Fatal(err)
	}
	if jp.ReplicaMoves != 4 || len(jp.Changes) != jp.PartitionsChanged || planJSON.String() != fileJSON.String() {
		t.Errorf("add-broker --format json: %d moves, %d changes of %d, proposed %s; want 4 and the --output file:\n%s", jp.ReplicaMoves, len(jp.Changes), jp.PartitionsChanged, jp.ProposedAssignment, data)
	}
	if after := describeAll(t, adm); after != before {
		t.Fatalf("the dry run changed the cluster:\n%s\nwas\n%s", after, before)
	}

	// A throttled-replicas config set before is replaced, then removed;
	// the check below sees it while it is set.
	star := "*"
	ctx2, cancel2 := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel2()
	if _, err := adm.AlterTopicConfigs(ctx2, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: followerThrottledReplica, Value: &star}}, "wide"); err != nil {
		t.Fatal(err)
	}
	var set []string
	if !poll.For(30*time.Second, func() bool { set = throttleConfigs(t, adm); return len(set) == 1 }) {
		t.Fatalf("throttle configs after setting one: %v", set)
	}
	t0 := time.Now()
	r = cluster("add-broker", "4", "--execute", "--throttle", "50000000")
	if r.code != 0 || !strings.Contains(r.stdout, "Verified: ") || !strings.Contains(r.stdout, "Removed the replication throttles.") {
		t.Fatalf("add-broker --execute: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("add-broker 4 --execute took %v", time.Since(t0))
	t.Logf("add-broker --execute:\n%s", r.stdout[strings.Index(r.stdout, "Throttled"):])
	checkAssignment(t, adm, func(reps, leaders map[int32]int) string {
		if reps[4] != 4 { // 18 replicas over 4 brokers
			return fmt.Sprintf("broker 4 holds %d replicas, want 4", reps[4])
		}
		if leaders[4] != 2 { // the preferred election after the moves
			return fmt.Sprintf("broker 4 leads %d partitions, want 2 (leaders per broker %v)", leaders[4], leaders)
		}
		return ""
	})
	// The throttles are gone: the CLI removed them through one broker;
	// the one describing them may apply the change a moment later.
	var left []string
	if !poll.For(30*time.Second, func() bool { left = throttleConfigs(t, adm); return len(left) == 0 }) {
		t.Errorf("throttle configs left: %v", left)
	}

	// Decommission: broker 1's replicas go to 2-4; then broker 2 cannot
	// go as well (deep has 3 replicas).
	t0 = time.Now()
	r = cluster("decommission", "--broker", "1", "--execute")
	if r.code != 0 || !strings.HasSuffix(r.stdout, "Broker 1 holds no replica: it can be stopped.\n") {
		t.Fatalf("decommission --execute: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("decommission --broker 1 --execute took %v", time.Since(t0))
	checkAssignment(t, adm, func(reps, leaders map[int32]int) string {
		if reps[1] != 0 || leaders[1] != 0 {
			return fmt.Sprintf("broker 1 holds %d replicas and leads %d partitions", reps[1], leaders[1])
		}
		return ""
	})
	if r := cluster("decommission", "--broker", "1"); r.code != 0 || r.stdout != "Broker 1 holds no replica: nothing to move; it can be stopped.\n" {
		t.Errorf("decommission again: exit %d %q %q", r.code, r.stdout, r.stderr)
	}

	// Every record is still there.
	ccl := newTestClient(t, addr, kgo.ConsumeTopics("wide", "deep"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[string]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < len(want) && time.Now().Before(deadline) {
		fctx, fcancel := context.WithTimeout(context.Background(), 2*time.Second)
		fs := ccl.PollFetches(fctx)
		fcancel()
		fs.EachRecord(func(rec *kgo.Record) {
			if !want[string(rec.Value)] {
				t.Errorf("read a record never produced: %q", rec.Value)
			}
			got[string(rec.Value)] = true
		})
	}
	if len(got) != len(want) {
		t.Fatalf("read %d distinct records of %d produced", len(got), len(want))
	}
	t.Logf("read all %d records; whole test %v", len(got), time.Since(start))
}

// TestClusterRebalanceUsage checks the usage errors and refusals that
// need no cluster.
func TestClusterRebalanceUsage(t *testing.T) {
	for _, args := range [][]string{
		{"cluster", "decommission"},
		{"cluster", "add-broker"},
		{"cluster", "add-broker", "x"},
		{"cluster", "rebalance", "--broker", "1"},
		{"cluster", "rebalance", "--throttle", "100"},
		{"cluster", "rebalance", "--execute", "--throttle", "0"},
		{"cluster", "rebalance", "extra"},
		{"cluster", "decommission", "--broker", "1", "--timeout", "0s"},
	} {
		if r := cli(t, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage); stderr %q", args, r.code, r.stderr)
		}
	}
	for _, a := range []string{"rebalance", "add-broker", "decommission"} {
		r := cli(t, "cluster", a, "--help")
		if r.code != 0 || !strings.Contains(r.stdout, "--throttle") || !strings.Contains(r.stdout, "Example:") {
			t.Errorf("%s --help: exit %d %q", a, r.code, r.stdout)
		}
	}
}

// createAssigned creates topic with the given replicas per partition.
func createAssigned(t *testing.T, addr, topic string, assignment [][]int32) {
	t.Helper()
	cl := newTestClient(t, addr)
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for p, reps := range assignment {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = int32(p), reps
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create %s: %v", topic, kerr.ErrorForCode(code))
	}
	// Wait until every partition has a leader and a full ISR.
	if !poll.For(30*time.Second, func() bool {
		md, err := kadm.NewClient(cl).Metadata(ctx, topic)
		if err != nil || len(md.Topics[topic].Partitions) != len(assignment) {
			return false
		}
		for _, p := range md.Topics[topic].Partitions {
			if p.Leader < 0 || len(p.ISR) != len(p.Replicas) {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("topic %s never got leaders and full ISRs", topic)
	}
}

// describeAll renders every partition's replicas of the test topics.
func describeAll(t *testing.T, adm *kadm.Client) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	md, err := adm.Metadata(ctx, "wide", "deep")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, tn := range []string{"deep", "wide"} {
		for p := range int32(len(md.Topics[tn].Partitions)) {
			fmt.Fprintf(&b, "%s-%d %v\n", tn, p, md.Topics[tn].Partitions[p].Replicas)
		}
	}
	return b.String()
}

// checkAssignment polls until every partition of the test topics has
// a full ISR and bad (given the replicas per broker) returns "".
func checkAssignment(t *testing.T, adm *kadm.Client, bad func(reps, leaders map[int32]int) string) {
	t.Helper()
	why := ""
	if !poll.For(30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
		defer cancel()
		md, err := adm.Metadata(ctx, "wide", "deep")
		if err != nil {
			why = err.Error()
			return false
		}
		reps, leaders := map[int32]int{}, map[int32]int{}
		for _, td := range md.Topics {
			for _, p := range td.Partitions {
				leaders[p.Leader]++
				if len(p.ISR) != len(p.Replicas) {
					why = fmt.Sprintf("%s-%d: ISR %v of replicas %v", td.Topic, p.Partition, p.ISR, p.Replicas)
					return false
				}
				for _, r := range p.Replicas {
					reps[r]++
				}
			}
		}
		why = bad(reps, leaders)
		return why == ""
	}) {
		t.Fatalf("assignment: %s", why)
	}
}

// throttleConfigs returns the dynamic throttle settings of the test
// topics and of brokers 1-4.
func throttleConfigs(t *testing.T, adm *kadm.Client) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	var out []string
	collect := func(rc kadm.ResourceConfigs, err error) {
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range rc {
			if res.Err != nil {
				t.Fatalf("describe %s: %v", res.Name, res.Err)
			}
			for _, c := range res.Configs {
				dynamic := c.Source == kmsg.ConfigSourceDynamicTopicConfig || c.Source == kmsg.ConfigSourceDynamicBrokerConfig
				if strings.Contains(c.Key, "throttled") && dynamic {
					out = append(out, fmt.Sprintf("%s: %s=%s", res.Name, c.Key, c.MaybeValue()))
				}
			}
		}
	}
	collect(adm.DescribeTopicConfigs(ctx, "wide", "deep"))
	collect(adm.DescribeBrokerConfigs(ctx, 1, 2, 3, 4))
	return out
}
