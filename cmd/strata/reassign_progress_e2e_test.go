package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/segment/poll"
)

// TestReassignProgressBytes runs two brokers on ZooKeeper with two
// partitions of about 1 MiB each on broker 1 and checks the bytes the
// commands report against DescribeLogDirs: the plan of `strata cluster
// rebalance` (bytes per broker, bytes the move copies); `strata topic
// reassign --list` and `--verify` during a move held back by a 10 kB/s
// throttle, cancelled after; the progress lines of `strata cluster
// rebalance --execute --throttle` and its summary, whose total is the
// new replica's local size. Every record is read back at the end.
func TestReassignProgressBytes(t *testing.T) {
	start := time.Now()
	old := progressInterval
	progressInterval = 500 * time.Millisecond
	t.Cleanup(func() { progressInterval = old })
	zk := zktest.Start(t)
	connect := zk.ConnectString("/strata-cli-progress")
	props := func(id string) map[string]string {
		// Small replication messages: a throttle holds a move back
		// from the first 16 KiB on.
		return map[string]string{"broker.id": id, "zookeeper.connect": connect, "replica.fetch.max.bytes": "16384"}
	}
	_, addr := startBrokerProps(t, props("1"))
	startBrokerProps(t, props("2"))
	b := []string{"--bootstrap-server", addr}
	run := func(args ...string) result { return cli(t, append(args, b...)...) }
	if !poll.For(30*time.Second, func() bool {
		r := run("cluster")
		return r.code == 0 && strings.Count(r.stdout, "127.0.0.1:") == 2
	}) {
		t.Fatal("two brokers never listed")
	}
	createAssigned(t, addr, "big", [][]int32{{1}, {1}})
	h := produceHistory(t, addr, "big", 2, 1000, 1000)
	adm := kadm.NewClient(newTestClient(t, addr))
	size := func(broker int32, p int32) int64 {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
		defer cancel()
		dirs, err := adm.DescribeBrokerLogDirs(ctx, broker, kadm.TopicsSet{"big": {0: {}, 1: {}}})
		if err != nil {
			t.Fatalf("DescribeLogDirs of broker %d: %v", broker, err)
		}
		d, _ := dirs.LookupPartition("big", p)
		return d.Size
	}
	s0, s1 := size(1, 0), size(1, 1)
	t.Logf("local sizes on broker 1: big-0 %d, big-1 %d bytes", s0, s1)

	// 1. The plan: one of the two moves; its bytes are its leader's size.
	r := run("cluster", "rebalance")
	m := regexp.MustCompile(`big\s+(\d)\s+1\s+->\s+2\s+(\d+) bytes`).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil {
		t.Fatalf("rebalance dry run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	moved, _ := strconv.Atoi(m[1])
	want := map[int]int64{0: s0, 1: s1}[moved]
	if got, _ := strconv.ParseInt(m[2], 10, 64); got != want {
		t.Errorf("the plan copies %d bytes of big-%d, want its local size %d", got, moved, want)
	}
	if !strings.Contains(r.stdout, fmt.Sprintf("1 replica move, 1 partition changed, %d bytes (", want)) {
		t.Errorf("plan total: %s", r.stdout)
	}
	if !regexp.MustCompile(fmt.Sprintf(`(?m)^1\s+2\s+1\s+2\s+1\s+%d bytes \(.*\)\s+%d bytes`, s0+s1, s0+s1-want)).MatchString(r.stdout) ||
		!regexp.MustCompile(fmt.Sprintf(`(?m)^2\s+0\s+1\s+0\s+1\s+0 bytes\s+%d bytes`, want)).MatchString(r.stdout) {
		t.Errorf("bytes per broker before and after:\n%s", r.stdout)
	}
	t.Logf("plan:\n%s", r.stdout[:strings.Index(r.stdout, "\nCurrent partition replica assignment")])

	// 2. A move held back: --list and --verify show its bytes.
	throttleAll(t, adm, "10000")
	plan := filepath.Join(t.TempDir(), "move.json")
	writePlan(t, plan, `{"version":1,"partitions":[{"topic":"big","partition":1,"replicas":[2]}]}`)
	if r := run("topic", "reassign", "--file", plan, "--execute"); r.code != 0 {
		t.Fatalf("reassign --execute: exit %d %q", r.code, r.stderr)
	}
	line := regexp.MustCompile(`big-1: replicas: 2,1\. adding: 2\. removing: 1\. (.*) of (.*) copied \((\d+)%\)`)
	var list result
	if !poll.For(60*time.Second, func() bool {
		list = run("topic", "reassign", "--list")
		m := line.FindStringSubmatch(list.stdout)
		return m != nil && m[2] == formatBytes(s1)
	}) {
		t.Fatalf("--list never showed big-1 copying %s: %q %q", formatBytes(s1), list.stdout, list.stderr)
	}
	t.Logf("--list:\n%s", list.stdout)
	if !strings.Contains(list.stdout, "Total: ") {
		t.Errorf("--list has no total: %q", list.stdout)
	}
	v := run("topic", "reassign", "--verify", "--file", plan)
	if v.code != 1 || !strings.Contains(v.stdout, "Reassignment of partition big-1 is still in progress: ") || !strings.Contains(v.stdout, " of "+formatBytes(s1)+" copied") {
		t.Errorf("--verify during the move: exit %d %q %q", v.code, v.stdout, v.stderr)
	}
	if r := run("topic", "reassign", "--cancel", "--file", plan); r.code != 0 {
		t.Fatalf("cancel: exit %d %q", r.code, r.stderr)
	}
	if !poll.For(60*time.Second, func() bool { return run("topic", "reassign", "--list").stdout == "No partition reassignments found.\n" }) {
		t.Fatal("the cancelled reassignment is still listed")
	}
	// --verify reads the replica set from a broker's metadata, which
	// follows the controller's write asynchronously (Kafka's tool reads
	// it the same way): poll until that broker has seen the cancel.
	if !poll.For(60*time.Second, func() bool {
		v = run("topic", "reassign", "--verify", "--file", plan)
		return v.code == 1 && strings.Contains(v.stdout, "There is no active reassignment of partition big-1, but replica set is 1 rather than 2.")
	}) {
		t.Errorf("--verify after the cancel: exit %d %q", v.code, v.stdout)
	}
	throttleAll(t, adm, "")

	// 3. rebalance --execute: progress lines on stderr, the bytes copied
	// on stdout, equal to the new replica's local size.
	r = run("cluster", "rebalance", "--execute", "--throttle", "200000")
	if r.code != 0 || !strings.Contains(r.stdout, "Verified: ") {
		t.Fatalf("rebalance --execute: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("rebalance --execute stderr:\n%s", r.stderr)
	t.Logf("rebalance --execute stdout (end):\n%s", r.stdout[strings.Index(r.stdout, "Reassignment done"):])
	if !regexp.MustCompile(`(?m)^Progress: 1 partition moving, 0 done: .* of .* copied \(\d+%\)`).MatchString(r.stderr) ||
		!regexp.MustCompile(`(?m)^  big-\d to 2: .* of .* copied`).MatchString(r.stderr) {
		t.Errorf("no progress lines on stderr:\n%s", r.stderr)
	}
	m = regexp.MustCompile(`(?m)^big-(\d)\s+2\s+(\d+)\s+(\d+)$`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no summary line:\n%s", r.stdout)
	}
	p, _ := strconv.Atoi(m[1])
	now, _ := strconv.ParseInt(m[3], 10, 64)
	if got := size(2, int32(p)); now != got {
		t.Errorf("summary: big-%d holds %d bytes on broker 2, DescribeLogDirs says %d", p, now, got)
	}
	if planned, _ := strconv.ParseInt(m[2], 10, 64); planned != map[int]int64{0: s0, 1: s1}[p] {
		t.Errorf("summary: planned %d bytes for big-%d, its size was %d", planned, p, map[int]int64{0: s0, 1: s1}[p])
	}
	if !strings.Contains(r.stdout, fmt.Sprintf("Bytes on the 1 new replica: %d bytes (%s), ", now, formatBytes(now))) {
		t.Errorf("summary total:\n%s", r.stdout)
	}
	checkHistory(t, addr, h, "big", 2)
	t.Logf("whole test %v", time.Since(start).Round(time.Millisecond))
}

// throttleAll sets (rate != "") or removes the replication throttle of
// every replica of topic big on brokers 1 and 2.
func throttleAll(t *testing.T, adm *kadm.Client, rate string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	op, star := kadm.SetConfig, "*"
	rv := &rate
	if rate == "" {
		op, rv = kadm.DeleteConfig, nil
	}
	sv := &star
	if rate == "" {
		sv = nil
	}
	check := func(res kadm.AlterConfigsResponses, err error) {
		t.Helper()
		for _, r := range res {
			if err == nil {
				err = r.Err
			}
		}
		if err != nil {
			t.Fatalf("throttle %q: %v", rate, err)
		}
	}
	check(adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: leaderThrottledRate, Value: rv}, {Op: op, Name: followerThrottledRate, Value: rv}}, 1, 2))
	check(adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: leaderThrottledReplicas, Value: sv}, {Op: op, Name: followerThrottledReplica, Value: sv}}, "big"))
}
