package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

func TestParseAddConfig(t *testing.T) {
	got, err := parseAddConfig("a=1, cleanup.policy=[compact,delete],b=x y,c=")
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]string{{"a", "1"}, {"cleanup.policy", "compact,delete"}, {"b", "x y"}, {"c", ""}}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	for _, bad := range []string{"", "a", "=1", "a=[1,2", "a=[1]x", "a=1]", "a,b=1"} {
		if _, err := parseAddConfig(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestConfigsDescribeAlter runs strata configs against a broker (the
// embedded coordinator): a cluster default and a per-broker dynamic
// config with both action spellings, described with their sources and
// synonyms (text and JSON); a topic's list config set with brackets and
// deleted; a setting that is not dynamic refused with the broker's
// message.
func TestConfigsDescribeAlter(t *testing.T) {
	_, addr := startBroker(t)
	b := []string{"--bootstrap-server", addr}
	mustCLI(t, append([]string{"configs", "alter", "--entity-type", "brokers", "--entity-default", "--add-config", "log.retention.ms=3600000"}, b...)...)
	r := mustCLI(t, append([]string{"configs", "--describe", "--entity-type", "brokers", "--entity-default"}, b...)...)
	if !strings.Contains(r.stdout, "Default configs for brokers in the cluster are:") ||
		!strings.Contains(r.stdout, "log.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000, DEFAULT_CONFIG:log.retention.ms=") {
		t.Fatalf("describe default:\n%s", r.stdout)
	}
	r = mustCLI(t, append([]string{"configs", "--alter", "--entity-type", "broker", "--entity-name", "0", "--add-config", "log.retention.ms=60000,log.cleaner.backoff.ms=1000"}, b...)...)
	if !strings.Contains(r.stdout, "Completed updating config for broker 0.") {
		t.Fatalf("alter: %s", r.stdout)
	}
	r = mustCLI(t, append([]string{"configs", "describe", "--entity-type", "brokers", "--entity-name", "0", "--all", "--format", "json"}, b...)...)
	var doc describedEntities
	err := json.Unmarshal([]byte(r.stdout), &doc)
	out := doc.Entities
	if err != nil || len(out) != 1 {
		t.Fatalf("json: %v\n%s", err, r.stdout)
	}
	var found bool
	for _, c := range out[0].Configs {
		if c.Name != "log.retention.ms" {
			continue
		}
		found = true
		var srcs []string
		for _, s := range c.Synonyms {
			srcs = append(srcs, s.Source)
		}
		if *c.Value != "60000" || c.Source != "DYNAMIC_BROKER_CONFIG" || strings.Join(srcs, ",") != "DYNAMIC_BROKER_CONFIG,DYNAMIC_DEFAULT_BROKER_CONFIG,DEFAULT_CONFIG" {
			t.Fatalf("log.retention.ms: %+v %v", c, srcs)
		}
	}
	if !found || len(out[0].Configs) < 50 {
		t.Fatalf("--all: %d configs, log.retention.ms found %v", len(out[0].Configs), found)
	}
	// Without --all: the dynamic ones only.
	r = mustCLI(t, append([]string{"configs", "describe", "--entity-type", "brokers", "--entity-name", "0"}, b...)...)
	if strings.Count(r.stdout, "\n  ") != 2 || !strings.Contains(r.stdout, "Dynamic configs for broker 0 are:") {
		t.Fatalf("dynamic configs of broker 0:\n%s", r.stdout)
	}
	// Every live broker when none is named.
	r = mustCLI(t, append([]string{"configs", "describe", "--entity-type", "brokers"}, b...)...)
	if !strings.Contains(r.stdout, "Dynamic configs for broker 0 are:\n  log.cleaner.backoff.ms=1000") {
		t.Fatalf("every broker:\n%s", r.stdout)
	}
	// Refused by the broker, with its message.
	r = cli(t, append([]string{"configs", "alter", "--entity-type", "brokers", "--entity-name", "0", "--add-config", "num.partitions=3"}, b...)...)
	if r.code != 1 || !strings.Contains(r.stderr, "Cannot update these configs dynamically: Set(num.partitions)") {
		t.Fatalf("non-dynamic: exit %d: %s", r.code, r.stderr)
	}

	// Topics.
	cl := newTestClient(t, addr)
	if _, err := kadm.NewClient(cl).CreateTopic(t.Context(), 1, 1, nil, "cfg-t"); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, append([]string{"configs", "alter", "--entity-type", "topics", "--entity-name", "cfg-t", "--add-config", "cleanup.policy=[compact,delete],retention.ms=1000"}, b...)...)
	r = mustCLI(t, append([]string{"configs", "describe", "--entity-type", "topics", "--entity-name", "cfg-t"}, b...)...)
	if !strings.Contains(r.stdout, "cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}") ||
		!strings.Contains(r.stdout, "retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, DYNAMIC_BROKER_CONFIG:log.retention.ms=60000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000, DEFAULT_CONFIG:log.retention.ms=") {
		t.Fatalf("topic describe:\n%s", r.stdout)
	}
	mustCLI(t, append([]string{"configs", "alter", "--entity-type", "topics", "--entity-name", "cfg-t", "--delete-config", "retention.ms"}, b...)...)
	r = mustCLI(t, append([]string{"configs", "describe", "--entity-type", "topics"}, b...)...)
	if strings.Contains(r.stdout, "retention.ms=1000") || !strings.Contains(r.stdout, "Dynamic configs for topic cfg-t are:") {
		t.Fatalf("after delete:\n%s", r.stdout)
	}

	// Groups.
	r = mustCLI(t, append([]string{"configs", "alter", "--entity-type", "groups", "--entity-name", "jobs", "--add-config", "share.auto.offset.reset=earliest"}, b...)...)
	if !strings.Contains(r.stdout, "Completed updating config for group jobs.") {
		t.Fatalf("alter group: %s", r.stdout)
	}
	r = mustCLI(t, append([]string{"configs", "describe", "--entity-type", "groups", "--entity-name", "jobs"}, b...)...)
	if !strings.Contains(r.stdout, "Dynamic configs for group jobs are:\n  share.auto.offset.reset=earliest sensitive=false synonyms={GROUP_CONFIG:share.auto.offset.reset=earliest, DEFAULT_CONFIG:share.auto.offset.reset=latest}") ||
		strings.Count(r.stdout, "\n  ") != 1 {
		t.Fatalf("describe group:\n%s", r.stdout)
	}
	r = cli(t, append([]string{"configs", "alter", "--entity-type", "groups", "--entity-name", "jobs", "--add-config", "share.record.lock.duration.ms=100"}, b...)...)
	if r.code != 1 || !strings.Contains(r.stderr, "share.record.lock.duration.ms") {
		t.Fatalf("bad group config: exit %d: %s", r.code, r.stderr)
	}

	// Usage errors.
	for _, args := range [][]string{
		{"configs", "describe"},
		{"configs", "describe", "--entity-type", "nosuch"},
		{"configs", "alter", "--entity-type", "groups", "--entity-default", "--add-config", "a=1"},
		{"configs", "alter", "--entity-type", "topics", "--add-config", "a=1"},
		{"configs", "alter", "--entity-type", "topics", "--entity-default", "--add-config", "a=1"},
		{"configs", "alter", "--entity-type", "brokers", "--entity-name", "x", "--add-config", "a=1"},
		{"configs", "alter", "--entity-type", "brokers", "--entity-name", "1"},
		{"configs", "describe", "--alter", "--entity-type", "brokers"},
		{"configs"},
	} {
		if r := cli(t, append(args, b...)...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2: %s", args, r.code, r.stderr)
		}
	}
}
