package broker

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnBatch builds a transactional batch of n records from pid/epoch at
// sequence seq, values "<tag><i>".
func txnBatch(t *testing.T, pid int64, epoch int16, seq int32, n int, tag string) []byte {
	t.Helper()
	spec := segment.BatchSpec{Idempotent: true, Transactional: true, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}
	now := time.Now().UnixMilli()
	for i := 0; i < n; i++ {
		spec.Records = append(spec.Records, segment.Record{Timestamp: now, Value: []byte(tag + strconv.Itoa(i))})
	}
	b, err := segment.BuildBatch(spec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// marker is a WriteTxnMarkers request for one producer and partition.
func markerRequest(topic string, partition int32, pid int64, epoch int16, commit bool, coordEpoch int32) *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = pid, epoch, commit, coordEpoch
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{partition}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	return req
}

// writeMarker calls writeTxnMarkers directly, as the coordinator does,
// and returns the partition's error code.
func writeMarker(t *testing.T, s *Server, topic string, partition int32, pid int64, epoch int16, commit bool, coordEpoch int32) int16 {
	t.Helper()
	resp := s.writeTxnMarkers(testCtx(t), markerRequest(topic, partition, pid, epoch, commit, coordEpoch))
	if len(resp.Markers) != 1 || len(resp.Markers[0].Topics) != 1 || len(resp.Markers[0].Topics[0].Partitions) != 1 {
		t.Fatalf("response shape: %+v", resp)
	}
	return resp.Markers[0].Topics[0].Partitions[0].ErrorCode
}

// fetchIsolation fetches topic/partition from offset at an isolation
// level (v12) and returns the partition and the record offsets (of data
// batches) returned.
func fetchIsolation(t *testing.T, cl *kgo.Client, topic string, partition int32, offset int64, level int8) (kmsg.FetchResponseTopicPartition, []int64) {
	t.Helper()
	req := fetchRequest(topic, partition, offset, 1<<20)
	req.IsolationLevel = level
	resp, err := cl.Broker(0).Request(testCtx(t), fetchV12{req})
	if err != nil {
		t.Fatal(err)
	}
	fp := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	var offs []int64
	err = segment.SplitBatches(fp.RecordBatches, func(h segment.Header, _ []byte) error {
		if !h.Control() {
			for o := h.BaseOffset; o <= h.LastOffset(); o++ {
				offs = append(offs, o)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return fp, offs
}

func latestOffset(t *testing.T, cl *kgo.Client, topic string, partition int32, level int8) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = level
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = partition, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	sp := resp.Topics[0].Partitions[0]
	if sp.ErrorCode != 0 {
		t.Fatalf("ListOffsets: error %d", sp.ErrorCode)
	}
	return sp.Offset
}

func abortedList(fp kmsg.FetchResponseTopicPartition) []string {
	var out []string
	for _, a := range fp.AbortedTransactions {
		out = append(out, fmt.Sprintf("%d@%d", a.ProducerID, a.FirstOffset))
	}
	return out
}

// checkProducers compares DescribeProducers of tx-0 with want: per
// producer "e<epoch> s<last seq> c<coordinator epoch> t<txn start>".
func checkProducers(t *testing.T, cl *kgo.Client, want map[int64]string) {
	t.Helper()
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = "tx", []int32{0, 7}
	req.Topics = append(req.Topics, rt)
	kresp, err := cl.Broker(0).Request(testCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	parts := kresp.(*kmsg.DescribeProducersResponse).Topics[0].Partitions
	if len(parts) != 2 || parts[0].ErrorCode != 0 || parts[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("DescribeProducers: %+v", parts)
	}
	got := map[int64]string{}
	for _, ap := range parts[0].ActiveProducers {
		got[ap.ProducerID] = fmt.Sprintf("e%d s%d c%d t%d", ap.ProducerEpoch, ap.LastSequence, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset)
		if ap.LastTimestamp <= 0 {
			t.Errorf("producer %d: last timestamp %d", ap.ProducerID, ap.LastTimestamp)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DescribeProducers: %v, want %v", got, want)
	}
}

func mustProduce(t *testing.T, cl *kgo.Client, topic string, batch []byte, wantBase int64) {
	t.Helper()
	sp := produceRaw(t, cl, topic, 0, batch)
	if sp.ErrorCode != 0 || sp.BaseOffset != wantBase {
		t.Fatalf("produce: error %v base %d, want base %d", kerr.ErrorForCode(sp.ErrorCode), sp.BaseOffset, wantBase)
	}
}

// TestTxnPartitionMarkersAndReadCommitted drives one partition through two
// producers' transactions with raw requests: transactional produce,
// writeTxnMarkers (abort, commit, fencing), Fetch and ListOffsets at both
// isolation levels, a franz-go read_committed consumer, then restarts on
// the same data directory (with and without the producer snapshots and
// index files) and checks the index and LSO are rebuilt.
func TestTxnPartitionMarkersAndReadCommitted(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, map[string]string{"log.dirs": dir, "transaction.partition.verification.enable": "false"})
	cl := newClient(t, s)
	createTopic(t, cl, "tx", 1, nil)
	pidA, epA := initProducerID(t, cl)
	pidB, epB := initProducerID(t, cl)

	mustProduce(t, cl, "tx", txnBatch(t, pidA, epA, 0, 3, "a"), 0)   // 0-2
	mustProduce(t, cl, "tx", buildBatch(t, segment.CodecNone, 2), 3) // 3-4
	mustProduce(t, cl, "tx", txnBatch(t, pidB, epB, 0, 2, "b"), 5)   // 5-6
	mustProduce(t, cl, "tx", txnBatch(t, pidA, epA, 3, 1, "a"), 7)   // 7

	checkProducers(t, cl, map[int64]string{pidA: "e0 s3 c-1 t0", pidB: "e0 s1 c-1 t5"})

	// A non-transactional batch while A's transaction is open.
	if sp := produceRaw(t, cl, "tx", 0, idempotentBatch(t, pidA, epA, 4, 1)); sp.ErrorCode != kerr.InvalidTxnState.Code {
		t.Fatalf("plain batch inside a transaction: error %v, want INVALID_TXN_STATE", kerr.ErrorForCode(sp.ErrorCode))
	}

	fp, offs := fetchIsolation(t, cl, "tx", 0, 0, 1)
	if fp.ErrorCode != 0 || fp.HighWatermark != 8 || fp.LastStableOffset != 0 || len(offs) != 0 || fp.AbortedTransactions == nil || len(fp.AbortedTransactions) != 0 {
		t.Fatalf("read_committed with A open: error %d hw %d lso %d offsets %v aborted %v", fp.ErrorCode, fp.HighWatermark, fp.LastStableOffset, offs, fp.AbortedTransactions)
	}
	if fp, offs := fetchIsolation(t, cl, "tx", 0, 0, 0); fp.LastStableOffset != 0 || len(offs) != 8 || fp.AbortedTransactions != nil {
		t.Fatalf("read_uncommitted: lso %d offsets %v aborted %v", fp.LastStableOffset, offs, fp.AbortedTransactions)
	}
	if got := latestOffset(t, cl, "tx", 0, 1); got != 0 {
		t.Fatalf("ListOffsets read_committed latest %d, want 0", got)
	}
	if got := latestOffset(t, cl, "tx", 0, 0); got != 8 {
		t.Fatalf("ListOffsets read_uncommitted latest %d, want 8", got)
	}

	// Abort A: marker at 8; B still holds the LSO at 5.
	if code := writeMarker(t, s, "tx", 0, pidA, epA, false, 0); code != 0 {
		t.Fatalf("abort A: %v", kerr.ErrorForCode(code))
	}
	fp, offs = fetchIsolation(t, cl, "tx", 0, 0, 1)
	wantA := []string{fmt.Sprintf("%d@0", pidA)}
	if fp.LastStableOffset != 5 || !reflect.DeepEqual(offs, []int64{0, 1, 2, 3, 4}) || !reflect.DeepEqual(abortedList(fp), wantA) {
		t.Fatalf("after abort A: lso %d offsets %v aborted %v", fp.LastStableOffset, offs, abortedList(fp))
	}
	// Commit B: marker at 9, everything stable.
	if code := writeMarker(t, s, "tx", 0, pidB, epB, true, 0); code != 0 {
		t.Fatalf("commit B: %v", kerr.ErrorForCode(code))
	}
	fp, offs = fetchIsolation(t, cl, "tx", 0, 0, 1)
	if fp.LastStableOffset != 10 || fp.HighWatermark != 10 || len(offs) != 8 || !reflect.DeepEqual(abortedList(fp), wantA) {
		t.Fatalf("after commit B: hw %d lso %d offsets %v aborted %v", fp.HighWatermark, fp.LastStableOffset, offs, abortedList(fp))
	}
	// From offset 9 on no aborted transaction overlaps (A's marker is 8).
	if fp, _ := fetchIsolation(t, cl, "tx", 0, 9, 1); len(fp.AbortedTransactions) != 0 {
		t.Fatalf("from 9: aborted %v", abortedList(fp))
	}
	if got := latestOffset(t, cl, "tx", 0, 1); got != 10 {
		t.Fatalf("ListOffsets read_committed latest %d, want 10", got)
	}

	// Fencing: producer C known at epoch 1 with a marker of coordinator
	// epoch 5.
	pidC, _ := initProducerID(t, cl)
	mustProduce(t, cl, "tx", txnBatch(t, pidC, 1, 0, 1, "c"), 10)
	if code := writeMarker(t, s, "tx", 0, pidC, 0, false, 5); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("marker of an old producer epoch: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(code))
	}
	if code := writeMarker(t, s, "tx", 0, pidC, 1, true, 5); code != 0 {
		t.Fatalf("commit C: %v", kerr.ErrorForCode(code))
	}
	if code := writeMarker(t, s, "tx", 0, pidC, 1, true, 4); code != kerr.TransactionCoordinatorFenced.Code {
		t.Fatalf("marker of an old coordinator epoch: %v, want TRANSACTION_COORDINATOR_FENCED", kerr.ErrorForCode(code))
	}
	if code := writeMarker(t, s, "nope", 0, pidC, 1, true, 5); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %v", kerr.ErrorForCode(code))
	}
	if code := writeMarker(t, s, "tx", 3, pidC, 1, true, 5); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown partition: %v", kerr.ErrorForCode(code))
	}
	// Over the wire, API 27.
	resp, err := cl.Broker(0).Request(testCtx(t), markerRequest("tx", 0, pidC, 1, false, 5))
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("WriteTxnMarkers over the wire: %v", kerr.ErrorForCode(code))
	}
	checkProducers(t, cl, map[int64]string{pidA: "e0 s3 c0 t-1", pidB: "e0 s1 c0 t-1", pidC: "e1 s0 c5 t-1"})
	// Log: A 0-2, plain 3-4, B 5-6, A 7, abort A 8, commit B 9, C 10,
	// commit C 11, empty abort C 12.
	end := int64(13)

	// A franz-go read_committed consumer sees the plain, B's and C's
	// records, none of A's.
	consumer := newClient(t, s, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"tx": {0: kgo.NewOffset().AtStart()}}), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	var values []string
	ctx := testCtx(t)
	for len(values) < 5 && ctx.Err() == nil {
		fs := consumer.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { values = append(values, string(r.Value)) })
	}
	want := []string{"v0", "v1", "b0", "b1", "c0"}
	if !reflect.DeepEqual(values, want) {
		t.Fatalf("read_committed consumer got %v, want %v", values, want)
	}

	p := s.topic("tx").local(0)
	wantIndex := []segment.AbortedTxn{{ProducerID: pidA, FirstOffset: 0, LastOffset: 8, LastStableOffset: 5}}
	if got := p.txns.Entries(); !reflect.DeepEqual(got, wantIndex) {
		t.Fatalf("index %+v, want %+v", got, wantIndex)
	}

	// Restarts on the same directory: as left, without the producer
	// snapshots (a full replay), and without the index files either.
	restart := func(what string, prep func(partDir string)) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		partDir := filepath.Join(dir, segment.PartitionDirName("tx", 0))
		prep(partDir)
		s = startServer(t, map[string]string{"log.dirs": dir, "transaction.partition.verification.enable": "false"})
		cl = newClient(t, s)
		var fp kmsg.FetchResponseTopicPartition
		waitFor(t, "the partition to serve after "+what, func() bool {
			fp, _ = fetchIsolation(t, cl, "tx", 0, 0, 1)
			return fp.ErrorCode == 0 && fp.HighWatermark == end
		})
		if fp.LastStableOffset != end || !reflect.DeepEqual(abortedList(fp), wantA) {
			t.Fatalf("%s: lso %d aborted %v", what, fp.LastStableOffset, abortedList(fp))
		}
		if got := s.topic("tx").local(0).txns.Entries(); !reflect.DeepEqual(got, wantIndex) {
			t.Fatalf("%s: index %+v, want %+v", what, got, wantIndex)
		}
	}
	removeSuffix := func(suffix string) func(string) {
		return func(partDir string) {
			des, err := os.ReadDir(partDir)
			if err != nil {
				t.Fatal(err)
			}
			for _, de := range des {
				if filepath.Ext(de.Name()) == suffix {
					if err := os.Remove(filepath.Join(partDir, de.Name())); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	restart("a clean restart", func(string) {})
	restart("a restart without snapshots", removeSuffix(segment.SnapshotSuffix))
	restart("a restart without snapshots or index", func(d string) {
		removeSuffix(segment.SnapshotSuffix)(d)
		removeSuffix(segment.TxnIndexSuffix)(d)
	})
}

// TestTxnIndexFollowsLogDirMove moves a partition with an aborted
// transaction to the broker's other log directory: its .txnindex files
// go with it, new aborts are written there, and a restart loads the same
// index.
func TestTxnIndexFollowsLogDirMove(t *testing.T) {
	d1, d2 := t.TempDir(), t.TempDir()
	props := map[string]string{"log.dirs": d1 + "," + d2, "log.segment.bytes": "1024", "transaction.partition.verification.enable": "false"}
	s := startServer(t, props)
	cl := newClient(t, s)
	createTopic(t, cl, "mv", 1, nil)
	pid, ep := initProducerID(t, cl)
	var want []segment.AbortedTxn
	seq := int32(0)
	abortOne := func() {
		t.Helper()
		p := s.topic("mv").local(0)
		first := p.log.LogEndOffset()
		if sp := produceRaw(t, cl, "mv", 0, txnBatch(t, pid, ep, seq, 20, "x")); sp.ErrorCode != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(sp.ErrorCode))
		}
		seq += 20
		if code := writeMarker(t, s, "mv", 0, pid, ep, false, 0); code != 0 {
			t.Fatalf("abort: %v", kerr.ErrorForCode(code))
		}
		want = append(want, segment.AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: first + 20, LastStableOffset: first + 21})
	}
	abortOne()
	abortOne()
	from := s.topic("mv").local(0).path()
	to := d2
	if filepath.Dir(from) == filepath.Clean(d2) {
		to = d1
	}
	if codes := alterLogDir(t, cl, to, "mv", 0); codes[0] != 0 {
		t.Fatalf("AlterReplicaLogDirs: %v", kerr.ErrorForCode(codes[0]))
	}
	waitFor(t, "the replica in the other directory", func() bool {
		p := s.topic("mv").local(0)
		return p != nil && filepath.Dir(p.path()) == filepath.Clean(to)
	})
	abortOne()
	p := s.topic("mv").local(0)
	if got := p.txns.Entries(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the move: %+v, want %+v", got, want)
	}
	files := 0
	des, _ := os.ReadDir(p.path())
	for _, de := range des {
		if filepath.Ext(de.Name()) == segment.TxnIndexSuffix {
			files++
		}
	}
	if files == 0 {
		t.Fatalf("no .txnindex file in %s", p.path())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	s = startServer(t, props)
	waitFor(t, "the partition after the restart", func() bool { return s.topic("mv") != nil && s.topic("mv").local(0) != nil })
	if got := s.topic("mv").local(0).txns.Entries(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the restart: %+v, want %+v", got, want)
	}
}

// TestTxnReadCommittedLongPoll: a read_committed fetch parked behind an
// open transaction is not answered by appends that leave the LSO where it
// is (it parks again), and is answered once the commit marker moves it.
func TestTxnReadCommittedLongPoll(t *testing.T) {
	s := startServer(t, noTxnVerification)
	cl := newClient(t, s)
	createTopic(t, cl, "lp", 1, nil)
	pid, ep := initProducerID(t, cl)
	mustProduce(t, cl, "lp", txnBatch(t, pid, ep, 0, 2, "a"), 0)

	rc := dialRaw(t, s)
	req := fetchRequest("lp", 0, 0, 1<<20)
	req.IsolationLevel, req.MaxWaitMillis, req.MinBytes = 1, math.MaxInt32, 1
	rc.send(1, req)
	waitFetchesWaiting(t, s, 1)
	// A plain append wakes it; the LSO is still 0, so it is not answered
	// (an answer now would carry no records and LSO 0: checked below).
	mustProduce(t, cl, "lp", buildBatch(t, segment.CodecNone, 1), 2)
	if code := writeMarker(t, s, "lp", 0, pid, ep, true, 0); code != 0 {
		t.Fatalf("commit: %v", kerr.ErrorForCode(code))
	}
	corr, body, err := rc.readFrame()
	if err != nil || corr != 1 {
		t.Fatalf("read_committed fetch not answered after the commit: corr %d err %v", corr, err)
	}
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	decodeResponse(t, resp, body)
	fp := resp.Topics[0].Partitions[0]
	var bases []int64
	if err := segment.SplitBatches(fp.RecordBatches, func(h segment.Header, _ []byte) error { bases = append(bases, h.BaseOffset); return nil }); err != nil {
		t.Fatal(err)
	}
	if fp.LastStableOffset != 4 || len(bases) == 0 || bases[0] != 0 {
		t.Fatalf("woken fetch: lso %d, batches at %v; want lso 4 and batches from 0", fp.LastStableOffset, bases)
	}
}
