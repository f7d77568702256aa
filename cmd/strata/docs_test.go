package main

import (
	"bytes"
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
