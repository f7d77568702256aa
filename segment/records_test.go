package segment

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var allCodecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4, CodecZstd}

// testRecords is what the real-client tests produce: null, empty and binary
// keys and values, null and empty header values, negative timestamp deltas,
// and values large enough to span several snappy and lz4 blocks.
func testRecords() []Record {
	const base = 1_700_000_000_000
	recs := []Record{
		{Timestamp: base, Key: []byte("k0"), Value: []byte("v0"), Headers: []RecordHeader{{Key: "h", Value: []byte("x")}}},
		{Timestamp: base + 1, Key: nil, Value: []byte{}},
		{Timestamp: base - 5000, Key: []byte{0, 0xff, 1}, Value: nil, Headers: []RecordHeader{{Key: "nul", Value: nil}, {Key: "ümlaut", Value: []byte{}}}},
		{Timestamp: base + 3, Key: []byte{}, Value: bytes.Repeat([]byte("abcdefgh"), 20000)},
	}
	for i := 4; i < 40; i++ {
		v := make([]byte, 1000+i*97)
		for j := range v {
			v[j] = byte(j*i + j/7)
		}
		recs = append(recs, Record{
			Timestamp: base + int64(i)*11,
			Key:       fmt.Appendf(nil, "key-%d", i),
			Value:     v,
			Headers:   []RecordHeader{{Key: "i", Value: fmt.Appendf(nil, "%d", i)}, {Key: "empty", Value: []byte{}}},
		})
	}
	return recs
}

// newFakeCluster starts an in-process Kafka (kfake) with one single-partition
// topic "t" and records the batches producers send.
func newFakeCluster(t *testing.T) (c *kfake.Cluster, produced func() [][]byte) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var (
		mu      sync.Mutex
		batches [][]byte
	)
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, tp := range req.(*kmsg.ProduceRequest).Topics {
			for _, p := range tp.Partitions {
				batches = append(batches, bytes.Clone(p.Records))
			}
		}
		return nil, nil, false // observe only
	})
	return c, func() [][]byte {
		mu.Lock()
		defer mu.Unlock()
		return batches
	}
}

// fetchStored fetches partition t/0 from offset 0 with a raw Fetch request
// and returns the record batches as the broker stored them.
func fetchStored(t *testing.T, c *kfake.Cluster) []byte {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard, not a speed bound
	defer cancel()

	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("t")
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}

	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxBytes = 64 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "t"
	rt.TopicID = mresp.Topics[0].TopicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = 0
	rp.FetchOffset = 0
	rp.PartitionMaxBytes = 64 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch answered %d topics", len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("fetch error code %d", p.ErrorCode)
	}
	return p.RecordBatches
}

func produceFranz(t *testing.T, c *kfake.Cluster, codec Codec, recs []Record) {
	t.Helper()
	cc := map[Codec]kgo.CompressionCodec{
		CodecNone:   kgo.NoCompression(),
		CodecGzip:   kgo.GzipCompression(),
		CodecSnappy: kgo.SnappyCompression(),
		CodecLZ4:    kgo.Lz4Compression(),
		CodecZstd:   kgo.ZstdCompression(),
	}[codec]
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.DefaultProduceTopic("t"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(cc),
		kgo.ProducerLinger(50*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	krs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		kr := &kgo.Record{Key: r.Key, Value: r.Value, Timestamp: time.UnixMilli(r.Timestamp)}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		krs[i] = kr
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard, not a speed bound
	defer cancel()
	if err := cl.ProduceSync(ctx, krs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func produceSarama(t *testing.T, c *kfake.Cluster, codec Codec, recs []Record) {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Flush.Messages = len(recs)
	cfg.Producer.Flush.Frequency = 50 * time.Millisecond
	cfg.Producer.Compression = map[Codec]sarama.CompressionCodec{
		CodecNone:   sarama.CompressionNone,
		CodecGzip:   sarama.CompressionGZIP,
		CodecSnappy: sarama.CompressionSnappy,
		CodecLZ4:    sarama.CompressionLZ4,
		CodecZstd:   sarama.CompressionZSTD,
	}[codec]
	p, err := sarama.NewSyncProducer(c.ListenAddrs(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	msgs := make([]*sarama.ProducerMessage, len(recs))
	for i, r := range recs {
		m := &sarama.ProducerMessage{Topic: "t", Partition: 0, Timestamp: time.UnixMilli(r.Timestamp)}
		if r.Key != nil {
			m.Key = sarama.ByteEncoder(r.Key)
		}
		if r.Value != nil {
			m.Value = sarama.ByteEncoder(r.Value)
		}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value})
		}
		msgs[i] = m
	}
	if err := p.SendMessages(msgs); err != nil {
		t.Fatal(err)
	}
}

// decodeAll decodes concatenated batches, checking each is intact and uses
// codec, and returns their records in order.
func decodeAll(t *testing.T, buf []byte, codec Codec) []Record {
	t.Helper()
	var all []Record
	err := SplitBatches(buf, func(h Header, batch []byte) error {
		if h.Compression() != codec {
			return fmt.Errorf("batch at %d uses %s, want %s", h.BaseOffset, h.Compression(), codec)
		}
		recs, err := Records(batch)
		if err != nil {
			return err
		}
		if len(recs) != int(h.RecordCount) {
			return fmt.Errorf("batch at %d: %d records, header says %d", h.BaseOffset, len(recs), h.RecordCount)
		}
		if len(recs) > 0 && (recs[0].Offset != h.BaseOffset || recs[len(recs)-1].Offset != h.LastOffset()) {
			return fmt.Errorf("batch %d..%d: records span %d..%d", h.BaseOffset, h.LastOffset(), recs[0].Offset, recs[len(recs)-1].Offset)
		}
		maxTS := int64(-1)
		for _, r := range recs {
			maxTS = max(maxTS, r.Timestamp)
		}
		if maxTS != h.MaxTimestamp {
			return fmt.Errorf("batch at %d: max timestamp %d, records' max %d", h.BaseOffset, h.MaxTimestamp, maxTS)
		}
		all = append(all, recs...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// checkRecords compares decoded records with what was produced. Offsets
// are checked as consecutive from firstOffset when it is >= 0.
func checkRecords(t *testing.T, got, want []Record, firstOffset int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if err := sameRecord(got[i], want[i]); err != nil {
			t.Errorf("#%d: %v", i, err)
		}
		if firstOffset >= 0 && got[i].Offset != firstOffset+int64(i) {
			t.Errorf("#%d: got offset %d, want %d", i, got[i].Offset, firstOffset+int64(i))
		}
	}
}

// sameRecord compares timestamps, keys, values and headers, telling null
// from empty.
func sameRecord(got, want Record) error {
	eq := func(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }
	switch {
	case got.Timestamp != want.Timestamp:
		return fmt.Errorf("got timestamp %d, want %d", got.Timestamp, want.Timestamp)
	case !eq(got.Key, want.Key):
		return fmt.Errorf("got key %q (nil %v), want %q (nil %v)", got.Key, got.Key == nil, want.Key, want.Key == nil)
	case !eq(got.Value, want.Value):
		return fmt.Errorf("got value of %d bytes (nil %v), want %d (nil %v)", len(got.Value), got.Value == nil, len(want.Value), want.Value == nil)
	case len(got.Headers) != len(want.Headers):
		return fmt.Errorf("got %d headers, want %d", len(got.Headers), len(want.Headers))
	}
	for j := range want.Headers {
		g, w := got.Headers[j], want.Headers[j]
		if g.Key != w.Key || !eq(g.Value, w.Value) {
			return fmt.Errorf("header %d: got %q=%q (nil %v), want %q=%q (nil %v)", j, g.Key, g.Value, g.Value == nil, w.Key, w.Value, w.Value == nil)
		}
	}
	return nil
}

// TestRecordsFromRealClients decodes batches written by franz-go and sarama
// in every codec, both as the producer sent them and as a broker (kfake)
// stored and served them.
func TestRecordsFromRealClients(t *testing.T) {
	clients := []struct {
		name    string
		produce func(*testing.T, *kfake.Cluster, Codec, []Record)
	}{
		{"franz-go", produceFranz},
		{"sarama", produceSarama},
	}
	for _, cl := range clients {
		for _, codec := range allCodecs {
			t.Run(cl.name+"/"+codec.String(), func(t *testing.T) {
				t.Parallel()
				c, produced := newFakeCluster(t)
				want := testRecords()
				cl.produce(t, c, codec, want)

				var sent []byte
				for _, b := range produced() {
					sent = append(sent, b...)
					if codec == CodecSnappy {
						t.Logf("%s snappy framing: xerial=%v", cl.name, bytes.HasPrefix(b[HeaderSize:], xerialMagic))
					}
				}
				checkRecords(t, decodeAll(t, sent, codec), want, -1)
				checkRecords(t, decodeAll(t, fetchStored(t, c), codec), want, 0)
			})
		}
	}
}

func TestRecordsLogAppendTime(t *testing.T) {
	want := testRecords()[:5]
	for _, codec := range allCodecs {
		b, err := BuildBatch(BatchSpec{Codec: codec, Records: want})
		if err != nil {
			t.Fatal(err)
		}
		const ts = 1_800_000_000_000
		SetLogAppendTime(b, ts)
		got, err := Records(b)
		if err != nil {
			t.Fatalf("%s: %v", codec, err)
		}
		for i, r := range got {
			if r.Timestamp != ts {
				t.Errorf("%s #%d: got timestamp %d, want %d", codec, i, r.Timestamp, ts)
			}
		}
	}
}

func TestBuildBatchRoundTrip(t *testing.T) {
	want := testRecords()
	gaps := []Record{
		{Offset: 100, Timestamp: 5, Value: []byte("a")},
		{Offset: 103, Timestamp: 4, Value: []byte("b")},
		{Offset: 110, Timestamp: 9, Value: []byte("c")},
	}
	specs := []BatchSpec{
		{BaseOffset: 42, PartitionLeaderEpoch: 7, Records: want},
		{BaseOffset: 100, KeepOffsets: true, LastOffsetDelta: 15, Records: gaps},
		{BaseOffset: 9, Idempotent: true, ProducerID: 77, ProducerEpoch: 3, BaseSequence: 1000, Transactional: true, Records: want[:2]},
		{BaseOffset: 1, KeepOffsets: true, LastOffsetDelta: 4}, // all records compacted away
	}
	for i, spec := range specs {
		for _, codec := range allCodecs {
			spec.Codec = codec
			b, err := BuildBatch(spec)
			if err != nil {
				t.Fatalf("#%d %s: %v", i, codec, err)
			}
			h, err := ValidateBatch(b)
			if err != nil {
				t.Fatalf("#%d %s: %v", i, codec, err)
			}
			if h.Size() != len(b) || h.BaseOffset != spec.BaseOffset || h.PartitionLeaderEpoch != spec.PartitionLeaderEpoch || h.Compression() != codec || h.Transactional() != spec.Transactional {
				t.Errorf("#%d %s: header %+v does not match spec", i, codec, h)
			}
			if spec.Idempotent && (h.ProducerID != spec.ProducerID || h.ProducerEpoch != spec.ProducerEpoch || h.BaseSequence != spec.BaseSequence) {
				t.Errorf("#%d %s: got producer %d/%d/%d, want %d/%d/%d", i, codec, h.ProducerID, h.ProducerEpoch, h.BaseSequence, spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence)
			}
			if !spec.Idempotent && (h.ProducerID != -1 || h.ProducerEpoch != -1 || h.BaseSequence != -1) {
				t.Errorf("#%d %s: got producer %d/%d/%d, want -1/-1/-1", i, codec, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
			}
			got, err := Records(b)
			if err != nil {
				t.Fatalf("#%d %s: %v", i, codec, err)
			}
			if spec.KeepOffsets {
				if h.LastOffsetDelta != max(spec.LastOffsetDelta, int32(len(spec.Records))-1) {
					t.Errorf("#%d %s: got last offset delta %d, want %d", i, codec, h.LastOffsetDelta, spec.LastOffsetDelta)
				}
				for j := range got {
					if got[j].Offset != spec.Records[j].Offset {
						t.Errorf("#%d %s record %d: got offset %d, want %d", i, codec, j, got[j].Offset, spec.Records[j].Offset)
					}
				}
				checkRecords(t, got, spec.Records, -1)
			} else {
				checkRecords(t, got, spec.Records, spec.BaseOffset)
			}
		}
	}
}

func TestBuildBatchRejectsBadOffsets(t *testing.T) {
	tests := [][]int64{
		{5, 5},       // not increasing
		{4},          // below the base offset
		{5, 1 << 40}, // delta past int32
	}
	for i, offs := range tests {
		var recs []Record
		for _, o := range offs {
			recs = append(recs, Record{Offset: o})
		}
		if _, err := BuildBatch(BatchSpec{BaseOffset: 5, KeepOffsets: true, Records: recs}); err == nil {
			t.Errorf("#%d: got nil error for offsets %v, want one", i, offs)
		}
	}
}

// recordsBatch wraps a hand-made records section in a valid batch header.
func recordsBatch(count, lastDelta int32, records []byte) []byte {
	b := make([]byte, HeaderSize, HeaderSize+len(records))
	binary.BigEndian.PutUint32(b[offBatchLength:], uint32(HeaderSize-LogOverhead+len(records)))
	b[offMagic] = Magic
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(lastDelta))
	binary.BigEndian.PutUint64(b[offProducerID:], ^uint64(0))
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(count))
	b = append(b, records...)
	binary.BigEndian.PutUint32(b[offCRC:], crc32c(b[offAttributes:]))
	return b
}

// rawRecord encodes one record field by field; each field is a varint
// unless given as []byte (appended raw).
func rawRecord(fields ...any) []byte {
	var body []byte
	for _, f := range fields {
		switch v := f.(type) {
		case int:
			body = binary.AppendVarint(body, int64(v))
		case []byte:
			body = append(body, v...)
		}
	}
	return append(binary.AppendVarint(nil, int64(len(body))), body...)
}

func TestRecordsErrors(t *testing.T) {
	attrs := []byte{0}
	good := rawRecord(attrs, 0, 0, 1, []byte("k"), 1, []byte("v"), 0)
	good1 := rawRecord(attrs, 0, 1, -1, -1, 0)
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	tests := []struct {
		name  string
		batch []byte
		want  error
	}{
		{"ok", recordsBatch(2, 1, cat(good, good1)), nil},
		{"fewer records than count", recordsBatch(2, 1, good), ErrRecordCount},
		{"bytes after the last record", recordsBatch(1, 0, cat(good, []byte{0})), ErrRecordCount},
		{"record length past the end", recordsBatch(1, 0, good[:len(good)-1]), ErrBadRecord},
		{"bad length varint", recordsBatch(1, 0, bytes.Repeat([]byte{0xff}, 11)), ErrBadRecord},
		{"negative record length", recordsBatch(1, 0, binary.AppendVarint(nil, -3)), ErrBadRecord},
		{"empty record", recordsBatch(1, 0, rawRecord()), ErrBadRecord},
		{"key longer than record", recordsBatch(1, 0, rawRecord(attrs, 0, 0, 5, []byte("k"))), ErrBadRecord},
		{"key length below -1", recordsBatch(1, 0, rawRecord(attrs, 0, 0, -2, -1, 0)), ErrBadRecord},
		{"fields shorter than length", recordsBatch(1, 0, rawRecord(attrs, 0, 0, -1, -1, 0, []byte{9})), ErrBadRecord},
		{"fields longer than length", recordsBatch(1, 0, rawRecord(attrs, 0, 0, -1, -1)), ErrBadRecord},
		{"offset delta past last", recordsBatch(1, 0, rawRecord(attrs, 0, 1, -1, -1, 0)), ErrBadRecord},
		{"offset delta repeats", recordsBatch(2, 1, cat(good, good)), ErrBadRecord},
		{"negative header count", recordsBatch(1, 0, rawRecord(attrs, 0, 0, -1, -1, -1)), ErrBadRecord},
		{"huge header count", recordsBatch(1, 0, rawRecord(attrs, 0, 0, -1, -1, 1<<30)), ErrBadRecord},
		{"null header key", recordsBatch(1, 0, rawRecord(attrs, 0, 0, -1, -1, 1, -1, -1)), ErrBadRecord},
		{"header value past the end", recordsBatch(1, 0, rawRecord(attrs, 0, 0, -1, -1, 1, 1, []byte("h"), 4)), ErrBadRecord},
		{"bad crc", func() []byte { b := recordsBatch(1, 0, good); b[len(b)-1] ^= 1; return b }(), ErrCRCMismatch},
		{"two batches", cat(recordsBatch(1, 0, good), recordsBatch(1, 0, good)), ErrBadLength},
		{"garbage gzip", func() []byte {
			b := recordsBatch(1, 0, good)
			b[offAttributes+1] = byte(CodecGzip)
			binary.BigEndian.PutUint32(b[offCRC:], crc32c(b[offAttributes:]))
			return b
		}(), ErrDecompress},
	}
	for i, tt := range tests {
		_, err := Records(tt.batch)
		if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("#%d %s: got %v, want %v", i, tt.name, err, tt.want)
		}
		if err != nil && !IsCorrupt(err) {
			t.Errorf("#%d %s: IsCorrupt(%v) = false", i, tt.name, err)
		}
	}
}

func TestRecordIterStopsAtError(t *testing.T) {
	b := recordsBatch(2, 1, rawRecord([]byte{0}, 0, 0, -1, -1, 0))
	it, err := NewRecordIter(b, DefaultMaxDecompressed)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := it.Next(); !ok || err != nil {
		t.Fatalf("first record: got ok %v, err %v", ok, err)
	}
	_, ok, err1 := it.Next()
	_, _, err2 := it.Next()
	if ok || !errors.Is(err1, ErrRecordCount) || err2 != err1 {
		t.Errorf("got ok %v, errors %v then %v; want ErrRecordCount twice", ok, err1, err2)
	}
}
