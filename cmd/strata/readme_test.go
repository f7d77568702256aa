package main

// TestReadmeQuickstart runs README's quick start as a new user would: a
// broker started as `make run` starts it (./strata broker in a fresh
// directory, data in ./data), then every line of README's marked blocks
// through bash with the real binary (this test binary re-executed as
// strata, see TestMain).

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runAsStrata, set in the environment, makes the test binary run strata's
// main instead of the tests.
const runAsStrata = "STRATA_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runAsStrata) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// readmeMarker opens a comment line above each README block the test runs.
const readmeMarker = "<!-- TestReadmeQuickstart"

// readmeBlocks returns the command lines of the ```sh blocks that follow a
// marker line in README.md, and of the block after "Beyond the quick
// start", in order.
func readmeBlocks(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	marked, in, blocks := false, false, 0
	for l := range strings.SplitSeq(string(b), "\n") {
		switch {
		case strings.HasPrefix(l, readmeMarker) || strings.HasPrefix(l, "Beyond the quick start"):
			marked = true
		case marked && l == "```sh":
			in, marked = true, false
			blocks++
		case in && l == "```":
			in = false
		case in && strings.TrimSpace(l) != "" && !strings.HasPrefix(l, "#"):
			lines = append(lines, l)
		}
	}
	if blocks != 2 || len(lines) < 8 {
		t.Fatalf("README: got %d marked blocks with %d lines, want the quick start and the block after it", blocks, len(lines))
	}
	return lines
}

// startMakeRunBroker starts `strata broker` in dir as `make run` does, but
// on a free port, and returns its address.
func startMakeRunBroker(t *testing.T, exe, dir string) string {
	t.Helper()
	cmd := exec.Command(exe, "broker", "--override", "listeners=PLAINTEXT://127.0.0.1:0")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), runAsStrata+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(t.TempDir(), "broker.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	t.Cleanup(func() {
		defer func() {
			logFile.Close()
			if t.Failed() {
				b, _ := os.ReadFile(logFile.Name())
				t.Logf("broker log:\n%s", b)
			}
		}()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(cliTimeout):
			t.Errorf("broker still running %v after SIGTERM; killing it", cliTimeout)
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	addrs := make(chan string, 1)
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "strata broker listening on "); ok {
				select {
				case addrs <- strings.Fields(a)[0]:
				default:
				}
			}
		}
		_ = cmd.Wait()
	}()
	select {
	case a := <-addrs:
		return a
	case <-exited:
		t.Fatal("broker exited before listening")
	case <-time.After(cliTimeout):
		t.Fatalf("broker not listening after %v", cliTimeout)
	}
	return ""
}

func TestReadmeQuickstart(t *testing.T) {
	lines := readmeBlocks(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	addr := startMakeRunBroker(t, exe, dir)
	// ./strata as README runs it, pointed at this broker (make run's
	// listens on 127.0.0.1:9092, which the README's commands default to).
	wrapper := `#!/bin/sh
case "$1" in
broker|dump|docs|certs|tier) exec "$STRATA_TEST_BIN" "$@" ;;
esac
exec "$STRATA_TEST_BIN" "$@" --bootstrap-server "$STRATA_TEST_ADDR"
`
	if err := os.WriteFile(filepath.Join(dir, "strata"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}

	// What some lines must print, by a part of the line.
	wants := map[string]func(out string) bool{
		"--print-key": func(out string) bool { return out == "key1\thello\nkey2\tworld\n" },
		"--format json": func(out string) bool {
			var n int
			for l := range strings.Lines(out) {
				var rec struct {
					Topic  string `json:"topic"`
					Offset int64  `json:"offset"`
					Key    string `json:"key"`
					Value  string `json:"value"`
				}
				if json.Unmarshal([]byte(l), &rec) != nil || rec.Topic != "demo" || rec.Offset != int64(n) {
					return false
				}
				n++
			}
			return n == 2
		},
		"--group readers": func(out string) bool { return out == "hello\nworld\n" },
		"groups describe readers": func(out string) bool {
			return strings.Contains(out, "Group readers") && strings.Contains(strings.Join(strings.Fields(out), " "), "demo 0 2 2 0")
		},
		"topic describe demo": func(out string) bool {
			return strings.Contains(out, "Topic: demo\t") && strings.Contains(out, "PartitionCount: 1")
		},
		"--print-data": func(out string) bool { return strings.Contains(out, `key: "key1" value: "hello"`) },
		"--offset 1": func(out string) bool {
			return strings.Contains(out, "Offset:1\tworld\n") && strings.Contains(out, "Offset:2\tagain\n")
		},
		"log-dirs demo": func(out string) bool { return strings.Contains(out, "demo") },
	}
	checked := 0
	for i, line := range lines {
		ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
		cmd := exec.CommandContext(ctx, "bash", "-c", line)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), runAsStrata+"=1", "STRATA_TEST_BIN="+exe, "STRATA_TEST_ADDR="+addr)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		start := time.Now()
		err := cmd.Run()
		cancel()
		t.Logf("#%d %s: %v", i, line, time.Since(start))
		if err != nil {
			t.Fatalf("#%d README line %q: %v\nstdout:\n%s\nstderr:\n%s", i, line, err, stdout.String(), stderr.String())
		}
		for part, ok := range wants {
			if strings.Contains(line, part) {
				checked++
				if !ok(stdout.String()) {
					t.Errorf("#%d README line %q: unexpected output:\n%s", i, line, stdout.String())
				}
			}
		}
	}
	if checked < len(wants) {
		t.Errorf("checked %d outputs, want %d: a README line the test expects is gone", checked, len(wants))
	}
}

// TestConventionBinary runs the convention's usage errors in a process of
// their own, for the exit status main gives.
func TestConventionBinary(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		args []string
		code int
		want string // in stderr
	}{
		{[]string{"topics", "create", "--topci", "x"}, 2, "strata topic create: unknown flag --topci: did you mean --topic?\nRun 'strata topic create --help'"},
		{[]string{"produce", "t", "--topic", "u"}, 2, `the topic is given twice, differently: "t" as the argument and "u" as --topic`},
		{[]string{"grups"}, 2, `unknown command "grups": did you mean groups?`},
		{[]string{"group", "describe", "--help"}, 0, ""},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
		cmd := exec.CommandContext(ctx, exe, tc.args...)
		cmd.Env = append(os.Environ(), runAsStrata+"=1")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		cancel()
		code := cmd.ProcessState.ExitCode()
		if err != nil && code <= 0 {
			t.Fatalf("#%d strata %v: %v", i, tc.args, err)
		}
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) || tc.want == "" && stderr.Len() > 0 {
			t.Errorf("#%d strata %v: got exit %d, stderr:\n%s\nwant exit %d and %q", i, tc.args, code, stderr.String(), tc.code, tc.want)
		}
	}
}
