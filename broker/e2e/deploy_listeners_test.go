package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stratastream/strata/broker"
	"github.com/stratastream/strata/broker/e2e/history"
	"github.com/stratastream/strata/broker/e2e/netlab"
	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/segment/poll"
	"github.com/stratastream/strata/tiering/miniotest"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDeployListeners runs the brokers of deploy/docker/docker-compose.yml
// with their own properties files (deploy/docker/config/broker-N.properties)
// without Docker: each broker on a netlab host of its own, ZooKeeper and
// MinIO on two more, and in every broker's namespace the compose network's
// names (strata-1, strata-2, strata-3, zookeeper, minio) resolve to the
// lab hosts' addresses through /etc/netns/<netns>/hosts, which `ip netns
// exec` mounts over /etc/hosts; "localhost" is each host's own loopback, as
// it is each container's. Only log.dirs and the bucket are overridden: the
// listeners, advertised listeners, inter-broker listener and replication
// port are the files'. A broker that gave the other brokers its
// localhost address (the single-listener files did) makes them dial
// themselves, and the topic below never gets its followers' copies.
//
// The test process is the lab's client host: it reaches every broker's
// INTERNAL listener at the broker's address, resolving strata-N itself
// (Cluster.dial), and its EXTERNAL listener the same way, localhost:909N
// standing for the port the compose file publishes on the machine.
//
// It checks: each broker's ZooKeeper registration (its endpoints, and an
// inter-broker host that the other brokers resolve to it); that Metadata,
// DescribeCluster and FindCoordinator on each listener of each broker give
// every broker's address on that listener (strata-N:19092 on INTERNAL,
// localhost:909N on EXTERNAL); then a topic with replication factor 3 and
// min.insync.replicas=2, created and produced to with acks=all through
// INTERNAL, gets a full ISR and byte-identical replicas, tiers its sealed
// segments to MinIO (reached as minio:9000), and reads back, through
// INTERNAL and through EXTERNAL, with the history checker finding nothing
// acknowledged lost.
func TestDeployListeners(t *testing.T) {
	if strataBin == "" {
		t.Skip("end-to-end tests do not run with -short")
	}
	start := time.Now()
	const nBrokers = 3
	files := make([]string, nBrokers)
	cfgs := make([]*broker.Config, nBrokers)
	for i := range nBrokers {
		files[i] = filepath.Join("..", "..", "deploy", "docker", "config", fmt.Sprintf("broker-%d.properties", i+1))
		cfgs[i] = readBrokerFile(t, files[i])
	}
	checkComposePorts(t, cfgs)

	lab := netlab.New(t)
	zkHost, s3Host := lab.AddHost("lzk"), lab.AddHost("ls3")
	hosts := make([]*netlab.Host, nBrokers)
	names := map[string]string{"zookeeper": zkHost.IP(), "minio": s3Host.IP()}
	for i := range hosts {
		hosts[i] = lab.AddHost(fmt.Sprintf("strata%d", i+1))
		names[fmt.Sprintf("strata-%d", i+1)] = hosts[i].IP()
	}
	sweepNetnsHosts(t)
	for _, h := range hosts {
		writeNetnsHosts(t, h, names)
	}

	mio := miniotest.StartWith(t, miniotest.Options{Host: s3Host.IP(), Port: netS3Port, ConsolePort: netS3Console, Exec: s3Host.Exec()})
	bucket := mio.NewBucket(t)
	t.Setenv("AWS_ACCESS_KEY_ID", miniotest.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", miniotest.SecretKey)
	// The files' zookeeper.connect is zookeeper:2181/strata.
	zkSrv := zktest.StartWith(t, zktest.Options{Host: zkHost.IP(), Port: netZKPort, Exec: zkHost.Exec()})

	// published maps each EXTERNAL advertised localhost:port to the broker
	// host that binds it, as docker-compose's ports: publish them.
	published := map[string]string{}
	for i, cfg := range cfgs {
		for _, l := range cfg.Listeners {
			if a := advertisedOf(cfg, l.Name); a.Host == "localhost" {
				published[a.HostPort()] = hosts[i].Addr(int(l.Port))
			}
		}
	}
	c := &Cluster{ZK: zkSrv, Connect: zkSrv.ConnectString("/strata"),
		net: &netHosts{lab: lab, zk: zkHost, s3: s3Host, minio: mio, bucket: bucket, hosts: hosts,
			prefix: cfgs[0].Properties["remote.storage.s3.prefix"]}}
	c.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if to, ok := published[addr]; ok {
			addr = to
		} else if h, p, err := net.SplitHostPort(addr); err == nil && names[h] != "" {
			addr = net.JoinHostPort(names[h], p)
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	for i, cfg := range cfgs {
		ib := boundOf(t, cfg, cfg.InterBrokerListener)
		spec := brokerSpec{exec: hosts[i].Exec(), addr: hosts[i].Addr(int(ib.Port)), config: files[i]}
		c.brokers = append(c.brokers, startBroker(t, spec, []string{"remote.storage.s3.bucket=" + bucket}))
	}
	c.waitAllSee(t, 30*time.Second, nBrokers)
	t.Logf("DEPLOY_LISTENERS cluster up after %v on %v", time.Since(start).Round(time.Millisecond), lab)
	// The compose healthcheck's /readyz, on each file's metrics.listener.
	for i, cfg := range cfgs {
		checkReadyz(t, cfg, hosts[i].IP())
	}

	// What each broker registered: its inter-broker address must be one
	// the other brokers reach it at from their own hosts.
	checkRegistrations(t, c, cfgs, names)
	// What a client is told on each listener of each broker.
	for i, cfg := range cfgs {
		for _, l := range cfg.Listeners {
			checkListenerAnswers(t, c, hosts[i].Addr(int(l.Port)), l.Name, cfgs)
		}
	}

	const topic, parts, perPart = "deploy-listeners", 3, 200
	c.createTopicWith(t, topic, parts, nBrokers, map[string]string{
		"min.insync.replicas":   "2",
		"remote.storage.enable": "true",
		"segment.bytes":         "16384",
	})
	hist := history.New()
	produceStart := time.Now()
	failed := deployProduce(t, c, hist, topic, parts, perPart)
	produceTook := time.Since(produceStart)
	if failed > 0 {
		t.Errorf("%d of %d records were not acknowledged with acks=all", failed, parts*perPart)
	}
	partList := []int32{0, 1, 2}
	md := c.waitFullISR(t, 30*time.Second, topic, parts, false)
	for p, d := range md.Topics[topic].Partitions {
		if len(d.ISR) != nBrokers {
			t.Errorf("partition %d: ISR %v, want all %d replicas", p, d.ISR, nBrokers)
		}
	}
	catchUp := time.Now()
	sizes := c.compareReplicas(t, topic, partList, 30*time.Second)
	t.Logf("DEPLOY_LISTENERS replicas compared in %v: identical bytes per partition %v", time.Since(catchUp).Round(time.Millisecond), sizes)
	logs := c.readLog(t, topic, partList)
	for p, recs := range logs {
		for _, r := range recs {
			hist.Read("reader", history.TP{Topic: topic, Partition: p}, r.Offset, string(r.Value))
		}
	}
	// A client on the host, bootstrapping from the EXTERNAL addresses
	// (localhost:909N, published) reads it all too.
	external := slices.Sorted(maps.Keys(published))
	n := deployConsume(t, c, external, topic, parts*perPart, func(r *kgo.Record) {
		hist.Read("external reader", history.TP{Topic: topic, Partition: r.Partition}, r.Offset, string(r.Value))
	})
	t.Logf("DEPLOY_LISTENERS read %d records through the EXTERNAL listeners %v", n, external)
	rep := hist.Check(finalLog(topic, logs))
	t.Logf("DEPLOY_LISTENERS history %s", rep)
	if !rep.OK() || rep.Acknowledged != parts*perPart {
		t.Errorf("the history checker found %s (want %d acknowledged); first problems:\n%s", rep, parts*perPart, strings.Join(rep.Problems, "\n"))
	}
	remote, uploaded := c.compareRemote(t, topic, partList, 30*time.Second)
	t.Logf("DEPLOY_LISTENERS produce_ms=%d records=%d remote_bytes=%v uploads_caught_up_ms=%d total=%v",
		produceTook.Milliseconds(), parts*perPart, remote, uploaded.Milliseconds(), time.Since(start).Round(time.Millisecond))
}

// readBrokerFile reads a deploy properties file as `strata broker
// --config FILE` does.
func readBrokerFile(t *testing.T, path string) *broker.Config {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	props, err := broker.ParseProperties(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	cfg, err := broker.ConfigFromProperties(props)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &cfg
}

// checkComposePorts checks that docker-compose.yml publishes, on the same
// port of the machine, every port a broker advertises as localhost (what
// the test's dialer takes for granted).
func checkComposePorts(t *testing.T, cfgs []*broker.Config) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "docker", "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for i, cfg := range cfgs {
		for _, a := range cfg.AdvertisedListeners {
			if a.Host != "localhost" {
				continue
			}
			// The service strata-N's ports: list, up to the next key.
			re := regexp.MustCompile(fmt.Sprintf(`(?s)\n  strata-%d:\n.*?ports:\n((?:\s+- "[^"]*"\n)+)`, i+1))
			m := re.FindStringSubmatch(string(b))
			want := fmt.Sprintf(`"%d:%d"`, a.Port, boundOf(t, cfg, a.Name).Port)
			if m == nil || !strings.Contains(m[1], want) {
				t.Errorf("docker-compose.yml: service strata-%d does not publish %s (broker %d advertises %s)", i+1, want, i+1, a)
			}
		}
	}
}

// advertisedOf is listener name's advertised address in cfg (its bound
// one if it is not in advertised.listeners).
func advertisedOf(cfg *broker.Config, name string) broker.ListenerAddr {
	for _, a := range cfg.AdvertisedListeners {
		if a.Name == name {
			return a
		}
	}
	for _, l := range cfg.Listeners {
		if l.Name == name {
			return l
		}
	}
	return broker.ListenerAddr{}
}

// boundOf is listener name's entry in listeners; the test needs a fixed
// port.
func boundOf(t *testing.T, cfg *broker.Config, name string) broker.ListenerAddr {
	t.Helper()
	for _, l := range cfg.Listeners {
		if l.Name == name {
			if l.Port == 0 {
				t.Fatalf("listener %s has no fixed port", l)
			}
			return l
		}
	}
	t.Fatalf("no listener %s in %s", name, broker.FormatListeners(cfg.Listeners))
	return broker.ListenerAddr{}
}

// netnsEtc holds, per network namespace, the files `ip netns exec` mounts
// over those of /etc.
const netnsEtc = "/etc/netns"

// netnsHostsRE matches the /etc/netns folders this test writes:
// snl<lab>-strata<N>.
var netnsHostsRE = regexp.MustCompile(`^snl[0-9]+-strata[0-9]$`)

// writeNetnsHosts writes /etc/netns/<h's netns>/hosts, which `ip netns
// exec` mounts over /etc/hosts for the processes it starts in h: localhost
// is the namespace's own loopback, and names resolve to lab hosts. The
// folder is removed when the test ends (before the lab's namespaces).
func writeNetnsHosts(t *testing.T, h *netlab.Host, names map[string]string) {
	t.Helper()
	if !netnsHostsRE.MatchString(h.Netns()) {
		t.Fatalf("netns %q: not one this test writes hosts for", h.Netns())
	}
	dir := filepath.Join(netnsEtc, h.Netns())
	if _, err := os.Stat(netnsEtc); errors.Is(err, os.ErrNotExist) {
		// Made here: removed at the end if nothing else is in it.
		t.Cleanup(func() { _ = os.Remove(netnsEtc) })
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing %s: %v", dir, err)
		}
	})
	var b strings.Builder
	b.WriteString("# written by strata's TestDeployListeners for netlab host " + h.Name() + "\n")
	b.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost\n")
	for _, n := range slices.Sorted(maps.Keys(names)) {
		fmt.Fprintf(&b, "%s\t%s\n", names[n], n)
	}
	if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// sweepNetnsHosts removes /etc/netns folders of this test whose namespace
// is gone (a run killed before its cleanup): a later lab could take the
// same name. A live run's namespace exists before its folder is written,
// and is deleted after its folder is removed.
func sweepNetnsHosts(t *testing.T) {
	t.Helper()
	ents, err := os.ReadDir(netnsEtc)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !netnsHostsRE.MatchString(e.Name()) {
			continue
		}
		if _, err := os.Stat("/run/netns/" + e.Name()); errors.Is(err, os.ErrNotExist) {
			t.Logf("removing the leftover %s/%s", netnsEtc, e.Name())
			_ = os.RemoveAll(filepath.Join(netnsEtc, e.Name()))
		}
	}
}

// checkRegistrations reads each broker's registration from ZooKeeper: its
// endpoints must be its advertised listeners, and its inter-broker address
// (host, where the others dial its replication port) must resolve, on the
// other brokers' hosts, to its own host; localhost would be theirs.
func checkRegistrations(t *testing.T, c *Cluster, cfgs []*broker.Config, names map[string]string) {
	t.Helper()
	conn, _, err := zk.Connect([]string{c.ZK.Addr()}, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(zkQuiet{}))
	if err != nil {
		t.Fatalf("zk connect: %v", err)
	}
	defer conn.Close()
	for i, cfg := range cfgs {
		id := i + 1
		b, _, err := conn.Get(fmt.Sprintf("/strata/brokers/ids/%d", id))
		if err != nil {
			t.Fatalf("broker %d's registration: %v", id, err)
		}
		var reg struct {
			Host            string   `json:"host"`
			Port            int32    `json:"port"`
			ReplicationPort int32    `json:"replication_port"`
			Endpoints       []string `json:"endpoints"`
		}
		if err := json.Unmarshal(b, &reg); err != nil {
			t.Fatalf("broker %d's registration %s: %v", id, b, err)
		}
		t.Logf("broker %d registered %s", id, b)
		var want []string
		for _, l := range cfg.Listeners {
			want = append(want, l.Name+"://"+advertisedOf(cfg, l.Name).HostPort())
		}
		if !slices.Equal(reg.Endpoints, want) {
			t.Errorf("broker %d registered endpoints %v, want its advertised listeners %v", id, reg.Endpoints, want)
		}
		ib := advertisedOf(cfg, cfg.InterBrokerListener)
		if reg.Host != ib.Host || reg.Port != ib.Port {
			t.Errorf("broker %d registered %s:%d, want its inter-broker listener's advertised %s", id, reg.Host, reg.Port, ib.HostPort())
		}
		if ip := names[reg.Host]; ip != c.net.hosts[i].IP() {
			t.Errorf("broker %d registered inter-broker host %q, which the other brokers resolve to %q, not to its host %s: they would replicate from themselves",
				id, reg.Host, ip, c.net.hosts[i].IP())
		}
	}
}

// checkListenerAnswers connects to one listener of one broker (addr, as
// the test process reaches it) and checks that Metadata, DescribeCluster
// and FindCoordinator give every broker's address on that listener, as
// advertised in its file. The client talks to that broker only.
func checkListenerAnswers(t *testing.T, c *Cluster, addr, listener string, cfgs []*broker.Config) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTimeout(2*time.Second),
		kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			if host != addr {
				return nil, fmt.Errorf("this client talks to %s only, not %s", addr, host)
			}
			return c.dial(ctx, network, host)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seeds := cl.SeedBrokers()
	if len(seeds) != 1 {
		t.Fatalf("%d seed brokers", len(seeds))
	}
	want := map[int32]string{}
	for i, cfg := range cfgs {
		want[int32(i+1)] = advertisedOf(cfg, listener).HostPort()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	got := map[int32]string{}
	var mresp *kmsg.MetadataResponse
	poll.For(10*time.Second, func() bool {
		mresp, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, seeds[0])
		return err == nil
	})
	if err != nil {
		t.Fatalf("metadata from %s (%s): %v", addr, listener, err)
	}
	for _, b := range mresp.Brokers {
		got[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Metadata on %s (listener %s) gives brokers %v, want %v", addr, listener, got, want)
	}
	dresp, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, seeds[0])
	if err != nil {
		t.Fatalf("DescribeCluster from %s (%s): %v", addr, listener, err)
	}
	got = map[int32]string{}
	for _, b := range dresp.Brokers {
		got[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("DescribeCluster on %s (listener %s) gives brokers %v, want %v", addr, listener, got, want)
	}
	// FindCoordinator: the group coordinator at its address on this
	// listener (once the offsets topic has a leader).
	// (v4 and later answer in Coordinators, older ones at the top level.)
	var coordinator string
	var node int32
	var code int16
	poll.For(20*time.Second, func() bool {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = "deploy-listeners-group"
		req.CoordinatorKeys = []string{req.CoordinatorKey}
		var fresp *kmsg.FindCoordinatorResponse
		if fresp, err = req.RequestWith(ctx, seeds[0]); err != nil {
			return false
		}
		node, code, coordinator = fresp.NodeID, fresp.ErrorCode, net.JoinHostPort(fresp.Host, strconv.Itoa(int(fresp.Port)))
		if len(fresp.Coordinators) == 1 {
			fc := fresp.Coordinators[0]
			node, code, coordinator = fc.NodeID, fc.ErrorCode, net.JoinHostPort(fc.Host, strconv.Itoa(int(fc.Port)))
		}
		return code == 0
	})
	switch {
	case err != nil:
		t.Errorf("FindCoordinator from %s (%s): %v", addr, listener, err)
	case code != 0:
		t.Errorf("FindCoordinator from %s (%s): error code %d", addr, listener, code)
	case coordinator != want[node]:
		t.Errorf("FindCoordinator on %s (listener %s) gives broker %d at %s, want %s", addr, listener, node, coordinator, want[node])
	}
	t.Logf("listener %s at %s: Metadata and DescribeCluster give %v, FindCoordinator %s", listener, addr, got, coordinator)
}

// deployProduce produces perPart records to each partition of topic with
// acks=all (idempotent), recorded in hist, and returns how many were not
// acknowledged within the bound.
func deployProduce(t *testing.T, c *Cluster, hist *history.History, topic string, parts, perPart int) int {
	t.Helper()
	// Small uncompressed batches, so that the partitions roll several
	// segments (segment.bytes) and tier them.
	cl := c.newClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(4096))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), deployProduceBound)
	defer cancel()
	pad := strings.Repeat("x", 200)
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for p := range int32(parts) {
		tp := history.TP{Topic: topic, Partition: p}
		for i := range perPart {
			v := seqValue(p, i) + "-" + pad
			hist.Sent("franz-go", tp, v)
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}, func(r *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					hist.Answered(tp, v, history.Unknown, -1, err.Error())
					mu.Lock()
					failed++
					mu.Unlock()
					return
				}
				hist.Answered(tp, v, history.Acked, r.Offset, "")
			})
		}
	}
	// An idempotent producer retries a record in flight until it is
	// answered, whatever its context: past the bound, closing the client
	// fails what is left.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(deployProduceBound):
		t.Errorf("records not acknowledged %v after producing them; closing the producer", deployProduceBound)
		cl.Close()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("records still unanswered 30s after closing the producer")
		}
	}
	return failed
}

// deployProduceBound bounds the wait for the acknowledgements of
// deployProduce.
const deployProduceBound = 40 * time.Second

// deployConsume reads topic from the start through a client seeded with
// seeds until want records came (bounded), passing each to read, and
// returns how many came.
func deployConsume(t *testing.T, c *Cluster, seeds []string, topic string, want int, read func(*kgo.Record)) int {
	t.Helper()
	cl, err := kgo.NewClient(append(c.clientOpts(seeds...), kgo.DialTimeout(2*time.Second),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := 0
	for n < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Errorf("read %d of %d records of %s through %v: %v", n, want, topic, seeds, ctx.Err())
			return n
		}
		fs.EachError(func(tp string, p int32, err error) { t.Logf("fetch %s-%d through %v: %v", tp, p, seeds, err) })
		fs.EachRecord(func(r *kgo.Record) { n++; read(r) })
	}
	return n
}

// checkReadyz polls the broker's /readyz on its metrics.listener port at
// host until it answers 200 (registered and serving), as the compose
// healthcheck does, and checks that /metrics serves the broker's metrics.
func checkReadyz(t *testing.T, cfg *broker.Config, host string) {
	t.Helper()
	_, port, err := net.SplitHostPort(cfg.MetricsListen)
	if err != nil || port == "0" {
		t.Fatalf("deploy file metrics.listener %q: want a fixed port (%v)", cfg.MetricsListen, err)
	}
	base := "http://" + net.JoinHostPort(host, port)
	hc := &http.Client{Timeout: 5 * time.Second}
	get := func(path string) (int, string) {
		resp, err := hc.Get(base + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(b)
	}
	var code int
	var body string
	start := time.Now()
	if !poll.For(60*time.Second, func() bool { code, body = get("/readyz"); return code == 200 }) {
		t.Fatalf("%s/readyz: %d %q, want 200", base, code, body)
	}
	t.Logf("DEPLOY_LISTENERS %s/readyz 200 after %v", base, time.Since(start).Round(time.Millisecond))
	if code, body = get("/metrics"); code != 200 || !strings.Contains(body, "strata_controller_active") {
		t.Fatalf("%s/metrics: %d, strata_controller_active missing", base, code)
	}
}
