package main

import (
	"strings"
	"testing"
)

// TestFeatures: strata features describes transaction.version as
// kafka-features.sh does, upgrades it (a dry run changes nothing) and
// downgrades it; a level the broker refuses fails with its error.
func TestFeatures(t *testing.T) {
	_, addr := startBroker(t)
	b := []string{"--bootstrap-server", addr}
	run := func(args ...string) result {
		t.Helper()
		return mustCLI(t, append(append([]string{"features"}, args...), b...)...)
	}
	level := func() string {
		t.Helper()
		r := run("describe")
		if !strings.Contains(r.stdout, "Feature: transaction.version") || !strings.Contains(r.stdout, "SupportedMinVersion: 0") || !strings.Contains(r.stdout, "SupportedMaxVersion: 2") {
			t.Fatalf("describe: %q", r.stdout)
		}
		_, after, _ := strings.Cut(r.stdout, "FinalizedVersionLevel: ")
		return strings.Fields(after)[0]
	}
	if l := level(); l != "1" {
		t.Fatalf("new cluster: level %s, want 1", l)
	}
	if r := run("upgrade", "--feature", "transaction.version=2", "--dry-run"); !strings.Contains(r.stdout, "transaction.version can be upgraded to 2.") {
		t.Fatalf("dry run: %q", r.stdout)
	}
	if l := level(); l != "1" {
		t.Fatalf("after the dry run: level %s", l)
	}
	if r := run("upgrade", "--feature", "transaction.version=2"); !strings.Contains(r.stdout, "transaction.version was upgraded to 2.") {
		t.Fatalf("upgrade: %q", r.stdout)
	}
	if l := level(); l != "2" {
		t.Fatalf("after the upgrade: level %s", l)
	}
	if r := run("downgrade", "--feature", "transaction.version=1"); !strings.Contains(r.stdout, "transaction.version was downgraded to 1.") {
		t.Fatalf("downgrade: %q", r.stdout)
	}
	if l := level(); l != "1" {
		t.Fatalf("after the downgrade: level %s", l)
	}
	r := cli(t, append([]string{"features", "upgrade", "--feature", "transaction.version=3"}, b...)...)
	if r.code != 1 || !strings.Contains(r.stderr, "INVALID_UPDATE_VERSION") {
		t.Fatalf("level 3: status %d, stderr %q", r.code, r.stderr)
	}
}
