package segment

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// Read-only inspection of a partition directory, for what runs beside the
// broker or without it (`strata tier status`, `strata dump`, the
// archiver's lag): nothing here locks, writes or repairs, so it may run
// while a Log appends to the directory, and it reports files as they are
// rather than as recovery would leave them.

// ListSegments lists the segments of the partition directory dir from its
// files alone: each .log file, in offset order, with its size and the
// paths of its three files. Segments are contiguous (a segment rolls at
// the log end; compaction may remove a segment's last offsets, which then
// count as its own), so every segment but the last is Sealed and ends
// (NextOffset) at the next one's base offset; the last one's NextOffset is
// found by walking its batch headers, a torn or not yet written tail ending
// the walk (CRCs are not checked). MaxTimestamp is -1 and LeaderEpochs nil:
// the indexes and checkpoints are not read. A segment that retention
// deletes during the listing is left out. The error satisfies
// errors.Is(err, fs.ErrNotExist) when dir does not exist.
func ListSegments(dir string) ([]SegmentInfo, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("segment: list %s: %w", dir, err)
	}
	var bases []int64
	for _, e := range ents {
		base, suffix, err := ParseSegmentFileName(e.Name())
		if err == nil && suffix == LogSuffix && e.Type().IsRegular() {
			bases = append(bases, base)
		}
	}
	slices.Sort(bases)
	segs := make([]SegmentInfo, 0, len(bases))
	for i, base := range bases {
		name := filepath.Join(dir, segmentName(base))
		si := SegmentInfo{
			BaseOffset: base, Sealed: i < len(bases)-1, MaxTimestamp: -1,
			LogPath: name + LogSuffix, IndexPath: name + IndexSuffix, TimeIndexPath: name + TimeIndexSuffix,
		}
		fi, err := os.Stat(si.LogPath)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted by retention since the listing
		}
		if err != nil {
			return nil, fmt.Errorf("segment: list %s: %w", dir, err)
		}
		si.Size = fi.Size()
		if si.Sealed {
			si.NextOffset = bases[i+1]
		} else if si.NextOffset, err = scanLogEnd(si.LogPath, base); err != nil {
			return nil, err
		}
		segs = append(segs, si)
	}
	return segs, nil
}

// scanLogEnd walks the batch headers of the .log at path (base offset
// base) and returns the offset after the last complete batch, base when
// there is none.
func scanLogEnd(path string, base int64) (int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return base, nil // deleted since the listing
	}
	if err != nil {
		return 0, fmt.Errorf("segment: list: %w", err)
	}
	defer f.Close() // read-only: nothing to lose on close
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("segment: list: %w", err)
	}
	size := fi.Size()
	next := base
	hdr := make([]byte, HeaderSize)
	for pos := int64(0); pos+HeaderSize <= size; {
		if _, err := f.ReadAt(hdr, pos); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return 0, fmt.Errorf("segment: list: %w", err)
		}
		h, err := ParseHeader(hdr)
		if err != nil || h.BaseOffset < next || pos+int64(h.Size()) > size {
			break // a torn or not yet written tail
		}
		next = h.NextOffset()
		pos += int64(h.Size())
	}
	return next, nil
}

// ReadOffsetIndexFile reads the offset index at path as written, for
// tools: every entry up to the first all-zero one (where the preallocated
// part of an active segment's file begins), valid or not (see CheckOffsetIndex).
// problems describes what is wrong with the file as a whole: a trailing
// partial entry, or data after the zero entry that ends it. err is for a
// file that cannot be read.
func ReadOffsetIndexFile(path string) (ix OffsetIndex, problems []string, err error) {
	b, problems, err := readEntriesAsWritten(path, IndexEntrySize)
	return OffsetIndex(b), problems, err
}

// ReadTimeIndexFile reads the time index at path as written, as
// ReadOffsetIndexFile does (see CheckTimeIndex).
func ReadTimeIndexFile(path string) (ix TimeIndex, problems []string, err error) {
	b, problems, err := readEntriesAsWritten(path, TimeIndexEntrySize)
	return TimeIndex(b), problems, err
}

func readEntriesAsWritten(path string, size int) ([]byte, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("segment: %w", err)
	}
	var problems []string
	if len(data)%size != 0 {
		problems = append(problems, fmt.Sprintf("%d bytes is not a whole number of %d-byte entries", len(data), size))
		data = data[:len(data)/size*size]
	}
	at := 0
	for ; at < len(data); at += size {
		if allZero(data[at : at+size]) {
			if !allZero(data[at:]) {
				problems = append(problems, fmt.Sprintf("entries after the zero entry at byte %d", at))
			}
			break
		}
	}
	return data[:at], problems, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// BatchStart is where a batch of a .log starts and what the indexes record
// of it, for CheckOffsetIndex and CheckTimeIndex.
type BatchStart struct {
	Position     int64 // byte position in the .log
	BaseOffset   int64
	MaxTimestamp int64
}

// CheckOffsetIndex compares the offset index of the segment at base offset
// base with the batches of its .log (in file order) and describes each
// disagreement, in entry order. Entries must strictly increase in both
// columns, and each must name a batch: the batch starting at Position has
// base offset base+RelOffset. Kafka's own index records a batch's last
// offset rather than its base offset, so Kafka's files fail this check
// (and Strata's fail Kafka's).
func CheckOffsetIndex(ix OffsetIndex, base int64, batches []BatchStart) []string {
	atPos := make(map[int64]int64, len(batches)) // position -> base offset
	for _, b := range batches {
		atPos[b.Position] = b.BaseOffset
	}
	var problems []string
	prevRel, prevPos := int64(-1), int64(-1)
	for i := range ix.Len() {
		e := ix.Entry(i)
		rel, pos := int64(e.RelOffset), int64(e.Position)
		if rel <= prevRel || pos <= prevPos {
			problems = append(problems, fmt.Sprintf("entry %d (offset %d, position %d) does not follow (offset %d, position %d)", i, base+rel, pos, base+prevRel, prevPos))
		}
		prevRel, prevPos = rel, pos
		off, found := atPos[pos]
		switch {
		case !found:
			problems = append(problems, fmt.Sprintf("entry %d (offset %d, position %d): no batch starts at that position", i, base+rel, pos))
		case off != base+rel:
			problems = append(problems, fmt.Sprintf("entry %d (offset %d, position %d): the batch there starts at offset %d", i, base+rel, pos, off))
		}
	}
	return problems
}

// CheckTimeIndex compares the time index of the segment at base offset
// base with the batches of its .log (in file order) and describes each
// disagreement, in entry order. An entry's timestamp must equal the
// largest max timestamp of the batches up to and including the batch at
// base+RelOffset, which must start a batch: that holds whether the writer
// names the batch that holds the largest timestamp or the batch it was
// indexing. Neither column may decrease.
func CheckTimeIndex(ix TimeIndex, base int64, batches []BatchStart) []string {
	maxSoFar := make(map[int64]int64, len(batches)) // base offset -> largest timestamp up to it
	running := int64(-1 << 63)
	for _, b := range batches {
		running = max(running, b.MaxTimestamp)
		maxSoFar[b.BaseOffset] = running
	}
	var problems []string
	prevTS, prevRel := int64(-1<<63), int64(-1)
	for i := range ix.Len() {
		e := ix.Entry(i)
		ts, rel := e.Timestamp, int64(e.RelOffset)
		if ts < prevTS || rel < prevRel {
			problems = append(problems, fmt.Sprintf("entry %d (timestamp %d, offset %d) goes back from (timestamp %d, offset %d)", i, ts, base+rel, prevTS, base+prevRel))
		}
		prevTS, prevRel = ts, rel
		want, found := maxSoFar[base+rel]
		switch {
		case !found:
			problems = append(problems, fmt.Sprintf("entry %d (timestamp %d, offset %d): no batch starts at that offset", i, ts, base+rel))
		case ts != want:
			problems = append(problems, fmt.Sprintf("entry %d (timestamp %d, offset %d): largest timestamp up to that batch is %d", i, ts, base+rel, want))
		}
	}
	return problems
}
