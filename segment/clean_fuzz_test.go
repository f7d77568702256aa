package segment

import (
	"bytes"
	"testing"
)

// FuzzCleanFilter feeds arbitrary bytes to the cleaner's batch filter with
// a map of the batch's own keys. Invariants: it never panics; a batch that
// does not validate is an error, never output; what it outputs is empty or
// one batch that validates (CRC included) and decodes, with the input's
// base offset, last offset, producer id, epoch and base sequence; its
// records are a subsequence of the input's, each unchanged, and include
// every record at or above the mapped end and every key's latest record
// that is not a tombstone.
func FuzzCleanFilter(f *testing.F) {
	for _, codec := range ctCodecs {
		b, err := BuildBatch(BatchSpec{BaseOffset: 10, Codec: codec, Idempotent: true, ProducerID: 4, ProducerEpoch: 1, BaseSequence: 9, Records: []Record{
			{Timestamp: 5, Key: []byte("a"), Value: []byte("1")},
			{Timestamp: 3, Key: []byte("b")},
			{Timestamp: 9, Key: []byte("a"), Value: []byte("2"), Headers: []RecordHeader{{Key: "h", Value: nil}}},
			{Timestamp: 7, Value: []byte("keyless")},
		}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, int64(12), int64(0), false)
		f.Add(b, int64(100), int64(1<<40), true)
	}
	f.Fuzz(func(t *testing.T, b []byte, end, nowMs int64, lastOfProducer bool) {
		h, err := ValidateBatch(b)
		if err != nil || len(b) != h.Size() {
			return
		}
		in, err := Records(b)
		if err != nil {
			return
		}
		m, err := NewOffsetMap(24*64, 0.9)
		if err != nil {
			t.Fatal(err)
		}
		latest := map[string]int64{}
		for _, r := range in {
			if r.Key != nil && r.Offset < end {
				m.Put(r.Key, r.Offset)
				latest[string(r.Key)] = r.Offset
			}
		}
		var res CleanResult
		flt := &batchFilter{m: m, end: end, nowMs: nowMs, deleteRetentionMs: 1000, lastOfProducer: map[int64]int64{},
			maxDecompressed: DefaultMaxDecompressed, stats: &res}
		if lastOfProducer {
			flt.lastOfProducer[h.ProducerID] = h.LastOffset()
		}
		out, err := flt.filter(nil, b, h)
		if err != nil {
			return // the records did not decode a second time: impossible, but not a crash
		}
		if len(out) == 0 {
			for _, r := range in {
				if r.Offset >= end || (r.Key != nil && r.Value != nil && latest[string(r.Key)] == r.Offset) {
					t.Fatalf("record at %d dropped with the whole batch", r.Offset)
				}
			}
			return
		}
		oh, err := ValidateBatch(out)
		if err != nil || oh.Size() != len(out) {
			t.Fatalf("output batch invalid: %v (%d bytes, header says %d)", err, len(out), oh.Size())
		}
		if oh.BaseOffset != h.BaseOffset || oh.LastOffset() != h.LastOffset() || oh.ProducerID != h.ProducerID ||
			oh.ProducerEpoch != h.ProducerEpoch || oh.BaseSequence != h.BaseSequence || oh.Control() != h.Control() || oh.Transactional() != h.Transactional() {
			t.Fatalf("output header %+v does not keep the input's %+v", oh, h)
		}
		outRecs, err := Records(out)
		if err != nil {
			t.Fatalf("output records: %v", err)
		}
		j := 0
		for _, r := range in {
			mustKeep := r.Offset >= end || h.Control() || (r.Key != nil && r.Value != nil && latest[string(r.Key)] == r.Offset)
			if j < len(outRecs) && outRecs[j].Offset == r.Offset {
				o := outRecs[j]
				if !bytes.Equal(o.Key, r.Key) || !bytes.Equal(o.Value, r.Value) || (o.Value == nil) != (r.Value == nil) ||
					(o.Timestamp != r.Timestamp && !h.LogAppendTime()) || len(o.Headers) != len(r.Headers) {
					t.Fatalf("record at %d changed: %+v, was %+v", r.Offset, o, r)
				}
				j++
			} else if mustKeep {
				t.Fatalf("record at %d dropped", r.Offset)
			}
		}
		if j != len(outRecs) {
			t.Fatalf("output has %d records not in the input", len(outRecs)-j)
		}
	})
}
