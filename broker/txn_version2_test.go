package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/segment/poll"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// These tests run franz-go's transactional producer and its
// GroupTransactSession against in-process brokers with
// transaction.version 2 finalized through UpdateFeatures (kadm), and
// check from the brokers' side that franz-go speaks transaction version 2
// (EndTxn v5, Produce v12, TxnOffsetCommit v5, no AddPartitionsToTxn or
// AddOffsetsToTxn): committed records are read once, aborted ones never.

// requestCounter counts the requests servers handle by API key and
// version (through the connection's handle hook).
type requestCounter struct {
	mu sync.Mutex
	n  map[[2]int16]int
}

func (rc *requestCounter) hook(r *request) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.n == nil {
		rc.n = map[[2]int16]int{}
	}
	rc.n[[2]int16{r.key, r.version}]++
}

// count is how many requests of key were handled at versions [lo, hi].
func (rc *requestCounter) count(key, lo, hi int16) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for kv, c := range rc.n {
		if kv[0] == key && kv[1] >= lo && kv[1] <= hi {
			n += c
		}
	}
	return n
}

// startCountingServer is startServer with rc counting its requests.
func startCountingServer(t *testing.T, props map[string]string, rc *requestCounter) *Server {
	t.Helper()
	cfg := testConfig(t, props)
	cfg.hooks.handle = rc.hook
	return startServerConfig(t, cfg)
}

// setTxnVersion finalizes transaction.version level through kadm and
// waits until every server serves it.
func setTxnVersion(t *testing.T, admin *kgo.Client, level int16, servers ...*Server) {
	t.Helper()
	upgrade := int8(1)
	if level < servers[0].transactionVersion() {
		upgrade = 2
	}
	res, err := kadm.NewClient(admin).UpdateFeatures(testCtx(t), false, kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: level, UpgradeType: upgrade})
	if err != nil {
		t.Fatal(err)
	}
	if err := res["transaction.version"].Err; err != nil {
		t.Fatalf("transaction.version %d: %v", level, err)
	}
	for _, s := range servers {
		if !poll.For(30*time.Second, func() bool { return s.transactionVersion() == level }) {
			t.Fatalf("broker %d: transaction.version %d, want %d", s.cfg.BrokerID, s.transactionVersion(), level)
		}
	}
}

// checkSpokeV2 checks that the clients spoke transaction version 2 to
// the servers counted by rc, and none of its predecessors' requests.
func checkSpokeV2(t *testing.T, rc *requestCounter, txns int, offsets bool) {
	t.Helper()
	if n := rc.count(26, 5, 5); n < txns {
		t.Errorf("EndTxn v5: %d requests, want at least %d", n, txns)
	}
	if n := rc.count(26, 0, 4); n != 0 {
		t.Errorf("EndTxn v0-4: %d requests, want none", n)
	}
	if n := rc.count(0, 12, 12); n == 0 {
		t.Error("no Produce v12")
	}
	if n := rc.count(24, 0, 5); n != 0 {
		t.Errorf("AddPartitionsToTxn: %d requests, want none", n)
	}
	if !offsets {
		return
	}
	if n := rc.count(28, 5, 5); n == 0 {
		t.Error("no TxnOffsetCommit v5")
	}
	if n := rc.count(25, 0, 4); n != 0 {
		t.Errorf("AddOffsetsToTxn: %d requests, want none", n)
	}
}

// TestTxnVersion2SingleNode: with transaction.version 2 finalized,
// franz-go's producer runs transactions with an epoch bump each (EndTxn
// v5); read_committed sees every committed record once and no aborted
// one; a zombie producer is fenced; a downgrade to 1 takes the next
// producer back to EndTxn v4.
func TestTxnVersion2SingleNode(t *testing.T) {
	var rc requestCounter
	s := startCountingServer(t, txnProps, &rc)
	seeds := []string{s.Addr().String()}
	admin := newClient(t, s)
	createTopic(t, admin, "tx-v2", 3, nil)
	setTxnVersion(t, admin, 2, s)

	p1 := txnProducer(t, seeds, "v2-1")
	committed, aborted := runTxns(t, p1, "tx-v2", 6, 20, "a")
	md := describeTxn(t, admin, "v2-1")
	if md.ProducerEpoch < 6 {
		t.Errorf("epoch %d after 6 transactions of version 2, want at least 6", md.ProducerEpoch)
	}
	checkSpokeV2(t, &rc, 6, false)

	_, c2, a2 := fenceZombie(t, p1, seeds, "v2-1", "tx-v2", 2)
	committed, aborted = append(committed, c2...), append(aborted, a2...)

	setTxnVersion(t, admin, 1, s)
	before := rc.count(26, 0, 4)
	p3 := txnProducer(t, seeds, "v1-after")
	c3, a3 := runTxns(t, p3, "tx-v2", 1, 3, "end")
	committed, aborted = append(committed, c3...), append(aborted, a3...)
	if rc.count(26, 0, 4) == before {
		t.Error("after the downgrade, the new producer sent no EndTxn v0-4")
	}
	checkTxnReads(t, seeds, "tx-v2", committed, aborted)
}

// checkTxnReads checks that read_committed reads exactly committed and
// read_uncommitted committed and aborted.
func checkTxnReads(t *testing.T, seeds []string, topic string, committed, aborted []string) {
	t.Helper()
	got := readAll(t, seeds, topic, true, len(committed))
	if fmt.Sprint(got) != fmt.Sprint(sortedCopy(committed)) {
		t.Fatalf("read_committed: %d records, want the %d committed (aborted: %d)", len(got), len(committed), len(aborted))
	}
	all := readAll(t, seeds, topic, false, len(committed)+len(aborted))
	if fmt.Sprint(all) != fmt.Sprint(sortedCopy(append(append([]string(nil), committed...), aborted...))) {
		t.Fatalf("read_uncommitted: %d records, want %d", len(all), len(committed)+len(aborted))
	}
	t.Logf("%d committed, %d aborted records; read_committed saw exactly the committed ones", len(committed), len(aborted))
}

// TestTxnVersion2Cluster: three in-process brokers on real ZooKeeper;
// transaction.version 2 finalized on the controller is seen by every
// broker (the /feature watch). A consume-transform-produce pipeline
// (GroupTransactSession) commits its offsets with TxnOffsetCommit v5 and
// no AddOffsetsToTxn, and a producer's partitions on other brokers are
// added by their leaders (AddPartitionsToTxn v5 between brokers): the
// output holds every input record exactly once. A downgrade back to 1 is
// seen by every broker.
func TestTxnVersion2Cluster(t *testing.T) {
	zk := zktest.Start(t)
	connect := zk.ConnectString("/strata-txn-v2")
	var rc requestCounter
	var brokers []*Server
	var seeds []string
	for i := range 3 {
		b := startCountingServer(t, map[string]string{"broker.id": fmt.Sprint(i + 1), "zookeeper.connect": connect,
			"transaction.state.log.num.partitions": "3", "transaction.state.log.replication.factor": "3",
			"offsets.topic.replication.factor": "3"}, &rc)
		brokers = append(brokers, b)
		seeds = append(seeds, b.Addr().String())
	}
	waitFor(t, "every broker registered", func() bool { return len(brokers[0].coord.Snapshot().Brokers) == 3 })
	admin := newClient(t, brokers[0], kgo.SeedBrokers(seeds...))
	createTopicRF(t, admin, "v2-in", 3, 3)
	createTopicRF(t, admin, "v2-out", 6, 3)
	setTxnVersion(t, admin, 2, brokers...)

	const n = 300
	var in []string
	ctx := testCtx(t)
	for i := range n {
		v := fmt.Sprintf("in-%03d", i)
		in = append(in, v)
		if err := admin.ProduceSync(ctx, &kgo.Record{Topic: "v2-in", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	runETL(t, seeds, "v2-in", "v2-out", "v2-etl", n)
	checkSpokeV2(t, &rc, 1, true)
	got := readAll(t, seeds, "v2-out", true, n)
	if fmt.Sprint(got) != fmt.Sprint(sortedCopy(in)) {
		t.Fatalf("output: %d records, want each of the %d inputs once", len(got), n)
	}
	offs, err := kadm.NewClient(admin).FetchOffsets(ctx, "v2-etl")
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != n {
		t.Errorf("committed offsets sum to %d, want %d", sum, n)
	}
	// The downgrade through kadm reaches every broker too.
	setTxnVersion(t, admin, 1, brokers...)
}

// runETL copies records from in to out with a GroupTransactSession,
// committing a transaction per poll, until n records were copied.
func runETL(t *testing.T, seeds []string, in, out, group string, n int) {
	t.Helper()
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(seeds...), kgo.TransactionalID(group+"-txn"),
		kgo.TransactionTimeout(30*time.Second), kgo.ConsumerGroup(group), kgo.ConsumeTopics(in),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	copied, txns := 0, 0
	deadline := time.Now().Add(90 * time.Second)
	for copied < n && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(testCtx(t), 2*time.Second)
		fs := sess.PollRecords(ctx, 40) // several transactions
		cancel()
		var recs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
		if len(recs) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := sess.Client().ProduceSync(testCtx(t), &kgo.Record{Topic: out, Value: r.Value}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		ok, err := sess.End(testCtx(t), kgo.TryCommit)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			copied += len(recs)
			txns++
		}
	}
	if copied != n {
		t.Fatalf("copied %d of %d records", copied, n)
	}
	t.Logf("copied %d records in %d transactions", copied, txns)
}

// TestTxnVersion2PartitionEpochs: the partition's side of transaction
// version 2. A producer's transaction open at epoch 0 (appended raw,
// verification off) is not joined by a Produce v12 batch of epoch 1 (the
// producer's next transaction, begun while this one's marker is on its
// way): that batch goes to the coordinator, which does not know the
// producer here, and is refused. A version 2 marker at the open
// transaction's epoch is INVALID_PRODUCER_EPOCH (it would be stale); one
// at the bumped epoch ends it, and a late batch of epoch 0 is then
// INVALID_PRODUCER_EPOCH.
func TestTxnVersion2PartitionEpochs(t *testing.T) {
	s := startServer(t, map[string]string{"transaction.partition.verification.enable": "false"})
	v11 := newClient(t, s, kgo.MaxVersions(maxKey(0, 11)))
	cl := newClient(t, s)
	createTopic(t, cl, "tx-ep", 1, nil)
	setTxnVersion(t, cl, 2, s)
	pid, _ := initProducerID(t, cl)
	mustProduce(t, v11, "tx-ep", txnBatch(t, pid, 0, 0, 2, "a"), 0) // 0-1, open at epoch 0

	if sp := produceRaw(t, cl, "tx-ep", 0, txnBatch(t, pid, 1, 0, 1, "b")); sp.ErrorCode == 0 {
		t.Fatalf("epoch 1 joined the open transaction of epoch 0 at offset %d", sp.BaseOffset)
	}
	if end := latestOffset(t, cl, "tx-ep", 0, 0); end != 2 {
		t.Fatalf("log end %d, want 2", end)
	}
	marker := func(epoch int16) int16 {
		t.Helper()
		req := markerRequest("tx-ep", 0, pid, epoch, true, 0)
		req.Version, req.Markers[0].TransactionVersion = 2, 2
		resp := s.writeTxnMarkers(testCtx(t), req)
		return resp.Markers[0].Topics[0].Partitions[0].ErrorCode
	}
	if code := marker(0); code != kerr.InvalidProducerEpoch.Code {
		t.Errorf("version 2 marker at the open transaction's epoch: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(code))
	}
	if code := marker(1); code != 0 {
		t.Fatalf("version 2 marker at the bumped epoch: %v", kerr.ErrorForCode(code))
	}
	if sp := produceRaw(t, v11, "tx-ep", 0, txnBatch(t, pid, 0, 2, 1, "late")); sp.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Errorf("late batch of epoch 0: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(sp.ErrorCode))
	}
}
