package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestChaos is the long chaos run behind `make chaos`: it is skipped unless
// STRATA_CHAOS is a duration (STRATA_CHAOS=5m). Three brokers and a real
// ZooKeeper (clusterSessionTimeout, replica.lag.time.max.ms 3 s) carry a
// topic of chaosPartitions partitions × RF 3 with min.insync.replicas=2.
// Two franz-go idempotent acks=all producers (the replication tests'
// numbered producer; one of them with a 5 ms linger and lz4) write
// to every partition without pause, and a consumer group member reads the
// topic throughout. For the duration, faults drawn from a math/rand seeded
// with STRATA_CHAOS_SEED (or the clock; the seed is logged) hit the
// cluster one at a time:
//
//	kill     SIGKILL of a broker, restarted after a random delay
//	pause    SIGSTOP of a broker, SIGCONT after a random delay (beyond
//	         the session timeout the broker's session expires)
//	sigterm  controlled shutdown (SIGTERM, must exit 0), restart later
//	zk       ZooKeeper killed (zktest.Server.Stop), restarted later
//
// STRATA_CHAOS_KINDS (e.g. "kill,pause") restricts the kinds. At most one
// broker is down at any time, and after each fault the run waits (bounded)
// until every broker is registered, every partition of every topic has a
// leader and a full ISR, all brokers agree on it, and every partition
// acknowledges writes again. At the end the faults stop, the producers are
// flushed and stopped, the topic is read back and checkSeqLog holds it
// against the acknowledgements (every acknowledged record there once, at
// its offset, in send order); every record the group member consumed must
// be in the log at the offset it was read at, and every record in the log
// must have been consumed. The run prints one CHAOS_FAULT line per fault
// and a CHAOS_SUMMARY line.
func TestChaos(t *testing.T) {
	spec := os.Getenv("STRATA_CHAOS")
	if spec == "" {
		t.Skip("chaos run: set STRATA_CHAOS to a duration (make chaos CHAOS=5m)")
	}
	dur, err := time.ParseDuration(spec)
	if err != nil || dur <= 0 {
		t.Fatalf("STRATA_CHAOS=%q: want a positive duration such as 5m (%v)", spec, err)
	}
	if dl, ok := t.Deadline(); ok && time.Until(dl) < dur+chaosMargin {
		t.Fatalf("STRATA_CHAOS=%v needs a test timeout of at least %v more than that; go test -timeout leaves %v",
			dur, chaosMargin, time.Until(dl).Round(time.Second))
	}
	seed := time.Now().UnixNano()
	if s := os.Getenv("STRATA_CHAOS_SEED"); s != "" {
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("STRATA_CHAOS_SEED=%q: %v", s, err)
		}
	}
	kinds := chaosKinds
	if s := os.Getenv("STRATA_CHAOS_KINDS"); s != "" {
		kinds = nil
		for _, k := range strings.Split(s, ",") {
			if !slices.Contains(chaosKinds, k) {
				t.Fatalf("STRATA_CHAOS_KINDS=%q: unknown kind %q (kinds: %v)", s, k, chaosKinds)
			}
			kinds = append(kinds, k)
		}
	}
	t.Logf("CHAOS seed=%d duration=%v kinds=%v (reproduce the fault schedule with STRATA_CHAOS_SEED=%d)", seed, dur, kinds, seed)
	rng := rand.New(rand.NewSource(seed))

	c := StartCluster(t, 3, fmt.Sprintf("replica.lag.time.max.ms=%d", chaosLag.Milliseconds()))
	zkDown := false
	t.Cleanup(func() {
		// Cleanups run last-registered first: ZooKeeper is back before
		// the brokers are stopped, if the test ended during an outage.
		if zkDown {
			c.ZK.Restart()
		}
	})
	const topic = "chaos"
	var all []int32
	for p := range int32(chaosPartitions) {
		all = append(all, p)
	}
	c.createTopicWith(t, topic, chaosPartitions, 3, map[string]string{"min.insync.replicas": "2"})

	half := chaosPartitions / 2
	errsA, errsB := newErrCounter(), newErrCounter()
	prodA := c.startSeqProducer(t, topic, all[:half], chaosInterval, kgo.WithLogger(errsA))
	prodB := c.startSeqProducer(t, topic, all[half:], chaosInterval, kgo.WithLogger(errsB),
		kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	prods := []*seqProducer{prodA, prodB}
	cons := c.startChaosConsumer(t, topic, "chaos-group")
	started := time.Now()
	waitAcksSoft := func(since time.Time, n int, timeout time.Duration) string {
		var missing []string
		deadline := time.Now().Add(timeout)
		for {
			missing = missing[:0]
			for _, sp := range prods {
				for _, p := range sp.parts {
					if got, _ := sp.acks.acksSentAfter(p, since); got < n {
						missing = append(missing, fmt.Sprintf("partition %d: %d", p, got))
					}
				}
			}
			if len(missing) == 0 || time.Now().After(deadline) {
				return strings.Join(missing, ", ")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if msg := waitAcksSoft(time.Time{}, 20, 30*time.Second); msg != "" {
		t.Fatalf("no 20 acknowledgements per partition within 30s of the start: %s", msg)
	}
	if msg := c.waitConsumerGroupTopic(t, 30*time.Second, topic); msg != "" {
		t.Fatalf("consumer group: %s", msg)
	}

	// The faults.
	var faults []chaosFault
	count := map[string]int{}
	end := time.Now().Add(dur)
	healthy := true
	for i := 0; i < chaosMaxFaults && healthy; i++ {
		quiet := randBetween(rng, time.Second, 4*time.Second)
		if time.Now().Add(quiet).After(end) {
			break
		}
		time.Sleep(quiet)
		f := chaosFault{n: i + 1, kind: kinds[rng.Intn(len(kinds))], victim: int32(1 + rng.Intn(3))}
		switch f.kind {
		case "kill", "sigterm":
			f.down = randBetween(rng, 200*time.Millisecond, 8*time.Second)
		case "pause":
			f.down = randBetween(rng, 500*time.Millisecond, 8*time.Second)
		case "zk":
			f.down = randBetween(rng, 2*time.Second, 15*time.Second)
			f.victim = 0
		}
		if md, msg := c.clusterView(t, topic); msg == "" {
			f.controller = md.controller
			f.led = md.ledBy(topic, f.victim)
		}
		f.start = time.Now()
		switch f.kind {
		case "kill":
			c.Broker(f.victim).Kill(t)
			time.Sleep(f.down)
			c.Broker(f.victim).Restart(t)
		case "sigterm":
			b := c.Broker(f.victim)
			// Stop fails the test unless the broker exits 0 within
			// stopTimeout of SIGTERM.
			b.Stop(t)
			f.stopped = time.Since(f.start)
			time.Sleep(f.down)
			b.Restart(t)
		case "pause":
			c.pauseBroker(t, f.victim)
			time.Sleep(f.down)
			c.resumeBroker(t, f.victim)
		case "zk":
			c.ZK.Stop()
			zkDown = true
			time.Sleep(f.down)
			c.ZK.Restart()
			zkDown = false
		}
		f.back = time.Now()
		count[f.kind]++
		rec, msg := c.waitHealthy(t, chaosRecoveryBound, topic, chaosPartitions)
		f.recovered = rec
		if msg != "" {
			t.Errorf("fault #%d (%s): the cluster did not recover within %v of the end of the fault: %s", f.n, f.describe(), chaosRecoveryBound, msg)
			healthy = false
		} else if msg := waitAcksSoft(time.Now(), 5, 30*time.Second); msg != "" {
			t.Errorf("fault #%d (%s): after recovery, fewer than 5 acknowledgements within 30s on: %s", f.n, f.describe(), msg)
			healthy = false
		}
		f.acksBack = time.Since(f.start)
		if dead := c.unexpectedExits(); dead != "" {
			t.Errorf("fault #%d (%s): %s", f.n, f.describe(), dead)
			healthy = false
		}
		faults = append(faults, f)
		t.Logf("CHAOS_FAULT %s recovered_ms=%d writes_ms=%d", f.describe(), f.recovered.Milliseconds(), f.acksBack.Milliseconds())
	}
	t.Logf("faults stopped after %v: %d injected", time.Since(started).Round(time.Second), len(faults))

	// The end: full ISRs, producers flushed and stopped, the log checked.
	if _, msg := c.waitHealthy(t, chaosRecoveryBound, topic, chaosPartitions); msg != "" {
		t.Errorf("at the end: the cluster did not recover within %v: %s", chaosRecoveryBound, msg)
	}
	if msg := waitAcksSoft(time.Now(), 20, 30*time.Second); msg != "" {
		t.Errorf("at the end: fewer than 20 acknowledgements within 30s on: %s", msg)
	}
	sentA, sentB := prodA.stop(t), prodB.stop(t)
	logs := c.readLog(t, topic, all)
	subset := func(parts []int32) map[int32][]*kgo.Record {
		out := map[int32][]*kgo.Record{}
		for _, p := range parts {
			out[p] = logs[p]
		}
		return out
	}
	resA := checkSeqLog(t, "franz-go A", topic, subset(prodA.parts), sentA)
	logChecks(t, "franz-go A", resA, sentA)
	resB := checkSeqLog(t, "franz-go B", topic, subset(prodB.parts), sentB)
	logChecks(t, "franz-go B", resB, sentB)

	consumed := cons.finish(t, logs)

	// The summary.
	acked, failed := 0, 0
	for _, res := range []map[int32]seqCheck{resA, resB} {
		for _, r := range res {
			acked += r.acked
			failed += r.failed
		}
	}
	final := failedErrors(sentA)
	for k, v := range failedErrors(sentB) {
		final[k] += v
	}
	retried := errsA.snapshot()
	for k, v := range errsB.snapshot() {
		retried[k] += v
	}
	gap, gapPart, gapAt := longestAckGap(sentA)
	if g, p, at := longestAckGap(sentB); g > gap {
		gap, gapPart, gapAt = g, p, at
	}
	during := "no fault"
	for _, f := range faults {
		if !gapAt.Add(-gap).After(f.start.Add(f.acksBack)) && !gapAt.Before(f.start) {
			during = fmt.Sprintf("fault #%d %s", f.n, f.describe())
			break
		}
	}
	brokerStats := c.chaosBrokerStats(topic)
	t.Logf("CHAOS_SUMMARY seed=%d duration=%v faults=%s total_faults=%d acked=%d failed=%d produce_errors_final=%s produce_errors_retried=%s longest_ack_gap_ms=%d gap_partition=%d gap_ended=%s gap_during=%q consumed=%d %s",
		seed, time.Since(started).Round(time.Second), fmtCounts(count), len(faults), acked, failed, fmtCounts(final), fmtCounts(retried),
		gap.Milliseconds(), gapPart, gapAt.Format("15:04:05.000"), during, consumed, brokerStats)
	for _, res := range []map[int32]seqCheck{resA, resB} {
		for p, r := range res {
			if r.failed > 0 {
				t.Errorf("partition %d: %d produces failed; the idempotent producer (unlimited retries, no delivery timeout) should have retried them to success", p, r.failed)
			}
		}
	}
	if t.Failed() {
		t.Logf("CHAOS seed=%d failed; reproduce the fault schedule with STRATA_CHAOS=%v STRATA_CHAOS_SEED=%d", seed, dur, seed)
		c.saveChaosLogs(t, seed)
	}
}

// saveChaosLogs writes the whole output of every run of every broker and
// ZooKeeper's log under $TMPDIR/strata-chaos-SEED (the failure log holds
// only each run's tail, and the test's directories are removed).
func (c *Cluster) saveChaosLogs(t *testing.T, seed int64) {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("strata-chaos-%d", seed))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("saving the logs: %v", err)
		return
	}
	for i, b := range c.brokers {
		b.mu.Lock()
		procs := slices.Clone(b.mu.all)
		b.mu.Unlock()
		for j, p := range procs {
			name := filepath.Join(dir, fmt.Sprintf("broker-%d-run-%d.log", i+1, j+1))
			if err := os.WriteFile(name, []byte(p.out.String()), 0o644); err != nil {
				t.Logf("saving %s: %v", name, err)
			}
		}
	}
	if zl, err := os.ReadFile(filepath.Join(c.ZK.Dir(), "server.log")); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "zookeeper.log"), zl, 0o644)
	}
	t.Logf("CHAOS logs: every broker run's whole output and ZooKeeper's log are in %s", dir)
}

const (
	chaosPartitions = 4
	// chaosInterval is each producer's send interval per partition.
	chaosInterval = 10 * time.Millisecond
	// chaosLag is replica.lag.time.max.ms.
	chaosLag = 3 * time.Second
	// chaosRecoveryBound bounds the wait for full ISRs after a fault.
	chaosRecoveryBound = 90 * time.Second
	// chaosMaxFaults bounds the fault loop in count (it is bounded in
	// time by STRATA_CHAOS).
	chaosMaxFaults = 10000
	// chaosMargin is what the test needs beyond STRATA_CHAOS: start,
	// the last fault and its recovery, the final checks.
	chaosMargin = 8 * time.Minute
)

// chaosKinds are the fault kinds.
var chaosKinds = []string{"kill", "pause", "sigterm", "zk"}

// chaosFault is one injected fault.
type chaosFault struct {
	n          int
	kind       string
	victim     int32 // broker; 0 for ZooKeeper
	controller int32 // before the fault
	led        []int32
	down       time.Duration // killed, stopped, paused or ZooKeeper down for
	stopped    time.Duration // sigterm: SIGTERM to exit
	start      time.Time
	back       time.Time     // restarted, resumed
	recovered  time.Duration // from back to healthy
	acksBack   time.Duration // from start to acknowledgements on every partition again
}

func (f chaosFault) describe() string {
	s := fmt.Sprintf("n=%d kind=%s", f.n, f.kind)
	if f.victim > 0 {
		s += fmt.Sprintf(" broker=%d controller=%v leader_of=%v", f.victim, f.victim == f.controller, f.led)
	}
	s += fmt.Sprintf(" down_ms=%d", f.down.Milliseconds())
	if f.kind == "sigterm" {
		s += fmt.Sprintf(" shutdown_ms=%d", f.stopped.Milliseconds())
	}
	return s
}

func randBetween(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int63n(int64(hi-lo)))
}

// chaosView is what one broker's Metadata says.
type chaosView struct {
	brokers    []int32
	controller int32
	// parts["topic/p"] is "leader isr" of each partition.
	parts  map[string]string
	leader map[string]int32
}

func (v chaosView) ledBy(topic string, id int32) []int32 {
	var out []int32
	for k, l := range v.leader {
		if tp, ps, _ := strings.Cut(k, "/"); tp == topic && l == id {
			p, _ := strconv.Atoi(ps)
			out = append(out, int32(p))
		}
	}
	slices.Sort(out)
	return out
}

// brokerView asks broker addr (that broker, not another the client
// learns of) for the metadata of every topic, and returns it, or what is
// wrong with it: a broker missing, no controller, a partition without a
// leader or with fewer in-sync replicas than replicas, a topic error.
func brokerView(ctx context.Context, addr, topic string, partitions int) (chaosView, string) {
	v := chaosView{parts: map[string]string{}, leader: map[string]int32{}}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DialTimeout(time.Second), kgo.RetryTimeout(time.Second))
	if err != nil {
		return v, err.Error()
	}
	defer cl.Close()
	resp, err := cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrMetadataRequest())
	if err != nil {
		return v, err.Error()
	}
	md := resp.(*kmsg.MetadataResponse)
	for _, b := range md.Brokers {
		v.brokers = append(v.brokers, b.NodeID)
	}
	slices.Sort(v.brokers)
	v.controller = md.ControllerID
	if len(v.brokers) != 3 || v.controller < 1 {
		return v, fmt.Sprintf("brokers %v, controller %d", v.brokers, v.controller)
	}
	seen := false
	for _, tp := range md.Topics {
		name := ""
		if tp.Topic != nil {
			name = *tp.Topic
		}
		if err := kerr.ErrorForCode(tp.ErrorCode); err != nil {
			return v, fmt.Sprintf("topic %s: %v", name, err)
		}
		if name == topic {
			seen = true
			if len(tp.Partitions) != partitions {
				return v, fmt.Sprintf("topic %s: %d partitions", name, len(tp.Partitions))
			}
		}
		for _, p := range tp.Partitions {
			isr := slices.Sorted(slices.Values(p.ISR))
			key := fmt.Sprintf("%s/%d", name, p.Partition)
			v.parts[key] = fmt.Sprintf("leader %d isr %v", p.Leader, isr)
			v.leader[key] = p.Leader
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil && !errors.Is(err, kerr.ReplicaNotAvailable) {
				return v, fmt.Sprintf("%s: %v", key, err)
			}
			if p.Leader < 0 || len(p.ISR) != len(p.Replicas) || !slices.Contains(p.ISR, p.Leader) {
				return v, fmt.Sprintf("%s: leader %d, replicas %v, isr %v", key, p.Leader, p.Replicas, p.ISR)
			}
		}
	}
	if !seen {
		return v, "topic " + topic + " not listed"
	}
	return v, ""
}

// clusterView returns any running broker's view, or why it has none.
func (c *Cluster) clusterView(t testing.TB, topic string) (chaosView, string) {
	t.Helper()
	last := "no broker running"
	for _, b := range c.brokers {
		if !b.Alive() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		v, msg := brokerView(ctx, b.Addr, topic, chaosPartitions)
		cancel()
		if msg == "" {
			return v, ""
		}
		last = fmt.Sprintf("broker %s: %s", b.Addr, msg)
	}
	return chaosView{}, last
}

// waitHealthy waits until every broker is running and answers Metadata
// with all three brokers, a controller, every partition of every topic
// (topic with its partitions among them) led and with a full ISR, and all
// brokers agree on the controller, the leaders and the ISRs. It returns
// how long that took, or after timeout the last thing it waited for.
func (c *Cluster) waitHealthy(t testing.TB, timeout time.Duration, topic string, partitions int) (time.Duration, string) {
	t.Helper()
	start := time.Now()
	last := "no answer yet"
	for time.Since(start) < timeout {
		last = func() string {
			var first *chaosView
			for i, b := range c.brokers {
				if !b.Alive() {
					return fmt.Sprintf("broker %d not running", i+1)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				v, msg := brokerView(ctx, b.Addr, topic, partitions)
				cancel()
				if msg != "" {
					return fmt.Sprintf("broker %d says: %s", i+1, msg)
				}
				if first == nil {
					first = &v
					continue
				}
				if v.controller != first.controller || !maps.Equal(v.parts, first.parts) {
					return fmt.Sprintf("broker %d says controller %d, %v; broker 1 says controller %d, %v", i+1, v.controller, v.parts, first.controller, first.parts)
				}
			}
			return ""
		}()
		if last == "" {
			return time.Since(start), ""
		}
		time.Sleep(250 * time.Millisecond)
	}
	return time.Since(start), last
}

// waitConsumerGroupTopic waits until __consumer_offsets exists with full
// ISRs (the group member's FindCoordinator creates it).
func (c *Cluster) waitConsumerGroupTopic(t testing.TB, timeout time.Duration, topic string) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		v, msg := brokerView(ctx, c.brokers[0].Addr, topic, chaosPartitions)
		cancel()
		if msg == "" {
			n := 0
			for k := range v.parts {
				if strings.HasPrefix(k, "__consumer_offsets/") {
					n++
				}
			}
			if n > 0 {
				return ""
			}
			msg = "__consumer_offsets not listed yet"
		}
		last = msg
		time.Sleep(250 * time.Millisecond)
	}
	return last
}

// unexpectedExits describes the broker processes that exited though the
// test did not stop them (a crash), or "".
func (c *Cluster) unexpectedExits() string {
	var out []string
	for i, b := range c.brokers {
		if p := b.proc(); p != nil && !b.Alive() {
			out = append(out, fmt.Sprintf("broker %d exited on its own (%v); output:\n%s", i+1, p.waitErr, p.out.tail(16<<10)))
		}
	}
	return strings.Join(out, "\n")
}

// Lines of the brokers' output that chaosBrokerStats counts.
var (
	errorLineRE = regexp.MustCompile(`level=ERROR msg="?([^"=\n]*)`)
	panicRE     = regexp.MustCompile(`(?m)^(panic: |fatal error: |WARNING: DATA RACE)`)
)

// chaosBrokerStats counts, over every run of every broker, the ISR
// shrinks and expansions of topic, the KIP-101 truncations, the ERROR
// lines by message and the panics; it fails nothing: it is for the
// summary.
func (c *Cluster) chaosBrokerStats(topic string) string {
	shrinks, expands, truncs, runs := 0, 0, 0, 0
	errs := map[string]int{}
	var panics []string
	for i, b := range c.brokers {
		b.mu.Lock()
		procs := slices.Clone(b.mu.all)
		b.mu.Unlock()
		for j, p := range procs {
			runs++
			out := p.out.String()
			for _, ch := range isrChanges(out, topic) {
				if ch.shrunk {
					shrinks++
				} else {
					expands++
				}
			}
			truncs += len(truncations(out, topic))
			for _, m := range errorLineRE.FindAllStringSubmatch(out, -1) {
				errs[strings.TrimSpace(m[1])]++
			}
			if panicRE.MatchString(out) {
				panics = append(panics, fmt.Sprintf("broker %d run %d", i+1, j+1))
			}
		}
	}
	s := fmt.Sprintf("broker_runs=%d isr_shrinks=%d isr_expands=%d truncations=%d broker_errors=%s", runs, shrinks, expands, truncs, fmtCounts(errs))
	if len(panics) > 0 {
		s += fmt.Sprintf(" PANICS=%v", panics)
	}
	return s
}

// longestAckGap is the longest time a partition of sent went without an
// acknowledgement between its first and its last one, the partition and
// when the gap ended.
func longestAckGap(sent map[int32][]outcome) (time.Duration, int32, time.Time) {
	var gap time.Duration
	var part int32
	var at time.Time
	for p, outs := range sent {
		var ts []time.Time
		for _, o := range outs {
			if o.acked {
				ts = append(ts, o.doneAt)
			}
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
		for i := 1; i < len(ts); i++ {
			if d := ts[i].Sub(ts[i-1]); d > gap {
				gap, part, at = d, p, ts[i]
			}
		}
	}
	return gap, part, at
}

func fmtCounts(m map[string]int) string {
	if len(m) == 0 {
		return "{}"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%q:%d", k, m[k]))
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// errCounter is a kgo.Logger that counts the errors franz-go logs at info
// level and above (the produce errors it retries), by message and error,
// with addresses and numbers masked.
type errCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func newErrCounter() *errCounter { return &errCounter{counts: map[string]int{}} }

var maskRE = regexp.MustCompile(`127\.0\.0\.1:\d+|\b\d+\b`)

func (e *errCounter) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (e *errCounter) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	for i := 0; i+1 < len(keyvals); i += 2 {
		if k, _ := keyvals[i].(string); k != "err" || keyvals[i+1] == nil {
			continue
		}
		key := maskRE.ReplaceAllString(fmt.Sprintf("%s: %v", msg, keyvals[i+1]), "N")
		e.mu.Lock()
		e.counts[key]++
		e.mu.Unlock()
	}
}

func (e *errCounter) snapshot() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.counts)
}

// chaosConsumer is a franz-go group member (defaults: autocommit,
// cooperative-sticky) reading the topic through the whole run; it keeps
// what it read at each offset.
type chaosConsumer struct {
	cl     *kgo.Client
	topic  string
	cancel context.CancelFunc
	done   chan struct{}
	errs   *errCounter
	once   sync.Once

	mu struct {
		sync.Mutex
		got   map[int32]map[int64]string
		next  map[int32]int64 // one past the highest offset read
		reads int
		dups  int
		fetch map[string]int // fetch errors by error
	}
}

func (c *Cluster) startChaosConsumer(t *testing.T, topic, group string) *chaosConsumer {
	t.Helper()
	cc := &chaosConsumer{topic: topic, done: make(chan struct{}), errs: newErrCounter()}
	cc.mu.got, cc.mu.next, cc.mu.fetch = map[int32]map[int64]string{}, map[int32]int64{}, map[string]int{}
	cc.cl = c.newClient(t, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.HeartbeatInterval(500*time.Millisecond), kgo.AutoCommitInterval(time.Second), kgo.WithLogger(cc.errs))
	ctx, cancel := context.WithCancel(context.Background())
	cc.cancel = cancel
	go func() {
		defer close(cc.done)
		for ctx.Err() == nil {
			fs := cc.cl.PollFetches(ctx)
			if errors.Is(fs.Err0(), kgo.ErrClientClosed) {
				return
			}
			cc.mu.Lock()
			for _, fe := range fs.Errors() {
				if !errors.Is(fe.Err, context.Canceled) {
					cc.mu.fetch[maskRE.ReplaceAllString(fe.Err.Error(), "N")]++
				}
			}
			fs.EachRecord(func(r *kgo.Record) {
				m := cc.mu.got[r.Partition]
				if m == nil {
					m = map[int64]string{}
					cc.mu.got[r.Partition] = m
				}
				cc.mu.reads++
				if prev, ok := m[r.Offset]; ok {
					cc.mu.dups++
					if prev != string(r.Value) {
						// Kept as the first value read; finish
						// compares both against the log.
						m[-1-r.Offset] = string(r.Value)
					}
				} else {
					m[r.Offset] = string(r.Value)
				}
				cc.mu.next[r.Partition] = max(cc.mu.next[r.Partition], r.Offset+1)
			})
			cc.mu.Unlock()
		}
	}()
	t.Cleanup(cc.leave)
	return cc
}

func (cc *chaosConsumer) leave() {
	cc.once.Do(func() {
		cc.cancel()
		<-cc.done
		cc.cl.Close()
	})
}

// finish waits (bounded) until the member has read every partition to the
// end of logs, stops it, and checks that every record it read is the one
// the log holds at that offset (a record read and later truncated away
// would not be) and that it read every record of the log. It returns the
// number of records read.
func (cc *chaosConsumer) finish(t *testing.T, logs map[int32][]*kgo.Record) int {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	behind := ""
	for {
		cc.mu.Lock()
		var lag []string
		for p, recs := range logs {
			if cc.mu.next[p] < int64(len(recs)) {
				lag = append(lag, fmt.Sprintf("partition %d at %d of %d", p, cc.mu.next[p], len(recs)))
			}
		}
		cc.mu.Unlock()
		behind = strings.Join(lag, ", ")
		if behind == "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	cc.leave()
	if behind != "" {
		t.Errorf("consumer group member did not reach the end of the log within 90s: %s", behind)
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	bad, missed := 0, 0
	for p, m := range cc.mu.got {
		recs := logs[p]
		for off, v := range m {
			o := off
			if o < 0 {
				o = -1 - o
			}
			if o >= int64(len(recs)) || string(recs[o].Value) != v {
				want := "nothing (past the end)"
				if o < int64(len(recs)) {
					want = fmt.Sprintf("%q", recs[o].Value)
				}
				if bad++; bad <= 10 {
					t.Errorf("%s-%d offset %d: the group member read %q, the log holds %s", cc.topic, p, o, v, want)
				}
			}
		}
	}
	for p, recs := range logs {
		for off := range recs {
			if _, ok := cc.mu.got[p][int64(off)]; !ok {
				if missed++; missed <= 10 {
					t.Errorf("%s-%d offset %d (%q) is in the log but the group member never read it", cc.topic, p, off, recs[off].Value)
				}
			}
		}
	}
	if bad > 0 || missed > 0 {
		t.Errorf("group member: %d records read that differ from the log, %d records of the log never read", bad, missed)
	}
	t.Logf("group member: %d records read, %d of them again; fetch errors %s; client errors %s",
		cc.mu.reads, cc.mu.dups, fmtCounts(cc.mu.fetch), fmtCounts(cc.errs.snapshot()))
	return cc.mu.reads
}
