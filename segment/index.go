package segment

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// The offset index (.index) maps offsets to file positions, sparsely. It is
// Kafka's format: 8-byte entries, never to change,
//
//	+-----------------------+-----------------------+
//	| relative offset  u32  | position         u32  |  big endian
//	+-----------------------+-----------------------+
//
// where the relative offset is a batch's base offset minus the segment's base
// offset and the position is where that batch starts in the .log file. An
// entry is added for a batch that starts at least index.interval.bytes after
// the previous entry (or after the start of the file); the first batch, at
// position 0, never has one. Both columns strictly increase.
//
// The active segment's index file is preallocated to segment.index.bytes
// (sparse, zero-filled) and its entries are kept in memory, written to the
// file in groups; a sealed segment's file is trimmed to its entries and
// searched with pread.
const (
	// IndexEntrySize is the size of an offset index entry.
	IndexEntrySize = 8

	// pendingEntryBytes is how many bytes of new entries the writer
	// gathers in memory before writing them to the index file.
	pendingEntryBytes = 4096
	// searchBlock is the number of bytes of a file-backed index read in one
	// pread once a binary search has narrowed to it.
	searchBlock = 4096
)

// entryFile is an index file of fixed-size entries: the offset index or the
// time index of one segment.
//
// Locking: mem and n are read under Log.mu or by the holder of appendMu, and
// written only while holding both. written is owned by the holder of
// appendMu. path, f, w and entrySize never change.
type entryFile struct {
	path      string
	f         *os.File // for reads
	w         File     // writes, truncation, fsync; wraps f
	entrySize int

	mem     []byte // active segment: all n entries, encoded; nil once sealed
	n       int    // number of entries
	written int    // entries already written to the file
}

// entryView is a snapshot of an entryFile, taken under Log.mu and searched
// without it. Entries below n never change while a view exists: the writer
// only appends, and truncation reallocates mem.
type entryView struct {
	mem       []byte
	f         *os.File
	n         int
	entrySize int
}

func (e *entryFile) view() entryView {
	v := entryView{f: e.f, n: e.n, entrySize: e.entrySize}
	if e.mem != nil {
		v.mem = e.mem[:e.n*e.entrySize]
	}
	return v
}

// add appends encoded entries in memory. Caller holds appendMu and Log.mu.
func (e *entryFile) add(entries []byte) {
	e.mem = append(e.mem, entries...)
	e.n += len(entries) / e.entrySize
}

// writePending writes the entries not yet in the file. Caller holds
// appendMu.
func (e *entryFile) writePending() error {
	if e.written >= e.n {
		return nil
	}
	off := e.written * e.entrySize
	if _, err := e.w.WriteAt(e.mem[off:e.n*e.entrySize], int64(off)); err != nil {
		return fmt.Errorf("segment: write %s: %w", e.path, err)
	}
	e.written = e.n
	return nil
}

// maybeWritePending writes pending entries once there are enough of them.
func (e *entryFile) maybeWritePending() error {
	if (e.n-e.written)*e.entrySize < pendingEntryBytes {
		return nil
	}
	return e.writePending()
}

// trim writes pending entries and cuts the file to exactly the entries.
// Caller holds appendMu.
func (e *entryFile) trim() error {
	if err := e.writePending(); err != nil {
		return err
	}
	if err := e.w.Truncate(int64(e.n * e.entrySize)); err != nil {
		return fmt.Errorf("segment: trim %s: %w", e.path, err)
	}
	return nil
}

// preallocate extends the file (sparse, zero-filled) to maxBytes rounded down
// to whole entries, when that is larger than the entries.
func (e *entryFile) preallocate(maxBytes int) error {
	size := maxBytes / e.entrySize * e.entrySize
	if size <= e.n*e.entrySize {
		return nil
	}
	if err := e.w.Truncate(int64(size)); err != nil {
		return fmt.Errorf("segment: preallocate %s: %w", e.path, err)
	}
	return nil
}

// load reads every entry of a file-backed index into memory, so that the
// segment can take appends again. Caller holds appendMu and Log.mu.
func (e *entryFile) load() error {
	if e.mem != nil {
		return nil
	}
	buf := make([]byte, e.n*e.entrySize, max(e.n*e.entrySize, 4096))
	if _, err := e.f.ReadAt(buf, 0); err != nil {
		return fmt.Errorf("segment: read %s: %w", e.path, err)
	}
	e.mem = buf
	e.written = e.n
	return nil
}

// readEntries reads the entries of an index file up to the first one valid
// rejects (valid gets the previous entry, nil for the first), in chunks, so
// that a preallocated file is read only as far as its entries go.
func readEntries(f io.ReaderAt, fileSize int64, entrySize int, valid func(prev, cur []byte) bool) ([]byte, error) {
	const chunk = 64 << 10 / TimeIndexEntrySize / IndexEntrySize * TimeIndexEntrySize * IndexEntrySize
	var entries []byte
	var prev []byte
	for pos := int64(0); pos < fileSize; pos += chunk {
		buf := make([]byte, min(chunk, fileSize-pos))
		if _, err := f.ReadAt(buf, pos); err != nil && err != io.EOF {
			return nil, err
		}
		for len(buf) >= entrySize {
			cur := buf[:entrySize]
			if !valid(prev, cur) {
				return entries, nil
			}
			entries = append(entries, cur...)
			prev = entries[len(entries)-entrySize:]
			buf = buf[entrySize:]
		}
	}
	return entries, nil
}

// search returns how many leading entries satisfy pred, which must hold for
// a prefix of the entries and fail for the rest. A file-backed view is
// narrowed with single-entry preads, then read one block at a time.
func (v entryView) search(pred func(entry []byte) bool) (int, error) {
	lo, hi := 0, v.n
	if v.mem != nil {
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if pred(v.mem[mid*v.entrySize : (mid+1)*v.entrySize]) {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		return lo, nil
	}
	var one [TimeIndexEntrySize]byte
	for (hi-lo)*v.entrySize > searchBlock {
		mid := int(uint(lo+hi) >> 1)
		e := one[:v.entrySize]
		if _, err := v.f.ReadAt(e, int64(mid*v.entrySize)); err != nil {
			return 0, fmt.Errorf("segment: read index: %w", err)
		}
		if pred(e) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == hi {
		return lo, nil
	}
	block := make([]byte, (hi-lo)*v.entrySize)
	if _, err := v.f.ReadAt(block, int64(lo*v.entrySize)); err != nil {
		return 0, fmt.Errorf("segment: read index: %w", err)
	}
	i := 0
	for i < hi-lo && pred(block[i*v.entrySize:(i+1)*v.entrySize]) {
		i++
	}
	return lo + i, nil
}

// entry returns entry i of the view.
func (v entryView) entry(i int) ([]byte, error) {
	if v.mem != nil {
		return v.mem[i*v.entrySize : (i+1)*v.entrySize], nil
	}
	e := make([]byte, v.entrySize)
	if _, err := v.f.ReadAt(e, int64(i*v.entrySize)); err != nil {
		return nil, fmt.Errorf("segment: read index: %w", err)
	}
	return e, nil
}

// Offset index entries: the one place their layout is written down in
// code. Everything that reads or writes .index bytes, here or in other
// packages, goes through these.

// IndexEntry is one offset index entry: the batch whose base offset is the
// segment's base offset + RelOffset starts at byte Position of the .log.
type IndexEntry struct {
	RelOffset uint32
	Position  uint32
}

// OffsetIndex is the bytes of an offset index (a .index file, or its copy
// in the object store), read entry by entry. Trailing bytes short of a
// whole entry are not an entry.
type OffsetIndex []byte

// Len returns the number of whole entries.
func (ix OffsetIndex) Len() int { return len(ix) / IndexEntrySize }

// Entry returns entry i, 0 <= i < Len().
func (ix OffsetIndex) Entry(i int) IndexEntry {
	rel, pos := indexEntry(ix[i*IndexEntrySize:])
	return IndexEntry{RelOffset: rel, Position: pos}
}

// Valid returns the leading entries the log trusts: both columns strictly
// increase, and none points at position 0 (the first batch has no entry).
// The first entry that breaks the rule ends the index; in an active
// segment's preallocated file that is the first zero-filled entry.
func (ix OffsetIndex) Valid() OffsetIndex {
	n := validPrefix(ix, IndexEntrySize, validIndexEntry)
	return ix[:n:n]
}

// validPrefix returns the length in bytes of the leading entries of size
// bytes each for which valid(previous entry or nil, entry) holds.
func validPrefix(b []byte, size int, valid func(prev, cur []byte) bool) int {
	n := 0
	var prev []byte
	for ; n+size <= len(b); n += size {
		cur := b[n : n+size]
		if !valid(prev, cur) {
			break
		}
		prev = cur
	}
	return n
}

// AppendIndexEntry appends e, encoded, to b.
func AppendIndexEntry(b []byte, e IndexEntry) []byte {
	var buf [IndexEntrySize]byte
	putIndexEntry(buf[:], e.RelOffset, e.Position)
	return append(b, buf[:]...)
}

func putIndexEntry(b []byte, rel uint32, pos uint32) {
	binary.BigEndian.PutUint32(b, rel)
	binary.BigEndian.PutUint32(b[4:], pos)
}

func indexEntry(b []byte) (rel uint32, pos uint32) {
	return binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:])
}

// validIndexEntry accepts entries that strictly increase in both columns and
// never point at position 0.
func validIndexEntry(prev, cur []byte) bool {
	rel, pos := indexEntry(cur)
	if pos == 0 {
		return false
	}
	if prev == nil {
		return rel > 0
	}
	prel, ppos := indexEntry(prev)
	return rel > prel && pos > ppos
}

// floorByOffset returns the position of the last indexed batch whose base
// offset is <= rel, or 0 (the first batch) when there is none, and that
// batch's relative base offset.
func (v entryView) floorByOffset(rel uint32) (pos int64, at uint32, err error) {
	i, err := v.search(func(e []byte) bool { r, _ := indexEntry(e); return r <= rel })
	if err != nil || i == 0 {
		return 0, 0, err
	}
	e, err := v.entry(i - 1)
	if err != nil {
		return 0, 0, err
	}
	r, p := indexEntry(e)
	return int64(p), r, nil
}

// floorByPosition returns the last indexed batch position <= limit, or 0.
func (v entryView) floorByPosition(limit int64) (int64, error) {
	i, err := v.search(func(e []byte) bool { _, p := indexEntry(e); return int64(p) <= limit })
	if err != nil || i == 0 {
		return 0, err
	}
	e, err := v.entry(i - 1)
	if err != nil {
		return 0, err
	}
	_, p := indexEntry(e)
	return int64(p), nil
}
