package segment

import "encoding/binary"

// The time index (.timeindex) maps timestamps to offsets, sparsely. It is
// Kafka's format: 12-byte entries, never to change,
//
//	+-----------------------------------------------+-----------------------+
//	| max timestamp so far in the segment     i64   | relative offset  u32  |  big endian
//	+-----------------------------------------------+-----------------------+
//
// where the relative offset is the base offset of the batch holding that
// maximum, minus the segment's base offset. An entry is added together with
// an offset index entry when the segment's max timestamp grew since the last
// time entry, and once more when the segment is sealed, so that the last
// entry of a sealed segment holds its max timestamp. Both columns strictly
// increase.
//
// The types and functions below are the one place the layout is written
// down in code; everything that reads or writes .timeindex bytes, here or
// in other packages, goes through them.

// TimeIndexEntrySize is the size of a time index entry.
const TimeIndexEntrySize = 12

// TimeIndexEntry is one time index entry: Timestamp is the largest
// timestamp in the segment so far, held by the batch whose base offset is
// the segment's base offset + RelOffset.
type TimeIndexEntry struct {
	Timestamp int64
	RelOffset uint32
}

// TimeIndex is the bytes of a time index (a .timeindex file, or its copy in
// the object store), read entry by entry. Trailing bytes short of a whole
// entry are not an entry.
type TimeIndex []byte

// Len returns the number of whole entries.
func (ix TimeIndex) Len() int { return len(ix) / TimeIndexEntrySize }

// Entry returns entry i, 0 <= i < Len().
func (ix TimeIndex) Entry(i int) TimeIndexEntry {
	ts, rel := timeEntry(ix[i*TimeIndexEntrySize:])
	return TimeIndexEntry{Timestamp: ts, RelOffset: rel}
}

// Valid returns the leading entries the log trusts: timestamps are not
// negative, and both columns strictly increase. The first entry that
// breaks the rule ends the index; in an active segment's preallocated file
// that is the first zero-filled entry after the first.
func (ix TimeIndex) Valid() TimeIndex {
	n := validPrefix(ix, TimeIndexEntrySize, validTimeEntry)
	return ix[:n:n]
}

// AppendTimeIndexEntry appends e, encoded, to b.
func AppendTimeIndexEntry(b []byte, e TimeIndexEntry) []byte {
	var buf [TimeIndexEntrySize]byte
	putTimeEntry(buf[:], e.Timestamp, e.RelOffset)
	return append(b, buf[:]...)
}

func putTimeEntry(b []byte, ts int64, rel uint32) {
	binary.BigEndian.PutUint64(b, uint64(ts))
	binary.BigEndian.PutUint32(b[8:], rel)
}

func timeEntry(b []byte) (ts int64, rel uint32) {
	return int64(binary.BigEndian.Uint64(b)), binary.BigEndian.Uint32(b[8:])
}

// validTimeEntry accepts entries whose timestamps and offsets strictly
// increase (the first may have relative offset 0). A zero-filled entry after
// the first is rejected, which is how the end of a preallocated file is
// found.
func validTimeEntry(prev, cur []byte) bool {
	ts, rel := timeEntry(cur)
	if prev == nil {
		return ts >= 0
	}
	pts, prel := timeEntry(prev)
	return ts > pts && rel > prel
}

// floorBefore returns the relative offset of the last entry whose timestamp
// is < ts; ok is false when there is none.
func (v entryView) floorBefore(ts int64) (rel uint32, ok bool, err error) {
	i, err := v.search(func(e []byte) bool { t, _ := timeEntry(e); return t < ts })
	if err != nil || i == 0 {
		return 0, false, err
	}
	e, err := v.entry(i - 1)
	if err != nil {
		return 0, false, err
	}
	_, rel = timeEntry(e)
	return rel, true, nil
}
