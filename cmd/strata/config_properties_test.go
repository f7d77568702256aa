package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseProperties(t *testing.T) {
	in := `# a comment
! another comment
broker.id=1
listeners = PLAINTEXT://127.0.0.1:9092
log.dirs: /tmp/data
num.partitions 3
long.value = first,\
    second,\
    third
escaped\ key=a\tb\u0041
empty=
  indented.key=x
dup=1
dup=2
`
	got, err := parseProperties(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"broker.id":      "1",
		"listeners":      "PLAINTEXT://127.0.0.1:9092",
		"log.dirs":       "/tmp/data",
		"num.partitions": "3",
		"long.value":     "first,second,third",
		"escaped key":    "a\tbA",
		"empty":          "",
		"indented.key":   "x",
		"dup":            "2",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if _, err := parseProperties(strings.NewReader("bad=\\u00zz\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("bad escape: got %v, want an error naming line 1", err)
	}
}

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
