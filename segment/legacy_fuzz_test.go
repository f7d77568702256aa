package segment

import (
	"bytes"
	"errors"
	"testing"
)

// legacyFuzzSeeds adds message sets of both magics in every codec, as
// DownConvert writes them and as old producers write them.
func legacyFuzzSeeds(f *testing.F) {
	for _, codec := range legacyCodecs {
		batch, err := BuildBatch(BatchSpec{BaseOffset: 10, Codec: codec, KeepOffsets: true, LastOffsetDelta: 8, Records: legacyTestRecords()})
		if err != nil {
			f.Fatal(err)
		}
		for _, magic := range []int8{0, 1} {
			dc, err := DownConvert(batch, DownConvertOptions{Magic: magic, Limit: 1 << 20, MaxDecompressed: DefaultMaxDecompressed})
			if err != nil {
				f.Fatal(err)
			}
			f.Add(dc.Set)
		}
	}
	f.Add(new(legacySet).msg(0, 0, 0, 0, []byte("k"), []byte("v")).msg(1, 1, legacyAttrLogAppend, 7, nil, nil).b)
}

// FuzzParseLegacy checks that ParseLegacy never panics, fails only with
// corruption or ErrLegacyZstd, and that what it accepts converts to a
// valid v2 batch holding the same keys, values and timestamps, which
// converts back down and parses to the same records.
func FuzzParseLegacy(f *testing.F) {
	legacyFuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := ParseLegacy(data, 1<<20)
		if err != nil {
			if !IsCorrupt(err) && !errors.Is(err, ErrLegacyZstd) {
				t.Fatalf("error %v is neither corruption nor zstd", err)
			}
			return
		}
		if len(data) > 0 && (set.Messages == 0 || len(set.Records) == 0) {
			t.Fatalf("%d bytes accepted as %d messages, %d records", len(data), set.Messages, len(set.Records))
		}
		if len(set.Records) == 0 {
			return
		}
		up, err := ConvertLegacy(set, set.Codec)
		if err != nil {
			t.Fatalf("ConvertLegacy: %v", err)
		}
		recs, err := Records(up)
		if err != nil || len(recs) != len(set.Records) {
			t.Fatalf("converted batch: %d records, %v; want %d", len(recs), err, len(set.Records))
		}
		for i, r := range recs {
			want := set.Records[i]
			ts := want.Timestamp
			if want.Magic == 0 {
				ts = -1
			}
			if r.Timestamp != ts || !sameBytes(r.Key, want.Key) || !sameBytes(r.Value, want.Value) {
				t.Fatalf("record %d: got %+v, want %+v", i, r, want)
			}
		}
		down, err := DownConvert(up, DownConvertOptions{Magic: 1, Limit: 1 << 30, MaxDecompressed: 1 << 22})
		if err != nil {
			t.Fatalf("DownConvert: %v", err)
		}
		again, err := ParseLegacy(down.Set, 1<<22)
		if err != nil || len(again.Records) != len(recs) {
			t.Fatalf("down again: %d records, %v", len(again.Records), err)
		}
		for i, r := range again.Records {
			if r.Offset != int64(i) || r.Timestamp != recs[i].Timestamp || !sameBytes(r.Key, recs[i].Key) || !sameBytes(r.Value, recs[i].Value) {
				t.Fatalf("down again %d: got %+v, want %+v", i, r, recs[i])
			}
		}
	})
}

// FuzzDownConvert checks that DownConvert never panics on any bytes and
// limit, fails only with corruption or ErrLegacyZstd, stays within the
// limit unless MinOne keeps a first message, and writes sets that parse
// (all of a whole set; the whole messages before a partial one).
func FuzzDownConvert(f *testing.F) {
	for i, codec := range allCodecs {
		b, err := BuildBatch(BatchSpec{BaseOffset: 10, Codec: codec, KeepOffsets: true, LastOffsetDelta: 8, LogAppendTime: int64(i % 2), Records: legacyTestRecords()})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, i%2 == 0, uint16(1000), i%3 == 0, uint8(12))
		f.Add(b, i%2 == 1, uint16(60), i%3 == 1, uint8(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, magic bool, limit uint16, minOne bool, fetchOffset uint8) {
		opt := DownConvertOptions{Limit: int(limit), MinOne: minOne, FetchOffset: int64(fetchOffset), MaxDecompressed: 1 << 20}
		if magic {
			opt.Magic = 1
		}
		dc, err := DownConvert(data, opt)
		if err != nil {
			if !IsCorrupt(err) && !errors.Is(err, ErrLegacyZstd) {
				t.Fatalf("error %v is neither corruption nor zstd", err)
			}
			return
		}
		if len(dc.Set) > opt.Limit && (!minOne || dc.Partial) {
			t.Fatalf("%d bytes past limit %d (minOne %v)", len(dc.Set), opt.Limit, minOne)
		}
		if dc.NextOffset < opt.FetchOffset {
			t.Fatalf("next offset %d below fetch offset %d", dc.NextOffset, opt.FetchOffset)
		}
		whole := dc.Set
		if dc.Partial {
			whole = wholeLegacyPrefix(whole)
		}
		set, err := ParseLegacy(whole, 1<<22)
		if err != nil {
			t.Fatalf("converted set does not parse: %v", err)
		}
		if !dc.Partial && len(set.Records) != dc.Records {
			t.Fatalf("parsed %d records, DownConvert says %d", len(set.Records), dc.Records)
		}
		for i := 1; i < len(set.Records); i++ {
			if set.Records[i].Offset <= set.Records[i-1].Offset {
				t.Fatalf("offsets %d then %d", set.Records[i-1].Offset, set.Records[i].Offset)
			}
		}
		if !bytes.Equal(whole, dc.Set[:len(whole)]) {
			t.Fatal("prefix changed")
		}
	})
}

// wholeLegacyPrefix returns the whole messages at the start of set.
func wholeLegacyPrefix(set []byte) []byte {
	n := 0
	for {
		m, err := parseLegacyMessage(set[n:])
		if err != nil {
			return set[:n]
		}
		n += m.size
	}
}
