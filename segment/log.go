package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Errors returned by Log methods. Each is wrapped with detail; test with
// errors.Is.
var (
	// ErrOffsetOutOfRange: the offset is below the log start or beyond the
	// log end.
	ErrOffsetOutOfRange = errors.New("segment: offset out of range")
	// ErrClosed: the Log was closed.
	ErrClosed = errors.New("segment: log closed")
	// ErrPoisoned: an fsync or a write to a segment file failed. The page
	// cache may have dropped the data, so the log takes no more writes until
	// it is closed and reopened (which runs recovery). It wraps the cause.
	ErrPoisoned = errors.New("segment: log poisoned by a failed write or fsync")
	// ErrNotContiguous: replicated batches do not start at the log end or
	// do not follow each other.
	ErrNotContiguous = errors.New("segment: batches not contiguous with the log")
)

// Log is the on-disk log of one partition: a directory of segments, each a
// .log file of record batches with its .index and .timeindex, plus the
// partition's checkpoints. One goroutine at a time appends (Append calls are
// serialized internally); any number read concurrently.
//
// Locking. Three mutexes, taken in this order when nested:
//
//	appendMu → flushMu → mu
//
// and cleanMu, which serializes Clean calls, before flushMu (Clean never
// takes appendMu).
//
// appendMu serializes everything that writes segment data (Append,
// AppendReplicated, rolls, truncation, Close). It is held across the write
// into the page cache but never across an fsync of appended data, so Append
// never waits for a flush it does not need.
//
// flushMu serializes fsync rounds with everything that lowers the recovery
// point or closes or unlinks segment files (retention, SetLogStartOffset,
// truncation, Close), and the writing of the recovery-point checkpoint.
//
// mu guards the in-memory state. It is held only for short critical
// sections, never across disk I/O: readers snapshot a segment's file, size
// and index under mu, then pread without any lock.
//
// Functions whose names end in Locked expect a lock to be held: mu, unless
// their comment names appendMu or flushMu. Segment fields changed by appends
// are written holding both appendMu and mu, so the writer may read them
// holding appendMu alone (see segment).
//
// The EpochCache has its own leaf lock and is never called with mu held.
// Callbacks (WithOnSeal, WithDeleteVeto) run with no lock held; the
// WithSyncHook function runs holding flushMu and must not call the Log.
type Log struct {
	dir      string // written holding appendMu, flushMu and mu (Mover.Finish); read holding any
	opts     options
	epochs   *EpochCache
	recovery RecoveryReport

	flushReq    chan struct{} // wakes the flusher; buffered, capacity 1
	quit        chan struct{} // closed to stop the flusher
	flusherDone chan struct{} // closed when the flusher has stopped

	poisoned atomic.Bool // mirrors mu.poison != nil for lock-free checks

	cleanMu sync.Mutex // one Clean at a time; taken before flushMu

	appendMu sync.Mutex
	active   *segment     // guarded by appendMu (and mu for writes)
	stage    batchEntries // guarded by appendMu

	flushMu   sync.Mutex
	flushSegs []flushItem // scratch of the flusher, guarded by flushMu
	ckpt      struct {    // last checkpointed values, guarded by flushMu
		at       time.Time
		rp, hw   int64
		hwExists bool
	}

	mu struct {
		sync.Mutex
		cfg           Config
		segs          []*segment // oldest first; the last one is active
		logStart      int64
		logEnd        int64
		hw            int64
		hwSet         bool
		recoveryPoint int64 // everything below is fsynced, indexes of sealed segments included
		lastFlush     time.Time
		flushWanted   bool          // someone waits for a flush round
		flushed       chan struct{} // closed after the next flush round; nil until wanted
		notify        chan struct{} // closed at the next append; nil until wanted
		truncGen      uint64        // bumped when the log end moves backwards
		dirDirty      bool          // files were created since the last directory fsync
		poison        error
		closed        bool
		closing       map[*segment]func() bool // deleted segments awaiting delayed close, each with its timer's stop
		cleanerCkpt   int64                    // first offset not yet cleaned; written holding flushMu
	}
}

// AppendOptions modify an Append.
type AppendOptions struct {
	// LeaderEpoch is written into each batch's partition leader epoch; the
	// epoch cache records it when it is newer than the latest epoch.
	// Negative means no epoch (written as is, cache untouched).
	LeaderEpoch int32
	// LogAppendTime, when > 0, rewrites the batches' timestamps to this
	// broker time (SetLogAppendTime).
	LogAppendTime int64
}

// AppendResult tells where appended batches went.
type AppendResult struct {
	BaseOffset     int64 // offset of the first record appended
	LastOffset     int64 // offset of the last record appended
	LogAppendTime  int64 // the broker time written, -1 for create time
	LogStartOffset int64 // log start offset after the append
}

// Open opens the log in dir, creating the directory if needed, and runs
// recovery (see Recovery). It starts the log's flusher goroutine; Close
// stops it.
func Open(dir string, cfg Config, opts ...Option) (*Log, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("segment: open: %w", err)
	}
	l := &Log{
		dir:         dir,
		opts:        o,
		flushReq:    make(chan struct{}, 1),
		quit:        make(chan struct{}),
		flusherDone: make(chan struct{}),
	}
	l.mu.cfg = cfg.normalized()
	l.mu.closing = make(map[*segment]func() bool)
	if err := l.recover(); err != nil {
		for _, s := range l.mu.segs {
			err = errors.Join(err, s.close())
		}
		return nil, err
	}
	go l.flushLoop()
	return l, nil
}

// Dir returns the log's directory.
func (l *Log) Dir() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dir
}

// Recovery reports what Open found and repaired.
func (l *Log) Recovery() RecoveryReport { return l.recovery }

// Epochs returns the log's leader-epoch cache.
func (l *Log) Epochs() *EpochCache { return l.epochs }

// ActiveBaseOffset returns the base offset of the active segment; it
// changes when the log rolls.
func (l *Log) ActiveBaseOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.segs[len(l.mu.segs)-1].base
}

// LogStartOffset returns the first offset that may be read.
func (l *Log) LogStartOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.logStart
}

// LogEndOffset returns the offset the next appended record gets.
func (l *Log) LogEndOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.logEnd
}

// HighWatermark returns the high watermark: the log end offset until
// SetHighWatermark is called (or a checkpointed one was loaded).
func (l *Log) HighWatermark() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.highWatermarkLocked()
}

// highWatermarkLocked is HighWatermark. Caller holds mu.
func (l *Log) highWatermarkLocked() int64 {
	if !l.mu.hwSet {
		return l.mu.logEnd
	}
	return max(l.mu.hw, l.mu.logStart)
}

// SetHighWatermark sets the high watermark, clamped to [log start, log end].
// It is checkpointed with the recovery point, by CheckpointHighWatermark and
// on Close. A rise wakes AppendNotify waiters: records below the high
// watermark are what consumers may read.
func (l *Log) SetHighWatermark(off int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	prev := l.highWatermarkLocked()
	l.mu.hw = min(max(off, l.mu.logStart), l.mu.logEnd)
	l.mu.hwSet = true
	if l.mu.hw > prev {
		l.notifyLocked()
	}
}

// InitHighWatermark sets the high watermark to off (clamped as in
// SetHighWatermark) unless it is already set or was loaded from its
// checkpoint. A replicated partition calls it at open, so that its high
// watermark does not default to the log end.
func (l *Log) InitHighWatermark(off int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.mu.hwSet {
		l.mu.hw = min(max(off, l.mu.logStart), l.mu.logEnd)
		l.mu.hwSet = true
	}
}

// CheckpointHighWatermark writes the high watermark's checkpoint now if it
// was set and changed since the last one. A failure poisons the log.
func (l *Log) CheckpointHighWatermark() error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	hw, hwSet, closed := l.mu.hw, l.mu.hwSet, l.mu.closed
	l.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if !hwSet || (l.ckpt.hwExists && hw == l.ckpt.hw) {
		return nil
	}
	if err := writeOffsetCheckpoint(l.dir, highWatermarkFile, hw); err != nil {
		return l.poison(err)
	}
	l.ckpt.hw, l.ckpt.hwExists = hw, true
	return nil
}

// RecoveryPoint returns the offset below which everything is fsynced.
func (l *Log) RecoveryPoint() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.recoveryPoint
}

// MaxTimestamp returns the largest batch max timestamp in the log and the
// base offset of the (first) batch holding it, or -1, -1 for a log without
// timestamps. (The offset is that of the batch: record-level precision would
// need every batch decoded at append time.)
func (l *Log) MaxTimestamp() (ts int64, offset int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ts, offset = -1, -1
	for _, s := range l.mu.segs {
		if s.maxTs > ts {
			ts, offset = s.maxTs, max(s.maxTsOffset, l.mu.logStart)
		}
	}
	return ts, offset
}

// AppendNotify returns a channel that is closed at the next append (or
// truncation, or Close). Long-polling fetches wait on it.
func (l *Log) AppendNotify() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.notify == nil {
		l.mu.notify = make(chan struct{})
		if l.mu.closed {
			close(l.mu.notify)
		}
	}
	return l.mu.notify
}

// notifyLocked wakes AppendNotify waiters. Caller holds mu.
func (l *Log) notifyLocked() {
	if l.mu.notify != nil {
		close(l.mu.notify)
		l.mu.notify = nil
	}
}

// UpdateConfig applies cfg (normalized as in Open) from the next append on.
// A new segment.index.bytes is checked at once when rolling, but index files
// are preallocated to it only for segments created afterwards.
func (l *Log) UpdateConfig(cfg Config) {
	l.mu.Lock()
	l.mu.cfg = cfg.normalized()
	l.mu.Unlock()
	l.poke() // flush.ms may have changed
}

func (l *Log) config() Config {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.cfg
}

// Segments describes the log's segments, oldest first.
func (l *Log) Segments() []SegmentInfo {
	l.mu.Lock()
	infos := make([]SegmentInfo, len(l.mu.segs))
	for i, s := range l.mu.segs {
		infos[i] = s.info()
	}
	l.mu.Unlock()
	epochs := l.epochs.Entries()
	for i := range infos {
		infos[i] = infos[i].withEpochs(epochs)
	}
	return infos
}

// writable fails when the log takes no appends. Caller holds appendMu.
func (l *Log) writable() error {
	if l.poisoned.Load() {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.mu.poison
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return ErrClosed
	}
	return nil
}

// Append appends one or more concatenated record batches fresh from a
// producer. Each must pass ValidateProduced. Offsets are assigned from the
// log end by rewriting the base offsets in place in the caller's buffer,
// together with the partition leader epoch (and timestamps, with
// o.LogAppendTime). The bytes are then written with one write into the
// active segment, rolling it first if needed.
//
// When flush.messages is reached, Append returns only after the batches are
// fsynced; concurrent appenders share one fsync. Otherwise the data is in the
// page cache when Append returns. Errors: validation errors (IsCorrupt),
// ErrClosed, ErrPoisoned.
func (l *Log) Append(batches []byte, o AppendOptions) (AppendResult, error) {
	if err := checkBatches(batches, true /* produced */, o.LogAppendTime); err != nil {
		return AppendResult{}, err
	}
	l.appendMu.Lock()
	if err := l.writable(); err != nil {
		l.appendMu.Unlock()
		return AppendResult{}, err
	}
	base := l.active.next
	if o.LeaderEpoch >= 0 {
		if e, _, ok := l.epochs.Latest(); !ok || e < o.LeaderEpoch {
			if err := l.epochs.Assign(o.LeaderEpoch, base); err != nil {
				l.appendMu.Unlock()
				return AppendResult{}, err
			}
		}
	}
	next := base
	for p := 0; p < len(batches); {
		b := batches[p:]
		SetBaseOffset(b, next)
		SetPartitionLeaderEpoch(b, o.LeaderEpoch)
		next += int64(binary.BigEndian.Uint32(b[offLastOffsetDelta:])) + 1
		p += int(binary.BigEndian.Uint32(b[offBatchLength:])) + LogOverhead
	}
	res, sealed, flushTo, err := l.appendLocked(batches, base, next)
	l.appendMu.Unlock()
	l.fireOnSeal(sealed)
	if err != nil {
		return AppendResult{}, err
	}
	res.LogAppendTime = -1
	if o.LogAppendTime > 0 {
		res.LogAppendTime = o.LogAppendTime
	}
	if flushTo > 0 {
		if err := l.waitFlushed(flushTo); err != nil {
			return AppendResult{}, err
		}
	}
	return res, nil
}

// AppendReplicated appends batches that already carry their offsets (from
// the partition leader), verbatim. The first must start at LogEndOffset and
// each must follow the previous one (else ErrNotContiguous); each must pass
// ValidateBatch. The epoch cache records each batch's partition leader epoch
// that is newer than the latest. Flushing is as for Append.
func (l *Log) AppendReplicated(batches []byte) (AppendResult, error) {
	if err := checkBatches(batches, false /* produced */, 0); err != nil {
		return AppendResult{}, err
	}
	l.appendMu.Lock()
	if err := l.writable(); err != nil {
		l.appendMu.Unlock()
		return AppendResult{}, err
	}
	base := l.active.next
	next := base
	for p := 0; p < len(batches); {
		b := batches[p:]
		h, _ := ParseHeader(b) // validated by checkBatches
		if h.BaseOffset != next {
			l.appendMu.Unlock()
			return AppendResult{}, fmt.Errorf("%w: batch at base offset %d, expected %d", ErrNotContiguous, h.BaseOffset, next)
		}
		if h.PartitionLeaderEpoch >= 0 {
			if e, _, ok := l.epochs.Latest(); !ok || e < h.PartitionLeaderEpoch {
				if err := l.epochs.Assign(h.PartitionLeaderEpoch, h.BaseOffset); err != nil {
					l.appendMu.Unlock()
					return AppendResult{}, err
				}
			}
		}
		next = h.NextOffset()
		p += h.Size()
	}
	res, sealed, flushTo, err := l.appendRunsLocked(batches)
	l.appendMu.Unlock()
	for i := range sealed {
		l.fireOnSeal(&sealed[i])
	}
	if err != nil {
		return AppendResult{}, err
	}
	res.LogAppendTime = -1
	if flushTo > 0 {
		if err := l.waitFlushed(flushTo); err != nil {
			return AppendResult{}, err
		}
	}
	return res, nil
}

// appendRunsLocked writes validated, contiguous batches as runs that each
// fit one segment, rolling between runs as a leader rolls between produce
// requests. A follower catching up fetches up to replica.fetch.max.bytes at
// once; written as one append, that would make one segment of that size,
// which local retention could free only once the leader had uploaded all of
// it. A single batch larger than segment.bytes is still one run. Caller holds
// appendMu.
func (l *Log) appendRunsLocked(batches []byte) (res AppendResult, sealed []SegmentInfo, flushTo int64, err error) {
	cfg := l.config()
	first := true
	for p := 0; p < len(batches); {
		room := cfg.SegmentBytes - l.active.size
		firstSize := int64(binary.BigEndian.Uint32(batches[p+offBatchLength:])) + LogOverhead
		if l.active.size > 0 && firstSize > room {
			room = cfg.SegmentBytes // the run starts a new segment
		}
		end, run, next := p, int64(0), int64(0)
		for end < len(batches) {
			b := batches[end:]
			size := int64(binary.BigEndian.Uint32(b[offBatchLength:])) + LogOverhead
			if run > 0 && run+size > room {
				break
			}
			next = int64(binary.BigEndian.Uint64(b[offBaseOffset:])) + int64(binary.BigEndian.Uint32(b[offLastOffsetDelta:])) + 1
			run += size
			end += int(size)
		}
		chunk := batches[p:end]
		base := int64(binary.BigEndian.Uint64(chunk[offBaseOffset:]))
		r, s, f, err := l.appendLocked(chunk, base, next)
		if s != nil {
			sealed = append(sealed, *s)
		}
		if err != nil {
			return res, sealed, 0, err
		}
		if first {
			res.BaseOffset, first = r.BaseOffset, false
		}
		res.LastOffset, res.LogStartOffset = r.LastOffset, r.LogStartOffset
		flushTo = max(flushTo, f)
		p = end
	}
	return res, sealed, flushTo, nil
}

// checkBatches validates a buffer of concatenated batches before any lock is
// taken, so that CRCs of concurrent producers are checked in parallel. With
// logAppendTime > 0 it also stamps the batches.
func checkBatches(batches []byte, produced bool, logAppendTime int64) error {
	if len(batches) == 0 {
		return fmt.Errorf("segment: append: %w: no record batches", ErrTruncated)
	}
	if len(batches) > math.MaxInt32 {
		return fmt.Errorf("segment: append: %w: %d bytes in one append", ErrBadLength, len(batches))
	}
	for p := 0; p < len(batches); {
		var h Header
		var err error
		if produced {
			h, err = ValidateProduced(batches[p:])
		} else {
			h, err = ValidateBatch(batches[p:])
		}
		if err != nil {
			return fmt.Errorf("segment: append: batch at byte %d: %w", p, err)
		}
		if logAppendTime > 0 {
			SetLogAppendTime(batches[p:p+h.Size()], logAppendTime)
		}
		p += h.Size()
	}
	return nil
}

// appendLocked writes validated batches holding offsets [base, next) to the
// active segment, rolling first when needed. It returns the sealed segment's
// info (if a roll happened; to be passed to fireOnSeal once appendMu is
// released) and, when flush.messages is reached, the offset the caller must
// wait to be flushed. Caller holds appendMu.
func (l *Log) appendLocked(batches []byte, base, next int64) (res AppendResult, sealed *SegmentInfo, flushTo int64, err error) {
	cfg := l.config()
	now := l.opts.now()
	s := l.active
	if l.shouldRoll(s, cfg, int64(len(batches)), next-1, now) {
		info, err := l.rollLocked(cfg, now)
		if err != nil {
			return res, nil, 0, err
		}
		sealed, s = &info, l.active
	}

	st := &l.stage
	st.start(s)
	for p := 0; p < len(batches); {
		b := batches[p:]
		size := int64(binary.BigEndian.Uint32(b[offBatchLength:])) + LogOverhead
		bbase := int64(binary.BigEndian.Uint64(b[offBaseOffset:]))
		delta := int64(binary.BigEndian.Uint32(b[offLastOffsetDelta:]))
		count := int64(binary.BigEndian.Uint32(b[offRecordCount:]))
		maxTs := int64(binary.BigEndian.Uint64(b[offMaxTimestamp:]))
		st.add(s, bbase, bbase+delta+1, maxTs, count, size, cfg.IndexIntervalBytes)
		p += int(size)
	}
	if _, err := s.w.WriteAt(batches, s.size); err != nil {
		werr := fmt.Errorf("segment: append to %s: %w", s.logPath, err)
		// Cut off whatever part was written; the log is poisoned either
		// way, since the page cache state is unknown.
		if terr := s.w.Truncate(s.size); terr != nil {
			werr = errors.Join(werr, terr)
		}
		return res, sealed, 0, l.poison(werr)
	}

	l.mu.Lock()
	if s.size == 0 {
		s.created = now
	}
	st.publish(s)
	l.mu.logEnd = next
	l.notifyLocked()
	if l.mu.logEnd-l.mu.recoveryPoint >= cfg.FlushMessages {
		flushTo = next
	}
	wasFlushed := l.mu.recoveryPoint == base
	res = AppendResult{BaseOffset: base, LastOffset: next - 1, LogStartOffset: l.mu.logStart}
	l.mu.Unlock()

	if err := s.index.maybeWritePending(); err != nil {
		return res, sealed, 0, l.poison(err)
	}
	if err := s.timeIndex.maybeWritePending(); err != nil {
		return res, sealed, 0, l.poison(err)
	}
	if wasFlushed && cfg.FlushMs != math.MaxInt64 {
		l.poke() // start the flush.ms clock
	}
	return res, sealed, flushTo, nil
}

// shouldRoll reports whether an append of size bytes ending at lastOffset
// must go to a new segment: the active one is not empty and the append would
// not fit (segment.bytes), the segment is older than segment.ms, an index is
// full (segment.index.bytes), or a relative offset would overflow.
func (l *Log) shouldRoll(s *segment, cfg Config, size int64, lastOffset int64, now time.Time) bool {
	if s.size == 0 {
		return false
	}
	return s.size+size > cfg.SegmentBytes ||
		now.Sub(s.created).Milliseconds() > cfg.SegmentMs ||
		s.index.n >= cfg.SegmentIndexBytes/IndexEntrySize ||
		s.timeIndex.n >= cfg.SegmentIndexBytes/TimeIndexEntrySize ||
		lastOffset-s.base > math.MaxUint32
}

// rollLocked seals the active segment and starts a new one at the log end.
// The flusher is asked to fsync the sealed segment in the background, as
// Kafka does on roll. Caller holds appendMu.
func (l *Log) rollLocked(cfg Config, now time.Time) (SegmentInfo, error) {
	old := l.active
	ns, err := createSegment(l.dir, old.next, cfg, l.opts.wrapFile, now)
	if err != nil {
		return SegmentInfo{}, l.poison(err)
	}
	st := &l.stage
	st.start(old)
	st.sealEntry(old)
	l.mu.Lock()
	st.publish(old)
	l.mu.Unlock()
	if err := old.index.trim(); err != nil {
		return SegmentInfo{}, l.poison(errors.Join(err, ns.close()))
	}
	if err := old.timeIndex.trim(); err != nil {
		return SegmentInfo{}, l.poison(errors.Join(err, ns.close()))
	}
	l.mu.Lock()
	old.sealed = true
	old.index.mem, old.timeIndex.mem = nil, nil
	l.mu.segs = append(l.mu.segs, ns)
	l.mu.dirDirty = true
	l.mu.flushWanted = true
	info := old.info()
	l.active = ns
	l.mu.Unlock()
	l.poke()
	return info, nil
}

// fireOnSeal calls the WithOnSeal callbacks. No lock may be held.
func (l *Log) fireOnSeal(info *SegmentInfo) {
	if info == nil || len(l.opts.onSeal) == 0 {
		return
	}
	si := info.withEpochs(l.epochs.Entries())
	for _, fn := range l.opts.onSeal {
		fn(si)
	}
}

// poison makes err sticky: every later append and Sync fails with
// ErrPoisoned wrapping it.
func (l *Log) poison(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.poisonLocked(err)
}

// poisonLocked is poison. Caller holds mu.
func (l *Log) poisonLocked(err error) error {
	if l.mu.poison == nil {
		l.mu.poison = fmt.Errorf("%w: %w", ErrPoisoned, err)
		l.poisoned.Store(true)
		l.opts.logger.Error("segment: log poisoned", "dir", l.dir, "err", err)
		if fn := l.opts.onPoison; fn != nil {
			go fn(l.mu.poison)
		}
	}
	l.wakeFlushWaitersLocked()
	return l.mu.poison
}

// Close flushes the log, writes its checkpoints and a clean-shutdown marker
// (so the next Open skips scanning), stops the flusher and closes every
// file. A poisoned log is closed without flushing and the poison error is
// returned. Closing twice returns ErrClosed.
func (l *Log) Close() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.mu.Unlock()
	close(l.quit)
	<-l.flusherDone

	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	var err error
	if !l.poisoned.Load() {
		err = l.closeCleanLocked()
	} else {
		l.mu.Lock()
		err = l.mu.poison
		l.mu.Unlock()
	}
	return errors.Join(err, l.shutdown())
}

// closeCleanLocked makes the log durable for a clean reopen: the active
// segment's indexes are written, trimmed and fsynced, everything is flushed
// and checkpointed, and the marker is written. Caller holds appendMu and
// flushMu.
func (l *Log) closeCleanLocked() error {
	s := l.active
	if err := s.index.trim(); err != nil {
		return l.poison(err)
	}
	if err := s.timeIndex.trim(); err != nil {
		return l.poison(err)
	}
	if err := l.flushLocked(); err != nil {
		return err
	}
	if err := s.syncFiles(true /* with indexes */); err != nil {
		return l.poison(err)
	}
	if err := l.writeCheckpointsLocked(true /* force */); err != nil {
		return err
	}
	l.mu.Lock()
	logStart := l.mu.logStart
	l.mu.Unlock()
	if err := writeOffsetCheckpoint(l.dir, logStartOffsetFile, logStart); err != nil {
		return err
	}
	return writeFileAtomic(l.dir, cleanShutdownFile, nil)
}

// shutdown marks the log closed, wakes every waiter and closes all files,
// including those of deleted segments awaiting their delayed close.
func (l *Log) shutdown() error {
	l.mu.Lock()
	l.mu.closed = true
	l.notifyLocked()
	l.wakeFlushWaitersLocked()
	segs := slices.Clone(l.mu.segs)
	for s, stop := range l.mu.closing {
		stop() // if it fired already, its callback finds s gone and leaves it to us
		segs = append(segs, s)
	}
	clear(l.mu.closing)
	l.mu.Unlock()
	var errs []error
	for _, s := range segs {
		errs = append(errs, s.close())
	}
	return errors.Join(errs...)
}

// Delete closes the log without flushing it and removes its directory.
func (l *Log) Delete() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.Lock()
	closed := l.mu.closed
	l.mu.Unlock()
	if !closed {
		close(l.quit)
		<-l.flusherDone
		l.flushMu.Lock()
		err := l.shutdown()
		l.flushMu.Unlock()
		if err != nil {
			return err
		}
	}
	if err := os.RemoveAll(l.dir); err != nil {
		return fmt.Errorf("segment: delete %s: %w", l.dir, err)
	}
	return nil
}
