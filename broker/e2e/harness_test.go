package e2e

import (
	"bytes"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratastream/strata/broker"
)

// Bounds on the broker process's life cycle.
const (
	// startTimeout bounds the wait for "strata broker listening on".
	startTimeout = 30 * time.Second
	// stopTimeout bounds a clean SIGTERM shutdown before SIGKILL.
	stopTimeout = 15 * time.Second
	// listeningMarker is what `strata broker` prints once it serves.
	listeningMarker = "strata broker listening on"
	// maxLoggedOutput is how much of a broker's output a failed test logs.
	maxLoggedOutput = 64 << 10
	// maxGoroutineDump bounds the goroutine dump of a broker that did
	// not stop.
	maxGoroutineDump = 1 << 20
)

// strataBin is the strata binary under test, built once in TestMain.
var strataBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		return m.Run() // StartBroker skips: no binary
	}
	if bin := os.Getenv("STRATA_BIN"); bin != "" {
		strataBin = bin
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "strata-e2e-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	strataBin = filepath.Join(dir, "strata")
	// The test runs in broker/e2e; the command is two levels up.
	build := exec.Command("go", "build", "-o", strataBin, "../../cmd/strata")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	start := time.Now()
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: building strata: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "e2e: built strata in %v\n", time.Since(start).Round(time.Millisecond))
	return m.Run()
}

// outputSink collects a broker's stdout and stderr and notices the
// listening line.
type outputSink struct {
	mu struct {
		sync.Mutex
		buf       bytes.Buffer
		listening chan struct{} // closed once the marker is seen; nil after
	}
}

func newOutputSink() *outputSink {
	s := &outputSink{}
	s.mu.listening = make(chan struct{})
	return s
}

func (s *outputSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.buf.Write(p)
	if s.mu.listening != nil && bytes.Contains(s.mu.buf.Bytes(), []byte(listeningMarker)) {
		close(s.mu.listening)
		s.mu.listening = nil
	}
	return len(p), nil
}

func (s *outputSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.buf.String()
}

// tail returns at most the last n bytes of the output.
func (s *outputSink) tail(n int) string {
	out := s.String()
	if len(out) > n {
		return "...\n" + out[len(out)-n:]
	}
	return out
}

// panicLineRE matches the lines of a broker's output that tell of a
// panic: one a connection recovered (logged at ERROR with
// broker.PanicMarker), one that ended the process, a Go runtime fatal
// error, or a data race the race detector saw.
var panicLineRE = regexp.MustCompile(`(?m)^.*(` + regexp.QuoteMeta(broker.PanicMarker) + `|^panic: |^fatal error: |^WARNING: DATA RACE).*$`)

// panicIn returns the first line of output that tells of a panic, or "".
func panicIn(output string) string {
	return panicLineRE.FindString(output)
}

// Broker is one `strata broker` process under test, with its own data
// directory and port that survive Kill and Restart.
type Broker struct {
	t testing.TB
	// Addr is host:port of the PLAINTEXT listener.
	Addr string
	// Dir is the broker's log.dirs.
	Dir string
	// overrides are the key=value pairs passed as --override.
	overrides []string
	// spec is how and where the process is started.
	spec brokerSpec

	mu struct {
		sync.Mutex
		proc *brokerProc
		all  []*brokerProc // every process started, for the failure log
	}
}

// brokerProc is one run of the broker process.
type brokerProc struct {
	cmd     *exec.Cmd
	out     *outputSink
	exited  chan struct{} // closed when Wait returns
	waitErr error         // valid after exited is closed
	wrapped bool          // cmd is a wrapper whose child is the broker
}

// signal sends sig to the broker: the process itself, or the wrapper's
// child.
func (p *brokerProc) signal(sig os.Signal) error {
	if p.cmd.Process == nil {
		return os.ErrProcessDone
	}
	if !p.wrapped {
		return p.cmd.Process.Signal(sig)
	}
	pid := p.cmd.Process.Pid
	children, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return err
	}
	f := strings.Fields(string(children))
	if len(f) == 0 {
		return p.cmd.Process.Signal(sig)
	}
	child, err := strconv.Atoi(f[0])
	if err != nil {
		return err
	}
	proc, err := os.FindProcess(child)
	if err != nil {
		return err
	}
	return proc.Signal(sig)
}

// brokerSpec is how and where a broker process runs.
type brokerSpec struct {
	// wrapper, if set, is a command line the broker runs under as its
	// child (strace -f -o FILE): signals go to the child.
	wrapper []string
	// exec, if set, is a command line that execs the broker in place (ip
	// netns exec NAME): the process started is the broker.
	exec []string
	// addr, if set, is the listener's fixed address (a host of a
	// netlab.Lab); else a free 127.0.0.1 port is picked.
	addr string
	// config, if set, is a properties file passed as --config, whose
	// listeners are kept: addr must then be one of them, as the test
	// process reaches it, and is not passed as listeners.
	config string
}

// StartBroker starts a broker on a free 127.0.0.1 port with a fresh data
// directory, passing each key=value in overrides as --override, and waits for
// it to serve. The broker is stopped with SIGTERM (then SIGKILL) when the test
// ends, and its output is logged if the test failed.
func StartBroker(t testing.TB, overrides ...string) *Broker {
	t.Helper()
	return startBroker(t, brokerSpec{}, overrides)
}

// StartBrokerUnder is StartBroker with the broker run as the last argument
// of wrapper (for example strace -f -o FILE): signals go to the broker
// itself, and the wrapper is waited for.
func StartBrokerUnder(t testing.TB, wrapper []string, overrides ...string) *Broker {
	t.Helper()
	return startBroker(t, brokerSpec{wrapper: wrapper}, overrides)
}

func startBroker(t testing.TB, spec brokerSpec, overrides []string) *Broker {
	t.Helper()
	if strataBin == "" {
		t.Skip("end-to-end tests do not run with -short")
	}
	b := &Broker{t: t, Dir: t.TempDir(), overrides: overrides, spec: spec}
	t.Cleanup(b.cleanup)
	var lastErr error
	for range 3 { // a free port can be taken between probe and bind
		b.Addr = spec.addr
		if b.Addr == "" {
			b.Addr = freeAddr(t)
		}
		p, err := b.start()
		if err == nil {
			b.setProc(p)
			return b
		}
		lastErr = err
		if spec.addr != "" || !strings.Contains(p.out.String(), "address already in use") {
			break
		}
	}
	t.Fatalf("starting broker: %v", lastErr)
	return nil
}

// freeAddr returns a 127.0.0.1 address with a port that was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatalf("closing port probe: %v", err)
	}
	return addr
}

func (b *Broker) args() []string {
	args := []string{"broker", "--override", "log.dirs=" + b.Dir}
	if b.spec.config != "" {
		// A deploy file's own metrics.listener stands: such brokers run
		// each in a network namespace of its own (TestDeployListeners).
		args = append(args, "--config", b.spec.config)
	} else {
		// No metrics listener unless the test asks for one (an override
		// below wins): the default 127.0.0.1:9404 would collide between
		// the brokers of a test and with whatever else runs here.
		args = append(args, "--override", "listeners=PLAINTEXT://"+b.Addr, "--override", "metrics.listener=")
	}
	for _, o := range b.overrides {
		args = append(args, "--override", o)
	}
	return args
}

// start launches the process and waits for the listening line. On failure
// the returned process (if any) has exited or been killed.
func (b *Broker) start() (*brokerProc, error) {
	p := &brokerProc{out: newOutputSink(), exited: make(chan struct{})}
	argv := append(append(append(slices.Clone(b.spec.wrapper), b.spec.exec...), strataBin), b.args()...)
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.wrapped = len(b.spec.wrapper) > 0
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	// The broker dies with the test binary even if cleanup never runs.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	b.mu.Lock()
	b.mu.all = append(b.mu.all, p)
	b.mu.Unlock()
	if err := p.cmd.Start(); err != nil {
		close(p.exited)
		return p, fmt.Errorf("exec %s: %w", strataBin, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	p.out.mu.Lock()
	listening := p.out.mu.listening
	p.out.mu.Unlock()
	if listening == nil { // already seen
		return p, nil
	}
	select {
	case <-listening:
		return p, nil
	case <-p.exited:
		return p, fmt.Errorf("broker exited before listening (%v); output:\n%s", p.waitErr, p.out.tail(maxLoggedOutput))
	case <-time.After(startTimeout):
		p.kill()
		return p, fmt.Errorf("broker did not print %q within %v; output:\n%s", listeningMarker, startTimeout, p.out.tail(maxLoggedOutput))
	}
}

func (b *Broker) setProc(p *brokerProc) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mu.proc = p
}

func (b *Broker) proc() *brokerProc {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.proc
}

// Alive reports whether the current broker process is still running.
func (b *Broker) Alive() bool {
	p := b.proc()
	if p == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// RequireAlive fails the test if the broker process has exited.
func (b *Broker) RequireAlive(t testing.TB) {
	t.Helper()
	if p := b.proc(); p != nil && !b.Alive() {
		t.Fatalf("broker process exited: %v; output:\n%s", p.waitErr, p.out.tail(maxLoggedOutput))
	}
}

// Output returns everything the current process has printed.
func (b *Broker) Output() string {
	if p := b.proc(); p != nil {
		return p.out.String()
	}
	return ""
}

// kill sends SIGKILL and waits for the process to go.
func (p *brokerProc) kill() {
	if p.cmd.Process == nil {
		return
	}
	_ = p.signal(syscall.SIGKILL) // already gone is fine
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Kill() // a wrapper that outlives its child
		<-p.exited
	}
}

// Kill stops the broker with SIGKILL, as a crash would, and waits for it.
func (b *Broker) Kill(t testing.TB) {
	t.Helper()
	p := b.proc()
	if p == nil {
		t.Fatalf("Kill: no broker running")
	}
	p.kill()
	b.setProc(nil)
}

// Stop stops the broker with SIGTERM and fails the test unless it exits
// cleanly (status 0) within stopTimeout; then it is killed.
func (b *Broker) Stop(t testing.TB) {
	t.Helper()
	p := b.proc()
	if p == nil {
		return
	}
	b.setProc(nil)
	select {
	case <-p.exited:
		t.Errorf("broker had already exited: %v", p.waitErr)
		return
	default:
	}
	if err := p.signal(syscall.SIGTERM); err != nil {
		t.Errorf("SIGTERM: %v", err)
	}
	select {
	case <-p.exited:
		if p.waitErr != nil {
			t.Errorf("broker exited with %v after SIGTERM, want exit status 0", p.waitErr)
		}
	case <-time.After(stopTimeout):
		t.Errorf("broker did not exit within %v of SIGTERM; its goroutines (SIGQUIT):\n%s", stopTimeout, p.goroutineDump())
		p.kill()
	}
}

// goroutineDump asks the process for the Go runtime's dump of every
// goroutine (SIGQUIT, which also ends it) and returns what it printed
// after the signal, at most maxGoroutineDump bytes of it: where a broker
// that does not stop is stuck.
func (p *brokerProc) goroutineDump() string {
	before := len(p.out.String())
	if err := p.signal(syscall.SIGQUIT); err != nil {
		return fmt.Sprintf("SIGQUIT: %v", err)
	}
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
	}
	dump := p.out.String()
	if len(dump) < before {
		return "(the output was cut)"
	}
	dump = dump[before:]
	if len(dump) > maxGoroutineDump {
		dump = dump[:maxGoroutineDump] + "\n..."
	}
	return dump
}

// Restart starts the broker again on the same data directory and port. The
// previous process must have been stopped or killed.
func (b *Broker) Restart(t testing.TB) {
	t.Helper()
	if b.proc() != nil {
		t.Fatalf("Restart: broker still running; Kill or Stop it first")
	}
	var err error
	var p *brokerProc
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err = b.start()
		// The killed process's port can linger briefly; retry on that only.
		if err == nil || !strings.Contains(p.out.String(), "address already in use") || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("restarting broker: %v", err)
	}
	b.setProc(p)
}

// cleanup stops the broker, fails the test if any run of it logged a
// panic (recovered or not) or a data race, and logs every run's output if
// the test failed.
func (b *Broker) cleanup() {
	if b.proc() != nil {
		b.Stop(b.t)
	}
	b.mu.Lock()
	all := b.mu.all
	b.mu.Unlock()
	for i, p := range all {
		if line := panicIn(p.out.String()); line != "" {
			b.t.Errorf("broker run %d of %d (%s) logged a panic: %s", i+1, len(all), b.Addr, line)
		}
	}
	if !b.t.Failed() {
		return
	}
	for i, p := range all {
		b.t.Logf("broker run %d of %d (%s, data %s) output:\n%s", i+1, len(all), b.Addr, b.Dir, p.out.tail(maxLoggedOutput))
	}
}
