package tiering

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/stratastream/strata/segment"
)

// Remote reads.
//
// RemoteReader serves Fetch and ListOffsets for offsets that are only in
// the bucket. One reader serves every partition of a broker. A Read goes
//
//	manifest (passed in by the caller)
//	  -> remote segment holding the offset   Manifest.SegmentFor
//	  -> its offset index (cached in memory)  remote_index.go
//	  -> the chunk holding the indexed batch position at or below the offset
//	  -> that chunk as a file in the on-disk chunk cache (cache.go), fetched
//	     with one ranged GET if missing
//	  -> batch headers scanned forward in the chunk file to the batch that
//	     holds the offset, then whole batches up to maxBytes
//
// and returns a RemoteSlice: a byte range of the cached chunk file, pinned
// until released, which the broker sends with sendfile exactly as it sends
// a segment.ReadSlice.
//
// Chunks are cut at batch boundaries. The chunk table of a segment is
// derived from its offset index: chunk boundaries are the last indexed batch
// positions at or below each multiple of ChunkBytes. So a batch never
// straddles two chunks and every Read is one file range of one chunk;
// there is no copying path. The price: a chunk is as large as the batches
// and index spacing force it to be (a batch larger than ChunkBytes is a
// chunk of its own; a segment uploaded without an index is one chunk).
//
// A Read therefore stays within one chunk of one remote segment and may
// return less than maxBytes even when more data follows; callers loop, as
// they do over local segments. At least one whole batch is always
// returned (Kafka's rule), however large.
//
// Every chunk is checked when it is downloaded: it must hold whole batches
// back to back with valid CRCs (a corrupt object gives an error that
// segment.IsCorrupt recognizes; nothing unchecked is ever served).
//
// Locks: RemoteReader has none of its own; the chunk cache, the index
// cache and the read-ahead detector each have one, never held together
// and never held across a GET or file I/O. A Read blocks only its own
// goroutine, on the GETs it needs.

// ErrRemoteOffsetOutOfRange: the offset is below the manifest's log start
// offset or not covered by its remote segments. The broker answers
// OFFSET_OUT_OF_RANGE (when the offset is not in the local log either).
var ErrRemoteOffsetOutOfRange = errors.New("tiering: offset out of remote range")

// PartitionKey names one partition.
type PartitionKey struct {
	Topic     string
	Partition int32
}

// ReaderConfig configures a RemoteReader. Zero values take the defaults.
// The broker settings are named after each field.
type ReaderConfig struct {
	// CacheDir is remote.cache.dir: where cached chunks live. Required.
	// Files ending in .chunk there are deleted when the reader starts.
	CacheDir string
	// CacheBytes is remote.cache.bytes: the bound on cached chunk bytes
	// (exceeded only by chunks pinned by unreleased slices). Default 1 GiB.
	CacheBytes int64
	// ChunkBytes is remote.cache.chunk.bytes: the target size of a chunk,
	// the unit of caching and of a demand read's GET. Default 4 MiB.
	ChunkBytes int64
	// ReadAheadChunks is remote.cache.readahead.chunks: how many chunks
	// are fetched ahead of a sequential reader. Default 4; negative
	// disables read-ahead.
	ReadAheadChunks int
	// ReadAheadRunChunks is how many chunks one read-ahead GET fetches at
	// most: a segment's chunks form aligned groups of this many, each
	// fetched with one GET (readahead.go). Default: 16 MiB of chunks
	// (4 of 4 MiB), at least 1.
	ReadAheadRunChunks int
	// ReadAheadWorkers is remote.cache.readahead.threads: the goroutines,
	// shared by all partitions, that run read-ahead GETs. Default 8.
	ReadAheadWorkers int
	// IndexCacheBytes is the memory for cached offset and time indexes.
	// Default 64 MiB.
	IndexCacheBytes int64
	// IndexCacheEntries bounds the number of cached index objects.
	// Default 4096.
	IndexCacheEntries int
	// GetTimeout bounds one GET of a chunk or an index. Default 60 s.
	GetTimeout time.Duration
	// Logger receives warnings (failed GETs, stale files). Default: discard.
	Logger *slog.Logger
	// Pacer, when set, paces the bytes of every GET body (pace.go); its
	// limit may change at any time. Nil: GETs run at the store's speed.
	Pacer *rate.Limiter
}

// Defaults of ReaderConfig.
const (
	DefaultRemoteCacheBytes  = 1 << 30
	DefaultRemoteChunkBytes  = 4 << 20
	DefaultReadAheadChunks   = 4
	DefaultReadAheadWorkers  = 8
	DefaultIndexCacheBytes   = 64 << 20
	DefaultIndexCacheEntries = 4096
	DefaultRemoteGetTimeout  = 60 * time.Second
	minRemoteChunkBytes      = 1 << 10
)

func (cfg ReaderConfig) normalized() ReaderConfig {
	if cfg.CacheBytes <= 0 {
		cfg.CacheBytes = DefaultRemoteCacheBytes
	}
	if cfg.ChunkBytes <= 0 {
		cfg.ChunkBytes = DefaultRemoteChunkBytes
	}
	cfg.ChunkBytes = max(cfg.ChunkBytes, minRemoteChunkBytes)
	switch {
	case cfg.ReadAheadChunks == 0:
		cfg.ReadAheadChunks = DefaultReadAheadChunks
	case cfg.ReadAheadChunks < 0:
		cfg.ReadAheadChunks = 0
	}
	if cfg.ReadAheadRunChunks <= 0 {
		cfg.ReadAheadRunChunks = int(max(readAheadRunBytes/cfg.ChunkBytes, 1))
	}
	if cfg.ReadAheadWorkers <= 0 {
		cfg.ReadAheadWorkers = DefaultReadAheadWorkers
	}
	if cfg.IndexCacheBytes <= 0 {
		cfg.IndexCacheBytes = DefaultIndexCacheBytes
	}
	if cfg.IndexCacheEntries <= 0 {
		cfg.IndexCacheEntries = DefaultIndexCacheEntries
	}
	if cfg.GetTimeout <= 0 {
		cfg.GetTimeout = DefaultRemoteGetTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// RemoteReader reads remote segments through the chunk cache. It is safe
// for concurrent use by any number of fetches.
type RemoteReader struct {
	store   ObjectStore
	cfg     ReaderConfig
	log     *slog.Logger
	cache   *chunkCache
	indexes *indexCache
	ra      *readAhead

	// parts holds each partition's demand-read counters
	// (PartitionKey -> *readCounters), for PartitionReadCounts.
	parts sync.Map
	// resumes counts chunk GETs resumed after their body broke.
	resumes atomic.Int64

	ctx    context.Context // cancelled by Close; bounds background GETs
	cancel context.CancelFunc
	once   sync.Once
}

// NewRemoteReader opens the chunk cache in cfg.CacheDir (deleting what a
// previous run left there) and starts the read-ahead workers.
func NewRemoteReader(store ObjectStore, cfg ReaderConfig) (*RemoteReader, error) {
	cfg = cfg.normalized()
	if cfg.CacheDir == "" {
		return nil, errors.New("tiering: remote.cache.dir is not set")
	}
	cache, err := newChunkCache(cfg.CacheDir, cfg.CacheBytes, cfg.Logger)
	if err != nil {
		return nil, err
	}
	r := &RemoteReader{
		store: store, cfg: cfg, log: cfg.Logger, cache: cache,
		indexes: newIndexCache(cfg.IndexCacheBytes, cfg.IndexCacheEntries),
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.ra = newReadAhead(r, cfg.ReadAheadChunks, cfg.ReadAheadRunChunks, cfg.ReadAheadWorkers)
	return r, nil
}

// Close stops read-ahead, fails reads in progress with ErrReaderClosed and
// deletes the cached chunk files (a pinned chunk's file when its slice is
// released). Slices already returned stay readable until released.
func (r *RemoteReader) Close() error {
	r.once.Do(func() {
		r.cancel()
		r.ra.stop()
		r.cache.close()
	})
	return nil
}

// RemoteSlice is whole batches of one cached chunk file, ready for a
// zero-copy send of Size bytes of File at Pos, like segment.ReadSlice.
// The chunk stays pinned in the cache (its file open and not deleted)
// until Release; call it once the bytes are sent or the send failed. An
// empty slice has a nil File and Size 0.
type RemoteSlice struct {
	File        *os.File
	Pos, Size   int64
	FirstOffset int64 // base offset of the first batch (may be below the offset asked for)
	NextOffset  int64 // offset after the last batch: where the next read starts
	ref         *chunkRef
}

// Release unpins the chunk. It is safe to call more than once, and on an
// empty slice.
func (s *RemoteSlice) Release() {
	if s.ref != nil {
		s.ref.release()
	}
}

// Copy returns the slice's bytes, for senders that cannot use sendfile.
func (s *RemoteSlice) Copy() ([]byte, error) {
	if s.Size == 0 {
		return nil, nil
	}
	b := make([]byte, s.Size)
	if _, err := s.File.ReadAt(b, s.Pos); err != nil {
		return nil, fmt.Errorf("tiering: read cached chunk: %w", err)
	}
	return b, nil
}

// ReaderStats is what `strata tier status` and metrics show of remote
// reads.
type ReaderStats struct {
	Cache            CacheStats
	IndexHits        int64
	IndexMisses      int64
	ReadAheadQueued  int64 // chunk prefetches queued
	ReadAheadDropped int64 // prefetches dropped because the queue was full
	ReadAheadSkipped int64 // queued prefetches skipped because their reader had got there
	ReadAheadFailed  int64
	Streams          int   // readers the sequential detector tracks
	Resumed          int64 // chunk GETs resumed after their body broke part-way
}

// Stats returns the counters.
func (r *RemoteReader) Stats() ReaderStats {
	return ReaderStats{
		Cache:     r.cache.stats(),
		IndexHits: r.indexes.hits.Load(), IndexMisses: r.indexes.misses.Load(),
		ReadAheadQueued: r.ra.queued.Load(), ReadAheadDropped: r.ra.dropped.Load(), ReadAheadSkipped: r.ra.skipped.Load(),
		ReadAheadFailed: r.ra.failed.Load(), Streams: r.ra.numStreams(), Resumed: r.resumes.Load(),
	}
}

// partCounters returns key's demand-read counters, creating them.
func (r *RemoteReader) partCounters(key PartitionKey) *readCounters {
	if v, ok := r.parts.Load(key); ok {
		return v.(*readCounters)
	}
	v, _ := r.parts.LoadOrStore(key, new(readCounters))
	return v.(*readCounters)
}

// PartitionReadCounts returns, per partition read since the reader was
// created (or since ForgetPartition), its demand reads of the chunk
// cache: the per-partition share of CacheStats' Hits, InflightJoins and
// Misses. Read-ahead's own GETs are not reads; a read that joins one is
// counted as a join.
func (r *RemoteReader) PartitionReadCounts() map[PartitionKey]ReadCounts {
	out := make(map[PartitionKey]ReadCounts)
	r.parts.Range(func(k, v any) bool {
		out[k.(PartitionKey)] = v.(*readCounters).load()
		return true
	})
	return out
}

// ForgetPartition drops key's read counters (its topic was deleted).
func (r *RemoteReader) ForgetPartition(key PartitionKey) { r.parts.Delete(key) }

// Read returns whole batches of partition key's remote log, starting with
// the batch that holds offset: at most maxBytes, except that the first
// batch is returned whole however large. The slice lies within one chunk
// of one remote segment; read again from NextOffset for more. m is the
// partition's committed manifest; it is not modified and must not be
// while Read runs (replace manifests, do not mutate them).
//
// Errors: ErrRemoteOffsetOutOfRange when offset is below m.LogStartOffset,
// at or above m.EndOffset(), or in no remote segment; store errors
// (ErrNotFound when an object the manifest names is gone, ErrUnavailable);
// corruption (segment.IsCorrupt); ctx's error; ErrReaderClosed. An offset
// after the last batch of the last segment (a compacted tail) gives an
// empty slice with NextOffset m.EndOffset(). On success the caller must
// Release the slice.
func (r *RemoteReader) Read(ctx context.Context, key PartitionKey, m *Manifest, offset int64, maxBytes int) (RemoteSlice, error) {
	var end int64
	if m != nil {
		end = m.EndOffset()
	}
	return r.ReadBelow(ctx, key, m, offset, end, maxBytes)
}

// ReadBelow is Read that returns no batch whose base offset is at or
// above end (nor, as Read, at or above its segment's NextOffset): the
// broker passes its local log start, so that the local log answers for
// every offset it holds and a remote log that diverges there (an unclean
// leader election not yet reconciled, lineage.go) is never served. When
// no batch below end follows offset the slice is empty with NextOffset
// end. An offset at or above end is ErrRemoteOffsetOutOfRange.
func (r *RemoteReader) ReadBelow(ctx context.Context, key PartitionKey, m *Manifest, offset, end int64, maxBytes int) (RemoteSlice, error) {
	if m == nil || offset < m.LogStartOffset || offset >= m.EndOffset() || offset >= end {
		return RemoteSlice{}, r.outOfRange(key, m, offset)
	}
	end = min(end, m.EndOffset())
	i := m.SegmentFor(offset)
	if i < 0 {
		return RemoteSlice{}, r.outOfRange(key, m, offset)
	}
	prefix := m.Prefix()
	pc := r.partCounters(key)
	st, continued := r.ra.take(key, offset)
	correlated := continued
	if offset == m.LogStartOffset {
		continued = true // a replay from the earliest offset starts here
	}
	for off := offset; i < len(m.Segments) && off < end; i, off = i+1, m.Segments[i].NextOffset {
		seg := &m.Segments[i]
		limit := min(end, seg.NextOffset)
		ix, err := r.segmentIndex(ctx, prefix, seg)
		if err != nil {
			return RemoteSlice{}, err
		}
		pos := ix.floorByOffset(off)
		for k := ix.chunkFor(pos); k < len(ix.chunks); k++ {
			span := ix.chunks[k]
			pos = max(pos, span.start)
			ref, err := r.cache.acquireFor(ctx, pc, chunkKey{ix.chunkID, k}, span.end-span.start, correlated, r.chunkLoader(ix, k))
			if err != nil {
				return RemoteSlice{}, fmt.Errorf("tiering: read %s chunk %d: %w", ix.logKey, k, err)
			}
			rs, found, atLimit, err := scanChunk(ref.file(), ix, span, pos, off, limit, maxBytes)
			if err != nil || !found {
				ref.release()
				if err != nil {
					return RemoteSlice{}, fmt.Errorf("tiering: read %s chunk %d: %w", ix.logKey, k, err)
				}
				if atLimit {
					break
				}
				continue
			}
			rs.ref = ref
			st.reads++
			if continued {
				r.ra.plan(key, m, i, ix, k, &st)
			}
			r.ra.put(key, rs.NextOffset, st)
			return rs, nil
		}
	}
	return RemoteSlice{FirstOffset: end, NextOffset: end}, nil
}

func (r *RemoteReader) outOfRange(key PartitionKey, m *Manifest, offset int64) error {
	if m == nil {
		return fmt.Errorf("%w: %s/%d offset %d: no manifest", ErrRemoteOffsetOutOfRange, key.Topic, key.Partition, offset)
	}
	return fmt.Errorf("%w: %s/%d offset %d, remote log holds [%d, %d)", ErrRemoteOffsetOutOfRange,
		key.Topic, key.Partition, offset, m.LogStartOffset, m.EndOffset())
}

// scanChunk finds, in the chunk span of ix held in f, the first batch at or
// after object position from whose last offset is >= off, and returns it
// with the batches after it that fit in maxBytes and the chunk. Batches
// whose base offset is at or above limit are never returned. found is
// false when no batch of the chunk qualifies; atLimit says that a batch at
// or above limit ended the search.
func scanChunk(f *os.File, ix *remoteIndex, span chunkSpan, from, off, limit int64, maxBytes int) (rs RemoteSlice, found, atLimit bool, err error) {
	hr := newChunkHeaderReader(f, span)
	defer hr.release()
	pos := from
	var h segment.Header
	for {
		if pos >= span.end {
			return RemoteSlice{}, false, false, nil
		}
		if h, err = hr.at(pos); err != nil {
			return RemoteSlice{}, false, false, err
		}
		if h.BaseOffset >= limit {
			return RemoteSlice{}, false, true, nil
		}
		if h.LastOffset() >= off {
			break
		}
		pos += int64(h.Size())
	}
	end := pos + int64(h.Size())
	next := h.NextOffset()
	byteLimit := span.end
	if mb := int64(max(maxBytes, 0)); mb < span.end-pos {
		byteLimit = pos + mb
	}
	if end < byteLimit {
		// Jump over the batches that certainly fit: those before the
		// last indexed batch at or below the byte limit, and below the
		// offset limit.
		q := max(end, min(ix.floorByPosition(byteLimit), ix.floorByOffset(limit)))
		for q < span.end {
			h2, err := hr.at(q)
			if err != nil {
				return RemoteSlice{}, false, false, err
			}
			if q+int64(h2.Size()) > byteLimit || h2.BaseOffset >= limit {
				next = h2.BaseOffset
				break
			}
			q += int64(h2.Size())
		}
		end = q
	}
	if end == span.end {
		next = span.next
	}
	return RemoteSlice{File: f, Pos: pos - span.start, Size: end - pos, FirstOffset: h.BaseOffset, NextOffset: next}, true, false, nil
}

// chunkLoader returns the loader of chunk k of ix: one ranged GET,
// checked batch by batch on its way to the file. A GET whose body breaks
// part-way (see resumable) is resumed once, from the end of the last
// whole batch written, with a GET of the rest: the S3 client retries
// requests, not bodies, and a replay should not fail on one reset.
func (r *RemoteReader) chunkLoader(ix *remoteIndex, k int) chunkLoader {
	span := ix.chunks[k]
	return func(ctx context.Context, w io.Writer) error {
		ctx, done := r.getContext(ctx)
		defer done()
		cw := &countingWriter{w: w} // copyValidBatches writes whole batches only
		for resumed := false; ; resumed = true {
			from := span.start + cw.n
			rc, err := r.store.Get(ctx, ix.logKey, from, span.end-from)
			if err == nil {
				rc = paced(ctx, rc, r.cfg.Pacer)
				err = copyValidBatches(cw, rc, span.end-from)
				if cerr := rc.Close(); err == nil {
					err = cerr
				}
			}
			if err == nil {
				return nil
			}
			if resumed || !resumable(err) || ctx.Err() != nil {
				return fmt.Errorf("tiering: get %s [%d, %d): %w", ix.logKey, span.start, span.end, err)
			}
			r.resumes.Add(1)
		}
	}
}

// resumable reports whether a GET failed in a way worth one more try at
// once: its body broke or came short (reset, closed, truncated) after the
// store had answered. Failures the S3 client already retried, throttling
// and timeouts are not.
func resumable(err error) bool {
	var se *StoreError
	if !errors.As(err, &se) || IsThrottled(err) {
		return false
	}
	switch se.Code {
	case "reset", "closed", "truncated":
		return se.Op == "get" && se.body
	}
	return false
}

// runGetter returns the opener of ranged GETs of ix's .log object for
// read-ahead runs; each GET is bounded as getContext says until its body
// is closed.
func (r *RemoteReader) runGetter(ix *remoteIndex) rangeGetter {
	return func(ctx context.Context, start, end int64) (io.ReadCloser, error) {
		ctx, done := r.getContext(ctx)
		rc, err := r.store.Get(ctx, ix.logKey, start, end-start)
		if err != nil {
			done()
			return nil, fmt.Errorf("tiering: get %s [%d, %d): %w", ix.logKey, start, end, err)
		}
		return &doneCloser{ReadCloser: paced(ctx, rc, r.cfg.Pacer), done: done}, nil
	}
}

// doneCloser runs done after closing the body.
type doneCloser struct {
	io.ReadCloser
	done func()
}

func (d *doneCloser) Close() error {
	err := d.ReadCloser.Close()
	d.done()
	return err
}

// getContext bounds one GET: by GetTimeout, and by Close.
func (r *RemoteReader) getContext(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.GetTimeout)
	stop := context.AfterFunc(r.ctx, cancel)
	return ctx, func() { stop(); cancel() }
}

// chunkHeaderReader reads batch headers of a chunk file with pread,
// through a small buffer so that a run of small batches costs one system
// call. Positions are object positions; the file starts at span.start.
type chunkHeaderReader struct {
	f      io.ReaderAt
	span   chunkSpan
	buf    []byte
	bufPos int64 // object position of buf[0], -1 when empty
	n      int
}

const chunkHeaderReadSize = 4096

var chunkHeaderBufs = sync.Pool{New: func() any { b := make([]byte, chunkHeaderReadSize); return &b }}

func newChunkHeaderReader(f io.ReaderAt, span chunkSpan) *chunkHeaderReader {
	return &chunkHeaderReader{f: f, span: span, buf: *chunkHeaderBufs.Get().(*[]byte), bufPos: -1}
}

func (r *chunkHeaderReader) release() {
	b := r.buf
	r.buf = nil
	chunkHeaderBufs.Put(&b)
}

// at returns the header of the batch at object position pos, checking that
// the batch ends within the chunk.
func (r *chunkHeaderReader) at(pos int64) (segment.Header, error) {
	if pos < r.span.start || pos+segment.HeaderSize > r.span.end {
		return segment.Header{}, fmt.Errorf("%w: batch header at %d outside chunk [%d, %d)", segment.ErrTruncated, pos, r.span.start, r.span.end)
	}
	if r.bufPos < 0 || pos < r.bufPos || pos+segment.HeaderSize > r.bufPos+int64(r.n) {
		want := int(min(int64(len(r.buf)), r.span.end-pos))
		n, err := r.f.ReadAt(r.buf[:want], pos-r.span.start)
		if n < segment.HeaderSize {
			r.bufPos = -1
			if err == nil || err == io.EOF {
				err = fmt.Errorf("%w: chunk file ends at %d", segment.ErrTruncated, pos+int64(n))
			}
			return segment.Header{}, err
		}
		r.bufPos, r.n = pos, n
	}
	h, err := segment.ParseHeader(r.buf[pos-r.bufPos : r.n])
	if err != nil {
		return h, err
	}
	if pos+int64(h.Size()) > r.span.end {
		return h, fmt.Errorf("%w: batch at %d needs %d bytes, chunk ends at %d", segment.ErrTruncated, pos, h.Size(), r.span.end)
	}
	return h, nil
}

// OffsetForTimestamp returns the first offset of key's remote log, at or
// above m.LogStartOffset, whose record timestamp is >= ts, with that
// timestamp: ListOffsets by time over remote data. found is false when no
// remote record is that late (offset is then m.EndOffset(), timestamp -1);
// the broker goes on to the local log. Segments are skipped by their max
// timestamp, the start found with the time index, then batch headers are
// scanned and the first batch that qualifies is decoded.
func (r *RemoteReader) OffsetForTimestamp(ctx context.Context, key PartitionKey, m *Manifest, ts int64) (offset, timestamp int64, found bool, err error) {
	if m == nil {
		return 0, -1, false, r.outOfRange(key, m, 0)
	}
	for i := range m.Segments {
		seg := &m.Segments[i]
		if seg.NextOffset <= m.LogStartOffset || seg.MaxTimestamp < ts {
			continue
		}
		off, t, ok, err := r.segmentOffsetForTimestamp(ctx, key, m.Prefix(), seg, max(m.LogStartOffset, seg.BaseOffset), ts)
		if err != nil || ok {
			return off, t, ok, err
		}
	}
	return m.EndOffset(), -1, false, nil
}

// segmentOffsetForTimestamp searches one segment from offset start.
func (r *RemoteReader) segmentOffsetForTimestamp(ctx context.Context, key PartitionKey, prefix string, seg *RemoteSegment, start, ts int64) (int64, int64, bool, error) {
	ti, err := r.segmentTimeIndex(ctx, prefix, seg)
	if err != nil {
		return 0, -1, false, err
	}
	if rel, ok := ti.floorBefore(ts); ok {
		start = max(start, seg.BaseOffset+int64(rel))
	}
	ix, err := r.segmentIndex(ctx, prefix, seg)
	if err != nil {
		return 0, -1, false, err
	}
	pos := ix.floorByOffset(start)
	for k := ix.chunkFor(pos); k < len(ix.chunks); k++ {
		span := ix.chunks[k]
		pos = max(pos, span.start)
		ref, err := r.cache.acquireFor(ctx, r.partCounters(key), chunkKey{ix.chunkID, k}, span.end-span.start, true /* correlated: a lookup does not promote */, r.chunkLoader(ix, k))
		if err != nil {
			return 0, -1, false, fmt.Errorf("tiering: read %s chunk %d: %w", ix.logKey, k, err)
		}
		off, t, ok, err := chunkOffsetForTimestamp(ref.file(), span, pos, start, seg.NextOffset, ts)
		ref.release()
		if err != nil {
			return 0, -1, false, fmt.Errorf("tiering: offset for timestamp in %s chunk %d: %w", ix.logKey, k, err)
		}
		if ok {
			return off, t, true, nil
		}
	}
	return 0, -1, false, nil
}

// chunkOffsetForTimestamp scans the batches of one chunk from object
// position from for the first record at or after offset start, below the
// segment's next offset, with a timestamp >= ts.
func chunkOffsetForTimestamp(f *os.File, span chunkSpan, from, start, next, ts int64) (int64, int64, bool, error) {
	hr := newChunkHeaderReader(f, span)
	defer hr.release()
	for pos := from; pos < span.end; {
		h, err := hr.at(pos)
		if err != nil {
			return 0, -1, false, err
		}
		if h.BaseOffset >= next {
			break
		}
		batchPos := pos
		pos += int64(h.Size())
		if h.LastOffset() < start || h.MaxTimestamp < ts {
			continue
		}
		if h.LogAppendTime() {
			return max(h.BaseOffset, start), h.MaxTimestamp, true, nil
		}
		batch := make([]byte, h.Size())
		if _, err := f.ReadAt(batch, batchPos-span.start); err != nil {
			return 0, -1, false, err
		}
		it, err := segment.NewRecordIter(batch, segment.DefaultMaxDecompressed)
		if err != nil {
			return 0, -1, false, err
		}
		for {
			rec, ok, err := it.Next()
			if err != nil {
				return 0, -1, false, err
			}
			if !ok {
				break
			}
			if rec.Offset >= next {
				break
			}
			if rec.Offset >= start && rec.Timestamp >= ts {
				return rec.Offset, rec.Timestamp, true, nil
			}
		}
	}
	return 0, -1, false, nil
}
