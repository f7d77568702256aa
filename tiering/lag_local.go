package tiering

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stratastream/strata/segment"
)

// LocalState is the local side of a partition's tiering, read from its
// directory by InspectLocal: what `strata tier status` shows next to the
// manifest, also while the broker is stopped.
type LocalState struct {
	Dir      string
	LogStart int64 // local log start offset
	LogEnd   int64 // offset after the last complete batch on disk
	Segments int
	Bytes    int64 // bytes of the .log files

	// Sealed segments whose offsets are not all in the manifest (all
	// sealed segments when there is none): Lag's pending segments, from
	// the files. The active (last) segment is never pending.
	SegmentsPending int
	BytesPending    int64
	OldestPending   time.Duration // by the .log's modification time; 0 when none
}

// Segment file names and the log-start checkpoint of a partition
// directory: segment's on-disk format (segment/doc.go), which never
// changes.
const (
	localLogSuffix      = ".log"
	localSegmentNameLen = 20
	localLogStartFile   = "log-start-offset-checkpoint"
)

// InspectLocal reads the partition directory dir without locking or
// writing anything, so it may run while the broker appends to it: the
// segment files' names and sizes, the log-start checkpoint, and the batch
// headers of the last segment (to find the log end; a torn tail ends the
// scan, CRCs are not checked). m is the partition's committed manifest,
// nil if it has none. It fails with an error satisfying
// errors.Is(err, fs.ErrNotExist) when dir does not exist.
func InspectLocal(dir string, m *Manifest, now time.Time) (LocalState, error) {
	ls := LocalState{Dir: dir}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return ls, fmt.Errorf("tiering: inspect %s: %w", dir, err)
	}
	var bases []int64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), localLogSuffix)
		if !ok || len(name) != localSegmentNameLen || !e.Type().IsRegular() {
			continue
		}
		if b, err := strconv.ParseInt(name, 10, 64); err == nil && b >= 0 {
			bases = append(bases, b)
		}
	}
	slices.Sort(bases)
	segs := make([]segment.SegmentInfo, 0, len(bases))
	for i, b := range bases {
		path := filepath.Join(dir, fmt.Sprintf("%020d%s", b, localLogSuffix))
		fi, err := os.Stat(path)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted by retention since the listing
		}
		if err != nil {
			return ls, fmt.Errorf("tiering: inspect %s: %w", dir, err)
		}
		si := segment.SegmentInfo{BaseOffset: b, Size: fi.Size(), LogPath: path, Sealed: i < len(bases)-1}
		if si.Sealed {
			// Segments are contiguous: a segment rolls at the log
			// end, which is the next one's base offset.
			si.NextOffset = bases[i+1]
		} else if si.NextOffset, err = scanLogEnd(path, b); err != nil {
			return ls, err
		}
		segs = append(segs, si)
	}
	if len(segs) == 0 {
		off := readLogStartCheckpoint(dir, 0)
		ls.LogStart, ls.LogEnd = off, off
		return ls, nil
	}
	last := segs[len(segs)-1]
	ls.LogEnd = last.NextOffset
	ls.LogStart = min(max(segs[0].BaseOffset, readLogStartCheckpoint(dir, 0)), ls.LogEnd)
	ls.Segments = len(segs)
	for _, s := range segs {
		ls.Bytes += s.Size
	}
	end := int64(-1)
	if m != nil {
		end = m.EndOffset()
	}
	var oldest string
	ls.SegmentsPending, ls.BytesPending, oldest = pendingSegments(segs, end)
	if oldest != "" {
		if fi, err := os.Stat(oldest); err == nil {
			ls.OldestPending = max(now.Sub(fi.ModTime()), 0)
		}
	}
	return ls, nil
}

// pendingSegments counts the sealed segments of segs (in offset order)
// that end after remoteEnd (-1: no manifest), and returns the .log path of
// the first of them.
func pendingSegments(segs []segment.SegmentInfo, remoteEnd int64) (n int, bytes int64, oldest string) {
	for _, s := range segs {
		if !s.Sealed {
			break
		}
		if s.NextOffset <= remoteEnd || s.NextOffset <= s.BaseOffset {
			continue
		}
		if oldest == "" {
			oldest = s.LogPath
		}
		n++
		bytes += s.Size
	}
	return n, bytes, oldest
}

// readLogStartCheckpoint reads the offset of dir's log-start checkpoint
// (version line, count line, offset), or def when it is missing or
// unreadable.
func readLogStartCheckpoint(dir string, def int64) int64 {
	b, err := os.ReadFile(filepath.Join(dir, localLogStartFile))
	if err != nil {
		return def
	}
	lines := bytes.Fields(b)
	if len(lines) < 3 || string(lines[0]) != "0" || string(lines[1]) != "1" {
		return def
	}
	n, err := strconv.ParseInt(string(lines[2]), 10, 64)
	if err != nil || n < 0 {
		return def
	}
	return n
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
		return 0, fmt.Errorf("tiering: inspect %s: %w", path, err)
	}
	defer f.Close() // read-only: nothing to lose on close
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("tiering: inspect %s: %w", path, err)
	}
	size := fi.Size()
	next := base
	hdr := make([]byte, segment.HeaderSize)
	for pos := int64(0); pos+segment.HeaderSize <= size; {
		if _, err := f.ReadAt(hdr, pos); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return 0, fmt.Errorf("tiering: inspect %s: %w", path, err)
		}
		h, err := segment.ParseHeader(hdr)
		if err != nil || h.BaseOffset < next || pos+int64(h.Size()) > size {
			break // a torn or not yet written tail
		}
		next = h.NextOffset()
		pos += int64(h.Size())
	}
	return next, nil
}
