package benchutil

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is a server a benchmark tool started: in a process group of its
// own, killed if the tool dies (Pdeathsig), its output kept (at least the
// last MiB) for error messages.
type Process struct {
	Name string
	Cmd  *exec.Cmd

	mu     sync.Mutex
	out    bytes.Buffer
	exited chan struct{}
}

// ReadyTimeout bounds Start's wait for a server to say it is ready.
const ReadyTimeout = 60 * time.Second

// Start runs bin with args (env nil: this process's environment). started,
// if set, is called as soon as the process runs, before the wait for
// readiness. If ready is set, Start waits until ready reports true for the
// output so far, at most ReadyTimeout; a server that exits or times out
// first is an error that quotes the end of its output.
func Start(name, bin string, args, env []string, ready func(out string) bool, started func(*Process)) (*Process, error) {
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = env
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &Process{Name: name, Cmd: cmd, exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if started != nil {
		started(p)
	}
	isReady := make(chan struct{})
	go func() {
		s := bufio.NewScanner(pr)
		s.Buffer(make([]byte, 64<<10), 1<<20)
		signalled := false
		for s.Scan() {
			p.mu.Lock()
			p.out.WriteString(s.Text() + "\n")
			if p.out.Len() > 4<<20 { // keep the tail
				b := slices.Clone(p.out.Bytes()[p.out.Len()-1<<20:])
				p.out.Reset()
				p.out.Write(b)
			}
			ok := !signalled && ready != nil && ready(p.out.String())
			p.mu.Unlock()
			if ok {
				signalled = true
				close(isReady)
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() {
		_ = cmd.Wait() // the status shows through Exited and the output
		pw.Close()
		close(p.exited)
	}()
	if ready == nil {
		return p, nil
	}
	select {
	case <-isReady:
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("%s exited (%v) before it was ready: %s", name, cmd.ProcessState, p.Tail(1500))
	case <-time.After(ReadyTimeout):
		p.Stop()
		return nil, fmt.Errorf("%s not ready within %v: %s", name, ReadyTimeout, p.Tail(1500))
	}
}

// Pid is the process's id (and its process group's).
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Alive reports whether the process still runs.
func (p *Process) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Tail returns the last n bytes of the process's output.
func (p *Process) Tail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.out.String()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}

// Stop sends SIGTERM to the process group, then SIGKILL after 15 s, and
// waits for the process to exit.
func (p *Process) Stop() {
	_ = syscall.Kill(-p.Pid(), syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		p.Kill()
		<-p.exited
	}
}

// Kill sends SIGKILL to the process group without waiting.
func (p *Process) Kill() { _ = syscall.Kill(-p.Pid(), syscall.SIGKILL) }

// FreeAddr returns a 127.0.0.1 address with a port that was free a moment
// ago.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// FindNATS returns the natscli binary: flagged when set, else nats on PATH,
// else nats in $(go env GOPATH)/bin (where
// deploy/scripts/install-bench-deps.sh installs it).
func FindNATS(flagged string) (string, error) {
	if flagged != "" {
		return flagged, nil
	}
	if p, err := exec.LookPath("nats"); err == nil {
		return p, nil
	}
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err != nil {
		return "", err
	}
	p := filepath.Join(strings.TrimSpace(string(out)), "bin", "nats")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("natscli not found (run deploy/scripts/install-bench-deps.sh): %w", err)
	}
	return p, nil
}
