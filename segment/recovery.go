package segment

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Recovery. Open loads the segments of the directory, oldest first:
//
//   - First the cleaner's swaps: every .swap marker is completed (its
//     sources removed, its .cleaned files renamed into place, the cleaner
//     checkpoint raised) and any .cleaned file left without a marker is
//     removed (clean_swap.go).
//   - Leftover temp files (*.tmp) are removed, and so are .index and
//     .timeindex files without a .log.
//   - After a clean shutdown (Close wrote the marker) every segment is
//     trusted. Otherwise a segment is trusted when the next segment starts
//     below the recovery point: it was sealed, fsynced with its indexes, and
//     its data is older than the last flush.
//   - A trusted segment is checked cheaply: its index entries must be
//     well-formed, the last index entry must point at a batch with the
//     offset it names, and the batch headers from there must end exactly at
//     the end of the file. Any mismatch, or a missing index file, makes it
//     scanned like an untrusted one.
//   - Every batch of an untrusted segment is validated (ValidateBatch: CRC,
//     length, magic) and must continue the offsets of the one before; the
//     indexes are rebuilt from the scan and rewritten when they differ.
//   - Each segment must start at the offset where the one before ends.
//     Below the cleaner checkpoint, where segments may have been cleaned,
//     a batch or segment may also start later (compaction leaves gaps).
//   - At the first damaged batch the segment is cut there and every later
//     segment deleted (likewise from a segment that does not continue the
//     one before); RecoveryReport says what was dropped and why.
//   - The partition leader epoch field is not covered by the CRC (Kafka's
//     format), so damage there cannot be detected.
//
// Scanned segments are then fsynced, so the recovery point becomes the log
// end, and the marker is removed before the log takes appends.

// RecoveryReport tells what Open found and repaired.
type RecoveryReport struct {
	Clean           bool  // closed cleanly: segments were only checked, not rescanned
	RecoveryPoint   int64 // the checkpointed recovery point Open started from
	ScannedSegments int   // segments whose every batch was validated
	ScannedBytes    int64
	// TruncatedAt is the offset where a torn or corrupt tail was cut
	// (the log end after recovery); -1 when nothing was dropped.
	TruncatedAt    int64
	DroppedBytes   int64 // bytes cut, in the damaged segment and the later ones deleted
	DroppedBatches int   // batches cut: the damaged one and those whose headers still parse after it
	// DroppedSegments lists the .log files deleted because they followed
	// the damage.
	DroppedSegments []string
	RebuiltIndexes  []string // index files rewritten because they were missing or did not match the log
	RemovedFiles    []string // leftover temp files, orphan index files and uncommitted .cleaned files
	// CompletedSwaps lists the base offsets of cleaned segments whose
	// committed swap recovery completed (clean_swap.go).
	CompletedSwaps []int64
	// RebuiltCheckpoints lists the checkpoint files that did not parse
	// and were rebuilt from the log: the recovery point by scanning every
	// segment, the log start offset from the first segment, the leader
	// epochs from the batches' partition leader epochs, the high
	// watermark from the log start (the leader raises it again).
	RebuiltCheckpoints []string
	// Reason says why the tail was cut (it wraps ErrCorrupt); nil when
	// nothing was.
	Reason error
}

// damage is where and why a segment's valid prefix ends.
type damage struct {
	pos    int64
	offset int64
	reason error
}

// recover loads the directory into l. Caller is Open, before l is shared.
func (l *Log) recover() error {
	rep := &l.recovery
	rep.TruncatedAt = -1
	cfg := l.mu.cfg
	now := l.opts.now()

	cleanerCkpt, gapsBelow, rebuildCleaner, err := l.recoverSwaps()
	if err != nil {
		return err
	}
	logs, err := l.listSegments()
	if err != nil {
		return err
	}
	_, err = os.Stat(filepath.Join(l.dir, cleanShutdownFile))
	rep.Clean = err == nil
	rp, rpOK, err := l.readRebuildable(recoveryPointFile)
	if err != nil {
		return err
	}
	rep.RecoveryPoint = rp
	l.ckpt.rp = -1 // rewrite unless it already holds the recovery point
	if rpOK {
		l.ckpt.rp = rp
	}
	logStart, logStartOK, err := l.readRebuildable(logStartOffsetFile)
	if err != nil {
		return err
	}
	ckptLogStart := logStart

	var segs []*segment
	var scanned []*segment
	win := &scanWindow{}
	for i, base := range logs.bases {
		s, err := openSegmentFiles(l.dir, base, l.opts.wrapFile)
		if err != nil {
			return err
		}
		segs = append(segs, s)
		l.mu.segs = segs // so Open closes them on error
		fi, err := s.f.Stat()
		if err != nil {
			return fmt.Errorf("segment: recover: %w", err)
		}
		fileSize := fi.Size()
		last := i == len(logs.bases)-1
		trusted := rep.Clean || (!last && logs.bases[i+1] < rp)
		// A segment starts where the one before ends: a roll names it by
		// the log end. Anything else means the segment before lost its tail.
		// A cleaned segment may end before the next one starts.
		gapAfterCleaned := i > 0 && s.base > segs[i-1].next && segs[i-1].base < gapsBelow
		if i > 0 && s.base != segs[i-1].next && !gapAfterCleaned {
			rep.TruncatedAt = segs[i-1].next
			rep.Reason = fmt.Errorf("%w: segment %d does not start at the end %d of the one before", ErrCorrupt, s.base, segs[i-1].next)
			segs = segs[:i]
			l.mu.segs = segs
			if err := l.dropSegment(s, fileSize); err != nil {
				return err
			}
			if err := l.dropLater(logs.bases[i+1:]); err != nil {
				return err
			}
			break
		}
		if trusted && logs.index[base] && logs.timeIndex[base] {
			ok, err := l.loadTrusted(s, fileSize, !last, s.base < gapsBelow)
			if err != nil {
				return err
			}
			if ok {
				s.indexSynced = !last
				continue
			}
		}
		dmg, err := l.scanSegment(s, fileSize, !last, s.base < gapsBelow, logs, win)
		if err != nil {
			return err
		}
		scanned = append(scanned, s)
		if dmg != nil {
			if err := l.cutTail(s, fileSize, dmg); err != nil {
				return err
			}
			if err := l.dropLater(logs.bases[i+1:]); err != nil {
				return err
			}
			break
		}
	}
	win.buf = nil

	l.mu.segs = segs
	if len(segs) == 0 {
		s, err := createSegment(l.dir, logStart, cfg, l.opts.wrapFile, now)
		if err != nil {
			return err
		}
		segs = []*segment{s}
		l.mu.segs = segs
	}
	if err := l.activate(segs[len(segs)-1], cfg, now); err != nil {
		return err
	}
	for _, s := range scanned {
		if err := s.syncFiles(s.sealed); err != nil {
			return err
		}
		s.indexSynced = s.sealed
	}
	if err := syncDir(l.dir); err != nil {
		return err
	}
	l.mu.logEnd = l.active.next
	l.mu.logStart = max(logStart, segs[0].base)
	l.mu.recoveryPoint = l.mu.logEnd
	l.mu.cleanerCkpt = cleanerCkpt
	if rebuildCleaner || cleanerCkpt > l.mu.logEnd {
		l.mu.cleanerCkpt = l.mu.logEnd
		if err := writeOffsetCheckpoint(l.dir, cleanerOffsetFile, l.mu.cleanerCkpt); err != nil {
			return err
		}
	}
	l.mu.lastFlush = time.Now() // the flusher measures flush.ms by the real clock

	var rebuilt bool
	if l.epochs, rebuilt, err = newEpochCache(l.dir, l.LogEndOffset, l.epochsFromBatches); err != nil {
		return err
	}
	if rebuilt {
		l.noteRebuilt(leaderEpochFile, "from the batches' leader epochs")
	}
	if l.mu.logStart > l.mu.logEnd {
		// The log start checkpoint is ahead of the surviving data.
		if err := l.startOverAtLocked(l.mu.logStart); err != nil {
			return err
		}
	}
	var doomed []*segment
	for i, s := range l.mu.segs[:len(l.mu.segs)-1] {
		// Wholly below the log start when the next segment begins at or
		// below it (an emptied cleaned segment ends where it begins).
		if l.mu.segs[i+1].base > l.mu.logStart {
			break
		}
		doomed = append(doomed, s)
	}
	if len(doomed) > 0 {
		if _, err := l.deleteOldestLocked(doomed); err != nil {
			return err
		}
	}
	if err := l.epochs.truncateFromEnd(l.mu.logEnd); err != nil {
		return err
	}
	if !l.opts.keepsEpochs() {
		if err := l.epochs.truncateFromStart(l.mu.logStart); err != nil {
			return err
		}
	}
	if hw, ok, err := l.readRebuildable(highWatermarkFile); err != nil {
		return err
	} else if ok {
		l.mu.hw, l.mu.hwSet = min(max(hw, l.mu.logStart), l.mu.logEnd), true
		l.ckpt.hw, l.ckpt.hwExists = hw, true
	} else if slices.Contains(rep.RebuiltCheckpoints, highWatermarkFile) {
		// Unset, the high watermark is the owner's to initialize
		// (InitHighWatermark); until it is written again, no file is
		// better than one that does not parse.
		if err := os.Remove(filepath.Join(l.dir, highWatermarkFile)); err != nil {
			return fmt.Errorf("segment: recover: %w", err)
		}
	}
	if err := l.writeCheckpointsLocked(false /* only what changed */); err != nil {
		return err
	}
	if !logStartOK || l.mu.logStart != ckptLogStart || slices.Contains(rep.RebuiltCheckpoints, logStartOffsetFile) {
		if err := writeOffsetCheckpoint(l.dir, logStartOffsetFile, l.mu.logStart); err != nil {
			return err
		}
	}
	if rep.Clean {
		if err := os.Remove(filepath.Join(l.dir, cleanShutdownFile)); err != nil {
			return fmt.Errorf("segment: recover: %w", err)
		}
		if err := syncDir(l.dir); err != nil {
			return err
		}
	}
	if rep.Reason != nil {
		l.opts.logger.Warn("segment: recovery cut a damaged tail", "dir", l.dir,
			"offset", rep.TruncatedAt, "bytes", rep.DroppedBytes, "batches", rep.DroppedBatches, "reason", rep.Reason)
	}
	return nil
}

// readRebuildable reads an offset checkpoint that recovery can do
// without: one that does not parse is reported (RebuiltCheckpoints) and
// read as missing, which makes recovery derive it from the log (a full
// scan for the recovery point, the first segment for the log start, the
// log start for the high watermark) and rewrite it. An error reading the
// file is returned: the directory's disk is failing.
func (l *Log) readRebuildable(name string) (off int64, ok bool, err error) {
	off, ok, err = readOffsetCheckpoint(l.dir, name)
	if errors.Is(err, ErrBadCheckpoint) {
		l.noteRebuilt(name, err.Error())
		return 0, false, nil
	}
	return off, ok, err
}

// noteRebuilt records and logs a checkpoint rebuilt from the log.
func (l *Log) noteRebuilt(name, why string) {
	l.recovery.RebuiltCheckpoints = append(l.recovery.RebuiltCheckpoints, name)
	l.opts.logger.Warn("segment: rebuilding a checkpoint that does not parse", "dir", l.dir, "file", name, "detail", why)
}

// dirListing is what listSegments found.
type dirListing struct {
	bases            []int64 // of .log files, ascending
	index, timeIndex map[int64]bool
}

// listSegments lists the segment files, removing temp files and orphan
// indexes.
func (l *Log) listSegments() (dirListing, error) {
	d := dirListing{index: map[int64]bool{}, timeIndex: map[int64]bool{}}
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return d, fmt.Errorf("segment: recover: %w", err)
	}
	logs := map[int64]bool{}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		name := e.Name()
		if strings.HasSuffix(name, tmpSuffix) {
			if err := l.removeLeftover(name); err != nil {
				return d, err
			}
			continue
		}
		base, suffix, err := ParseSegmentFileName(name)
		if err != nil {
			continue // not a segment file: another owner's, or a checkpoint
		}
		switch suffix {
		case LogSuffix:
			logs[base] = true
			d.bases = append(d.bases, base)
		case IndexSuffix:
			d.index[base] = true
		case TimeIndexSuffix:
			d.timeIndex[base] = true
		}
	}
	for base := range d.index {
		if !logs[base] {
			if err := l.removeLeftover(segmentName(base) + IndexSuffix); err != nil {
				return d, err
			}
		}
	}
	for base := range d.timeIndex {
		if !logs[base] {
			if err := l.removeLeftover(segmentName(base) + TimeIndexSuffix); err != nil {
				return d, err
			}
		}
	}
	slices.Sort(d.bases)
	return d, nil
}

func (l *Log) removeLeftover(name string) error {
	if err := os.Remove(filepath.Join(l.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("segment: recover: %w", err)
	}
	l.recovery.RemovedFiles = append(l.recovery.RemovedFiles, name)
	return nil
}

// loadTrusted loads a segment that needs no rescan: it reads the indexes,
// checks them against the log and finds the end by walking batch headers
// from the last index entry. ok is false when anything does not match; the
// caller then scans the segment.
func (l *Log) loadTrusted(s *segment, fileSize int64, sealed, gaps bool) (ok bool, err error) {
	// Close and roll trim index files to their entries: anything more
	// means they were not finished.
	idx, exact, err := readIndexFile(&s.index, validIndexEntry)
	if err != nil || !exact {
		return false, err
	}
	tidx, exact, err := readIndexFile(&s.timeIndex, validTimeEntry)
	if err != nil || !exact {
		return false, err
	}
	pos, off := int64(0), s.base
	if n := len(idx) / IndexEntrySize; n > 0 {
		rel, p := indexEntry(idx[(n-1)*IndexEntrySize:])
		pos, off = int64(p), s.base+int64(rel)
	}
	st := batchEntries{size: pos, next: off, maxTs: -1, maxTsOffset: s.base, lastIndexPos: pos, lastTimeTs: -1}
	if n := len(tidx) / TimeIndexEntrySize; n > 0 {
		ts, rel := timeEntry(tidx[(n-1)*TimeIndexEntrySize:])
		st.maxTs, st.maxTsOffset, st.lastTimeTs = ts, s.base+int64(rel), ts
	}
	r := newHeaderReader(s.f, fileSize)
	defer r.release()
	for st.size < fileSize {
		h, err := r.at(st.size)
		if err != nil || !followsOffset(h.BaseOffset, st.next, gaps) || h.Magic != Magic {
			return false, nil
		}
		if h.MaxTimestamp > st.maxTs {
			st.maxTs, st.maxTsOffset = h.MaxTimestamp, h.BaseOffset
		}
		st.size += int64(h.Size())
		st.next = h.NextOffset()
	}
	if st.size != fileSize || (st.maxTs >= 0 && st.maxTsOffset >= st.next && st.next > s.base) {
		return false, nil
	}
	s.size, s.next = st.size, st.next
	s.maxTs, s.maxTsOffset = st.maxTs, st.maxTsOffset
	s.lastIndexPos, s.lastTimeTs = st.lastIndexPos, st.lastTimeTs
	s.sealed = sealed
	if err := installEntries(&s.index, idx, idx, sealed); err != nil {
		return false, err
	}
	if err := installEntries(&s.timeIndex, tidx, tidx, sealed); err != nil {
		return false, err
	}
	return true, nil
}

// readIndexFile reads an index file's valid entries; exact is false when
// the file holds more than those (zeros of preallocation, or junk).
func readIndexFile(e *entryFile, valid func(prev, cur []byte) bool) (entries []byte, exact bool, err error) {
	fi, err := e.f.Stat()
	if err != nil {
		return nil, false, fmt.Errorf("segment: recover: %w", err)
	}
	entries, err = readEntries(e.f, fi.Size(), e.entrySize, valid)
	if err != nil {
		return nil, false, fmt.Errorf("segment: recover %s: %w", e.path, err)
	}
	return entries, int64(len(entries)) == fi.Size(), nil
}

// installEntries makes entries the content of e, rewriting the file when it
// differs from onDisk. A sealed index file is trimmed to its entries and
// searched from the file; an active one is held in memory.
func installEntries(e *entryFile, entries, onDisk []byte, sealed bool) error {
	if !bytes.Equal(entries, onDisk) {
		if _, err := e.w.WriteAt(entries, 0); err != nil {
			return fmt.Errorf("segment: rebuild %s: %w", e.path, err)
		}
	}
	fi, err := e.f.Stat()
	if err != nil {
		return fmt.Errorf("segment: recover: %w", err)
	}
	if fi.Size() != int64(len(entries)) {
		if err := e.w.Truncate(int64(len(entries))); err != nil {
			return fmt.Errorf("segment: rebuild %s: %w", e.path, err)
		}
	}
	e.n = len(entries) / e.entrySize
	e.written = e.n
	e.mem = nil
	if !sealed {
		e.mem = append(make([]byte, 0, max(len(entries), 1024)), entries...)
	}
	return nil
}

// scanWindow reads a segment file sequentially in large chunks.
type scanWindow struct {
	f    io.ReaderAt
	size int64
	buf  []byte
	pos  int64 // file position of buf[0]
	n    int   // valid bytes in buf
}

const scanChunk = 1 << 20

func (w *scanWindow) reset(f io.ReaderAt, size int64) {
	w.f, w.size, w.pos, w.n = f, size, 0, 0
	if w.buf == nil {
		w.buf = make([]byte, scanChunk)
	}
}

// get returns the n bytes at pos; pos+n must be within the file.
func (w *scanWindow) get(pos int64, n int) ([]byte, error) {
	if pos >= w.pos && pos+int64(n) <= w.pos+int64(w.n) {
		return w.buf[pos-w.pos : pos-w.pos+int64(n)], nil
	}
	if n > len(w.buf) {
		w.buf = make([]byte, n)
	}
	want := int(min(int64(len(w.buf)), w.size-pos))
	got, err := w.f.ReadAt(w.buf[:want], pos)
	if got < n {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		w.n = 0
		return nil, fmt.Errorf("segment: recover: read at %d: %w", pos, err)
	}
	w.pos, w.n = pos, got
	return w.buf[:n], nil
}

// scanSegment validates every batch of s, rebuilding its indexes, and
// returns where its valid prefix ends if not at the end of the file.
func (l *Log) scanSegment(s *segment, fileSize int64, sealed, gaps bool, logs dirListing, win *scanWindow) (*damage, error) {
	rep := &l.recovery
	rep.ScannedSegments++
	interval := l.mu.cfg.IndexIntervalBytes
	win.reset(s.f, fileSize)
	var st batchEntries
	st.start(s) // empty: size 0, next = base
	var dmg *damage
	for st.size < fileSize {
		rem := fileSize - st.size
		hb, err := win.get(st.size, int(min(rem, HeaderSize)))
		if err != nil {
			return nil, err
		}
		h, err := ParseHeader(hb)
		if err == nil && int64(h.Size()) > rem {
			err = fmt.Errorf("%w: batch at base offset %d needs %d bytes, %d remain", ErrTruncated, h.BaseOffset, h.Size(), rem)
		}
		if err == nil {
			var b []byte
			if b, err = win.get(st.size, h.Size()); err != nil {
				return nil, err
			}
			h, err = ValidateBatch(b)
		}
		if err == nil && !followsOffset(h.BaseOffset, st.next, gaps) {
			err = fmt.Errorf("%w: batch base offset %d, expected %d", ErrCorrupt, h.BaseOffset, st.next)
		}
		if err != nil {
			dmg = &damage{pos: st.size, offset: st.next, reason: err}
			break
		}
		st.add(s, h.BaseOffset, h.NextOffset(), h.MaxTimestamp, int64(h.RecordCount), int64(h.Size()), interval)
	}
	rep.ScannedBytes += st.size
	sealed = sealed && dmg == nil
	if sealed {
		st.sealEntry(s)
	}
	s.size, s.next = st.size, st.next
	s.maxTs, s.maxTsOffset = st.maxTs, st.maxTsOffset
	s.lastIndexPos, s.lastTimeTs = st.lastIndexPos, st.lastTimeTs
	s.sealed = sealed
	for _, ix := range []struct {
		e       *entryFile
		entries []byte
		existed bool
		valid   func(prev, cur []byte) bool
	}{
		{&s.index, st.index, logs.index[s.base], validIndexEntry},
		{&s.timeIndex, st.timeIndex, logs.timeIndex[s.base], validTimeEntry},
	} {
		onDisk, _, err := readIndexFile(ix.e, ix.valid)
		if err != nil {
			return nil, err
		}
		if !ix.existed || !bytes.Equal(onDisk, ix.entries) {
			rep.RebuiltIndexes = append(rep.RebuiltIndexes, ix.e.path)
		}
		if err := installEntries(ix.e, ix.entries, onDisk, sealed); err != nil {
			return nil, err
		}
	}
	return dmg, nil
}

// followsOffset reports whether a batch at base may follow a batch ending
// at next: right after it, or later when the segment may have been cleaned
// (gaps).
func followsOffset(base, next int64, gaps bool) bool {
	return base == next || (gaps && base > next)
}

// cutTail cuts segment s at the damage, recording what was dropped.
func (l *Log) cutTail(s *segment, fileSize int64, dmg *damage) error {
	rep := &l.recovery
	rep.TruncatedAt = dmg.offset
	rep.Reason = dmg.reason
	rep.DroppedBytes += fileSize - dmg.pos
	rep.DroppedBatches += countBatches(s.f, dmg.pos, fileSize)
	if err := s.w.Truncate(dmg.pos); err != nil {
		return fmt.Errorf("segment: recover: cut %s: %w", s.logPath, err)
	}
	return nil
}

// dropLater deletes the segments (given by base offset) that follow a
// damaged one, recording what was dropped.
func (l *Log) dropLater(bases []int64) error {
	rep := &l.recovery
	for _, base := range bases {
		path := filepath.Join(l.dir, segmentName(base)+LogSuffix)
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("segment: recover: %w", err)
		}
		fi, err := f.Stat()
		if err == nil {
			rep.DroppedBytes += fi.Size()
			rep.DroppedBatches += countBatches(f, 0, fi.Size())
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("segment: recover: %w", err)
		}
		if err := removeSegmentFiles(l.dir, base); err != nil {
			return err
		}
		rep.DroppedSegments = append(rep.DroppedSegments, path)
	}
	return nil
}

// dropSegment deletes a whole segment that does not continue the one before
// it, recording it as dropped.
func (l *Log) dropSegment(s *segment, fileSize int64) error {
	rep := &l.recovery
	rep.DroppedBytes += fileSize
	rep.DroppedBatches += countBatches(s.f, 0, fileSize)
	rep.DroppedSegments = append(rep.DroppedSegments, s.logPath)
	if err := s.close(); err != nil {
		return err
	}
	return removeSegmentFiles(l.dir, s.base)
}

func removeSegmentFiles(dir string, base int64) error {
	for _, suffix := range []string{LogSuffix, IndexSuffix, TimeIndexSuffix} {
		if err := os.Remove(filepath.Join(dir, segmentName(base)+suffix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("segment: recover: %w", err)
		}
	}
	return nil
}

// countBatches counts the batches from pos on whose headers parse, a
// trailing partial one included: how many a cut drops.
func countBatches(f io.ReaderAt, pos, size int64) int {
	n := 0
	var hb [HeaderSize]byte
	for pos < size {
		n++
		m, _ := f.ReadAt(hb[:min(int64(HeaderSize), size-pos)], pos)
		h, err := ParseHeader(hb[:m])
		if err != nil {
			return n
		}
		pos += int64(h.Size())
	}
	return n
}

// activate makes s the active segment: indexes in memory, files
// preallocated for appends.
func (l *Log) activate(s *segment, cfg Config, now time.Time) error {
	if s.sealed || s.index.mem == nil {
		for _, e := range []*entryFile{&s.index, &s.timeIndex} {
			if err := e.load(); err != nil {
				return err
			}
		}
	}
	s.sealed, s.indexSynced = false, false
	if err := s.preallocate(cfg); err != nil {
		return err
	}
	s.created = now
	l.active = s
	return nil
}
