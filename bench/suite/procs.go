package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/coord/zktest"
)

// procs is every server process this run started, so that all of them are
// stopped when a scenario ends, when the run ends and on SIGINT/SIGTERM.
var procs struct {
	sync.Mutex
	live []*process
}

// process is a server started for the benchmark, in a process group of
// its own and killed if this driver dies (Pdeathsig).
type process struct {
	name   string
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	exited chan struct{}
}

// start runs a server and, if ready is set, waits until ready reports true
// for its output so far (bounded by 60 s).
func start(name, bin string, args, env []string, ready func(out string) bool) (*process, error) {
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = env
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &process{name: name, cmd: cmd, exited: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	procs.Lock()
	procs.live = append(procs.live, p)
	procs.Unlock()
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
		return nil, fmt.Errorf("%s exited (%v) before it was ready: %s", name, cmd.ProcessState, p.tail(1500))
	case <-time.After(60 * time.Second):
		p.stop()
		return nil, fmt.Errorf("%s not ready within 60s: %s", name, p.tail(1500))
	}
}

func (p *process) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *process) tail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.out.String()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}

// stop sends SIGTERM to the process group, then SIGKILL after 15 s.
func (p *process) stop() {
	pid := p.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-p.exited
	}
	procs.Lock()
	procs.live = slices.DeleteFunc(procs.live, func(q *process) bool { return q == p })
	procs.Unlock()
}

// killAll kills every process still running (the end of the run, or a
// signal).
func killAll() {
	procs.Lock()
	live := slices.Clone(procs.live)
	procs.Unlock()
	for _, p := range live {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	for _, p := range live {
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
		}
	}
}

// freeAddr returns a 127.0.0.1 address with a port that was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// runTool runs one of the benchmark tools with a bound, its stderr shown
// live when this driver's stderr is a terminal (so loadgen's progress bar
// shows) and kept for the error message.
func runTool(ctx context.Context, timeout time.Duration, bin string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out, errOut bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errOut
	if terminal {
		cmd.Stderr = io.MultiWriter(&errOut, os.Stderr)
	}
	err := cmd.Run()
	if err != nil {
		msg := strings.TrimSpace(errOut.String())
		if i := strings.LastIndexByte(msg, '\r'); i >= 0 { // progress bar
			msg = msg[i+1:]
		}
		if len(msg) > 1500 {
			msg = "..." + msg[len(msg)-1500:]
		}
		return out.Bytes(), fmt.Errorf("%s: %v: %s", filepath.Base(bin), err, msg)
	}
	return out.Bytes(), nil
}

// runJSON runs a tool and decodes the JSON it prints on stdout.
func runJSON(ctx context.Context, timeout time.Duration, v any, bin string, args ...string) error {
	out, err := runTool(ctx, timeout, bin, args...)
	if err != nil {
		return err
	}
	return json.Unmarshal(out, v)
}

// broker is one Strata broker process.
type broker struct {
	*process
	addr string
	dir  string
}

// startBroker starts a broker listening on a free port with its data in
// dir and the given extra settings.
func startBroker(bin, name, dir string, env []string, settings ...string) (*broker, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := []string{"broker", "--override", "listeners=PLAINTEXT://" + addr, "--override", "log.dirs=" + dir}
	for _, s := range settings {
		args = append(args, "--override", s)
	}
	logf("starting %s on %s", name, addr)
	p, err := start(name, bin, args, env, func(out string) bool { return strings.Contains(out, "strata broker listening on") })
	if err != nil {
		return nil, err
	}
	return &broker{process: p, addr: addr, dir: dir}, nil
}

// waitBrokers waits (bounded) until the cluster's metadata lists n brokers.
func waitBrokers(ctx context.Context, seed string, n int, timeout time.Duration) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(seed, ",")...))
	if err != nil {
		return err
	}
	defer cl.Close()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		req := kmsg.NewPtrMetadataRequest()
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := req.RequestWith(rctx, cl)
		cancel()
		if err == nil && len(resp.Brokers) >= n {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("%d brokers", len(resp.Brokers))
		}
		time.Sleep(300 * time.Millisecond)
	}
	return fmt.Errorf("metadata did not list %d brokers within %v (last: %s)", n, timeout, last)
}

// startZooKeeper starts Debian's ZooKeeper (installing it when missing, as
// coord/zktest does) on a free port with its data in dir.
func startZooKeeper(dir string) (*process, string, error) {
	if err := zktest.EnsureInstalled(); err != nil {
		return nil, "", err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	_, port, _ := net.SplitHostPort(addr)
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, "", err
	}
	cfg := fmt.Sprintf("tickTime=500\ndataDir=%s\nclientPort=%s\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\nmaxClientCnxns=0\nminSessionTimeout=2000\nmaxSessionTimeout=60000\n",
		filepath.Join(dir, "data"), port)
	if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
		return nil, "", err
	}
	p, err := start("zookeeper", "java", []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dzookeeper.admin.enableServer=false",
		"-cp", zktest.ConfDir + ":" + zktest.ServerJar + ":" + zktest.SLF4JJar,
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(dir, "zoo.cfg")}, nil, nil)
	if err != nil {
		return nil, "", err
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if !p.alive() {
			return nil, "", fmt.Errorf("zookeeper exited at start: %s", p.tail(1500))
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return p, addr, nil
		}
	}
	p.stop()
	return nil, "", fmt.Errorf("zookeeper not listening on %s within 60s: %s", addr, p.tail(1500))
}

const (
	minioUser   = "strata-bench"
	minioSecret = "strata-bench-secret"
)

// startMinIO starts MinIO on a free port with its data in dir.
func startMinIO(bin, dir string) (*process, string, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	console, err := freeAddr()
	if err != nil {
		return nil, "", err
	}
	env := append(os.Environ(), "MINIO_ROOT_USER="+minioUser, "MINIO_ROOT_PASSWORD="+minioSecret,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off", "HOME="+dir)
	p, err := start("minio", bin, []string{"server", filepath.Join(dir, "data"), "--address", addr, "--console-address", console,
		"--certs-dir", filepath.Join(dir, "certs"), "--quiet"}, env, nil)
	if err != nil {
		return nil, "", err
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if !p.alive() {
			return nil, "", fmt.Errorf("minio exited at start: %s", p.tail(1500))
		}
		if resp, err := hc.Get("http://" + addr + "/minio/health/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, addr, nil
			}
		}
	}
	p.stop()
	return nil, "", errors.New("minio not ready within 60s: " + p.tail(1500))
}

// describeTopic returns each partition's leader, replicas and ISR as the
// cluster's metadata gives them.
func describeTopic(ctx context.Context, seeds, topic string) (string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(seeds, ",")...))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl)
	if err != nil {
		return "", err
	}
	var parts []string
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 {
			return "", fmt.Errorf("error code %d", t.ErrorCode)
		}
		slices.SortFunc(t.Partitions, func(a, b kmsg.MetadataResponseTopicPartition) int { return int(a.Partition - b.Partition) })
		for _, p := range t.Partitions {
			parts = append(parts, fmt.Sprintf("partition %d leader %d replicas %v ISR %v", p.Partition, p.Leader, p.Replicas, p.ISR))
		}
	}
	return strings.Join(parts, "; "), nil
}
