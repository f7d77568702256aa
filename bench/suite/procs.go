package main

import (
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

	"github.com/stratastream/strata/bench/internal/benchutil"
	"github.com/stratastream/strata/coord/zktest"
)

// procs is every server process this run started, so that all of them are
// stopped when a scenario ends, when the run ends and on SIGINT/SIGTERM.
var procs struct {
	sync.Mutex
	live []*benchutil.Process
}

// process is a server started for the benchmark (benchutil.Process),
// known to killAll until stopped.
type process struct{ *benchutil.Process }

// start runs a server and, if ready is set, waits until ready reports true
// for its output so far (bounded by benchutil.ReadyTimeout).
func start(name, bin string, args, env []string, ready func(out string) bool) (*process, error) {
	p, err := benchutil.Start(name, bin, args, env, ready, func(p *benchutil.Process) {
		procs.Lock()
		procs.live = append(procs.live, p)
		procs.Unlock()
	})
	if err != nil {
		return nil, err
	}
	return &process{p}, nil
}

// stop stops the server (SIGTERM, SIGKILL after 15 s) and forgets it.
func (p *process) stop() {
	p.Stop()
	procs.Lock()
	procs.live = slices.DeleteFunc(procs.live, func(q *benchutil.Process) bool { return q == p.Process })
	procs.Unlock()
}

// killAll kills every process still running (the end of the run, or a
// signal).
func killAll() {
	procs.Lock()
	live := slices.Clone(procs.live)
	procs.Unlock()
	for _, p := range live {
		p.Kill()
	}
	for _, p := range live {
		select {
		case <-p.Exited():
		case <-time.After(5 * time.Second):
		}
	}
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
	addr, err := benchutil.FreeAddr()
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
	addr, err := benchutil.FreeAddr()
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
		if !p.Alive() {
			return nil, "", fmt.Errorf("zookeeper exited at start: %s", p.Tail(1500))
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return p, addr, nil
		}
	}
	p.stop()
	return nil, "", fmt.Errorf("zookeeper not listening on %s within 60s: %s", addr, p.Tail(1500))
}

const (
	minioUser   = "strata-bench"
	minioSecret = "strata-bench-secret"
)

// startMinIO starts MinIO on a free port with its data in dir.
func startMinIO(bin, dir string) (*process, string, error) {
	addr, err := benchutil.FreeAddr()
	if err != nil {
		return nil, "", err
	}
	console, err := benchutil.FreeAddr()
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
		if !p.Alive() {
			return nil, "", fmt.Errorf("minio exited at start: %s", p.Tail(1500))
		}
		if resp, err := hc.Get("http://" + addr + "/minio/health/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, addr, nil
			}
		}
	}
	p.stop()
	return nil, "", errors.New("minio not ready within 60s: " + p.Tail(1500))
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
