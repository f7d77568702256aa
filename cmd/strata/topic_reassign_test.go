package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/segment/poll"
)

func TestParseReassignPlan(t *testing.T) {
	cases := []struct {
		in, err string
		cancel  bool
	}{
		{in: `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}`},
		{in: `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}`},
		{in: `{"version":1,"partitions":[{"topic":"t","partition":0}]}`, cancel: true},
		{in: `{"version":1,"partitions":[{"topic":"t","partition":0}]}`, err: "no replicas"},
		{in: `{"version":2,"partitions":[]}`, err: "version 2"},
		{in: `{"version":1,"partitions":[]}`, err: "no partitions"},
		{in: `{"version":1,"partitions":[{"partition":0,"replicas":[1]}]}`, err: "no topic"},
		{in: `{"version":1,"partitions":[{"topic":"t","partition":-1,"replicas":[1]}]}`, err: "partition -1"},
		{in: `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,1]}]}`, err: "listed twice"},
		{in: `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[-3]}]}`, err: "broker id -3"},
		{in: `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[2]}]}`, err: "t-0 is listed twice"},
		{in: `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any"]}]}`, err: "1 log_dirs for 2 replicas"},
		{in: `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["data/a"]}]}`, err: "absolute path"},
		{in: `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["/data/a"]}]}`},
		{in: `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]}]} {}`, err: "more after"},
		{in: `[1,2]`, err: "not a reassignment JSON"},
	}
	for i, tc := range cases {
		_, err := parseReassignPlan([]byte(tc.in), tc.cancel)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("#%d: got %v, want no error", i, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("#%d: got %v, want an error containing %q", i, err, tc.err)
		}
	}
	got := marshalPlan([]reassignPartition{{Topic: "b", Partition: 1, Replicas: []int32{3}}, {Topic: "a", Partition: 0, Replicas: []int32{1, 2}}})
	want := `{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1,2],"log_dirs":["any","any"]},{"topic":"b","partition":1,"replicas":[3],"log_dirs":["any"]}]}`
	if got != want {
		t.Errorf("marshal: got %s, want %s", got, want)
	}
}

// TestTopicReassign moves a partition from broker 1 to broker 2 of a
// two-broker cluster on ZooKeeper with the CLI: dry run, execute, list
// until done, describe; then the refusals.
func TestTopicReassign(t *testing.T) {
	zk := zktest.Start(t)
	connect := zk.ConnectString("/strata-cli-reassign")
	_, addr := startBrokerProps(t, map[string]string{"broker.id": "1", "zookeeper.connect": connect})
	startBrokerProps(t, map[string]string{"broker.id": "2", "zookeeper.connect": connect})
	b := []string{"--bootstrap-server", addr}
	topic := func(args ...string) result { return cli(t, append(append([]string{"topic"}, args...), b...)...) }
	if !poll.For(30*time.Second, func() bool {
		r := cli(t, append([]string{"cluster"}, b...)...)
		return r.code == 0 && strings.Count(r.stdout, "127.0.0.1:") >= 2
	}) {
		t.Fatal("two brokers never listed")
	}
	createOn(t, addr, "mv", 1)
	if r := topic("reassign", "--list"); r.code != 0 || r.stdout != "No partition reassignments found.\n" {
		t.Fatalf("list: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	desc := topic("describe", "--topic", "mv")
	const from, to = 1, 2

	dir := t.TempDir()
	plan := filepath.Join(dir, "move.json")
	writePlan(t, plan, fmt.Sprintf(`{"version":1,"partitions":[{"topic":"mv","partition":0,"replicas":[%d],"log_dirs":["any"]}]}`, to))
	r := topic("reassign", "--file", plan)
	want := fmt.Sprintf("Current partition replica assignment\n\n"+
		`{"version":1,"partitions":[{"topic":"mv","partition":0,"replicas":[%d],"log_dirs":["any"]}]}`+
		"\n\nSave this to use as the --file option during rollback\n\nProposed partition reassignment configuration\n\n"+
		`{"version":1,"partitions":[{"topic":"mv","partition":0,"replicas":[%d],"log_dirs":["any"]}]}`+
		"\n\nDry run: nothing was changed. Add --execute to start the reassignment.\n", from, to)
	if r.code != 0 || r.stdout != want {
		t.Fatalf("dry run: exit %d, stderr %q\ngot:\n%s\nwant:\n%s", r.code, r.stderr, r.stdout, want)
	}
	if d := topic("describe", "--topic", "mv"); d.stdout != desc.stdout {
		t.Fatalf("the dry run changed the topic:\n%s", d.stdout)
	}
	r = topic("reassign", "--reassignment-json-file", plan, "--execute")
	if r.code != 0 || !strings.HasSuffix(r.stdout, "Successfully started partition reassignment of mv-0.\n") {
		t.Fatalf("execute: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if !poll.For(30*time.Second, func() bool {
		return topic("reassign", "--list").stdout == "No partition reassignments found.\n" &&
			strings.Contains(topic("describe", "--topic", "mv").stdout, fmt.Sprintf("Leader: %d\tReplicas: %d\tIsr: %d\n", to, to, to))
	}) {
		t.Fatalf("not moved: list %q, describe %q", topic("reassign", "--list").stdout, topic("describe", "--topic", "mv").stdout)
	}

	// Refusals: a broker that is not live, a cancel with nothing in
	// progress, an unknown topic, usage errors.
	writePlan(t, plan, `{"version":1,"partitions":[{"topic":"mv","partition":0,"replicas":[1,7]}]}`)
	if r = topic("reassign", "--file", plan, "--execute"); r.code != 1 || !strings.Contains(r.stderr, "INVALID_REPLICA_ASSIGNMENT") || !strings.Contains(r.stderr, "live broker") || strings.Contains(r.stderr, "retrying") {
		t.Errorf("broker 7: exit %d, stderr %q", r.code, r.stderr)
	}
	if r = topic("reassign", "--cancel", "--file", plan); r.code != 1 || !strings.Contains(r.stderr, "NO_REASSIGNMENT_IN_PROGRESS") {
		t.Errorf("cancel: exit %d, stderr %q", r.code, r.stderr)
	}
	writePlan(t, plan, `{"version":1,"partitions":[{"topic":"nope","partition":0,"replicas":[1]}]}`)
	if r = topic("reassign", "--file", plan); r.code != 1 || !strings.Contains(r.stderr, `topic "nope" does not exist`) {
		t.Errorf("unknown topic: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, args := range [][]string{{"reassign"}, {"reassign", "--list", "--cancel"}, {"reassign", "--list", "--file", plan}, {"reassign", "--cancel", "--execute", "--file", plan},
		{"reassign", "--verify", "--execute", "--file", plan}, {"reassign", "--verify", "--list"}, {"reassign", "--verify"}, {"reassign", "--list", "--timeout", "0s"}} {
		if r = topic(args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage); stderr %q", args, r.code, r.stderr)
		}
	}
}

func writePlan(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// createOn creates topic with one partition on broker id.
func createOn(t *testing.T, addr, topic string, id int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{id}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
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
}
