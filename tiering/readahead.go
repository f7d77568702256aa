package tiering

import (
	"container/list"
	"context"
	"sync"
	"sync/atomic"
)

// Read-ahead.
//
// The detector remembers, per partition, where each recent reader will
// read next: after a Read that ends at NextOffset it keeps a stream keyed
// by (topic, partition, NextOffset). A Read at an offset some stream
// expects continues that stream; that makes it sequential (and, for the
// chunk cache, a correlated reference that does not promote). A read at
// the remote log start also counts as the start of a sequential stream,
// since that is how a replay from the earliest offset begins.
//
// For a sequential read in chunk k of segment s the next ReadAheadChunks
// chunks are queued for prefetch: k+1, k+2, ... of s, then 0, 1, ... of the
// following remote segments of the manifest. A segment whose index is not
// cached yet counts ceil(Size/ChunkBytes) chunks, an upper bound on its
// chunk table; the job fetches the index first, and a job for a chunk
// beyond the real table does nothing. A stream remembers how far it has been served, so every
// chunk is queued once per stream. A bounded pool of workers shared by all
// partitions runs the queue; when the queue is full a prefetch is dropped,
// never waited for, so the read path does not block on read-ahead.
//
// Streams are kept in an LRU bounded by maxStreams.

const maxStreams = 4096

// chunkPos is a chunk of a partition's remote log: the segment (by base
// offset) and the chunk within it.
type chunkPos struct {
	seg   int64
	chunk int
}

func (p chunkPos) less(q chunkPos) bool {
	return p.seg < q.seg || (p.seg == q.seg && p.chunk < q.chunk)
}

type streamKey struct {
	part PartitionKey
	next int64
}

// stream is one sequential reader as the detector knows it.
type stream struct {
	key   streamKey
	ahead chunkPos                  // the furthest chunk queued for prefetch
	reads int                       // sequential reads so far
	at    *atomic.Pointer[chunkPos] // the chunk the reader last read; shared with its queued prefetches
	elem  *list.Element
}

type prefetchJob struct {
	part   PartitionKey
	seg    RemoteSegment
	chunk  int
	reader *atomic.Pointer[chunkPos] // the stream's position: a job it has passed is skipped
}

// readAhead is the detector and the prefetch worker pool.
type readAhead struct {
	r      *RemoteReader
	chunks int // chunks to keep queued ahead of a sequential reader; 0 disables
	jobs   chan prefetchJob
	wg     sync.WaitGroup

	queued, dropped, skipped, failed atomic.Int64

	mu struct {
		sync.Mutex
		streams map[streamKey]*stream
		lru     list.List // of *stream, most recent at the front
	}
}

func newReadAhead(r *RemoteReader, chunks, workers int) *readAhead {
	ra := &readAhead{r: r, chunks: max(chunks, 0)}
	ra.mu.streams = make(map[streamKey]*stream)
	if ra.chunks > 0 && workers > 0 {
		ra.jobs = make(chan prefetchJob, max(4*workers, 2*ra.chunks))
		for range workers {
			ra.wg.Add(1)
			go ra.worker()
		}
	}
	return ra
}

// take removes and returns the stream expecting a read of part at offset,
// if there is one.
func (ra *readAhead) take(part PartitionKey, offset int64) (stream, bool) {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	s, ok := ra.mu.streams[streamKey{part, offset}]
	if !ok {
		return stream{}, false
	}
	delete(ra.mu.streams, s.key)
	ra.mu.lru.Remove(s.elem)
	return *s, true
}

// put records that a stream now expects its next read at next.
func (ra *readAhead) put(part PartitionKey, next int64, s stream) {
	s.key = streamKey{part, next}
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if old, ok := ra.mu.streams[s.key]; ok {
		ra.mu.lru.Remove(old.elem)
	}
	ns := &s
	ns.elem = ra.mu.lru.PushFront(ns)
	ra.mu.streams[s.key] = ns
	for ra.mu.lru.Len() > maxStreams {
		old := ra.mu.lru.Remove(ra.mu.lru.Back()).(*stream)
		delete(ra.mu.streams, old.key)
	}
}

// plan queues prefetches of the chunks after chunk k of segment i of m for
// the stream s, up to ra.chunks ahead, and advances s.ahead over those
// queued.
func (ra *readAhead) plan(part PartitionKey, m *Manifest, i int, ix *remoteIndex, k int, s *stream) {
	if ra.jobs == nil {
		return
	}
	cur := chunkPos{m.Segments[i].BaseOffset, k}
	if s.ahead.less(cur) {
		s.ahead = cur
	}
	if s.at == nil {
		s.at = new(atomic.Pointer[chunkPos])
	}
	s.at.Store(&cur)
	seg, chunk, numChunks := i, k, len(ix.chunks)
	for n := 0; n < ra.chunks; n++ {
		chunk++
		for chunk >= numChunks {
			if seg+1 >= len(m.Segments) {
				return
			}
			seg, chunk = seg+1, 0
			numChunks = ra.r.chunkCount(part, &m.Segments[seg])
		}
		pos := chunkPos{m.Segments[seg].BaseOffset, chunk}
		if !s.ahead.less(pos) {
			continue
		}
		if seg == i && ra.r.cache.contains(chunkKey{ix.logKey, chunk}) {
			s.ahead = pos
			continue
		}
		select {
		case ra.jobs <- prefetchJob{part: part, seg: m.Segments[seg], chunk: chunk, reader: s.at}:
			ra.queued.Add(1)
			s.ahead = pos
		default:
			ra.dropped.Add(1)
			return
		}
	}
}

func (ra *readAhead) worker() {
	defer ra.wg.Done()
	ctx := ra.r.ctx
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-ra.jobs:
			if err := ra.r.prefetch(ctx, j); err != nil && ctx.Err() == nil {
				ra.failed.Add(1)
			}
		}
	}
}

// stop waits for the workers, whose context the RemoteReader cancelled.
func (ra *readAhead) stop() { ra.wg.Wait() }

func (ra *readAhead) numStreams() int {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	return len(ra.mu.streams)
}

// chunkCount returns the number of chunks of seg: exact when its index is
// cached, else an upper bound.
func (r *RemoteReader) chunkCount(part PartitionKey, seg *RemoteSegment) int {
	if v, ok := r.indexes.peek(part.segmentKey(seg, SuffixIndex)); ok {
		return len(v.(*remoteIndex).chunks)
	}
	return int(max((seg.Size+r.cfg.ChunkBytes-1)/r.cfg.ChunkBytes, 1))
}

// prefetch runs one read-ahead job, unless its reader got there first.
func (r *RemoteReader) prefetch(ctx context.Context, j prefetchJob) error {
	if at := j.reader.Load(); at != nil && !at.less(chunkPos{j.seg.BaseOffset, j.chunk}) {
		r.ra.skipped.Add(1)
		return nil
	}
	ix, err := r.segmentIndex(ctx, j.part, &j.seg)
	if err != nil {
		return err
	}
	if j.chunk >= len(ix.chunks) {
		return nil
	}
	span := ix.chunks[j.chunk]
	return r.cache.prefetch(ctx, chunkKey{ix.logKey, j.chunk}, span.end-span.start, r.chunkLoader(ix, j.chunk))
}
