package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"
)

// process is a server the suite started (a broker, ZooKeeper, MinIO,
// nats-server): in a process group of its own, killed if the suite dies
// (Pdeathsig), its output kept (at least the last MiB) for error messages,
// and known to killAll until stopped.
type process struct {
	Name string
	Cmd  *exec.Cmd

	mu     sync.Mutex
	out    bytes.Buffer
	exited chan struct{}
}

// live is every process started and not yet stopped, so that all of them
// are killed when a scenario ends, when the run ends and on SIGINT/SIGTERM.
var live struct {
	sync.Mutex
	procs []*process
}

// readyTimeout bounds start's wait for a server to say it is ready.
const readyTimeout = 60 * time.Second

// start runs bin with args (env nil: the suite's environment). If ready is
// set, start waits until ready reports true for the output so far, at most
// readyTimeout; a server that exits or times out first is an error that
// quotes the end of its output.
func start(name, bin string, args, env []string, ready func(out string) bool) (*process, error) {
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = env
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &process{Name: name, Cmd: cmd, exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	live.Lock()
	live.procs = append(live.procs, p)
	live.Unlock()
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
		// A line past the scanner's limit ends the scan; the rest of the
		// output still has to be drained so the process does not block.
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() {
		_ = cmd.Wait() // the status shows through exited and the output
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
		p.forget()
		return nil, fmt.Errorf("%s exited (%v) before it was ready: %s", name, cmd.ProcessState, p.Tail(1500))
	case <-time.After(readyTimeout):
		p.stop()
		return nil, fmt.Errorf("%s not ready within %v: %s", name, readyTimeout, p.Tail(1500))
	}
}

// Pid is the process's id (and its process group's).
func (p *process) Pid() int { return p.Cmd.Process.Pid }

// Alive reports whether the process still runs.
func (p *process) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Tail returns the last n bytes of the process's output.
func (p *process) Tail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.out.String()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}

// stop sends SIGTERM to the process group, then SIGKILL after 15 s, waits
// for the process to exit and forgets it.
func (p *process) stop() {
	if p.Alive() {
		_ = syscall.Kill(-p.Pid(), syscall.SIGTERM) // an error means the group is gone already
	}
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		p.kill()
		<-p.exited
	}
	p.forget()
}

// kill sends SIGKILL to the process group without waiting. A process
// already reaped is left alone: its group id may belong to another
// process by now.
func (p *process) kill() {
	if p.Alive() {
		_ = syscall.Kill(-p.Pid(), syscall.SIGKILL) // as in stop
	}
}

func (p *process) forget() {
	live.Lock()
	live.procs = slices.DeleteFunc(live.procs, func(q *process) bool { return q == p })
	live.Unlock()
}

// killAll kills every process still running (the end of a scenario or of
// the run, or a signal).
func killAll() {
	live.Lock()
	procs := slices.Clone(live.procs)
	live.procs = nil
	live.Unlock()
	for _, p := range procs {
		p.kill()
	}
	for _, p := range procs {
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
		}
	}
}

// freeAddr returns a 127.0.0.1 address with a port that was free a moment
// ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
