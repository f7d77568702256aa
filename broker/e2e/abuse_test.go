package e2e

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stratastream/strata/broker"
	"github.com/stratastream/strata/broker/e2e/history"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The broker under abuse: its limits, and what the abusive clients do.
const (
	// abuseMaxRequest is the broker's socket.request.max.bytes and
	// abuseQueuedBytes its queued.max.request.bytes.
	abuseMaxRequest  = 1 << 20
	abuseQueuedBytes = 4 << 20
	// abuseBigFrame is what the oversized frames announce and send.
	abuseBigFrame = 100 << 20
	// abusePerIP is max.connections.per.ip of abuseFloodIP, which opens
	// abuseFlood connections.
	abusePerIP   = 64
	abuseFloodIP = "127.0.0.3"
	abuseFlood   = 200
	// abuseIdleIP is where the idle connections come from; the
	// well-behaved clients use 127.0.0.1.
	abuseIdleIP = "127.0.0.2"
	// abuseBigSenders connections send oversized frames in parallel;
	// abuseCrafters send crafted frames in parallel.
	abuseBigSenders = 64
	abuseCrafters   = 32
	// abuseGCSlack covers what the Go runtime keeps beyond the live heap
	// besides the factor 2 of GOGC=100 (stacks of new goroutines, spans
	// not yet returned to the OS).
	abuseGCSlack = 64 << 20
)

// abuseScale is the number of idle connections and of crafted frames per
// crafting connection: a few thousand in `make test`;
// STRATA_CHAOS_ABUSE_CONNS (10000 in `make chaos`) asks for more.
func abuseScale(t *testing.T) (conns, rounds int) {
	conns, rounds = 2000, 2
	if v := os.Getenv("STRATA_CHAOS_ABUSE_CONNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("STRATA_CHAOS_ABUSE_CONNS=%q: want a count", v)
		}
		conns, rounds = n, 8
	}
	return conns, rounds
}

// TestBrokerUnderAbuse runs one broker (socket.request.max.bytes 1 MiB,
// queued.max.request.bytes 4 MiB, max.connections.per.ip 64 for
// 127.0.0.3) with an idempotent acks=all franz-go producer and a
// consumer running throughout, while other clients
//
//  1. hold thousands of idle connections (10000 in make chaos),
//  2. open 200 connections from one address, over its limit,
//  3. send 100 MiB frames on 64 connections in parallel,
//  4. send frames crafted for the most decoding per byte (unknown tagged
//     fields, which decode into a map, and arrays of empty elements cut
//     short, which fail after the array is allocated) on 32 connections.
//
// After each step the producer must have new acknowledgements; the
// broker must refuse exactly the connections over the per-address limit,
// stay up, log no panic, and keep its peak RSS (VmHWM) within the bound
// the limits give: its RSS with the idle connections open plus twice
// (GOGC) the decoded requests that queued.max.request.bytes lets in at
// once, (1 + broker.MaxDecodeAmplification) × (queued.max.request.bytes +
// socket.request.max.bytes), plus abuseGCSlack. The history checker then
// proves nothing acknowledged was lost.
func TestBrokerUnderAbuse(t *testing.T) {
	conns, rounds := abuseScale(t)
	raiseOpenFiles(t, uint64(conns+abuseFlood+abuseBigSenders+4096))
	metricsAddr := freeAddr(t)
	b := StartBroker(t,
		"socket.request.max.bytes="+strconv.Itoa(abuseMaxRequest),
		"queued.max.request.bytes="+strconv.Itoa(abuseQueuedBytes),
		fmt.Sprintf("max.connections.per.ip.overrides=%s:%d", abuseFloodIP, abusePerIP),
		"metrics.listener="+metricsAddr,
		"offsets.topic.num.partitions=1",
	)
	c := &Cluster{brokers: []*Broker{b}}
	const topic = "abuse"
	parts := []int32{0, 1, 2}
	c.createTopicWith(t, topic, int32(len(parts)), 1, nil)

	hist := history.New()
	prod := c.startSeqProducer(t, topic, parts, 10*time.Millisecond,
		kgo.ProducerBatchMaxBytes(64<<10), kgo.BrokerMaxWriteBytes(abuseMaxRequest))
	cons := startHistoryConsumer(t, c, topic, parts, hist)
	served := func(step string, since time.Time) {
		t.Helper()
		prod.acks.waitAcks(t, parts, since, 5, 2*time.Minute, "after "+step)
		b.RequireAlive(t)
		rss, hwm := brokerMemory(t, b)
		t.Logf("ABUSE_STEP %s took=%v rss_mib=%d hwm_mib=%d", step, time.Since(since).Round(time.Millisecond), rss>>20, hwm>>20)
	}

	start := time.Now()
	idle := openIdle(t, b.Addr, conns)
	waitFor(t, time.Minute, fmt.Sprintf("the broker to hold %d connections", conns), func() bool {
		return scrapeMetric(t, metricsAddr, "strata_broker_connections") >= float64(conns)
	})
	served("idle connections", start)
	baseRSS, _ := brokerMemory(t, b)

	start = time.Now()
	floodOneAddress(t, b.Addr)
	if got := scrapeMetric(t, metricsAddr, "strata_broker_connections_refused_total"); got != abuseFlood-abusePerIP {
		t.Errorf("connections refused: %v, want %d", got, abuseFlood-abusePerIP)
	}
	served("per-address flood", start)

	start = time.Now()
	sendBigFrames(t, b.Addr)
	served("100 MiB frames", start)

	start = time.Now()
	sendCraftedFrames(t, b.Addr, rounds)
	served("crafted frames", start)

	for _, nc := range idle {
		_ = nc.Close() // done with; the broker sees them go
	}
	sent := prod.stop(t)
	cons.stop()
	addProduces(hist, "producer", topic, sent)
	report := hist.Check(finalLog(topic, c.readLog(t, topic, parts)))
	t.Logf("ABUSE_HISTORY %s", report)
	if !report.OK() {
		t.Errorf("history: %s\n%s", report, strings.Join(report.Problems, "\n"))
	}
	if report.Acknowledged == 0 {
		t.Error("nothing was acknowledged")
	}

	_, hwm := brokerMemory(t, b)
	decoded := int64(2 * (1 + broker.MaxDecodeAmplification) * (abuseQueuedBytes + abuseMaxRequest))
	bound := baseRSS + decoded + abuseGCSlack
	gap, _, _ := longestAckGap(sent)
	t.Logf("ABUSE_MEMORY conns=%d rounds=%d base_rss_mib=%d hwm_mib=%d bound_mib=%d longest_ack_gap=%v",
		conns, rounds, baseRSS>>20, hwm>>20, bound>>20, gap.Round(time.Millisecond))
	if hwm > bound {
		t.Errorf("broker peak RSS %d MiB, above the bound %d MiB (RSS with the idle connections %d MiB + decoded requests %d MiB + %d MiB)",
			hwm>>20, bound>>20, baseRSS>>20, decoded>>20, abuseGCSlack>>20)
	}
}

// raiseOpenFiles raises this process's RLIMIT_NOFILE to at least n (the
// hard limit too, which root may do), so that it can hold the test's
// connections; the broker processes it starts inherit the limit (Go
// restores the original soft limit in child processes only when the
// program never set it). A machine that cannot allow n fails the test.
func raiseOpenFiles(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("getrlimit: %v", err)
	}
	if lim.Max < n {
		lim.Max = n
	}
	lim.Cur = max(lim.Cur, n)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatalf("raising RLIMIT_NOFILE to %d: %v (raise the hard limit, ulimit -Hn, or run as root)", n, err)
	}
}

// brokerMemory reads the broker process's resident set size now and at
// its peak (VmRSS, VmHWM in /proc/<pid>/status), in bytes.
func brokerMemory(t *testing.T, b *Broker) (rss, hwm int64) {
	t.Helper()
	p := b.proc()
	if p == nil || p.cmd.Process == nil {
		t.Fatal("no broker process")
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("broker memory: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			t.Fatalf("broker memory: %s: %q", k, v)
		}
		if k == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
	}
	if rss == 0 || hwm == 0 {
		t.Fatalf("broker memory: no VmRSS or VmHWM in /proc/%d/status", p.cmd.Process.Pid)
	}
	return rss, hwm
}

// scrapeMetric reads an unlabelled metric from the broker's /metrics.
func scrapeMetric(t *testing.T, addr, name string) float64 {
	t.Helper()
	cl := http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scraping metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %q", name, v)
			}
			return f
		}
	}
	t.Fatalf("metric %s not exported", name)
	return 0
}

// dialFromAddr connects to addr from the local address ip.
func dialFromAddr(addr, ip string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	return d.Dial("tcp", addr)
}

// openIdle opens n connections from abuseIdleIP, 64 dials at a time (the
// listen backlog is bounded), and leaves them idle; they are closed when
// the test ends.
func openIdle(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	out := make([]net.Conn, n)
	errs := make(chan error, n)
	work := make(chan int)
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				nc, err := dialFromAddr(addr, abuseIdleIP)
				if err != nil {
					errs <- err
					continue
				}
				out[i] = nc
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	t.Cleanup(func() {
		for _, nc := range out {
			if nc != nil {
				_ = nc.Close()
			}
		}
	})
	close(errs)
	for err := range errs {
		t.Fatalf("opening %d idle connections: %v", n, err)
	}
	return out
}

// apiVersions sends an ApiVersions v0 on nc and reads its answer.
func apiVersions(nc net.Conn, corr int32) error {
	if _, err := nc.Write(requestFrame(18, 0, corr, false, nil)); err != nil {
		return err
	}
	resp, err := readFrame(nc)
	if err != nil {
		return err
	}
	if got := int32(binary.BigEndian.Uint32(resp)); got != corr {
		return fmt.Errorf("answer to correlation id %d, want %d", got, corr)
	}
	return nil
}

// floodOneAddress opens abuseFlood connections from abuseFloodIP: the
// first abusePerIP are served, every later one is closed by the broker
// without an answer. All are closed on return.
func floodOneAddress(t *testing.T, addr string) {
	t.Helper()
	var open []net.Conn
	defer func() {
		for _, nc := range open {
			_ = nc.Close()
		}
	}()
	for i := range abuseFlood {
		nc, err := dialFromAddr(addr, abuseFloodIP)
		if err != nil {
			t.Fatalf("flood connection %d: %v", i, err)
		}
		open = append(open, nc)
		err = apiVersions(nc, int32(i))
		switch {
		case i < abusePerIP && err != nil:
			t.Fatalf("connection %d of %s (limit %d): %v", i, abuseFloodIP, abusePerIP, err)
		case i >= abusePerIP && !isClosed(err):
			t.Fatalf("connection %d of %s over its limit %d: got %v, want it closed", i, abuseFloodIP, abusePerIP, err)
		}
	}
}

// sendBigFrames sends, on abuseBigSenders connections in parallel, a
// frame announcing abuseBigFrame bytes (over socket.request.max.bytes)
// and then as many bytes as the broker takes: it must close each
// connection before taking them all.
func sendBigFrames(t *testing.T, addr string) {
	t.Helper()
	zeros := make([]byte, 1<<20)
	var wg sync.WaitGroup
	var wrote atomic.Int64
	errs := make(chan error, abuseBigSenders)
	for range abuseBigSenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
			if err != nil {
				errs <- err
				return
			}
			defer nc.Close()
			_ = nc.SetDeadline(time.Now().Add(time.Minute))
			prefix := binary.BigEndian.AppendUint32(nil, abuseBigFrame)
			sent := 0
			for _, err = nc.Write(prefix); err == nil && sent < abuseBigFrame; sent += len(zeros) {
				_, err = nc.Write(zeros)
			}
			wrote.Add(int64(sent))
			if err == nil {
				errs <- fmt.Errorf("the broker took a whole %d-byte frame over socket.request.max.bytes", abuseBigFrame)
			} else if !isClosed(err) && !errors.Is(err, syscall.EPIPE) {
				errs <- fmt.Errorf("oversized frame: %v, want the connection closed", err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("oversized frames: %d connections wrote %d MiB before the broker closed them", abuseBigSenders, wrote.Load()>>20)
}

// craftedFrames are the frames of the most decoding per byte, each just
// under socket.request.max.bytes: an ApiVersions v3 ending in unknown
// tagged fields (distinct 3-byte keys, empty values), answered; and a
// Metadata v9 whose topics array holds empty names and whose end is cut
// off, refused once the array has been decoded.
func craftedFrames(t *testing.T) (tags, cut []byte) {
	t.Helper()
	const room = abuseMaxRequest - 64 // header and prefix
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	body := av.AppendTo(nil)
	body = body[:len(body)-1] // its empty tag section
	n := uint64(room / 4)
	body = binary.AppendUvarint(body, n)
	for k := uint64(1 << 14); k < 1<<14+n; k++ {
		body = binary.AppendUvarint(body, k)
		body = append(body, 0)
	}
	tags = requestFrame(18, 3, 1, true, body)

	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	for range room / 2 {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr("")
		md.Topics = append(md.Topics, rt)
	}
	body = md.AppendTo(nil)
	cut = requestFrame(3, 9, 2, true, body[:len(body)-4])
	if len(tags) > abuseMaxRequest+4 || len(cut) > abuseMaxRequest+4 {
		t.Fatalf("crafted frames of %d and %d bytes exceed %d", len(tags), len(cut), abuseMaxRequest)
	}
	return tags, cut
}

// sendCraftedFrames sends rounds crafted frames of each kind on each of
// abuseCrafters connections in parallel: the unknown-tags ApiVersions on
// one connection must be answered each time, each cut Metadata (on a
// fresh connection) must close its connection.
func sendCraftedFrames(t *testing.T, addr string, rounds int) {
	t.Helper()
	tags, cut := craftedFrames(t)
	var wg sync.WaitGroup
	errs := make(chan error, 2*abuseCrafters)
	for range abuseCrafters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- craftRounds(addr, tags, cut, rounds)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func craftRounds(addr string, tags, cut []byte, rounds int) error {
	keep, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return err
	}
	defer keep.Close()
	for i := range rounds {
		if _, err := keep.Write(tags); err != nil {
			return fmt.Errorf("round %d: unknown-tags ApiVersions: %v", i, err)
		}
		// Answered, however long other readers keep the broker's
		// queued.max.request.bytes full.
		_ = keep.SetReadDeadline(time.Now().Add(time.Minute))
		var size [4]byte
		if _, err := readFull(keep, size[:]); err != nil {
			return fmt.Errorf("round %d: unknown-tags ApiVersions not answered: %v", i, err)
		}
		if _, err := readFull(keep, make([]byte, binary.BigEndian.Uint32(size[:]))); err != nil {
			return fmt.Errorf("round %d: unknown-tags ApiVersions answer: %v", i, err)
		}
		nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			return err
		}
		_ = nc.SetDeadline(time.Now().Add(time.Minute))
		_, werr := nc.Write(cut)
		var b [1]byte
		_, rerr := nc.Read(b[:])
		nc.Close()
		if werr != nil && !isClosed(werr) || !isClosed(rerr) {
			return fmt.Errorf("round %d: cut Metadata: write %v, read %v; want the connection closed", i, werr, rerr)
		}
	}
	return nil
}

func readFull(nc net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := nc.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// historyConsumer reads partitions from their start into a History until
// stopped.
type historyConsumer struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func startHistoryConsumer(t *testing.T, c *Cluster, topic string, parts []int32, h *history.History) *historyConsumer {
	t.Helper()
	offs := map[int32]kgo.Offset{}
	for _, p := range parts {
		offs[p] = kgo.NewOffset().AtStart()
	}
	hc := &historyConsumer{
		cl:   c.newClient(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}), kgo.FetchMaxWait(200*time.Millisecond)),
		done: make(chan struct{}),
	}
	ctx, cancel := context.WithCancel(context.Background())
	hc.cancel = cancel
	go func() {
		defer close(hc.done)
		for ctx.Err() == nil {
			fs := hc.cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				h.Read("consumer", history.TP{Topic: topic, Partition: r.Partition}, r.Offset, string(r.Value))
			})
		}
	}()
	t.Cleanup(hc.stop)
	return hc
}

func (hc *historyConsumer) stop() {
	hc.once.Do(func() {
		hc.cancel()
		<-hc.done
		hc.cl.Close()
	})
}
