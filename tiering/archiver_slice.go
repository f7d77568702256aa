package tiering

import (
	"fmt"
	"io"
	"math"
	"os"

	"github.com/stratastream/strata/segment"
)

// Slices of local segments.
//
// Replicas roll their segments at different offsets (a follower appends
// what it fetched in chunks of its own), so after a leader change the new
// leader's segment holding the remote end may begin below it. The archiver
// then uploads the segment from the batch that starts at the remote end,
// with an offset index and a time index rebuilt for that slice in the
// segment package's format, exactly as the segment engine would have
// written them for a segment beginning there (entries encoded by
// segment.AppendIndexEntry and segment.AppendTimeIndexEntry). An offset
// entry for each batch that starts sliceIndexInterval bytes or
// more after the previous entry (none for the batch at position 0), a time
// entry with it when the largest timestamp so far grew, and a last time
// entry for the largest timestamp of all.

// sliceIndexInterval is the index.interval.bytes of rebuilt indexes
// (Kafka's default).
const sliceIndexInterval = 4096

// segmentSlice is the part of a local segment from one batch on.
type segmentSlice struct {
	pos          int64 // byte position of the first batch in the .log
	index        []byte
	timeIndex    []byte
	maxTimestamp int64 // -1 without timestamps
}

// sliceSegment finds the batch of the local segment info (open as f) that
// starts at offset from and builds the indexes of the rest of the segment,
// relative to from. ErrDiverged when no batch starts at from. With gaps
// (a compacted log) the slice begins at the first batch starting at or
// after from instead, so from may lie in a gap, below info.BaseOffset too;
// a batch that spans from is still ErrDiverged.
func sliceSegment(f *os.File, info segment.SegmentInfo, from int64, gaps bool) (segmentSlice, error) {
	if info.NextOffset-from > math.MaxInt32 {
		return segmentSlice{}, fmt.Errorf("tiering: slice %s from %d: offsets up to %d do not fit relative 32-bit offsets", info.LogPath, from, info.NextOffset)
	}
	start, err := indexFloor(info, from)
	if err != nil {
		return segmentSlice{}, err
	}
	var hdr [segment.HeaderSize]byte
	readHeader := func(pos int64) (segment.Header, error) {
		if _, err := f.ReadAt(hdr[:], pos); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return segment.Header{}, fmt.Errorf("tiering: slice %s at byte %d: %w", info.LogPath, pos, err)
		}
		h, err := segment.ParseHeader(hdr[:])
		if err != nil {
			return h, fmt.Errorf("tiering: slice %s at byte %d: %w", info.LogPath, pos, err)
		}
		if int64(h.Size()) > info.Size-pos {
			return h, fmt.Errorf("tiering: slice %s at byte %d: batch of %d bytes past the segment end", info.LogPath, pos, h.Size())
		}
		return h, nil
	}

	// Find the batch starting at from.
	pos := start
	for {
		if pos >= info.Size {
			return segmentSlice{}, fmt.Errorf("%w: segment %s ends before offset %d", ErrDiverged, info.LogPath, from)
		}
		h, err := readHeader(pos)
		if err != nil {
			return segmentSlice{}, err
		}
		if h.BaseOffset == from || (gaps && h.BaseOffset > from) {
			break
		}
		if h.NextOffset() > from {
			return segmentSlice{}, fmt.Errorf("%w: remote log ends at %d, local batch spans [%d, %d) in %s",
				ErrDiverged, from, h.BaseOffset, h.NextOffset(), info.LogPath)
		}
		pos += int64(h.Size())
	}

	// Rebuild the indexes of [pos, size), as the segment engine appends.
	sl := segmentSlice{pos: pos, maxTimestamp: -1}
	maxTsOffset := from
	lastIndexPos, lastTimeTs := int64(0), int64(-1)
	rel := func(off int64) uint32 { return uint32(off - from) }
	timeEntry := func(ts int64, off int64) {
		sl.timeIndex = segment.AppendTimeIndexEntry(sl.timeIndex, segment.TimeIndexEntry{Timestamp: ts, RelOffset: rel(off)})
		lastTimeTs = ts
	}
	for p := pos; p < info.Size; {
		h, err := readHeader(p)
		if err != nil {
			return segmentSlice{}, err
		}
		if h.MaxTimestamp > sl.maxTimestamp {
			sl.maxTimestamp, maxTsOffset = h.MaxTimestamp, h.BaseOffset
		}
		if size := p - pos; size > 0 && size-lastIndexPos >= sliceIndexInterval {
			sl.index = segment.AppendIndexEntry(sl.index, segment.IndexEntry{RelOffset: rel(h.BaseOffset), Position: uint32(size)})
			lastIndexPos = size
			if sl.maxTimestamp > lastTimeTs {
				timeEntry(sl.maxTimestamp, maxTsOffset)
			}
		}
		p += int64(h.Size())
	}
	if sl.maxTimestamp > lastTimeTs {
		timeEntry(sl.maxTimestamp, maxTsOffset)
	}
	return sl, nil
}

// indexFloor returns the position of the last indexed batch of the local
// segment starting at or below offset, from its .index file (0 without
// one): where the scan for offset begins.
func indexFloor(info segment.SegmentInfo, offset int64) (int64, error) {
	b, err := os.ReadFile(info.IndexPath)
	if err != nil {
		return 0, fmt.Errorf("tiering: slice: %w", err)
	}
	pos := int64(0)
	ix := segment.OffsetIndex(b).Valid()
	for i := range ix.Len() {
		e := ix.Entry(i)
		if int64(e.Position) >= info.Size || info.BaseOffset+int64(e.RelOffset) > offset {
			break
		}
		pos = int64(e.Position)
	}
	return pos, nil
}
