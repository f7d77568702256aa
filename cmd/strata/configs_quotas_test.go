package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestConfigsQuotas: strata configs alters and describes client quotas
// of users, clients, both (kafka-configs.sh's two --entity-type) and
// their defaults; the broker's refusals come back with Kafka's message.
func TestConfigsQuotas(t *testing.T) {
	_, addr := startBroker(t)
	b := []string{"--bootstrap-server", addr}
	run := func(args ...string) result {
		t.Helper()
		return mustCLI(t, append(append([]string{"configs"}, args...), b...)...)
	}
	r := run("alter", "--entity-type", "clients", "--entity-name", "app", "--add-config", "producer_byte_rate=1048576")
	if !strings.Contains(r.stdout, "Completed updating config for client-id 'app'.") {
		t.Fatalf("alter clients: %s", r.stdout)
	}
	run("alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "app", "--add-config", "consumer_byte_rate=2048,request_percentage=25")
	run("--alter", "--entity-type", "users", "--entity-default", "--add-config", "producer_byte_rate=4096")
	run("alter", "--entity-type", "users", "--entity-default", "--entity-type", "clients", "--entity-default", "--add-config", "producer_byte_rate=8192")

	r = run("describe", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "app")
	if want := "Quota configs for user-principal 'alice', client-id 'app' are consumer_byte_rate=2048, request_percentage=25\n"; r.stdout != want {
		t.Fatalf("describe user+client: %q, want %q", r.stdout, want)
	}
	r = run("describe", "--entity-type", "clients")
	if want := "Quota configs for client-id 'app' are producer_byte_rate=1048576\n"; r.stdout != want {
		t.Fatalf("describe clients: %q", r.stdout)
	}
	r = run("describe", "--entity-type", "users", "--entity-default")
	if want := "Quota configs for the default user-principal are producer_byte_rate=4096\n"; r.stdout != want {
		t.Fatalf("describe default user: %q", r.stdout)
	}
	r = run("describe", "--entity-type", "users", "--entity-default", "--entity-type", "clients", "--entity-default", "--format", "json")
	var doc describedQuotas
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || len(doc.Entities) != 1 || doc.Entities[0].Quotas["producer_byte_rate"] != 8192 ||
		doc.Entities[0].Entity["user"] != nil || doc.Entities[0].Entity["client-id"] != nil || len(doc.Entities[0].Entity) != 2 {
		t.Fatalf("json: %v %s", err, r.stdout)
	}
	run("alter", "--entity-type", "clients", "--entity-name", "app", "--delete-config", "producer_byte_rate")
	if r := run("describe", "--entity-type", "clients", "--entity-name", "app"); r.stdout != "" {
		t.Fatalf("after delete: %q", r.stdout)
	}

	r = cli(t, append([]string{"configs", "alter", "--entity-type", "users", "--entity-name", "bob", "--add-config", "controller_mutation_rate=10"}, b...)...)
	if r.code != 1 || !strings.Contains(r.stderr, "Invalid configuration key controller_mutation_rate") {
		t.Fatalf("refused key: exit %d: %s", r.code, r.stderr)
	}
	for _, args := range [][]string{
		{"configs", "alter", "--entity-type", "users", "--add-config", "producer_byte_rate=1"},
		{"configs", "alter", "--entity-type", "users", "--entity-name", "a", "--add-config", "producer_byte_rate=fast"},
		{"configs", "alter", "--entity-type", "users", "--entity-name", "a", "--entity-type", "topics", "--entity-name", "t", "--add-config", "producer_byte_rate=1"},
		{"configs", "alter", "--entity-type", "users", "--entity-name", "a", "--entity-type", "users", "--entity-name", "b", "--add-config", "producer_byte_rate=1"},
		{"configs", "describe", "--entity-type", "clients", "--all"},
		{"configs", "describe", "--entity-type", "topics", "--entity-name", "a", "--entity-name", "b"},
	} {
		if r := cli(t, append(args, b...)...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2: %s", args, r.code, r.stderr)
		}
	}
}
