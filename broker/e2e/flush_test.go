package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// requireStrace skips the test (or, in CI, fails it) when strace is
// missing or this machine does not allow tracing (a sandbox without
// ptrace).
func requireStrace(t *testing.T) {
	t.Helper()
	requireTool(t, "strace", func() error {
		_, err := exec.LookPath("strace")
		return err
	})
	if out, err := exec.Command("strace", "-f", "--seccomp-bpf", "-e", "trace=fsync", "-o", os.DevNull, "true").CombinedOutput(); err != nil {
		skipOrFailInCI(t, fmt.Sprintf("strace cannot trace here: %v: %s", err, strings.TrimSpace(string(out))))
	}
}

// fsyncCalls runs a broker under strace with overrides, produces batches
// single-record batches with kcat (acks all, one in flight), stops the
// broker, and returns how many fsync and fdatasync calls it made in all.
func fsyncCalls(t *testing.T, batches int, overrides ...string) int {
	t.Helper()
	summary := filepath.Join(t.TempDir(), "strace.txt")
	b := StartBrokerUnder(t, []string{"strace", "-f", "--seccomp-bpf", "-c", "-e", "trace=fsync,fdatasync", "-o", summary}, overrides...)
	b.CreateTopic(t, "fsync", 1)
	var in strings.Builder
	for i := range batches {
		fmt.Fprintf(&in, "k:%d\n", i)
	}
	runCmd(t, 30*time.Second, in.String(), "kcat", "-P", "-b", b.Addr, "-t", "fsync", "-p", "0", "-K:",
		"-X", "batch.num.messages=1", "-X", "linger.ms=0", "-X", "max.in.flight=1", "-X", "acks=all")
	got := kcatConsume(t, b.Addr, "fsync")
	if len(got[0]) != batches {
		t.Fatalf("read back %d records, want %d", len(got[0]), batches)
	}
	b.Stop(t)
	data, err := os.ReadFile(summary)
	if err != nil {
		t.Fatalf("strace summary: %v", err)
	}
	// Lines of `strace -c`: % time, seconds, usecs/call, calls, [errors,] syscall.
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || (f[len(f)-1] != "fsync" && f[len(f)-1] != "fdatasync") {
			continue
		}
		c, err := strconv.Atoi(f[3])
		if err != nil {
			t.Fatalf("strace summary line %q: %v", line, err)
		}
		n += c
	}
	return n
}

// TestFlushIntervalMessagesFsyncs checks, at the process level, that
// log.flush.interval.messages=1 makes the broker fsync once per produced
// batch: the broker runs under strace, kcat sends one-record batches one at
// a time, and the fsync count must grow by at least the number of batches
// over a broker with the default policy (which relies on replication, as
// Kafka does, and fsyncs only checkpoints). That each fsync comes before its
// acknowledgement is the broker's own flusher hook test; the SIGKILL test
// above checks that nothing acknowledged is lost.
func TestFlushIntervalMessagesFsyncs(t *testing.T) {
	requireKcat(t)
	requireStrace(t)
	const batches = 100
	base := fsyncCalls(t, batches)
	flushed := fsyncCalls(t, batches, "log.flush.interval.messages=1")
	t.Logf("fsync+fdatasync calls for %d one-record batches: %d by default, %d with log.flush.interval.messages=1", batches, base, flushed)
	// The default broker fsyncs its unflushed tail at shutdown, which the
	// flush-per-message broker has no need to: allow that much slack.
	const slack = 5
	if flushed < batches || flushed-base < batches-slack {
		t.Errorf("log.flush.interval.messages=1 made %d fsyncs (%d more than the default policy) for %d acknowledged batches, want one per batch", flushed, flushed-base, batches)
	}
}
