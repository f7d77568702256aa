package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/segment/poll"
)

// The client tests of transactions: real clients' transactional producers
// against a real strata process, each read back with read_committed.
//   - TestTxnFranzGroupTransactSession: franz-go's GroupTransactSession
//     consume-transform-produce pipeline with a second worker joining
//     mid-run (a rebalance): the output holds every input exactly once.
//   - TestTxnPythonSendOffsets: librdkafka (python confluent-kafka)
//     transactions with send_offsets_to_transaction, one aborted.
//   - TestTxnSarama: sarama's transactional producer with AddMessageToTxn,
//     CommitTxn and AbortTxn.
//   - TestTxnKcatReadCommitted: kcat -X isolation.level=read_committed over
//     committed and aborted transactions.

// requireTransactions fails the test when the broker does not advertise
// the transaction APIs the clients need.
func requireTransactions(t *testing.T, b *Broker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, b.Client(t))
	if err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	served := map[int16]bool{}
	for _, k := range resp.ApiKeys {
		served[k.ApiKey] = true
	}
	for _, key := range []int16{22, 24, 25, 26, 28} {
		if !served[key] {
			t.Fatalf("the broker does not advertise %s (API %d)", kmsg.NameForKey(key), key)
		}
	}
}

// produceInputs produces n records "in-<i>" (key "k<i>") to topic,
// non-transactionally, and returns their values.
func produceInputs(t *testing.T, b *Broker, topic string, n int) []string {
	t.Helper()
	cl := b.Client(t, kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var values []string
	var recs []*kgo.Record
	for i := range n {
		v := fmt.Sprintf("in-%d", i)
		values = append(values, v)
		recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(v)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce inputs to %s: %v", topic, err)
	}
	return values
}

// readCommitted reads every partition of topic with read_committed up to
// a sentinel record it first appends to each partition (non-transactional),
// so that everything committed before it has been read; it returns the
// values read, sentinels left out.
func readCommitted(t *testing.T, b *Broker, topic string, partitions int32) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prod := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var sentinels []*kgo.Record
	for p := range partitions {
		sentinels = append(sentinels, &kgo.Record{Topic: topic, Partition: p, Value: []byte("sentinel")})
	}
	if err := prod.ProduceSync(ctx, sentinels...).FirstErr(); err != nil {
		t.Fatalf("produce sentinels to %s: %v", topic, err)
	}
	offsets := map[int32]kgo.Offset{}
	for p := range partitions {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cons := b.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	var values []string
	done := map[int32]bool{}
	for len(done) < int(partitions) {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read_committed read of %s: sentinels of %d of %d partitions seen, %d records: %v", topic, len(done), partitions, len(values), ctx.Err())
		}
		for _, err := range fs.Errors() {
			t.Logf("fetch %s/%d: %v", err.Topic, err.Partition, err.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == "sentinel" {
				done[r.Partition] = true
				return
			}
			if !done[r.Partition] {
				values = append(values, string(r.Value))
			}
		})
	}
	return values
}

// checkExactlyOnce fails the test unless got holds each of want exactly
// once (and nothing else).
func checkExactlyOnce(t *testing.T, what string, got, want []string) {
	t.Helper()
	seen := map[string]int{}
	for _, v := range got {
		seen[v]++
	}
	var missing, dup, extra []string
	wanted := map[string]bool{}
	for _, v := range want {
		wanted[v] = true
		switch seen[v] {
		case 0:
			missing = append(missing, v)
		case 1:
		default:
			dup = append(dup, v)
		}
	}
	for v := range seen {
		if !wanted[v] {
			extra = append(extra, v)
		}
	}
	t.Logf("%s: %d records read, %d wanted: %d missing, %d duplicated, %d unexpected", what, len(got), len(want), len(missing), len(dup), len(extra))
	if len(missing)+len(dup)+len(extra) > 0 {
		t.Errorf("%s: missing %v, duplicated %v, unexpected %v", what, head(missing), head(dup), head(extra))
	}
}

func head(vs []string) []string {
	if len(vs) > 10 {
		return append(vs[:10:10], fmt.Sprintf("... (%d)", len(vs)))
	}
	return vs
}

// txnGroupOffsets returns the group's committed offsets of topic.
func txnGroupOffsets(t *testing.T, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	os, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	out := map[int32]int64{}
	os.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			out[o.Partition] = o.At
		}
	})
	return out
}

// etlWorker is one consume-transform-produce worker of a
// GroupTransactSession: each polled batch is copied to the output topic
// ("out-" + value) in a transaction that also commits the consumed offsets.
type etlWorker struct {
	name    string
	sess    *kgo.GroupTransactSession
	cancel  context.CancelFunc
	stopped chan struct{}

	mu         sync.Mutex
	commits    int
	aborts     int
	lastErr    error
	endErrs    int
	committedN int // records in committed transactions
}

func startETLWorker(t *testing.T, b *Broker, name, group, in, out string) *etlWorker {
	t.Helper()
	sess, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(b.Addr),
		kgo.DialTimeout(5*time.Second),
		kgo.RetryTimeout(30*time.Second),
		kgo.MetadataMinAge(250*time.Millisecond),
		kgo.TransactionalID("etl-"+name),
		kgo.TransactionTimeout(20*time.Second),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DefaultProduceTopic(out),
		kgo.SessionTimeout(10*time.Second),
		kgo.RebalanceTimeout(20*time.Second),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	if err != nil {
		t.Fatalf("NewGroupTransactSession: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &etlWorker{name: name, sess: sess, cancel: cancel, stopped: make(chan struct{})}
	go w.run(ctx)
	t.Cleanup(w.stop)
	return w
}

func (w *etlWorker) run(ctx context.Context) {
	defer close(w.stopped)
	for ctx.Err() == nil {
		fs := w.sess.PollRecords(ctx, 100)
		if ctx.Err() != nil {
			return
		}
		if err := w.sess.Begin(); err != nil {
			w.fail(err)
			return
		}
		e := kgo.AbortingFirstErrPromise(w.sess.Client())
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			w.sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: append([]byte("out-"), r.Value...)}, e.Promise())
		})
		committed, err := w.sess.End(ctx, e.Err() == nil)
		w.mu.Lock()
		switch {
		case err != nil:
			w.endErrs++
			w.lastErr = err
		case committed:
			w.commits++
			w.committedN += n
		default:
			w.aborts++
		}
		w.mu.Unlock()
	}
}

func (w *etlWorker) fail(err error) {
	w.mu.Lock()
	w.lastErr = err
	w.endErrs++
	w.mu.Unlock()
}

func (w *etlWorker) stats() (commits, aborts, endErrs, records int, lastErr error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.commits, w.aborts, w.endErrs, w.committedN, w.lastErr
}

// stop ends the worker's loop and closes its session (leaving the group).
func (w *etlWorker) stop() {
	w.cancel()
	select {
	case <-w.stopped:
	case <-time.After(60 * time.Second):
	}
	w.sess.Close()
}

// TestTxnFranzGroupTransactSession runs franz-go's exactly-once
// consume-transform-produce pipeline (as its own TestTxnEtl does) with a
// rebalance in the middle: a second worker joins the group while the
// first is copying. The output, read with read_committed, holds every
// input exactly once, and the group's offsets end at the input's end.
func TestTxnFranzGroupTransactSession(t *testing.T) {
	b := StartBroker(t)
	requireTransactions(t, b)
	const in, out, group, partitions, n = "etl-in", "etl-out", "etl", 4, 2000
	b.CreateTopic(t, in, partitions)
	b.CreateTopic(t, out, partitions)
	inputs := produceInputs(t, b, in, n)

	start := time.Now()
	w1 := startETLWorker(t, b, "one", group, in, out)
	// The second worker joins once the first has committed some work.
	if !poll.For(60*time.Second, func() bool { _, _, _, recs, _ := w1.stats(); return recs >= n/4 }) {
		c, a, e, recs, err := w1.stats()
		t.Fatalf("first worker: %d records committed after 60s (%d commits, %d aborts, %d errors, last %v)", recs, c, a, e, err)
	}
	w2 := startETLWorker(t, b, "two", group, in, out)
	adm := kadm.NewClient(b.Client(t))
	allDone := func() bool {
		got := txnGroupOffsets(t, adm, group, in)
		var sum int64
		for _, o := range got {
			sum += o
		}
		return sum == n
	}
	if !poll.For(90*time.Second, allDone) {
		for _, w := range []*etlWorker{w1, w2} {
			c, a, e, recs, err := w.stats()
			t.Logf("worker %s: %d commits, %d aborts, %d end errors (last %v), %d records", w.name, c, a, e, err, recs)
		}
		t.Fatalf("the group's committed offsets of %s did not reach %d: %v", in, n, txnGroupOffsets(t, adm, group, in))
	}
	w1.stop()
	w2.stop()
	for _, w := range []*etlWorker{w1, w2} {
		c, a, e, recs, err := w.stats()
		t.Logf("worker %s: %d commits, %d aborts, %d end errors (last %v), %d records in committed transactions", w.name, c, a, e, err, recs)
	}
	t.Logf("pipeline of %d records with a rebalance took %v", n, time.Since(start))

	want := make([]string, len(inputs))
	for i, v := range inputs {
		want[i] = "out-" + v
	}
	checkExactlyOnce(t, "pipeline output (read_committed)", readCommitted(t, b, out, partitions), want)
	// The group's offsets are at the end of each input partition.
	ends, err := adm.ListEndOffsets(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	got := txnGroupOffsets(t, adm, group, in)
	ends.Each(func(o kadm.ListedOffset) {
		if got[o.Partition] != o.Offset {
			t.Errorf("%s/%d: committed %d, end %d", in, o.Partition, got[o.Partition], o.Offset)
		}
	})
}

// pythonTxnProducer is run by Debian's Python: librdkafka's transactional
// producer writes three transactions to the output topic, the first and
// last committed with the consumer group's offsets
// (send_offsets_to_transaction), the middle one aborted. It prints what it
// did as JSON.
const pythonTxnProducer = `
import json, sys
import confluent_kafka
from confluent_kafka import Producer, Consumer, TopicPartition

addr, src, out, group = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
p = Producer({'bootstrap.servers': addr, 'transactional.id': 'py-txn', 'transaction.timeout.ms': 30000})
c = Consumer({'bootstrap.servers': addr, 'group.id': group, 'enable.auto.commit': False})
p.init_transactions(30)

def txn(prefix, n, offset, commit):
    p.begin_transaction()
    for i in range(n):
        p.produce(out, key='%s-%d' % (prefix, i), value='%s-%d' % (prefix, i))
    p.send_offsets_to_transaction([TopicPartition(src, 0, offset)], c.consumer_group_metadata(), 30)
    if commit:
        p.commit_transaction(30)
    else:
        p.flush(30)
        p.abort_transaction(30)

txn('committed', 100, 42, True)
txn('aborted', 50, 99, False)
txn('again', 10, 57, True)
c.close()
json.dump({'librdkafka': confluent_kafka.libversion()[0]}, sys.stdout)
`

// TestTxnPythonSendOffsets: librdkafka's transactions with
// send_offsets_to_transaction. A read_committed reader (kcat) sees the two
// committed transactions and never the aborted one; the group's offset is
// the last committed transaction's, not the aborted one's.
func TestTxnPythonSendOffsets(t *testing.T) {
	requireConfluentKafka(t)
	requireKcat(t)
	b := StartBroker(t)
	requireTransactions(t, b)
	const src, out, group = "py-src", "py-out", "py-group"
	b.CreateTopic(t, src, 1)
	b.CreateTopic(t, out, 1)
	produceInputs(t, b, src, 100) // offsets up to 99 exist

	start := time.Now()
	res := runCmd(t, 90*time.Second, "", debianPython, "-c", pythonTxnProducer, b.Addr, src, out, group)
	var info struct {
		Librdkafka string `json:"librdkafka"`
	}
	if err := json.Unmarshal([]byte(res), &info); err != nil {
		t.Fatalf("producer output: %v\n%s", err, tailString(res, 4096))
	}
	t.Logf("librdkafka %s: three transactions in %v", info.Librdkafka, time.Since(start))

	var want []string
	for i := range 100 {
		want = append(want, fmt.Sprintf("committed-%d", i))
	}
	for i := range 10 {
		want = append(want, fmt.Sprintf("again-%d", i))
	}
	got := kcatRead(t, b.Addr, out, "read_committed")
	checkExactlyOnce(t, "read_committed (kcat) after librdkafka transactions", got, want)
	if c := txnGroupOffsets(t, kadm.NewClient(b.Client(t)), group, src); c[0] != 57 {
		t.Errorf("group %s offset of %s/0: got %d, want 57 (the last committed transaction's)", group, src, c[0])
	}
}

// kcatRead reads topic from the start to its end with kcat at the
// isolation level ("read_committed", librdkafka's default, or
// "read_uncommitted") and returns the values.
func kcatRead(t *testing.T, addr, topic, isolation string) []string {
	t.Helper()
	out := runCmd(t, 30*time.Second, "", "kcat", "-C", "-b", addr, "-t", topic, "-X", "isolation.level="+isolation,
		"-o", "beginning", "-e", "-q", "-f", `%s\n`)
	var vs []string
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line != "" {
			vs = append(vs, line)
		}
	}
	return vs
}

// TestTxnSarama: sarama's transactional producer copies consumed records
// to an output topic, one transaction per record with the consumed offset
// added (AddMessageToTxn); every third transaction is aborted. A
// read_committed sarama consumer sees exactly the committed copies, and
// the group's offset is the last committed transaction's.
func TestTxnSarama(t *testing.T) {
	b := StartBroker(t)
	requireTransactions(t, b)
	const src, out, group, n = "sarama-src", "sarama-out", "sarama-group", 30
	b.CreateTopic(t, src, 1)
	b.CreateTopic(t, out, 1)
	produceInputs(t, b, src, n)

	cfg := sarama.NewConfig()
	cfg.ClientID = "strata-e2e-sarama-txn"
	cfg.Producer.Idempotent = true
	cfg.Producer.Transaction.ID = "sarama-txn"
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Retry.Max = 10
	cfg.Producer.Retry.Backoff = 200 * time.Millisecond
	cfg.Net.MaxOpenRequests = 1
	cfg.Net.DialTimeout = 5 * time.Second
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	cfg.Consumer.Return.Errors = true
	cfg.Metadata.Retry.Max = 10
	cfg.Metadata.Retry.Backoff = 200 * time.Millisecond
	t.Logf("sarama protocol version %s", cfg.Version)

	prod, err := sarama.NewSyncProducer([]string{b.Addr}, cfg)
	if err != nil {
		t.Fatalf("sarama.NewSyncProducer: %v", err)
	}
	defer prod.Close()
	cons, err := sarama.NewConsumer([]string{b.Addr}, cfg)
	if err != nil {
		t.Fatalf("sarama.NewConsumer: %v", err)
	}
	defer cons.Close()
	pc, err := cons.ConsumePartition(src, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()

	start := time.Now()
	var want []string
	lastCommitted := int64(-1)
	deadline := time.After(60 * time.Second)
	for i := range n {
		var msg *sarama.ConsumerMessage
		select {
		case msg = <-pc.Messages():
		case err := <-pc.Errors():
			t.Fatalf("consume %s: %v", src, err)
		case <-deadline:
			t.Fatalf("consume %s: %d of %d records after 60s", src, i, n)
		}
		commit := i%3 != 2
		if err := saramaTxn(prod, msg, out, group, commit); err != nil {
			t.Fatalf("transaction %d (commit %v): %v", i, commit, err)
		}
		if commit {
			want = append(want, "out-"+string(msg.Value))
			lastCommitted = msg.Offset + 1
		}
	}
	t.Logf("sarama: %d transactions in %v", n, time.Since(start))

	checkExactlyOnce(t, "read_committed (sarama) after sarama transactions", saramaReadCommitted(t, b, cons, out), want)
	if c := txnGroupOffsets(t, kadm.NewClient(b.Client(t)), group, src); c[0] != lastCommitted {
		t.Errorf("group %s offset of %s/0: got %d, want %d (the last committed transaction's)", group, src, c[0], lastCommitted)
	}
}

// saramaTxn copies msg to topic out in one transaction with its offset.
func saramaTxn(prod sarama.SyncProducer, msg *sarama.ConsumerMessage, out, group string, commit bool) error {
	if err := prod.BeginTxn(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	_, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: out, Partition: 0, Key: sarama.ByteEncoder(msg.Key),
		Value: sarama.StringEncoder("out-" + string(msg.Value))})
	if err == nil {
		err = prod.AddMessageToTxn(msg, group, nil)
	}
	if err != nil || !commit {
		if aerr := prod.AbortTxn(); aerr != nil {
			return errors.Join(err, fmt.Errorf("abort: %w", aerr))
		}
		return err
	}
	if err := prod.CommitTxn(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// saramaReadCommitted reads partition 0 of topic with the read_committed
// consumer up to a sentinel record it first appends (non-transactional,
// with franz-go): everything committed before it has then been read.
func saramaReadCommitted(t *testing.T, b *Broker, cons sarama.Consumer, topic string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Client(t).ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("sentinel")}).FirstErr(); err != nil {
		t.Fatalf("produce the sentinel to %s: %v", topic, err)
	}
	pc, err := cons.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var vs []string
	deadline := time.After(30 * time.Second)
	for {
		select {
		case m := <-pc.Messages():
			if string(m.Value) == "sentinel" {
				return vs
			}
			vs = append(vs, string(m.Value))
		case err := <-pc.Errors():
			t.Fatalf("consume %s: %v", topic, err)
		case <-deadline:
			t.Fatalf("consume %s: %d records and no sentinel after 30s, high watermark %d", topic, len(vs), pc.HighWaterMarkOffset())
		}
	}
}

// TestTxnKcatReadCommitted: a topic holding committed and aborted
// transactions (franz-go's transactional producer) and plain records read
// by kcat: read_committed shows the committed and plain records and never
// an aborted one; read_uncommitted shows them all.
func TestTxnKcatReadCommitted(t *testing.T) {
	requireKcat(t)
	b := StartBroker(t)
	requireTransactions(t, b)
	const topic = "kcat-txn"
	b.CreateTopic(t, topic, 2)
	cl := b.Client(t, kgo.TransactionalID("kcat-txn"), kgo.DefaultProduceTopic(topic), kgo.TransactionTimeout(20*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var committed, aborted []string
	for txn := range 6 {
		commit := txn%2 == 0
		if err := cl.BeginTransaction(); err != nil {
			t.Fatalf("begin %d: %v", txn, err)
		}
		var recs []*kgo.Record
		for i := range 20 {
			v := fmt.Sprintf("txn%d-%d", txn, i)
			recs = append(recs, &kgo.Record{Key: []byte(v), Value: []byte(v)})
			if commit {
				committed = append(committed, v)
			} else {
				aborted = append(aborted, v)
			}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce in transaction %d: %v", txn, err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end transaction %d (commit %v): %v", txn, commit, err)
		}
	}
	plain := produceInputs(t, b, topic, 10)
	want := append(append([]string{}, committed...), plain...)
	checkExactlyOnce(t, "kcat read_committed", kcatRead(t, b.Addr, topic, "read_committed"), want)

	all := kcatRead(t, b.Addr, topic, "read_uncommitted")
	checkExactlyOnce(t, "kcat read_uncommitted", all, append(append([]string{}, want...), aborted...))
}

// TestTxnFranzGoSuiteVersion2 runs franz-go's own TestTxnEtl (from
// github.com/twmb/franz-go/pkg/kgo at the version in go.mod: a
// transactional producer, a GroupTransactSession consume-transform-produce
// chain with group members joining and leaving, read_committed checkers)
// as a subprocess against one broker with transaction.version 2
// finalized, so franz-go runs it under KIP-890 part 2. KGO_TEST_RECORDS
// makes it 50,000 records instead of 500,000. It must run and pass (its
// KIP-848 subtests skip: the consumer group protocol is not served).
func TestTxnFranzGoSuiteVersion2(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("no go command to build franz-go's tests: %v", err)
	}
	b := StartBroker(t, "transaction.state.log.num.partitions=3", "group.initial.rebalance.delay.ms=0")
	requireTransactions(t, b)
	finalizeTxnVersion(t, 2, b)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "github.com/twmb/franz-go/pkg/kgo", "-run", "^TestTxnEtl$", "-count=1", "-v", "-timeout", "7m")
	cmd.Env = append(os.Environ(), "KGO_SEEDS="+b.Addr, "KGO_TEST_RF=1", "KGO_TEST_RECORDS=50000")
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("go test franz-go/pkg/kgo -run TestTxnEtl (build and run) took %v", time.Since(start).Round(100*time.Millisecond))
	if err != nil {
		t.Fatalf("franz-go's TestTxnEtl: %v\n%s", err, tailString(string(out), 8192))
	}
	if !regexp.MustCompile(`(?m)^--- PASS: TestTxnEtl `).Match(out) {
		t.Fatalf("TestTxnEtl did not pass (skipped or not run):\n%s", tailString(string(out), 4096))
	}
	t.Logf("franz-go:\n%s", tailString(string(out), 1024))
}
