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
