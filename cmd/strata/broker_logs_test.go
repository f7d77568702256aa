package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer safe for a writer and a reader
// goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestBrokerJSONLogs runs the broker command with --log-format json and a
// metrics listener, stops it with SIGTERM and checks that every log line
// is a JSON object.
func TestBrokerJSONLogs(t *testing.T) {
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- runBroker([]string{"--log-format", "json",
			"--override", "listeners=PLAINTEXT://127.0.0.1:0",
			"--override", "log.dirs=" + t.TempDir(),
			"--override", "offsets.topic.num.partitions=1",
			"--override", "metrics.listener=127.0.0.1:0",
		}, &stdout, &stderr)
	}()
	deadline := time.Now().Add(cliTimeout)
	for !strings.Contains(stdout.String(), "listening on") {
		select {
		case code := <-done:
			t.Fatalf("broker exited with %d: %s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker did not start: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The broker has its signal handler installed once it printed the
	// listening line.
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
	case <-time.After(cliTimeout):
		t.Fatal("broker did not stop on SIGTERM")
	}
	var msgs []string
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q: %v", line, err)
		}
		msg, _ := rec["msg"].(string)
		msgs = append(msgs, msg)
	}
	all := strings.Join(msgs, "\n")
	for _, want := range []string{"listening on", "serving metrics on http://127.0.0.1:", "strata broker stopped"} {
		if !strings.Contains(all, want) {
			t.Errorf("no log message with %q in:\n%s", want, all)
		}
	}
}
