package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTopicDeleteRecords runs 'strata topic delete-records' against a
// real broker: the convenience flags, kafka-delete-records.sh's JSON file
// (-1 for the high watermark), the log start the broker then reports,
// and the refusals.
func TestTopicDeleteRecords(t *testing.T) {
	_, addr := startBroker(t)
	b := []string{"--bootstrap-server", addr}
	dr := func(args ...string) result {
		return cli(t, append(append([]string{"topic", "delete-records"}, args...), b...)...)
	}
	mustCLI(t, append([]string{"topic", "create", "--topic", "orders", "--partitions", "2"}, b...)...)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DisableIdempotentWrite(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for p := int32(0); p < 2; p++ {
		var rs []*kgo.Record
		for i := 0; i < 20; i++ {
			rs = append(rs, &kgo.Record{Topic: "orders", Partition: p, Value: []byte(fmt.Sprint(i))})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	starts := func() string {
		lo, err := kadm.NewClient(cl).ListStartOffsets(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		o0, _ := lo.Lookup("orders", 0)
		o1, _ := lo.Lookup("orders", 1)
		return fmt.Sprintf("%d %d", o0.Offset, o1.Offset)
	}

	r := dr("--topic", "orders", "--partition", "0", "--offset", "5")
	if want := "Executing records delete operation\nRecords delete operation completed:\npartition: orders-0\tlow_watermark: 5\n"; r.code != 0 || r.stdout != want {
		t.Fatalf("--offset 5: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if got := starts(); got != "5 0" {
		t.Fatalf("log starts after --offset 5: %s", got)
	}

	file := filepath.Join(t.TempDir(), "offsets.json")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"partitions":[{"topic":"orders","partition":1,"offset":-1},{"topic":"orders","partition":0,"offset":12}],"version":1}`)
	r = dr("--offset-json-file", file)
	if want := "Executing records delete operation\nRecords delete operation completed:\npartition: orders-0\tlow_watermark: 12\npartition: orders-1\tlow_watermark: 20\n"; r.code != 0 || r.stdout != want {
		t.Fatalf("JSON file: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if got := starts(); got != "12 20" {
		t.Fatalf("log starts after the JSON file: %s", got)
	}

	// Above the high watermark, and an unknown topic: per partition.
	r = dr("--topic", "orders", "--partition", "0", "--offset", "21")
	if r.code != 1 || !strings.Contains(r.stdout, "partition: orders-0\terror: ") || !strings.Contains(r.stdout, "OFFSET_OUT_OF_RANGE") {
		t.Errorf("--offset 21: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = dr("--topic", "nosuch", "--partition", "0", "--offset", "1")
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("unknown topic: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if got := starts(); got != "12 20" {
		t.Fatalf("log starts after the refusals: %s", got)
	}

	// The file is validated as kafka-delete-records.sh does.
	for _, bad := range []struct{ json, want string }{
		{`{"partitions":[{"topic":"orders","partition":0,"offset":1}],"version":2}`, "not supported version"},
		{`{"partitions":[{"topic":"orders","partition":0,"offset":1},{"topic":"orders","partition":0,"offset":2}]}`, "duplicate topic partitions: orders-0"},
		{`{"partitions":[{"topic":"orders","offset":1}]}`, "partition is missing"},
		{`{"partitions":[{"topic":"orders","partition":0}]}`, "offset is missing"},
		{`{"partitions":[{"topic":"orders","partition":0,"offset":-2}]}`, "below -1"},
		{`{"partitions":[]}`, "no partitions"},
		{`{"partitions":[{"topic":"orders","partition":0,"offset":1,"extra":1}]}`, "not valid"},
		{`not json`, "not valid"},
	} {
		write(bad.json)
		if r := dr("--offset-json-file", file); r.code != 1 || !strings.Contains(r.stderr, bad.want) {
			t.Errorf("file %s: exit %d, stderr %q, want %q", bad.json, r.code, r.stderr, bad.want)
		}
	}
	for _, args := range [][]string{
		{},
		{"--topic", "orders"},
		{"--topic", "orders", "--partition", "0"},
		{"--offset-json-file", file, "--topic", "orders"},
	} {
		if r := dr(args...); r.code != 2 {
			t.Errorf("%q: exit %d, want 2 (usage), stderr %q", args, r.code, r.stderr)
		}
	}
	if got := starts(); got != "12 20" {
		t.Fatalf("log starts after the bad files: %s", got)
	}
}
