package tiering

import (
	"os"
	"time"
)

// Lag is the upload state of one partition, for `strata tier status` and
// metrics.
type Lag struct {
	Leader      bool  // this archiver uploads
	LeaderEpoch int32 // the epoch it uploads as (last BecomeLeader)
	Fenced      bool  // a newer leader wrote the manifest; uploads stopped

	// Remote log, per the last manifest known committed. Known is false
	// until the manifest was loaded; the remote fields are then zero.
	Known          bool
	RemoteStart    int64 // remote log start offset
	RemoteEnd      int64 // offset after the last remote record
	RemoteSegments int
	RemoteBytes    int64

	// Sealed local segments whose offsets are not all remote yet (all
	// sealed segments while the manifest is unknown), whether or not the
	// high watermark passed them.
	SegmentsPending int
	BytesPending    int64
	// OldestPending is the age of the oldest of them, by the modification
	// time of its .log file (about when it was sealed); 0 when none.
	OldestPending time.Duration

	LastUpload    time.Time // last committed upload, zero if none since start
	LastError     error     // last failed step, nil if none since start
	LastErrorAt   time.Time
	Failing       bool  // the last step failed (LastError is current)
	UploadedSegs  int64 // segments uploaded since start
	UploadedBytes int64
	// Backoff is the wait before the next attempt that the last failed
	// step chose (0 when not failing); Throttled counts the failed steps
	// the store throttled since start (S3's SlowDown).
	Backoff   time.Duration
	Throttled int64
}

// Lag reports the partition's upload state. It stats one local file and
// does no other I/O.
func (a *Archiver) Lag() Lag {
	a.mu.Lock()
	l := Lag{
		Leader:        a.mu.leader,
		LeaderEpoch:   a.mu.epoch,
		Fenced:        a.mu.fenced,
		LastUpload:    a.mu.lastUpload,
		LastError:     a.mu.lastErr,
		LastErrorAt:   a.mu.lastErrAt,
		Failing:       a.mu.failures > 0,
		UploadedSegs:  a.mu.uploadedSegs,
		UploadedBytes: a.mu.uploadedBytes,
		Backoff:       a.mu.backoff,
		Throttled:     a.mu.throttled,
	}
	m := a.mu.manifest
	a.mu.Unlock()

	end := int64(-1)
	if m != nil {
		l.Known = true
		l.RemoteStart, l.RemoteEnd = m.LogStartOffset, m.EndOffset()
		l.RemoteSegments, l.RemoteBytes = len(m.Segments), m.Bytes()
		end = l.RemoteEnd
	}
	var oldest string
	l.SegmentsPending, l.BytesPending, oldest = pendingSegments(a.cfg.Log.Segments(), end)
	if oldest != "" {
		if fi, err := os.Stat(oldest); err == nil {
			l.OldestPending = max(a.cfg.Now().Sub(fi.ModTime()), 0)
		}
	}
	return l
}
