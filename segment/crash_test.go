package segment

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The crash test re-executes the test binary as a child that appends and
// syncs until it is killed with SIGKILL; the parent then reopens the log.
const crashChildEnv = "STRATA_SEGMENT_CRASH_CHILD_DIR"

// crashBatch is the batch the child appends at base offset base: its shape
// and contents follow from base, so the parent can tell what it must be.
func crashBatch(base int64) []byte {
	b := lgBatch(1+int(base%4), base, 200+int(base*37%3000), byte(base))
	SetBaseOffset(b, base)
	SetPartitionLeaderEpoch(b, 0)
	return b
}

func crashConfig() Config {
	cfg := lgConfig()
	cfg.SegmentBytes = 48 << 10
	cfg.IndexIntervalBytes = 2048
	return cfg
}

// tornWriter splits every write into small pieces with pauses between them,
// so that a kill often lands in the middle of a batch and leaves a torn
// tail.
type tornWriter struct{ *os.File }

func (w tornWriter) WriteAt(b []byte, off int64) (int, error) {
	n := 0
	for n < len(b) {
		m, err := w.File.WriteAt(b[n:min(len(b), n+300)], off+int64(n))
		n += m
		if err != nil {
			return n, err
		}
		time.Sleep(20 * time.Microsecond)
	}
	return n, nil
}

// crashChild appends batches, calling Sync every few appends and printing
// "synced <offset>" once everything below offset is on disk.
func crashChild(dir string) {
	l, err := Open(dir, crashConfig(), WithFileWrapper(func(path string, f *os.File) File {
		if strings.HasSuffix(path, ".log") {
			return tornWriter{f}
		}
		return f
	}))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	stop := time.Now().Add(10 * time.Second) // in case the parent is gone
	for i := 0; time.Now().Before(stop); i++ {
		if _, err := l.Append(crashBatch(l.LogEndOffset()), AppendOptions{LeaderEpoch: 0}); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		if i%3 == 2 {
			end := l.LogEndOffset()
			if err := l.Sync(); err != nil {
				fmt.Println("error", err)
				os.Exit(2)
			}
			fmt.Println("synced", end)
		}
	}
	os.Exit(0)
}

func TestCrashKill9(t *testing.T) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		return
	}
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill points from seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 9))
	deadline := time.Now().Add(20 * time.Second)
	var synced int64 // everything below was reported synced by some child
	torn := 0
	for round := 0; round < 6 && time.Now().Before(deadline); round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashKill9$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		// Kill at a random point after the first sync report. The child
		// stops by itself after 10 s; the timeout only catches a child
		// that hangs or never starts, however slow the machine.
		kill := time.After(24 * time.Hour)
		timeout := time.After(2 * time.Minute)
		seen := 0
	read:
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					break read
				}
				f := strings.Fields(line)
				if len(f) == 2 && f[0] == "synced" {
					off, err := strconv.ParseInt(f[1], 10, 64)
					if err != nil {
						t.Fatalf("child: %q", line)
					}
					synced = max(synced, off)
					if seen++; seen == 1 {
						kill = time.After(time.Duration(rng.IntN(150)) * time.Millisecond)
					}
				} else if line != "" {
					t.Errorf("child: %s", line)
				}
			case <-kill:
				// A child that already stopped by itself leaves a log
				// as good to check as a killed one.
				if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
					t.Fatal(err)
				}
				kill = time.After(24 * time.Hour)
			case <-timeout:
				_ = cmd.Process.Kill() // it is failing the test either way
				t.Fatal("child did not finish within 2 minutes")
			}
		}
		_ = cmd.Wait() // killed: the error says so

		l, err := Open(dir, crashConfig())
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		rep := l.Recovery()
		t.Logf("round %d: synced below %d, log end %d, recovery: cut at %d, %d bytes, %d batches (%v)",
			round, synced, l.LogEndOffset(), rep.TruncatedAt, rep.DroppedBytes, rep.DroppedBatches, rep.Reason)
		if rep.Reason != nil {
			torn++
		}
		if end := l.LogEndOffset(); end < synced {
			t.Fatalf("round %d: log end %d below the synced offset %d", round, end, synced)
		}
		// Everything readable is whole, valid and what the child wrote;
		// that covers every synced batch, as the log end is past them.
		for off := l.LogStartOffset(); off < l.LogEndOffset(); {
			buf, err := l.ReadCopy(off, 1<<20, l.LogEndOffset())
			if err != nil || len(buf) == 0 {
				t.Fatalf("round %d: read at %d: %d bytes, %v", round, off, len(buf), err)
			}
			err = SplitBatches(buf, func(h Header, b []byte) error {
				if h.BaseOffset != off {
					return fmt.Errorf("batch at %d, want %d", h.BaseOffset, off)
				}
				if !bytes.Equal(b, crashBatch(off)) {
					return fmt.Errorf("batch at %d differs from what was written", off)
				}
				off = h.NextOffset()
				return nil
			})
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d rounds ended with a torn tail", torn)
}
