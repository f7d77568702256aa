package broker

import (
	"context"
	"fmt"
	"maps"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/e2e/history"
	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/tiering"
	"github.com/stratastream/strata/tiering/miniotest"
)

// TestTxnTieredReadCommittedMinIO tiers a partition with aborted
// transactions to MinIO: each uploaded segment carries its .txnindex
// object, the local index forgets what local retention deleted, and a
// read_committed franz-go consumer reading from offset 0 (the bucket,
// then the local log) gets exactly the committed records, the aborted
// transactions coming from the remote indexes. The history checker holds
// every acknowledged record in the final (read_uncommitted) log.
func TestTxnTieredReadCommittedMinIO(t *testing.T) {
	mio := miniotest.Start(t)
	bucket := mio.NewBucket(t)
	t.Setenv("AWS_ACCESS_KEY_ID", miniotest.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", miniotest.SecretKey)
	props := maps.Clone(tieredProps)
	maps.Copy(props, noTxnVerification)
	props["remote.storage.s3.endpoint"], props["remote.storage.s3.bucket"] = mio.Endpoint(), bucket
	s := startServer(t, props)
	cl := newClient(t, s)
	const topic = "ttx"
	// Deleted local segments stay open a while (Kafka's default delay):
	// the fetches here race local retention, and a file closed under a
	// response would end its connection.
	configs := maps.Clone(tieredTopicConfigs)
	configs["file.delete.delay.ms"] = "60000"
	createTopic(t, cl, topic, 1, configs)
	pids := []int64{}
	for range 2 {
		pid, _ := initProducerID(t, cl)
		pids = append(pids, pid)
	}
	seq := map[int64]int32{}
	tp := history.TP{Topic: topic, Partition: 0}
	h := history.New()
	var committed []string
	var aborted []segment.AbortedTxn
	type txnRec struct {
		first, marker int64
		commit        bool
		values        []string
	}
	var txns []txnRec
	all := 0
	for txn := range 60 {
		pid := pids[txn%2]
		var values []string
		first := int64(-1)
		for b := range 2 {
			spec := segment.BatchSpec{Idempotent: true, Transactional: true, ProducerID: pid, BaseSequence: seq[pid]}
			for i := range 5 {
				v := fmt.Sprintf("t%02d-%d-%d-%s", txn, b, i, strings.Repeat("x", 60))
				spec.Records = append(spec.Records, segment.Record{Timestamp: time.Now().UnixMilli(), Value: []byte(v)})
				values = append(values, v)
				h.Sent("p"+fmt.Sprint(pid), tp, v)
			}
			seq[pid] += 5
			batch, err := segment.BuildBatch(spec)
			if err != nil {
				t.Fatal(err)
			}
			sp := produceRaw(t, cl, topic, 0, batch)
			if sp.ErrorCode != 0 {
				t.Fatalf("txn %d: %v", txn, kerr.ErrorForCode(sp.ErrorCode))
			}
			if first < 0 {
				first = sp.BaseOffset
			}
			for i := range 5 {
				h.Answered(tp, values[b*5+i], history.Acked, sp.BaseOffset+int64(i), "")
			}
			all += 5
		}
		commit := txn%3 != 0
		if code := writeMarker(t, s, topic, 0, pid, 0, commit, 0); code != 0 {
			t.Fatalf("txn %d marker: %v", txn, kerr.ErrorForCode(code))
		}
		txns = append(txns, txnRec{first: first, marker: s.topic(topic).local(0).log.LogEndOffset() - 1, commit: commit, values: values})
		if commit {
			committed = append(committed, values...)
		} else {
			aborted = append(aborted, segment.AbortedTxn{ProducerID: pid, FirstOffset: first})
		}
	}
	// A transaction left open, then plain records that roll past it, so
	// that the segment holding its start is uploaded (with the producer
	// state that has it open).
	p := s.topic(topic).local(0)
	openSpec := segment.BatchSpec{Idempotent: true, Transactional: true, ProducerID: pids[0], BaseSequence: seq[pids[0]]}
	for i := range 5 {
		v := fmt.Sprintf("open-%d", i)
		openSpec.Records = append(openSpec.Records, segment.Record{Timestamp: time.Now().UnixMilli(), Value: []byte(v)})
		h.Sent("open", tp, v)
	}
	openBatch, err := segment.BuildBatch(openSpec)
	if err != nil {
		t.Fatal(err)
	}
	sp := produceRaw(t, cl, topic, 0, openBatch)
	if sp.ErrorCode != 0 {
		t.Fatalf("open transaction: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	openFirst := sp.BaseOffset
	for i := range 5 {
		h.Answered(tp, fmt.Sprintf("open-%d", i), history.Acked, openFirst+int64(i), "")
	}
	all += 5
	txns = append(txns, txnRec{first: openFirst, marker: math.MaxInt64})
	for b := range 6 {
		var spec segment.BatchSpec
		var vals []string
		for i := range 30 {
			v := fmt.Sprintf("plain-%d-%d-%s", b, i, strings.Repeat("p", 60))
			vals = append(vals, v)
			spec.Records = append(spec.Records, segment.Record{Timestamp: time.Now().UnixMilli(), Value: []byte(v)})
			h.Sent("plain", tp, v)
		}
		batch, err := segment.BuildBatch(spec)
		if err != nil {
			t.Fatal(err)
		}
		sp := produceRaw(t, cl, topic, 0, batch)
		if sp.ErrorCode != 0 {
			t.Fatalf("plain batch: %v", kerr.ErrorForCode(sp.ErrorCode))
		}
		for i, v := range vals {
			h.Answered(tp, v, history.Acked, sp.BaseOffset+int64(i), "")
		}
		all += 30
	}
	firstAbortEnd := p.txns.Entries()[0].LastOffset
	var m *tiering.Manifest
	waitFor(t, "the first aborted transaction's segments in the bucket and gone locally", func() bool {
		m = p.remoteManifest()
		// The retention pass deletes the segments, then drops their
		// index files.
		return m != nil && p.log.LogStartOffset() > firstAbortEnd+1 && len(p.txns.Entries()) < len(aborted) && m.EndOffset() > openFirst
	})
	withIndex := 0
	for i := range m.Segments {
		if m.Segments[i].HasTxnIndex {
			withIndex++
			key := m.SegmentKey(&m.Segments[i], tiering.SuffixTxnIndex)
			if _, err := mio.Client().StatObject(testCtx(t), bucket, key, minio.StatObjectOptions{}); err != nil {
				t.Fatalf("%s: %v", key, err)
			}
		}
	}
	local := p.txns.Entries()
	t.Logf("%d remote segments (%d with a .txnindex) up to %d, local log from %d holding %d of %d aborted transactions",
		len(m.Segments), withIndex, m.EndOffset(), p.log.LogStartOffset(), len(local), len(aborted))
	if withIndex == 0 || len(local) >= len(aborted) {
		t.Fatalf("%d remote .txnindex objects, %d local entries of %d: want remote ones and fewer local", withIndex, len(local), len(aborted))
	}

	// A raw read_committed fetch at 0 is served from the bucket with the
	// first aborted transaction.
	req := fetchRequest(topic, 0, 0, 1<<20)
	req.IsolationLevel = 1
	kresp, err := cl.Broker(0).Request(testCtx(t), fetchV12{req})
	if err != nil {
		t.Fatal(err)
	}
	fp := kresp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if fp.ErrorCode != 0 || len(fp.AbortedTransactions) == 0 || fp.AbortedTransactions[0].ProducerID != aborted[0].ProducerID || fp.AbortedTransactions[0].FirstOffset != aborted[0].FirstOffset {
		t.Fatalf("remote read_committed fetch at 0: error %d aborted %+v, want first %+v", fp.ErrorCode, fp.AbortedTransactions, aborted[0])
	}

	consume := func(level kgo.IsolationLevel, n int) []*kgo.Record {
		c := newClient(t, s, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}), kgo.FetchIsolationLevel(level))
		var out []*kgo.Record
		ctx := testCtx(t)
		for len(out) < n && ctx.Err() == nil {
			c.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, r) })
		}
		return out
	}
	var values []string
	for _, r := range consume(kgo.ReadCommitted(), len(committed)) {
		values = append(values, string(r.Value))
	}
	if !reflect.DeepEqual(values, committed) {
		t.Fatalf("read_committed consumer: %d records, want %d committed", len(values), len(committed))
	}
	var final []history.Record
	for _, r := range consume(kgo.ReadUncommitted(), all) {
		final = append(final, history.Record{Offset: r.Offset, Value: string(r.Value)})
	}
	rep := h.Check(map[history.TP][]history.Record{tp: final})
	t.Logf("history: %v", rep)
	if !rep.OK() || rep.Acknowledged != all {
		t.Fatalf("history: %v %v", rep, rep.Problems)
	}

	// Restore into a fresh broker from the bucket alone: the log starts
	// at the remote end with the producer state uploaded there (an open
	// transaction included), and read_committed from 0 is served from
	// the remote segments and their indexes.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	props["strata.remote.restore.topics"] = "*"
	props["log.dirs"] = t.TempDir()
	r := startServer(t, props)
	rp := r.topic(topic).local(0)
	end := rp.log.LogEndOffset()
	wantLSO := end
	var wantValues []string
	for _, x := range txns {
		if x.marker >= end && x.first < end {
			wantLSO = min(wantLSO, x.first) // its marker was not uploaded: open
		}
	}
	for _, x := range txns {
		if x.commit && x.marker < wantLSO {
			wantValues = append(wantValues, x.values...)
		}
	}
	if got := rp.lastStableOffset(); got != wantLSO {
		t.Fatalf("restored partition: log end %d, LSO %d, want %d", end, got, wantLSO)
	}
	s = r // consume reads from the restored broker
	// Until its archiver has read the manifest, the restored partition's
	// earliest offset is its local start (the remote end): a consumer
	// starting then would start there.
	waitFor(t, "the restored partition's manifest", func() bool { return rp.remoteManifest() != nil })
	values = values[:0]
	for _, rec := range consume(kgo.ReadCommitted(), len(wantValues)) {
		values = append(values, string(rec.Value))
	}
	t.Logf("restored: log end %d, LSO %d, %d committed records readable", end, wantLSO, len(wantValues))
	if !reflect.DeepEqual(values, wantValues) {
		t.Fatalf("read_committed after the restore: %d records, want %d", len(values), len(wantValues))
	}
}
