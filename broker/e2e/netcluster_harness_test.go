package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/minio/minio-go/v7"
	"github.com/stratastream/strata/broker/e2e/netlab"
	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/segment/poll"
	"github.com/stratastream/strata/tiering"
	"github.com/stratastream/strata/tiering/miniotest"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Ports of the processes on a netlab host: each host has its own
// address, so they are fixed.
const (
	netKafkaPort = 9092
	netReplPort  = 9093
	netZKPort    = 2181
	netS3Port    = 9000
	netS3Console = 9001
)

// netHosts is where the processes of a cluster on a netlab.Lab run.
type netHosts struct {
	lab *netlab.Lab
	zk  *netlab.Host
	// s3 runs MinIO, with the brokers' bucket.
	s3     *netlab.Host
	minio  *miniotest.Server
	bucket string
	// prefix is the brokers' remote.storage.s3.prefix ("" for none).
	prefix string
	// hosts[i] runs broker i+1; proxies[i] is in front of it, on the
	// address it advertises.
	hosts   []*netlab.Host
	proxies []*netlab.Proxy
}

// StartNetCluster is StartCluster on the hosts of lab: ZooKeeper on host
// "zk", MinIO on host "s3" with a bucket the brokers tier to (topics
// created with remote.storage.enable upload there), broker i on host
// "b<i>" listening on its host's address (Kafka on
// netKafkaPort, replication on netReplPort), each with a netlab.Proxy in
// front of it on a second address of its host, which the broker
// advertises (advertised.listeners): clients and the other brokers reach
// it only through that address, so the proxy's faults can be placed
// between any two of them, and a broker that published 127.0.0.1 or its
// listener's address instead would be unreachable through the proxy
// (checkAdvertised). The links are healed (lab.HealAll) before the
// brokers are stopped when the test ends.
func StartNetCluster(t *testing.T, lab *netlab.Lab, n int, overrides ...string) *Cluster {
	t.Helper()
	if strataBin == "" {
		t.Skip("end-to-end tests do not run with -short")
	}
	nh := &netHosts{lab: lab, zk: lab.AddHost("zk"), s3: lab.AddHost("s3")}
	for id := 1; id <= n; id++ {
		h := lab.AddHost("b" + strconv.Itoa(id))
		nh.hosts = append(nh.hosts, h)
		nh.proxies = append(nh.proxies, lab.Proxy(h, netKafkaPort, netReplPort))
	}
	nh.minio = miniotest.StartWith(t, miniotest.Options{Host: nh.s3.IP(), Port: netS3Port, ConsolePort: netS3Console, Exec: nh.s3.Exec()})
	nh.bucket = nh.minio.NewBucket(t)
	t.Setenv("AWS_ACCESS_KEY_ID", miniotest.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", miniotest.SecretKey)
	c := &Cluster{net: nh}
	c.ZK = zktest.StartWith(t, zktest.Options{Host: nh.zk.IP(), Port: netZKPort, Exec: nh.zk.Exec()})
	c.Connect = c.ZK.ConnectString("/strata")
	for id := 1; id <= n; id++ {
		h, p := nh.hosts[id-1], nh.proxies[id-1]
		extra := append([]string{
			"advertised.listeners=PLAINTEXT://" + p.Addr(netKafkaPort),
			"replication.port=" + strconv.Itoa(netReplPort),
			"remote.storage.s3.endpoint=" + nh.minio.Endpoint(),
			"remote.storage.s3.bucket=" + nh.bucket,
		}, overrides...)
		spec := brokerSpec{exec: h.Exec(), addr: h.Addr(netKafkaPort)}
		c.brokers = append(c.brokers, startBroker(t, spec, c.brokerOverrides(id, extra)))
	}
	// Registered after the brokers' cleanups, so it runs before them: a
	// broker cut from ZooKeeper could not shut down cleanly.
	t.Cleanup(lab.HealAll)
	c.waitAllSee(t, 30*time.Second, n)
	t.Logf("cluster on %v", lab)
	return c
}

// host is the netlab host of broker id.
func (c *Cluster) host(id int32) *netlab.Host { return c.net.hosts[id-1] }

// proxy is the proxy in front of broker id.
func (c *Cluster) proxy(id int32) *netlab.Proxy { return c.net.proxies[id-1] }

// brokerHosts lists the hosts of the brokers with the given ids.
func (c *Cluster) brokerHosts(ids ...int32) []*netlab.Host {
	var out []*netlab.Host
	for _, id := range ids {
		out = append(out, c.host(id))
	}
	return out
}

// checkAdvertised checks that Metadata gives every broker its proxy's
// address (advertised.listeners), not its listener's or 127.0.0.1.
func (c *Cluster) checkAdvertised(t *testing.T) {
	t.Helper()
	cl := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	for _, b := range resp.Brokers {
		want := c.proxy(b.NodeID).Addr(netKafkaPort)
		if got := fmt.Sprintf("%s:%d", b.Host, b.Port); got != want {
			t.Errorf("metadata gives broker %d at %s, want its advertised %s", b.NodeID, got, want)
		}
	}
}

// proxyTraffic summarizes what went through each broker's proxy, and
// checks that the brokers replicated through them (connections from
// another broker's host to the replication port) and that the test's
// clients came through them (the client host on the Kafka port).
func (c *Cluster) proxyTraffic(t *testing.T) string {
	t.Helper()
	var parts []string
	for i, p := range c.net.proxies {
		id := int32(i + 1)
		repl, clients := 0, 0
		for _, s := range p.Stats() {
			parts = append(parts, fmt.Sprintf("%s->b%d:%d conns=%d in=%d out=%d", s.From, id, s.Port, s.Connections, s.BytesIn, s.BytesOut))
			if s.Port == netReplPort && strings.HasPrefix(s.From, "b") {
				repl += s.Connections
			}
			if s.Port == netKafkaPort && s.From == "client" {
				clients += s.Connections
			}
		}
		if repl == 0 {
			t.Errorf("no broker replicated from broker %d through its advertised address %s", id, p.IP())
		}
		if clients == 0 {
			t.Errorf("no client reached broker %d through its advertised address %s", id, p.IP())
		}
	}
	return strings.Join(parts, " ")
}

// partState is a partition's state znode as the ZooKeeper watch saw it.
type partState struct {
	version int32
	at      time.Time
	Leader  int32   `json:"leader"`
	Epoch   int32   `json:"leader_epoch"`
	ISR     []int32 `json:"isr"`
}

// zkWatch follows, from ZooKeeper itself, the state of every partition of
// a topic, the controller and the broker registrations: every version of
// a state znode it sees is kept, so that the leader elections can be
// checked against the ISR they replaced.
type zkWatch struct {
	conn   *zk.Conn
	topic  string
	cancel context.CancelFunc
	done   chan struct{}

	mu struct {
		sync.Mutex
		states     map[int32][]partState
		controller int32
		brokers    []int32
		err        error
	}
}

// watchZK starts a zkWatch of topic's partitions 0..parts-1. It stops
// when the test ends.
func (c *Cluster) watchZK(t *testing.T, topic string, parts int) *zkWatch {
	t.Helper()
	conn, _, err := zk.Connect([]string{c.ZK.Addr()}, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(zkQuiet{}))
	if err != nil {
		t.Fatalf("zk connect: %v", err)
	}
	w := &zkWatch{conn: conn, topic: topic, done: make(chan struct{})}
	w.mu.states = map[int32][]partState{}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go w.run(ctx, parts)
	t.Cleanup(w.stop)
	return w
}

type zkQuiet struct{}

func (zkQuiet) Printf(string, ...any) {}

func (w *zkWatch) stop() {
	w.cancel()
	<-w.done
	w.conn.Close()
}

// run follows each partition's state znode with a ZooKeeper watch, read
// again at each event (versions written between an event and the read
// are missed; the versions seen tell where), and polls the controller
// and the registrations every 20 ms.
func (w *zkWatch) run(ctx context.Context, parts int) {
	defer close(w.done)
	var wg sync.WaitGroup
	for p := range int32(parts) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.follow(ctx, p)
		}()
	}
	defer wg.Wait()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, _, err := w.conn.Get("/strata/controller"); err == nil {
			var cd struct {
				BrokerID int32 `json:"broker_id"`
			}
			if json.Unmarshal(b, &cd) == nil {
				w.mu.Lock()
				w.mu.controller = cd.BrokerID
				w.mu.Unlock()
			}
		} else if err == zk.ErrNoNode {
			w.mu.Lock()
			w.mu.controller = -1
			w.mu.Unlock()
		}
		if ids, _, err := w.conn.Children("/strata/brokers/ids"); err == nil {
			var bs []int32
			for _, s := range ids {
				if n, err := strconv.Atoi(s); err == nil {
					bs = append(bs, int32(n))
				}
			}
			slices.Sort(bs)
			w.mu.Lock()
			w.mu.brokers = bs
			w.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// follow keeps every version of partition p's state that it sees.
func (w *zkWatch) follow(ctx context.Context, p int32) {
	path := fmt.Sprintf("/strata/topics/%s/partitions/%d/state", w.topic, p)
	for ctx.Err() == nil {
		b, st, ch, err := w.conn.GetW(path)
		if err != nil {
			// Not there yet, or ZooKeeper unreachable: try again.
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		var ps partState
		if err := json.Unmarshal(b, &ps); err != nil {
			w.setErr(fmt.Errorf("partition %d state %q: %v", p, b, err))
		} else {
			ps.version, ps.at = st.Version, time.Now()
			w.mu.Lock()
			if hist := w.mu.states[p]; len(hist) == 0 || hist[len(hist)-1].version != ps.version {
				w.mu.states[p] = append(hist, ps)
			}
			w.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-ch:
		}
	}
}

func (w *zkWatch) setErr(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.err == nil {
		w.mu.err = err
	}
}

// state is partition p's latest state seen.
func (w *zkWatch) state(p int32) (partState, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.mu.states[p]
	if len(h) == 0 {
		return partState{}, false
	}
	return h[len(h)-1], true
}

// statesSince describes partition p's states seen since from: version,
// milliseconds after from, leader, epoch and ISR.
func (w *zkWatch) statesSince(p int32, from time.Time) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, st := range w.mu.states[p] {
		if st.at.After(from) {
			out = append(out, fmt.Sprintf("v%d@%dms:leader=%d,epoch=%d,isr=%v", st.version, st.at.Sub(from).Milliseconds(), st.Leader, st.Epoch, st.ISR))
		}
	}
	return strings.Join(out, " ")
}

// allStates describes every state seen of every partition, with the
// time of day.
func (w *zkWatch) allStates() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for p := range int32(len(w.mu.states)) {
		for _, st := range w.mu.states[p] {
			out = append(out, fmt.Sprintf("p%d:v%d@%s:leader=%d,epoch=%d,isr=%v", p, st.version, st.at.Format("15:04:05.000"), st.Leader, st.Epoch, st.ISR))
		}
	}
	return strings.Join(out, " ")
}

// controller is the controller's id as last seen (-1: none).
func (w *zkWatch) controller() int32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mu.controller
}

// registered lists the registered broker ids as last seen.
func (w *zkWatch) registered() []int32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.mu.brokers)
}

// waitFor polls cond every 20 ms until it returns "" and returns how long
// that took; cond returns what it still waits for. The test fails after
// timeout.
func (w *zkWatch) waitFor(t testing.TB, timeout time.Duration, what string, cond func() string) time.Duration {
	t.Helper()
	start := time.Now()
	last := ""
	if poll.For(timeout, func() bool { last = cond(); return last == "" }) {
		return time.Since(start)
	}
	t.Fatalf("waiting %v for %s: %s", timeout, what, last)
	return 0
}

// waitState waits until partition p's state satisfies ok.
func (w *zkWatch) waitState(t testing.TB, timeout time.Duration, p int32, what string, ok func(partState) bool) time.Duration {
	t.Helper()
	return w.waitFor(t, timeout, fmt.Sprintf("partition %d: %s", p, what), func() string {
		st, seen := w.state(p)
		if seen && ok(st) {
			return ""
		}
		return fmt.Sprintf("state %+v", st)
	})
}

// checkElections holds every leader change seen against the ISR of the
// state it replaced: a new leader must be one of that ISR (no unclean
// election), and every state's leader must be in its own ISR. Changes
// between versions the watch did not see one after the other cannot be
// checked; it returns how many were checked and how many were not.
func (w *zkWatch) checkElections(t *testing.T) (checked, unseen int) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.err != nil {
		t.Errorf("zookeeper watch: %v", w.mu.err)
	}
	for p, hist := range w.mu.states {
		for i, st := range hist {
			if st.Leader >= 0 && !slices.Contains(st.ISR, st.Leader) {
				t.Errorf("partition %d version %d: leader %d not in its ISR %v", p, st.version, st.Leader, st.ISR)
			}
			if i == 0 || st.Leader == hist[i-1].Leader {
				continue
			}
			prev := hist[i-1]
			if st.version != prev.version+1 {
				unseen++
				continue
			}
			checked++
			if st.Leader >= 0 && !slices.Contains(prev.ISR, st.Leader) {
				t.Errorf("partition %d: leader %d elected (epoch %d) from outside the ISR %v of the state it replaced (epoch %d, leader %d)",
					p, st.Leader, st.Epoch, prev.ISR, prev.Epoch, prev.Leader)
			}
		}
	}
	return checked, unseen
}

// replicaLog is the bytes of every .log file of a partition's directory
// in a broker's data directory, in offset order.
func replicaLog(dir, topic string, p int32) ([]byte, error) {
	segs, err := segment.ListSegments(filepath.Join(dir, segment.PartitionDirName(topic, p)))
	if err != nil {
		return nil, err
	}
	var out []byte
	for _, s := range segs {
		b, err := os.ReadFile(s.LogPath)
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	return out, nil
}

// compareReplicas waits (bounded) until every replica of each partition
// of topic holds byte-for-byte the same log files, and fails the test if
// two replicas differ at a byte both have (a diverged log; a replica that
// is only shorter is still catching up) or are not the same by the
// timeout. It returns each partition's log size.
func (c *Cluster) compareReplicas(t *testing.T, topic string, parts []int32, timeout time.Duration) map[int32]int {
	t.Helper()
	sizes := map[int32]int{}
	for _, p := range parts {
		var logs [][]byte
		diverged := ""
		same := poll.For(timeout, func() bool {
			logs = make([][]byte, len(c.brokers))
			var err error
			for i, b := range c.brokers {
				if logs[i], err = replicaLog(b.Dir, topic, p); err != nil {
					t.Fatalf("partition %d on broker %d: %v", p, i+1, err)
				}
			}
			same := true
			for i := 1; i < len(logs); i++ {
				n := min(len(logs[0]), len(logs[i]))
				if !bytes.Equal(logs[0][:n], logs[i][:n]) {
					at := 0
					for at < n && logs[0][at] == logs[i][at] {
						at++
					}
					diverged = fmt.Sprintf("broker 1 (%d bytes) and broker %d (%d bytes) differ at byte %d", len(logs[0]), i+1, len(logs[i]), at)
				}
				same = same && len(logs[0]) == len(logs[i])
			}
			return diverged != "" || same
		})
		switch {
		case diverged != "":
			t.Errorf("%s-%d: the replicas' logs diverged: %s", topic, p, diverged)
		case same:
			sizes[p] = len(logs[0])
		default:
			var ls []string
			for i, l := range logs {
				ls = append(ls, fmt.Sprintf("broker %d: %d bytes", i+1, len(l)))
			}
			t.Errorf("%s-%d: the replicas' logs are not the same %v after the end: %s", topic, p, timeout, strings.Join(ls, ", "))
		}
	}
	return sizes
}

// compareRemote waits (bounded) until the bucket holds every segment of
// each partition of topic that broker 1 has sealed, and checks the
// manifests: a remote log from offset 0 without gaps or overlaps, whose
// .log objects, one after the other, are byte-for-byte the start of
// broker 1's local log (batches are uploaded verbatim). A partition with
// no sealed segment is left out; if no partition has one, the test fails:
// the check would prove nothing. It returns each partition's remote
// bytes and how long the uploads took to catch up.
// topicID asks the cluster for topic's id, in the form the bucket's keys
// use.
func (c *Cluster) topicID(t *testing.T, ctx context.Context, topic string) string {
	t.Helper()
	cl := c.newClient(t)
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("metadata of %s: %v", topic, err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata of %s: %+v", topic, resp.Topics)
	}
	return coord.TopicID(resp.Topics[0].TopicID).String()
}

func (c *Cluster) compareRemote(t *testing.T, topic string, parts []int32, timeout time.Duration) (map[int32]int64, time.Duration) {
	t.Helper()
	start := time.Now()
	mc, bucket := c.net.minio.Client(), c.net.bucket
	key := func(k string) string {
		if p := strings.Trim(c.net.prefix, "/"); p != "" {
			return p + "/" + k
		}
		return k
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout+30*time.Second)
	defer cancel()
	dir := c.brokers[0].Dir
	topicID := c.topicID(t, ctx, topic)
	out := map[int32]int64{}
	for _, p := range parts {
		segs, err := segment.ListSegments(filepath.Join(dir, segment.PartitionDirName(topic, p)))
		if err != nil {
			t.Fatalf("%s-%d: %v", topic, p, err)
		}
		if len(segs) < 2 {
			t.Logf("%s-%d: broker 1 has sealed no segment yet; nothing in the bucket to check", topic, p)
			continue
		}
		sealedEnd := segs[len(segs)-1].BaseOffset
		var m *tiering.Manifest
		if !poll.For(timeout, func() bool {
			b, err := readObject(ctx, mc, bucket, key(tiering.ManifestKey(topic, topicID, p)))
			if err == nil && b != nil {
				if m, err = tiering.DecodeManifest(b); err != nil {
					t.Fatalf("%s-%d: manifest: %v", topic, p, err)
				}
			}
			if err != nil {
				t.Logf("%s-%d: reading the manifest: %v", topic, p, err)
			}
			return m != nil && m.EndOffset() >= sealedEnd
		}) {
			end := int64(-1)
			if m != nil {
				end = m.EndOffset()
			}
			t.Fatalf("%s-%d: the bucket ends at offset %d %v after the end, broker 1 has sealed up to %d", topic, p, end, timeout, sealedEnd)
		}
		if pr := tcmManifestProblem(m); pr != "" {
			t.Errorf("%s-%d: manifest: %s", topic, p, pr)
			continue
		}
		var remote []byte
		for i := range m.Segments {
			b, err := readObject(ctx, mc, bucket, key(m.SegmentKey(&m.Segments[i], tiering.SuffixLog)))
			if err != nil || b == nil {
				t.Fatalf("%s-%d: segment %d..%d: %v (missing: %v)", topic, p, m.Segments[i].BaseOffset, m.Segments[i].NextOffset, err, b == nil)
			}
			remote = append(remote, b...)
		}
		local, err := replicaLog(dir, topic, p)
		if err != nil {
			t.Fatalf("%s-%d: %v", topic, p, err)
		}
		if len(remote) > len(local) || !bytes.Equal(remote, local[:len(remote)]) {
			t.Errorf("%s-%d: the %d bytes of the %d remote segments are not the start of the replicas' %d-byte log", topic, p, len(remote), len(m.Segments), len(local))
		}
		out[p] = int64(len(remote))
	}
	if len(out) == 0 {
		t.Errorf("%s: no partition has a sealed segment; the bucket was not checked", topic)
	}
	return out, time.Since(start)
}

// readObject reads an object with minio-go; nil, nil if there is none.
func readObject(ctx context.Context, mc *minio.Client, bucket, key string) ([]byte, error) {
	obj, err := mc.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			return nil, nil
		}
		return nil, err
	}
	return b, nil
}
