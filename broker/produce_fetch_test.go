package broker

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestProduceFetchRoundTripAllCodecs(t *testing.T) {
	s := startServer(t, nil)
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
	}{
		{"none", kgo.NoCompression()},
		{"gzip", kgo.GzipCompression()},
		{"snappy", kgo.SnappyCompression()},
		{"lz4", kgo.Lz4Compression()},
		{"zstd", kgo.ZstdCompression()},
	}
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			topic := "rt-" + c.name
			admin := newClient(t, s)
			createTopic(t, admin, topic, 3, nil)
			prod := newClient(t, s, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(c.codec),
				kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
			const n = 900
			var recs []*kgo.Record
			for i := 0; i < n; i++ {
				recs = append(recs, &kgo.Record{
					Partition: int32(i % 3),
					Key:       []byte("k" + strconv.Itoa(i)),
					Value:     bytes.Repeat([]byte{byte(i)}, 50+i%200),
					Headers:   []kgo.RecordHeader{{Key: "h", Value: []byte(strconv.Itoa(i))}},
				})
			}
			if err := prod.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			cons := newClient(t, s, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
				topic: {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart(), 2: kgo.NewOffset().AtStart()},
			}))
			got := map[int32][]*kgo.Record{}
			total := 0
			for total < n {
				fs := cons.PollFetches(testCtx(t))
				if err := fs.Err(); err != nil {
					t.Fatal(err)
				}
				fs.EachRecord(func(r *kgo.Record) {
					got[r.Partition] = append(got[r.Partition], r)
					total++
				})
			}
			for p := int32(0); p < 3; p++ {
				var want []*kgo.Record
				for _, r := range recs {
					if r.Partition == p {
						want = append(want, r)
					}
				}
				if len(got[p]) != len(want) {
					t.Fatalf("partition %d: got %d records, want %d", p, len(got[p]), len(want))
				}
				for i := range want {
					g, w := got[p][i], want[i]
					if g.Offset != int64(i) || !bytes.Equal(g.Key, w.Key) || !bytes.Equal(g.Value, w.Value) ||
						len(g.Headers) != 1 || string(g.Headers[0].Value) != string(w.Headers[0].Value) {
						t.Fatalf("partition %d #%d: got offset %d key %q, want offset %d key %q", p, i, g.Offset, g.Key, i, w.Key)
					}
				}
			}
		})
	}
}

func TestFetchInsideBatchReturnsWholeBatch(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	createTopic(t, cl, "whole", 1, nil)
	for i := 0; i < 3; i++ {
		if sp := produceRaw(t, cl, "whole", 0, buildBatch(t, segment.CodecNone, 10)); sp.ErrorCode != 0 || sp.BaseOffset != int64(i*10) {
			t.Fatalf("#%d: produce: error %d base %d, want 0 and %d", i, sp.ErrorCode, sp.BaseOffset, i*10)
		}
	}
	for _, tc := range []struct {
		offset   int64
		wantBase int64
	}{{0, 0}, {5, 0}, {9, 0}, {10, 10}, {17, 10}, {29, 20}} {
		fp := fetchRaw(t, cl, "whole", 0, tc.offset, 1) // 1 byte: still at least one batch
		if fp.ErrorCode != 0 {
			t.Fatalf("offset %d: error %d", tc.offset, fp.ErrorCode)
		}
		h, err := segment.ValidateBatch(fp.RecordBatches)
		if err != nil {
			t.Fatalf("offset %d: %v", tc.offset, err)
		}
		if h.BaseOffset != tc.wantBase || h.Size() != len(fp.RecordBatches) {
			t.Fatalf("offset %d: got batch at %d (%d of %d bytes), want one whole batch at %d", tc.offset, h.BaseOffset, h.Size(), len(fp.RecordBatches), tc.wantBase)
		}
		if fp.HighWatermark != 30 || fp.LastStableOffset != 30 || fp.LogStartOffset != 0 {
			t.Fatalf("offset %d: hw %d lso %d log start %d, want 30 30 0", tc.offset, fp.HighWatermark, fp.LastStableOffset, fp.LogStartOffset)
		}
	}
	// A large budget returns all three batches, whole.
	fp := fetchRaw(t, cl, "whole", 0, 3, 1<<20)
	var bases []int64
	if err := segment.SplitBatches(fp.RecordBatches, func(h segment.Header, _ []byte) error {
		bases = append(bases, h.BaseOffset)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(bases) != "[0 10 20]" {
		t.Fatalf("got batches %v, want [0 10 20]", bases)
	}
	// At the end: nothing, no error.
	if fp := fetchRaw(t, cl, "whole", 0, 30, 1<<20); fp.ErrorCode != 0 || len(fp.RecordBatches) != 0 {
		t.Fatalf("at log end: error %d, %d bytes", fp.ErrorCode, len(fp.RecordBatches))
	}
}

func TestFetchOffsetOutOfRange(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	createTopic(t, cl, "oor", 1, nil)
	produceRaw(t, cl, "oor", 0, buildBatch(t, segment.CodecNone, 5))
	for _, off := range []int64{6, 1000, -5} {
		if fp := fetchRaw(t, cl, "oor", 0, off, 1<<20); fp.ErrorCode != kerr.OffsetOutOfRange.Code {
			t.Fatalf("offset %d: got error %d, want OFFSET_OUT_OF_RANGE", off, fp.ErrorCode)
		}
	}
	if fp := fetchRaw(t, cl, "nope", 0, 0, 1<<20); fp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: got error %d, want UNKNOWN_TOPIC_OR_PARTITION", fp.ErrorCode)
	}
}

func TestFetchLeaderEpochChecks(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	createTopic(t, cl, "epochs", 1, nil)
	for _, tc := range []struct {
		epoch int32
		want  int16
	}{{-1, 0}, {0, 0}, {1, kerr.UnknownLeaderEpoch.Code}} {
		req := kmsg.NewPtrFetchRequest()
		req.MaxBytes = 1 << 20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "epochs"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = tc.epoch, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := fetchV12{req}.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != tc.want {
			t.Fatalf("epoch %d: got error %d, want %d", tc.epoch, got, tc.want)
		}
	}
}

func TestFetchLongPollWokenByAppend(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	createTopic(t, cl, "poll", 1, nil)
	produceRaw(t, cl, "poll", 0, buildBatch(t, segment.CodecNone, 1))

	// Nothing new: the fetch waits its whole MaxWait, timed here from
	// before it was sent.
	rc := dialRaw(t, s)
	req := fetchRequest("poll", 0, 1, 1<<20)
	req.MaxWaitMillis, req.MinBytes = 300, 1
	start := time.Now()
	fp := rc.request(1, req).(*kmsg.FetchResponse).Topics[0].Partitions[0]
	if el := time.Since(start); el < 300*time.Millisecond || len(fp.RecordBatches) != 0 {
		t.Fatalf("empty long poll returned after %v with %d bytes, want at least 300ms and none", el, len(fp.RecordBatches))
	}

	// An append wakes a waiting fetch. Its MaxWait outlasts the test, so
	// nothing else can answer it; while it waits inside its handler it
	// has not been answered.
	req.MaxWaitMillis = math.MaxInt32
	rc.send(2, req)
	waitFetchesWaiting(t, s, 1)
	produceRaw(t, cl, "poll", 0, buildBatch(t, segment.CodecNone, 2))
	corr, body, err := rc.readFrame()
	if err != nil || corr != 2 {
		t.Fatalf("fetch not woken by the append: corr %d err %v", corr, err)
	}
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	decodeResponse(t, resp, body)
	h, err := segment.ValidateBatch(resp.Topics[0].Partitions[0].RecordBatches)
	if err != nil || h.BaseOffset != 1 {
		t.Fatalf("woken fetch: batch at %d, %v; want at 1", h.BaseOffset, err)
	}
}

func TestFetchMaxBytes(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	createTopic(t, cl, "mb", 2, nil)
	batch := buildBatch(t, segment.CodecNone, 20)
	size := int32(len(batch))
	for i := 0; i < 4; i++ {
		produceRaw(t, cl, "mb", 0, buildBatch(t, segment.CodecNone, 20))
		produceRaw(t, cl, "mb", 1, buildBatch(t, segment.CodecNone, 20))
	}
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes = size*2 + size/2 // room for 2.5 batches in the whole response
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "mb"
	for p := int32(0); p < 2; p++ {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes = p, size+size/2 // 1.5 batches per partition
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := fetchV12{req}.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range []int{1, 1} {
		n := 0
		_ = segment.SplitBatches(resp.Topics[0].Partitions[p].RecordBatches, func(segment.Header, []byte) error { n++; return nil })
		if n != want {
			t.Fatalf("partition %d: got %d batches, want %d", p, n, want)
		}
	}
	// The first partition with data gets a batch even above the limits.
	fp := fetchRaw(t, cl, "mb", 0, 0, 1)
	if len(fp.RecordBatches) != int(size) {
		t.Fatalf("1-byte fetch: got %d bytes, want one batch of %d", len(fp.RecordBatches), size)
	}
}

func TestFetchSessionsDeclined(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	createTopic(t, cl, "sess", 1, nil)
	req := kmsg.NewPtrFetchRequest()
	req.SessionID, req.SessionEpoch = 0, 0 // ask for a session
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "sess"
	rt.Partitions = append(rt.Partitions, kmsg.NewFetchRequestTopicPartition())
	req.Topics = append(req.Topics, rt)
	resp, err := fetchV12{req}.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.SessionID != 0 || resp.ErrorCode != 0 || resp.ThrottleMillis != 0 || len(resp.Topics) != 1 {
		t.Fatalf("got session %d error %d throttle %d topics %d; want 0 0 0 1", resp.SessionID, resp.ErrorCode, resp.ThrottleMillis, len(resp.Topics))
	}
	req.SessionID, req.SessionEpoch = 7, 3 // an incremental fetch on a session we never gave
	resp, err = fetchV12{req}.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("incremental fetch: got error %d, want FETCH_SESSION_ID_NOT_FOUND", resp.ErrorCode)
	}
}

func TestZeroCopyCounter(t *testing.T) {
	for _, zc := range []bool{true, false} {
		t.Run(fmt.Sprint("zerocopy=", zc), func(t *testing.T) {
			s := startServer(t, map[string]string{"strata.fetch.zero.copy": strconv.FormatBool(zc)})
			cl := newClient(t, s)
			createTopic(t, cl, "zc", 1, nil)
			batch := buildBatch(t, segment.CodecNone, 100)
			produceRaw(t, cl, "zc", 0, batch)
			before := s.Stats()
			rc := dialRaw(t, s)
			fp := rc.fetch(1, "zc", 0, 0, 1<<20)
			if fp.ErrorCode != 0 || len(fp.RecordBatches) != len(batch) {
				t.Fatalf("fetch: error %d, %d bytes, want %d", fp.ErrorCode, len(fp.RecordBatches), len(batch))
			}
			rc.barrier() // the bytes are counted once sent
			after := s.Stats()
			zcBytes := after.FetchZeroCopyBytes - before.FetchZeroCopyBytes
			cpBytes := after.FetchCopiedBytes - before.FetchCopiedBytes
			if zc && (zcBytes != int64(len(batch)) || cpBytes != 0) {
				t.Fatalf("zero copy on: sendfile %d bytes, copied %d; want %d and 0", zcBytes, cpBytes, len(batch))
			}
			if !zc && (cpBytes != int64(len(batch)) || zcBytes != 0) {
				t.Fatalf("zero copy off: sendfile %d bytes, copied %d; want 0 and %d", zcBytes, cpBytes, len(batch))
			}
		})
	}
}

func TestProduceValidation(t *testing.T) {
	s := startServer(t, map[string]string{"message.max.bytes": "4000"})
	cl := newClient(t, s)
	createTopic(t, cl, "val", 1, nil)
	good := buildBatch(t, segment.CodecNone, 3)

	crcFlipped := append([]byte(nil), good...)
	crcFlipped[len(crcFlipped)-1] ^= 0xff
	nonZeroBase := append([]byte(nil), good...)
	segment.SetBaseOffset(nonZeroBase, 5)
	control, err := segment.BuildBatch(segment.BatchSpec{Control: true, Records: []segment.Record{{Key: []byte{0, 0, 0, 0}, Value: []byte{0, 0, 0, 0, 0, 0}}}})
	if err != nil {
		t.Fatal(err)
	}
	txn, err := segment.BuildBatch(segment.BatchSpec{Transactional: true, Records: []segment.Record{{Value: []byte("x")}}})
	if err != nil {
		t.Fatal(err)
	}
	txnPid, err := segment.BuildBatch(segment.BatchSpec{Idempotent: true, Transactional: true, ProducerID: 7, Records: []segment.Record{{Value: []byte("x")}}})
	if err != nil {
		t.Fatal(err)
	}
	zstd := buildBatch(t, segment.CodecZstd, 3)
	big, err := segment.BuildBatch(segment.BatchSpec{Records: []segment.Record{{Value: bytes.Repeat([]byte("x"), 5000)}}})
	if err != nil {
		t.Fatal(err)
	}
	badMagic := append([]byte(nil), good...)
	badMagic[16] = 1
	for i, tc := range []struct {
		name    string
		batch   []byte
		version int16
		want    *kerr.Error
	}{
		{"crc flipped", crcFlipped, 9, kerr.CorruptMessage},
		{"truncated", good[:len(good)-3], 9, kerr.CorruptMessage},
		{"two batches", append(append([]byte(nil), good...), good...), 9, kerr.InvalidRecord},
		{"base offset 5", nonZeroBase, 9, kerr.InvalidRecord},
		{"control batch", control, 9, kerr.InvalidRecord},
		{"transactional without a transactional id", txn, 9, kerr.TransactionalIDAuthorizationFailed},
		{"transactional producer batch without a transactional id", txnPid, 11, kerr.TransactionalIDAuthorizationFailed},
		{"zstd at v6", zstd, 6, kerr.UnsupportedCompressionType},
		{"too large", big, 9, kerr.MessageTooLarge},
		{"magic 1", badMagic, 9, kerr.InvalidRecord},
		{"empty", nil, 9, kerr.InvalidRecord},
	} {
		sp := produceVersion(t, s, "val", 0, tc.batch, tc.version)
		if sp.ErrorCode != tc.want.Code {
			t.Fatalf("#%d %s: got error %v, want %s", i, tc.name, kerr.ErrorForCode(sp.ErrorCode), tc.want.Message)
		}
		if tc.version >= 8 && (sp.ErrorMessage == nil || *sp.ErrorMessage == "") {
			t.Fatalf("#%d %s: no error message", i, tc.name)
		}
	}
	// Nothing was stored; a good batch and zstd at v7 still go through.
	if sp := produceRaw(t, cl, "val", 0, good); sp.ErrorCode != 0 || sp.BaseOffset != 0 {
		t.Fatalf("good batch after bad ones: error %d base %d, want 0 0", sp.ErrorCode, sp.BaseOffset)
	}
	if sp := produceVersion(t, s, "val", 0, zstd, 7); sp.ErrorCode != 0 || sp.BaseOffset != 3 {
		t.Fatalf("zstd at v7: error %d base %d, want 0 3", sp.ErrorCode, sp.BaseOffset)
	}
	// Idempotent (non-transactional) batches are stored as plain appends.
	idem, err := segment.BuildBatch(segment.BatchSpec{Idempotent: true, ProducerID: 5, ProducerEpoch: 0, BaseSequence: 0, Records: []segment.Record{{Value: []byte("i")}}})
	if err != nil {
		t.Fatal(err)
	}
	if sp := produceRaw(t, cl, "val", 0, idem); sp.ErrorCode != 0 || sp.BaseOffset != 6 {
		t.Fatalf("idempotent batch: error %d base %d, want 0 6", sp.ErrorCode, sp.BaseOffset)
	}
	// Unknown partition of a known topic.
	if sp := produceRaw(t, cl, "val", 9, good); sp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown partition: got %d", sp.ErrorCode)
	}
}

func TestProduceUnknownTopicWithoutAutoCreate(t *testing.T) {
	s := startServer(t, map[string]string{"auto.create.topics.enable": "false"})
	cl := newClient(t, s)
	sp := produceRaw(t, cl, "missing", 0, buildBatch(t, segment.CodecNone, 1))
	if sp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("got error %d, want UNKNOWN_TOPIC_OR_PARTITION", sp.ErrorCode)
	}
	if s.topic("missing") != nil {
		t.Fatal("topic was created")
	}
	if _, err := os.Stat(filepath.Join(s.cfg.MetaDir(), "missing-0")); err == nil {
		t.Fatal("partition directory exists")
	}
}

func TestProduceAutoCreates(t *testing.T) {
	s := startServer(t, map[string]string{"num.partitions": "2"})
	cl := newClient(t, s)
	sp := produceRaw(t, cl, "auto", 1, buildBatch(t, segment.CodecNone, 1))
	if sp.ErrorCode != 0 {
		t.Fatalf("got error %d", sp.ErrorCode)
	}
	if tp := s.topic("auto"); tp == nil || len(tp.parts) != 2 {
		t.Fatalf("auto-created topic: %+v", tp)
	}
}

func TestProduceAcksAndLogAppendTime(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	createTopic(t, cl, "lat", 1, map[string]string{"message.timestamp.type": "LogAppendTime"})
	createTopic(t, cl, "ct", 1, map[string]string{"min.insync.replicas": "2"})
	before := time.Now().UnixMilli()
	sp := produceRaw(t, cl, "lat", 0, buildBatch(t, segment.CodecNone, 2))
	if sp.ErrorCode != 0 || sp.LogAppendTime < before || sp.LogAppendTime > time.Now().UnixMilli() {
		t.Fatalf("LogAppendTime topic: error %d, log append time %d (sent at %d)", sp.ErrorCode, sp.LogAppendTime, before)
	}
	fp := fetchRaw(t, cl, "lat", 0, 0, 1<<20)
	h, err := segment.ValidateBatch(fp.RecordBatches)
	if err != nil || !h.LogAppendTime() || h.MaxTimestamp != sp.LogAppendTime {
		t.Fatalf("stored batch: log append time %v, max timestamp %d, err %v; want true, %d", h.LogAppendTime(), h.MaxTimestamp, err, sp.LogAppendTime)
	}
	// min.insync.replicas 2 on one node: acks=all fails, acks=1 works.
	if sp := produceRaw(t, cl, "ct", 0, buildBatch(t, segment.CodecNone, 1)); sp.ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all with min.insync.replicas=2: got %d, want NOT_ENOUGH_REPLICAS", sp.ErrorCode)
	}
	// kgo sends its own acks setting, so these go over a raw connection.
	rc := dialRaw(t, s)
	for i, tc := range []struct {
		acks int16
		want int16
	}{{1, 0}, {2, kerr.InvalidRequiredAcks.Code}, {-2, kerr.InvalidRequiredAcks.Code}} {
		req := produceRequest("ct", 0, buildBatch(t, segment.CodecNone, 1))
		req.Acks = tc.acks
		rc.send(int32(i), req)
		_, body, err := rc.readFrame()
		if err != nil {
			t.Fatal(err)
		}
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		decodeResponse(t, resp, body)
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != tc.want {
			t.Fatalf("acks=%d: got %d, want %d", tc.acks, got, tc.want)
		}
	}
	if sp.CurrentLeader.LeaderID != -1 {
		t.Fatalf("current leader tag set: %+v", sp.CurrentLeader)
	}
}

func TestAcksZeroGetsNoResponse(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	createTopic(t, cl, "a0", 1, nil)
	rc := dialRaw(t, s)
	req := kmsg.NewPtrProduceRequest()
	req.Version = 7
	req.Acks = 0
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "a0"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = buildBatch(t, segment.CodecNone, 4)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rc.send(1, req)
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 0
	rc.send(2, av)
	corr, _, err := rc.readFrame()
	if err != nil {
		t.Fatal(err)
	}
	if corr != 2 {
		t.Fatalf("first response has correlation id %d, want 2 (acks=0 gets none)", corr)
	}
	if hw := s.topic("a0").parts[0].log.HighWatermark(); hw != 4 {
		t.Fatalf("high watermark %d, want 4", hw)
	}
	// A failing acks=0 produce closes the connection.
	rp.Records = rp.Records[:len(rp.Records)-1]
	req.Topics[0].Partitions[0] = rp
	rc.send(3, req)
	rc.expectClosed()
}

func TestConcurrentProducersAndConsumers(t *testing.T) {
	s := startServer(t, nil)
	admin := newClient(t, s)
	createTopic(t, admin, "conc", 4, nil)
	const perProducer = 500
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			cl := newClient(t, s, kgo.DefaultProduceTopic("conc"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			for i := 0; i < perProducer; i++ {
				cl.Produce(testCtx(t), &kgo.Record{Partition: int32(w), Value: []byte(strconv.Itoa(i))}, func(_ *kgo.Record, err error) {
					if err != nil {
						t.Error(err)
					}
				})
			}
			if err := cl.Flush(testCtx(t)); err != nil {
				t.Error(err)
			}
		}(w)
	}
	wg.Wait()
	cons := newClient(t, s, kgo.ConsumeTopics("conc"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	next := map[int32]int{}
	for n := 0; n < 4*perProducer; {
		fs := cons.PollFetches(testCtx(t))
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) != strconv.Itoa(next[r.Partition]) {
				t.Fatalf("partition %d offset %d: got %q, want %d", r.Partition, r.Offset, r.Value, next[r.Partition])
			}
			next[r.Partition]++
			n++
		})
	}
}
