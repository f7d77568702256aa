package segment

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// This file moves a live log to another directory (the broker's
// AlterReplicaLogDirs, KIP-113), while it keeps serving:
//
//  1. Mover.CopySealed copies the files of the sealed segments, which
//     never change, into a staging directory, with no lock held beyond
//     short snapshots of the segment list. Appends, reads, flushes and
//     retention go on.
//  2. Mover.Finish takes appendMu and flushMu (appends and flushes
//     wait; reads go on), flushes the log and writes its checkpoints,
//     copies what is left (segments sealed since, the active segment up
//     to its size, its index entries, and every other file of the
//     directory: checkpoints, the leader-epoch checkpoint, snapshots and
//     whatever the owner keeps there), fsyncs them, and calls the
//     caller's commit, which makes the staged directory the log's
//     directory (a rename). The log then reopens each segment's files in
//     the new directory and carries their state over; the old
//     descriptors close after file.delete.delay.ms, as deleted segments'
//     do, so reads already handed out finish. The old directory is the
//     caller's to delete.
//
// Nothing is written to the old directory from the start of Finish on, so
// the staged copy is the log as of that moment, whole. A failure before
// commit leaves the log in its old directory, serving as before; the
// caller removes the staging directory.

// moveCloseDelay is the least time the files in the old directory stay
// open after a move.
const moveCloseDelay = 30 * time.Second

// Mover copies a log into a staging directory; see above.
type Mover struct {
	l   *Log
	dst string
	// copied holds the segments copied, by base offset, with the
	// log's truncation generation when each was: a truncation since may
	// have cut and rewritten it, and it is copied again.
	copied map[int64]uint64
	sizes  map[int64]int64 // bytes of the .log of each segment copied

	bytes atomic.Int64 // bytes of .log files copied
	next  atomic.Int64 // the next offset of the copied segments
}

// NewMover prepares to copy l into dst, which must exist and be empty.
func (l *Log) NewMover(dst string) *Mover {
	m := &Mover{l: l, dst: dst, copied: map[int64]uint64{}, sizes: map[int64]int64{}}
	m.next.Store(l.LogStartOffset())
	return m
}

// Bytes is the size of the .log files copied so far.
func (m *Mover) Bytes() int64 { return m.bytes.Load() }

// Offset is the offset up to which the copy holds the log (the end of
// the segments copied so far).
func (m *Mover) Offset() int64 { return m.next.Load() }

// CopySealed copies the sealed segments not copied yet, until none is
// left or stop returns true (checked between files). A segment deleted
// by retention while it is copied is skipped.
func (m *Mover) CopySealed(stop func() bool) error {
	for range 1 << 20 { // bounded: each pass copies at least one segment or returns
		var todo *segment
		m.l.mu.Lock()
		if m.l.mu.closed {
			m.l.mu.Unlock()
			return ErrClosed
		}
		for _, s := range m.l.mu.segs {
			if gen, ok := m.copied[s.base]; s.sealed && (!ok || gen != m.l.mu.truncGen) {
				todo = s
				break
			}
		}
		m.l.mu.Unlock()
		if todo == nil {
			return nil
		}
		if stop != nil && stop() {
			return errors.New("segment: move stopped")
		}
		if err := m.copySegment(todo, false); err != nil {
			if m.l.segmentGone(todo) {
				// Deleted by retention (or cut by a truncation) while
				// copied: not wanted.
				m.forget(todo.base)
				continue
			}
			return err
		}
	}
	return errors.New("segment: move: too many segments")
}

// segmentGone reports whether s is no longer one of the log's segments.
func (l *Log) segmentGone(s *segment) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range l.mu.segs {
		if x == s {
			return false
		}
	}
	return true
}

// copySegment copies s's three files into m.dst and fsyncs them. A sealed
// segment's files are final; for the active one (Finish, holding
// appendMu) the .log is copied up to its size and the index files up to
// their entries.
func (m *Mover) copySegment(s *segment, active bool) error {
	m.l.mu.Lock()
	size, next, gen := s.size, s.next, m.l.mu.truncGen
	idxLen, tidxLen := int64(-1), int64(-1)
	if active {
		idxLen, tidxLen = int64(s.index.n*s.index.entrySize), int64(s.timeIndex.n*s.timeIndex.entrySize)
	}
	m.l.mu.Unlock()
	name := segmentName(s.base)
	if err := copyFileRange(s.f, filepath.Join(m.dst, name+LogSuffix), size); err != nil {
		return err
	}
	if err := copyFileRange(s.index.f, filepath.Join(m.dst, name+IndexSuffix), idxLen); err != nil {
		return err
	}
	if err := copyFileRange(s.timeIndex.f, filepath.Join(m.dst, name+TimeIndexSuffix), tidxLen); err != nil {
		return err
	}
	m.copied[s.base], m.sizes[s.base] = gen, size
	m.sumBytes()
	m.next.Store(max(m.next.Load(), next))
	return nil
}

// forget removes the copy of the segment at base.
func (m *Mover) forget(base int64) {
	_ = removeSegmentFiles(m.dst, base)
	delete(m.copied, base)
	delete(m.sizes, base)
	m.sumBytes()
}

func (m *Mover) sumBytes() {
	var n int64
	for _, b := range m.sizes {
		n += b
	}
	m.bytes.Store(n)
}

// copyFileRange writes the first n bytes of src (all of it for n < 0) to a
// new file at path, and fsyncs it.
func copyFileRange(src *os.File, path string, n int64) error {
	if n < 0 {
		fi, err := src.Stat()
		if err != nil {
			return fmt.Errorf("segment: move: %w", err)
		}
		n = fi.Size()
	}
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("segment: move: %w", err)
	}
	_, err = io.Copy(dst, io.NewSectionReader(src, 0, n))
	if err == nil {
		err = dst.Sync()
	}
	err = errors.Join(err, dst.Close())
	if err != nil {
		return fmt.Errorf("segment: move to %s: %w", path, err)
	}
	return nil
}

// copyPlainFile copies the regular file src to dst and fsyncs it.
func copyPlainFile(src, dst string) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("segment: move: %w", err)
	}
	defer f.Close()
	return copyFileRange(f, dst, -1)
}

// Finish completes the copy and switches the log to it; see the top of
// the file. commit is called with appendMu and flushMu held once the
// staging directory holds the whole log, fsynced; it returns the
// directory the log lives in from then on (the staging directory renamed,
// say). An error from commit, or before it, leaves the log where it was.
// An error after commit (the new files cannot be opened) poisons the log.
// before, if not nil, is called first, holding appendMu: the owner's last
// writes into the old directory (a snapshot of its own state) go there.
func (m *Mover) Finish(before func(dir string) error, commit func() (string, error)) error {
	l := m.l
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	if before != nil {
		if err := before(l.dir); err != nil {
			return err
		}
	}
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	if err := l.flushLocked(); err != nil {
		return err
	}
	if err := l.writeCheckpointsLocked(true /* force */); err != nil {
		return err
	}
	l.mu.Lock()
	segs := append([]*segment(nil), l.mu.segs...)
	logStart := l.mu.logStart
	oldDir := l.dir
	l.mu.Unlock()
	if err := writeOffsetCheckpoint(oldDir, logStartOffsetFile, logStart); err != nil {
		return l.poison(err)
	}
	active := segs[len(segs)-1]
	if err := active.index.writePending(); err != nil {
		return l.poison(err)
	}
	if err := active.timeIndex.writePending(); err != nil {
		return l.poison(err)
	}
	l.mu.Lock()
	gen := l.mu.truncGen
	l.mu.Unlock()
	want := map[int64]bool{}
	for _, s := range segs {
		want[s.base] = true
		if g, ok := m.copied[s.base]; s != active && ok && g == gen {
			continue
		}
		if err := m.copySegment(s, s == active); err != nil {
			return err
		}
	}
	// Copies of segments retention deleted since.
	for base := range m.copied {
		if !want[base] {
			m.forget(base)
		}
	}
	ents, err := os.ReadDir(oldDir)
	if err != nil {
		return fmt.Errorf("segment: move: %w", err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || e.Name() == cleanShutdownFile {
			continue
		}
		if _, _, err := ParseSegmentFileName(e.Name()); err == nil {
			continue
		}
		if err := copyPlainFile(filepath.Join(oldDir, e.Name()), filepath.Join(m.dst, e.Name())); err != nil {
			return err
		}
	}
	if err := syncDir(m.dst); err != nil {
		return err
	}
	newDir, err := commit()
	if err != nil {
		return err
	}

	// Committed: the log lives in newDir. Reopen every segment there.
	cfg := l.config()
	fresh := make([]*segment, len(segs))
	for i, s := range segs {
		ns, err := openSegmentFiles(newDir, s.base, l.opts.wrapFile)
		if err == nil && s == active {
			err = errors.Join(ns.index.preallocate(cfg.SegmentIndexBytes), ns.timeIndex.preallocate(cfg.SegmentIndexBytes))
		}
		if err != nil {
			for _, x := range fresh[:i] {
				_ = x.close()
			}
			if ns != nil {
				_ = ns.close()
			}
			return l.poison(fmt.Errorf("segment: move: reopen in %s: %w", newDir, err))
		}
		carryState(ns, s)
		fresh[i] = ns
	}
	epochErr := l.epochs.relocate(newDir)
	l.mu.Lock()
	l.mu.segs = fresh
	l.dir = newDir
	l.mu.dirDirty = true
	l.mu.Unlock()
	l.active = fresh[len(fresh)-1]
	// The old files close after file.delete.delay.ms, and never sooner
	// than moveCloseDelay: unlike a deleted segment's, their data is
	// still the log's, and a read that took them must finish.
	l.closeAfter(segs, max(cfg.FileDeleteDelayMs, moveCloseDelay.Milliseconds()))
	l.opts.logger.Info("segment: log moved", "from", oldDir, "to", newDir, "segments", len(fresh))
	if epochErr != nil {
		return l.poison(epochErr)
	}
	return nil
}

// carryState copies a segment's state into ns, its files reopened in
// another directory. Caller holds appendMu.
func carryState(ns, s *segment) {
	idx, tidx := ns.index, ns.timeIndex
	f, w, path := ns.f, ns.w, ns.logPath
	*ns = *s
	ns.f, ns.w, ns.logPath = f, w, path
	for _, p := range []struct{ dst, fresh, old *entryFile }{{&ns.index, &idx, &s.index}, {&ns.timeIndex, &tidx, &s.timeIndex}} {
		*p.dst = *p.old
		p.dst.path, p.dst.f, p.dst.w = p.fresh.path, p.fresh.f, p.fresh.w
	}
}
