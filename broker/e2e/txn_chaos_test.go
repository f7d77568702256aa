package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/e2e/history"
	"github.com/stratastream/strata/segment/poll"
)

// TestTxnChaos is the Jepsen-style run of transactions: three real
// brokers and a real ZooKeeper (replica.lag.time.max.ms 3 s,
// __transaction_state and __consumer_offsets with 3 partitions × RF 3,
// min ISR 2). An input topic (4 partitions × RF 3, min.insync.replicas=2)
// is first filled non-transactionally (acks=all, every record's answer
// in a history.History, checked against the log read back). Two franz-go
// GroupTransactSession workers (one group, transactional ids txc-0 and
// txc-1) copy it to an output topic of the same shape, each polled batch
// in one transaction (an attempt) that also commits the consumed offsets;
// each output record names its input and its attempt. A read_committed
// consumer reads the output throughout. Meanwhile a fault schedule from a
// math/rand seeded with STRATA_CHAOS_TXN_SEED (fixed in the short form)
// hits, one at a time, the broker of the transaction coordinator of one
// of the workers' ids (FindCoordinator key type 1) or the leader of an
// output partition:
//
//	kill   SIGKILL, restarted after 0.5 to 4 s
//	pause  SIGSTOP past the 4 s ZooKeeper session timeout (5 to 8 s),
//	       then SIGCONT
//
// and after each the run waits (bounded) until every partition of every
// topic has a leader and a full ISR. While faults run the workers copy at
// most 10 records per transaction with a pause between transactions, so
// that faults hit transactions in flight; then they copy the rest at full
// speed. A worker whose session fails (End's errors are not retryable)
// gets a new one with the same transactional id (its InitProducerId
// fences the old producer and aborts what it left open). At the end a
// non-transactional sentinel is appended to each output partition and
// both the concurrent reader and a fresh read_committed reader read up to
// it; history.TxnHistory then checks: no aborted read, no lost committed
// write, no duplicate (each input once), no read before commit, and the
// concurrent reader read all of it. The short form (default) injects
// txnChaosShortFaults faults of seed txnChaosShortSeed (kill -9 of a
// coordinator, SIGSTOP of the other worker's coordinator, kill -9 and
// SIGSTOP of partition leaders); STRATA_CHAOS_TXN
// set to a duration (make chaos) runs random faults that long.
func TestTxnChaos(t *testing.T) { runTxnChaos(t, 1) }

// TestTxnChaosVersion2 is TestTxnChaos with transaction.version 2
// finalized (UpdateFeatures) before the pipeline starts: franz-go's
// workers bump their producer epoch at every transaction (EndTxn v5),
// add partitions through their leaders (Produce v12) and commit offsets
// with TxnOffsetCommit v5, while coordinators are killed mid-transaction.
// Besides the checker, each worker's producer epoch must show the bump
// per transaction.
func TestTxnChaosVersion2(t *testing.T) { runTxnChaos(t, 2) }

// runTxnChaos is TestTxnChaos at transaction.version txnVersion.
func runTxnChaos(t *testing.T, txnVersion int16) {
	faults, seed := txnChaosShortFaults, int64(txnChaosShortSeed)
	var dur time.Duration
	inputs := 3000
	if spec := os.Getenv("STRATA_CHAOS_TXN"); spec != "" {
		var err error
		if dur, err = time.ParseDuration(spec); err != nil || dur <= 0 {
			t.Fatalf("STRATA_CHAOS_TXN=%q: want a positive duration such as 5m (%v)", spec, err)
		}
		if dl, ok := t.Deadline(); ok && time.Until(dl) < dur+chaosMargin {
			t.Fatalf("STRATA_CHAOS_TXN=%v needs a test timeout of at least %v more", dur, chaosMargin)
		}
		faults, seed = chaosMaxFaults, time.Now().UnixNano()
		// The slow pace copies about 80 records a second.
		inputs = int(dur.Seconds())*100 + 1000
	}
	if s := os.Getenv("STRATA_CHAOS_TXN_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("STRATA_CHAOS_TXN_SEED=%q: %v", s, err)
		}
	}
	t.Logf("TXN_CHAOS seed=%d duration=%v faults=%d inputs=%d (reproduce with STRATA_CHAOS_TXN=%s STRATA_CHAOS_TXN_SEED=%d)",
		seed, dur, faults, inputs, os.Getenv("STRATA_CHAOS_TXN"), seed)
	rng := rand.New(rand.NewSource(seed))

	c := StartCluster(t, 3,
		fmt.Sprintf("replica.lag.time.max.ms=%d", chaosLag.Milliseconds()),
		"transaction.state.log.num.partitions=3",
		"transaction.state.log.replication.factor=3",
		"transaction.state.log.min.isr=2",
		"offsets.topic.replication.factor=3")
	requireTransactions(t, c.Broker(1))
	if txnVersion != 1 {
		finalizeTxnVersion(t, txnVersion, c.brokers...)
	}
	const in, out, group = "txc-in", "txc-out", "txc"
	opts := map[string]string{"min.insync.replicas": "2"}
	c.createTopicWith(t, in, chaosPartitions, 3, opts)
	c.createTopicWith(t, out, chaosPartitions, 3, opts)

	// The input, non-transactional, every answer checked.
	hist := history.NewTxn()
	inHist := history.New()
	c.produceTxnInputs(t, in, inputs, inHist, hist)
	var parts []int32
	for p := range int32(chaosPartitions) {
		parts = append(parts, p)
	}
	inLog := c.readLog(t, in, parts)
	if rep := inHist.Check(finalLog(in, inLog)); !rep.OK() || rep.Acknowledged != inputs {
		t.Fatalf("input: %v, want %d acknowledged: %v", rep, inputs, rep.Problems)
	} else {
		t.Logf("TXN_CHAOS input %v", rep)
	}

	reader := c.startTxnReader(t, out, hist)
	var slow atomic.Bool
	slow.Store(true)
	workers := []*txnWorker{
		c.startTxnWorker(t, "txc-0", group, in, out, hist, &slow),
		c.startTxnWorker(t, "txc-1", group, in, out, hist, &slow),
	}
	adm := kadm.NewClient(c.Client(t))
	copied := func() int64 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		os, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return -1
		}
		var sum int64
		os.Each(func(o kadm.OffsetResponse) {
			if o.Topic == in && o.Err == nil {
				sum += o.At
			}
		})
		return sum
	}
	if !poll.For(60*time.Second, func() bool { return copied() > 0 }) {
		t.Fatalf("no transaction committed offsets within 60s: %s", txnWorkerStats(workers))
	}

	// The faults.
	started := time.Now()
	var end time.Time
	if dur > 0 {
		end = started.Add(dur)
	}
	count := map[string]int{}
	n := 0
	for ; n < faults && (end.IsZero() || time.Now().Before(end)); n++ {
		holdFault(randBetween(rng, time.Second, 3*time.Second)) // between faults
		kind := []string{"kill", "pause"}[rng.Intn(2)]
		target := []string{"coordinator", "leader"}[rng.Intn(2)]
		var victim int32
		what := ""
		switch target {
		case "coordinator":
			id := workers[rng.Intn(len(workers))].id
			victim = c.txnCoordinator(t, id)
			what = "transaction coordinator of " + id
		case "leader":
			p := int32(rng.Intn(chaosPartitions))
			md, msg := c.clusterView(t, out)
			if msg != "" {
				t.Fatalf("fault #%d: no metadata: %s", n+1, msg)
			}
			victim = md.leader[fmt.Sprintf("%s/%d", out, p)]
			what = fmt.Sprintf("leader of %s-%d", out, p)
		}
		if victim < 1 {
			t.Fatalf("fault #%d: no broker for the %s", n+1, what)
		}
		copiedBefore := copied()
		var down time.Duration
		switch kind {
		case "kill":
			down = randBetween(rng, 500*time.Millisecond, 4*time.Second)
			c.Broker(victim).Kill(t)
			holdFault(down)
			c.Broker(victim).Restart(t)
		case "pause":
			down = randBetween(rng, clusterSessionTimeout+time.Second, clusterSessionTimeout+4*time.Second)
			c.pauseBroker(t, victim)
			holdFault(down)
			c.resumeBroker(t, victim)
		}
		count[kind+" "+target]++
		if copiedBefore == int64(inputs) {
			t.Logf("TXN_CHAOS fault #%d came after the pipeline had copied everything: it tested no transaction in flight", n+1)
		}
		rec, msg := c.waitHealthy(t, chaosRecoveryBound, out, chaosPartitions)
		if msg != "" {
			t.Fatalf("fault #%d (%s of broker %d, %s): no recovery within %v: %s", n+1, kind, victim, what, chaosRecoveryBound, msg)
		}
		if dead := c.unexpectedExits(); dead != "" {
			t.Fatalf("fault #%d: %s", n+1, dead)
		}
		t.Logf("TXN_CHAOS_FAULT n=%d kind=%s broker=%d target=%q down_ms=%d recovered_ms=%d copied_before=%d of %d; %s",
			n+1, kind, victim, what, down.Milliseconds(), rec.Milliseconds(), copiedBefore, inputs, txnWorkerStats(workers))
	}
	t.Logf("TXN_CHAOS %d faults in %v: %s", n, time.Since(started).Round(time.Second), fmtCounts(count))

	// The rest at full speed, then the workers stop.
	slow.Store(false)
	if !poll.For(3*time.Minute, func() bool { return copied() == int64(inputs) }) {
		t.Errorf("the group's offsets reached %d of %d within 3 minutes of the last fault: %s", copied(), inputs, txnWorkerStats(workers))
	}
	for _, w := range workers {
		w.stop()
	}
	t.Logf("TXN_CHAOS workers: %s", txnWorkerStats(workers))

	// Sentinels end every partition: a reader that read one has read
	// everything committed before it.
	sent := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, p := range parts {
		if err := sent.ProduceSync(ctx, &kgo.Record{Topic: out, Partition: p, Value: []byte(txnSentinel)}).FirstErr(); err != nil {
			t.Fatalf("sentinel to %s-%d: %v", out, p, err)
		}
	}
	final := c.readTxnOutput(t, out, parts)
	if ends, err := adm.ListEndOffsets(ctx, out); err == nil {
		var sum int64
		ends.Each(func(o kadm.ListedOffset) { sum += o.Offset })
		t.Logf("TXN_CHAOS output log: %d offsets in all (committed and aborted records, markers, %d sentinels)", sum, len(parts))
	}
	reader.finish(t, len(parts))
	rep := hist.Check(final)
	t.Logf("TXN_CHAOS_HISTORY seed=%d faults=%d %v", seed, n, rep)
	if !rep.OK() || rep.Inputs != inputs {
		t.Errorf("the transactions checker found %v (want %d inputs); first problems:\n%s", rep, inputs, strings.Join(rep.Problems, "\n"))
	}
	if txnVersion >= 2 {
		checkEpochBumps(t, adm, workers)
	}
	if st := c.chaosBrokerStats(out); len(st.panics) > 0 {
		t.Errorf("brokers logged panics or data races: %v", st.panics)
	}
	if t.Failed() {
		c.saveLogs(t, fmt.Sprintf("strata-txn-chaos-%d", seed))
	}
}

// finalizeTxnVersion sets transaction.version through UpdateFeatures
// and waits until each of brokers finalizes it in ApiVersions.
func finalizeTxnVersion(t *testing.T, level int16, brokers ...*Broker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := kadm.NewClient(brokers[0].Client(t)).UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: level, UpgradeType: 1})
	if err == nil {
		err = res["transaction.version"].Err
	}
	if err != nil {
		t.Fatalf("transaction.version %d: %v", level, err)
	}
	for _, b := range brokers {
		if !poll.For(30*time.Second, func() bool {
			resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, b.Client(t))
			if err != nil {
				return false
			}
			for _, f := range resp.FinalizedFeatures {
				if f.Name == "transaction.version" && f.MaxVersionLevel == level {
					return true
				}
			}
			return false
		}) {
			t.Fatalf("broker at %s does not finalize transaction.version %d", b.Addr, level)
		}
	}
	t.Logf("transaction.version %d finalized on every broker", level)
}

// checkEpochBumps checks that each worker's producer epoch grew with
// its transactions, as transaction version 2 bumps it at every EndTxn
// (version 1 only at InitProducerId and fences, a handful of times
// here).
func checkEpochBumps(t *testing.T, adm *kadm.Client, workers []*txnWorker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ids []string
	for _, w := range workers {
		ids = append(ids, w.id)
	}
	descs, err := adm.DescribeTransactions(ctx, ids...)
	if err != nil {
		t.Fatalf("DescribeTransactions: %v", err)
	}
	for _, id := range ids {
		d, ok := descs[id]
		if !ok || d.Err != nil {
			t.Errorf("%s: not described: %v", id, d.Err)
			continue
		}
		if d.ProducerEpoch < 20 {
			t.Errorf("%s: producer epoch %d after the run, want one bump per transaction (at least 20)", id, d.ProducerEpoch)
		}
		t.Logf("TXN_CHAOS %s: producer %d epoch %d", id, d.ProducerID, d.ProducerEpoch)
	}
}

const (
	txnChaosShortFaults = 4
	txnChaosShortSeed   = 9
	txnSentinel         = "sentinel"
)

// produceTxnInputs produces n records "in-<i>" to topic's partitions in
// turn, acks=all, recording each in inHist and as an input in hist.
func (c *Cluster) produceTxnInputs(t *testing.T, topic string, n int, inHist *history.History, hist *history.TxnHistory) {
	t.Helper()
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for i := range n {
		v := fmt.Sprintf("in-%d", i)
		tp := history.TP{Topic: topic, Partition: int32(i % chaosPartitions)}
		inHist.Sent("input", tp, v)
		hist.Input(v)
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: tp.Partition, Key: []byte(v), Value: []byte(v)}, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				inHist.Answered(tp, v, history.Unknown, -1, err.Error())
				return
			}
			inHist.Answered(tp, v, history.Acked, r.Offset, "")
		})
	}
	wg.Wait()
}

// txnCoordinator returns the broker that FindCoordinator (key type 1)
// names for the transactional id.
func (c *Cluster) txnCoordinator(t *testing.T, id string) int32 {
	t.Helper()
	return c.coordinatorOf(t, 1, id)
}

// coordinatorOf returns the broker that FindCoordinator names for key of
// the key type (0 group, 1 transaction), once one is named.
func (c *Cluster) coordinatorOf(t *testing.T, keyType int8, key string) int32 {
	t.Helper()
	cl := c.newClient(t)
	defer cl.Close()
	var node int32 = -1
	var last string
	if !poll.For(60*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKeys = keyType, []string{key}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			last = err.Error()
			return false
		}
		if err := kerr.ErrorForCode(resp.Coordinators[0].ErrorCode); err != nil {
			last = err.Error()
			return false
		}
		node = resp.Coordinators[0].NodeID
		return true
	}) {
		t.Fatalf("FindCoordinator(type %d, %q): %s", keyType, key, last)
	}
	return node
}

// txnOutValue is the output record copying input in attempt.
func txnOutValue(input, attempt string) string { return "out|" + input + "|" + attempt }

func parseTxnOutValue(v string) (input, attempt string, ok bool) {
	f := strings.Split(v, "|")
	if len(f) != 3 || f[0] != "out" {
		return "", "", false
	}
	return f[1], f[2], true
}

// txnWorker is one consume-transform-produce worker: a
// GroupTransactSession whose every transaction is an attempt of hist.
type txnWorker struct {
	id      string
	c       *Cluster
	group   string
	in, out string
	hist    *history.TxnHistory
	slow    *atomic.Bool
	cancel  context.CancelFunc
	stopped chan struct{}
	once    sync.Once

	mu struct {
		sync.Mutex
		sess                                   *kgo.GroupTransactSession
		attempts, commits, aborts, fails, news int
		lastErr                                string
	}
}

func (c *Cluster) startTxnWorker(t *testing.T, id, group, in, out string, hist *history.TxnHistory, slow *atomic.Bool) *txnWorker {
	t.Helper()
	w := &txnWorker{id: id, c: c, group: group, in: in, out: out, hist: hist, slow: slow, stopped: make(chan struct{})}
	sess, err := w.session()
	if err != nil {
		t.Fatalf("worker %s: %v", id, err)
	}
	w.mu.sess = sess
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go w.run(ctx)
	t.Cleanup(w.stop)
	return w
}

func (w *txnWorker) session() (*kgo.GroupTransactSession, error) {
	var seeds []string
	for _, b := range w.c.brokers {
		seeds = append(seeds, b.Addr)
	}
	return kgo.NewGroupTransactSession(append(w.c.clientOpts(seeds...),
		kgo.DialTimeout(2*time.Second),
		kgo.RetryTimeout(time.Minute),
		kgo.MetadataMinAge(250*time.Millisecond),
		kgo.MetadataMaxAge(2*time.Second),
		kgo.TransactionalID(w.id),
		kgo.TransactionTimeout(20*time.Second),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ConsumerGroup(w.group),
		kgo.ConsumeTopics(w.in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic(w.out),
		kgo.SessionTimeout(10*time.Second),
		kgo.RebalanceTimeout(20*time.Second),
		kgo.HeartbeatInterval(time.Second),
		kgo.FetchMaxWait(200*time.Millisecond),
	)...)
}

func (w *txnWorker) run(ctx context.Context) {
	defer close(w.stopped)
	const maxSessions = 50 // bounds the loop's restarts
	for n := 0; ctx.Err() == nil; {
		batch := 100
		if w.slow.Load() {
			batch = 10
			select {
			case <-ctx.Done():
				return
			case <-time.After(150 * time.Millisecond):
			}
		}
		w.mu.Lock()
		sess := w.mu.sess
		w.mu.Unlock()
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := sess.PollRecords(pctx, batch)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if fs.NumRecords() == 0 {
			continue
		}
		n++
		attempt := fmt.Sprintf("%s.%d", w.id, n)
		var err error
		if err = sess.Begin(); err == nil {
			w.hist.Began(attempt)
			e := kgo.AbortingFirstErrPromise(sess.Client())
			fs.EachRecord(func(r *kgo.Record) {
				w.hist.Produced(attempt, string(r.Value))
				sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: []byte(txnOutValue(string(r.Value), attempt))}, e.Promise())
			})
			commit := e.Err() == nil
			w.hist.Ending(attempt, commit, time.Now())
			var committed bool
			committed, err = sess.End(ctx, kgo.TransactionEndTry(commit))
			w.mu.Lock()
			w.mu.attempts++
			switch {
			case err != nil:
				w.hist.Ended(attempt, history.TxnUnknown, err.Error())
			case committed:
				w.hist.Ended(attempt, history.TxnCommitted, "")
				w.mu.commits++
			default:
				w.hist.Ended(attempt, history.TxnAborted, "")
				w.mu.aborts++
			}
			w.mu.Unlock()
		}
		if err == nil || ctx.Err() != nil {
			continue
		}
		// End's errors are not retryable: a new session, whose
		// InitProducerId fences this one and aborts what it left open.
		w.mu.Lock()
		w.mu.fails++
		w.mu.lastErr = maskRE.ReplaceAllString(err.Error(), "N")
		news := w.mu.news
		w.mu.Unlock()
		sess.Close()
		if news >= maxSessions {
			return
		}
		retry := time.NewTicker(time.Second)
		for ctx.Err() == nil {
			s, serr := w.session()
			if serr == nil {
				w.mu.Lock()
				w.mu.sess, w.mu.news = s, w.mu.news+1
				w.mu.Unlock()
				break
			}
			select { // the cluster may still be recovering from a fault
			case <-ctx.Done():
			case <-retry.C:
			}
		}
		retry.Stop()
	}
}

func (w *txnWorker) stop() {
	w.once.Do(func() {
		w.cancel()
		select {
		case <-w.stopped:
		case <-time.After(2 * time.Minute):
		}
		w.mu.Lock()
		sess := w.mu.sess
		w.mu.Unlock()
		sess.Close()
	})
}

func txnWorkerStats(ws []*txnWorker) string {
	var parts []string
	for _, w := range ws {
		w.mu.Lock()
		parts = append(parts, fmt.Sprintf("%s: attempts=%d commits=%d aborts=%d failed=%d new_sessions=%d last_error=%q",
			w.id, w.mu.attempts, w.mu.commits, w.mu.aborts, w.mu.fails, w.mu.news, w.mu.lastErr))
		w.mu.Unlock()
	}
	return strings.Join(parts, "; ")
}

// txnReader reads topic with read_committed from the start, throughout,
// into hist, until it has read a sentinel on every partition.
type txnReader struct {
	cl     *kgo.Client
	hist   *history.TxnHistory
	cancel context.CancelFunc
	done   chan struct{}

	mu struct {
		sync.Mutex
		sentinels map[int32]bool
		reads     int
		bad       []string
	}
}

const txnReaderName = "the concurrent read_committed reader"

func (c *Cluster) startTxnReader(t *testing.T, topic string, hist *history.TxnHistory) *txnReader {
	t.Helper()
	offs := map[int32]kgo.Offset{}
	for p := range int32(chaosPartitions) {
		offs[p] = kgo.NewOffset().AtStart()
	}
	r := &txnReader{hist: hist, done: make(chan struct{})}
	r.mu.sentinels = map[int32]bool{}
	var seeds []string
	for _, b := range c.brokers {
		seeds = append(seeds, b.Addr)
	}
	cl, err := kgo.NewClient(append(c.clientOpts(seeds...), kgo.DialTimeout(2*time.Second), kgo.MetadataMinAge(250*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	r.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			at := time.Now() // after the fetch returned
			fs.EachRecord(func(rec *kgo.Record) { r.record(rec, at) })
		}
	}()
	t.Cleanup(func() { r.stop() })
	return r
}

func (r *txnReader) record(rec *kgo.Record, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if string(rec.Value) == txnSentinel {
		r.mu.sentinels[rec.Partition] = true
		return
	}
	if r.mu.sentinels[rec.Partition] {
		return // after the end
	}
	r.mu.reads++
	in, attempt, ok := parseTxnOutValue(string(rec.Value))
	if !ok {
		r.mu.bad = append(r.mu.bad, fmt.Sprintf("partition %d offset %d: %q", rec.Partition, rec.Offset, rec.Value))
		return
	}
	r.hist.Read(txnReaderName, history.TP{Topic: rec.Topic, Partition: rec.Partition}, rec.Offset, attempt, in, at)
}

func (r *txnReader) stop() {
	r.cancel()
	<-r.done
	r.cl.Close()
}

// finish waits (bounded) for the sentinel of every partition, stops the
// reader and marks it complete in the history.
func (r *txnReader) finish(t *testing.T, parts int) {
	t.Helper()
	ok := poll.For(2*time.Minute, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.mu.sentinels) == parts
	})
	r.stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	t.Logf("TXN_CHAOS %s: %d records read", txnReaderName, r.mu.reads)
	if !ok {
		t.Errorf("%s: sentinels of %d of %d partitions read within 2 minutes (a transaction left open holds the LSO back?)", txnReaderName, len(r.mu.sentinels), parts)
		return
	}
	if len(r.mu.bad) > 0 {
		t.Errorf("%s: records that are not copies: %v", txnReaderName, head(r.mu.bad))
	}
	r.hist.ReadAll(txnReaderName)
}

// readTxnOutput reads topic with read_committed from the start up to the
// sentinel of every partition with a fresh client, and returns the
// records before them.
func (c *Cluster) readTxnOutput(t *testing.T, topic string, parts []int32) map[history.TP][]history.TxnRecord {
	t.Helper()
	offs := map[int32]kgo.Offset{}
	for _, p := range parts {
		offs[p] = kgo.NewOffset().AtStart()
	}
	cl := c.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	final := map[history.TP][]history.TxnRecord{}
	done := map[int32]bool{}
	next := map[int32]int64{}
	for len(done) < len(parts) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed read of %s: sentinels of %d of %d partitions within 2 minutes", topic, len(done), len(parts))
		}
		fs.EachError(func(_ string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				t.Logf("fetch %s-%d: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if done[r.Partition] || r.Offset < next[r.Partition] {
				return
			}
			next[r.Partition] = r.Offset + 1
			if string(r.Value) == txnSentinel {
				done[r.Partition] = true
				return
			}
			tp := history.TP{Topic: r.Topic, Partition: r.Partition}
			in, attempt, ok := parseTxnOutValue(string(r.Value))
			if !ok {
				t.Errorf("%v offset %d: %q is not a copy", tp, r.Offset, r.Value)
				return
			}
			final[tp] = append(final[tp], history.TxnRecord{Offset: r.Offset, Attempt: attempt, Input: in})
		})
	}
	return final
}

// holdFault lets d pass: the schedule's time between faults, or how long
// a broker stays killed or stopped. It is the fault's own timing, not a
// wait for a condition.
func holdFault(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	<-t.C
}
