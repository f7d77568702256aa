package main

import (
	"regexp"
	"strings"
	"testing"
)

func TestTopicLifecycle(t *testing.T) {
	_, addr := startBroker(t)
	b := []string{"--bootstrap-server", addr}
	topic := func(args ...string) result { return cli(t, append(append([]string{"topic"}, args...), b...)...) }

	r := topic("create", "--topic", "orders", "--partitions", "3", "--replication-factor", "1",
		"--config", "retention.ms=3600000", "--config", "segment.bytes=1048576")
	if r.code != 0 || !regexp.MustCompile(`^Created topic orders: 3 partitions, replication factor 1, topic id [A-Za-z0-9_-]{22}\.\n$`).MatchString(r.stdout) {
		t.Fatalf("create: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	id := strings.TrimSuffix(strings.Fields(r.stdout)[len(strings.Fields(r.stdout))-1], ".")

	r = topic("create", "--topic", "orders")
	if r.code != 1 || !strings.Contains(r.stderr, "TOPIC_ALREADY_EXISTS") || !strings.Contains(r.stderr, "--if-not-exists") {
		t.Errorf("create again: exit %d, stderr %q", r.code, r.stderr)
	}
	if r = topic("create", "--topic", "orders", "--if-not-exists"); r.code != 0 || r.stdout != "Topic orders already exists.\n" {
		t.Errorf("create --if-not-exists: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = topic("create", "--topic", "bad", "--config", "no.such.config=1")
	if r.code != 1 || !strings.Contains(r.stderr, "INVALID_CONFIG") || !strings.Contains(r.stderr, "strata broker --help") {
		t.Errorf("create with a bad config: exit %d, stderr %q", r.code, r.stderr)
	}
	mustCLI(t, append([]string{"topic", "create", "--topic", "alpha"}, b...)...)

	r = topic("list")
	if want := "__consumer_offsets\nalpha\norders\n"; r.code != 0 || r.stdout != want {
		t.Errorf("list: exit %d, got %q, want %q", r.code, r.stdout, want)
	}
	if r = topic("list", "--exclude-internal"); r.stdout != "alpha\norders\n" {
		t.Errorf("list --exclude-internal: got %q", r.stdout)
	}

	r = topic("describe", "--topic", "orders")
	want := "Topic: orders\tTopicId: " + id + "\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=3600000,segment.bytes=1048576\n" +
		"\tTopic: orders\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0\n" +
		"\tTopic: orders\tPartition: 1\tLeader: 0\tReplicas: 0\tIsr: 0\n" +
		"\tTopic: orders\tPartition: 2\tLeader: 0\tReplicas: 0\tIsr: 0\n"
	if r.code != 0 || r.stdout != want {
		t.Errorf("describe: exit %d, stderr %q\ngot:\n%s\nwant:\n%s", r.code, r.stderr, r.stdout, want)
	}
	r = topic("describe")
	if r.code != 0 || !strings.Contains(r.stdout, "Topic: alpha\t") || !strings.Contains(r.stdout, "Topic: __consumer_offsets\t") || !strings.Contains(r.stdout, want) {
		t.Errorf("describe all: exit %d:\n%s", r.code, r.stdout)
	}
	r = topic("describe", "--topic", "nosuch")
	if r.code != 1 || !strings.Contains(r.stderr, `topic "nosuch" does not exist`) || !strings.Contains(r.stderr, "strata topic create --topic nosuch") {
		t.Errorf("describe unknown: exit %d, stderr %q", r.code, r.stderr)
	}

	r = topic("alter", "--topic", "orders", "--add-config", "retention.ms=60000", "--delete-config", "segment.bytes", "--partitions", "5")
	if r.code != 0 || r.stdout != "Altered configs of topic orders: set retention.ms=60000, removed segment.bytes.\nTopic orders now has 5 partitions (was 3).\n" {
		t.Errorf("alter: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = topic("describe", "--topic", "orders")
	if !strings.Contains(r.stdout, "PartitionCount: 5\tReplicationFactor: 1\tConfigs: retention.ms=60000\n") || !strings.Contains(r.stdout, "Partition: 4\tLeader: 0") {
		t.Errorf("describe after alter:\n%s", r.stdout)
	}
	r = topic("alter", "--topic", "orders", "--partitions", "2")
	if r.code != 1 || !strings.Contains(r.stderr, "has 5 partitions, more than --partitions 2") {
		t.Errorf("alter shrink: exit %d, stderr %q", r.code, r.stderr)
	}
	if r = topic("alter", "--topic", "orders", "--partitions", "5"); r.code != 0 || r.stdout != "Topic orders already has 5 partitions.\n" {
		t.Errorf("alter same count: exit %d, stdout %q", r.code, r.stdout)
	}
	r = topic("alter", "--topic", "orders", "--add-config", "retention.ms=soon")
	if r.code != 1 || !strings.Contains(r.stderr, "INVALID_CONFIG") {
		t.Errorf("alter bad value: exit %d, stderr %q", r.code, r.stderr)
	}
	if r = topic("alter", "--topic", "nosuch", "--partitions", "3"); r.code != 1 || !strings.Contains(r.stderr, `topic "nosuch" does not exist`) {
		t.Errorf("alter unknown: exit %d, stderr %q", r.code, r.stderr)
	}

	if r = topic("delete", "--topic", "orders"); r.code != 0 || r.stdout != "Deleted topic orders.\n" {
		t.Errorf("delete: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r = topic("delete", "--topic", "orders"); r.code != 1 || !strings.Contains(r.stderr, `topic "orders" does not exist`) {
		t.Errorf("delete again: exit %d, stderr %q", r.code, r.stderr)
	}
	if r = topic("delete", "--topic", "orders", "--if-exists"); r.code != 0 {
		t.Errorf("delete --if-exists: exit %d, stderr %q", r.code, r.stderr)
	}
	if r = topic("list", "--exclude-internal"); r.stdout != "alpha\n" {
		t.Errorf("list after delete: got %q", r.stdout)
	}
}

// On a single node every partition is led by its preferred replica: a
// preferred election is not needed, and an unclean one neither.
func TestTopicElectLeaders(t *testing.T) {
	_, addr := startBroker(t)
	mustCLI(t, "topic", "create", "--topic", "orders", "--partitions", "2", "--bootstrap-server", addr)
	r := cli(t, "topic", "elect-leaders", "--election-type", "preferred", "--topic", "orders", "--partition", "0", "--bootstrap-server", addr)
	if r.code != 0 || r.stdout != "Partitions already led by the right replica: orders-0.\n" {
		t.Errorf("preferred: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = cli(t, "topic", "elect-leaders", "--election-type", "unclean", "--topic", "orders", "--bootstrap-server", addr)
	if r.code != 0 || r.stdout != "Partitions already led by the right replica: orders-0, orders-1.\n" {
		t.Errorf("unclean: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = cli(t, "topic", "elect-leaders", "--bootstrap-server", addr)
	if r.code != 0 || r.stdout != "" {
		t.Errorf("all partitions: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = cli(t, "topic", "elect-leaders", "--topic", "nope", "--bootstrap-server", addr)
	if r.code != 1 {
		t.Errorf("unknown topic: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
