package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratastream/strata/segment/poll"
)

// shareRow is one partition line of a share group's describe, by column.
type shareRow struct {
	start, lag, inFlight, available, acquired, acknowledged, archiving, archived string
}

// shareRowOf finds the describe line of a partition of a share group.
func shareRowOf(t *testing.T, out, topic, partition string) shareRow {
	t.Helper()
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 10 && f[0] == topic && f[1] == partition {
			return shareRow{f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9]}
		}
	}
	t.Fatalf("no row for %s-%s in:\n%s", topic, partition, out)
	return shareRow{}
}

// atoi is n as a number, failing t when it is not one.
func atoi(t *testing.T, what, n string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(n, 10, 64)
	if err != nil {
		t.Fatalf("%s: %q is not a number", what, n)
	}
	return v
}

// shareTestBed is a broker with topic jobs (one partition, ten records)
// and share group workers configured to start at the earliest offset.
type shareTestBed struct {
	t    *testing.T
	addr string
	b    []string
}

func newShareTestBed(t *testing.T) *shareTestBed {
	t.Helper()
	_, addr := startBroker(t)
	tb := &shareTestBed{t: t, addr: addr, b: []string{"--bootstrap-server", addr}}
	tb.must("topic", "create", "jobs", "--partitions", "1")
	tb.must("configs", "alter", "--entity-type", "groups", "--entity-name", "workers", "--add-config", "share.auto.offset.reset=earliest")
	produceLines(t, addr, "jobs", 10)
	return tb
}

func (tb *shareTestBed) run(args ...string) result {
	tb.t.Helper()
	return cli(tb.t, append(args, tb.b...)...)
}

func (tb *shareTestBed) must(args ...string) result {
	tb.t.Helper()
	return mustCLI(tb.t, append(args, tb.b...)...)
}

func (tb *shareTestBed) describe() string {
	tb.t.Helper()
	return tb.must("groups", "describe", "workers").stdout
}

// holdRecords starts a share consumer of jobs in workers and polls until
// it holds records, which it does not acknowledge. It returns the
// consumer and how many it holds.
func (tb *shareTestBed) holdRecords() (*kgo.Client, int) {
	tb.t.Helper()
	cl := newTestClient(tb.t, tb.addr, kgo.ShareGroup("workers"), kgo.ConsumeTopics("jobs"), kgo.ClientID("share-worker"),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.ShareMaxRecords(4), kgo.ShareMaxRecordsStrict())
	held := 0
	poll.Until(tb.t, 20*time.Second, "the share consumer holds records", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		held += cl.PollRecords(ctx, 4).NumRecords()
		return held > 0
	})
	return cl, held
}

// waitEmpty waits until describe shows workers without members.
func (tb *shareTestBed) waitEmpty() string {
	tb.t.Helper()
	var out string
	poll.Until(tb.t, 20*time.Second, "share group workers is empty", func() bool {
		out = tb.describe()
		return strings.HasPrefix(out, "Share group workers: state Empty")
	})
	return out
}

// TestGroupsShareDescribe: a share group is listed with its type,
// described with its member, start offset, lag and the records its member
// holds (acquired on the leader); after the member acknowledges them the
// start offset moves and the lag drops; an unknown group is refused.
func TestGroupsShareDescribe(t *testing.T) {
	tb := newShareTestBed(t)
	if r := tb.run("groups", "describe", "workers"); r.code != 1 || !strings.Contains(r.stderr, `group "workers" does not exist`) {
		t.Fatalf("describe before any member: exit %d, stderr %q", r.code, r.stderr)
	}
	cl, held := tb.holdRecords()

	list := tb.must("groups", "list").stdout
	if !regexp.MustCompile(`(?m)^GROUP +TYPE +STATE\nworkers +share +Stable\n`).MatchString(list) {
		t.Errorf("list:\n%s", list)
	}
	for i, tc := range []struct {
		args []string
		want bool // workers listed
	}{{[]string{"--type", "share"}, true}, {[]string{"--group-type", "SHARE"}, true}, {[]string{"--type", "classic"}, false}} {
		out := tb.must(append([]string{"groups", "list"}, tc.args...)...).stdout
		if got := strings.Contains(out, "workers"); got != tc.want {
			t.Errorf("#%d list %v: listed %v, want %v:\n%s", i, tc.args, got, tc.want, out)
		}
	}
	if r := tb.run("groups", "list", "--type", "streams"); r.code != 2 || !strings.Contains(r.stderr, "want one of classic, consumer, share") {
		t.Errorf("list --type streams: exit %d, stderr %q", r.code, r.stderr)
	}
	var jl jsonGroupList
	if err := json.Unmarshal([]byte(tb.must("groups", "list", "--format", "json").stdout), &jl); err != nil || len(jl.Groups) != 1 || jl.Groups[0].GroupType != "share" {
		t.Errorf("list --format json: %+v, %v; want workers of group_type share", jl, err)
	}

	out := tb.describe()
	t.Logf("describe while held:\n%s", out)
	if !regexp.MustCompile(`^Share group workers: state Stable, group epoch \d+, coordinator 0, 1 member\n\n`+
		`TOPIC +PARTITION +START-OFFSET +LAG +IN-FLIGHT +AVAILABLE +ACQUIRED +ACKNOWLEDGED +ARCHIVING +ARCHIVED\n`).MatchString(out) ||
		!regexp.MustCompile(`MEMBERS\nCONSUMER-ID +HOST +CLIENT-ID +ASSIGNMENT\n\S+ +\S+ +share-worker +jobs:0\n`).MatchString(out) {
		t.Errorf("describe:\n%s", out)
	}
	row := shareRowOf(t, out, "jobs", "0")
	if row.start != "0" || row.lag != "10" || atoi(t, "ACQUIRED", row.acquired) < int64(held) || atoi(t, "IN-FLIGHT", row.inFlight) < int64(held) {
		t.Errorf("holding %d records: got %+v, want start 0, lag 10, at least %d acquired\n%s", held, row, held, out)
	}

	cl.MarkAcks(kgo.AckAccept)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 20*time.Second, "the start offset passes the accepted records and the lag drops", func() bool {
		row = shareRowOf(t, tb.describe(), "jobs", "0")
		return atoi(t, "START-OFFSET", row.start) >= int64(held) && atoi(t, "LAG", row.lag) <= 10-int64(held)
	})

	var jd jsonShareGroup
	if err := json.Unmarshal([]byte(tb.must("groups", "describe", "workers", "--format", "json").stdout), &jd); err != nil {
		t.Fatal(err)
	}
	if jd.GroupType != "share" || jd.State != "Stable" || len(jd.Members) != 1 || len(jd.Partitions) != 1 ||
		jd.Partitions[0].InFlight == nil || jd.Partitions[0].StartOffset == nil || *jd.Partitions[0].StartOffset < int64(held) {
		t.Errorf("describe --format json: %+v", jd)
	}
	if r := tb.run("groups", "reset-offsets", "workers", "--topic", "jobs", "--to-earliest", "--execute"); r.code != 1 ||
		!strings.Contains(r.stderr, "share group workers has active members") || !strings.Contains(r.stderr, "Stop the group's share consumers") {
		t.Errorf("reset with a member: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := tb.run("groups", "delete", "workers"); r.code != 1 || !strings.Contains(r.stderr, "share group workers has active members") {
		t.Errorf("delete with a member: exit %d, stderr %q", r.code, r.stderr)
	}
	cl.Close()

	// Without members the group still describes, from its state in the
	// share coordinator; once the member's share session on the leader
	// closed, the leader's copy is to be read again, so the in-flight
	// columns say nothing rather than show old figures.
	out = tb.waitEmpty()
	if row = shareRowOf(t, out, "jobs", "0"); atoi(t, "START-OFFSET", row.start) < int64(held) || !strings.Contains(out, "Share group workers has no active members.") {
		t.Errorf("empty group:\n%s", out)
	}
	poll.Until(t, 20*time.Second, "the in-flight columns show - once the leader's copy is stale", func() bool {
		row = shareRowOf(t, tb.describe(), "jobs", "0")
		return row.inFlight == "-" && row.acquired == "-" && row.archived == "-"
	})
}

// TestGroupsShareResetAndDelete: an empty share group's start offsets
// move with reset-offsets (dry run first), its offsets for a topic go
// with delete-offsets, and the group itself with delete; reset-offsets
// --type share makes a share group of an unused id.
func TestGroupsShareResetAndDelete(t *testing.T) {
	tb := newShareTestBed(t)
	cl, held := tb.holdRecords()
	cl.MarkAcks(kgo.AckAccept)
	cl.Close() // acknowledges what it holds as it leaves
	tb.waitEmpty()

	r := tb.must("groups", "reset-offsets", "workers", "--topic", "jobs", "--to-earliest")
	if !regexp.MustCompile(`workers +jobs +0 +\d+ +0\n`).MatchString(r.stdout) || !strings.Contains(r.stdout, "Dry run: nothing was changed.") {
		t.Errorf("dry run:\n%s", r.stdout)
	}
	for i, tc := range []struct {
		args       []string
		start, lag string
	}{
		{[]string{"--to-earliest"}, "0", "10"},
		{[]string{"--to-offset", "3"}, "3", "7"},
		{[]string{"--to-latest"}, "10", "0"},
	} {
		r := tb.must(append([]string{"groups", "reset-offsets", "workers", "--topic", "jobs", "--execute"}, tc.args...)...)
		if !strings.Contains(r.stdout, "Set the new start offsets of share group workers.") {
			t.Errorf("#%d %v: %s", i, tc.args, r.stdout)
		}
		if row := shareRowOf(t, tb.describe(), "jobs", "0"); row.start != tc.start || row.lag != tc.lag {
			t.Errorf("#%d %v: start %s lag %s, want %s %s", i, tc.args, row.start, row.lag, tc.start, tc.lag)
		}
	}
	t.Logf("the first member held %d records", held)

	if r := tb.must("groups", "delete-offsets", "workers", "--topic", "jobs"); r.stdout != "Deleted the offsets of share group workers for topic jobs.\n" {
		t.Errorf("delete-offsets: %q", r.stdout)
	}
	// The group stays, Empty, without the topic's offsets (as Kafka:
	// only DeleteGroups deletes a share group).
	if r := tb.run("groups", "describe", "workers"); r.code != 0 || !strings.HasPrefix(r.stdout, "Share group workers: state Empty") || strings.Contains(r.stdout, "jobs") {
		t.Errorf("describe after delete-offsets: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	// A new member starts by share.auto.offset.reset again (earliest),
	// which gives the group state once more; then delete removes it.
	cl, _ = tb.holdRecords()
	cl.Close()
	if row := shareRowOf(t, tb.waitEmpty(), "jobs", "0"); row.start != "0" {
		t.Errorf("after delete-offsets a member started at %s, want 0", row.start)
	}
	if r := tb.must("groups", "delete", "workers"); r.stdout != "Deleted share group workers.\n" {
		t.Errorf("delete: %q", r.stdout)
	}
	for _, args := range [][]string{{"groups", "describe", "workers"}, {"groups", "delete", "workers"}} {
		if r := tb.run(args...); r.code != 1 || !strings.Contains(r.stderr, `group "workers" does not exist`) {
			t.Errorf("%v after delete: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}

	// --type share makes a share group of an id nobody uses, with its
	// start offset set before any member reads.
	if r := tb.must("groups", "reset-offsets", "workers", "--topic", "jobs", "--to-offset", "4", "--type", "share", "--execute"); !strings.Contains(r.stdout, "Set the new start offsets of share group workers.") {
		t.Errorf("reset --type share of a new group: %s", r.stdout)
	}
	out := tb.describe()
	if row := shareRowOf(t, out, "jobs", "0"); !strings.HasPrefix(out, "Share group workers: state Empty") || row.start != "4" || row.lag != "6" {
		t.Errorf("after reset --type share:\n%s", out)
	}
	if r := tb.run("groups", "reset-offsets", "workers", "--topic", "jobs", "--to-earliest", "--type", "consumer"); r.code != 1 ||
		!strings.Contains(r.stderr, "group workers is a share group, not a consumer group") {
		t.Errorf("reset --type consumer of a share group: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestGroupsDeleteOffsetsConsumerGroup: delete-offsets of a consumer
// group deletes its committed offsets of the topic (OffsetDelete);
// reset-offsets --type share refuses a consumer group.
func TestGroupsDeleteOffsetsConsumerGroup(t *testing.T) {
	_, addr := startBroker(t)
	b := []string{"--bootstrap-server", addr}
	mustCLI(t, append([]string{"topic", "create", "orders", "--partitions", "2"}, b...)...)
	produceLines(t, addr, "orders", 3)
	mustCLI(t, append([]string{"consume", "orders", "--group", "billing", "--from-beginning", "--max-messages", "3"}, b...)...)
	if got := partitionRow(t, mustCLI(t, append([]string{"groups", "describe", "billing"}, b...)...).stdout, "orders", "0"); got[0] != "3" {
		t.Fatalf("committed %v, want 3", got)
	}
	r := cli(t, append([]string{"groups", "reset-offsets", "billing", "--topic", "orders", "--to-earliest", "--type", "share"}, b...)...)
	if r.code != 1 || !strings.Contains(r.stderr, "group billing is a consumer group, not a share group") {
		t.Errorf("reset --type share of a consumer group: exit %d, stderr %q", r.code, r.stderr)
	}
	r = mustCLI(t, append([]string{"groups", "delete-offsets", "billing", "--topic", "orders"}, b...)...)
	if r.stdout != "Deleted the offsets of consumer group billing for topic orders.\n" {
		t.Errorf("delete-offsets: %q", r.stdout)
	}
	if out := mustCLI(t, append([]string{"groups", "describe", "billing"}, b...)...).stdout; regexp.MustCompile(`(?m)^orders `).MatchString(out) {
		t.Errorf("describe after delete-offsets still shows offsets of orders:\n%s", out)
	}
	if r = cli(t, append([]string{"groups", "delete-offsets", "nobody", "--topic", "orders"}, b...)...); r.code != 1 || !strings.Contains(r.stderr, `group "nobody" does not exist`) {
		t.Errorf("delete-offsets of an unknown group: exit %d, stderr %q", r.code, r.stderr)
	}
}
