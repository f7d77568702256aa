package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// Tests of the cleaner's fast paths (clean_scan.go): scanRecords against
// RecordIter, scanRecordFast against scanRecord, and the batch filter's
// copying of kept records against re-encoding them (refFilter, the filter
// as it was before the fast paths: decode every record, re-encode the kept
// ones with appendRecord).

// refFilter is batchFilter.filter by decoding and re-encoding: the
// reference the fast filter must match.
func refFilter(f *batchFilter, dst, b []byte, h Header) ([]byte, error) {
	f.stats.RecordsRead += int64(h.RecordCount)
	if h.Control() || h.BaseOffset >= f.end {
		f.stats.RecordsKept += int64(h.RecordCount)
		return append(dst, b...), nil
	}
	all, err := Records(b)
	if err != nil {
		return dst, err
	}
	horizon, hasHorizon := h.DeleteHorizon()
	retainDeletes := !hasHorizon || f.nowMs < horizon
	var kept []Record
	tombstoneKept := false
	for _, rec := range all {
		if rec.Offset < f.end {
			switch {
			case rec.Key == nil:
				f.stats.KeylessDropped++
				continue
			case rec.Offset < f.m.Get(rec.Key):
				continue
			case rec.Value == nil && !retainDeletes:
				f.stats.TombstonesRemoved++
				continue
			}
		}
		tombstoneKept = tombstoneKept || rec.Value == nil
		kept = append(kept, rec)
	}
	f.stats.RecordsKept += int64(len(kept))
	setHorizon := tombstoneKept && !hasHorizon
	switch {
	case len(kept) == 0:
		if !h.HasProducerID() || f.lastOfProducer[h.ProducerID] != h.LastOffset() {
			return dst, nil
		}
		f.stats.EmptyBatchesKept++
		if h.RecordCount == 0 {
			return append(dst, b...), nil
		}
		return appendEmptyBatch(dst, h), nil
	case len(kept) == len(all) && !setHorizon:
		return append(dst, b...), nil
	}
	if setHorizon {
		horizon, hasHorizon = f.nowMs+f.deleteRetentionMs, true
		if f.deleteRetentionMs > math.MaxInt64-f.nowMs {
			horizon = math.MaxInt64
		}
	}
	attrs := uint16(h.Attributes) &^ attrDeleteHorizon
	baseTS := kept[0].Timestamp
	if h.LogAppendTime() {
		baseTS = h.BaseTimestamp
	}
	if hasHorizon {
		attrs |= attrDeleteHorizon
		baseTS = horizon
	}
	maxTS := int64(-1)
	var recs []byte
	for _, r := range kept {
		maxTS = max(maxTS, r.Timestamp)
		recs = appendRecord(recs, r, r.Timestamp-baseTS, r.Offset-h.BaseOffset)
	}
	if h.LogAppendTime() {
		maxTS = h.MaxTimestamp
	}
	body := recs
	if c := h.Compression(); c != CodecNone {
		if body, err = Compress(c, recs); err != nil {
			return dst, err
		}
	}
	start := len(dst)
	dst = appendBatchHeader(dst, h, attrs, baseTS, maxTS, int32(len(kept)), len(body))
	dst = append(dst, body...)
	binary.BigEndian.PutUint32(dst[start+offCRC:], crc32.Checksum(dst[start+offAttributes:], castagnoli))
	return dst, nil
}

// scRandomBatch is a random batch: random codec, producer, timestamp type,
// timestamps going back and forth (negative deltas), keys from a small set,
// keyless records, tombstones, headers, offset gaps.
func scRandomBatch(t testing.TB, rng *rand.Rand, base int64) []byte {
	n := 1 + rng.IntN(12)
	recs := make([]Record, n)
	off := base
	ts := int64(1_700_000_000_000) + rng.Int64N(1000)
	for i := range recs {
		r := Record{Offset: off, Timestamp: ts + rng.Int64N(2000) - 1000}
		if rng.IntN(8) != 0 {
			r.Key = fmt.Appendf(nil, "k%d", rng.IntN(6))
		}
		switch rng.IntN(5) {
		case 0: // tombstone
		case 1:
			r.Value = []byte{}
		default:
			r.Value = bytes.Repeat([]byte{byte('a' + rng.IntN(26))}, rng.IntN(300))
		}
		for range rng.IntN(3) {
			var v []byte
			if rng.IntN(3) != 0 {
				v = fmt.Appendf(nil, "hv%d", rng.IntN(100))
			}
			r.Headers = append(r.Headers, RecordHeader{Key: fmt.Sprintf("h%d", rng.IntN(3)), Value: v})
		}
		recs[i] = r
		off += 1 + int64(rng.IntN(3))
	}
	spec := BatchSpec{BaseOffset: base, Codec: ctCodecs[rng.IntN(len(ctCodecs))], Records: recs, KeepOffsets: true}
	if rng.IntN(2) == 0 {
		spec.Idempotent, spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = true, int64(rng.IntN(3)), 1, int32(rng.IntN(100))
	}
	if rng.IntN(4) == 0 {
		spec.LogAppendTime = ts + 5000
	}
	if rng.IntN(4) == 0 {
		spec.LastOffsetDelta = int32(off-base) + int32(rng.IntN(3))
	}
	b, err := BuildBatch(spec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCleanFilterCopyMatchesReencode runs the batch filter and refFilter
// over random batches with random maps, mapped ends, clocks and producers'
// last batches, twice (the second pass sees the delete horizons the first
// set): the outputs are byte for byte the same (BuildBatch encodes
// canonically, so copying a kept record's bytes gives what re-encoding
// gives), valid (CRC included), and the counts agree.
func TestCleanFilterCopyMatchesReencode(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 5))
	m, err := NewOffsetMap(24*1024, 0.9)
	if err != nil {
		t.Fatal(err)
	}
	rewritten := 0
	for iter := range 400 {
		var batches [][]byte
		base := int64(rng.IntN(1000))
		for range 1 + rng.IntN(8) {
			b := scRandomBatch(t, rng, base)
			h, _ := ParseHeader(b)
			base = h.NextOffset()
			batches = append(batches, b)
		}
		m.Clear()
		end := int64(rng.IntN(int(base) + 10))
		lastOf := map[int64]int64{}
		for _, b := range batches {
			h, _ := ParseHeader(b)
			if _, err := m.MapBatch(b, h, 0, 0); err != nil {
				t.Fatal(err)
			}
			if h.HasProducerID() && rng.IntN(2) == 0 {
				lastOf[h.ProducerID] = h.LastOffset()
			}
		}
		now := int64(1_700_000_000_000) + rng.Int64N(10_000)
		for pass := range 2 {
			var fastRes, refRes CleanResult
			fast := &batchFilter{m: m, end: end, nowMs: now, deleteRetentionMs: int64(rng.IntN(5000)), lastOfProducer: lastOf, maxDecompressed: DefaultMaxDecompressed, stats: &fastRes, validated: pass == 0}
			ref := *fast
			ref.stats = &refRes
			var next [][]byte
			for i, b := range batches {
				h, err := ValidateBatch(b)
				if err != nil {
					t.Fatalf("iter %d pass %d batch %d: %v", iter, pass, i, err)
				}
				got, err := fast.filter(nil, b, h)
				if err != nil {
					t.Fatalf("iter %d pass %d batch %d: fast filter: %v", iter, pass, i, err)
				}
				want, err := refFilter(&ref, nil, b, h)
				if err != nil {
					t.Fatalf("iter %d pass %d batch %d: reference filter: %v", iter, pass, i, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("iter %d pass %d batch %d (%s): copied\n%x\nre-encoded\n%x", iter, pass, i, h.Compression(), got, want)
				}
				if fast.rewrote {
					rewritten++
				}
				if len(got) > 0 {
					if oh, err := ValidateBatch(got); err != nil || oh.Size() != len(got) {
						t.Fatalf("iter %d pass %d batch %d: output invalid: %v", iter, pass, i, err)
					}
					if _, err := Records(got); err != nil {
						t.Fatalf("iter %d pass %d batch %d: output records: %v", iter, pass, i, err)
					}
					next = append(next, got)
				}
			}
			if !reflect.DeepEqual(fastRes, refRes) {
				t.Fatalf("iter %d pass %d: counts %+v, reference %+v", iter, pass, fastRes, refRes)
			}
			batches = next
			now += int64(rng.IntN(10_000))
		}
	}
	if rewritten < 100 {
		t.Fatalf("only %d batches rewritten: the copy path was hardly tested", rewritten)
	}
	t.Logf("%d batches rewritten", rewritten)
}

// TestAppendSplicedNonCanonical: a record whose fields use non-minimal
// varints (which RecordIter accepts) and a non-zero attributes byte keeps
// them when copied; only the timestamp delta is re-encoded, and the record
// decodes to the same fields.
func TestAppendSplicedNonCanonical(t *testing.T) {
	// length, attrs 0x05, ts delta 3 as a two-byte varint, offset delta 0,
	// key "k" with a two-byte length, value "v", no headers.
	body := []byte{0x05, 0x86, 0x00, 0x00, 0x82, 0x00, 'k', 0x02, 'v', 0x00}
	rec := append(binary.AppendVarint(nil, int64(len(body))), body...)
	b := recordsBatch(1, 0, rec)
	h, err := ValidateBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := scanRecords(&h, b[HeaderSize:], nil)
	if err != nil || len(recs) != 1 {
		t.Fatalf("scan: %v %v", recs, err)
	}
	data := b[HeaderSize:]
	if got := appendSpliced(nil, data, &recs[0], 3); !bytes.Equal(got, rec) {
		t.Fatalf("unchanged delta: %x, want the record verbatim %x", got, rec)
	}
	got := appendSpliced(nil, data, &recs[0], -70)
	nb := recordsBatch(1, 0, got)
	nr, err := Records(nb)
	if err != nil {
		t.Fatal(err)
	}
	if string(nr[0].Key) != "k" || string(nr[0].Value) != "v" || nr[0].Timestamp != -70 || nr[0].Offset != 0 {
		t.Fatalf("spliced record decodes as %+v", nr[0])
	}
	if got[1] != 0x05 || !bytes.Equal(got[len(got)-7:], body[3:]) {
		t.Fatalf("spliced record %x does not keep the attributes and the fields after the delta verbatim", got)
	}
}

// scCompare checks scanRecords on the records section of batch b against
// RecordIter and scanRecordFast against scanRecord.
func scCompare(t *testing.T, b []byte) {
	h, err := ValidateBatch(b)
	if err != nil || len(b) != h.Size() {
		return
	}
	data, err := DecompressLimit(h.Compression(), b[HeaderSize:], DefaultMaxDecompressed)
	if err != nil {
		return
	}
	want, wantErr := Records(b)
	got, gotErr := scanRecords(&h, data, nil)
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("RecordIter: %v; scanRecords: %v", wantErr, gotErr)
	}
	if wantErr != nil {
		if wantErr.Error() != gotErr.Error() {
			t.Fatalf("RecordIter: %v; scanRecords: %v", wantErr, gotErr)
		}
		for _, e := range []error{ErrBadRecord, ErrRecordCount} {
			if errors.Is(wantErr, e) != errors.Is(gotErr, e) {
				t.Fatalf("RecordIter: %v; scanRecords: %v", wantErr, gotErr)
			}
		}
	} else if len(got) != len(want) {
		t.Fatalf("%d records, RecordIter %d", len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		g, w := got[i], want[i]
		if g.off != w.Offset || g.ts != w.Timestamp || g.keyless != (w.Key == nil) || g.nullVal != (w.Value == nil) {
			t.Fatalf("record %d: %+v, RecordIter %+v", i, g, w)
		}
		if w.Key != nil && g.hash != hashKey(w.Key) {
			t.Fatalf("record %d: hash of another key", i)
		}
		if spliced := appendSpliced(nil, data, &g, g.tsDelta); !bytes.Equal(spliced, data[g.start:g.end]) {
			t.Fatalf("record %d: copied %x, stored %x", i, spliced, data[g.start:g.end])
		}
	}
	// Record by record, the fast walk and the checked walk agree.
	lastDelta := int64(-1)
	for pos := 0; pos < len(data); {
		var fr, cr cleanRec
		n, ok := scanRecordFast(&h, data, pos, lastDelta, &fr)
		cn, err := scanRecord(&h, data, pos, lastDelta, &cr)
		if ok != (err == nil) {
			t.Fatalf("at %d: fast ok %v, checked: %v", pos, ok, err)
		}
		if !ok {
			break
		}
		if n != cn || fr != cr {
			t.Fatalf("at %d: fast %+v (%d bytes), checked %+v (%d bytes)", pos, fr, n, cr, cn)
		}
		lastDelta = fr.off
		pos += n
	}
}

// FuzzScanRecords: on any batch, scanRecords accepts exactly what
// RecordIter accepts, with the same error, and reads the same offsets,
// timestamps, keys and nulls; scanRecordFast accepts exactly what
// scanRecord accepts, with the same result; a record copied unchanged is
// its stored bytes.
func FuzzScanRecords(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		f.Add(scRandomBatch(f, rng, int64(rng.IntN(100))))
	}
	attrs := []byte{0}
	for _, recs := range [][]byte{
		rawRecord(attrs, 0, 0, 1, []byte("k"), 1, []byte("v"), 0),
		rawRecord(attrs, 0, 0, -1, -1, 1, 1, []byte("h"), -1),
		rawRecord(attrs, 0, 0, 1, []byte("k"), 1, []byte("v"), 1, -1, -1), // null header key
		rawRecord(attrs, 0, 1, 1, []byte("k"), 1, []byte("v"), 0),         // offset delta beyond the last
		append(rawRecord(attrs, 0, 0, -1, -1, 0), 0x00),                   // a byte after the last record
		rawRecord(attrs, 0, 0, 5, []byte("k"), -1, 0),                     // key longer than the record
	} {
		f.Add(recordsBatch(1, 0, recs))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		scCompare(t, b)
		// Also the same bytes as an uncompressed batch's records section,
		// whatever its header said.
		if len(b) > HeaderSize {
			for _, count := range []int32{1, 3} {
				scCompare(t, recordsBatch(count, 4, b[HeaderSize:]))
			}
		}
	})
}

// BenchmarkScanRecords: the per-record walk of both passes, on batches of
// ten records with 12-byte keys and 100-byte values (BenchmarkClean's).
func BenchmarkScanRecords(b *testing.B) {
	recs := make([]Record, 10)
	for i := range recs {
		recs[i] = Record{Timestamp: 1_700_000_000_000, Key: fmt.Appendf(nil, "key-%08d", i), Value: bytes.Repeat([]byte("x"), 100)}
	}
	batch, err := BuildBatch(BatchSpec{Records: recs})
	if err != nil {
		b.Fatal(err)
	}
	h, err := ValidateBatch(batch)
	if err != nil {
		b.Fatal(err)
	}
	var scan []cleanRec
	b.SetBytes(int64(len(batch)))
	for b.Loop() {
		if scan, err = scanRecords(&h, batch[HeaderSize:], scan[:0]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
}

// TestOffsetMapGrows fills maps of several sizes and load factors to
// capacity, through every growth of the table, with keys put again at
// lower and higher offsets: after each growth and at the end every key
// reads its largest offset, absent keys read -1, and a new key is refused
// exactly at Capacity(), as with a table of the full size from the start.
func TestOffsetMapGrows(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for _, tc := range []struct {
		slots int
		load  float64
	}{{100_000, 0.9}, {50_000, 1}, {30_000, 0.05}, {20_000, 0.5}, {16, 0.9}} {
		m, err := NewOffsetMap(24*tc.slots, tc.load)
		if err != nil {
			t.Fatal(err)
		}
		for round := range 2 {
			if round == 1 {
				m.clearFor(int64(tc.slots / 3)) // a smaller full size
			}
			want := map[string]int64{}
			growths, lastSlots := 0, m.nslots
			check := func() {
				for k, off := range want {
					if got := m.Get([]byte(k)); got != off {
						t.Fatalf("%+v round %d: key %q reads %d, want %d (size %d, %d slots)", tc, round, k, got, off, m.Size(), m.nslots)
					}
				}
				if got := m.Get([]byte("absent")); got != -1 {
					t.Fatalf("absent key reads %d", got)
				}
			}
			for i := 0; len(want) < m.Capacity(); i++ {
				k := fmt.Sprintf("key-%d", i)
				off := rng.Int64N(1 << 40)
				if !m.Put([]byte(k), off) {
					t.Fatalf("%+v: Put #%d refused at size %d of %d", tc, i, m.Size(), m.Capacity())
				}
				want[k] = off
				if rng.IntN(4) == 0 { // an older key again, higher or lower
					old := fmt.Sprintf("key-%d", rng.IntN(i+1))
					off := rng.Int64N(1 << 40)
					if !m.Put([]byte(old), off) {
						t.Fatalf("Put of known key %q refused", old)
					}
					want[old] = max(want[old], off)
				}
				if m.nslots != lastSlots {
					growths++
					lastSlots = m.nslots
					check()
				}
			}
			check()
			if m.Size() != len(want) || m.nslots != m.maxSlots {
				t.Fatalf("%+v: size %d, want %d; %d slots of %d", tc, m.Size(), len(want), m.nslots, m.maxSlots)
			}
			if m.Put([]byte("one more"), 1) {
				t.Fatalf("%+v: new key accepted when full", tc)
			}
			if tc.slots >= 20_000 && round == 0 && growths == 0 {
				t.Fatalf("%+v: the table never grew", tc)
			}
			t.Logf("%+v round %d: %d keys, %d growths, %d slots", tc, round, m.Size(), growths, m.nslots)
		}
	}
}
