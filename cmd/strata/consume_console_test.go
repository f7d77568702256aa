package main

// Tests of the console tools' Kafka behaviours: consume --exit-at-end
// (kcat -e), the progress on stderr, kafka-console-consumer.sh's and
// kafka-console-producer.sh's --property settings. A real broker, in
// process.

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestConsumeExitAtEnd(t *testing.T) {
	_, addr := startBroker(t)
	b := []string{"--bootstrap-server", addr}
	mustCLI(t, append([]string{"topic", "create", "ends", "--partitions", "3"}, b...)...)
	produce := func(lines string) {
		t.Helper()
		withStdin(t, lines)
		mustCLI(t, append([]string{"produce", "ends", "--key-separator", ":"}, b...)...)
	}
	var lines strings.Builder
	for i := range 30 {
		fmt.Fprintf(&lines, "k%d:v%d\n", i, i)
	}
	produce(lines.String())
	values := func(out string) int { return strings.Count(out, "\n") }

	// No --timeout, no --max-messages: it ends at the end, exit 0.
	for _, e := range []string{"--exit-at-end", "-e"} {
		r := mustCLI(t, append([]string{"consume", "ends", e, "--from-beginning"}, b...)...)
		if values(r.stdout) != 30 || !strings.Contains(r.stderr, "Processed a total of 30 messages") {
			t.Errorf("consume %s --from-beginning: got %d records, stderr %q; want 30", e, values(r.stdout), r.stderr)
		}
	}
	// At the end already (the default start): nothing, exit 0.
	if r := mustCLI(t, append([]string{"consume", "ends", "-e"}, b...)...); r.stdout != "" {
		t.Errorf("consume -e from the end: got %q, want nothing", r.stdout)
	}
	// One partition, from an offset.
	if r := mustCLI(t, append([]string{"consume", "ends", "-e", "--partition", "0", "--offset", "0", "--print-offset"}, b...)...); !strings.HasPrefix(r.stdout, "Partition:0\tOffset:0\t") {
		t.Errorf("consume -e --partition 0 --offset 0: got %q", r.stdout)
	}
	// A group: its first run reads all, the next nothing (committed at the
	// end), then only what came after.
	g := append([]string{"consume", "ends", "-e", "--group", "eg", "--from-beginning"}, b...)
	if r := mustCLI(t, g...); values(r.stdout) != 30 {
		t.Errorf("consume -e --group (first): got %d records, want 30:\n%s", values(r.stdout), r.stderr)
	}
	if r := mustCLI(t, g...); values(r.stdout) != 0 {
		t.Errorf("consume -e --group (again): got %d records, want 0", values(r.stdout))
	}
	produce("a:1\nb:2\nc:3\n")
	if r := mustCLI(t, g...); values(r.stdout) != 3 {
		t.Errorf("consume -e --group (after 3 more): got %d records, want 3:\n%s", values(r.stdout), r.stdout)
	}
	// --format json with -e: an object a line.
	r := mustCLI(t, append([]string{"consume", "ends", "-e", "--from-beginning", "--format", "json"}, b...)...)
	n := 0
	for l := range strings.Lines(r.stdout) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec["topic"] != "ends" {
			t.Fatalf("consume --format json: line %q: %v", l, err)
		}
		n++
	}
	if n != 33 {
		t.Errorf("consume -e --format json: got %d lines, want 33", n)
	}

	// A transaction ends with a marker the consumer does not print: -e
	// still gets to the end.
	mustCLI(t, append([]string{"topic", "create", "txends", "--partitions", "1"}, b...)...)
	tx := newTestClient(t, addr, kgo.TransactionalID("ends-tx"), kgo.DefaultProduceTopic("txends"))
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := tx.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "t%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if r := mustCLI(t, append([]string{"consume", "txends", "-e", "--from-beginning"}, b...)...); r.stdout != "t0\nt1\n" {
		t.Errorf("consume -e of a committed transaction: got %q, want t0, t1", r.stdout)
	}
	if r := mustCLI(t, append([]string{"consume", "txends", "-e", "--group", "txg", "--from-beginning"}, b...)...); r.stdout != "t0\nt1\n" {
		t.Errorf("consume -e --group of a committed transaction: got %q, want t0, t1", r.stdout)
	}
}

func TestConsoleProperties(t *testing.T) {
	_, addr := startBroker(t)
	b := []string{"--bootstrap-server", addr}
	mustCLI(t, append([]string{"topic", "create", "props", "--partitions", "1"}, b...)...)
	// kafka-console-producer.sh's parse.key, with its tab and with a
	// key.separator.
	withStdin(t, "k1\tv1\n")
	mustCLI(t, append([]string{"produce", "props", "--property", "parse.key=true"}, b...)...)
	withStdin(t, "k2::v2\n")
	mustCLI(t, append([]string{"produce", "props", "--property", "parse.key=true", "--property", "key.separator=::", "--header", "h1=x", "--header", "h2=y"}, b...)...)
	withStdin(t, "k3:v3\n")
	mustCLI(t, append([]string{"produce", "props", "--key-separator", ":"}, b...)...)

	r := mustCLI(t, append([]string{"consume", "props", "-e", "--from-beginning",
		"--property", "print.timestamp=true", "--property", "print.partition=true", "--property", "print.offset=true",
		"--property", "print.headers=true", "--property", "print.key=true",
		"--property", "key.separator= | ", "--property", "headers.separator=;"}, b...)...)
	want := regexp.MustCompile(`^CreateTime:\d{13} \| Partition:0 \| Offset:0 \| NO_HEADERS \| k1 \| v1
CreateTime:\d{13} \| Partition:0 \| Offset:1 \| h1:x;h2:y \| k2 \| v2
CreateTime:\d{13} \| Partition:0 \| Offset:2 \| NO_HEADERS \| k3 \| v3
$`)
	if !want.MatchString(r.stdout) {
		t.Errorf("consume with the formatter's properties: got\n%s\nwant\n%s", r.stdout, want)
	}
	// --print-key and --print-offset are print.key and print.partition +
	// print.offset.
	short := mustCLI(t, append([]string{"consume", "props", "-e", "--from-beginning", "--print-key", "--print-offset"}, b...)...).stdout
	long := mustCLI(t, append([]string{"consume", "props", "-e", "--from-beginning", "--property", "print.key=true", "--property", "print.partition=true", "--property", "print.offset=true"}, b...)...).stdout
	if short != long || !strings.HasPrefix(short, "Partition:0\tOffset:0\tk1\tv1\n") {
		t.Errorf("--print-key --print-offset:\n%s\nvs the properties:\n%s", short, long)
	}
	if r := mustCLI(t, append([]string{"consume", "props", "-e", "--from-beginning", "--property", "print.value=false", "--property", "print.key=true", "--property", "line.separator=;"}, b...)...); r.stdout != "k1;k2;k3;" {
		t.Errorf("print.value=false print.key=true line.separator=;: got %q", r.stdout)
	}

	for i, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"consume", "props", "--property", "print.tiemstamp=true"}, `unknown property "print.tiemstamp": did you mean print.timestamp?; the known ones: headers.separator, key.separator`},
		{[]string{"consume", "props", "--property", "print.key=yes"}, `--property print.key="yes": want true or false`},
		{[]string{"consume", "props", "--property", "print.key"}, "want KEY=VALUE"},
		{[]string{"consume", "props", "--format", "json", "--property", "print.key=true"}, "does not go with --format json"},
		{[]string{"consume", "props", "--progress", "--no-progress"}, "give one of --progress and --no-progress"},
		{[]string{"consume", "props", "--format", "xml"}, `invalid value "xml" for flag --format: want text or json`},
		{[]string{"produce", "props", "--property", "parse.headers=true"}, `unknown property "parse.headers"`},
		{[]string{"produce", "props", "--property", "parse.key=true", "--property", "key.separator=:", "--key-separator", ";"}, "differ: give one"},
	} {
		r := cli(t, append(tc.args, b...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("#%d strata %v: got exit %d, stderr %q; want 2 and %q", i, tc.args, r.code, r.stderr, tc.want)
		}
	}
}

func TestConsumeProgress(t *testing.T) {
	_, addr := startBroker(t)
	b := []string{"--bootstrap-server", addr}
	mustCLI(t, append([]string{"topic", "create", "prog", "--partitions", "2"}, b...)...)
	withStdin(t, strings.Repeat("0123456789\n", 200))
	mustCLI(t, append([]string{"produce", "prog"}, b...)...)
	r := mustCLI(t, append([]string{"consume", "prog", "-e", "--from-beginning", "--progress"}, b...)...)
	want := regexp.MustCompile(`(?m)^strata consume: 200 records, \d+\.\d\d MB/s, at 200 of 200 \(0 behind the end\)$`)
	if !want.MatchString(r.stderr) {
		t.Errorf("consume --progress: stderr\n%s\nwant a last line matching %s", r.stderr, want)
	}
	// Not a terminal, not asked: none.
	for _, extra := range [][]string{nil, {"--no-progress"}} {
		r := mustCLI(t, append(append([]string{"consume", "prog", "-e", "--from-beginning"}, extra...), b...)...)
		if strings.Contains(r.stderr, "MB/s") {
			t.Errorf("consume %v to a buffer: got progress:\n%s", extra, r.stderr)
		}
	}
}
