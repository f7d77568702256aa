package segment

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// fuzzSeeds adds batches built in every codec; testdata/fuzz holds more,
// captured from franz-go and sarama.
func fuzzSeeds(f *testing.F) {
	recs := []Record{
		{Timestamp: 1000, Key: []byte("k"), Value: []byte("v"), Headers: []RecordHeader{{Key: "h", Value: nil}}},
		{Timestamp: 900, Key: nil, Value: []byte{}},
		{Timestamp: 1100, Value: bytes.Repeat([]byte("xy"), 100)},
	}
	for _, codec := range allCodecs {
		for _, spec := range []BatchSpec{
			{BaseOffset: 3, Codec: codec, Records: recs},
			{BaseOffset: 7, Codec: codec, KeepOffsets: true, LastOffsetDelta: 9, Records: []Record{{Offset: 8, Timestamp: 5}}},
			{Codec: codec, LogAppendTime: 77, Idempotent: true, ProducerID: 4, Records: recs[:1]},
		} {
			b, err := BuildBatch(spec)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
}

// FuzzValidateBatch checks that ValidateBatch never panics and that a batch
// it accepts stays valid and reads the same after the in-place rewrites a
// broker applies (base offset, leader epoch, log append time), and alone.
func FuzzValidateBatch(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ValidateBatch(data)
		if err != nil {
			if !IsCorrupt(err) {
				t.Fatalf("error %v is not corruption", err)
			}
			return
		}
		if h.Size() > len(data) || h.Size() < HeaderSize {
			t.Fatalf("size %d, given %d bytes", h.Size(), len(data))
		}
		batch := bytes.Clone(data[:h.Size()])
		if h2, err := ValidateBatch(batch); err != nil || h2 != h {
			t.Fatalf("alone: got %+v, %v; want %+v", h2, err, h)
		}
		if h2, err := ParseHeader(batch); err != nil || h2 != h {
			t.Fatalf("ParseHeader: got %+v, %v; want %+v", h2, err, h)
		}
		n := 0
		if err := SplitBatches(batch, func(h2 Header, b []byte) error {
			n++
			if h2 != h || len(b) != len(batch) {
				t.Fatalf("SplitBatches: got %+v (%d bytes), want %+v (%d)", h2, len(b), h, len(batch))
			}
			return nil
		}); err != nil || n != 1 {
			t.Fatalf("SplitBatches: %d batches, %v", n, err)
		}

		SetBaseOffset(batch, h.BaseOffset+1000)
		SetPartitionLeaderEpoch(batch, h.PartitionLeaderEpoch+1)
		SetLogAppendTime(batch, 12345)
		h2, err := ValidateBatch(batch)
		if err != nil {
			t.Fatalf("after rewrites: %v", err)
		}
		want := h
		want.BaseOffset += 1000
		want.PartitionLeaderEpoch++
		want.Attributes |= attrTimestampType
		want.MaxTimestamp = 12345
		want.CRC = h2.CRC
		if h2 != want {
			t.Fatalf("after rewrites: got %+v, want %+v", h2, want)
		}
		// Records must not panic on anything ValidateBatch accepts.
		_, _ = Records(data[:h.Size()])
	})
}

// FuzzRecords checks that Records never panics and that a batch it accepts
// re-encodes (BuildBatch, uncompressed and in its own codec) to a batch that
// decodes to the same header fields and the same records. It first sets the
// batch length and CRC to match the input, so that mutations reach the
// records section instead of stopping at the CRC check (FuzzValidateBatch
// covers those fields).
func FuzzRecords(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) >= HeaderSize {
			data = bytes.Clone(data)
			binary.BigEndian.PutUint32(data[offBatchLength:], uint32(len(data)-LogOverhead))
			binary.BigEndian.PutUint32(data[offCRC:], crc32c(data[offAttributes:]))
		}
		recs, err := Records(data)
		if err != nil {
			if !IsCorrupt(err) {
				t.Fatalf("error %v is not corruption", err)
			}
			return
		}
		h, _ := ParseHeader(data)
		if len(recs) != int(h.RecordCount) {
			t.Fatalf("got %d records, header says %d", len(recs), h.RecordCount)
		}
		for i, r := range recs {
			if r.Offset < h.BaseOffset || r.Offset > h.LastOffset() || i > 0 && r.Offset <= recs[i-1].Offset {
				t.Fatalf("record %d: offset %d in batch %d..%d after %+v", i, r.Offset, h.BaseOffset, h.LastOffset(), recs[max(i-1, 0)])
			}
		}
		for _, codec := range []Codec{CodecNone, h.Compression()} {
			spec := BatchSpec{
				BaseOffset:           h.BaseOffset,
				PartitionLeaderEpoch: h.PartitionLeaderEpoch,
				Codec:                codec,
				Idempotent:           true,
				ProducerID:           h.ProducerID,
				ProducerEpoch:        h.ProducerEpoch,
				BaseSequence:         h.BaseSequence,
				Transactional:        h.Transactional(),
				Control:              h.Control(),
				KeepOffsets:          true,
				LastOffsetDelta:      h.LastOffsetDelta,
				Records:              recs,
			}
			b, err := BuildBatch(spec)
			if err != nil {
				t.Fatalf("%s: BuildBatch: %v", codec, err)
			}
			recs2, err := Records(b)
			if err != nil {
				t.Fatalf("%s: re-encoded batch: %v", codec, err)
			}
			h2, _ := ParseHeader(b)
			if h2.BaseOffset != h.BaseOffset || h2.PartitionLeaderEpoch != h.PartitionLeaderEpoch ||
				h2.LastOffsetDelta != h.LastOffsetDelta || h2.RecordCount != h.RecordCount ||
				h2.ProducerID != h.ProducerID || h2.ProducerEpoch != h.ProducerEpoch || h2.BaseSequence != h.BaseSequence ||
				h2.Transactional() != h.Transactional() || h2.Control() != h.Control() {
				t.Fatalf("%s: re-encoded header %+v, original %+v", codec, h2, h)
			}
			if len(recs2) != len(recs) {
				t.Fatalf("%s: got %d records back, want %d", codec, len(recs2), len(recs))
			}
			for i := range recs {
				if err := sameRecord(recs2[i], recs[i]); err != nil || recs2[i].Offset != recs[i].Offset {
					t.Fatalf("%s: record %d: %v (offset %d, want %d)", codec, i, err, recs2[i].Offset, recs[i].Offset)
				}
			}
		}
	})
}
