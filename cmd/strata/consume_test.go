package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// produceRecords sends rs synchronously with franz-go.
func produceRecords(t *testing.T, addr string, rs ...*kgo.Record) {
	t.Helper()
	cl := newTestClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// produceLines sends "value0".."value{n-1}" to partition 0 of topic.
func produceLines(t *testing.T, addr, topic string, n int) {
	t.Helper()
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, "value%d\n", i)
	}
	withStdin(t, in.String())
	mustCLI(t, "produce", topic, "--partition", "0", "--bootstrap-server", addr)
}

func TestConsumeOffset(t *testing.T) {
	_, addr := startBroker(t)
	mustCLI(t, "topic", "create", "--topic", "log", "--partitions", "2", "--bootstrap-server", addr)
	produceLines(t, addr, "log", 5)
	for i, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--offset", "2", "--max-messages", "2"}, "Partition:0\tOffset:2\tvalue2\nPartition:0\tOffset:3\tvalue3\n"},
		{[]string{"--offset", "4", "--max-messages", "1"}, "Partition:0\tOffset:4\tvalue4\n"},
		{[]string{"--offset", "earliest", "--max-messages", "1"}, "Partition:0\tOffset:0\tvalue0\n"},
		{[]string{"--offset", "latest", "--timeout", "300ms"}, ""},
		{[]string{"--offset", "99", "--timeout", "300ms"}, ""}, // past the end: waits at the end
		{[]string{"--from-beginning", "--max-messages", "1"}, "Partition:0\tOffset:0\tvalue0\n"},
	} {
		args := append([]string{"consume", "log", "--partition", "0", "--print-offset", "--bootstrap-server", addr}, tc.args...)
		r := cli(t, args...)
		if r.code != 0 || r.stdout != tc.want {
			t.Errorf("#%d %v: exit %d, got %q, want %q; stderr %q", i, tc.args, r.code, r.stdout, tc.want, r.stderr)
		}
		if moved := strings.Contains(r.stderr, "is past the end of log-0; starting at the end, 5\n"); moved != (tc.args[1] == "99") {
			t.Errorf("#%d %v: stderr %q", i, tc.args, r.stderr)
		}
	}
	r := cli(t, "consume", "log", "--partition", "1", "--from-beginning", "--timeout", "300ms", "--bootstrap-server", addr)
	if r.code != 0 || r.stdout != "" || r.stderr != "Processed a total of 0 messages\n" {
		t.Errorf("empty partition: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = cli(t, "consume", "log", "--partition", "7", "--bootstrap-server", addr)
	if r.code != 1 || !strings.Contains(r.stderr, "topic log has no partition 7") {
		t.Errorf("unknown partition: exit %d, stderr %q", r.code, r.stderr)
	}
	r = cli(t, "consume", "nosuch", "--bootstrap-server", addr)
	if r.code != 1 || !strings.Contains(r.stderr, `topic "nosuch" does not exist`) {
		t.Errorf("unknown topic: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestConsumeFromTime(t *testing.T) {
	_, addr := startBroker(t)
	mustCLI(t, "topic", "create", "--topic", "events", "--partitions", "2", "--bootstrap-server", addr)
	base := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	var rs []*kgo.Record
	for i := range 6 {
		rs = append(rs, &kgo.Record{Topic: "events", Partition: int32(i % 2), Value: fmt.Appendf(nil, "e%d", i), Timestamp: base.Add(time.Duration(i) * time.Minute)})
	}
	cl := newTestClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		from string
		want []string // values, any order
	}{
		{"2024-05-01T12:03:00Z", []string{"e3", "e4", "e5"}},
		{"2024-05-01T14:02:30+02:00", []string{"e3", "e4", "e5"}},
		{fmt.Sprint(base.Add(4 * time.Minute).UnixMilli()), []string{"e4", "e5"}},
		{"0", []string{"e0", "e1", "e2", "e3", "e4", "e5"}},
		{"2030-01-01T00:00:00Z", nil}, // after every record: the end
	} {
		// Records expected: consume until it printed as many, so that how
		// soon they arrive does not matter. Records of a partition come in
		// order and every case wants some of each partition, so a start
		// too early shows among them; a start too late leaves fewer, and
		// --timeout (a bound against a hang) ends it. None expected:
		// --timeout ends it.
		args := []string{"consume", "events", "--from-time", tc.from, "--format", "json", "--bootstrap-server", addr}
		if len(tc.want) > 0 {
			args = append(args, "--max-messages", fmt.Sprint(len(tc.want)), "--timeout", idleBound.String())
		} else {
			args = append(args, "--timeout", "500ms")
		}
		r := cli(t, args...)
		if r.code != 0 {
			t.Fatalf("#%d: exit %d: %s", i, r.code, r.stderr)
		}
		got := map[string]bool{}
		for _, rec := range decodeJSON(t, r.stdout) {
			got[*rec.Value] = true
			var n int
			fmt.Sscanf(*rec.Value, "e%d", &n)
			if want := base.Add(time.Duration(n) * time.Minute).UnixMilli(); rec.Timestamp != want {
				t.Errorf("#%d: %s has timestamp %d, want %d", i, *rec.Value, rec.Timestamp, want)
			}
		}
		if len(got) != len(tc.want) {
			t.Errorf("#%d --from-time %s: got %v, want %v", i, tc.from, got, tc.want)
		}
		for _, w := range tc.want {
			if !got[w] {
				t.Errorf("#%d --from-time %s: got %v, want %v", i, tc.from, got, tc.want)
			}
		}
	}
	// One partition from a time.
	r := mustCLI(t, "consume", "events", "--partition", "1", "--from-time", "2024-05-01T12:02:00Z", "--max-messages", "2", "--bootstrap-server", addr)
	if r.stdout != "e3\ne5\n" {
		t.Errorf("partition 1 from a time: got %q", r.stdout)
	}
}

// Keys, values and header values that are not UTF-8 come out as base64
// with a flag; null ones as null.
func TestConsumeJSONBinaryAndNull(t *testing.T) {
	_, addr := startBroker(t)
	mustCLI(t, "topic", "create", "--topic", "bin", "--partitions", "1", "--bootstrap-server", addr)
	ts := time.UnixMilli(1714564800123)
	produceRecords(t, addr,
		&kgo.Record{Topic: "bin", Key: []byte{0xff, 0x00, 'a'}, Value: nil, Timestamp: ts,
			Headers: []kgo.RecordHeader{{Key: "raw", Value: []byte{0xc3, 0x28}}, {Key: "nil", Value: nil}}},
		&kgo.Record{Topic: "bin", Key: nil, Value: []byte("plain\nwith newline"), Timestamp: ts},
	)
	r := mustCLI(t, "consume", "bin", "--from-beginning", "--max-messages", "2", "--format", "json", "--bootstrap-server", addr)
	want := `{"topic":"bin","partition":0,"offset":0,"timestamp":1714564800123,"key":"/wBh","key_base64":true,"value":null,"headers":[{"key":"raw","value":"wyg=","value_base64":true},{"key":"nil","value":null}]}` + "\n" +
		`{"topic":"bin","partition":0,"offset":1,"timestamp":1714564800123,"key":null,"value":"plain\nwith newline","headers":[]}` + "\n"
	if r.stdout != want {
		t.Errorf("got:\n%s\nwant:\n%s", r.stdout, want)
	}
	r = mustCLI(t, "consume", "bin", "--from-beginning", "--max-messages", "2", "--print-key", "--bootstrap-server", addr)
	if want := "\xff\x00a\tnull\nnull\tplain\nwith newline\n"; r.stdout != want {
		t.Errorf("text: got %q, want %q", r.stdout, want)
	}
}

// Without a start flag, consume prints only records produced after it
// started.
func TestConsumeFromEnd(t *testing.T) {
	_, addr := startBroker(t)
	mustCLI(t, "topic", "create", "--topic", "live", "--partitions", "1", "--bootstrap-server", addr)
	produceLines(t, addr, "live", 3)
	done := make(chan result, 1)
	go func() { done <- cli(t, "consume", "live", "--max-messages", "1", "--bootstrap-server", addr) }()
	cl := newTestClient(t, addr)
	deadline := time.Now().Add(cliTimeout / 2) // before cli gives up
	for {
		ctx, cancel := context.WithTimeout(context.Background(), cliTimeout/2)
		err := cl.ProduceSync(ctx, &kgo.Record{Topic: "live", Value: []byte("new")}).FirstErr()
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-done:
			if r.code != 0 || r.stdout != "new\n" {
				t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
			}
			return
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("consume printed nothing new")
		}
	}
}
