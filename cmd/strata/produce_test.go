package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// decodeJSON parses consume --format json output.
func decodeJSON(t *testing.T, out string) []jsonRecord {
	t.Helper()
	var recs []jsonRecord
	for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		var r jsonRecord
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("line %d %q: %v", i+1, line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

func str(s string) *string { return &s }

func TestProduceConsumeJSON(t *testing.T) {
	_, addr := startBroker(t)
	for i, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		topic := "t-" + codec
		mustCLI(t, "topic", "create", "--topic", topic, "--partitions", "1", "--bootstrap-server", addr)
		withStdin(t, "user-1:hello\r\nuser-2:wörld\nuser-1:{\"a\":\"<b>&\"}\nuser-3:\n:no key\nuser-4:a:b") // no final newline
		r := mustCLI(t, "produce", topic, "--key-separator", ":", "--header", "source=cli", "--header", "trace=", "--header", "source=again",
			"--compression", codec, "--bootstrap-server", addr)
		if !regexp.MustCompile(`^Produced 6 records \(62 bytes of keys and values\) to ` + topic + ` in [0-9.]+ s \([0-9]+ records/s\)\.\n$`).MatchString(r.stdout) {
			t.Errorf("#%d %s: summary %q", i, codec, r.stdout)
		}

		r = mustCLI(t, "consume", topic, "--from-beginning", "--max-messages", "6", "--format", "json", "--bootstrap-server", addr)
		headers := []jsonHeader{{Key: "source", Value: str("cli")}, {Key: "trace", Value: str("")}, {Key: "source", Value: str("again")}}
		want := []jsonRecord{
			{Key: str("user-1"), Value: str("hello")},
			{Key: str("user-2"), Value: str("wörld")},
			{Key: str("user-1"), Value: str(`{"a":"<b>&"}`)},
			{Key: str("user-3"), Value: str("")},
			{Key: str(""), Value: str("no key")},
			{Key: str("user-4"), Value: str("a:b")},
		}
		got := decodeJSON(t, r.stdout)
		if len(got) != len(want) {
			t.Fatalf("#%d %s: got %d records, want %d:\n%s", i, codec, len(got), len(want), r.stdout)
		}
		for j, g := range got {
			w := want[j]
			w.Topic, w.Partition, w.Offset, w.Timestamp, w.Headers = topic, 0, int64(j), g.Timestamp, headers
			if g.Timestamp <= 0 {
				t.Errorf("#%d %s record %d: timestamp %d", i, codec, j, g.Timestamp)
			}
			if gj, wj := jsonString(g), jsonString(w); gj != wj {
				t.Errorf("#%d %s record %d: got %s, want %s", i, codec, j, gj, wj)
			}
		}
		if !strings.Contains(r.stdout, `"value":"{\"a\":\"<b>&\"}"`) {
			t.Errorf("#%d %s: HTML characters escaped:\n%s", i, codec, r.stdout)
		}
		if r.stderr != "Processed a total of 6 messages\n" {
			t.Errorf("#%d %s: stderr %q", i, codec, r.stderr)
		}
	}
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// Records with the same key land in the same partition, as with Kafka's
// default partitioner.
func TestProduceKeyPartitioning(t *testing.T) {
	_, addr := startBroker(t)
	mustCLI(t, "topic", "create", "--topic", "keyed", "--partitions", "4", "--bootstrap-server", addr)
	var in strings.Builder
	for i := range 40 {
		fmt.Fprintf(&in, "k%d=v%d\n", i%5, i)
	}
	withStdin(t, in.String())
	mustCLI(t, "produce", "keyed", "--key-separator", "=", "--bootstrap-server", addr)
	r := mustCLI(t, "consume", "keyed", "--from-beginning", "--max-messages", "40", "--format", "json", "--bootstrap-server", addr)
	partOf := map[string]int32{}
	for _, rec := range decodeJSON(t, r.stdout) {
		if p, ok := partOf[*rec.Key]; ok && p != rec.Partition {
			t.Errorf("key %s in partitions %d and %d", *rec.Key, p, rec.Partition)
		}
		partOf[*rec.Key] = rec.Partition
	}
	if len(partOf) != 5 {
		t.Errorf("got %d keys, want 5", len(partOf))
	}
}

func TestProduceFileToPartition(t *testing.T) {
	_, addr := startBroker(t)
	mustCLI(t, "topic", "create", "--topic", "bulk", "--partitions", "3", "--bootstrap-server", addr)
	var in strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&in, "line %d\n", i)
	}
	path := filepath.Join(t.TempDir(), "lines.txt")
	if err := os.WriteFile(path, []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, acks := range []string{"all", "1", "0"} {
		r := mustCLI(t, "produce", "--file", path, "--partition", "1", "--acks", acks, "--compression", "lz4", "bulk", "--bootstrap-server", addr)
		if !strings.HasPrefix(r.stdout, "Produced 1000 records (") {
			t.Errorf("#%d acks %s: %q", i, acks, r.stdout)
		}
	}
	r := mustCLI(t, "consume", "bulk", "--partition", "1", "--from-beginning", "--max-messages", "3000", "--print-offset", "--bootstrap-server", addr)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 3000 {
		t.Fatalf("got %d lines, want 3000", len(lines))
	}
	for i, l := range lines {
		if want := fmt.Sprintf("Partition:1\tOffset:%d\tline %d", i, i%1000); l != want {
			t.Fatalf("line %d: got %q, want %q", i, l, want)
		}
	}
}

func TestProduceErrors(t *testing.T) {
	_, addr := startBroker(t)
	mustCLI(t, "topic", "create", "--topic", "orders", "--partitions", "2", "--bootstrap-server", addr)

	withStdin(t, "a:1\nb:2\nno separator\nc:3\n")
	r := cli(t, "produce", "orders", "--key-separator", ":", "--bootstrap-server", addr)
	if r.code != 1 || !strings.Contains(r.stderr, `line 3 has no key separator ":"`) || !strings.HasPrefix(r.stdout, "Produced 2 records") {
		t.Errorf("missing separator: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	withStdin(t, "x\n")
	r = cli(t, "produce", "orders", "--partition", "2", "--bootstrap-server", addr)
	if r.code != 1 || !strings.Contains(r.stderr, "topic orders has no partition 2 (it has 2)") {
		t.Errorf("unknown partition: exit %d, stderr %q", r.code, r.stderr)
	}

	r = cli(t, "produce", "orders", "--file", filepath.Join(t.TempDir(), "missing"), "--bootstrap-server", addr)
	if r.code != 1 || !strings.Contains(r.stderr, "no such file") {
		t.Errorf("missing file: exit %d, stderr %q", r.code, r.stderr)
	}

	// The broker creates unknown topics on first use by default.
	withStdin(t, "first\n")
	r = mustCLI(t, "produce", "fresh", "--bootstrap-server", addr)
	if !strings.HasPrefix(r.stdout, "Produced 1 record (5 bytes of keys and values) to fresh") {
		t.Errorf("auto-created: %q", r.stdout)
	}

	// A record larger than the topic allows.
	mustCLI(t, "topic", "create", "--topic", "small", "--config", "max.message.bytes=1000", "--bootstrap-server", addr)
	withStdin(t, strings.Repeat("x", 5000)+"\n")
	r = cli(t, "produce", "small", "--bootstrap-server", addr)
	if r.code != 1 || !strings.Contains(r.stderr, "1 record not acknowledged") || !strings.Contains(r.stderr, "MESSAGE_TOO_LARGE") || !strings.Contains(r.stderr, "max.message.bytes") {
		t.Errorf("too large: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestPlural(t *testing.T) {
	for i, tc := range []struct {
		n    int64
		want string
	}{{0, "0 records"}, {1, "1 record"}, {2, "2 records"}} {
		if got := plural(tc.n, "record"); got != tc.want {
			t.Errorf("#%d: got %q, want %q", i, got, tc.want)
		}
	}
}
