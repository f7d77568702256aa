package e2e

import (
	"testing"

	"github.com/stratastream/strata/broker"
)

// TestPanicIn checks the lines the harness takes for a broker's panic.
func TestPanicIn(t *testing.T) {
	for i, tc := range []struct {
		out, want string
	}{
		{"time=1 level=INFO msg=ok\n", ""},
		{"time=1 level=ERROR msg=\"" + broker.PanicMarker + ": panic handling request; closing connection\" key=1\n",
			"time=1 level=ERROR msg=\"" + broker.PanicMarker + ": panic handling request; closing connection\" key=1"},
		{`{"time":"x","level":"ERROR","msg":"` + broker.PanicMarker + `: panic reading request"}` + "\n",
			`{"time":"x","level":"ERROR","msg":"` + broker.PanicMarker + `: panic reading request"}`},
		{"a\npanic: runtime error: index out of range\n\ngoroutine 1", "panic: runtime error: index out of range"},
		{"fatal error: concurrent map writes\n", "fatal error: concurrent map writes"},
		{"==================\nWARNING: DATA RACE\nRead at", "WARNING: DATA RACE"},
		{"level=INFO msg=\"no panic: here\"\n", ""},
	} {
		if got := panicIn(tc.out); got != tc.want {
			t.Errorf("#%d: got %q, want %q", i, got, tc.want)
		}
	}
}
