// Package miniotest runs a real MinIO server for tests: built once from the
// Go module proxy (see Binary), started on free 127.0.0.1 ports (or the
// host, ports and command prefix of Options, to run it in a network
// namespace) with a directory of its own, stopped and restarted to simulate outages, and
// killed when the test ends. Its minio-go client creates buckets and reads
// what the code under test wrote, as an independent S3 client.
package miniotest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Credentials of every test server.
const (
	AccessKey = "strata-test"
	SecretKey = "strata-test-secret"
)

// ReadyTimeout bounds the wait for a started server to answer.
const ReadyTimeout = 60 * time.Second

// Options place the server. The zero value is a free port of 127.0.0.1.
type Options struct {
	// Host is the address the server listens on. Default 127.0.0.1.
	Host string
	// Port and ConsolePort are its S3 and console ports. Default: free
	// ports of 127.0.0.1, found again if the server cannot bind them. Set
	// them for a Host that is not in the test's own network namespace.
	Port, ConsolePort int
	// Exec, if set, is a command line the server runs under, which must
	// exec it in place (so the process started is MinIO itself): for
	// example ip netns exec NAME, to run it in a network namespace.
	Exec []string
}

// Server is one MinIO process. Methods taking a testing.TB fail that test
// on error.
type Server struct {
	opts        Options
	bin         string
	dir         string // data directory (the server's drive)
	port        int
	consolePort int
	client      *minio.Client

	mu struct {
		sync.Mutex
		cmd  *exec.Cmd
		done chan struct{} // closed when cmd has exited
		log  *bytes.Buffer
	}
}

// Start builds or finds MinIO, starts it and waits until it is ready. It is
// killed and its directory removed when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith is Start with options.
func StartWith(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Port < 0 || opts.Port > 65535 || opts.ConsolePort < 0 || opts.ConsolePort > 65535 || (opts.Port != 0) != (opts.ConsolePort != 0) {
		t.Fatalf("miniotest: ports %d and %d: give both or neither", opts.Port, opts.ConsolePort)
	}
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{opts: opts, bin: bin, dir: t.TempDir()}
	t.Cleanup(s.Stop)
	for attempt := 0; ; attempt++ {
		s.port, s.consolePort = opts.Port, opts.ConsolePort
		if s.port == 0 {
			if s.port, err = freePort(); err == nil {
				s.consolePort, err = freePort()
			}
		}
		if err != nil {
			t.Fatalf("miniotest: %v", err)
		}
		err = s.start()
		if err == nil {
			break
		}
		s.Stop()
		if attempt == 2 {
			t.Fatalf("miniotest: %v", err)
		}
	}
	s.client, err = minio.New(s.Addr(), &minio.Options{Creds: credentials.NewStaticV4(AccessKey, SecretKey, "")})
	if err != nil {
		t.Fatalf("miniotest: client: %v", err)
	}
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort(s.opts.Host, strconv.Itoa(s.port)) }

// Endpoint is the server's URL, for remote.storage.s3.endpoint.
func (s *Server) Endpoint() string { return "http://" + s.Addr() }

// Dir is the server's data directory.
func (s *Server) Dir() string { return s.dir }

// Client is a minio-go client of the server, with the root credentials.
func (s *Server) Client() *minio.Client { return s.client }

var bucketSeq atomic.Int64

// NewBucket creates a bucket with a fresh name and returns the name.
func (s *Server) NewBucket(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("strata-%d-%d", os.Getpid()%100000, bucketSeq.Add(1))
	s.CreateBucket(t, name)
	return name
}

// CreateBucket creates the bucket.
func (s *Server) CreateBucket(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.client.MakeBucket(ctx, name, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("miniotest: make bucket %s: %v", name, err)
	}
}

// Stop kills the server (SIGKILL, as an outage would) and waits for it to
// exit (bounded). Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.mu.cmd, s.mu.done
	s.mu.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}

// Restart starts a stopped server again, on the same port and directory,
// and waits until it is ready.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	var err error
	deadline := time.Now().Add(ReadyTimeout)
	for {
		// The port may linger for a moment after the kill.
		if err = s.start(); err == nil {
			return
		}
		s.Stop()
		if time.Now().After(deadline) {
			t.Fatalf("miniotest: restart: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Running reports whether the server process is up.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.cmd == nil {
		return false
	}
	select {
	case <-s.mu.done:
		return false
	default:
		return true
	}
}

func (s *Server) start() error {
	argv := append(slices.Clone(s.opts.Exec), s.bin, "server", filepath.Join(s.dir, "data"),
		"--address", s.Addr(),
		"--console-address", net.JoinHostPort(s.opts.Host, strconv.Itoa(s.consolePort)),
		"--certs-dir", filepath.Join(s.dir, "certs"),
		"--quiet")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(),
		"MINIO_ROOT_USER="+AccessKey,
		"MINIO_ROOT_PASSWORD="+SecretKey,
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
		"HOME="+s.dir,
	)
	log := new(bytes.Buffer)
	cmd.Stdout = &lockedWriter{w: log, mu: &s.mu.Mutex}
	cmd.Stderr = cmd.Stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.mu.cmd, s.mu.done, s.mu.log = cmd, done, log
	s.mu.Unlock()

	deadline := time.Now().Add(ReadyTimeout)
	hc := &http.Client{Timeout: 2 * time.Second}
	// Ready is also an authenticated request answered: right after a
	// restart, /minio/health/ready can pass while requests still get 503
	// (IAM and the object layer initializing), which a test reading the
	// data back at once met.
	probe, err := minio.New(s.Addr(), &minio.Options{Creds: credentials.NewStaticV4(AccessKey, SecretKey, "")})
	if err != nil {
		return fmt.Errorf("minio probe client: %w", err)
	}
	answers := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := probe.ListBuckets(ctx)
		return err == nil
	}
	for {
		select {
		case <-done:
			return fmt.Errorf("minio exited at start:\n%s", s.logTail())
		default:
		}
		resp, err := hc.Get(s.Endpoint() + "/minio/health/ready")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK && answers() {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("minio not ready after %v:\n%s", ReadyTimeout, s.logTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// logTail returns the end of the server's output.
func (s *Server) logTail() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.log == nil {
		return ""
	}
	out := s.mu.log.String()
	if len(out) > 4000 {
		out = out[len(out)-4000:]
	}
	return strings.TrimSpace(out)
}

// lockedWriter serializes the process's output into a buffer read by
// logTail.
type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
