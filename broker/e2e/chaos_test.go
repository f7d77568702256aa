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

	"github.com/stratastream/strata/broker/e2e/history"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestChaos is the chaos run: it is skipped unless STRATA_CHAOS is a
// duration (STRATA_CHAOS=5m, `make chaos`) or STRATA_CHAOS_FAULTS a number
// of faults (`make chaos-short`, part of `make test`, injects a fixed
// schedule: STRATA_CHAOS_FAULTS=14 STRATA_CHAOS_SEED=4). Three brokers and
// a real ZooKeeper (clusterSessionTimeout, replica.lag.time.max.ms 3 s)
// carry a topic of chaosPartitions partitions × RF 3 with
// min.insync.replicas=2. Two franz-go idempotent acks=all producers (the
// replication tests' numbered producer; one of them with a 5 ms linger and
// lz4) write to every partition without pause, and a consumer group member
// reads the topic throughout. Faults drawn from a math/rand seeded with
// STRATA_CHAOS_SEED (or the clock; the seed is logged) hit the cluster one
// at a time, until the duration has passed or the count is reached
// (whichever is set first; with a count alone, the fault schedule is the
// seed's whatever the machine's speed):
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
// flushed and stopped, the topic is read back, and the history checker
// (package history) holds every produce, every record the group member
// read and every offset it committed against the log: every acknowledged
// record there once, at its offset, in produce order; no two reads of an
// offset that differ; nothing there that was not produced; commits that
// never go back within a generation. Every record in the log must have
// been consumed, no produce may fail (the producers retry without limit),
// and no broker may log a panic. The run prints one CHAOS_FAULT line per
// fault, a CHAOS_HISTORY line with the checker's counts and a
// CHAOS_SUMMARY line.
func TestChaos(t *testing.T) {
	spec, countSpec := os.Getenv("STRATA_CHAOS"), os.Getenv("STRATA_CHAOS_FAULTS")
	if spec == "" && countSpec == "" {
		t.Skip("chaos run: set STRATA_CHAOS to a duration (make chaos CHAOS=5m) or STRATA_CHAOS_FAULTS to a count (make chaos-short)")
	}
	var dur time.Duration
	maxFaults := chaosMaxFaults
	var err error
	if spec != "" {
		if dur, err = time.ParseDuration(spec); err != nil || dur <= 0 {
			t.Fatalf("STRATA_CHAOS=%q: want a positive duration such as 5m (%v)", spec, err)
		}
		if dl, ok := t.Deadline(); ok && time.Until(dl) < dur+chaosMargin {
			t.Fatalf("STRATA_CHAOS=%v needs a test timeout of at least %v more than that; go test -timeout leaves %v",
				dur, chaosMargin, time.Until(dl).Round(time.Second))
		}
	}
	if countSpec != "" {
		if maxFaults, err = strconv.Atoi(countSpec); err != nil || maxFaults <= 0 || maxFaults > chaosMaxFaults {
			t.Fatalf("STRATA_CHAOS_FAULTS=%q: want a count from 1 to %d (%v)", countSpec, chaosMaxFaults, err)
		}
		if dl, ok := t.Deadline(); ok && time.Until(dl) < time.Duration(maxFaults)*chaosFaultBound+chaosMargin {
			t.Fatalf("STRATA_CHAOS_FAULTS=%d needs a test timeout of at least %v; go test -timeout leaves %v",
				maxFaults, time.Duration(maxFaults)*chaosFaultBound+chaosMargin, time.Until(dl).Round(time.Second))
		}
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
	reproduce := fmt.Sprintf("STRATA_CHAOS=%s STRATA_CHAOS_FAULTS=%s STRATA_CHAOS_SEED=%d", spec, countSpec, seed)
	t.Logf("CHAOS seed=%d duration=%q faults=%q kinds=%v (reproduce the fault schedule with %s)", seed, spec, countSpec, kinds, reproduce)
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
	hist := history.New()
	cons := c.startChaosConsumer(t, topic, "chaos-group", hist)
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
	var end time.Time // zero: no time bound, only the count
	if dur > 0 {
		end = time.Now().Add(dur)
	}
	healthy := true
	for i := 0; i < maxFaults && healthy; i++ {
		quiet := randBetween(rng, time.Second, 4*time.Second)
		if !end.IsZero() && time.Now().Add(quiet).After(end) {
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
	consumed := cons.finish(t, logs)
	addProduces(hist, "franz-go A", topic, sentA)
	addProduces(hist, "franz-go B", topic, sentB)
	rep := hist.Check(finalLog(topic, logs))
	t.Logf("CHAOS_HISTORY %s", rep)
	if !rep.OK() {
		t.Errorf("the history checker found %s; first problems:\n%s", rep, strings.Join(rep.Problems, "\n"))
	}

	// The summary.
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
	t.Logf("CHAOS_SUMMARY seed=%d duration=%v faults=%s total_faults=%d acked=%d unknown=%d lost=%d duplicated=%d inconsistent=%d produce_errors_final=%s produce_errors_retried=%s longest_ack_gap_ms=%d gap_partition=%d gap_ended=%s gap_during=%q consumed=%d %s",
		seed, time.Since(started).Round(time.Second), fmtCounts(count), len(faults), rep.Acknowledged, rep.Unknown, rep.Lost, rep.Duplicated, rep.Inconsistent,
		fmtCounts(final), fmtCounts(retried), gap.Milliseconds(), gapPart, gapAt.Format("15:04:05.000"), during, consumed, brokerStats.summary)
	if n := len(faults); n < maxFaults && spec == "" {
		t.Errorf("%d faults injected, want the %d of STRATA_CHAOS_FAULTS", n, maxFaults)
	}
	if len(final) > 0 {
		t.Errorf("produces failed (%s); the idempotent producers (unlimited retries, no delivery timeout) should have retried them to success", fmtCounts(final))
	}
	if len(brokerStats.panics) > 0 {
		t.Errorf("brokers logged panics (recovered or not) or data races: %v", brokerStats.panics)
	}
	if t.Failed() {
		t.Logf("CHAOS seed=%d failed; reproduce the fault schedule with %s", seed, reproduce)
		c.saveLogs(t, fmt.Sprintf("strata-chaos-%d", seed))
	}
}

// saveLogs writes the whole output of every run of every broker and
// ZooKeeper's log under $TMPDIR/name (the failure log holds only each
// run's tail, and the test's directories are removed).
func (c *Cluster) saveLogs(t *testing.T, name string) {
	dir := filepath.Join(os.TempDir(), name)
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
	// chaosFaultBound is what one fault may take at most: the quiet
	// time, the fault, the recovery and the acknowledgements after it.
	chaosFaultBound = 4*time.Second + 15*time.Second + chaosRecoveryBound + 30*time.Second
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

// errorLineRE matches the brokers' ERROR lines, which chaosBrokerStats
// counts by message.
var errorLineRE = regexp.MustCompile(`level=ERROR msg="?([^"=\n]*)`)

// chaosStats is what chaosBrokerStats found.
type chaosStats struct {
	summary string
	// panics names the broker runs whose output holds a panic (see
	// panicIn).
	panics []string
}

// chaosBrokerStats counts, over every run of every broker, the ISR
// shrinks and expansions of topic, the KIP-101 truncations, the ERROR
// lines by message, and lists the runs that panicked.
func (c *Cluster) chaosBrokerStats(topic string) chaosStats {
	shrinks, expands, truncs, runs := 0, 0, 0, 0
	errs := map[string]int{}
	var st chaosStats
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
			if line := panicIn(out); line != "" {
				st.panics = append(st.panics, fmt.Sprintf("broker %d run %d: %s", i+1, j+1, line))
			}
		}
	}
	st.summary = fmt.Sprintf("broker_runs=%d isr_shrinks=%d isr_expands=%d truncations=%d broker_errors=%s panics=%d",
		runs, shrinks, expands, truncs, fmtCounts(errs), len(st.panics))
	return st
}

// addProduces records in h what a seqProducer named producer sent to
// topic and what it was told. Any produce error counts as an unknown
// outcome: the producer retries, so an attempt before the error may have
// been written.
func addProduces(h *history.History, producer, topic string, sent map[int32][]outcome) {
	for _, p := range slices.Sorted(maps.Keys(sent)) {
		tp := history.TP{Topic: topic, Partition: p}
		for seq, o := range sent[p] {
			if o.sentAt.IsZero() {
				continue // a gap ackLog filled; never sent
			}
			v := seqValue(p, seq)
			h.Sent(producer, tp, v)
			switch {
			case o.acked:
				h.Answered(tp, v, history.Acked, o.offset, "")
			case o.done:
				h.Answered(tp, v, history.Unknown, -1, o.err)
			}
		}
	}
}

// finalLog is logs in the history checker's form.
func finalLog(topic string, logs map[int32][]*kgo.Record) map[history.TP][]history.Record {
	out := map[history.TP][]history.Record{}
	for p, recs := range logs {
		tp := history.TP{Topic: topic, Partition: p}
		out[tp] = []history.Record{}
		for _, r := range recs {
			out[tp] = append(out[tp], history.Record{Offset: r.Offset, Value: string(r.Value)})
		}
	}
	return out
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
// cooperative-sticky) reading the topic through the whole run; it records
// every record it reads and every offset commit the coordinator accepted
// in a history, and keeps which offsets it read.
type chaosConsumer struct {
	cl     *kgo.Client
	topic  string
	group  string
	hist   *history.History
	cancel context.CancelFunc
	done   chan struct{}
	errs   *errCounter
	once   sync.Once

	mu struct {
		sync.Mutex
		got   map[int32]map[int64]bool
		next  map[int32]int64 // one past the highest offset read
		reads int
		dups  int
		fetch map[string]int // fetch errors by error
	}
}

func (c *Cluster) startChaosConsumer(t *testing.T, topic, group string, hist *history.History) *chaosConsumer {
	t.Helper()
	cc := &chaosConsumer{topic: topic, group: group, hist: hist, done: make(chan struct{}), errs: newErrCounter()}
	cc.mu.got, cc.mu.next, cc.mu.fetch = map[int32]map[int64]bool{}, map[int32]int64{}, map[string]int{}
	cc.cl = c.newClient(t, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.HeartbeatInterval(500*time.Millisecond), kgo.AutoCommitInterval(time.Second), kgo.WithLogger(cc.errs),
		kgo.AutoCommitCallback(cc.committed))
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
				cc.hist.Read("the group member", history.TP{Topic: r.Topic, Partition: r.Partition}, r.Offset, string(r.Value))
				m := cc.mu.got[r.Partition]
				if m == nil {
					m = map[int64]bool{}
					cc.mu.got[r.Partition] = m
				}
				cc.mu.reads++
				if m[r.Offset] {
					cc.mu.dups++
				}
				m[r.Offset] = true
				cc.mu.next[r.Partition] = max(cc.mu.next[r.Partition], r.Offset+1)
			})
			cc.mu.Unlock()
		}
	}()
	t.Cleanup(cc.leave)
	return cc
}

// committed is the member's autocommit callback: it records in the
// history each partition's offset that the coordinator accepted, with the
// generation the commit was made in.
func (cc *chaosConsumer) committed(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
	if err != nil || req == nil || resp == nil {
		return
	}
	asked := map[history.TP]int64{}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			asked[history.TP{Topic: rt.Topic, Partition: rp.Partition}] = rp.Offset
		}
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			tp := history.TP{Topic: t.Topic, Partition: p.Partition}
			if off, ok := asked[tp]; ok && p.ErrorCode == 0 {
				cc.hist.Committed(cc.group, req.Generation, tp, off)
			}
		}
	}
}

func (cc *chaosConsumer) leave() {
	cc.once.Do(func() {
		cc.cancel()
		<-cc.done
		cc.cl.Close()
	})
}

// finish waits (bounded) until the member has read every partition to the
// end of logs, stops it, and checks that it read every record of the log
// (the history checks that what it read is what the log holds). It
// returns the number of records read.
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
	missed := 0
	for p, recs := range logs {
		for _, r := range recs {
			if !cc.mu.got[p][r.Offset] {
				if missed++; missed <= 10 {
					t.Errorf("%s-%d offset %d (%q) is in the log but the group member never read it", cc.topic, p, r.Offset, r.Value)
				}
			}
		}
	}
	if missed > 0 {
		t.Errorf("group member: %d records of the log never read", missed)
	}
	t.Logf("group member: %d records read, %d of them again; fetch errors %s; client errors %s",
		cc.mu.reads, cc.mu.dups, fmtCounts(cc.mu.fetch), fmtCounts(cc.errs.snapshot()))
	return cc.mu.reads
}
