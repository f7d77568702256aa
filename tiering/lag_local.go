package tiering

import (
	"fmt"
	"os"
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

// InspectLocal reads the partition directory dir without locking or
// writing anything, so it may run while the broker appends to it: the
// segments as segment.ListSegments finds them (names and sizes of the
// files, the log end from the batch headers of the last segment) and the
// log-start checkpoint (a missing or unreadable one counts as offset 0). m
// is the partition's committed manifest, nil if it has none. It fails with
// an error satisfying errors.Is(err, fs.ErrNotExist) when dir does not
// exist.
func InspectLocal(dir string, m *Manifest, now time.Time) (LocalState, error) {
	ls := LocalState{Dir: dir}
	segs, err := segment.ListSegments(dir)
	if err != nil {
		return ls, fmt.Errorf("tiering: inspect: %w", err)
	}
	logStart, _, err := segment.ReadLogStartOffset(dir)
	if err != nil {
		logStart = 0 // a status display goes on without it
	}
	if len(segs) == 0 {
		ls.LogStart, ls.LogEnd = logStart, logStart
		return ls, nil
	}
	last := segs[len(segs)-1]
	ls.LogEnd = last.NextOffset
	ls.LogStart = min(max(segs[0].BaseOffset, logStart), ls.LogEnd)
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

// Pending counts the sealed segments of segs (in offset order, as
// segment.Log.Segments returns them) whose offsets are not all in m (all
// sealed segments when m is nil), their bytes, and the age at now of the
// oldest by its .log file's modification time (0 when none, or when the
// file is gone). It stats one file.
func Pending(segs []segment.SegmentInfo, m *Manifest, now time.Time) (n int, bytes int64, oldest time.Duration) {
	end := int64(-1)
	if m != nil {
		end = m.EndOffset()
	}
	n, bytes, path := pendingSegments(segs, end)
	if path != "" {
		if fi, err := os.Stat(path); err == nil {
			oldest = max(now.Sub(fi.ModTime()), 0)
		}
	}
	return n, bytes, oldest
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
