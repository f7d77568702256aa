package segment

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// recordsOf decodes batch's records, failing the test on error.
func recordsOf(t *testing.T, batch []byte) []Record {
	t.Helper()
	it, err := NewRecordIter(batch, DefaultMaxDecompressed)
	if err != nil {
		t.Fatal(err)
	}
	var out []Record
	for {
		r, ok, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		r.Key, r.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
		out = append(out, r)
	}
}

// TestRecompressEveryPair: from each codec to each other, the batch is
// valid (CRC included), carries the new codec, keeps every header field
// but the codec bits, length and CRC, and decodes to the same records.
func TestRecompressEveryPair(t *testing.T) {
	recs := make([]Record, 50)
	for i := range recs {
		recs[i] = Record{Timestamp: 1700000000000 + int64(i), Key: fmt.Appendf(nil, "k%d", i), Value: compressible(300),
			Headers: []RecordHeader{{Key: "h", Value: []byte("v")}}}
	}
	for _, from := range allCodecs {
		in, err := BuildBatch(BatchSpec{BaseOffset: 0, PartitionLeaderEpoch: 7, Codec: from, Idempotent: true, ProducerID: 4242,
			ProducerEpoch: 3, BaseSequence: 100, Transactional: true, Records: recs})
		if err != nil {
			t.Fatal(err)
		}
		want := recordsOf(t, in)
		for _, to := range allCodecs {
			keep := bytes.Clone(in)
			out, err := Recompress(in, to, DefaultLevels, DefaultMaxDecompressed)
			if err != nil {
				t.Fatalf("%s -> %s: %v", from, to, err)
			}
			if !bytes.Equal(in, keep) {
				t.Fatalf("%s -> %s: input modified", from, to)
			}
			h, err := ValidateBatch(out)
			if err != nil {
				t.Fatalf("%s -> %s: %v", from, to, err)
			}
			hin, _ := ParseHeader(in)
			if h.Compression() != to {
				t.Errorf("%s -> %s: codec %s", from, to, h.Compression())
			}
			hin.BatchLength, hin.CRC, hin.Attributes = h.BatchLength, h.CRC, hin.Attributes&^attrCompressionMask|int16(to)
			if h != hin {
				t.Errorf("%s -> %s: header %+v, want %+v", from, to, h, hin)
			}
			if !h.Transactional() || h.ProducerID != 4242 || h.ProducerEpoch != 3 || h.BaseSequence != 100 {
				t.Errorf("%s -> %s: producer fields %+v", from, to, h)
			}
			if got := recordsOf(t, out); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s -> %s: records differ", from, to)
			}
			if from == to && &out[0] != &in[0] {
				t.Errorf("%s -> %s: a batch already in the codec was copied", from, to)
			}
		}
	}
}

// TestRecompressRefusesBombs: a batch whose records decompress past the
// bound is ErrTooLarge (ErrCorrupt), not decompressed whole.
func TestRecompressRefusesBombs(t *testing.T) {
	big := []Record{{Value: make([]byte, 1<<20)}}
	in, err := BuildBatch(BatchSpec{Codec: CodecZstd, Records: big})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Recompress(in, CodecGzip, DefaultLevels, 64<<10)
	if !errors.Is(err, ErrTooLarge) || !IsCorrupt(err) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	if _, err := Recompress(in[:len(in)-1], CodecGzip, DefaultLevels, DefaultMaxDecompressed); err == nil {
		t.Fatal("a cut batch recompressed")
	}
}

// TestCompressLevels: every codec at the ends of Kafka's level ranges
// compresses to what Decompress reads back; a higher level is not larger
// on compressible data; out-of-range levels fail.
func TestCompressLevels(t *testing.T) {
	in := compressible(256 << 10)
	for _, tc := range []struct {
		codec    Codec
		low, hig Levels
	}{
		{CodecGzip, Levels{Gzip: GzipMinLevel, LZ4: 9, Zstd: 3}, Levels{Gzip: GzipMaxLevel, LZ4: 9, Zstd: 3}},
		{CodecLZ4, Levels{Gzip: -1, LZ4: LZ4MinLevel, Zstd: 3}, Levels{Gzip: -1, LZ4: LZ4MaxLevel, Zstd: 3}},
		{CodecZstd, Levels{Gzip: -1, LZ4: 9, Zstd: ZstdMinLevel}, Levels{Gzip: -1, LZ4: 9, Zstd: ZstdMaxLevel}},
	} {
		var sizes []int
		for _, lv := range []Levels{tc.low, DefaultLevels, tc.hig} {
			out, err := CompressLevels(tc.codec, in, lv)
			if err != nil {
				t.Fatalf("%s %+v: %v", tc.codec, lv, err)
			}
			back, err := Decompress(tc.codec, out)
			if err != nil || !bytes.Equal(back, in) {
				t.Fatalf("%s %+v: round trip: %v", tc.codec, lv, err)
			}
			sizes = append(sizes, len(out))
		}
		t.Logf("%s: %d bytes at the lowest level, %d at the default, %d at the highest", tc.codec, sizes[0], sizes[1], sizes[2])
		if sizes[2] > sizes[0] {
			t.Errorf("%s: highest level %d bytes, lowest %d", tc.codec, sizes[2], sizes[0])
		}
	}
	if _, err := CompressLevels(CodecGzip, in, Levels{Gzip: 10, LZ4: 9, Zstd: 3}); err == nil {
		t.Error("gzip level 10 accepted")
	}
	if _, err := CompressLevels(CodecLZ4, in, Levels{Gzip: -1, LZ4: 18, Zstd: 3}); err == nil {
		t.Error("lz4 level 18 accepted")
	}
}
