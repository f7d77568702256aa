package broker

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// legacySetOf builds the message set an old producer of magic would send
// for records, compressed with codec, by down-converting a v2 batch.
func legacySetOf(t *testing.T, magic int8, codec segment.Codec, recs []segment.Record) []byte {
	t.Helper()
	b, err := segment.BuildBatch(segment.BatchSpec{Codec: codec, Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	dc, err := segment.DownConvert(b, segment.DownConvertOptions{Magic: magic, Limit: 1 << 30, MaxDecompressed: segment.DefaultMaxDecompressed})
	if err != nil {
		t.Fatal(err)
	}
	return dc.Set
}

func legacyRecords(tag string, n int, ts int64) []segment.Record {
	recs := make([]segment.Record, n)
	for i := range recs {
		recs[i] = segment.Record{Timestamp: ts + int64(i), Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("%s-%d", tag, i))}
	}
	recs[n-1].Key = nil
	return recs
}

func legacyProduce(version int16, topic string, set []byte) *kmsg.ProduceRequest {
	req := produceRequest(topic, 0, set)
	req.Version = version
	return req
}

func legacyFetch(version int16, topic string, offset int64, maxBytes int32) *kmsg.FetchRequest {
	req := fetchRequest(topic, 0, offset, maxBytes)
	req.Version = version
	return req
}

// TestLegacyProduceFetch produces message sets of magic 0 and 1 in every
// codec with Produce v0-v2, reads everything back with Fetch v0-v3 (down-
// converted) and v12 (the stored v2 batches), and checks offsets, keys,
// values and timestamps.
func TestLegacyProduceFetch(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	createTopic(t, cl, "legacy", 1, nil)
	rc := dialRaw(t, s)
	corr := int32(0)
	next := func() int32 { corr++; return corr }

	type sent struct {
		magic int8
		recs  []segment.Record
	}
	var all []sent
	for _, version := range []int16{0, 1, 2} {
		for _, magic := range []int8{0, 1} {
			for _, codec := range []segment.Codec{segment.CodecNone, segment.CodecGzip, segment.CodecSnappy, segment.CodecLZ4} {
				recs := legacyRecords(fmt.Sprintf("v%d-m%d-%s", version, magic, codec), 3, 1_700_000_000_000)
				resp := rc.request(next(), legacyProduce(version, "legacy", legacySetOf(t, magic, codec, recs))).(*kmsg.ProduceResponse)
				p := resp.Topics[0].Partitions[0]
				if p.ErrorCode != 0 || p.BaseOffset != int64(3*len(all)) {
					t.Fatalf("produce v%d magic %d %s: error %s, base offset %d; want %d", version, magic, codec, kerr.ErrorForCode(p.ErrorCode), p.BaseOffset, 3*len(all))
				}
				if version == 2 && p.LogAppendTime != -1 {
					t.Errorf("produce v2: LogAppendTime %d for a CreateTime topic, want -1", p.LogAppendTime)
				}
				all = append(all, sent{magic, recs})
			}
		}
	}
	if got := s.Stats().ProduceConvertedRecords; got != int64(3*len(all)) {
		t.Errorf("ProduceConvertedRecords = %d, want %d", got, 3*len(all))
	}

	// What is stored: v2 batches, timestamps -1 for magic 0.
	var stored []segment.Record
	for off := int64(0); off < int64(3*len(all)); {
		fp := rc.fetch(next(), "legacy", 0, off, 1<<20)
		if fp.ErrorCode != 0 || len(fp.RecordBatches) == 0 {
			t.Fatalf("fetch v12 at %d: %s, %d bytes", off, kerr.ErrorForCode(fp.ErrorCode), len(fp.RecordBatches))
		}
		err := segment.SplitBatches(fp.RecordBatches, func(h segment.Header, b []byte) error {
			recs, err := segment.Records(b)
			stored = append(stored, recs...)
			off = h.NextOffset()
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range stored {
		want := all[i/3].recs[i%3]
		ts := want.Timestamp
		if all[i/3].magic == 0 {
			ts = -1
		}
		if r.Offset != int64(i) || r.Timestamp != ts || !bytes.Equal(r.Key, want.Key) || (r.Key == nil) != (want.Key == nil) || !bytes.Equal(r.Value, want.Value) {
			t.Errorf("stored #%d: got offset %d ts %d key %q value %q; want ts %d key %q value %q", i, r.Offset, r.Timestamp, r.Key, r.Value, ts, want.Key, want.Value)
		}
	}

	// Down-converted, from every offset's start and from the middle.
	for _, version := range []int16{0, 1, 2, 3} {
		for _, from := range []int64{0, 4} {
			var got []segment.LegacyRecord
			for off := from; off < int64(len(stored)); {
				resp := rc.request(next(), legacyFetch(version, "legacy", off, 1<<20)).(*kmsg.FetchResponse)
				fp := resp.Topics[0].Partitions[0]
				if fp.ErrorCode != 0 || fp.HighWatermark != int64(len(stored)) || len(fp.RecordBatches) == 0 {
					t.Fatalf("fetch v%d at %d: %s, hw %d, %d bytes", version, off, kerr.ErrorForCode(fp.ErrorCode), fp.HighWatermark, len(fp.RecordBatches))
				}
				set, err := segment.ParseLegacy(fp.RecordBatches, segment.DefaultMaxDecompressed)
				if err != nil {
					t.Fatalf("fetch v%d at %d: %v", version, off, err)
				}
				got = append(got, set.Records...)
				off = set.Records[len(set.Records)-1].Offset + 1
			}
			// Whole compressed batches come back from below the fetch
			// offset, as in Kafka; the reader skips them.
			for len(got) > 0 && got[0].Offset < from {
				got = got[1:]
			}
			if len(got) != len(stored)-int(from) {
				t.Fatalf("fetch v%d from %d: %d records, want %d", version, from, len(got), len(stored)-int(from))
			}
			wantMagic := legacyMagic(version)
			for i, r := range got {
				want := stored[int(from)+i]
				ts := want.Timestamp
				if wantMagic == 0 {
					ts = -1
				}
				if r.Offset != want.Offset || r.Magic != wantMagic || r.Timestamp != ts || !bytes.Equal(r.Value, want.Value) || (r.Key == nil) != (want.Key == nil) {
					t.Errorf("fetch v%d from %d, #%d: got %+v, want offset %d ts %d value %q", version, from, i, r, want.Offset, ts, want.Value)
				}
			}
		}
	}
	if s.Stats().FetchConvertedRecords == 0 {
		t.Error("FetchConvertedRecords stayed 0")
	}
}

// TestLegacyProduceErrors: the error codes Kafka gives damaged and
// rule-breaking message sets, per partition.
func TestLegacyProduceErrors(t *testing.T) {
	s := startServer(t, map[string]string{"message.max.bytes": "4000"})
	cl := newClient(t, s)
	createTopic(t, cl, "legacy-bad", 1, nil)
	rc := dialRaw(t, s)
	good := legacySetOf(t, 1, segment.CodecNone, legacyRecords("x", 2, 5))
	crc := bytes.Clone(good)
	crc[len(crc)-1] ^= 0xff
	nestedSet := wrapGzip(t, wrapGzip(t, good))
	big := legacySetOf(t, 0, segment.CodecNone, []segment.Record{{Value: bytes.Repeat([]byte("x"), 5000)}})
	for i, tc := range []struct {
		set  []byte
		want *kerr.Error
	}{
		{good, nil},
		{wrapGzip(t, good), nil},
		{crc, kerr.CorruptMessage},
		{good[:len(good)-3], kerr.CorruptMessage},
		{nestedSet, kerr.InvalidRecord},
		{big, kerr.MessageTooLarge},
		{nil, kerr.InvalidRecord},
		{buildBatch(t, segment.CodecNone, 2), nil}, // magic 2 in v2 is taken as it is
	} {
		resp := rc.request(int32(i+1), legacyProduce(2, "legacy-bad", tc.set)).(*kmsg.ProduceResponse)
		code := resp.Topics[0].Partitions[0].ErrorCode
		want := int16(0)
		if tc.want != nil {
			want = tc.want.Code
		}
		if code != want {
			t.Errorf("#%d: got %s, want %v", i, kerr.ErrorForCode(code), tc.want)
		}
	}
}

// wrapGzip wraps a magic 1 message set into a gzip wrapper message.
func wrapGzip(t *testing.T, set []byte) []byte {
	t.Helper()
	value, err := segment.Compress(segment.CodecGzip, set)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte{0, 0, 0, 0, 1, byte(segment.CodecGzip), 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff}
	msg = append(msg, byte(len(value)>>24), byte(len(value)>>16), byte(len(value)>>8), byte(len(value)))
	msg = append(msg, value...)
	crc := crc32.ChecksumIEEE(msg[4:])
	msg[0], msg[1], msg[2], msg[3] = byte(crc>>24), byte(crc>>16), byte(crc>>8), byte(crc)
	out := make([]byte, 12, 12+len(msg))
	out[8], out[9], out[10], out[11] = byte(len(msg)>>24), byte(len(msg)>>16), byte(len(msg)>>8), byte(len(msg))
	return append(out, msg...)
}

// TestLegacyFetchRules: down-conversion disabled per topic, zstd data,
// the v0-v2 hard size limit against v3's first whole message, and
// ListOffsets v0.
func TestLegacyFetchRules(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	createTopic(t, cl, "legacy-off", 1, map[string]string{"message.downconversion.enable": "false"})
	createTopic(t, cl, "legacy-zstd", 1, nil)
	createTopic(t, cl, "legacy-size", 1, nil)
	rc := dialRaw(t, s)
	corr := int32(0)
	next := func() int32 { corr++; return corr }
	fetchCode := func(version int16, topic string, off int64, maxBytes int32) (int16, []byte) {
		resp := rc.request(next(), legacyFetch(version, topic, off, maxBytes)).(*kmsg.FetchResponse)
		return resp.Topics[0].Partitions[0].ErrorCode, resp.Topics[0].Partitions[0].RecordBatches
	}

	if p := produceRaw(t, cl, "legacy-off", 0, buildBatch(t, segment.CodecNone, 2)); p.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(p.ErrorCode))
	}
	if code, _ := fetchCode(3, "legacy-off", 0, 1<<20); code != kerr.UnsupportedVersion.Code {
		t.Errorf("down-conversion disabled: got %s, want UNSUPPORTED_VERSION", kerr.ErrorForCode(code))
	}
	if code, b := fetchCode(4, "legacy-off", 0, 1<<20); code != 0 || len(b) == 0 {
		t.Errorf("down-conversion disabled, v4: got %s, %d bytes", kerr.ErrorForCode(code), len(b))
	}

	for _, b := range [][]byte{buildBatch(t, segment.CodecNone, 2), buildBatch(t, segment.CodecZstd, 2)} {
		if p := produceRaw(t, cl, "legacy-zstd", 0, b); p.ErrorCode != 0 {
			t.Fatal(kerr.ErrorForCode(p.ErrorCode))
		}
	}
	if code, b := fetchCode(2, "legacy-zstd", 0, 1<<20); code != 0 || len(b) == 0 {
		t.Errorf("before zstd: got %s, %d bytes", kerr.ErrorForCode(code), len(b))
	} else if set, err := segment.ParseLegacy(b, 1<<20); err != nil || len(set.Records) != 2 {
		t.Errorf("before zstd: %d records, %v; want 2", len(set.Records), err)
	}
	if code, _ := fetchCode(2, "legacy-zstd", 2, 1<<20); code != kerr.UnsupportedCompressionType.Code {
		t.Errorf("zstd: got %s, want UNSUPPORTED_COMPRESSION_TYPE", kerr.ErrorForCode(code))
	}

	big := legacySetOf(t, 1, segment.CodecNone, []segment.Record{{Value: bytes.Repeat([]byte("y"), 3000)}})
	if p := rc.request(next(), legacyProduce(2, "legacy-size", big)).(*kmsg.ProduceResponse).Topics[0].Partitions[0]; p.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(p.ErrorCode))
	}
	_, b := fetchCode(2, "legacy-size", 0, 1000)
	if len(b) != 1000 {
		t.Errorf("v2 past the limit: %d bytes, want a partial message of 1000", len(b))
	}
	_, b = fetchCode(3, "legacy-size", 0, 1000)
	if set, err := segment.ParseLegacy(b, 1<<20); err != nil || len(set.Records) != 1 {
		t.Errorf("v3 past the limit: %d records, %v; want the whole message", len(set.Records), err)
	}

	// LogAppendTime: Produce v2 answers the broker's time, and old readers
	// of magic 1 get it as every message's timestamp, flagged as such.
	createTopic(t, cl, "legacy-lat", 1, map[string]string{"message.timestamp.type": "LogAppendTime"})
	lat := rc.request(next(), legacyProduce(2, "legacy-lat", legacySetOf(t, 1, segment.CodecGzip, legacyRecords("lat", 3, 5)))).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	if lat.ErrorCode != 0 || lat.LogAppendTime <= 5 {
		t.Fatalf("produce v2 to a LogAppendTime topic: %s, LogAppendTime %d", kerr.ErrorForCode(lat.ErrorCode), lat.LogAppendTime)
	}
	_, b = fetchCode(3, "legacy-lat", 0, 1<<20)
	set, err := segment.ParseLegacy(b, 1<<20)
	if err != nil || len(set.Records) != 3 {
		t.Fatalf("fetch v3 of a LogAppendTime topic: %d records, %v", len(set.Records), err)
	}
	for i, r := range set.Records {
		if !r.LogAppendTime || r.Timestamp != lat.LogAppendTime {
			t.Errorf("LogAppendTime #%d: got %v ts %d, want true ts %d", i, r.LogAppendTime, r.Timestamp, lat.LogAppendTime)
		}
	}

	// ListOffsets v0: latest and earliest.
	for i, tc := range []struct {
		ts   int64
		max  int32
		want []int64
	}{
		{-1, 1, []int64{1}},
		{-2, 1, []int64{0}},
		{-1, 10, []int64{1, 0}},
		{0, 5, []int64{}},
	} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 0
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "legacy-size"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.MaxNumOffsets = tc.ts, tc.max
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		p := rc.request(next(), req).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		if p.ErrorCode != 0 || fmt.Sprint(p.OldStyleOffsets) != fmt.Sprint(tc.want) {
			t.Errorf("#%d: ListOffsets v0 ts %d max %d: got %v %s, want %v", i, tc.ts, tc.max, p.OldStyleOffsets, kerr.ErrorForCode(p.ErrorCode), tc.want)
		}
	}
}
