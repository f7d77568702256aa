package broker

import (
	"bytes"
	"fmt"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/segment"
)

// storedBatches fetches topic/0 from offset 0 and returns its batches.
func storedBatches(t *testing.T, rc *rawConn, corr *int32, topic string) (hs []segment.Header, recs []segment.Record) {
	t.Helper()
	*corr++
	fp := rc.fetch(*corr, topic, 0, 0, 1<<20)
	if fp.ErrorCode != 0 {
		t.Fatalf("fetch %s: %s", topic, kerr.ErrorForCode(fp.ErrorCode))
	}
	err := segment.SplitBatches(fp.RecordBatches, func(h segment.Header, b []byte) error {
		if _, err := segment.ValidateBatch(b); err != nil {
			return err
		}
		r, err := segment.Records(b)
		hs, recs = append(hs, h), append(recs, r...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return hs, recs
}

// TestCompressionTypeRecompresses: for every topic compression.type and
// every producer codec, the stored batch has the topic's codec (the
// producer's for "producer"), the same records, and an idempotent
// batch's producer fields; a fetch returns it so.
func TestCompressionTypeRecompresses(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	rc := dialRaw(t, s)
	corr := int32(0)
	codecs := []segment.Codec{segment.CodecNone, segment.CodecGzip, segment.CodecSnappy, segment.CodecLZ4, segment.CodecZstd}
	for _, typ := range compressionTypes {
		topic := "ct-" + typ
		createTopic(t, cl, topic, 1, map[string]string{"compression.type": typ})
		for i, from := range codecs {
			var spec segment.BatchSpec
			spec.Codec, spec.Idempotent, spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = from, true, 77, 2, int32(3*i)
			for j := range 3 {
				spec.Records = append(spec.Records, segment.Record{Timestamp: 1700000000000 + int64(j), Key: []byte(strconv.Itoa(j)),
					Value: bytes.Repeat([]byte(fmt.Sprintf("%s-%s-%d ", typ, from, j)), 20)})
			}
			batch, err := segment.BuildBatch(spec)
			if err != nil {
				t.Fatal(err)
			}
			if p := produceRaw(t, cl, topic, 0, batch); p.ErrorCode != 0 || p.BaseOffset != int64(3*i) {
				t.Fatalf("%s <- %s: %s at %d", typ, from, kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
			}
		}
		hs, recs := storedBatches(t, rc, &corr, topic)
		if len(hs) != len(codecs) || len(recs) != 3*len(codecs) {
			t.Fatalf("%s: %d batches, %d records", typ, len(hs), len(recs))
		}
		for i, h := range hs {
			want := codecs[i]
			if typ != "producer" {
				want = codecByType(t, typ)
			}
			if h.Compression() != want || h.ProducerID != 77 || h.ProducerEpoch != 2 || h.BaseSequence != int32(3*i) || h.BaseOffset != int64(3*i) {
				t.Errorf("%s <- %s: stored %+v, codec %s; want %s and the producer's fields", typ, codecs[i], h, h.Compression(), want)
			}
		}
		for i, r := range recs {
			want := bytes.Repeat([]byte(fmt.Sprintf("%s-%s-%d ", typ, codecs[i/3], i%3)), 20)
			if r.Offset != int64(i) || !bytes.Equal(r.Value, want) || string(r.Key) != strconv.Itoa(i%3) || r.Timestamp != 1700000000000+int64(i%3) {
				t.Errorf("%s: record %d = offset %d key %q value %q", typ, i, r.Offset, r.Key, r.Value)
			}
		}
	}
}

func codecByType(t *testing.T, typ string) segment.Codec {
	t.Helper()
	var tc topicConfig
	if err := setCompressionType(&tc, typ); err != nil || !tc.recompress {
		t.Fatalf("compression.type %q: %v", typ, err)
	}
	return tc.codec
}

// TestCompressionTypeLegacyAndLimits: a magic 1 set produced with v2 is
// stored in the topic's codec; a zstd bomb is CORRUPT_MESSAGE; a batch
// that outgrows max.message.bytes once decompressed is MESSAGE_TOO_LARGE;
// the setting is validated and described.
func TestCompressionTypeLegacyAndLimits(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	rc := dialRaw(t, s)
	corr := int32(0)
	createTopic(t, cl, "ct-legacy", 1, map[string]string{"compression.type": "lz4"})
	set := legacySetOf(t, 1, segment.CodecGzip, legacyRecords("old", 3, 1_700_000_000_000))
	corr++
	if p := rc.request(corr, legacyProduce(2, "ct-legacy", set)).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 {
		t.Fatalf("legacy produce: %s", kerr.ErrorForCode(p.ErrorCode))
	}
	if hs, recs := storedBatches(t, rc, &corr, "ct-legacy"); len(hs) != 1 || hs[0].Compression() != segment.CodecLZ4 || len(recs) != 3 || string(recs[2].Value) != "old-2" {
		t.Fatalf("legacy set stored as %+v, %d records", hs, len(recs))
	}

	createTopic(t, cl, "ct-bomb", 1, map[string]string{"compression.type": "gzip"})
	bomb, err := segment.BuildBatch(segment.BatchSpec{Codec: segment.CodecZstd, Records: []segment.Record{{Value: make([]byte, segment.DefaultMaxDecompressed+1)}}})
	if err != nil {
		t.Fatal(err)
	}
	if p := produceRaw(t, cl, "ct-bomb", 0, bomb); p.ErrorCode != kerr.CorruptMessage.Code {
		t.Fatalf("bomb of %d bytes: %s, want CORRUPT_MESSAGE", len(bomb), kerr.ErrorForCode(p.ErrorCode))
	}

	createTopic(t, cl, "ct-grow", 1, map[string]string{"compression.type": "uncompressed", "max.message.bytes": "4096"})
	grow, err := segment.BuildBatch(segment.BatchSpec{Codec: segment.CodecZstd, Records: []segment.Record{{Value: make([]byte, 16<<10)}}})
	if err != nil {
		t.Fatal(err)
	}
	if p := produceRaw(t, cl, "ct-grow", 0, grow); p.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("batch growing past max.message.bytes: %s, want MESSAGE_TOO_LARGE", kerr.ErrorForCode(p.ErrorCode))
	}

	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "ct-bad", 1, 1
	rt.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "compression.type", Value: kmsg.StringPtr("brotli")}}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil || resp.Topics[0].ErrorCode != kerr.InvalidConfig.Code {
		t.Fatalf("compression.type=brotli: %v %+v, want INVALID_CONFIG", err, resp)
	}

	dreq := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName, dr.ConfigNames = kmsg.ConfigResourceTypeTopic, "ct-legacy", []string{"compression.type"}
	dreq.Resources = append(dreq.Resources, dr)
	dresp, err := dreq.RequestWith(testCtx(t), cl)
	if err != nil || len(dresp.Resources) != 1 || len(dresp.Resources[0].Configs) != 1 || *dresp.Resources[0].Configs[0].Value != "lz4" {
		t.Fatalf("DescribeConfigs compression.type: %v %+v", err, dresp)
	}
}

// createTopicCode creates a one-partition topic with configs and returns
// the topic's error code.
func createTopicCode(t *testing.T, s *Server, name string, configs map[string]string) int16 {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 1, 1
	for k, v := range configs {
		rt.Configs = append(rt.Configs, kmsg.CreateTopicsRequestTopicConfig{Name: k, Value: kmsg.StringPtr(v)})
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), newClient(t, s))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].ErrorCode
}

// TestCompressionLevels: compression.*.level (KIP-390) are validated in
// Kafka's ranges, and a topic recompresses at its level: zstd 19 and gzip
// 1 batches read back whole, and zstd 19 is not larger than zstd 1.
func TestCompressionLevels(t *testing.T) {
	s := startServer(t, nil)
	for i, bad := range []map[string]string{
		{"compression.gzip.level": "0"}, {"compression.gzip.level": "10"}, {"compression.gzip.level": "-2"},
		{"compression.lz4.level": "0"}, {"compression.lz4.level": "18"},
		{"compression.zstd.level": "23"}, {"compression.zstd.level": "-131073"},
	} {
		if c := createTopicCode(t, s, fmt.Sprintf("bad-level-%d", i), bad); c != kerr.InvalidConfig.Code {
			t.Errorf("#%d: %v: %s, want INVALID_CONFIG", i, bad, kerr.ErrorForCode(c))
		}
	}
	cl := newClient(t, s)
	rc := dialRaw(t, s)
	corr := int32(0)
	var value []byte
	for i := range 2000 {
		value = fmt.Appendf(value, "record %d of the level test, order %d; ", i, i*7919%1000)
	}
	sizes := map[string]int{}
	for _, tc := range []struct{ name, typ, key, level string }{
		{"zstd1", "zstd", "compression.zstd.level", "1"}, {"zstd19", "zstd", "compression.zstd.level", "19"},
		{"gzip1", "gzip", "compression.gzip.level", "1"}, {"lz4-17", "lz4", "compression.lz4.level", "17"},
	} {
		topic := "level-" + tc.name
		if c := createTopicCode(t, s, topic, map[string]string{"compression.type": tc.typ, tc.key: tc.level}); c != 0 {
			t.Fatalf("%s: %s", topic, kerr.ErrorForCode(c))
		}
		batch, err := segment.BuildBatch(segment.BatchSpec{Codec: segment.CodecSnappy, Records: []segment.Record{{Timestamp: 1, Value: value}}})
		if err != nil {
			t.Fatal(err)
		}
		if p := produceRaw(t, cl, topic, 0, batch); p.ErrorCode != 0 {
			t.Fatalf("%s: %s", topic, kerr.ErrorForCode(p.ErrorCode))
		}
		hs, recs := storedBatches(t, rc, &corr, topic)
		if len(hs) != 1 || hs[0].Compression() != codecByType(t, tc.typ) || len(recs) != 1 || !bytes.Equal(recs[0].Value, value) {
			t.Fatalf("%s: stored %+v", topic, hs)
		}
		sizes[tc.name] = hs[0].Size()
	}
	t.Logf("stored batch sizes of %d record bytes: %v", len(value), sizes)
	if sizes["zstd19"] > sizes["zstd1"] {
		t.Errorf("zstd level 19 stored %d bytes, level 1 %d", sizes["zstd19"], sizes["zstd1"])
	}
}
