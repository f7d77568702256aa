package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestModulePath(t *testing.T) {
	for i, tc := range []struct{ gomod, want string }{
		{"module github.com/stratastream/strata\n\ngo 1.26.0\n", "github.com/stratastream/strata"},
		{"// comment\nmodule \"github.com/stratastream/strata/bench\"\n", "github.com/stratastream/strata/bench"},
		{"go 1.26.0\n", ""},
	} {
		if got := modulePath([]byte(tc.gomod)); got != tc.want {
			t.Errorf("#%d: got %q, want %q", i, got, tc.want)
		}
	}
}

func TestLocalLogs(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, size int) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("scale-0/00000000000000000000.log", 100)
	write("scale-0/00000000000000000042.log", 0)
	write("scale-0/00000000000000000000.index", 10)
	write("scale-2/00000000000000000000.log", 7)
	write("scale-x/00000000000000000000.log", 1000)  // not a partition
	write("scale2-0/00000000000000000000.log", 1000) // another topic
	l := localLogs(dir, "scale")
	if l.files[0] != 2 || l.files[1] != 0 || l.files[2] != 1 || len(l.files) != 2 {
		t.Errorf("got files %v, want partition 0: 2, partition 2: 1", l.files)
	}
	if l.nonEmpty != 2 || l.bytes != 107 {
		t.Errorf("got %d non-empty, %d bytes; want 2, 107", l.nonEmpty, l.bytes)
	}
}

func TestSeriesName(t *testing.T) {
	for i, tc := range []struct{ label, want string }{
		{"cold fetch #1", "cold-fetch-1.csv"},
		{"warm fetch #1.2", "warm-fetch-1.2.csv"},
	} {
		if got := seriesName(tc.label); got != tc.want {
			t.Errorf("#%d: got %q, want %q", i, got, tc.want)
		}
	}
}
