package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// inCI reports whether the tests run under CI, where missing tools fail
// rather than skip.
func inCI() bool { return os.Getenv("CI") == "true" }

// skipOrFailInCI skips the test with why, or fails it in CI, where make
// test has installed and set up everything the tests need.
func skipOrFailInCI(t testing.TB, why string) {
	t.Helper()
	if inCI() {
		t.Fatalf("%s: required in CI (CI=true)", why)
	}
	t.Skip(why)
}

// requireTool skips (or, in CI, fails) the test when probe reports the tool
// missing.
func requireTool(t testing.TB, name string, probe func() error) {
	t.Helper()
	if err := probe(); err != nil {
		if inCI() {
			t.Fatalf("%s is required in CI (make test installs it via deploy/scripts/install-test-deps.sh): %v", name, err)
		}
		t.Skipf("%s not available (%v); run deploy/scripts/install-test-deps.sh", name, err)
	}
}

// requireKcat skips or fails the test when kcat is not on PATH.
func requireKcat(t testing.TB) {
	t.Helper()
	requireTool(t, "kcat", func() error {
		_, err := exec.LookPath("kcat")
		return err
	})
}

// debianPython is the interpreter that imports Debian's confluent_kafka; the
// python3 first on PATH may be another one.
const debianPython = "/usr/bin/python3"

// requireConfluentKafka skips or fails the test when Debian's Python module is
// not importable.
func requireConfluentKafka(t testing.TB) {
	t.Helper()
	requireTool(t, "python3-confluent-kafka", func() error {
		out, err := exec.Command(debianPython, "-c", "import confluent_kafka").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
		}
		return nil
	})
}

// runCmd runs a command with a bound, feeding stdin, and returns its stdout.
// It fails the test with stderr on a non-zero exit or a timeout.
func runCmd(t testing.TB, timeout time.Duration, stdin string, name string, args ...string) string {
	t.Helper()
	out, errOut, err := tryCmd(timeout, stdin, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\nstderr:\n%s\nstdout (tail):\n%s", name, strings.Join(args, " "), err, tailString(errOut, 4<<10), tailString(out, 1<<10))
	}
	return out
}

// tryCmd is runCmd that returns the error instead of failing.
func tryCmd(timeout time.Duration, stdin string, name string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.WaitDelay = 2 * time.Second
	err = cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %v: %w", timeout, errors.Join(err, ctx.Err()))
	}
	return o.String(), e.String(), err
}

func tailString(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// kcatRecord is one line of `kcat -C -f '%p %o %k %s\n'` output.
type kcatRecord struct {
	Partition int32
	Offset    int64
	Key       string
	Value     string
}

// kcatConsume reads topic from the beginning to the end of every partition
// with kcat and returns the records grouped by partition, in the order kcat
// printed them. Keys and values must not contain spaces or newlines.
func kcatConsume(t testing.TB, addr, topic string) map[int32][]kcatRecord {
	t.Helper()
	out := runCmd(t, 30*time.Second, "", "kcat", "-C", "-b", addr, "-t", topic,
		"-o", "beginning", "-e", "-q", "-f", `%p %o %k %s\n`)
	got := map[int32][]kcatRecord{}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, " ")
		if len(f) != 4 {
			t.Fatalf("kcat line %q: want 4 fields", line)
		}
		p, err1 := strconv.ParseInt(f[0], 10, 32)
		o, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("kcat line %q: bad partition or offset", line)
		}
		got[int32(p)] = append(got[int32(p)], kcatRecord{int32(p), o, f[2], f[3]})
	}
	return got
}

// kcatMetadataOK runs `kcat -L` against addr and fails the test unless it
// lists the broker.
func kcatMetadataOK(t testing.TB, addr string) {
	t.Helper()
	out := runCmd(t, 30*time.Second, "", "kcat", "-L", "-b", addr, "-m", "10")
	if !strings.Contains(out, "1 brokers:") {
		t.Fatalf("kcat -L output lacks the broker:\n%s", out)
	}
}
