package e2e

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/e2e/history"
	"github.com/stratastream/strata/segment"
)

// TestTxnPartitionRestartAfterKill runs transactions on a real strata
// process with raw requests (transactional Produce, WriteTxnMarkers over
// the wire as a coordinator sends them), kills it with SIGKILL with one
// transaction still open, and restarts it on the same data directory:
// the aborted-transaction index and the LSO are rebuilt (the open
// transaction holds the LSO until its marker, sent after the restart),
// read_committed Fetch returns the same aborted transactions, a franz-go
// read_committed consumer reads exactly the committed records, and the
// history checker holds every acknowledged record in the log.
func TestTxnPartitionRestartAfterKill(t *testing.T) {
	const topic = "txk"
	// The batches are appended raw, without a coordinator's transaction
	// behind them: they name a transactional id (as transactional batches
	// must) and the leader does not verify it.
	b := StartBroker(t, "log.segment.bytes=4096", "transaction.partition.verification.enable=false")
	b.CreateTopic(t, topic, 1)
	cl := b.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	initPID := func() int64 {
		resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("InitProducerId: %v %v", err, resp)
		}
		return resp.ProducerID
	}
	pids := []int64{initPID(), initPID(), initPID()}
	seq := map[int64]int32{}
	tp := history.TP{Topic: topic, Partition: 0}
	h := history.New()
	var committed []string
	var aborted []string
	all := 0
	produce := func(pid int64, tag string, n int) int64 {
		t.Helper()
		spec := segment.BatchSpec{Idempotent: true, Transactional: true, ProducerID: pid, BaseSequence: seq[pid]}
		var values []string
		for i := range n {
			v := fmt.Sprintf("%s-%d-%0100d", tag, i, i)
			values = append(values, v)
			spec.Records = append(spec.Records, segment.Record{Timestamp: time.Now().UnixMilli(), Value: []byte(v)})
			h.Sent(fmt.Sprint(pid), tp, v)
		}
		seq[pid] += int32(n)
		batch, err := segment.BuildBatch(spec)
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 10000
		req.TransactionID = kmsg.StringPtr("txn-partition-restart")
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		sp := resp.Topics[0].Partitions[0]
		if sp.ErrorCode != 0 {
			t.Fatalf("produce %s: %v", tag, kerr.ErrorForCode(sp.ErrorCode))
		}
		for i, v := range values {
			h.Answered(tp, v, history.Acked, sp.BaseOffset+int64(i), "")
		}
		all += n
		return sp.BaseOffset
	}
	marker := func(pid int64, commit bool) {
		t.Helper()
		req := kmsg.NewPtrWriteTxnMarkersRequest()
		m := kmsg.NewWriteTxnMarkersRequestMarker()
		m.ProducerID, m.Committed = pid, commit
		mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		mt.Topic, mt.Partitions = topic, []int32{0}
		m.Topics = append(m.Topics, mt)
		req.Markers = append(req.Markers, m)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("marker: %v", kerr.ErrorForCode(code))
		}
	}
	var openValues []string
	for txn := range 30 {
		pid := pids[txn%2]
		first := int64(-1)
		var values []string
		for bi := range 2 {
			tag := fmt.Sprintf("t%02d-%d", txn, bi)
			off := produce(pid, tag, 4)
			if first < 0 {
				first = off
			}
			for i := range 4 {
				values = append(values, fmt.Sprintf("%s-%d-%0100d", tag, i, i))
			}
		}
		if txn%3 == 0 {
			marker(pid, false)
			aborted = append(aborted, fmt.Sprintf("%d@%d", pid, first))
		} else {
			marker(pid, true)
			committed = append(committed, values...)
		}
	}
	// The third producer's transaction is open when the broker dies.
	openFirst := produce(pids[2], "open", 3)
	for i := range 3 {
		openValues = append(openValues, fmt.Sprintf("open-%d-%0100d", i, i))
	}
	end := openFirst + 3

	fetchRC := func(cl *kgo.Client) kmsg.FetchResponseTopicPartition {
		req := kmsg.NewPtrFetchRequest()
		req.MaxBytes, req.IsolationLevel = 1<<24, 1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.PartitionMaxBytes = 1 << 24
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := fetchV12{req}.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0]
	}
	list := func(fp kmsg.FetchResponseTopicPartition) []string {
		var out []string
		for _, a := range fp.AbortedTransactions {
			out = append(out, fmt.Sprintf("%d@%d", a.ProducerID, a.FirstOffset))
		}
		return out
	}
	before := fetchRC(cl)
	if before.LastStableOffset != openFirst || !reflect.DeepEqual(list(before), aborted) {
		t.Fatalf("before the kill: lso %d aborted %v, want %d %v", before.LastStableOffset, list(before), openFirst, aborted)
	}

	b.Kill(t)
	start := time.Now()
	b.Restart(t)
	cl = b.Client(t)
	var after kmsg.FetchResponseTopicPartition
	waitFor(t, 30*time.Second, "the partition served after the restart", func() bool {
		after = fetchRC(cl)
		return after.ErrorCode == 0 && after.HighWatermark == end
	})
	t.Logf("served again %v after the kill", time.Since(start))
	if after.LastStableOffset != openFirst || !reflect.DeepEqual(list(after), aborted) {
		t.Fatalf("after the restart: lso %d aborted %v, want %d %v", after.LastStableOffset, list(after), openFirst, aborted)
	}
	// The open transaction commits after the restart: its producer's
	// sequence continues, and the LSO reaches the end.
	more := produce(pids[2], "more", 2)
	openValues = append(openValues, fmt.Sprintf("more-0-%0100d", 0), fmt.Sprintf("more-1-%0100d", 1))
	marker(pids[2], true)
	committed = append(committed, openValues...)
	end = more + 3
	final := fetchRC(cl)
	if final.LastStableOffset != end || !reflect.DeepEqual(list(final), aborted) {
		t.Fatalf("after the last commit: lso %d (want %d) aborted %v", final.LastStableOffset, end, list(final))
	}

	consume := func(level kgo.IsolationLevel, n int) []*kgo.Record {
		c := b.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}), kgo.FetchIsolationLevel(level))
		var out []*kgo.Record
		for len(out) < n && ctx.Err() == nil {
			c.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, r) })
		}
		return out
	}
	var got []string
	for _, r := range consume(kgo.ReadCommitted(), len(committed)) {
		got = append(got, string(r.Value))
	}
	if !reflect.DeepEqual(got, committed) {
		t.Fatalf("read_committed consumer: %d records, want the %d committed", len(got), len(committed))
	}
	var log []history.Record
	for _, r := range consume(kgo.ReadUncommitted(), all) {
		log = append(log, history.Record{Offset: r.Offset, Value: string(r.Value)})
	}
	rep := h.Check(map[history.TP][]history.Record{tp: log})
	t.Logf("history: %v", rep)
	if !rep.OK() || rep.Acknowledged != all {
		t.Fatalf("history: %v %v", rep, rep.Problems)
	}
}
