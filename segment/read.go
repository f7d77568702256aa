package segment

import (
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"sync"
)

// ReadSlice is a byte range of one segment file holding whole batches, ready
// for a zero-copy send with
// (*net.TCPConn).ReadFrom(io.NewSectionReader(File, Pos, Size)). An empty
// slice has a nil File and Size 0.
type ReadSlice struct {
	File        *os.File
	Pos, Size   int64
	FirstOffset int64 // base offset of the first batch (may be below the offset asked for)
	NextOffset  int64 // offset after the last batch: where the next read starts
}

// readSnap is what a reader captures of one segment under Log.mu before
// reading it without any lock.
type readSnap struct {
	path       string
	f          *os.File
	base       int64
	size, next int64
	maxTs      int64
	index      entryView
	timeIndex  entryView
}

// snapLocked captures s for a reader. Caller holds Log.mu.
func snapLocked(s *segment) readSnap {
	return readSnap{
		path: s.logPath, f: s.f, base: s.base, size: s.size, next: s.next, maxTs: s.maxTs,
		index: s.index.view(), timeIndex: s.timeIndex.view(),
	}
}

// relOffset returns off relative to base, clamped to the index's range.
func relOffset(off, base int64) uint32 {
	return uint32(min(max(off-base, 0), math.MaxUint32))
}

// headerReader reads batch headers of a segment file with pread, through a
// small buffer so that a run of small batches costs one system call.
type headerReader struct {
	f      io.ReaderAt
	limit  int64 // bytes of the file that hold committed batches
	buf    []byte
	bufPos int64 // file position of buf[0]
	n      int   // valid bytes in buf
}

const headerReadSize = 4096

var headerBufs = sync.Pool{New: func() any { b := make([]byte, headerReadSize); return &b }}

func newHeaderReader(f io.ReaderAt, limit int64) *headerReader {
	return &headerReader{f: f, limit: limit, buf: *headerBufs.Get().(*[]byte), bufPos: -1}
}

func (r *headerReader) release() {
	b := r.buf
	r.buf = nil
	headerBufs.Put(&b)
}

// at returns the header of the batch at pos, checking that the batch lies
// within the limit. It does not check the CRC.
func (r *headerReader) at(pos int64) (Header, error) {
	if pos+HeaderSize > r.limit {
		return Header{}, fmt.Errorf("%w: batch header at %d beyond %d", ErrTruncated, pos, r.limit)
	}
	if r.bufPos < 0 || pos < r.bufPos || pos+HeaderSize > r.bufPos+int64(r.n) {
		want := int(min(int64(len(r.buf)), r.limit-pos))
		n, err := r.f.ReadAt(r.buf[:want], pos)
		if n < HeaderSize {
			if err == nil || err == io.EOF {
				err = fmt.Errorf("%w: file ends at %d", ErrTruncated, pos+int64(n))
			}
			r.bufPos = -1
			return Header{}, err
		}
		r.bufPos, r.n = pos, n
	}
	h, err := ParseHeader(r.buf[pos-r.bufPos : r.n])
	if err != nil {
		return h, err
	}
	if pos+int64(h.Size()) > r.limit {
		return h, fmt.Errorf("%w: batch at %d needs %d bytes, %d remain", ErrTruncated, pos, h.Size(), r.limit-pos)
	}
	return h, nil
}

// seekOffset returns the position and header of the first batch whose last
// offset is >= off, starting the scan at the index entry for off. found is
// false when no batch before the limit qualifies.
func seekOffset(r *headerReader, idx entryView, base, off int64) (pos int64, h Header, found bool, err error) {
	pos, _, err = idx.floorByOffset(relOffset(off, base))
	if err != nil {
		return 0, h, false, err
	}
	for pos < r.limit {
		if h, err = r.at(pos); err != nil {
			return pos, h, false, err
		}
		if h.LastOffset() >= off {
			return pos, h, true, nil
		}
		pos += int64(h.Size())
	}
	return pos, Header{}, false, nil
}

// Read returns whole batches starting with the batch that contains offset,
// as a range of one segment file. It returns at most maxBytes, except that
// the first batch is returned whole even when larger; it never includes a
// batch whose base offset is >= maxOffset (pass the high watermark, or
// LogEndOffset for everything). A read stays inside one segment; callers
// loop for more.
//
// offset == LogEndOffset, or >= maxOffset, gives an empty slice and a nil
// error; offset below LogStartOffset or above LogEndOffset gives
// ErrOffsetOutOfRange. No lock is held while the file is read: the range is
// computed from a snapshot of the segment taken under a short lock.
func (l *Log) Read(offset int64, maxBytes int, maxOffset int64) (ReadSlice, error) {
	empty := ReadSlice{FirstOffset: offset, NextOffset: offset}
	snap, ok, err := l.readSnapshot(offset, maxOffset)
	if err != nil || !ok {
		return empty, err
	}
	r := newHeaderReader(snap.f, snap.size)
	defer r.release()

	pos, h, found, err := seekOffset(r, snap.index, snap.base, offset)
	if err != nil {
		return empty, fmt.Errorf("segment: read %s at %d: %w", snap.path, pos, err)
	}
	if !found || h.BaseOffset >= maxOffset {
		return empty, nil
	}
	end := pos + int64(h.Size())
	next := h.NextOffset()
	limit := snap.size
	if mb := int64(max(maxBytes, 0)); mb < snap.size-pos {
		limit = pos + mb
	}
	if end < limit && next < maxOffset {
		// Jump over the batches that certainly fit: those before the
		// index entries at or below the byte limit and maxOffset.
		q, err := snap.index.floorByPosition(limit)
		if err == nil && maxOffset < snap.next {
			var qm int64
			qm, _, err = snap.index.floorByOffset(relOffset(maxOffset, snap.base))
			q = min(q, qm)
		}
		if err != nil {
			return empty, fmt.Errorf("segment: read %s: %w", snap.path, err)
		}
		q = max(q, end)
		for q < snap.size {
			h2, err := r.at(q)
			if err != nil {
				return empty, fmt.Errorf("segment: read %s at %d: %w", snap.path, q, err)
			}
			if h2.BaseOffset >= maxOffset || q+int64(h2.Size()) > limit {
				next = h2.BaseOffset
				break
			}
			q += int64(h2.Size())
		}
		if q == snap.size {
			next = snap.next
		}
		end = q
	}
	return ReadSlice{File: snap.f, Pos: pos, Size: end - pos, FirstOffset: h.BaseOffset, NextOffset: next}, nil
}

// ReadCopy is Read with the bytes copied into memory.
func (l *Log) ReadCopy(offset int64, maxBytes int, maxOffset int64) ([]byte, error) {
	rs, err := l.Read(offset, maxBytes, maxOffset)
	if err != nil || rs.Size == 0 {
		return nil, err
	}
	buf := make([]byte, rs.Size)
	if n, err := rs.File.ReadAt(buf, rs.Pos); n != len(buf) {
		if err == nil || err == io.EOF {
			err = fmt.Errorf("%w: file ends at %d", ErrTruncated, rs.Pos+int64(n))
		}
		return nil, fmt.Errorf("segment: read at offset %d: %w", offset, err)
	}
	return buf, nil
}

// readSnapshot finds the segment holding offset and snapshots it; ok is
// false when the read is empty.
func (l *Log) readSnapshot(offset, maxOffset int64) (readSnap, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return readSnap{}, false, ErrClosed
	}
	if offset < l.mu.logStart || offset > l.mu.logEnd {
		return readSnap{}, false, fmt.Errorf("%w: offset %d, log holds [%d, %d)", ErrOffsetOutOfRange, offset, l.mu.logStart, l.mu.logEnd)
	}
	if offset == l.mu.logEnd || offset >= maxOffset {
		return readSnap{}, false, nil
	}
	segs := l.mu.segs
	i := max(sort.Search(len(segs), func(i int) bool { return segs[i].base > offset })-1, 0)
	for i < len(segs) && (offset >= segs[i].next || segs[i].size == 0) {
		i++ // an empty segment, or a gap between segments (compaction leaves both)
	}
	if i == len(segs) {
		return readSnap{}, false, nil
	}
	return snapLocked(segs[i]), true, nil
}

// OffsetForTimestamp returns the first offset (at or above the log start)
// whose record timestamp is >= ts, with that timestamp: Kafka's ListOffsets
// by time. found is false when no record is that late. The segment is found
// by its max timestamp, the starting point by its time index, then batch
// headers are scanned and the first batch that qualifies is decoded.
func (l *Log) OffsetForTimestamp(ts int64) (offset int64, timestamp int64, found bool, err error) {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return 0, 0, false, ErrClosed
	}
	logStart, logEnd := l.mu.logStart, l.mu.logEnd
	var snaps []readSnap
	for _, s := range l.mu.segs {
		if s.next > logStart && s.maxTs >= ts {
			snaps = append(snaps, snapLocked(s))
		}
	}
	l.mu.Unlock()

	for _, snap := range snaps {
		off, t, ok, err := snap.offsetForTimestamp(ts, logStart)
		if err != nil {
			return 0, 0, false, fmt.Errorf("segment: offset for timestamp in %s: %w", snap.path, err)
		}
		if ok {
			return off, t, true, nil
		}
	}
	return logEnd, -1, false, nil
}

// offsetForTimestamp searches one segment for the first record at or after
// start with a timestamp >= ts.
func (snap readSnap) offsetForTimestamp(ts, start int64) (int64, int64, bool, error) {
	start = max(start, snap.base)
	rel, ok, err := snap.timeIndex.floorBefore(ts)
	if err != nil {
		return 0, 0, false, err
	}
	if ok {
		// Every batch up to the one holding that entry's timestamp is
		// earlier than ts.
		start = max(start, snap.base+int64(rel))
	}
	r := newHeaderReader(snap.f, snap.size)
	defer r.release()
	pos, h, found, err := seekOffset(r, snap.index, snap.base, start)
	for ; found && err == nil; pos += int64(h.Size()) {
		if pos >= snap.size {
			break
		}
		if h, err = r.at(pos); err != nil {
			break
		}
		if h.LastOffset() < start || h.MaxTimestamp < ts {
			continue
		}
		if h.LogAppendTime() {
			return max(h.BaseOffset, start), h.MaxTimestamp, true, nil
		}
		batch := make([]byte, h.Size())
		if _, err = snap.f.ReadAt(batch, pos); err != nil {
			break
		}
		it, err := NewRecordIter(batch, DefaultMaxDecompressed)
		if err != nil {
			return 0, 0, false, err
		}
		for {
			rec, ok, err := it.Next()
			if err != nil {
				return 0, 0, false, err
			}
			if !ok {
				break
			}
			if rec.Offset >= start && rec.Timestamp >= ts {
				return rec.Offset, rec.Timestamp, true, nil
			}
		}
	}
	return 0, 0, false, err
}
