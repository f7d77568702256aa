package segment

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// TruncateTo drops every batch holding offsets >= offset, as a follower does
// after a leader change (KIP-101). A batch that straddles offset is dropped
// whole, so the log end may end up below offset. Segments after the cut are
// deleted; the segment holding it becomes the active one again. The epoch
// cache is truncated too; the high watermark and recovery point come down
// to the new log end (the recovery-point checkpoint is rewritten before
// TruncateTo returns). offset >= LogEndOffset is a no-op; below
// LogStartOffset it is TruncateFullyAndStartAt(offset).
func (l *Log) TruncateTo(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("%w: truncate to %d", ErrOffsetOutOfRange, offset)
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	logStart, logEnd := l.mu.logStart, l.mu.logEnd
	segs := slices.Clone(l.mu.segs)
	l.mu.Unlock()
	if offset >= logEnd {
		return nil
	}
	if offset < logStart {
		return l.startOverAtLocked(offset)
	}

	k := 0 // segments kept: those starting below offset (at least the first)
	for k < len(segs) && segs[k].base < offset {
		k++
	}
	k = max(k, 1)
	s, doomed := segs[k-1], segs[k:]
	l.mu.Lock()
	snap := snapLocked(s)
	l.mu.Unlock()

	cut, err := findCut(snap, offset)
	if err != nil {
		return fmt.Errorf("segment: truncate %s: %w", s.logPath, err)
	}

	cfg, now := l.config(), l.opts.now()
	l.mu.Lock()
	cut.install(s, now)
	l.mu.segs = segs[:k]
	l.mu.logEnd = cut.next
	l.mu.hw = min(l.mu.hw, cut.next)
	rpLowered := l.mu.recoveryPoint > cut.next
	l.mu.recoveryPoint = min(l.mu.recoveryPoint, cut.next)
	l.mu.truncGen++
	l.wakeFlushWaitersLocked()
	l.notifyLocked()
	l.mu.Unlock()
	l.active = s

	var errs []error
	if err := s.w.Truncate(cut.pos); err != nil {
		errs = append(errs, fmt.Errorf("segment: truncate %s: %w", s.logPath, err))
	}
	for _, e := range []*entryFile{&s.index, &s.timeIndex} {
		if err := e.w.Truncate(int64(e.n * e.entrySize)); err != nil {
			errs = append(errs, fmt.Errorf("segment: truncate %s: %w", e.path, err))
		}
	}
	errs = append(errs, s.preallocate(cfg))
	for _, d := range doomed {
		errs = append(errs, d.remove())
	}
	l.closeLater(doomed)
	if err := s.w.Sync(); err != nil {
		errs = append(errs, fmt.Errorf("segment: fsync %s: %w", s.logPath, err))
	}
	errs = append(errs, syncDir(l.dir))
	if err := errors.Join(errs...); err != nil {
		return l.poison(err)
	}
	if rpLowered {
		if err := l.writeCheckpointsLocked(true /* force */); err != nil {
			return err
		}
	}
	if err := l.lowerCleanerCheckpointLocked(cut.next); err != nil {
		return err
	}
	return l.epochs.truncateFromEnd(cut.next)
}

// cutPoint is the state of a segment cut at a batch boundary.
type cutPoint struct {
	pos, next          int64
	index, timeIndex   []byte // entries kept, in a fresh buffer
	maxTs, maxTsOffset int64
	lastIndexPos       int64
	lastTimeTs         int64
}

// findCut computes how to cut a segment so that it ends before the batch
// holding offset. It reads the segment and its indexes without any lock.
func findCut(snap readSnap, offset int64) (cutPoint, error) {
	c := cutPoint{pos: snap.size, next: snap.next}
	r := newHeaderReader(snap.f, snap.size)
	defer r.release()
	pos, h, found, err := seekOffset(r, snap.index, snap.base, offset)
	if err != nil {
		return c, err
	}
	if found {
		c.pos, c.next = pos, h.BaseOffset
	}
	nIdx, err := snap.index.search(func(e []byte) bool { _, p := indexEntry(e); return int64(p) < c.pos })
	if err != nil {
		return c, err
	}
	if c.index, err = readViewEntries(snap.index, nIdx); err != nil {
		return c, err
	}
	// Keep the time entries recorded with the index entries kept: those for
	// batches up to the last one (a sealed segment's final entry goes).
	nTime := 0
	if nIdx > 0 {
		rel, p := indexEntry(c.index[(nIdx-1)*IndexEntrySize:])
		c.lastIndexPos = int64(p)
		nTime, err = snap.timeIndex.search(func(e []byte) bool { _, r := timeEntry(e); return r <= rel })
		if err != nil {
			return c, err
		}
	}
	if c.timeIndex, err = readViewEntries(snap.timeIndex, nTime); err != nil {
		return c, err
	}
	// The last time entry kept holds the max timestamp up to the last index
	// entry kept; the batches from that entry on are read.
	c.maxTs, c.maxTsOffset, c.lastTimeTs = -1, snap.base, -1
	if nTime > 0 {
		ts, rel := timeEntry(c.timeIndex[(nTime-1)*TimeIndexEntrySize:])
		c.maxTs, c.maxTsOffset, c.lastTimeTs = ts, snap.base+int64(rel), ts
	}
	for p := c.lastIndexPos; p < c.pos; {
		h, err := r.at(p)
		if err != nil {
			return c, err
		}
		if h.MaxTimestamp > c.maxTs {
			c.maxTs, c.maxTsOffset = h.MaxTimestamp, h.BaseOffset
		}
		p += int64(h.Size())
	}
	return c, nil
}

// readViewEntries copies the first n entries of an index into a fresh
// buffer with room to grow.
func readViewEntries(v entryView, n int) ([]byte, error) {
	buf := make([]byte, n*v.entrySize, max(n*v.entrySize, 1024))
	if v.mem != nil {
		copy(buf, v.mem)
		return buf, nil
	}
	if n == 0 {
		return buf, nil
	}
	if _, err := v.f.ReadAt(buf, 0); err != nil {
		return nil, fmt.Errorf("segment: read index: %w", err)
	}
	return buf, nil
}

// install applies the cut to s in memory, making it active. Caller holds
// appendMu, flushMu and mu.
func (c *cutPoint) install(s *segment, now time.Time) {
	s.size, s.next = c.pos, c.next
	s.maxTs, s.maxTsOffset = c.maxTs, c.maxTsOffset
	s.lastIndexPos, s.lastTimeTs = c.lastIndexPos, c.lastTimeTs
	s.index.mem, s.index.n = c.index, len(c.index)/IndexEntrySize
	s.timeIndex.mem, s.timeIndex.n = c.timeIndex, len(c.timeIndex)/TimeIndexEntrySize
	// Entries still pending in memory were never written: keep them pending.
	s.index.written = min(s.index.written, s.index.n)
	s.timeIndex.written = min(s.timeIndex.written, s.timeIndex.n)
	s.sealed, s.indexSynced = false, false
	s.created = now
}

// TruncateFullyAndStartAt deletes every segment and starts an empty log at
// offset (a follower too far behind, or a replica restored from elsewhere).
// Log start, log end, high watermark and recovery point all become offset;
// the epoch cache is cleared; checkpoints are written before it returns.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("%w: start at %d", ErrOffsetOutOfRange, offset)
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	if err := l.writable(); err != nil {
		return err
	}
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	return l.startOverAtLocked(offset)
}

// startOverAtLocked replaces every segment by an empty one at offset. Caller
// holds appendMu and flushMu (or is recovery, before the log is shared).
func (l *Log) startOverAtLocked(offset int64) error {
	cfg, now := l.config(), l.opts.now()
	l.mu.Lock()
	old := slices.Clone(l.mu.segs)
	l.mu.Unlock()
	var errs []error
	for _, s := range old {
		errs = append(errs, s.remove())
	}
	if err := errors.Join(errs...); err != nil {
		return l.poison(err)
	}
	ns, err := createSegment(l.dir, offset, cfg, l.opts.wrapFile, now)
	if err != nil {
		return l.poison(err)
	}
	l.mu.Lock()
	l.mu.segs = []*segment{ns}
	l.mu.logStart, l.mu.logEnd, l.mu.recoveryPoint = offset, offset, offset
	l.mu.hw = offset
	l.mu.truncGen++
	l.wakeFlushWaitersLocked()
	l.notifyLocked()
	l.mu.Unlock()
	l.active = ns
	l.closeLater(old)
	if err := syncDir(l.dir); err != nil {
		return l.poison(err)
	}
	if err := l.writeCheckpointsLocked(true /* force */); err != nil {
		return err
	}
	if err := writeOffsetCheckpoint(l.dir, logStartOffsetFile, offset); err != nil {
		return l.poison(err)
	}
	if err := l.lowerCleanerCheckpointLocked(offset); err != nil {
		return err
	}
	return l.epochs.clear()
}
