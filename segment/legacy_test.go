package segment

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/golang/snappy"
)

var legacyCodecs = []Codec{CodecNone, CodecGzip, CodecSnappy, CodecLZ4}

func TestXXH32(t *testing.T) {
	for i, tc := range []struct {
		in   string
		want uint32
	}{
		{"", 0x02cc5d05},
		{"a", 0x550d7456},
		{"abc", 0x32d153ff},
		{"Nobody inspects the spammish repetition", 0xe2293b2f},
	} {
		if got := xxh32([]byte(tc.in)); got != tc.want {
			t.Errorf("#%d: xxh32(%q) = %08x, want %08x", i, tc.in, got, tc.want)
		}
	}
	// The lz4 encoder's own descriptor checksum agrees.
	frame, err := Compress(CodecLZ4, []byte("some records"))
	if err != nil {
		t.Fatal(err)
	}
	if got := lz4WithChecksum(frame, false); &got[0] != &frame[0] {
		t.Fatalf("lz4WithChecksum rewrote a correct descriptor checksum")
	}
}

// legacyTestRecords are records with keys, null keys and values, empty
// values and distinct timestamps.
func legacyTestRecords() []Record {
	return []Record{
		{Offset: 10, Timestamp: 1000, Key: []byte("k1"), Value: []byte("v1"), Headers: []RecordHeader{{Key: "h", Value: []byte("x")}}},
		{Offset: 12, Timestamp: 999, Key: nil, Value: []byte{}},
		{Offset: 13, Timestamp: 1500, Key: []byte{}, Value: nil},
		{Offset: 17, Timestamp: 1200, Key: []byte("k4"), Value: bytes.Repeat([]byte("value "), 300)},
	}
}

func mustBatch(t testing.TB, spec BatchSpec) []byte {
	t.Helper()
	b, err := BuildBatch(spec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLegacyRoundTrip converts v2 batches (with compaction gaps) to magic 0
// and 1 in every codec, parses them back and converts them up again:
// offsets, keys and values survive, timestamps survive magic 1 only.
func TestLegacyRoundTrip(t *testing.T) {
	recs := legacyTestRecords()
	for _, magic := range []int8{0, 1} {
		for _, codec := range legacyCodecs {
			for _, lat := range []int64{0, 5555} {
				name := fmt.Sprintf("magic%d/%s/logAppendTime=%d", magic, codec, lat)
				batch := mustBatch(t, BatchSpec{BaseOffset: 10, Codec: codec, KeepOffsets: true, LastOffsetDelta: 8, LogAppendTime: lat, Records: recs})
				dc, err := DownConvert(batch, DownConvertOptions{Magic: magic, FetchOffset: 0, Limit: 1 << 20, MaxDecompressed: DefaultMaxDecompressed})
				if err != nil {
					t.Fatalf("%s: DownConvert: %v", name, err)
				}
				if dc.Records != len(recs) || dc.NextOffset != 19 || dc.Partial {
					t.Fatalf("%s: got %d records, next %d, partial %v; want %d, 19, false", name, dc.Records, dc.NextOffset, dc.Partial, len(recs))
				}
				set, err := ParseLegacy(dc.Set, DefaultMaxDecompressed)
				if err != nil {
					t.Fatalf("%s: ParseLegacy: %v", name, err)
				}
				if set.Codec != codec || len(set.Records) != len(recs) {
					t.Fatalf("%s: codec %s, %d records; want %s, %d", name, set.Codec, len(set.Records), codec, len(recs))
				}
				wantMessages := len(recs)
				if codec != CodecNone {
					wantMessages = 1
				}
				if set.Messages != wantMessages {
					t.Errorf("%s: %d messages, want %d", name, set.Messages, wantMessages)
				}
				for i, r := range set.Records {
					want := recs[i]
					wantTS := want.Timestamp
					switch {
					case magic == 0:
						wantTS = -1
					case lat > 0:
						wantTS = lat
					}
					if r.Offset != want.Offset || r.Magic != magic || r.Timestamp != wantTS || r.LogAppendTime != (magic == 1 && lat > 0) ||
						!sameBytes(r.Key, want.Key) || !sameBytes(r.Value, want.Value) {
						t.Errorf("%s: #%d: got %+v, want offset %d, ts %d, key %q, value %d bytes", name, i, r, want.Offset, wantTS, want.Key, len(want.Value))
					}
				}
				up, err := ConvertLegacy(set, set.Codec)
				if err != nil {
					t.Fatalf("%s: ConvertLegacy: %v", name, err)
				}
				h, err := ValidateProduced(up)
				if err != nil || h.Compression() != codec || h.HasProducerID() || h.BaseOffset != 0 {
					t.Fatalf("%s: converted batch %+v, %v", name, h, err)
				}
				got, err := Records(up)
				if err != nil {
					t.Fatal(err)
				}
				for i, r := range got {
					want := set.Records[i]
					if r.Offset != int64(i) || r.Timestamp != want.Timestamp || !sameBytes(r.Key, want.Key) || !sameBytes(r.Value, want.Value) || len(r.Headers) != 0 {
						t.Errorf("%s: up #%d: got %+v, want %+v", name, i, r, want)
					}
				}
			}
		}
	}
}

// sameBytes compares nullable bytes: nil and empty differ.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// TestLegacyLZ4Magic0Checksum: magic 0 lz4 wrappers carry Kafka's old
// descriptor checksum (over the magic number too), magic 1 the standard
// one, and both read back.
func TestLegacyLZ4Magic0Checksum(t *testing.T) {
	batch := mustBatch(t, BatchSpec{Codec: CodecLZ4, Records: legacyTestRecords()[:2]})
	for _, magic := range []int8{0, 1} {
		dc, err := DownConvert(batch, DownConvertOptions{Magic: magic, Limit: 1 << 20, MaxDecompressed: DefaultMaxDecompressed})
		if err != nil {
			t.Fatal(err)
		}
		m, err := parseLegacyMessage(dc.Set)
		if err != nil {
			t.Fatal(err)
		}
		frame := m.value
		from := 4
		if magic == 0 {
			from = 0
		}
		if want := byte(xxh32(frame[from:6]) >> 8); frame[6] != want {
			t.Errorf("magic %d: descriptor checksum %02x, want %02x", magic, frame[6], want)
		}
		if _, err := ParseLegacy(dc.Set, DefaultMaxDecompressed); err != nil {
			t.Errorf("magic %d: %v", magic, err)
		}
	}
}

// legacySet builds a message set by hand, as an old producer does.
type legacySet struct{ b []byte }

func (s *legacySet) msg(offset int64, magic, attrs int8, ts int64, key, value []byte) *legacySet {
	s.b = appendLegacyMessage(s.b, offset, magic, attrs, ts, key, value)
	return s
}

func TestParseLegacyProducerSets(t *testing.T) {
	inner0 := new(legacySet).msg(0, 0, 0, 0, []byte("a"), []byte("1")).msg(0, 0, 0, 0, nil, []byte("2")).b
	inner1 := new(legacySet).msg(0, 1, 0, 100, []byte("a"), []byte("1")).msg(1, 1, 0, 200, nil, []byte("2")).b
	gz, _ := Compress(CodecGzip, inner1)
	xerial, _ := Compress(CodecSnappy, inner0)
	raw := snappy.Encode(nil, inner1)
	lz, _ := Compress(CodecLZ4, inner0)
	lz0 := lz4WithChecksum(lz, true)
	nested := new(legacySet).msg(0, 1, int8(CodecGzip), 5, nil, gz).b
	nestedGz, _ := Compress(CodecGzip, nested)
	mixed := new(legacySet).msg(0, 0, 0, 0, nil, []byte("x")).b
	mixedGz, _ := Compress(CodecGzip, mixed)
	emptyGz, _ := Compress(CodecGzip, nil)
	for i, tc := range []struct {
		set        []byte
		codec      Codec
		offsets    []int64
		timestamps []int64
		err        error
	}{
		{set: new(legacySet).msg(0, 0, 0, 0, []byte("k"), []byte("v")).msg(1, 1, 0, 7, nil, nil).b, offsets: []int64{0, 1}, timestamps: []int64{-1, 7}},
		{set: new(legacySet).msg(41, 1, int8(CodecGzip), 300, nil, gz).b, codec: CodecGzip, offsets: []int64{40, 41}, timestamps: []int64{100, 200}},
		{set: new(legacySet).msg(41, 1, int8(CodecGzip)|legacyAttrLogAppend, 300, nil, gz).b, codec: CodecGzip, offsets: []int64{40, 41}, timestamps: []int64{300, 300}},
		{set: new(legacySet).msg(0, 0, int8(CodecSnappy), 0, nil, xerial).b, codec: CodecSnappy, offsets: []int64{0, 0}, timestamps: []int64{-1, -1}},
		{set: new(legacySet).msg(1, 1, int8(CodecSnappy), 0, nil, raw).b, codec: CodecSnappy, offsets: []int64{0, 1}, timestamps: []int64{100, 200}},
		{set: new(legacySet).msg(0, 0, int8(CodecLZ4), 0, nil, lz0).b, codec: CodecLZ4, offsets: []int64{0, 0}, timestamps: []int64{-1, -1}},
		{set: new(legacySet).msg(0, 0, int8(CodecLZ4), 0, nil, lz).b, codec: CodecLZ4, offsets: []int64{0, 0}, timestamps: []int64{-1, -1}},
		// magic 1 lz4 with the broken checksum is refused, as Kafka does.
		{set: new(legacySet).msg(0, 1, int8(CodecLZ4), 0, nil, lz4WithChecksum(mustCompress(t, CodecLZ4, inner1), true)).b, err: ErrDecompress},
		{set: new(legacySet).msg(0, 1, int8(CodecGzip), 0, nil, nestedGz).b, err: ErrLegacyInvalid},
		{set: new(legacySet).msg(0, 1, int8(CodecGzip), 0, nil, mixedGz).b, err: ErrLegacyInvalid},
		{set: new(legacySet).msg(0, 1, int8(CodecGzip), 0, nil, emptyGz).b, err: ErrLegacyInvalid},
		{set: new(legacySet).msg(0, 1, int8(CodecGzip), 0, nil, nil).b, err: ErrLegacyInvalid},
		{set: new(legacySet).msg(0, 1, int8(CodecZstd), 0, nil, []byte{1}).b, err: ErrLegacyZstd},
		{set: new(legacySet).msg(0, 1, 5, 0, nil, []byte{1}).b, err: ErrUnknownCodec},
		{set: new(legacySet).msg(0, 1, 0, -5, nil, []byte{1}).b, err: ErrLegacyInvalid},
		{set: new(legacySet).msg(0, 2, 0, 0, nil, []byte{1}).b, err: ErrBadMagic},
		{set: flipByte(new(legacySet).msg(0, 1, 0, 0, nil, []byte("v")).b, 30), err: ErrCRCMismatch},
		{set: new(legacySet).msg(0, 1, 0, 0, nil, []byte("v")).b[:30], err: ErrTruncated},
		{set: new(legacySet).msg(0, 0, int8(CodecGzip), 0, nil, []byte("not gzip")).b, err: ErrDecompress},
	} {
		set, err := ParseLegacy(tc.set, DefaultMaxDecompressed)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("#%d: got %v, want %v", i, err, tc.err)
			}
			if tc.err != ErrLegacyZstd && !IsCorrupt(err) {
				t.Errorf("#%d: %v is not corruption", i, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("#%d: %v", i, err)
			continue
		}
		if set.Codec != tc.codec || len(set.Records) != len(tc.offsets) {
			t.Errorf("#%d: got codec %s, %d records; want %s, %d", i, set.Codec, len(set.Records), tc.codec, len(tc.offsets))
			continue
		}
		for j, r := range set.Records {
			if r.Offset != tc.offsets[j] || r.Timestamp != tc.timestamps[j] {
				t.Errorf("#%d: record %d: offset %d ts %d, want %d %d", i, j, r.Offset, r.Timestamp, tc.offsets[j], tc.timestamps[j])
			}
		}
	}
}

func mustCompress(t *testing.T, c Codec, b []byte) []byte {
	t.Helper()
	out, err := Compress(c, b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func flipByte(b []byte, i int) []byte {
	b = bytes.Clone(b)
	b[i] ^= 0xff
	return b
}

func TestParseLegacyDecompressLimit(t *testing.T) {
	inner := new(legacySet).msg(0, 1, 0, 0, nil, bytes.Repeat([]byte{0}, 1<<20)).b
	set := new(legacySet).msg(0, 1, int8(CodecGzip), 0, nil, mustCompress(t, CodecGzip, inner)).b
	if _, err := ParseLegacy(set, 1<<16); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
}

// TestDownConvertRules: control batches dropped, uncompressed records
// below the fetch offset dropped, compressed batches whole, zstd refused.
func TestDownConvertRules(t *testing.T) {
	opt := DownConvertOptions{Magic: 1, Limit: 1 << 20, MaxDecompressed: DefaultMaxDecompressed}
	plain := mustBatch(t, BatchSpec{BaseOffset: 0, Records: []Record{{Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}}})
	control := mustBatch(t, BatchSpec{BaseOffset: 3, Control: true, Transactional: true, Idempotent: true, ProducerID: 1, Records: []Record{{Key: []byte{0, 0, 0, 0}, Value: []byte{0, 0, 0, 0, 0, 0}}}})
	gz := mustBatch(t, BatchSpec{BaseOffset: 4, Codec: CodecGzip, Records: []Record{{Value: []byte("d")}, {Value: []byte("e")}}})
	zs := mustBatch(t, BatchSpec{BaseOffset: 6, Codec: CodecZstd, Records: []Record{{Value: []byte("f")}}})
	all := bytes.Join([][]byte{plain, control, gz, zs}, nil)

	opt.FetchOffset = 1
	dc, err := DownConvert(all, opt)
	if err != nil {
		t.Fatal(err)
	}
	set, err := ParseLegacy(dc.Set, DefaultMaxDecompressed)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range set.Records {
		got = append(got, fmt.Sprintf("%d:%s", r.Offset, r.Value))
	}
	if want := "[1:b 2:c 4:d 5:e]"; fmt.Sprint(got) != want || dc.NextOffset != 6 {
		t.Fatalf("got %v next %d, want %s next 6", got, dc.NextOffset, want)
	}
	// A compressed batch stays whole below the fetch offset.
	opt.FetchOffset = 5
	dc, err = DownConvert(gz, opt)
	if err != nil || dc.Records != 2 {
		t.Fatalf("got %d records, %v; want 2", dc.Records, err)
	}
	// zstd first is an error; after data, the set stops before it.
	opt.FetchOffset = 6
	if _, err := DownConvert(zs, opt); !errors.Is(err, ErrLegacyZstd) || IsCorrupt(err) {
		t.Fatalf("zstd: got %v, want ErrLegacyZstd", err)
	}
	// A trailing partial batch is ignored.
	opt.FetchOffset = 0
	dc, err = DownConvert(append(bytes.Clone(plain), gz[:20]...), opt)
	if err != nil || dc.Records != 3 || dc.NextOffset != 3 {
		t.Fatalf("partial tail: %d records next %d, %v", dc.Records, dc.NextOffset, err)
	}
	// Only control batches: nothing written, but the offset moves on.
	dc, err = DownConvert(control, opt)
	if err != nil || len(dc.Set) != 0 || dc.NextOffset != 4 {
		t.Fatalf("control only: %d bytes next %d, %v", len(dc.Set), dc.NextOffset, err)
	}
}

// TestDownConvertLimit: whole messages within the limit; the first one
// whole (MinOne) or cut (Fetch v0-v2) when it alone exceeds it.
func TestDownConvertLimit(t *testing.T) {
	recs := make([]Record, 10)
	for i := range recs {
		recs[i] = Record{Timestamp: int64(i), Value: bytes.Repeat([]byte{byte('a' + i)}, 100)}
	}
	plain := mustBatch(t, BatchSpec{BaseOffset: 100, Records: recs})
	gz := mustBatch(t, BatchSpec{BaseOffset: 110, Codec: CodecGzip, Records: recs})
	msg1 := legacyLogOverhead + LegacyOverheadV1 + 100 // one converted record
	base := DownConvertOptions{Magic: 1, FetchOffset: 100, MaxDecompressed: DefaultMaxDecompressed}
	for i, tc := range []struct {
		src         []byte
		limit       int
		minOne      bool
		records     int
		next        int64
		size        int
		partial     bool
		parsesWhole bool
	}{
		{src: plain, limit: 3*msg1 + 10, records: 3, next: 103, size: 3 * msg1, parsesWhole: true},
		{src: plain, limit: msg1 - 1, minOne: true, records: 1, next: 101, size: msg1, parsesWhole: true},
		{src: plain, limit: msg1 - 1, records: 0, next: 100, size: msg1 - 1, partial: true},
		{src: append(bytes.Clone(plain), gz...), limit: 10*msg1 + 5, records: 10, next: 110, size: 10 * msg1, parsesWhole: true},
		{src: gz, limit: 50, minOne: true, records: 10, next: 120, parsesWhole: true},
		{src: gz, limit: 50, records: 0, next: 100, size: 50, partial: true},
		{src: plain, limit: 0, records: 0, next: 100, size: 0},
	} {
		opt := base
		opt.Limit, opt.MinOne = tc.limit, tc.minOne
		dc, err := DownConvert(tc.src, opt)
		if err != nil {
			t.Fatalf("#%d: %v", i, err)
		}
		if dc.Records != tc.records || dc.NextOffset != tc.next || dc.Partial != tc.partial || (tc.size != 0 || tc.records == 0) && len(dc.Set) != tc.size {
			t.Errorf("#%d: got %d records, next %d, %d bytes, partial %v; want %d, %d, %d, %v", i, dc.Records, dc.NextOffset, len(dc.Set), dc.Partial, tc.records, tc.next, tc.size, tc.partial)
		}
		if !tc.parsesWhole {
			continue
		}
		set, err := ParseLegacy(dc.Set, DefaultMaxDecompressed)
		if err != nil || len(set.Records) != tc.records {
			t.Errorf("#%d: parse: %d records, %v", i, len(set.Records), err)
		}
	}
}
