package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// partitionRow finds the describe line of a partition and returns its
// CURRENT-OFFSET, LOG-END-OFFSET and LAG columns.
func partitionRow(t *testing.T, out, topic, partition string) []string {
	t.Helper()
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 8 && f[0] == topic && f[1] == partition {
			return f[2:5]
		}
	}
	t.Fatalf("no row for %s-%s in:\n%s", topic, partition, out)
	return nil
}

func TestGroupsLagAndReset(t *testing.T) {
	_, addr := startBroker(t)
	b := []string{"--bootstrap-server", addr}
	mustCLI(t, append([]string{"topic", "create", "--topic", "orders", "--partitions", "2"}, b...)...)
	produceLines(t, addr, "orders", 5) // all in partition 0

	r := mustCLI(t, append([]string{"consume", "orders", "--group", "billing", "--from-beginning", "--max-messages", "3"}, b...)...)
	if r.stdout != "value0\nvalue1\nvalue2\n" {
		t.Fatalf("consume --group: got %q", r.stdout)
	}
	if r = mustCLI(t, append([]string{"groups", "list"}, b...)...); !regexp.MustCompile(`^GROUP +TYPE +STATE\nbilling +classic +Empty\n$`).MatchString(r.stdout) {
		t.Errorf("list: got %q", r.stdout)
	}

	describe := func() string {
		t.Helper()
		return mustCLI(t, append([]string{"groups", "describe", "--group", "billing"}, b...)...).stdout
	}
	out := describe()
	if !strings.HasPrefix(out, "Group billing: state Empty, coordinator 0, 0 members\n\nTOPIC") ||
		!regexp.MustCompile(`TOPIC +PARTITION +CURRENT-OFFSET +LOG-END-OFFSET +LAG +CONSUMER-ID +HOST +CLIENT-ID\n`).MatchString(out) ||
		!strings.Contains(out, "Consumer group billing has no active members.") {
		t.Errorf("describe:\n%s", out)
	}
	if got := partitionRow(t, out, "orders", "0"); strings.Join(got, " ") != "3 5 2" {
		t.Errorf("partition 0: got current, end, lag %v, want 3 5 2\n%s", got, out)
	}

	// The group resumes where it committed: two records are left, and
	// consume ends once it printed them (a start too early would print
	// value0 first).
	r = mustCLI(t, append([]string{"consume", "orders", "--group", "billing", "--max-messages", "2", "--timeout", idleBound.String()}, b...)...)
	if r.stdout != "value3\nvalue4\n" {
		t.Errorf("resume: got %q", r.stdout)
	}
	if got := partitionRow(t, describe(), "orders", "0"); strings.Join(got, " ") != "5 5 0" {
		t.Errorf("after resume: got %v, want 5 5 0", got)
	}
	// Nothing left: --timeout ends it, and the offsets stay.
	r = mustCLI(t, append([]string{"consume", "orders", "--group", "billing", "--timeout", "500ms"}, b...)...)
	if r.stdout != "" || !strings.Contains(r.stderr, "Processed a total of 0 messages") {
		t.Errorf("at the end: got %q, stderr %q", r.stdout, r.stderr)
	}
	if got := partitionRow(t, describe(), "orders", "0"); strings.Join(got, " ") != "5 5 0" {
		t.Errorf("after consuming at the end: got %v, want 5 5 0", got)
	}

	reset := func(args ...string) result {
		t.Helper()
		return cli(t, append(append([]string{"groups", "reset-offsets", "--group", "billing", "--topic", "orders"}, args...), b...)...)
	}
	r = reset("--to-earliest")
	if r.code != 0 || !regexp.MustCompile(`billing +orders +0 +5 +0\n`).MatchString(r.stdout) || !regexp.MustCompile(`billing +orders +1 +- +0\n`).MatchString(r.stdout) ||
		!strings.Contains(r.stdout, "Dry run: nothing was changed. Add --execute") {
		t.Errorf("dry run: exit %d, stdout:\n%s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if got := partitionRow(t, describe(), "orders", "0"); strings.Join(got, " ") != "5 5 0" {
		t.Errorf("after dry run: got %v, want 5 5 0", got)
	}

	for i, tc := range []struct {
		args []string
		want string // current, end, lag of partition 0 afterwards
	}{
		{[]string{"--to-earliest", "--execute"}, "0 5 5"},
		{[]string{"--to-offset", "99", "--execute"}, "5 5 0"}, // kept within the log
		{[]string{"--to-offset", "2", "--partition", "0", "--execute"}, "2 5 3"},
		{[]string{"--to-latest", "--execute"}, "5 5 0"},
		{[]string{"--to-datetime", "2000-01-01T00:00:00Z", "--execute"}, "0 5 5"},
		{[]string{"--to-datetime", "4102444800000", "--execute"}, "5 5 0"}, // 2100: the end
	} {
		r := reset(tc.args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Committed the new offsets of group billing.") {
			t.Errorf("#%d %v: exit %d\n%s%s", i, tc.args, r.code, r.stdout, r.stderr)
			continue
		}
		if got := partitionRow(t, describe(), "orders", "0"); strings.Join(got, " ") != tc.want {
			t.Errorf("#%d %v: got %v, want %s", i, tc.args, got, tc.want)
		}
	}
	if r = reset("--to-earliest", "--topic", "nosuch"); r.code != 1 || !strings.Contains(r.stderr, `topic "nosuch" does not exist`) {
		t.Errorf("unknown topic: exit %d, stderr %q", r.code, r.stderr)
	}

	if r = mustCLI(t, append([]string{"groups", "delete", "--group", "billing"}, b...)...); r.stdout != "Deleted consumer group billing.\n" {
		t.Errorf("delete: got %q", r.stdout)
	}
	if r = mustCLI(t, append([]string{"groups", "list"}, b...)...); strings.Contains(r.stdout, "billing") {
		t.Errorf("list after delete: got %q", r.stdout)
	}
	r = cli(t, append([]string{"groups", "describe", "--group", "billing"}, b...)...)
	if r.code != 1 || !strings.Contains(r.stderr, `consumer group "billing" does not exist`) || !strings.Contains(r.stderr, "strata groups list") {
		t.Errorf("describe deleted: exit %d, stderr %q", r.code, r.stderr)
	}
	r = cli(t, append([]string{"groups", "delete", "--group", "billing"}, b...)...)
	if r.code != 1 || !strings.Contains(r.stderr, `consumer group "billing" does not exist`) {
		t.Errorf("delete again: exit %d, stderr %q", r.code, r.stderr)
	}
}

// A group with a live member shows it, and refuses offset resets and
// deletion.
func TestGroupsActiveMember(t *testing.T) {
	_, addr := startBroker(t)
	b := []string{"--bootstrap-server", addr}
	mustCLI(t, append([]string{"topic", "create", "--topic", "orders", "--partitions", "2"}, b...)...)
	produceLines(t, addr, "orders", 4)

	cl := newTestClient(t, addr, kgo.ConsumerGroup("live"), kgo.ConsumeTopics("orders"), kgo.ClientID("test-member"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := 0
	for got < 4 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}

	r := mustCLI(t, append([]string{"groups", "describe", "--group", "live"}, b...)...)
	if !strings.HasPrefix(r.stdout, "Group live: state Stable, protocol ") || !strings.Contains(r.stdout, ", 1 member\n") ||
		!regexp.MustCompile(`orders +0 +4 +4 +0 +\S+ +\S+ +test-member\n`).MatchString(r.stdout) ||
		!regexp.MustCompile(`MEMBERS\nCONSUMER-ID +HOST +CLIENT-ID +ASSIGNMENT\n\S+ +\S+ +test-member +orders:0,1\n`).MatchString(r.stdout) {
		t.Errorf("describe:\n%s", r.stdout)
	}

	r = cli(t, append([]string{"groups", "reset-offsets", "--group", "live", "--topic", "orders", "--to-earliest", "--execute"}, b...)...)
	if r.code != 1 || !strings.Contains(r.stderr, "consumer group live has active members (state Stable)") || !strings.Contains(r.stderr, "Stop the group's consumers") {
		t.Errorf("reset with a member: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = cli(t, append([]string{"groups", "delete", "--group", "live"}, b...)...)
	if r.code != 1 || !strings.Contains(r.stderr, "consumer group live has active members") {
		t.Errorf("delete with a member: exit %d, stderr %q", r.code, r.stderr)
	}
}

// --timeout counts from the group's first assignment, not from the start:
// joining waits group.initial.rebalance.delay.ms. The test sees the clock
// start and asks the broker about the group then: it must be Stable with
// the consumer as its member, which it is not during the join's delay.
// The records are produced only after that, so the consumer cannot have
// finished and left the group by the time the broker answers.
func TestConsumeGroupTimeoutAfterJoin(t *testing.T) {
	_, addr := startBrokerProps(t, map[string]string{"group.initial.rebalance.delay.ms": "1500"})
	mustCLI(t, "topic", "create", "--topic", "orders", "--partitions", "1", "--bootstrap-server", addr)
	adm := kadm.NewClient(newTestClient(t, addr))
	started := make(chan string, 1) // the group's state at the first start of the clock
	var first sync.Once
	clock := idleTimer
	idleTimer = func(d time.Duration) *time.Timer {
		first.Do(func() { started <- describeGroupState(adm, "slow") })
		// The clock must not run out before the records come: when they
		// come is up to the test and the machine.
		return clock(max(d, idleBound))
	}
	t.Cleanup(func() { idleTimer = clock })
	done := make(chan result, 1)
	go func() {
		done <- cli(t, "consume", "orders", "--group", "slow", "--from-beginning", "--max-messages", "2", "--timeout", "500ms", "--bootstrap-server", addr)
	}()
	select {
	case state := <-started:
		if state != "Stable with 1 member(s)" {
			t.Errorf("when the --timeout clock started, the group was %s; want Stable with 1 member(s)", state)
		}
	case r := <-done:
		t.Fatalf("consume ended before its clock started: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	case <-time.After(cliTimeout / 2):
		t.Fatal("the --timeout clock never started")
	}
	produceRecords(t, addr, &kgo.Record{Topic: "orders", Value: []byte("value0")}, &kgo.Record{Topic: "orders", Value: []byte("value1")})
	select {
	case r := <-done:
		if r.code != 0 || r.stdout != "value0\nvalue1\n" {
			t.Errorf("exit %d, got %q, stderr %q", r.code, r.stdout, r.stderr)
		}
	case <-time.After(cliTimeout / 2):
		t.Fatal("consume did not end after the records were produced")
	}
}

// describeGroupState is the state and member count of group, as the
// broker reports them, or the error.
func describeGroupState(adm *kadm.Client, group string) string {
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout/2)
	defer cancel()
	gs, err := adm.DescribeGroups(ctx, group)
	g, ok := gs[group]
	switch {
	case err != nil:
		return err.Error()
	case !ok:
		return "not described"
	case g.Err != nil:
		return g.Err.Error()
	}
	return fmt.Sprintf("%s with %d member(s)", g.State, len(g.Members))
}
