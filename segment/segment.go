package segment

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"
)

// file is what the log writes segment files through. *os.File implements
// it; tests wrap it to inject faults (a failing fsync, torn writes).
// File is what a Log writes a segment file through (an *os.File unless
// WithFileWrapper says otherwise).
type File interface {
	io.ReaderAt
	io.WriterAt
	Truncate(size int64) error
	Sync() error
	Close() error
}

// SegmentInfo describes one segment of a Log.
type SegmentInfo struct {
	BaseOffset    int64 // offset of the segment's first batch; names its files
	NextOffset    int64 // offset after its last batch
	Size          int64 // bytes in the .log file
	Sealed        bool  // rolled: immutable from now on
	MaxTimestamp  int64 // largest batch max timestamp, -1 if none
	LogPath       string
	IndexPath     string
	TimeIndexPath string
	// LeaderEpochs lists the epochs that wrote the segment, with start
	// offsets clamped to BaseOffset.
	LeaderEpochs []EpochEntry
}

// segment is one .log file with its two indexes.
//
// Locking: base, logPath, f and w never change. The other fields are
// written while holding both Log.appendMu and Log.mu, and read under either
// (indexSynced: written and read under Log.mu).
type segment struct {
	base    int64
	logPath string
	f       *os.File // reads and zero-copy sends
	w       File     // writes, truncation, fsync; wraps f

	index     entryFile
	timeIndex entryFile

	size         int64     // committed bytes of the .log
	next         int64     // offset after the last batch
	maxTs        int64     // largest batch max timestamp, -1 if none
	maxTsOffset  int64     // base offset of the batch holding maxTs
	lastIndexPos int64     // position of the last offset-index entry, 0 if none
	lastTimeTs   int64     // timestamp of the last time-index entry, -1 if none
	created      time.Time // wall clock when the first batch was appended (or the log opened)
	sealed       bool
	indexSynced  bool // sealed and its index files fsynced
}

// openSegmentFiles opens (creating if needed) the three files of a segment.
func openSegmentFiles(dir string, base int64, wrap func(string, *os.File) File) (*segment, error) {
	name := filepath.Join(dir, segmentName(base))
	s := &segment{base: base, logPath: name + LogSuffix, next: base, maxTs: -1, maxTsOffset: base, lastTimeTs: -1}
	s.index = entryFile{path: name + IndexSuffix, entrySize: IndexEntrySize}
	s.timeIndex = entryFile{path: name + TimeIndexSuffix, entrySize: TimeIndexEntrySize}
	var err error
	if s.f, s.w, err = openFile(s.logPath, wrap); err != nil {
		return nil, err
	}
	if s.index.f, s.index.w, err = openFile(s.index.path, wrap); err != nil {
		return nil, errors.Join(err, s.w.Close())
	}
	if s.timeIndex.f, s.timeIndex.w, err = openFile(s.timeIndex.path, wrap); err != nil {
		return nil, errors.Join(err, s.w.Close(), s.index.w.Close())
	}
	return s, nil
}

func openFile(path string, wrap func(string, *os.File) File) (*os.File, File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("segment: %w", err)
	}
	return f, wrap(path, f), nil
}

// createSegment creates the files of a new, empty active segment, replacing
// any leftovers of that name.
func createSegment(dir string, base int64, cfg Config, wrap func(string, *os.File) File, now time.Time) (*segment, error) {
	s, err := openSegmentFiles(dir, base, wrap)
	if err != nil {
		return nil, err
	}
	for _, w := range []File{s.w, s.index.w, s.timeIndex.w} {
		if err := w.Truncate(0); err != nil {
			return nil, errors.Join(fmt.Errorf("segment: create %s: %w", s.logPath, err), s.close())
		}
	}
	s.index.mem = make([]byte, 0, 1024)
	s.timeIndex.mem = make([]byte, 0, 1024)
	if err := s.preallocate(cfg); err != nil {
		return nil, errors.Join(err, s.close())
	}
	s.created = now
	return s, nil
}

// preallocate sizes the index files of an active segment for appends.
func (s *segment) preallocate(cfg Config) error {
	if err := s.index.preallocate(cfg.SegmentIndexBytes); err != nil {
		return err
	}
	return s.timeIndex.preallocate(cfg.SegmentIndexBytes)
}

// close closes the segment's files.
func (s *segment) close() error {
	var errs []error
	for _, w := range []File{s.w, s.index.w, s.timeIndex.w} {
		if err := w.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
			errs = append(errs, fmt.Errorf("segment: close: %w", err))
		}
	}
	return errors.Join(errs...)
}

// remove unlinks the segment's files; the descriptors stay open.
func (s *segment) remove() error {
	var errs []error
	for _, p := range []string{s.logPath, s.index.path, s.timeIndex.path} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("segment: %w", err))
		}
	}
	return errors.Join(errs...)
}

// syncFiles fsyncs the .log and, for a sealed segment, its indexes.
func (s *segment) syncFiles(sealed bool) error {
	if err := s.w.Sync(); err != nil {
		return fmt.Errorf("segment: fsync %s: %w", s.logPath, err)
	}
	if !sealed {
		return nil
	}
	if err := s.index.w.Sync(); err != nil {
		return fmt.Errorf("segment: fsync %s: %w", s.index.path, err)
	}
	if err := s.timeIndex.w.Sync(); err != nil {
		return fmt.Errorf("segment: fsync %s: %w", s.timeIndex.path, err)
	}
	return nil
}

// rel returns off relative to the segment base.
func (s *segment) rel(off int64) uint32 { return uint32(off - s.base) }

// info describes the segment. Caller holds Log.mu or appendMu.
func (s *segment) info() SegmentInfo {
	return SegmentInfo{
		BaseOffset:    s.base,
		NextOffset:    s.next,
		Size:          s.size,
		Sealed:        s.sealed,
		MaxTimestamp:  s.maxTs,
		LogPath:       s.logPath,
		IndexPath:     s.index.path,
		TimeIndexPath: s.timeIndex.path,
	}
}

// withEpochs fills in the leader epochs that wrote offsets of the segment
// (for an empty segment, the epoch holding its base offset).
func (si SegmentInfo) withEpochs(entries []EpochEntry) SegmentInfo {
	next := max(si.NextOffset, si.BaseOffset+1)
	for i, e := range entries {
		end := int64(math.MaxInt64)
		if i+1 < len(entries) {
			end = entries[i+1].StartOffset
		}
		if e.StartOffset < next && end > si.BaseOffset {
			e.StartOffset = max(e.StartOffset, si.BaseOffset)
			si.LeaderEpochs = append(si.LeaderEpochs, e)
		}
	}
	return si
}

// batchEntries is the writer's bookkeeping while staging an append into a
// segment: index entries to add and the segment state after the append.
type batchEntries struct {
	index, timeIndex []byte // encoded new entries (reused between appends)

	size, next         int64
	maxTs, maxTsOffset int64
	lastIndexPos       int64
	lastTimeTs         int64
	records            int64
}

// start resets b to stage an append to s.
func (b *batchEntries) start(s *segment) {
	b.index = b.index[:0]
	b.timeIndex = b.timeIndex[:0]
	b.size, b.next = s.size, s.next
	b.maxTs, b.maxTsOffset = s.maxTs, s.maxTsOffset
	b.lastIndexPos, b.lastTimeTs = s.lastIndexPos, s.lastTimeTs
	b.records = 0
}

// add accounts for one batch of size bytes appended at b.size: it adds the
// index entries the batch calls for (see index.go and timeindex.go).
func (b *batchEntries) add(s *segment, base, next, maxTs int64, records int64, size int64, interval int) {
	if maxTs > b.maxTs {
		b.maxTs, b.maxTsOffset = maxTs, base
	}
	if b.size > 0 && b.size-b.lastIndexPos >= int64(interval) {
		var e [TimeIndexEntrySize]byte
		putIndexEntry(e[:], s.rel(base), uint32(b.size))
		b.index = append(b.index, e[:IndexEntrySize]...)
		b.lastIndexPos = b.size
		if b.maxTs > b.lastTimeTs {
			putTimeEntry(e[:], b.maxTs, s.rel(b.maxTsOffset))
			b.timeIndex = append(b.timeIndex, e[:]...)
			b.lastTimeTs = b.maxTs
		}
	}
	b.size += size
	b.next = next
	b.records += records
}

// sealEntry adds the final time entry of a segment being sealed, if its max
// timestamp grew since the last one.
func (b *batchEntries) sealEntry(s *segment) {
	if b.maxTs > b.lastTimeTs {
		var e [TimeIndexEntrySize]byte
		putTimeEntry(e[:], b.maxTs, s.rel(b.maxTsOffset))
		b.timeIndex = append(b.timeIndex, e[:]...)
		b.lastTimeTs = b.maxTs
	}
}

// publish installs staged entries and state into s. Caller holds appendMu
// and Log.mu.
func (b *batchEntries) publish(s *segment) {
	s.index.add(b.index)
	s.timeIndex.add(b.timeIndex)
	s.size, s.next = b.size, b.next
	s.maxTs, s.maxTsOffset = b.maxTs, b.maxTsOffset
	s.lastIndexPos, s.lastTimeTs = b.lastIndexPos, b.lastTimeTs
}
