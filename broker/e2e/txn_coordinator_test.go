package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stratastream/strata/broker/e2e/history"
	"github.com/stratastream/strata/segment/poll"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTxnCoordinatorKilledMidCommit: three real brokers and ZooKeeper; a
// franz-go transactional producer writes to a replicated topic and to a
// one-replica partition on broker 3. Broker 3 stops, so that partition
// has no leader; the producer commits: EndTxn is acknowledged once
// PrepareCommit is in __transaction_state, and the transaction stays
// PrepareCommit (mid-commit: its marker to the leaderless partition is
// retried). Then the fault: kill -9 of the transaction coordinator's
// broker. Broker 3 comes back; the new coordinator (the next leader of the
// id's __transaction_state partition) loads PrepareCommit and completes
// the commit on every partition. read_committed consumers see exactly the
// committed transactions, the acknowledged mid-commit one included, and
// the history checker finds nothing lost, duplicated or inconsistent.
func TestTxnCoordinatorKilledMidCommit(t *testing.T) {
	c := StartCluster(t, 3,
		"transaction.state.log.num.partitions=3",
		"transaction.state.log.replication.factor=3",
		"transaction.state.log.min.isr=2",
		"offsets.topic.replication.factor=3")
	admCl := c.Client(t)
	adm := kadm.NewClient(admCl)
	c.createTopic(t, "txk-a", 3, 3)
	createOn(t, admCl, "txk-c", 3) // one replica, on broker 3
	c.WaitMetadata(t, 60*time.Second, "txk-c led by broker 3", func(m kadm.Metadata) string {
		if d := m.Topics["txk-c"].Partitions[0]; d.Leader != 3 {
			return fmt.Sprintf("leader %d", d.Leader)
		}
		return ""
	})

	// A transactional id whose coordinator is not broker 3 (the
	// first FindCoordinator creates __transaction_state).
	var id string
	var coordID int32
	ctx := context.Background()
	if !poll.For(60*time.Second, func() bool {
		for i := range 20 {
			cand := fmt.Sprintf("kill-%d", i)
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.CoordinatorType, req.CoordinatorKeys = 1, []string{cand}
			resp, err := req.RequestWith(ctx, admCl)
			if err != nil || resp.Coordinators[0].ErrorCode != 0 {
				return false
			}
			if n := resp.Coordinators[0].NodeID; n != 3 {
				id, coordID = cand, n
				return true
			}
		}
		return false
	}) {
		t.Fatal("no transactional id coordinated by broker 1 or 2")
	}
	t.Logf("transactional id %q, coordinator broker %d", id, coordID)

	newProducer := func() *kgo.Client {
		return c.Client(t, kgo.TransactionalID(id), kgo.TransactionTimeout(2*time.Minute), kgo.RetryTimeout(2*time.Minute),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	p := newProducer()
	h := history.New()
	parts := []history.TP{{Topic: "txk-a", Partition: 0}, {Topic: "txk-a", Partition: 1}, {Topic: "txk-a", Partition: 2}, {Topic: "txk-c", Partition: 0}}
	var committed, aborted []string
	// try produces n records to each partition inside a transaction and
	// returns their values; every record's answer goes to the history.
	// On a failed produce the rest are not sent and the error returned.
	try := func(name string, n int) ([]string, error) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			return nil, fmt.Errorf("%s: begin: %w", name, err)
		}
		var vals []string
		for _, tp := range parts {
			for j := range n {
				v := fmt.Sprintf("%s-%s-%d", name, tp, j)
				h.Sent(id, tp, v)
				vals = append(vals, v)
				rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
				r, err := p.ProduceSync(rctx, &kgo.Record{Topic: tp.Topic, Partition: tp.Partition, Value: []byte(v)}).First()
				cancel()
				if err != nil {
					h.Answered(tp, v, history.Unknown, -1, err.Error())
					return vals, fmt.Errorf("%s: produce %s: %w", name, v, err)
				}
				h.Answered(tp, v, history.Acked, r.Offset, "")
			}
		}
		return vals, nil
	}
	txn := func(name string, n int) []string {
		t.Helper()
		vals, err := try(name, n)
		if err != nil {
			t.Fatal(err)
		}
		return vals
	}
	end := func(name string, commit bool) {
		t.Helper()
		ectx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if err := p.EndTransaction(ectx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("%s: end (commit %v): %v", name, commit, err)
		}
	}
	for i := range 4 {
		name := fmt.Sprintf("t%d", i)
		vals := txn(name, 5)
		end(name, i%2 == 0)
		if i%2 == 0 {
			committed = append(committed, vals...)
		} else {
			aborted = append(aborted, vals...)
		}
	}

	mid := txn("mid", 5)
	began := time.Now()
	c.Broker(3).Stop(t)
	c.WaitMetadata(t, 60*time.Second, "txk-c without a leader", func(m kadm.Metadata) string {
		if d := m.Topics["txk-c"].Partitions[0]; d.Leader >= 0 {
			return fmt.Sprintf("leader %d", d.Leader)
		}
		return ""
	})
	end("mid", true) // acknowledged: PrepareCommit is stored
	committed = append(committed, mid...)
	describe := func() (kadm.DescribedTransaction, error) {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		ds, err := adm.DescribeTransactions(dctx, id)
		if err != nil {
			return kadm.DescribedTransaction{}, err
		}
		d, ok := ds[id]
		if !ok {
			return d, fmt.Errorf("%q not described", id)
		}
		return d, d.Err
	}
	// Right after broker 3 stopped the admin client may still pick it
	// for a request (a dial error, not retried in a sharded request):
	// ask again until an answer.
	var d kadm.DescribedTransaction
	var err error
	poll.For(30*time.Second, func() bool { d, err = describe(); return err == nil })
	if err != nil || d.State != "PrepareCommit" {
		t.Fatalf("after EndTxn with txk-c leaderless: %+v %v, want PrepareCommit", d, err)
	}
	t.Logf("mid-commit: %s at coordinator %d; killing broker %d", d.State, d.Coordinator, coordID)

	c.Broker(coordID).Kill(t) // the fault
	c.Broker(3).Restart(t)
	var seen kadm.DescribedTransaction
	if !poll.For(clusterSessionTimeout+2*time.Minute, func() bool {
		d, err := describe()
		seen = d
		return err == nil && d.State == "CompleteCommit" && d.Coordinator != coordID
	}) {
		t.Fatalf("the new coordinator did not complete the commit: %+v", seen)
	}
	t.Logf("completed by broker %d %v after broker 3 stopped", seen.Coordinator, time.Since(began).Round(time.Millisecond))
	c.Broker(coordID).Restart(t)

	// The producer carries on with the new coordinator. While the
	// restarted brokers rejoin, franz-go may fail a produce whose broker
	// it has not relearned ("unknown broker"): the application aborts
	// and runs the transaction again, as a real one does; if franz-go
	// marked the producer id fatally failed, with a new client.
	var last []string // the last transaction: each partition ends with it
	for attempt := 0; ; attempt++ {
		name := fmt.Sprintf("after%d", attempt)
		vals, err := try(name, 3)
		if err == nil {
			end(name, true)
			committed = append(committed, vals...)
			last = vals
			break
		}
		if attempt >= 5 {
			t.Fatal(err)
		}
		t.Logf("%v; aborting and retrying", err)
		actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		if err := p.AbortBufferedRecords(actx); err != nil {
			t.Fatal(err)
		}
		if vals == nil || p.EndTransaction(actx, kgo.TryAbort) != nil {
			t.Logf("the producer cannot go on; a new one (its InitProducerId aborts what is open)")
			p = newProducer()
		}
		cancel()
		aborted = append(aborted, vals...) // the failed one may or may not be in the log
	}

	got := readParts(t, c, parts, true, last)
	want := map[string]bool{}
	for _, v := range committed {
		want[v] = true
	}
	t.Logf("%d records committed, %d in aborted transactions", len(committed), len(aborted))
	if len(got) != len(committed) {
		t.Errorf("read_committed: %d records, want %d", len(got), len(committed))
	}
	for _, r := range got {
		h.Read("read_committed", r.tp, r.offset, r.value)
		if !want[r.value] {
			t.Errorf("read_committed returned %s of an aborted transaction", r.value)
		}
		delete(want, r.value)
	}
	if len(want) > 0 {
		t.Errorf("%d committed records not read (read_committed), e.g. %v", len(want), firstKey(want))
	}
	// Every acknowledged record, committed or aborted, is in the log.
	final := map[history.TP][]history.Record{}
	for _, r := range readParts(t, c, parts, false, last) {
		final[r.tp] = append(final[r.tp], history.Record{Offset: r.offset, Value: r.value})
		h.Read("final", r.tp, r.offset, r.value)
	}
	rep := h.Check(final)
	t.Logf("history: %v", rep)
	if !rep.OK() || rep.Acknowledged < len(committed) {
		t.Fatalf("history: %v %v", rep, rep.Problems)
	}
}

type readRecord struct {
	tp     history.TP
	offset int64
	value  string
}

// readParts reads parts from the start (read_committed or not) until it
// has read every value of last (the last transaction, which ends every
// partition: all before it has been read then) or two minutes passed.
func readParts(t *testing.T, c *Cluster, parts []history.TP, committed bool, last []string) []readRecord {
	t.Helper()
	offs := map[string]map[int32]kgo.Offset{}
	for _, tp := range parts {
		if offs[tp.Topic] == nil {
			offs[tp.Topic] = map[int32]kgo.Offset{}
		}
		offs[tp.Topic][tp.Partition] = kgo.NewOffset().AtStart()
	}
	level := kgo.ReadUncommitted()
	if committed {
		level = kgo.ReadCommitted()
	}
	cl := c.Client(t, kgo.ConsumePartitions(offs), kgo.FetchIsolationLevel(level))
	missing := map[string]bool{}
	for _, v := range last {
		missing[v] = true
	}
	var out []readRecord
	deadline := time.Now().Add(2 * time.Minute)
	for len(missing) > 0 && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, readRecord{history.TP{Topic: r.Topic, Partition: r.Partition}, r.Offset, string(r.Value)})
			delete(missing, string(r.Value))
		})
	}
	if len(missing) > 0 {
		t.Errorf("read (committed %v): %d values of the last transaction never read", committed, len(missing))
	}
	return out
}

func firstKey(m map[string]bool) string {
	for k := range m {
		return k
	}
	return ""
}

// createOn creates a one-partition topic with its only replica on broker.
func createOn(t *testing.T, cl *kgo.Client, topic string, broker int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Partition, a.Replicas = 0, []int32{broker}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create %s on broker %d: %v", topic, broker, kerr.ErrorForCode(code))
	}
}
