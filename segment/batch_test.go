package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// testBatch builds a valid three-record batch.
func testBatch(t *testing.T, codec Codec) []byte {
	t.Helper()
	b, err := BuildBatch(BatchSpec{BaseOffset: 10, Codec: codec, Records: []Record{
		{Timestamp: 100, Key: []byte("a"), Value: []byte("1")},
		{Timestamp: 300, Key: []byte("b"), Value: []byte("2")},
		{Timestamp: 200, Key: []byte("c"), Value: []byte("3")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mutate copies b, applies fn and, when fixCRC, recomputes the CRC so that
// only the intended defect remains.
func mutate(b []byte, fixCRC bool, fn func(b []byte) []byte) []byte {
	b = fn(bytes.Clone(b))
	if fixCRC && len(b) >= HeaderSize {
		binary.BigEndian.PutUint32(b[offCRC:], crc32c(b[offAttributes:]))
	}
	return b
}

func TestValidateBatchErrors(t *testing.T) {
	good := testBatch(t, CodecNone)
	sentinels := []error{ErrBadMagic, ErrCRCMismatch, ErrTruncated, ErrBadLength, ErrCountMismatch, ErrUnknownCodec}
	tests := []struct {
		name  string
		batch []byte
		want  error
	}{
		{"valid", good, nil},
		{"wrong magic", mutate(good, true, func(b []byte) []byte { b[offMagic] = 1; return b }), ErrBadMagic},
		{"crc mismatch", mutate(good, false, func(b []byte) []byte { b[len(b)-1] ^= 0x40; return b }), ErrCRCMismatch},
		{"crc field damaged", mutate(good, false, func(b []byte) []byte { b[offCRC] ^= 1; return b }), ErrCRCMismatch},
		{"truncated header", good[:20], ErrTruncated},
		{"truncated body", good[:len(good)-1], ErrTruncated},
		{"empty", nil, ErrTruncated},
		{"length below header", mutate(good, true, func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offBatchLength:], 10)
			return b
		}), ErrBadLength},
		{"negative length", mutate(good, true, func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offBatchLength:], 0x80000000)
			return b
		}), ErrBadLength},
		{"count above last offset delta", mutate(good, true, func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 1)
			return b
		}), ErrCountMismatch},
		{"negative count", mutate(good, true, func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[offRecordCount:], 0xffffffff)
			return b
		}), ErrCountMismatch},
		{"unknown codec", mutate(good, true, func(b []byte) []byte { b[offAttributes+1] |= 5; return b }), ErrUnknownCodec},
		{"unknown codec 7", mutate(good, true, func(b []byte) []byte { b[offAttributes+1] |= 7; return b }), ErrUnknownCodec},
	}
	for i, tt := range tests {
		_, err := ValidateBatch(tt.batch)
		if (tt.want == nil) != (err == nil) || !errors.Is(err, tt.want) {
			t.Errorf("#%d %s: got %v, want %v", i, tt.name, err, tt.want)
			continue
		}
		if err == nil {
			continue
		}
		if !IsCorrupt(err) {
			t.Errorf("#%d %s: IsCorrupt(%v) = false", i, tt.name, err)
		}
		for _, s := range sentinels {
			if s != tt.want && errors.Is(err, s) {
				t.Errorf("#%d %s: got %v, which also matches %v", i, tt.name, err, s)
			}
		}
		// Records reports the same defect.
		if _, rerr := Records(tt.batch); !errors.Is(rerr, tt.want) {
			t.Errorf("#%d %s: Records: got %v, want %v", i, tt.name, rerr, tt.want)
		}
	}
}

func TestValidateProduced(t *testing.T) {
	good := testBatch(t, CodecNone)
	if _, err := ValidateProduced(good); err != nil {
		t.Fatalf("got %v, want nil", err)
	}
	compacted, err := BuildBatch(BatchSpec{KeepOffsets: true, LastOffsetDelta: 5, Records: []Record{{Offset: 0}, {Offset: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	empty, err := BuildBatch(BatchSpec{})
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range [][]byte{compacted, empty} {
		if _, err := ValidateBatch(b); err != nil {
			t.Errorf("#%d: ValidateBatch: got %v, want nil", i, err)
		}
		if _, err := ValidateProduced(b); !errors.Is(err, ErrCountMismatch) {
			t.Errorf("#%d: ValidateProduced: got %v, want %v", i, err, ErrCountMismatch)
		}
	}
}

func TestSetLogAppendTimeKeepsCRC(t *testing.T) {
	for _, codec := range allCodecs {
		b := testBatch(t, codec)
		const ts = 1_234_567_890_123
		SetLogAppendTime(b, ts)
		h, err := ValidateBatch(b)
		if err != nil {
			t.Fatalf("%s: got %v, want nil", codec, err)
		}
		if !h.LogAppendTime() || h.MaxTimestamp != ts || h.Compression() != codec {
			t.Errorf("%s: got logAppendTime %v, max timestamp %d, codec %s; want true, %d, %s", codec, h.LogAppendTime(), h.MaxTimestamp, h.Compression(), ts, codec)
		}
		if h.BaseTimestamp != 100 {
			t.Errorf("%s: got base timestamp %d, want 100 (unchanged)", codec, h.BaseTimestamp)
		}
	}
}

func TestFieldsOutsideCRC(t *testing.T) {
	b := testBatch(t, CodecZstd)
	SetBaseOffset(b, 1<<40)
	SetPartitionLeaderEpoch(b, 12)
	h, err := ValidateBatch(b)
	if err != nil {
		t.Fatalf("got %v, want nil", err)
	}
	if h.BaseOffset != 1<<40 || h.PartitionLeaderEpoch != 12 || h.LastOffset() != 1<<40+2 || h.NextOffset() != 1<<40+3 {
		t.Errorf("got base %d epoch %d last %d next %d", h.BaseOffset, h.PartitionLeaderEpoch, h.LastOffset(), h.NextOffset())
	}
	recs, err := Records(b)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if r.Offset != 1<<40+int64(i) {
			t.Errorf("#%d: got offset %d, want %d", i, r.Offset, 1<<40+int64(i))
		}
	}
}

func TestHeaderFields(t *testing.T) {
	b, err := BuildBatch(BatchSpec{
		BaseOffset: 5, PartitionLeaderEpoch: 3, Codec: CodecLZ4,
		Idempotent: true, ProducerID: 99, ProducerEpoch: 2, BaseSequence: 17,
		Transactional: true, Control: true,
		Records: []Record{{Timestamp: 50}, {Timestamp: 40}, {Timestamp: 70}, {Timestamp: 60}},
	})
	if err != nil {
		t.Fatal(err)
	}
	h, err := ValidateBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Header{
		BaseOffset: 5, BatchLength: int32(len(b) - LogOverhead), PartitionLeaderEpoch: 3, Magic: 2, CRC: h.CRC,
		Attributes: int16(CodecLZ4) | attrTransactional | attrControl, LastOffsetDelta: 3,
		BaseTimestamp: 50, MaxTimestamp: 70, ProducerID: 99, ProducerEpoch: 2, BaseSequence: 17, RecordCount: 4,
	}
	if h != want {
		t.Errorf("got %+v, want %+v", h, want)
	}
	if !h.Transactional() || !h.Control() || h.LogAppendTime() || h.Compression() != CodecLZ4 {
		t.Errorf("got transactional %v control %v logAppendTime %v codec %s", h.Transactional(), h.Control(), h.LogAppendTime(), h.Compression())
	}
}

func TestSplitBatches(t *testing.T) {
	var buf []byte
	for _, c := range allCodecs {
		buf = append(buf, testBatch(t, c)...)
	}
	var codecs []Codec
	err := SplitBatches(buf, func(h Header, batch []byte) error {
		if len(batch) != h.Size() {
			t.Errorf("got %d bytes, header says %d", len(batch), h.Size())
		}
		codecs = append(codecs, h.Compression())
		return nil
	})
	if err != nil || len(codecs) != len(allCodecs) {
		t.Fatalf("got %v after %v, want nil after %v", err, codecs, allCodecs)
	}
	n := 0
	err = SplitBatches(buf[:len(buf)-3], func(Header, []byte) error { n++; return nil })
	if !errors.Is(err, ErrTruncated) || n != len(allCodecs)-1 {
		t.Errorf("torn tail: got %v after %d batches, want %v after %d", err, n, ErrTruncated, len(allCodecs)-1)
	}
}

func TestCodecString(t *testing.T) {
	tests := map[Codec]string{CodecNone: "none", CodecGzip: "gzip", CodecSnappy: "snappy", CodecLZ4: "lz4", CodecZstd: "zstd", 6: "unknown(6)"}
	for c, want := range tests {
		if got := c.String(); got != want {
			t.Errorf("Codec(%d): got %q, want %q", int8(c), got, want)
		}
	}
}
