package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/broker"
	"github.com/twmb/franz-go/pkg/kgo"
)

// cliTimeout bounds one CLI invocation in tests.
const cliTimeout = 60 * time.Second

// idleBound is the --timeout of a consume that ends on --max-messages: it
// only ends one waiting for records that never come, with what it got,
// so it is far longer than records take to arrive on a loaded machine.
const idleBound = cliTimeout / 2

type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// startBroker runs an in-process broker on 127.0.0.1:0 in a temporary
// directory, stopped at the end of the test, and returns its address.
func startBroker(t *testing.T) (*broker.Server, string) {
	t.Helper()
	return startBrokerProps(t, nil)
}

// startBrokerProps is startBroker with more settings.
func startBrokerProps(t *testing.T, props map[string]string) (*broker.Server, string) {
	t.Helper()
	all := map[string]string{
		"listeners":                        "PLAINTEXT://127.0.0.1:0",
		"log.dirs":                         t.TempDir(),
		"offsets.topic.num.partitions":     "3",
		"group.initial.rebalance.delay.ms": "0",
		// Not the default 127.0.0.1:9404: tests run side by side.
		"metrics.listener": "",
	}
	maps.Copy(all, props)
	cfg, err := broker.ConfigFromProperties(all)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := broker.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cliTimeout/2)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil && !errors.Is(err, broker.ErrServerClosed) {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s, s.Addr().String()
}

// result is what one CLI invocation printed and returned.
type result struct {
	stdout, stderr string
	code           int
}

// cli runs `strata args...` in process, bounded by cliTimeout.
func cli(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- dispatch(args, &stdout, &stderr) }()
	select {
	case code := <-done:
		return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
	case <-time.After(cliTimeout):
		t.Fatalf("strata %s: still running after %v", strings.Join(args, " "), cliTimeout)
		return result{}
	}
}

// mustCLI runs `strata args...` and fails the test unless it exits 0.
func mustCLI(t *testing.T, args ...string) result {
	t.Helper()
	r := cli(t, args...)
	if r.code != 0 {
		t.Fatalf("strata %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// withStdin makes produce read in during the test.
func withStdin(t *testing.T, in string) {
	t.Helper()
	old := stdin
	stdin = strings.NewReader(in)
	t.Cleanup(func() { stdin = old })
}

// newTestClient is a franz-go client for addr, closed at the end of the
// test.
func newTestClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// closedPort returns a 127.0.0.1 address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestUnreachableBroker(t *testing.T) {
	addr := closedPort(t)
	for i, args := range [][]string{
		{"cluster"},
		{"topic", "list"},
		{"topic", "create", "--topic", "x"},
		{"consume", "--timeout", "1s", "x"},
		{"produce", "x"},
		{"groups", "list"},
	} {
		withStdin(t, "a\n")
		r := cli(t, append(args, "--bootstrap-server", addr)...)
		if r.code != 1 {
			t.Errorf("#%d %v: got exit %d, want 1\n%s", i, args, r.code, r.stderr)
		}
		for _, want := range []string{"cannot reach a broker at " + addr, "connection refused", "strata broker", "make run", "--bootstrap-server"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("#%d %v: stderr lacks %q:\n%s", i, args, want, r.stderr)
			}
		}
		// At once: the refused connection ends the probe, not its
		// timeout (which would say "no answer within").
		if strings.Contains(r.stderr, "no answer within") {
			t.Errorf("#%d %v: waited for the probe timeout instead of reporting the refused connection:\n%s", i, args, r.stderr)
		}
	}
}

func TestUnreachableBrokerOneOfTwo(t *testing.T) {
	_, addr := startBroker(t)
	r := mustCLI(t, "topic", "list", "--bootstrap-server", closedPort(t)+","+addr)
	if !strings.Contains(r.stdout, "__consumer_offsets") {
		t.Errorf("got %q, want the internal topic listed", r.stdout)
	}
}

// A broker that advertises an address this machine cannot reach: the
// error says so at once instead of timing out.
func TestAdvertisedAddressUnreachable(t *testing.T) {
	bad := closedPort(t)
	_, addr := startBrokerProps(t, map[string]string{"advertised.listeners": "PLAINTEXT://" + bad})
	for i, args := range [][]string{
		{"topic", "create", "--topic", "x"},
		{"consume", "__consumer_offsets"},
		{"groups", "describe", "--group", "g"},
	} {
		r := cli(t, append(args, "--bootstrap-server", addr)...)
		if r.code != 1 {
			t.Errorf("#%d %v: got exit %d, want 1\n%s", i, args, r.code, r.stderr)
		}
		for _, want := range []string{"cannot reach broker 0 at " + bad + ", the address it advertises", "connection refused", "advertised.listeners"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("#%d %v: stderr lacks %q:\n%s", i, args, want, r.stderr)
			}
		}
		// At once: the failed connections end the session, not the
		// request's timeout.
		if strings.Contains(r.stderr, "context deadline exceeded") || strings.Contains(r.stderr, "did not answer in time") {
			t.Errorf("#%d %v: waited for a timeout instead of reporting the advertised address:\n%s", i, args, r.stderr)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for i, tc := range []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"topic"}, "no action given"},
		{[]string{"topic", "frobnicate"}, `unknown action "frobnicate"`},
		{[]string{"topic", "create"}, "no topic given: name it as the argument ('strata topic create TOPIC') or with --topic TOPIC"},
		{[]string{"topic", "create", "--topic", "x", "--partitions", "0"}, "--partitions 0"},
		{[]string{"topic", "create", "--topic", "x", "--config", "novalue"}, "want key=value"},
		{[]string{"topic", "create", "a", "--topic", "b"}, `the topic is given twice, differently: "a" as the argument and "b" as --topic`},
		{[]string{"topic", "create", "a", "b"}, `want one topic, got 2 arguments: ["a" "b"]`},
		{[]string{"topic", "describe", "--nope"}, "unknown flag --nope\n"}, {[]string{"topic", "describe", "--exclude-internl"}, "unknown flag --exclude-internl: did you mean --exclude-internal?"},
		{[]string{"topic", "alter", "--topic", "x"}, "nothing to change"},
		{[]string{"topic", "elect-leaders", "--election-type", "random"}, "want preferred or unclean"},
		{[]string{"topic", "elect-leaders", "--partition", "1"}, "--partition needs --topic"},
		{[]string{"topic", "list", "--bootstrap-server", "nocolon"}, "want host:port"},
		{[]string{"topic", "list", "--bootstrap-server", ""}, "no address given"},
		{[]string{"produce"}, "no topic given"},
		{[]string{"produce", "a", "b"}, "want one topic, got 2 arguments"},
		{[]string{"produce", "a", "--topic", "b"}, "the topic is given twice"},
		{[]string{"produce", "--compression", "brotli", "t"}, "want none, gzip, snappy, lz4 or zstd"},
		{[]string{"produce", "--acks", "2", "t"}, "want 0, 1 or all"},
		{[]string{"consume"}, "no topic given"},
		{[]string{"consume", "--offset", "5", "t"}, "--offset needs --partition"},
		{[]string{"consume", "--offset", "-3", "--partition", "0", "t"}, "want an offset"},
		{[]string{"consume", "--from-beginning", "--from-time", "0", "t"}, "give one of"},
		{[]string{"consume", "--from-time", "yesterday", "t"}, "RFC 3339"},
		{[]string{"consume", "--group", "g", "--partition", "0", "t"}, "cannot go together"},
		{[]string{"consume", "--format", "xml", "t"}, "want text or json"},
		{[]string{"consume", "--timeout", "soon", "t"}, "invalid value"},
		{[]string{"groups", "describe"}, "no group given"},
		{[]string{"group", "describe", "g", "--group", "h"}, "the group is given twice"},
		{[]string{"groups", "reset-offsets", "--group", "g", "--topic", "t"}, "exactly one target"},
		{[]string{"groups", "reset-offsets", "--group", "g", "--topic", "t", "--to-earliest", "--to-latest"}, "exactly one target"},
		{[]string{"groups", "reset-offsets", "--group", "g", "--topic", "t", "--to-earliest", "--dry-run", "--execute"}, "cannot go together"},
		{[]string{"groups", "delete"}, "no group given"},
		{[]string{"cluster", "extra"}, `unknown action "extra"`},
		{[]string{"cluster", "rebalnce"}, `unknown action "rebalnce": did you mean rebalance?`},
		{[]string{"cluster", "rebalance", "3"}, `unexpected argument "3"`},
		{[]string{"cluster", "add-broker", "3", "--broker", "4"}, "the broker is given twice"},
		{[]string{"cluster", "add-broker", "x"}, `argument "x" (the --broker)`},
	} {
		r := cli(t, tc.args...)
		if r.code != 2 {
			t.Errorf("#%d %v: got exit %d, want 2\n%s", i, tc.args, r.code, r.stderr)
		}
		if !strings.Contains(r.stderr, tc.want) {
			t.Errorf("#%d %v: stderr lacks %q:\n%s", i, tc.args, tc.want, r.stderr)
		}
		if r.stdout != "" {
			t.Errorf("#%d %v: got stdout %q, want none", i, tc.args, r.stdout)
		}
	}
}

func TestHelp(t *testing.T) {
	for i, args := range [][]string{
		{"topic", "--help"},
		{"topic", "create", "--help"},
		{"topic", "list", "--help"},
		{"topic", "describe", "--help"},
		{"topic", "delete", "--help"},
		{"topic", "alter", "--help"},
		{"topic", "elect-leaders", "--help"},
		{"produce", "--help"},
		{"consume", "-h"},
		{"groups", "--help"},
		{"groups", "list", "--help"},
		{"groups", "describe", "--help"},
		{"groups", "reset-offsets", "--help"},
		{"groups", "delete", "--help"},
		{"cluster", "--help"},
	} {
		r := cli(t, args...)
		if r.code != 0 {
			t.Errorf("#%d %v: got exit %d, want 0\n%s", i, args, r.code, r.stderr)
		}
		_, example, _ := strings.Cut(r.stdout, "\nExample:\n")
		if !strings.HasPrefix(r.stdout, "Usage: strata "+args[0]) || !strings.Contains(example, "strata "+args[0]) {
			t.Errorf("#%d %v: help lacks usage or example:\n%s", i, args, r.stdout)
		}
		overview := (args[0] == "topic" || args[0] == "groups") && args[1] == "--help"
		if !overview && !strings.Contains(r.stdout, "--bootstrap-server host:port[,...]") {
			t.Errorf("#%d %v: help lacks --bootstrap-server:\n%s", i, args, r.stdout)
		}
		if r.stderr != "" {
			t.Errorf("#%d %v: got stderr %q, want none", i, args, r.stderr)
		}
	}
}
