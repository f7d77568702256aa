package segment

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// Log compaction: the mechanics of Kafka's log cleaner for one partition.
// The broker decides when and which partition to clean (Cleanable gives
// the dirty ratio, min.cleanable.dirty.ratio and max.compaction.lag.ms are
// its business) and calls Clean; Clean does one round, as Kafka's
// Cleaner.clean does:
//
//  1. The dirty section is [first dirty, first uncleanable): the cleaner
//     checkpoint (clamped to the log start) up to the base of the first
//     segment that is active, reaches above the high watermark or
//     CleanConfig.UncleanableFrom, or (from the first dirty segment on)
//     holds a timestamp newer than min.compaction.lag.ms.
//  2. The offset map is filled with the latest offset of every key of the
//     dirty section, batch by batch, until the map is full: the mapped end
//     is then where it stopped, and only [log start, mapped end) is cleaned.
//  3. The segments overlapping [log start, mapped end) are grouped so that
//     each group's sources together fit segment.bytes and the index limit,
//     and each group is rewritten (batchFilter) into one cleaned segment
//     named by the group's first base offset; the cleaned segments are
//     swapped in a batch at a time, with one marker each (clean_swap.go).
//  4. The cleaner checkpoint moves to the mapped end.
//
// Clean runs outside the append lock: appends never wait for it, reads
// keep the files they hold, and the swap itself takes flushMu and mu only
// for renames and a slice update (see clean_swap.go).

// IOLimiter paces the cleaner's disk I/O (log.cleaner.io.max.bytes.per.second).
// WaitN blocks until n more bytes may be read or written, or fails when ctx
// is done. Clean asks for at most CleanConfig.IOBufferBytes at a time, so a
// *rate.Limiter of golang.org/x/time/rate with a burst of at least that
// size fits.
type IOLimiter interface {
	WaitN(ctx context.Context, n int) error
}

// CleanConfig says how Clean cleans. Map is required; zero values of the
// rest are Kafka's defaults or "no bound" as noted.
type CleanConfig struct {
	// Map is the offset map, cleared and filled by Clean: its memory is the
	// share of log.cleaner.dedupe.buffer.size the caller grants this
	// cleaning.
	Map *OffsetMap
	// DeleteRetentionMs is delete.retention.ms: a tombstone is kept this
	// long after the cleaning that first kept it (the batch's delete
	// horizon). Negative is invalid; zero drops tombstones at the next
	// cleaning.
	DeleteRetentionMs int64
	// MinCompactionLagMs is min.compaction.lag.ms: the dirty section ends
	// before the first segment holding a record newer than this. Negative
	// is invalid.
	MinCompactionLagMs int64
	// UncleanableFrom bounds the dirty section further (the broker passes
	// the last stable offset, so open transactions are not cleaned); the
	// high watermark always bounds it. Zero means no bound besides the
	// high watermark.
	UncleanableFrom int64
	// Limiter, if set, throttles reads and writes.
	Limiter IOLimiter
	// IOBufferBytes is the read and write chunk size
	// (log.cleaner.io.buffer.size). Zero means 512 KiB.
	IOBufferBytes int
	// ProducerLastOffsets maps each active producer id to the last offset
	// of its last data batch; that batch is kept (empty if need be) so the
	// producer's last sequence survives. Nil makes Clean derive it from
	// the batch headers of the whole log, every producer id counting as
	// active.
	ProducerLastOffsets map[int64]int64
	// MaxDecompressed bounds the decompressed records of one batch. Zero
	// means DefaultMaxDecompressed.
	MaxDecompressed int
	// AbortedTxns are the partition's aborted transactions (its
	// TxnIndex): their records are dropped (clean_txn.go).
	AbortedTxns []AbortedTxn
	// TxnsComplete vouches that AbortedTxns lists every aborted
	// transaction of the cleaned range and that UncleanableFrom is at or
	// below the last stable offset: the records of committed transactions
	// are then mapped, so they supersede older values as in Kafka, and
	// markers whose transactions have no data left are removed past
	// their delete horizon (clean_txn.go). Without it no transactional
	// record is mapped (an aborted one must never remove a committed
	// value) and every marker is kept, which is safe but leaves values
	// written by transactions uncompacted.
	TxnsComplete bool
}

// CleanResult reports one Clean.
type CleanResult struct {
	FirstDirty       int64 // first offset of the dirty section
	FirstUncleanable int64 // end of the dirty section
	// MappedEnd is the end of what the offset map covered and the new
	// cleaner checkpoint; below FirstUncleanable when the map filled up.
	MappedEnd int64
	MapFull   bool
	// Cleaned is false when there was nothing to clean (no dirty section).
	Cleaned bool

	SegmentsRead, SegmentsWritten int
	// GroupsSkipped counts groups of one segment that came out unchanged
	// (nothing swapped) and groups abandoned because retention or
	// truncation changed their segments meanwhile.
	GroupsSkipped         int
	BytesRead             int64 // of the segments rewritten
	BytesWritten          int64
	MapBytesRead          int64 // of the dirty section, to build the map
	RecordsRead           int64
	RecordsKept           int64
	TombstonesRemoved     int64
	KeylessDropped        int64
	EmptyBatchesKept      int64 // batches emptied but kept for their producer's state
	AbortedRecordsDropped int64 // records of aborted transactions (clean_txn.go)
	// MarkerHorizonsSet counts markers given a delete horizon, their
	// transaction having no data left; MarkersRemoved those dropped past
	// it (clean_txn.go; only with CleanConfig.TxnsComplete).
	MarkerHorizonsSet, MarkersRemoved int64
	// AbortedTxnsDone lists the entries of CleanConfig.AbortedTxns whose
	// transaction has no data left (their markers were reached): the
	// caller removes them from its aborted-transaction index, after which
	// a later cleaning may remove their markers.
	AbortedTxnsDone       []AbortedTxn
	MapUtilization        float64
	Duration, MapDuration time.Duration
}

// ErrCleanConfig is returned by Clean for an invalid CleanConfig.
var ErrCleanConfig = errors.New("segment: invalid clean config")

const defaultCleanIOBuffer = 512 << 10

func (cc CleanConfig) normalized() (CleanConfig, error) {
	if cc.Map == nil {
		return cc, fmt.Errorf("%w: no offset map", ErrCleanConfig)
	}
	if err := cc.checkBounds(); err != nil {
		return cc, err
	}
	if cc.IOBufferBytes == 0 {
		cc.IOBufferBytes = defaultCleanIOBuffer
	}
	if cc.MaxDecompressed == 0 {
		cc.MaxDecompressed = DefaultMaxDecompressed
	}
	return cc, nil
}

// checkBounds validates the settings other than the map.
func (cc CleanConfig) checkBounds() error {
	switch {
	case cc.DeleteRetentionMs < 0:
		return fmt.Errorf("%w: delete.retention.ms %d", ErrCleanConfig, cc.DeleteRetentionMs)
	case cc.MinCompactionLagMs < 0:
		return fmt.Errorf("%w: min.compaction.lag.ms %d", ErrCleanConfig, cc.MinCompactionLagMs)
	case cc.UncleanableFrom < 0:
		return fmt.Errorf("%w: uncleanable offset %d", ErrCleanConfig, cc.UncleanableFrom)
	case cc.IOBufferBytes < 0 || cc.MaxDecompressed < 0:
		return fmt.Errorf("%w: negative buffer size", ErrCleanConfig)
	}
	return nil
}

// CleanableInfo describes a log's dirty section for a cleaner that picks
// the dirtiest partition (Kafka's LogToClean).
type CleanableInfo struct {
	FirstDirty       int64
	FirstUncleanable int64
	// CleanBytes: sealed segments wholly below FirstDirty. DirtyBytes: the
	// segments of the dirty section. DirtyRatio is
	// DirtyBytes/(CleanBytes+DirtyBytes), 0 for an empty log.
	CleanBytes, DirtyBytes int64
	DirtyRatio             float64
	// FirstDirtyTimestamp is the max timestamp of the first batch of the
	// first dirty segment, -1 if none: max.compaction.lag.ms counts from
	// it, as Kafka's LogCleanerManager does.
	FirstDirtyTimestamp int64
	// EarliestDeleteHorizon is the earliest delete horizon of a batch in
	// the clean section, -1 if none: from then on a Clean drops
	// tombstones even without dirty data (KIP-534).
	EarliestDeleteHorizon int64
}

// cleanSource is a sealed segment taking part in a cleaning.
type cleanSource struct {
	s    *segment
	snap readSnap
}

// cleanPlan is a log's dirty section as found under mu.
type cleanPlan struct {
	firstDirty, uncleanable int64
	srcs                    []cleanSource // sealed segments from the log start to the uncleanable one
	all                     []readSnap    // every segment, for the producer scan
	cfg                     Config
}

// srcsStart is the base of the first source, or the first dirty offset
// when there is none.
func (p cleanPlan) srcsStart() int64 {
	if len(p.srcs) == 0 {
		return p.firstDirty
	}
	return p.srcs[0].snap.base
}

// plan finds the dirty section. nowMs is the cleaner's clock.
func (l *Log) plan(cc CleanConfig, nowMs int64) (cleanPlan, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return cleanPlan{}, ErrClosed
	}
	if l.mu.poison != nil {
		return cleanPlan{}, l.mu.poison
	}
	p := cleanPlan{cfg: l.mu.cfg}
	logStart, logEnd := l.mu.logStart, l.mu.logEnd
	p.firstDirty = logStart
	if ck := l.mu.cleanerCkpt; ck >= logStart && ck <= logEnd {
		p.firstDirty = ck
	}
	bound := l.highWatermarkLocked()
	if cc.UncleanableFrom > 0 {
		bound = min(bound, cc.UncleanableFrom)
	}
	segs := l.mu.segs
	p.uncleanable = segs[len(segs)-1].base
	for _, s := range segs[:len(segs)-1] {
		lagged := cc.MinCompactionLagMs > 0 && s.next > p.firstDirty && s.maxTs > nowMs-cc.MinCompactionLagMs
		if s.next > bound || lagged {
			p.uncleanable = s.base
			break
		}
		if s.next > logStart {
			p.srcs = append(p.srcs, cleanSource{s: s, snap: snapLocked(s)})
		}
	}
	for _, s := range segs {
		p.all = append(p.all, snapLocked(s))
	}
	p.uncleanable = max(p.uncleanable, p.firstDirty)
	return p, nil
}

// Cleanable reports the dirty section and ratio as Clean would see it now
// with these settings (only MinCompactionLagMs and UncleanableFrom of cc
// matter; Map may be nil).
func (l *Log) Cleanable(cc CleanConfig) (CleanableInfo, error) {
	if err := cc.checkBounds(); err != nil {
		return CleanableInfo{}, err
	}
	p, err := l.plan(cc, l.opts.now().UnixMilli())
	if err != nil {
		return CleanableInfo{}, err
	}
	info := CleanableInfo{FirstDirty: p.firstDirty, FirstUncleanable: p.uncleanable, FirstDirtyTimestamp: -1, EarliestDeleteHorizon: -1}
	for _, src := range p.srcs {
		switch {
		case src.snap.next <= p.firstDirty:
			info.CleanBytes += src.snap.size
			if err := earliestHorizon(src.snap, &info.EarliestDeleteHorizon); err != nil {
				return info, err
			}
		case src.snap.base < p.uncleanable:
			if info.DirtyBytes == 0 && src.snap.size > 0 {
				r := newHeaderReader(src.snap.f, src.snap.size)
				h, err := r.at(0)
				r.release()
				if err != nil {
					return info, fmt.Errorf("segment: cleanable %s: %w", src.snap.path, err)
				}
				info.FirstDirtyTimestamp = h.MaxTimestamp // Kafka's getFirstBatchTimestamp
			}
			info.DirtyBytes += src.snap.size
		}
	}
	if total := info.CleanBytes + info.DirtyBytes; total > 0 {
		info.DirtyRatio = float64(info.DirtyBytes) / float64(total)
	}
	return info, nil
}

// earliestHorizon lowers *earliest to the earliest delete horizon among the
// batch headers of snap.
func earliestHorizon(snap readSnap, earliest *int64) error {
	r := newHeaderReader(snap.f, snap.size)
	defer r.release()
	for pos := int64(0); pos < snap.size; {
		h, err := r.at(pos)
		if err != nil {
			return fmt.Errorf("segment: cleanable %s: %w", snap.path, err)
		}
		if ms, ok := h.DeleteHorizon(); ok && (*earliest < 0 || ms < *earliest) {
			*earliest = ms
		}
		pos += int64(h.Size())
	}
	return nil
}

// CleanerCheckpoint returns the cleaner checkpoint: the first offset not
// yet cleaned (0 when the log was never cleaned).
func (l *Log) CleanerCheckpoint() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.cleanerCkpt
}

// Clean runs one round of compaction (see the top of this file). With no
// dirty section it still rewrites the clean section, which drops
// tombstones past their delete horizon (CleanableInfo.EarliestDeleteHorizon
// tells when that is worth it). It returns when the round is done, ctx is
// done (the partition was deleted, the broker is closing: what was swapped
// stays, the rest is discarded), or an error occurred. A round that finds
// its segments deleted or truncated under it (retention, DeleteRecords, a
// follower's truncation) gives up on them without an error. Errors: ErrCleanConfig, ErrClosed, ErrMapTooSmall
// (not even one batch of the dirty section fits the map), corruption found
// in a segment (IsCorrupt; nothing is changed), ctx's error, and
// ErrPoisoned when a file operation of the swap failed (the log must be
// reopened, and recovery completes the swap). One Clean runs at a time per
// Log; concurrent calls wait.
func (l *Log) Clean(ctx context.Context, cc CleanConfig) (CleanResult, error) {
	cc, err := cc.normalized()
	if err != nil {
		return CleanResult{}, err
	}
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	began := time.Now()
	nowMs := l.opts.now().UnixMilli()
	p, err := l.plan(cc, nowMs)
	if err != nil {
		return CleanResult{}, err
	}
	res := CleanResult{FirstDirty: p.firstDirty, FirstUncleanable: p.uncleanable, MappedEnd: p.firstDirty}
	// The dirty section holds at most as many keys as it spans offsets.
	cc.Map.clearFor(p.uncleanable - p.firstDirty)
	cc.Map.cache.reset(p.uncleanable - p.firstDirty)
	end := p.firstDirty
	if p.firstDirty < p.uncleanable {
		if end, err = l.buildOffsetMap(ctx, cc, p, &res); errors.Is(err, errSourcesChanged) {
			return res, nil // retention or truncation got there first; the next round starts afresh
		} else if err != nil {
			return res, err
		}
	}
	res.MapDuration = time.Since(began)
	if p.firstDirty == p.srcsStart() && end == p.firstDirty {
		return res, nil // nothing dirty and nothing clean
	}
	res.MappedEnd, res.MapUtilization = end, cc.Map.Utilization()
	if err := l.hook("mapped"); err != nil {
		return res, err
	}
	lastOf := cc.ProducerLastOffsets
	if lastOf == nil {
		if lastOf, err = producerLastOffsets(p.all, cc.IOBufferBytes); err != nil {
			return res, err
		}
	}
	f := &batchFilter{
		m: cc.Map, end: end, nowMs: nowMs, deleteRetentionMs: cc.DeleteRetentionMs,
		lastOfProducer: lastOf, maxDecompressed: cc.MaxDecompressed, stats: &res,
		validated: true, // cleanGroup's batchScanner validates every batch
		cache:     &cc.Map.cache,
		aborted:   newAbortedSet(cc.AbortedTxns),
		txn:       newMarkerTracker(cc.TxnsComplete, cc.AbortedTxns),
	}
	f.takeBuffers(&cc.Map.bufs)
	defer f.keepBuffers(&cc.Map.bufs)
	var srcs []cleanSource
	for _, src := range p.srcs {
		if src.snap.base < end {
			srcs = append(srcs, src)
		}
	}
	if err := l.cleanGroups(ctx, cc, f, groupSources(srcs, p.cfg), p, end, &res); err != nil {
		return res, err
	}
	if err := l.raiseCleanerCheckpoint(end); err != nil {
		return res, err
	}
	res.Cleaned = true
	res.Duration = time.Since(began)
	return res, nil
}

// buildOffsetMap fills cc.Map from the dirty section and returns the mapped
// end. Records of control batches are not mapped, nor those of
// transactional batches unless cc.TxnsComplete, and then not those of the
// aborted transactions (cc.AbortedTxns): an aborted record must never
// supersede a committed one. With cc.TxnsComplete the dirty section ends at
// the last stable offset, so every transaction in it has completed.
func (l *Log) buildOffsetMap(ctx context.Context, cc CleanConfig, p cleanPlan, res *CleanResult) (int64, error) {
	m := cc.Map
	aborted := newAbortedSet(cc.AbortedTxns)
	buf := m.bufs.read // one read buffer for every source, and every cleaning
	defer func() { m.bufs.read = buf }()
	for _, src := range p.srcs {
		if src.snap.next <= p.firstDirty || src.snap.base >= p.uncleanable {
			continue
		}
		sc := newBatchScanner(ctx, src.snap, cc, buf)
		for {
			h, b, ok, err := sc.next()
			if err != nil {
				if l.sourceChanged(src) && ctx.Err() == nil {
					return 0, errSourcesChanged
				}
				return 0, err
			}
			if !ok {
				break
			}
			if h.LastOffset() < p.firstDirty || h.Control() || (h.Transactional() && (!cc.TxnsComplete || aborted.contains(h.ProducerID, h.BaseOffset))) {
				continue
			}
			if m.Size()+int(h.RecordCount) > m.Capacity() {
				res.MapFull = true
				if h.BaseOffset <= p.firstDirty {
					return 0, fmt.Errorf("%w: %d keys fit, the batch at offset %d has %d records", ErrMapTooSmall, m.Capacity(), h.BaseOffset, h.RecordCount)
				}
				res.MapBytesRead += sc.read
				return h.BaseOffset, nil
			}
			rh, data, err := batchRecords(b, h, true, cc.MaxDecompressed)
			var recs []cleanRec
			if err == nil {
				dst, cached := m.cache.room(&rh, m.scan)
				first := len(dst)
				if recs, err = scanRecords(&rh, data, dst); err == nil {
					if cached {
						m.cache.add(&rh, recs) // for the filter pass (clean_cache.go)
					} else {
						m.scan = recs
					}
					recs = recs[first:]
				}
			}
			if err != nil {
				return 0, fmt.Errorf("segment: clean %s: %w", src.snap.path, err)
			}
			m.putRecords(recs, p.firstDirty)
		}
		res.MapBytesRead += sc.read
		buf = sc.buf
	}
	return p.uncleanable, nil
}

// errSourcesChanged: a segment being read was deleted or truncated
// meanwhile (retention, DeleteRecords, a follower's truncation).
var errSourcesChanged = errors.New("segment: clean: segments changed while read")

// sourceChanged reports whether src is no longer one of the log's sealed
// segments as it was planned.
func (l *Log) sourceChanged(src cleanSource) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.closed || !slices.Contains(l.mu.segs, src.s) || !src.s.sealed || src.s.size != src.snap.size
}

// producerLastOffsets scans the batch headers of every segment for the last
// data batch of each producer id.
func producerLastOffsets(snaps []readSnap, bufSize int) (map[int64]int64, error) {
	last := map[int64]int64{}
	buf := make([]byte, max(bufSize, headerReadSize)) // one read for many headers
	for _, snap := range snaps {
		r := &headerReader{f: snap.f, limit: snap.size, buf: buf, bufPos: -1}
		for pos := int64(0); pos < snap.size; {
			h, err := r.at(pos)
			if err != nil {
				return nil, fmt.Errorf("segment: clean: producer scan of %s: %w", snap.path, err)
			}
			if h.HasProducerID() && !h.Control() {
				last[h.ProducerID] = h.LastOffset()
			}
			pos += int64(h.Size())
		}
	}
	return last, nil
}

// groupSources splits consecutive sources into groups that each become one
// cleaned segment: Kafka's groupSegmentsBySize. A group's sources together
// fit segment.bytes, their index entries fit segment.index.bytes, and its
// offsets span less than 2^31 (relative offsets are 32-bit).
func groupSources(srcs []cleanSource, cfg Config) [][]cleanSource {
	var groups [][]cleanSource
	for len(srcs) > 0 {
		n := 1
		size := srcs[0].snap.size
		idx, tidx := srcs[0].snap.index.n, srcs[0].snap.timeIndex.n
		for n < len(srcs) {
			s := srcs[n].snap
			if size+s.size > cfg.SegmentBytes ||
				(idx+s.index.n+1)*IndexEntrySize > cfg.SegmentIndexBytes ||
				(tidx+s.timeIndex.n+1)*TimeIndexEntrySize > cfg.SegmentIndexBytes ||
				s.next-srcs[0].snap.base > math.MaxInt32 {
				break
			}
			size += s.size
			idx += s.index.n
			tidx += s.timeIndex.n
			n++
		}
		groups = append(groups, srcs[:n])
		srcs = srcs[n:]
	}
	return groups
}

// batchScanner reads the batches of a sealed segment in order, in chunks
// of IOBufferBytes, validating each (CRC included), throttled by the
// limiter.
type batchScanner struct {
	ctx     context.Context
	snap    readSnap
	limiter IOLimiter
	chunk   int
	buf     []byte
	bufPos  int64 // file position of buf[0]
	pos     int64 // next batch
	read    int64 // bytes read from the file
}

// newBatchScanner returns a scanner of snap that reads into buf (nil: one
// of its own). The caller may reuse sc.buf once done with the scanner.
func newBatchScanner(ctx context.Context, snap readSnap, cc CleanConfig, buf []byte) *batchScanner {
	return &batchScanner{ctx: ctx, snap: snap, limiter: cc.Limiter, chunk: cc.IOBufferBytes, buf: buf[:0:cap(buf)]}
}

// next returns the next batch; ok is false at the end of the segment. The
// bytes are valid until the next call.
func (sc *batchScanner) next() (h Header, b []byte, ok bool, err error) {
	if sc.pos >= sc.snap.size {
		return h, nil, false, nil
	}
	if err := sc.ctx.Err(); err != nil {
		return h, nil, false, err
	}
	hb, err := sc.get(sc.pos, int(min(HeaderSize, sc.snap.size-sc.pos)))
	if err != nil {
		return h, nil, false, err
	}
	if h, err = ParseHeader(hb); err == nil && int64(h.Size()) > sc.snap.size-sc.pos {
		err = fmt.Errorf("%w: batch needs %d bytes, %d remain", ErrTruncated, h.Size(), sc.snap.size-sc.pos)
	}
	if err == nil {
		if b, err = sc.get(sc.pos, h.Size()); err == nil {
			h, err = ValidateBatch(b)
		}
	}
	if err != nil {
		return h, nil, false, fmt.Errorf("segment: clean %s at %d: %w", sc.snap.path, sc.pos, err)
	}
	sc.pos += int64(h.Size())
	return h, b, true, nil
}

// get returns the n bytes at pos, reading the next chunk when needed.
func (sc *batchScanner) get(pos int64, n int) ([]byte, error) {
	if sc.buf != nil && pos >= sc.bufPos && pos+int64(n) <= sc.bufPos+int64(len(sc.buf)) {
		return sc.buf[pos-sc.bufPos : pos-sc.bufPos+int64(n)], nil
	}
	want := int(min(int64(max(sc.chunk, n)), sc.snap.size-pos))
	if cap(sc.buf) < want {
		sc.buf = make([]byte, want)
	}
	sc.buf = sc.buf[:want]
	if err := throttle(sc.ctx, sc.limiter, want, sc.chunk); err != nil {
		return nil, err
	}
	got, err := sc.snap.f.ReadAt(sc.buf, pos)
	sc.read += int64(got)
	if got < want {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		sc.buf = sc.buf[:0]
		return nil, fmt.Errorf("segment: clean: read %s at %d: %w", sc.snap.path, pos, err)
	}
	sc.bufPos = pos
	return sc.buf[:n], nil
}

// throttle waits for n bytes of I/O, asking the limiter for at most chunk
// at a time.
func throttle(ctx context.Context, lim IOLimiter, n, chunk int) error {
	if lim == nil {
		return nil
	}
	for n > 0 {
		k := min(n, chunk)
		if err := lim.WaitN(ctx, k); err != nil {
			return fmt.Errorf("segment: clean: throttle: %w", err)
		}
		n -= k
	}
	return nil
}

// hook calls the test hook at a named point of a cleaning.
func (l *Log) hook(point string) error {
	if l.opts.cleanHook == nil {
		return nil
	}
	return l.opts.cleanHook(point)
}
