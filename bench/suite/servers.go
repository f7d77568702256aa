package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/stratastream/strata/coord/zktest"
)

// broker is one Strata broker process.
type broker struct {
	*process
	bin, addr, dir string
	env            []string
}

// startBroker starts a broker listening on a free port with its data in
// dir and the given extra settings.
func startBroker(bin, name, dir string, env []string, settings ...string) (*broker, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	b := &broker{bin: bin, addr: addr, dir: dir, env: env}
	if err := b.launch(name, settings); err != nil {
		return nil, err
	}
	return b, nil
}

// restart stops the broker and starts it again on the same address and
// data directory, with settings in place of the ones it had.
func (b *broker) restart(settings ...string) error {
	name := b.Name
	b.stop()
	return b.launch(name, settings)
}

func (b *broker) launch(name string, settings []string) error {
	// No metrics listener unless a setting below asks for one: the
	// default 127.0.0.1:9404 would collide between brokers.
	args := []string{"broker", "--override", "listeners=PLAINTEXT://" + b.addr, "--override", "log.dirs=" + b.dir, "--override", "metrics.listener="}
	for _, s := range settings {
		args = append(args, "--override", s)
	}
	logf("starting %s on %s", name, b.addr)
	p, err := start(name, b.bin, args, b.env, func(out string) bool { return strings.Contains(out, "strata broker listening on") })
	if err != nil {
		return err
	}
	b.process = p
	return nil
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

// The MinIO root credentials of every MinIO the suite starts; brokers get
// them as AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (minioEnv).
const (
	minioUser   = "strata-bench"
	minioSecret = "strata-bench-secret"
)

// minioEnv is the environment of a broker tiering to the suite's MinIO.
func minioEnv() []string {
	return append(os.Environ(), "AWS_ACCESS_KEY_ID="+minioUser, "AWS_SECRET_ACCESS_KEY="+minioSecret)
}

// startMinIO starts MinIO with its data in dir: on a free loopback port,
// or, with a link, in the link's network namespace (the run's alone, so on
// fixed ports there).
func startMinIO(bin, dir string, link *storeLink) (*process, string, error) {
	var addr, console string
	if link != nil {
		addr, console = net.JoinHostPort(link.nsIP, "9000"), net.JoinHostPort(link.nsIP, "9001")
	} else {
		var err error
		if addr, err = freeAddr(); err != nil {
			return nil, "", err
		}
		if console, err = freeAddr(); err != nil {
			return nil, "", err
		}
	}
	env := append(os.Environ(), "MINIO_ROOT_USER="+minioUser, "MINIO_ROOT_PASSWORD="+minioSecret,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off", "HOME="+dir)
	name, args := bin, []string{"server", filepath.Join(dir, "data"), "--address", addr, "--console-address", console,
		"--certs-dir", filepath.Join(dir, "certs"), "--quiet"}
	if link != nil {
		name, args = link.command(name, args)
	}
	p, err := start("minio", name, args, env, nil)
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

// findNATS returns the natscli binary: flagged when set, else nats on PATH,
// else nats in $(go env GOPATH)/bin (where
// deploy/scripts/install-bench-deps.sh installs it).
func findNATS(flagged string) (string, error) {
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
