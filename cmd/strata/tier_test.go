package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratastream/strata/broker"

	"github.com/stratastream/strata/segment/poll"
)

// tierStatusJSON runs `strata tier status` with --format json and decodes
// it; it fails the test unless the exit status is want.
func tierStatusJSON(t *testing.T, want int, args ...string) tierStatusReport {
	t.Helper()
	r := cli(t, append([]string{"tier", "status", "--format", "json"}, args...)...)
	if r.code != want {
		t.Fatalf("tier status %v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, r.code, want, r.stdout, r.stderr)
	}
	var rep tierStatusReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("tier status %v: bad JSON: %v\n%s", args, err, r.stdout)
	}
	return rep
}

// rowJSON is r for a failure message: its values, not its pointers.
func rowJSON(r *tierPartitionStatus) string {
	b, err := json.Marshal(r)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func findRow(rep tierStatusReport, topic string, p int32) *tierPartitionStatus {
	for i := range rep.Partitions {
		if rep.Partitions[i].Topic == topic && rep.Partitions[i].Partition == p {
			return &rep.Partitions[i]
		}
	}
	return nil
}

// produceChunks produces rs in requests of 20 records, so that tiny
// segments roll between batches.
func produceChunks(t *testing.T, addr string, rs []*kgo.Record) {
	t.Helper()
	for i := 0; i < len(rs); i += 20 {
		produceRecords(t, addr, rs[i:min(i+20, len(rs))]...)
	}
}

// consumeAll reads partition 0 of topic from offset 0 up to n records.
func consumeAll(t *testing.T, addr, topic string, n int) {
	t.Helper()
	cl := newTestClient(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxPartitionBytes(8<<10))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for got := 0; got < n; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", got, n)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		got += fs.NumRecords()
	}
}

// TestTierStatus runs `strata tier status` against a running broker that
// tiers to the local-directory store: remote columns from the manifest,
// local ones from the data directory, the cache hit ratio from the
// broker's metrics; then pending segments once uploads stop.
func TestTierStatus(t *testing.T) {
	dir := t.TempDir()
	s, addr := startBrokerProps(t, map[string]string{
		"log.dirs":                        dir,
		"metrics.listener":                "127.0.0.1:0",
		"log.retention.check.interval.ms": "200",
		"strata.remote.poll.interval.ms":  "100",
	})
	const topic = "tiered"
	mustCLI(t, "topic", "create", "--topic", topic, "--partitions", "1", "--bootstrap-server", addr,
		"--config", "remote.storage.enable=true", "--config", "segment.bytes=4096",
		"--config", "local.retention.bytes=1", "--config", "file.delete.delay.ms=0")
	const n = 600
	firstRecord := time.Now() // no upload can be older
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(fmt.Sprintf("value-%04d-%s", i, strings.Repeat("x", 60)))})
	}
	produceChunks(t, addr, rs)

	metrics := s.MetricsAddr().String()
	args := []string{"--override", "log.dirs=" + dir, "--metrics-url", metrics}
	// Tiered: some segments uploaded (more than one segment's bytes, in
	// several) and deleted locally. The uploader gets there with the
	// sealed segments of the records produced, however slowly.
	var row *tierPartitionStatus
	if !poll.For(time.Minute, func() bool {
		row = findRow(tierStatusJSON(t, 0, args...), topic, 0)
		return row != nil && row.RemoteLogEnd != nil && *row.RemoteLogEnd > 0 && row.LocalLogStart != nil && *row.LocalLogStart > 0 &&
			row.RemoteSegments != nil && *row.RemoteSegments >= 2 && row.RemoteBytes != nil && *row.RemoteBytes > 4096
	}) {
		t.Fatalf("not tiered within a minute: %s", rowJSON(row))
	}

	// Replay from 0 twice: remote reads, the second from the cache.
	consumeAll(t, addr, topic, n)
	consumeAll(t, addr, topic, n)
	rep := tierStatusJSON(t, 0, args...)
	if rep.Cache == nil || rep.Cache.Misses == 0 || rep.MetricsURL == nil || !rep.DataDirFound {
		t.Fatalf("report header %+v", rep)
	}
	row = findRow(rep, topic, 0)
	if row == nil {
		t.Fatalf("no row for %s/0: %+v", topic, rep)
	}
	switch {
	case *row.RemoteLogStart != 0:
		t.Errorf("remote log start %d, want 0", *row.RemoteLogStart)
	case *row.LogEnd != n:
		t.Errorf("log end %d, want %d", *row.LogEnd, n)
	case *row.LocalLogStart > *row.RemoteLogEnd || *row.LocalLogStart <= 0:
		t.Errorf("local log start %d, want in (0, remote end %d]", *row.LocalLogStart, *row.RemoteLogEnd)
	case *row.LocalBytes <= 0 || *row.RemoteBytes <= 4096 || *row.RemoteSegments < 2:
		t.Errorf("local bytes %d, remote %d in %d segments", *row.LocalBytes, *row.RemoteBytes, *row.RemoteSegments)
	case row.LastUpload == nil || row.LastUpload.Before(firstRecord) || row.LastUpload.After(time.Now()):
		t.Errorf("last upload %v, want between the first record (%v) and now", row.LastUpload, firstRecord)
	case row.CacheReads == nil || *row.CacheReads == 0 || row.CacheHitRatio == nil || *row.CacheHitRatio <= 0:
		t.Errorf("cache reads %v ratio %v, want reads and some hits after the second replay", row.CacheReads, row.CacheHitRatio)
	case row.PendingSegments == nil:
		t.Errorf("pending segments not reported")
	}

	// Uploads off: new sealed segments stay pending, and age.
	mustCLI(t, "topic", "alter", "--topic", topic, "--add-config", "remote.storage.enable=false", "--bootstrap-server", addr)
	remoteEnd := *row.RemoteLogEnd
	more := make([]*kgo.Record, n) // new records: franz-go keeps state in sent ones
	for i := range more {
		more[i] = &kgo.Record{Topic: topic, Partition: 0, Value: append([]byte("more-"), rs[i].Value...)}
	}
	produceChunks(t, addr, more)
	// The oldest pending segment turns 1 s old a second after it was
	// sealed; the uploader (polling every 100 ms) had that second to
	// upload it, had uploads not stopped.
	if !poll.For(time.Minute, func() bool {
		rep = tierStatusJSON(t, 0, args...)
		row = findRow(rep, topic, 0)
		return row != nil && row.OldestPendingSeconds != nil && *row.OldestPendingSeconds >= 1
	}) {
		t.Fatalf("no pending segment 1 s old within a minute: %s", rowJSON(row))
	}
	if *row.RemoteLogEnd < remoteEnd || *row.LogEnd != 2*n {
		t.Fatalf("after uploads stopped: remote end %d (was %d), log end %d, want %d", *row.RemoteLogEnd, remoteEnd, *row.LogEnd, 2*n)
	}
	if *row.PendingSegments < 2 || *row.PendingBytes <= 0 || *row.OldestPendingSeconds < 1 {
		t.Fatalf("pending %d segments, %d bytes, oldest %.1fs; want several, at least 1 s old", *row.PendingSegments, *row.PendingBytes, *row.OldestPendingSeconds)
	}

	// The text form: the columns, one row for the partition.
	out := mustCLI(t, append([]string{"tier", "status", topic}, args...)...).stdout
	t.Logf("strata tier status %s:\n%s", topic, out)
	for _, want := range []string{"LOCAL START", "REMOTE START", "LOG END", "LOCAL BYTES", "REMOTE BYTES", "PENDING", "OLDEST PENDING", "LAST UPLOAD", "CACHE HIT", "chunk cache since the broker started"} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
	var fields []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == topic {
			fields = f
		}
	}
	if len(fields) != 12 || fields[5] != fmt.Sprint(2*n) || fields[8] != fmt.Sprint(*row.PendingSegments) || !strings.HasSuffix(fields[11], "%") {
		t.Errorf("text row %q, want 12 columns: log end %d, pending %d, a hit ratio\n%s", fields, 2*n, *row.PendingSegments, out)
	}
}

// TestTierStatusWithoutBroker: with no metrics endpoint the cache column is
// "-" and the status still succeeds; an explicit --metrics-url that cannot
// be read is an error; a topic found nowhere is an error.
func TestTierStatusWithoutBroker(t *testing.T) {
	dir := t.TempDir()
	_, addr := startBrokerProps(t, map[string]string{"log.dirs": dir, "strata.remote.poll.interval.ms": "100"})
	mustCLI(t, "topic", "create", "--topic", "quiet", "--partitions", "2", "--bootstrap-server", addr,
		"--config", "remote.storage.enable=true")
	produceLines(t, addr, "quiet", 5)

	// Named: its local partitions show though nothing is remote yet.
	// metrics.listener= (empty): no endpoint, not the default one.
	rep := tierStatusJSON(t, 0, "quiet", "--override", "log.dirs="+dir, "--override", "metrics.listener=")
	if rep.MetricsURL != nil || rep.Cache != nil || len(rep.Partitions) != 2 {
		t.Fatalf("report %+v, want no metrics and 2 partitions", rep)
	}
	p0 := rep.Partitions[0]
	if p0.LogEnd == nil || *p0.LogEnd != 5 || p0.RemoteLogEnd != nil || p0.CacheHitRatio != nil || *p0.PendingSegments != 0 {
		t.Fatalf("partition 0 %+v: want log end 5, nothing remote, no cache column, nothing pending", p0)
	}
	r := cli(t, "tier", "status", "quiet", "--override", "log.dirs="+dir, "--override", "metrics.listener=")
	if r.code != 0 || !strings.Contains(r.stdout, "broker metrics: none") {
		t.Fatalf("exit %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}

	rep = tierStatusJSON(t, 1, "quiet", "--override", "log.dirs="+dir, "--metrics-url", closedPort(t))
	if rep.MetricsError == "" || len(rep.Partitions) != 2 {
		t.Fatalf("unreadable metrics: %+v", rep)
	}
	tierStatusJSON(t, 1, "nosuch", "--override", "log.dirs="+dir)
	if r := cli(t, "tier", "status", "--format", "yaml", "--override", "log.dirs="+dir); r.code != 2 {
		t.Fatalf("--format yaml: exit %d", r.code)
	}
}

func TestTierMetricsURL(t *testing.T) {
	for i, tc := range []struct{ listen, flag, want string }{
		{"", "", ""},
		{"127.0.0.1:0", "", ""},
		{"0.0.0.0:9100", "", "http://127.0.0.1:9100/metrics"},
		{":9100", "", "http://127.0.0.1:9100/metrics"},
		{"[::]:9100", "", "http://127.0.0.1:9100/metrics"},
		{"10.0.0.5:9100", "", "http://10.0.0.5:9100/metrics"},
		{"10.0.0.5:9100", "host:1", "http://host:1/metrics"},
		{"", "https://host:1/custom", "https://host:1/custom"},
	} {
		if got := tierMetricsURL(broker.Config{MetricsListen: tc.listen}, tc.flag); got != tc.want {
			t.Errorf("#%d: got %q, want %q", i, got, tc.want)
		}
	}
}

func TestHasBootstrapFlag(t *testing.T) {
	for i, tc := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"orders", "--format", "json"}, false},
		{[]string{"--bootstrap-server", "h:1"}, true},
		{[]string{"orders", "-bootstrap-server=h:1"}, true},
		{[]string{"--", "--bootstrap-server", "h:1"}, false},
		{[]string{"--override", "bootstrap-server"}, false},
	} {
		if got := hasBootstrapFlag(tc.args); got != tc.want {
			t.Errorf("#%d: got %v, want %v", i, got, tc.want)
		}
	}
}

// TestTierStatusClusterUsage: cluster mode's usage errors exit 2, an
// unreachable cluster 1.
func TestTierStatusClusterUsage(t *testing.T) {
	for i, args := range [][]string{
		{"--bootstrap-server", "127.0.0.1:1", "--format", "yaml"},
		{"--bootstrap-server", "127.0.0.1:1", "a", "b"},
		{"--bootstrap-server", "127.0.0.1:1", "a", "--topic", "b"},
		{"--bootstrap-server", "127.0.0.1:1", "--override", "log.dirs=/x"},
	} {
		if r := cli(t, append([]string{"tier", "status"}, args...)...); r.code != 2 {
			t.Errorf("#%d: %v: exit %d, want 2\n%s", i, args, r.code, r.stderr)
		}
	}
	if r := cli(t, "tier", "status", "--bootstrap-server", closedPort(t)); r.code != 1 {
		t.Errorf("unreachable: exit %d, want 1\n%s", r.code, r.stderr)
	}
}
