package broker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/segment/poll"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// These tests drive the coordinator with franz-go's transactional
// producer against in-process brokers, the partition side merged in:
// committed records are read by read_committed consumers, aborted ones
// are not, and a zombie producer is fenced.

// runTxns runs n transactions of per records each on cl, committing the
// even ones, and returns the values committed and aborted.
func runTxns(t *testing.T, cl *kgo.Client, topic string, n, per int, prefix string) (committed, aborted []string) {
	t.Helper()
	return runTxnsRetrying(t, &cl, nil, topic, n, per, prefix, 0)
}

// runTxnsRetrying is runTxns where a transaction whose produce fails is
// aborted and run again with new values, up to retries times, as an
// application does while brokers move (franz-go fails a produce whose
// broker left its metadata: "unknown broker"). When franz-go has marked
// the producer id fatally failed (it does so when that error hits its
// InitProducerId), *pcl is replaced by renew(), as franz-go asks
// applications to do. The failed attempts' values count as aborted.
func runTxnsRetrying(t *testing.T, pcl **kgo.Client, renew func() *kgo.Client, topic string, n, per int, prefix string, retries int) (committed, aborted []string) {
	t.Helper()
	ctx := testCtx(t)
	for i := range n {
		commit := i%2 == 0
		for attempt := 0; ; attempt++ {
			cl := *pcl
			if err := cl.BeginTransaction(); err != nil {
				if attempt >= retries || renew == nil {
					t.Fatalf("begin %d: %v", i, err)
				}
				t.Logf("transaction %d attempt %d: begin: %v; a new producer", i, attempt, err)
				*pcl = renew()
				continue
			}
			var vals []string
			var failed error
			for j := range per {
				v := fmt.Sprintf("%s-%d-%d-a%d", prefix, i, j, attempt)
				vals = append(vals, v)
				if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
					failed = fmt.Errorf("produce %s: %w", v, err)
					break
				}
			}
			if failed != nil {
				if attempt >= retries {
					t.Fatal(failed)
				}
				t.Logf("transaction %d attempt %d: %v; aborting and retrying", i, attempt, failed)
				if err := cl.AbortBufferedRecords(ctx); err != nil {
					t.Fatal(err)
				}
				if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
					if renew == nil {
						t.Fatalf("abort after a failed produce: %v", err)
					}
					t.Logf("abort after a failed produce: %v; a new producer", err)
					*pcl = renew() // its InitProducerId aborts what is open
				}
				aborted = append(aborted, vals...)
				continue
			}
			if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
				t.Fatalf("end %d (commit %v): %v", i, commit, err)
			}
			if commit {
				committed = append(committed, vals...)
			} else {
				aborted = append(aborted, vals...)
			}
			break
		}
	}
	return committed, aborted
}

// readAll consumes topic from the start with the isolation level until
// it has read want records (or a minute passed), and returns them
// sorted: a record that should not be visible takes the place of one
// that should, which the caller's comparison shows.
func readAll(t *testing.T, seeds []string, topic string, committedOnly bool, want int) []string {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	if committedOnly {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []string
	deadline := time.Now().Add(60 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(testCtx(t), 2*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	sort.Strings(got)
	return got
}

func sortedCopy(xs []string) []string {
	out := append([]string(nil), xs...)
	sort.Strings(out)
	return out
}

// TestTxnProducerSingleNode: commits and aborts on one broker, then a
// zombie: a second producer with the same transactional id fences the
// first, whose open transaction is aborted.
func TestTxnProducerSingleNode(t *testing.T) {
	s := startServer(t, txnProps)
	seeds := []string{s.Addr().String()}
	admin := newClient(t, s)
	createTopic(t, admin, "tx-client", 3, nil)

	p1 := txnProducer(t, seeds, "client-1")
	committed, aborted := runTxns(t, p1, "tx-client", 6, 20, "a")

	p2, c2, a2 := fenceZombie(t, p1, seeds, "client-1", "tx-client", 1)
	committed, aborted = append(committed, c2...), append(aborted, a2...)
	// A last committed record, so that the readers know they are done.
	c3, _ := runTxns(t, p2, "tx-client", 1, 1, "end")
	committed = append(committed, c3...)

	got := readAll(t, seeds, "tx-client", true, len(committed))
	if fmt.Sprint(got) != fmt.Sprint(sortedCopy(committed)) {
		t.Fatalf("read_committed: %d records, want the %d committed (aborted: %d)", len(got), len(committed), len(aborted))
	}
	all := readAll(t, seeds, "tx-client", false, len(committed)+len(aborted))
	if fmt.Sprint(all) != fmt.Sprint(sortedCopy(append(append([]string(nil), committed...), aborted...))) {
		t.Fatalf("read_uncommitted: %d records, want %d", len(all), len(committed)+len(aborted))
	}
	if !poll.For(30*time.Second, func() bool { return describeTxn(t, admin, "client-1").State == "CompleteCommit" }) {
		t.Errorf("state %s after the last commit, want CompleteCommit", describeTxn(t, admin, "client-1").State)
	}
	t.Logf("%d committed, %d aborted records; read_committed saw exactly the committed ones", len(committed), len(aborted))
}

// fenceZombie makes p1 (transactional id id) a zombie: it opens a
// transaction and writes "zombie" to topic, then a new producer p2 of the
// same id initializes (aborting p1's transaction) and runs n
// transactions; p1's commit must fail with PRODUCER_FENCED or
// INVALID_PRODUCER_EPOCH. It returns p2 and the values committed and
// aborted ("zombie" among them).
func fenceZombie(t *testing.T, p1 *kgo.Client, seeds []string, id, topic string, n int) (p2 *kgo.Client, committed, aborted []string) {
	t.Helper()
	ctx := testCtx(t)
	if err := p1.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p1.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("zombie")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p2 = txnProducer(t, seeds, id)
	committed, aborted = runTxns(t, p2, topic, n, 5, "b") // p2's first InitProducerId aborts p1's open transaction
	err := p1.EndTransaction(ctx, kgo.TryCommit)
	if err == nil {
		t.Fatal("the fenced producer committed")
	}
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Errorf("fenced producer's commit: %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
	return p2, committed, append(aborted, "zombie")
}

// TestTxnProducerCluster: three in-process brokers on real ZooKeeper,
// __transaction_state and the data topic with three replicas: markers go
// to leaders on other brokers over the Transactions service; then the
// coordinator's broker shuts down, and the next transactions run on the
// new coordinator.
func TestTxnProducerCluster(t *testing.T) {
	zk := zktest.Start(t)
	connect := zk.ConnectString("/strata-txn-client")
	var brokers []*Server
	var seeds []string
	for i := range 3 {
		b := startServer(t, map[string]string{"broker.id": fmt.Sprint(i + 1), "zookeeper.connect": connect,
			"transaction.state.log.num.partitions": "3", "transaction.state.log.replication.factor": "3",
			"offsets.topic.replication.factor": "3"})
		brokers = append(brokers, b)
		seeds = append(seeds, b.Addr().String())
	}
	waitFor(t, "every broker registered", func() bool { return len(brokers[0].coord.Snapshot().Brokers) == 3 })
	admin := newClient(t, brokers[0], kgo.SeedBrokers(seeds...))
	createTopicRF(t, admin, "tx-cluster", 6, 3)

	const id = "cluster-1"
	p := txnProducer(t, seeds, id)
	committed, aborted := runTxns(t, p, "tx-cluster", 4, 30, "x")

	coordB, err := brokers[0].txnCoordinator(id, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("coordinator of %q: broker %d; shutting it down", id, coordB.ID)
	victim := brokers[coordB.ID-1]
	sctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	_ = victim.Shutdown(sctx)
	cancel()
	var rest []string
	for _, b := range brokers {
		if b != victim {
			rest = append(rest, b.Addr().String())
		}
	}
	if !poll.For(60*time.Second, func() bool {
		nb, err := brokers[(coordB.ID)%3].txnCoordinator(id, false)
		return err == nil && nb.ID != coordB.ID
	}) {
		t.Fatal("no new transaction coordinator")
	}
	c2, a2 := runTxnsRetrying(t, &p, func() *kgo.Client { return txnProducer(t, rest, id) }, "tx-cluster", 3, 30, "y", 5)
	committed, aborted = append(committed, c2...), append(aborted, a2...)
	got := readAll(t, rest, "tx-cluster", true, len(committed))
	if fmt.Sprint(got) != fmt.Sprint(sortedCopy(committed)) {
		t.Fatalf("read_committed after the coordinator moved: %d records, want the %d committed", len(got), len(committed))
	}
	t.Logf("%d committed, %d aborted across a coordinator move", len(committed), len(aborted))
}

func createTopicRF(t *testing.T, cl *kgo.Client, name string, partitions int32, rf int16) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Topics[0].ErrorCode; c != 0 {
		t.Fatalf("create topic %s: %v", name, kerr.ErrorForCode(c))
	}
}

// txnProducer is a franz-go transactional producer (idempotent, as
// transactions need) with generous retries.
func txnProducer(t *testing.T, seeds []string, id string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID(id), kgo.TransactionTimeout(30*time.Second),
		kgo.RetryTimeout(60*time.Second), kgo.MetadataMinAge(50*time.Millisecond), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestTxnTimeoutAborts: a producer opens a transaction with a one-second
// timeout and stalls; the coordinator's timer
// (transaction.abort.timed.out.transaction.cleanup.interval.ms=100) aborts
// it with the epoch bumped: the partition's last stable offset moves past
// the record, read_committed never shows it, and the producer's commit is
// fenced.
func TestTxnTimeoutAborts(t *testing.T) {
	props := map[string]string{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"}
	for k, v := range txnProps {
		props[k] = v
	}
	s := startServer(t, props)
	admin := newClient(t, s)
	createTopic(t, admin, "tx-timeout", 1, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.TransactionalID("slow-1"), kgo.TransactionTimeout(time.Second),
		kgo.RetryTimeout(30*time.Second), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx := testCtx(t)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "tx-timeout", Value: []byte("stalled")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	var after kmsg.DescribeTransactionsResponseTransactionState
	if !poll.For(30*time.Second, func() bool {
		after = describeTxn(t, admin, "slow-1")
		return after.State == "CompleteAbort"
	}) {
		t.Fatalf("not aborted: %+v", after)
	}
	t.Logf("aborted %v after the produce (timeout 1s, checked every 100ms)", time.Since(began).Round(time.Millisecond))
	if after.ProducerEpoch != 1 { // a new id starts at epoch 0; the abort fences it
		t.Errorf("epoch %d after the abort, want 1", after.ProducerEpoch)
	}
	lp := s.topic("tx-timeout").local(0)
	if !poll.For(30*time.Second, func() bool { return lp.lastStableOffset() == lp.log.HighWatermark() }) {
		t.Errorf("LSO %d, HW %d: the aborted transaction still holds the partition", lp.lastStableOffset(), lp.log.HighWatermark())
	}
	err = cl.EndTransaction(ctx, kgo.TryCommit)
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Errorf("commit after the timeout: %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
	fp := fetchRaw(t, admin, "tx-timeout", 0, 0, 1<<20)
	t.Logf("read_uncommitted fetch: high watermark %d", fp.HighWatermark)
	req := fetchRequest("tx-timeout", 0, 0, 1<<20)
	req.IsolationLevel = 1
	resp, err := fetchV12{req}.RequestWith(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	rp := resp.Topics[0].Partitions[0]
	if len(rp.AbortedTransactions) != 1 || rp.LastStableOffset != rp.HighWatermark {
		t.Errorf("read_committed fetch: aborted %+v, LSO %d, HW %d; want the aborted transaction listed and the LSO at the HW", rp.AbortedTransactions, rp.LastStableOffset, rp.HighWatermark)
	}
}
