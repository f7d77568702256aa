package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/segment/poll"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// consumerGroupSettings make KIP-848 groups react within a fraction of a
// second: heartbeats every 200 ms.
var consumerGroupSettings = []string{
	"group.consumer.min.heartbeat.interval.ms=100",
	"group.consumer.heartbeat.interval.ms=200",
	"group.consumer.min.session.timeout.ms=6000",
	"group.consumer.session.timeout.ms=10000",
}

// franzGo848Tests are franz-go's tests of the KIP-848 protocol: each must
// pass against Strata (franz-go skips them unless ApiVersions offers
// ConsumerGroupHeartbeat v1).
var franzGo848Tests = []string{
	"Test848RegexBrokerResolves",
	"TestGroupSimple/848",
	"TestGroupETL/range/848",
	"TestGroupETL/sticky/848",
	"TestGroupETL/sticky/848/static",
	"TestTxnEtl/range/848",
	"TestTxnEtl/sticky/848",
	"TestTxnEtl/sticky/848/static",
}

// TestConsumerGroupProtocolFranzGoSuite runs franz-go's own KIP-848 tests
// (subprocesses go test of franz-go's kgo package, KGO_SEEDS naming a
// Strata broker): consumer chains with members joining and leaving under
// the range and uniform (sticky) server assignors, static members,
// transactional ETL, and regex subscriptions resolved by the broker. The
// classic range cases of the ETL tests run along.
func TestConsumerGroupProtocolFranzGoSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end tests do not run with -short")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("no go command to build franz-go's tests: %v", err)
	}
	settings := append([]string{"num.partitions=3", "auto.create.topics.enable=true"}, consumerGroupSettings...)
	t.Run("1broker", func(t *testing.T) {
		b := StartBroker(t, settings...)
		runFranzGo848Tests(t, []string{b.Addr}, 1)
	})
	t.Run("3brokers", func(t *testing.T) {
		c := StartCluster(t, 3, settings...)
		runFranzGo848Tests(t, c.LiveAddrs(), 3)
	})
}

// runFranzGo848Tests runs franzGo848Tests against the brokers at seeds,
// their topics created with replication factor rf.
func runFranzGo848Tests(t *testing.T, seeds []string, rf int) {
	t.Helper()
	// Two runs: the ETL tests share a semaphore that a subtest left out by
	// -run never releases, so both in one run can wait forever. The
	// sequential TestPauseIssueOct2023 runs first so that franz-go has
	// read the broker's versions before TestGroupSimple/848 asks whether
	// 848 is offered.
	var out []byte
	for _, run := range []string{
		`^(TestPauseIssueOct2023|Test848RegexBrokerResolves|TestGroupSimple|TestTxnEtl)$/^(848|range|sticky)$/^(848)?$/^(static)?$`,
		`^TestGroupETL$/^(range|sticky)$/^(848)?$/^(static)?$`,
	} {
		out = append(out, runFranzGoTests(t, seeds, rf, run)...)
	}
	for _, name := range franzGo848Tests {
		if !regexp.MustCompile(`(?m)^\s*--- PASS: ` + regexp.QuoteMeta(name) + ` `).Match(out) {
			t.Errorf("%s did not pass (skipped or not run):\n%s", name, tailString(string(out), 4096))
		}
	}
	if strings.Contains(string(out), "--- SKIP") {
		t.Errorf("a franz-go test skipped:\n%s", tailString(string(out), 4096))
	}
}

// runFranzGoTests runs franz-go's kgo tests matching run against the
// brokers at seeds (topics with replication factor rf) and returns their
// output.
func runFranzGoTests(t *testing.T, seeds []string, rf int, run string) []byte {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "github.com/twmb/franz-go/pkg/kgo", "-run", run, "-count=1", "-v", "-timeout=5m")
	cmd.Env = append(os.Environ(), "KGO_SEEDS="+strings.Join(seeds, ","), "KGO_TEST_RF="+strconv.Itoa(rf), "KGO_TEST_RECORDS=20000")
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("go test franz-go/pkg/kgo -run %s (build and run) took %v", run, time.Since(start).Round(100*time.Millisecond))
	if err != nil {
		t.Fatalf("franz-go's tests: %v\n%s", err, tailString(string(out), 8192))
	}
	return out
}

// consumerMember848 is a franz-go member of a KIP-848 group that records
// what it reads and commits what it read (marks, autocommitted and on
// revoke).
type consumerMember848 struct {
	cl   *kgo.Client
	mu   sync.Mutex
	seen map[string]bool
	done chan struct{}
}

func startConsumerMember848(t *testing.T, seeds []string, name, group, topic string) *consumerMember848 {
	t.Helper()
	m := &consumerMember848{seen: map[string]bool{}, done: make(chan struct{})}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...),
		kgo.ClientID(name),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ServerSideBalancer(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(200*time.Millisecond),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.RetryTimeout(60*time.Second),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
			if err := cl.CommitMarkedOffsets(ctx); err != nil {
				t.Logf("%s: commit on revoke: %v", name, err)
			}
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	go func() {
		defer close(m.done)
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				cl.MarkCommitRecords(r)
				m.mu.Lock()
				m.seen[string(r.Value)] = true
				m.mu.Unlock()
			})
		}
	}()
	t.Cleanup(m.close)
	return m
}

func (m *consumerMember848) close() {
	m.cl.Close()
	<-m.done
}

// readAll848 reports whether the members together read every value of
// the round (prefix-partition-i, n a partition).
func readAll848(ms []*consumerMember848, prefix string, partitions, n int) bool {
	for p := range partitions {
		for i := range n {
			v := fmt.Sprintf("%s-%d-%d", prefix, p, i)
			found := false
			for _, m := range ms {
				m.mu.Lock()
				found = found || m.seen[v]
				m.mu.Unlock()
			}
			if !found {
				return false
			}
		}
	}
	return true
}

// describe848 returns the group as ConsumerGroupDescribe shows it, or
// false while the coordinator cannot answer.
func describe848(cl *kgo.Client, group string) (kmsg.ConsumerGroupDescribeResponseGroup, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
		return kmsg.ConsumerGroupDescribeResponseGroup{}, false
	}
	return resp.Groups[0], true
}

// waitStable848 waits until the group is Stable with n members and
// returns it as ConsumerGroupDescribe shows it.
func waitStable848(t *testing.T, cl *kgo.Client, group string, n int, when string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	var g kmsg.ConsumerGroupDescribeResponseGroup
	if !poll.For(60*time.Second, func() bool {
		var ok bool
		g, ok = describe848(cl, group)
		return ok && g.State == "Stable" && len(g.Members) == n
	}) {
		t.Fatalf("%s the group is not Stable with %d members: %+v", when, n, g)
	}
	return g
}

// TestConsumerGroupProtocolCoordinatorKilled kills the coordinator of a
// KIP-848 group of two franz-go members in a cluster of three brokers:
// the broker that takes over its partition of __consumer_offsets loads
// the group, the same members go on (no rejoin: their member ids stay),
// every record produced before and after is read, and the committed
// offsets are kept.
func TestConsumerGroupProtocolCoordinatorKilled(t *testing.T) {
	const topic, group, partitions, perRound = "cg848-kill", "cg848-kill-g", 4, 50
	c := StartCluster(t, 3, consumerGroupSettings...)
	c.createTopic(t, topic, partitions, 3)
	seeds := c.LiveAddrs()
	ms := []*consumerMember848{
		startConsumerMember848(t, seeds, "m1", group, topic),
		startConsumerMember848(t, seeds, "m2", group, topic),
	}
	parts := []int32{0, 1, 2, 3}
	pcl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner())) // acks=all: nothing acknowledged is lost in the kill
	produceTo(t, pcl, topic, parts, perRound, "before")
	if !poll.For(60*time.Second, func() bool { return readAll848(ms, "before", partitions, perRound) }) {
		t.Fatal("the members did not read every record produced before the kill")
	}
	admin := c.Client(t)
	before := waitStable848(t, admin, group, 2, "before the kill")
	coordinator := c.coordinatorOf(t, 0, group)
	t.Logf("killing broker %d, the coordinator of %s at group epoch %d", coordinator, group, before.Epoch)
	c.Broker(coordinator).Kill(t)

	produceTo(t, pcl, topic, parts, perRound, "after")
	if !poll.For(90*time.Second, func() bool { return readAll848(ms, "after", partitions, perRound) }) {
		t.Fatal("the members did not read every record produced after the kill")
	}
	after := waitStable848(t, admin, group, 2, "after the kill")
	ids := func(g kmsg.ConsumerGroupDescribeResponseGroup) string {
		var out []string
		for _, m := range g.Members {
			out = append(out, m.MemberID)
		}
		return strings.Join(out, ",")
	}
	if ids(after) != ids(before) || after.Epoch < before.Epoch {
		t.Fatalf("after the kill: members %s at group epoch %d; want the same members %s (no rejoin) at epoch >= %d", ids(after), after.Epoch, ids(before), before.Epoch)
	}
	for _, m := range ms {
		m.close()
	}
	committed := committedOffsets(t, admin, group, topic, partitions)
	for p, off := range committed {
		if off != 2*perRound {
			t.Fatalf("partition %d committed at %d, want %d", p, off, 2*perRound)
		}
	}
}
