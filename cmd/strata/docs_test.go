package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratastream/strata/broker"
)

// TestConfigReferenceUpToDate regenerates the configuration reference and
// fails if docs/configuration.md differs from it.
func TestConfigReferenceUpToDate(t *testing.T) {
	if !broker.DefaultConfig().ZeroCopy {
		t.Skip("built with strata_copyfetch: strata.fetch.zero.copy defaults differ from the documented build")
	}
	var out, errb bytes.Buffer
	if st := dispatch([]string{"docs", "config"}, &out, &errb); st != 0 {
		t.Fatalf("strata docs config: status %d, stderr %q", st, errb.String())
	}
	path := filepath.Join("..", "..", "docs", "configuration.md")
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v; generate it with: %s", err, broker.ConfigReferenceCommand)
	}
	if !bytes.Equal(got, out.Bytes()) {
		want, have := strings.Split(out.String(), "\n"), strings.Split(string(got), "\n")
		for i := 0; i < len(want) || i < len(have); i++ {
			var w, h string
			if i < len(want) {
				w = want[i]
			}
			if i < len(have) {
				h = have[i]
			}
			if w != h {
				t.Fatalf("docs/configuration.md is stale (first difference at line %d:\n  file:      %q\n  generated: %q)\nregenerate it from the repository root with:\n  %s", i+1, h, w, broker.ConfigReferenceCommand)
			}
		}
	}
	// Every broker setting and topic config is on the page.
	for _, d := range append(broker.BrokerSettingsReference(), broker.TopicConfigsReference()...) {
		if !bytes.Contains(got, []byte("| `"+d.Name+"` |")) {
			t.Errorf("docs/configuration.md lacks %s", d.Name)
		}
	}
}

func TestDocsCommandUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if st := dispatch([]string{"docs", "--help"}, &out, &errb); st != 0 || !strings.Contains(out.String(), broker.ConfigReferenceCommand) {
		t.Fatalf("docs --help: status %d, stdout %q", st, out.String())
	}
	out.Reset()
	errb.Reset()
	if st := dispatch([]string{"docs", "nope"}, &out, &errb); st != 2 {
		t.Fatalf("docs nope: status %d, want 2", st)
	}
}

// TestAPITableUpToDate regenerates docs/compatibility.md's API table from
// the conformance table and fails if the committed section differs; it
// also checks 'strata docs apis --update' on a copy.
func TestAPITableUpToDate(t *testing.T) {
	var out, errb bytes.Buffer
	if st := dispatch([]string{"docs", "apis"}, &out, &errb); st != 0 {
		t.Fatalf("strata docs apis: status %d, stderr %q", st, errb.String())
	}
	path := filepath.Join("..", "..", "docs", "compatibility.md")
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := broker.ReplaceAPITable(string(got), out.String())
	if err != nil {
		t.Fatalf("docs/compatibility.md: %v", err)
	}
	if want != string(got) {
		t.Fatalf("docs/compatibility.md's API table is stale; regenerate it from the repository root with:\n  %s", broker.APITableCommand)
	}
	for _, a := range broker.Kafka39APIs {
		if !strings.Contains(string(got), fmt.Sprintf("| %d | %s |", a.Key, a.Name)) {
			t.Errorf("docs/compatibility.md lacks key %d (%s)", a.Key, a.Name)
		}
	}

	// --update rewrites only the marked section.
	tmp := filepath.Join(t.TempDir(), "c.md")
	stale := "head\n" + broker.APITableBegin + "\nold table\n" + broker.APITableEnd + "\ntail\n"
	if err := os.WriteFile(tmp, []byte(stale), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if st := dispatch([]string{"docs", "apis", "--update", tmp}, &out, &errb); st != 0 {
		t.Fatalf("docs apis --update: status %d, stderr %q", st, errb.String())
	}
	b, _ := os.ReadFile(tmp)
	var table bytes.Buffer
	_ = broker.WriteAPITable(&table)
	if string(b) != "head\n"+broker.APITableBegin+"\n"+table.String()+broker.APITableEnd+"\ntail\n" {
		t.Fatalf("docs apis --update wrote:\n%s", b)
	}
	// A file without the markers is refused and left alone.
	if err := os.WriteFile(tmp, []byte("no markers\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if st := dispatch([]string{"docs", "apis", "--update", tmp}, &out, &errb); st != 1 || !strings.Contains(errb.String(), "markers") {
		t.Fatalf("docs apis --update without markers: status %d, stderr %q", st, errb.String())
	}
	if b, _ := os.ReadFile(tmp); string(b) != "no markers\n" {
		t.Fatalf("file without markers changed: %q", b)
	}
}
