package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBrokerCommandRejectsBadConfig(t *testing.T) {
	dir := t.TempDir()
	props := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(props, []byte("log.dirs="+dir+"\nno.such.setting=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, args := range [][]string{
		{"--config", props},
		{"--override", "num.partitions=many"},
		{"--override", "novalue"},
		{"--config", filepath.Join(dir, "missing.properties")},
		{"stray-argument"},
		{"--log-format", "xml"},
		{"--override", "metrics.listener=https://127.0.0.1:9308"},
	} {
		var stdout, stderr bytes.Buffer
		if code := runBroker(args, &stdout, &stderr); code != 2 {
			t.Fatalf("#%d %v: exit %d, want 2; stderr %s", i, args, code, stderr.String())
		}
		if stderr.Len() == 0 {
			t.Fatalf("#%d %v: no message", i, args)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := runBroker([]string{"--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "Examples:") || !strings.Contains(stdout.String(), "log.retention.bytes") ||
		!strings.Contains(stdout.String(), "metrics.listener") || !strings.Contains(stdout.String(), "strata.pprof.listener") || !strings.Contains(stdout.String(), "--log-format") {
		t.Fatalf("--help: exit %d, output %q", code, stdout.String())
	}
}
