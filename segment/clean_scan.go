package segment

import (
	"encoding/binary"
	"fmt"
	"math"
)

// The cleaner's per-record work. Both passes of a cleaning (the offset map,
// then the filter) need of each record only its offset, its key's hash,
// whether it is keyless or a tombstone, and, for the filter, its timestamp
// and where its bytes lie: scanRecords walks the records' varints for that,
// with RecordIter's checks but without building Records, allocating header
// slices or hashing a key twice, and the filter copies a kept record's
// bytes instead of re-encoding its fields (see batchFilter.appendRewritten).

// cleanRec is one record as the cleaner sees it. start, tsEnd and end are
// positions in the batch's (decompressed) records section: the record is
// data[start:end], its fields after the timestamp delta (offset delta, key,
// value, headers) are data[tsEnd:end], and its attributes byte is
// data[attrs].
type cleanRec struct {
	hash    keyHash // of the key; zero when keyless
	off     int64   // absolute offset
	ts      int64   // absolute timestamp (MaxTimestamp for log append time)
	tsDelta int64   // as stored
	start   int32
	attrs   int32
	tsEnd   int32
	end     int32
	// slot is 1 + the offset map slot the map pass put the key in, 0 if
	// none: a hint for the filter pass's lookup (OffsetMap.latestOf), only
	// taken when that slot still holds the key's hash.
	slot    uint32
	keyless bool
	nullVal bool // a tombstone
}

// scanRecords appends to recs the records of data, the records section of
// a batch with header h, hashing each key. It checks what RecordIter does
// (the header's record count, every field's varint and bounds, offset
// deltas increasing up to the last offset delta, no null header key,
// nothing after the last record), with the same errors.
func scanRecords(h *Header, data []byte, recs []cleanRec) ([]cleanRec, error) {
	if len(data) > math.MaxInt32 {
		return recs, fmt.Errorf("%w: records section of batch at base offset %d is %d bytes", ErrBadRecord, h.BaseOffset, len(data))
	}
	lastDelta := int64(-1)
	pos := 0
	for read := int32(0); ; read++ {
		switch {
		case read == h.RecordCount && pos != len(data):
			return recs, fmt.Errorf("%w: %d bytes after record %d of batch at base offset %d", ErrRecordCount, len(data)-pos, read, h.BaseOffset)
		case read == h.RecordCount:
			return recs, nil
		case pos == len(data):
			return recs, fmt.Errorf("%w: header says %d records, batch at base offset %d holds %d", ErrRecordCount, h.RecordCount, h.BaseOffset, read)
		}
		recs = append(recs, cleanRec{})
		r := &recs[len(recs)-1]
		n, ok := scanRecordFast(h, data, pos, lastDelta, r)
		if !ok {
			// Something is off: the checked walk decides, and says what.
			*r = cleanRec{}
			var err error
			if n, err = scanRecord(h, data, pos, lastDelta, r); err != nil {
				return recs[:len(recs)-1], fmt.Errorf("%w: record %d of batch at base offset %d: %s", ErrBadRecord, read, h.BaseOffset, err)
			}
		}
		lastDelta = r.off
		r.off += h.BaseOffset
		if h.LogAppendTime() {
			r.ts = h.MaxTimestamp
		} else {
			r.ts = h.BaseTimestamp + r.tsDelta
		}
		pos += n
	}
}

// scanRecordFast is scanRecord without building error messages: ok is
// false for anything scanRecord would reject (and possibly more; then
// scanRecord decides). The fuzz test FuzzScanRecords holds the two to the
// same answers as RecordIter.
func scanRecordFast(h *Header, data []byte, pos int, lastDelta int64, r *cleanRec) (int, bool) {
	// Each varint: varint12 inline, varintAtSlow past two bytes.
	size, i := varint12(data, pos)
	if i == pos {
		var ok bool
		if size, i, ok = varintAtSlow(data, pos); !ok {
			return 0, false
		}
	}
	if size < 0 || size > int64(len(data)-i) {
		return 0, false
	}
	end := i + int(size)
	b := data[:end]
	if i >= end {
		return 0, false
	}
	r.start, r.attrs = int32(pos), int32(i)
	i++
	j := i
	if r.tsDelta, j = varint12(b, i); j == i {
		var ok bool
		if r.tsDelta, j, ok = varintAtSlow(b, i); !ok {
			return 0, false
		}
	}
	i = j
	r.tsEnd = int32(i)
	offDelta, j := varint12(b, i)
	if j == i {
		var ok bool
		if offDelta, j, ok = varintAtSlow(b, i); !ok {
			return 0, false
		}
	}
	i = j
	if offDelta < 0 || offDelta > int64(h.LastOffsetDelta) || offDelta <= lastDelta {
		return 0, false
	}
	klen, j := varint12(b, i)
	if j == i {
		var ok bool
		if klen, j, ok = varintAtSlow(b, i); !ok {
			return 0, false
		}
	}
	i = j
	if klen < -1 || klen > int64(end-i) {
		return 0, false
	}
	var key []byte
	if klen >= 0 {
		key = b[i : i+int(klen)]
		i += int(klen)
	}
	vlen, j := varint12(b, i)
	if j == i {
		var ok bool
		if vlen, j, ok = varintAtSlow(b, i); !ok {
			return 0, false
		}
	}
	i = j
	if vlen < -1 || vlen > int64(end-i) {
		return 0, false
	}
	if vlen >= 0 {
		i += int(vlen)
	}
	count, i, ok := varintAt(b, i)
	if !ok || count < 0 || count > int64((end-i)/2) {
		return 0, false
	}
	for range count {
		var n int64
		if n, i, ok = varintAt(b, i); !ok || n < 0 || n > int64(end-i) { // a header key is never null
			return 0, false
		}
		i += int(n)
		if n, i, ok = varintAt(b, i); !ok || n < -1 || n > int64(end-i) {
			return 0, false
		}
		if n > 0 {
			i += int(n)
		}
	}
	if i != end {
		return 0, false
	}
	r.off, r.end = offDelta, int32(end)
	r.nullVal = vlen < 0
	if key == nil {
		r.keyless = true
	} else {
		r.hash = hashKey(key)
	}
	return end - pos, true
}

// varintAt reads the zigzag varint at b[i:], returning it and the position
// after it: binary.Varint without its call and slicing.
func varintAt(b []byte, i int) (int64, int, bool) {
	if v, j := varint12(b, i); j != i {
		return v, j, true
	}
	return varintAtSlow(b, i)
}

// varint12 decodes a one- or two-byte varint at b[i:] (every delta, count
// and length of a small record), inlined into the caller: next is i when
// the varint is longer or b ends (then varintAtSlow decides).
func varint12(b []byte, i int) (v int64, next int) {
	if uint(i+1) < uint(len(b)) {
		u := uint64(b[i])
		if u < 0x80 {
			return int64(u>>1) ^ -int64(u&1), i + 1
		}
		if c := b[i+1]; c < 0x80 {
			u = u&0x7f | uint64(c)<<7
			return int64(u>>1) ^ -int64(u&1), i + 2
		}
	}
	return 0, i
}

// varintAtSlow is varintAt's loop, for any varint.
func varintAtSlow(b []byte, i int) (int64, int, bool) {
	var u uint64
	var shift uint
	for j := i; j < len(b) && j < i+binary.MaxVarintLen64; j++ {
		c := b[j]
		if c < 0x80 {
			if j-i == binary.MaxVarintLen64-1 && c > 1 {
				return 0, i, false // overflows 64 bits
			}
			u |= uint64(c) << shift
			return int64(u>>1) ^ -int64(u&1), j + 1, true
		}
		u |= uint64(c&0x7f) << shift
		shift += 7
	}
	return 0, i, false
}

// scanRecord reads the record at data[pos:] into r (r.off is the offset
// delta) and returns its length. The error text is wrapped by scanRecords.
func scanRecord(h *Header, data []byte, pos int, lastDelta int64, r *cleanRec) (int, error) {
	b := data[pos:]
	size, n := binary.Varint(b)
	if n <= 0 {
		return 0, errBadLengthVarint
	}
	if size < 0 || size > int64(len(b)-n) {
		return 0, fmt.Errorf("length %d, %d bytes remain", size, len(b)-n)
	}
	total := n + int(size)
	d := fieldReader{b: b[n:total]}
	r.start = int32(pos)
	r.attrs = int32(pos + n)
	d.byte() // attributes: unused by Kafka
	r.tsDelta = d.varint("timestamp delta", math.MinInt64, math.MaxInt64)
	r.tsEnd = int32(pos + total - len(d.b))
	offDelta := d.varint("offset delta", 0, int64(h.LastOffsetDelta))
	key := d.bytes("key")
	value := d.bytes("value")
	count := d.varint("header count", 0, int64(len(d.b)/2)) // a header takes at least two bytes
	for i := int64(0); d.err == nil && i < count; i++ {
		if hk := d.bytes("header key"); d.err == nil && hk == nil {
			d.err = errNullHeaderKey
		}
		d.bytes("header value")
	}
	if d.err != nil {
		return 0, d.err
	}
	if len(d.b) != 0 {
		return 0, fmt.Errorf("length %d, fields end %d bytes early", size, len(d.b))
	}
	if offDelta <= lastDelta {
		return 0, fmt.Errorf("offset delta %d after %d", offDelta, lastDelta)
	}
	r.off = offDelta
	r.end = int32(pos + total)
	r.nullVal = value == nil
	if key == nil {
		r.keyless = true
	} else {
		r.hash = hashKey(key)
	}
	return total, nil
}

var (
	errBadLengthVarint = fmt.Errorf("bad length varint")
	errNullHeaderKey   = fmt.Errorf("null header key")
)

// appendSpliced appends record r of data with its timestamp delta set to
// tsDelta: the bytes verbatim when the delta is unchanged, else a new
// length, the attributes byte and the new delta followed by the record's
// other fields verbatim. The result is what appendRecord would encode for
// the same record, byte for byte when the record's own encoding is
// canonical (minimal varints, attributes 0, as every Kafka client writes).
func appendSpliced(dst, data []byte, r *cleanRec, tsDelta int64) []byte {
	if tsDelta == r.tsDelta {
		return append(dst, data[r.start:r.end]...)
	}
	rest := data[r.tsEnd:r.end]
	dst = binary.AppendVarint(dst, int64(1+varintLen(tsDelta)+len(rest)))
	dst = append(dst, data[r.attrs])
	dst = binary.AppendVarint(dst, tsDelta)
	return append(dst, rest...)
}
