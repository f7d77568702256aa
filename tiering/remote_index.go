package tiering

import (
	"container/list"
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/stratastream/strata/segment"
)

// Remote offset and time indexes.
//
// A remote segment's .index and .timeindex objects are the segment's own
// index files, byte for byte, read with package segment's entry types
// (segment.OffsetIndex, segment.TimeIndex). The valid entries are those
// the segment package trusts (Valid: the first zero-filled or
// non-increasing entry ends the index) that also fall inside the remote
// segment: a position below its size, an offset below its NextOffset.
//
// Each object is fetched once with a whole-object GET and kept in memory in
// an LRU bounded by bytes and count. From the offset index the reader also
// derives the segment's chunk table: the .log object is cut into chunks of
// about ChunkBytes whose boundaries are batch starts taken from the index
// (see chunkSpan), so no batch ever straddles two chunks.

// indexCacheKey names a parsed index object of seg (under the partition
// prefix) in the index cache: its store key and the segment's NextOffset,
// since an entry cut at a divergence point parses the same object to fewer
// entries.
func indexCacheKey(prefix string, seg *RemoteSegment, suffix string) string {
	return chunkID(prefix+seg.ObjectName()+suffix, seg.NextOffset)
}

// chunkID is the chunk cache's name of the chunks of the .log object at
// logKey for a segment entry ending at next. The chunk table depends on the
// entry's NextOffset (index entries at or past it are not used), and an
// entry cut at a divergence point names the same object as the uncut one,
// so both take part in the name: a chunk name always stands for the same
// bytes.
func chunkID(logKey string, next int64) string {
	return logKey + "@" + strconv.FormatInt(next, 10)
}

// chunkSpan is one chunk of a remote .log object: bytes [start, end), which
// begin and end on batch boundaries. next is the base offset of the batch
// at end (the segment's NextOffset for the last chunk).
type chunkSpan struct {
	start, end int64
	next       int64
}

// remoteIndex is the parsed offset index of one remote segment and the
// chunk table derived from it. It is immutable once built.
type remoteIndex struct {
	logKey  string              // store key of the .log object
	chunkID string              // names its chunks in the chunk cache: logKey and next (chunkID)
	base    int64               // segment base offset
	next    int64               // segment NextOffset
	size    int64               // bytes of the .log object
	entries segment.OffsetIndex // valid entries
	chunks  []chunkSpan
}

// parseOffsetIndex returns the valid prefix of an offset index object for
// a segment of size bytes holding offsets [base, next).
func parseOffsetIndex(b []byte, base, next, size int64) segment.OffsetIndex {
	valid := segment.OffsetIndex(b).Valid()
	n := 0
	for ; n < valid.Len(); n++ {
		e := valid.Entry(n)
		if int64(e.Position) >= size || base+int64(e.RelOffset) >= next {
			break
		}
	}
	return valid[: n*segment.IndexEntrySize : n*segment.IndexEntrySize]
}

// newRemoteIndex builds the index of seg from its .index object and cuts
// the .log object into chunks of about chunkBytes. A chunk boundary is the
// last indexed batch position at or below each multiple of chunkBytes, so a
// chunk may be shorter than chunkBytes, or longer when the index is sparse
// (a batch larger than a chunk makes one chunk of its own).
func newRemoteIndex(logKey string, seg *RemoteSegment, raw []byte, chunkBytes int64) *remoteIndex {
	ix := &remoteIndex{
		logKey: logKey, chunkID: chunkID(logKey, seg.NextOffset), base: seg.BaseOffset, next: seg.NextOffset, size: seg.Size,
		entries: parseOffsetIndex(raw, seg.BaseOffset, seg.NextOffset, seg.Size),
	}
	start := int64(0)
	for k := int64(1); k*chunkBytes < ix.size; k++ {
		i := ix.floorEntryByPosition(k * chunkBytes)
		if i < 0 {
			continue
		}
		rel, pos := ix.entry(i)
		if p := int64(pos); p > start {
			ix.chunks = append(ix.chunks, chunkSpan{start: start, end: p, next: ix.base + int64(rel)})
			start = p
		}
	}
	if start < ix.size || len(ix.chunks) == 0 {
		ix.chunks = append(ix.chunks, chunkSpan{start: start, end: ix.size, next: ix.next})
	}
	return ix
}

func (ix *remoteIndex) numEntries() int { return ix.entries.Len() }

func (ix *remoteIndex) entry(i int) (rel, pos uint32) {
	e := ix.entries.Entry(i)
	return e.RelOffset, e.Position
}

// floorEntryByPosition returns the last entry whose position is <= limit,
// or -1.
func (ix *remoteIndex) floorEntryByPosition(limit int64) int {
	return sort.Search(ix.numEntries(), func(i int) bool { _, p := ix.entry(i); return int64(p) > limit }) - 1
}

// floorByOffset returns the position of the last indexed batch whose base
// offset is <= off, or 0 (the first batch).
func (ix *remoteIndex) floorByOffset(off int64) int64 {
	if off <= ix.base {
		return 0
	}
	rel := off - ix.base
	i := sort.Search(ix.numEntries(), func(i int) bool { r, _ := ix.entry(i); return int64(r) > rel }) - 1
	if i < 0 {
		return 0
	}
	_, p := ix.entry(i)
	return int64(p)
}

// floorByPosition returns the last indexed batch position <= limit, or 0.
func (ix *remoteIndex) floorByPosition(limit int64) int64 {
	i := ix.floorEntryByPosition(limit)
	if i < 0 {
		return 0
	}
	_, p := ix.entry(i)
	return int64(p)
}

// chunkFor returns the chunk holding byte pos of the .log object.
func (ix *remoteIndex) chunkFor(pos int64) int {
	return sort.Search(len(ix.chunks), func(i int) bool { return ix.chunks[i].end > pos })
}

// memSize is what the index costs in the index cache.
func (ix *remoteIndex) memSize() int64 {
	return int64(cap(ix.entries)) + int64(len(ix.chunks))*24 + 128
}

// remoteTimeIndex is the parsed time index of one remote segment.
type remoteTimeIndex struct {
	entries segment.TimeIndex // valid entries
}

// parseTimeIndex returns the valid prefix of a time index object for a
// segment holding offsets [base, next).
func parseTimeIndex(b []byte, base, next int64) *remoteTimeIndex {
	valid := segment.TimeIndex(b).Valid()
	n := 0
	for ; n < valid.Len(); n++ {
		if base+int64(valid.Entry(n).RelOffset) >= next {
			break
		}
	}
	return &remoteTimeIndex{entries: valid[: n*segment.TimeIndexEntrySize : n*segment.TimeIndexEntrySize]}
}

// floorBefore returns the relative offset of the last entry whose
// timestamp is < ts; ok is false when there is none. Every batch up to the
// one at that offset holds only timestamps below ts.
func (ti *remoteTimeIndex) floorBefore(ts int64) (rel uint32, ok bool) {
	i := sort.Search(ti.entries.Len(), func(i int) bool { return ti.entries.Entry(i).Timestamp >= ts }) - 1
	if i < 0 {
		return 0, false
	}
	return ti.entries.Entry(i).RelOffset, true
}

// indexCache holds parsed index objects in memory, least recently used
// first out, bounded by bytes and count. Concurrent loads of one object
// share a single GET. The lock is never held while loading.
type indexCache struct {
	maxBytes   int64
	maxEntries int

	hits, misses atomic.Int64

	mu struct {
		sync.Mutex
		entries map[string]*indexEntry
		lru     list.List // of *indexEntry, most recent at the front; loaded entries only
		bytes   int64
	}
}

type indexEntry struct {
	key  string
	done chan struct{} // closed when val/err are set
	val  any
	size int64
	err  error
	elem *list.Element
}

func newIndexCache(maxBytes int64, maxEntries int) *indexCache {
	c := &indexCache{maxBytes: maxBytes, maxEntries: maxEntries}
	c.mu.entries = make(map[string]*indexEntry)
	return c
}

// get returns the cached value for key, or loads it with load (once for all
// concurrent callers). A failed load is not cached.
func (c *indexCache) get(ctx context.Context, key string, load func(ctx context.Context) (any, int64, error)) (any, error) {
	c.mu.Lock()
	e, ok := c.mu.entries[key]
	if ok {
		if e.elem != nil {
			c.mu.lru.MoveToFront(e.elem)
		}
		c.mu.Unlock()
		c.hits.Add(1)
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return e.val, e.err
	}
	e = &indexEntry{key: key, done: make(chan struct{})}
	c.mu.entries[key] = e
	c.mu.Unlock()
	c.misses.Add(1)

	// The load runs detached from ctx so that one caller giving up does
	// not fail the others waiting on it.
	go func() {
		val, size, err := load(context.WithoutCancel(ctx))
		c.mu.Lock()
		e.val, e.size, e.err = val, size, err
		if err != nil {
			delete(c.mu.entries, key)
		} else {
			e.elem = c.mu.lru.PushFront(e)
			c.mu.bytes += size
			c.trimLocked()
		}
		c.mu.Unlock()
		close(e.done)
	}()
	select {
	case <-e.done:
		return e.val, e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// peek returns the loaded value for key without loading it or counting a
// hit.
func (c *indexCache) peek(key string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.mu.entries[key]
	if !ok || e.elem == nil {
		return nil, false
	}
	return e.val, true
}

// trimLocked drops least recently used entries beyond the bounds, keeping
// at least the most recent one.
func (c *indexCache) trimLocked() {
	for c.mu.lru.Len() > 1 && (c.mu.bytes > c.maxBytes || c.mu.lru.Len() > c.maxEntries) {
		e := c.mu.lru.Remove(c.mu.lru.Back()).(*indexEntry)
		delete(c.mu.entries, e.key)
		c.mu.bytes -= e.size
	}
}

// readObject GETs a whole object, once more at once when its body broke
// part-way (resumable).
func (r *RemoteReader) readObject(ctx context.Context, key string) ([]byte, error) {
	ctx, done := r.getContext(ctx)
	defer done()
	for retried := false; ; retried = true {
		b, err := r.readObjectOnce(ctx, key)
		if err == nil || retried || !resumable(err) || ctx.Err() != nil {
			return b, err
		}
		r.resumes.Add(1)
	}
}

func (r *RemoteReader) readObjectOnce(ctx context.Context, key string) ([]byte, error) {
	rc, err := r.store.Get(ctx, key, 0, -1)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(rc)
	if cerr := rc.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("tiering: read %s: %w", key, err)
	}
	return b, nil
}

// segmentIndex returns the offset index and chunk table of seg, a
// segment under the partition prefix.
func (r *RemoteReader) segmentIndex(ctx context.Context, prefix string, seg *RemoteSegment) (*remoteIndex, error) {
	idxKey := prefix + seg.ObjectName() + SuffixIndex
	s := *seg
	v, err := r.indexes.get(ctx, indexCacheKey(prefix, seg, SuffixIndex), func(ctx context.Context) (any, int64, error) {
		raw, err := r.readObject(ctx, idxKey)
		if IsNotFound(err) {
			// Without an index the segment is one chunk: correct, but
			// the whole object is fetched at once.
			r.log.Warn("remote segment has no offset index; reading it as one chunk", "key", idxKey)
			raw, err = nil, nil
		}
		if err != nil {
			return nil, 0, err
		}
		ix := newRemoteIndex(prefix+s.ObjectName()+SuffixLog, &s, raw, r.cfg.ChunkBytes)
		return ix, ix.memSize(), nil
	})
	if err != nil {
		return nil, fmt.Errorf("tiering: offset index of %s: %w", idxKey, err)
	}
	return v.(*remoteIndex), nil
}

// segmentTimeIndex returns the time index of seg; a missing object gives
// an empty index (the search then scans from the segment start).
func (r *RemoteReader) segmentTimeIndex(ctx context.Context, prefix string, seg *RemoteSegment) (*remoteTimeIndex, error) {
	tiKey := prefix + seg.ObjectName() + SuffixTimeIndex
	base, next := seg.BaseOffset, seg.NextOffset
	v, err := r.indexes.get(ctx, indexCacheKey(prefix, seg, SuffixTimeIndex), func(ctx context.Context) (any, int64, error) {
		raw, err := r.readObject(ctx, tiKey)
		if IsNotFound(err) {
			raw, err = nil, nil
		}
		if err != nil {
			return nil, 0, err
		}
		ti := parseTimeIndex(raw, base, next)
		return ti, int64(cap(ti.entries)) + 64, nil
	})
	if err != nil {
		return nil, fmt.Errorf("tiering: time index of %s: %w", tiKey, err)
	}
	return v.(*remoteTimeIndex), nil
}

// copyBatchBufSize is the window copyValidBatches reads through.
const copyBatchBufSize = 1 << 20

var copyBatchBufs = sync.Pool{New: func() any { b := make([]byte, copyBatchBufSize); return &b }}

// copyValidBatches copies size bytes from src to dst, checking on the way
// that they are whole, intact batches back to back (magic, length,
// CRC-32C), as a chunk cut at batch boundaries must be. Only checked
// batches are written. Memory: a 1 MiB window, or the largest batch.
func copyValidBatches(dst io.Writer, src io.Reader, size int64) error {
	bp := copyBatchBufs.Get().(*[]byte)
	buf := *bp
	defer func() {
		if len(buf) == copyBatchBufSize {
			copyBatchBufs.Put(&buf)
		}
	}()
	var done int64 // bytes checked and written; buf[0] is chunk byte done
	filled := 0    // bytes in buf
	for done < size {
		// Check the whole batches in buf.
		p, need := 0, segment.HeaderSize
		for filled-p >= segment.HeaderSize {
			h, err := segment.ParseHeader(buf[p:filled])
			if err != nil {
				return fmt.Errorf("at chunk byte %d: %w", done+int64(p), err)
			}
			n := h.Size()
			if done+int64(p+n) > size {
				return fmt.Errorf("%w: batch at chunk byte %d needs %d bytes, chunk is %d", segment.ErrTruncated, done+int64(p), n, size)
			}
			if filled-p < n {
				need = n
				break
			}
			if _, err := segment.ValidateBatch(buf[p : p+n]); err != nil {
				return fmt.Errorf("at chunk byte %d: %w", done+int64(p), err)
			}
			p += n
		}
		// Write them and keep the rest.
		if p > 0 {
			if _, err := dst.Write(buf[:p]); err != nil {
				return err
			}
			done += int64(p)
			filled = copy(buf, buf[p:filled])
		}
		if done == size {
			break
		}
		if size-done < int64(need) {
			return fmt.Errorf("%w: chunk ends %d bytes into a batch at chunk byte %d", segment.ErrTruncated, size-done, done)
		}
		if need > len(buf) {
			nb := make([]byte, need)
			copy(nb, buf[:filled])
			buf = nb
		}
		// Read more, never past the chunk.
		m, err := src.Read(buf[filled:int(min(int64(len(buf)), size-done))])
		filled += m
		if err == io.EOF && m == 0 {
			return fmt.Errorf("%w: object ends %d bytes into a %d-byte chunk", segment.ErrTruncated, done+int64(filled), size)
		}
		if err != nil && err != io.EOF {
			return err
		}
	}
	return nil
}
