// Package zktest runs a real ZooKeeper server for tests: Debian's zookeeper
// package (installed with apt-get when missing), started as its own JVM
// process with its own zoo.cfg, data directory and free port on 127.0.0.1
// (or the host, port and command prefix of Options, to run it in a
// network namespace), and killed when the test ends. It also offers a TCP Proxy that a test
// can cut to partition one client from the server (session expiry without
// stopping the server).
//
// It is an ordinary package so that any package's tests can use it:
//
//	zk := zktest.Start(t)
//	connect := zk.ConnectString("/strata") // "127.0.0.1:PORT/strata"
//	zk.Stop()    // outage: the process is killed, its data kept
//	zk.Restart() // same port, same data directory
//	zk.Pause()   // stall: SIGSTOP, connections stay open unanswered
//	zk.Resume()  // SIGCONT
package zktest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// Options tune the server. The zero value gives the defaults.
type Options struct {
	// TickTime is ZooKeeper's basic time unit; session expiry is checked
	// at this granularity. Default 250ms, so session-expiry tests are
	// fast.
	TickTime time.Duration
	// MinSessionTimeout and MaxSessionTimeout bound the session timeout a
	// client may negotiate. Defaults 1s and 60s.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// StartTimeout bounds how long Start and Restart wait for the server
	// to answer. Default 30s.
	StartTimeout time.Duration
	// Host is the address the server listens on. Default 127.0.0.1.
	Host string
	// Port is the client port. Default: a free port of 127.0.0.1, found
	// again if the server cannot bind it. Set it for a Host that is not
	// in the test's own network namespace (where probing for a free port
	// means nothing).
	Port int
	// Exec, if set, is a command line the server runs under, which must
	// exec it in place (so the process started is the JVM itself): for
	// example ip netns exec NAME, to run it in a network namespace.
	Exec []string
}

func (o *Options) defaults() {
	if o.TickTime <= 0 {
		o.TickTime = 250 * time.Millisecond
	}
	if o.MinSessionTimeout <= 0 {
		o.MinSessionTimeout = time.Second
	}
	if o.MaxSessionTimeout <= 0 {
		o.MaxSessionTimeout = time.Minute
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 30 * time.Second
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
}

// Server is one standalone ZooKeeper process.
type Server struct {
	t    testing.TB
	opts Options
	dir  string // holds zoo.cfg, data/ and server.log
	port int

	mu struct {
		sync.Mutex
		cmd    *exec.Cmd
		exited chan struct{} // closed when cmd has been waited for
	}
}

// Start installs ZooKeeper if needed, starts a server with default
// options and registers its cleanup. It fails the test if the server does
// not answer within the start timeout.
func Start(t testing.TB) *Server { return StartWith(t, Options{}) }

// StartWith is Start with options.
func StartWith(t testing.TB, opts Options) *Server {
	t.Helper()
	if err := EnsureInstalled(); err != nil {
		t.Fatal(err)
	}
	opts.defaults()
	s := &Server{t: t, opts: opts, dir: t.TempDir()}
	t.Cleanup(s.Stop)
	var err error
	if opts.Port < 0 || opts.Port > 65535 {
		t.Fatalf("zktest: port %d", opts.Port)
	}
	for attempt := 0; attempt < 3; attempt++ {
		s.port = opts.Port
		if s.port == 0 {
			if s.port, err = freePort(); err != nil {
				t.Fatalf("zktest: %v", err)
			}
		}
		if err = s.writeConfig(); err != nil {
			t.Fatalf("zktest: %v", err)
		}
		if err = s.start(); err == nil {
			return s
		}
		// Most likely the free port was taken before the JVM bound it.
		s.Stop()
	}
	t.Fatalf("zktest: %v", err)
	return nil
}

// Addr is the server's client address, HOST:PORT (127.0.0.1:PORT by
// default).
func (s *Server) Addr() string { return net.JoinHostPort(s.opts.Host, strconv.Itoa(s.port)) }

// Port is the server's client port.
func (s *Server) Port() int { return s.port }

// ConnectString returns a zookeeper.connect value for this server with the
// given chroot ("" for none), e.g. "127.0.0.1:PORT/strata".
func (s *Server) ConnectString(chroot string) string { return s.Addr() + chroot }

// Dir is the server's directory: zoo.cfg, data/ and server.log.
func (s *Server) Dir() string { return s.dir }

// Stop kills the server process (SIGKILL: ZooKeeper fsyncs its transaction
// log before it acknowledges a write, so nothing acknowledged is lost) and
// waits for it to exit. The data directory is kept for Restart. Stop on a
// stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, exited := s.mu.cmd, s.mu.exited
	s.mu.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		s.t.Errorf("zktest: server pid %d did not exit 10s after SIGKILL", cmd.Process.Pid)
	}
}

// Restart starts a stopped server again on the same port with the same
// data directory, and waits until it answers.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	deadline := time.Now().Add(s.opts.StartTimeout)
	var err error
	for time.Now().Before(deadline) {
		if err = s.start(); err == nil {
			return
		}
		// The port may still be held by a lingering connection; retry.
		s.Stop()
		time.Sleep(200 * time.Millisecond)
	}
	s.t.Fatalf("zktest: restart: %v", err)
}

// Pause stops the server process with SIGSTOP: its clients' connections
// stay open but nothing is answered, as when ZooKeeper stalls (a long GC
// pause, a hung disk). The process is resumed when the test ends if
// Resume was not called. Pause on a stopped server fails the test.
func (s *Server) Pause() {
	s.t.Helper()
	s.signal(syscall.SIGSTOP)
	s.t.Cleanup(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.mu.cmd != nil {
			_ = syscall.Kill(-s.mu.cmd.Process.Pid, syscall.SIGCONT) // best effort: Stop kills it anyway
		}
	})
}

// Resume lets a paused server go on (SIGCONT).
func (s *Server) Resume() {
	s.t.Helper()
	s.signal(syscall.SIGCONT)
}

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.cmd == nil {
		s.t.Fatalf("zktest: %v: the server is not running", sig)
	}
	if err := syscall.Kill(-s.mu.cmd.Process.Pid, sig); err != nil {
		s.t.Fatalf("zktest: %v of server pid %d: %v", sig, s.mu.cmd.Process.Pid, err)
	}
}

// Running reports whether the server process is running.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.cmd == nil {
		return false
	}
	select {
	case <-s.mu.exited:
		return false
	default:
		return true
	}
}

func (s *Server) writeConfig() error {
	cfg := fmt.Sprintf(`# written by zktest
tickTime=%d
dataDir=%s
clientPort=%d
clientPortAddress=%s
admin.enableServer=false
4lw.commands.whitelist=
minSessionTimeout=%d
maxSessionTimeout=%d
maxClientCnxns=0
`, s.opts.TickTime.Milliseconds(), filepath.Join(s.dir, "data"), s.port, s.opts.Host,
		s.opts.MinSessionTimeout.Milliseconds(), s.opts.MaxSessionTimeout.Milliseconds())
	return os.WriteFile(filepath.Join(s.dir, "zoo.cfg"), []byte(cfg), 0o644)
}

// start launches the JVM and waits until the server answers a session
// handshake.
func (s *Server) start() error {
	logf, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	argv := append(slices.Clone(s.opts.Exec), "java",
		"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-Dzookeeper.admin.enableServer=false",
		"-cp", ConfDir+":"+ServerJar+":"+SLF4JJar,
		mainClass, filepath.Join(s.dir, "zoo.cfg"))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("start java: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(exited)
	}()
	s.mu.Lock()
	s.mu.cmd, s.mu.exited = cmd, exited
	s.mu.Unlock()

	deadline := time.Now().Add(s.opts.StartTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("server exited during start; log:\n%s", s.logTail())
		default:
		}
		if err = handshake(s.Addr()); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("server on %s did not answer within %v (%v); log:\n%s", s.Addr(), s.opts.StartTimeout, err, s.logTail())
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(bytes.TrimSpace(b))
}

// handshake opens a ZooKeeper session with the server and closes it.
func handshake(addr string) error {
	c, events, err := zk.Connect([]string{addr}, 2*time.Second, zk.WithLogger(discard{}), zk.WithLogInfo(false))
	if err != nil {
		return err
	}
	defer c.Close()
	timeout := time.After(2 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				_, _, err := c.Exists("/")
				return err
			}
		case <-timeout:
			return fmt.Errorf("no session within 2s")
		}
	}
}

type discard struct{}

func (discard) Printf(string, ...any) {}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
