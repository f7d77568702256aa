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
// beyond the real table does nothing. A stream remembers how far it has
// been served, so every chunk is queued once per stream. A bounded pool of
// workers shared by all partitions runs the queue; when the queue is full
// a prefetch is dropped, never waited for, so the read path does not block
// on read-ahead.
//
// Chunks are prefetched in runs: a segment's chunks form aligned groups of
// ReadAheadRunChunks (by default readAheadRunBytes of chunks: 4 of the
// default 4 MiB), and a chunk the window reaches is queued with the rest
// of its group. A job fetches its chunks with one GET and cuts the body
// into chunk files as it arrives, publishing each as soon as it is whole.
// A reader so has between ReadAheadChunks and ReadAheadChunks+
// ReadAheadRunChunks-1 chunks coming, and the store serves a quarter of
// the requests, each four times as large: object stores charge per
// request and spend much of their CPU per request (MinIO here about a
// quarter less per byte at 16 MiB than at 4 MiB).
//
// Streams are kept in an LRU bounded by maxStreams.

const maxStreams = 4096

// readAheadRunBytes is the default target size of one read-ahead GET.
const readAheadRunBytes = 16 << 20

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

// prefetchJob fetches chunks chunk..last of seg (last may lie beyond the
// segment's real chunk table, which the job finds out).
type prefetchJob struct {
	part        PartitionKey
	prefix      string // the partition's key prefix (Manifest.Prefix)
	seg         RemoteSegment
	chunk, last int
	reader      *atomic.Pointer[chunkPos] // the stream's position: chunks it has passed are skipped
}

// readAhead is the detector and the prefetch worker pool.
type readAhead struct {
	r         *RemoteReader
	chunks    int // chunks to keep queued ahead of a sequential reader; 0 disables
	runChunks int // chunks of a segment fetched together by one job (aligned groups)
	jobs      chan prefetchJob
	wg        sync.WaitGroup

	queued, dropped, skipped, failed atomic.Int64
	// finished counts the jobs the workers have run to their end, whatever
	// the outcome: when it equals queued, every prefetch queued so far
	// has landed in the cache or failed (tests wait on it).
	finished atomic.Int64

	mu struct {
		sync.Mutex
		streams map[streamKey]*stream
		lru     list.List // of *stream, most recent at the front
	}
}

func newReadAhead(r *RemoteReader, chunks, runChunks, workers int) *readAhead {
	ra := &readAhead{r: r, chunks: max(chunks, 0), runChunks: max(runChunks, 1)}
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
// the stream s, up to ra.chunks ahead (each with the rest of its group),
// and advances s.ahead over those queued.
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
			numChunks = ra.r.chunkCount(m.Prefix(), &m.Segments[seg])
		}
		base := m.Segments[seg].BaseOffset
		if !s.ahead.less(chunkPos{base, chunk}) {
			continue
		}
		// The rest of chunk's group, within the segment's table, less
		// the chunks at its front the cache already holds.
		last := min((chunk/ra.runChunks+1)*ra.runChunks, numChunks) - 1
		from := chunk
		for seg == i && from <= last && ra.r.cache.contains(chunkKey{ix.chunkID, from}) {
			from++
		}
		if from <= last {
			select {
			case ra.jobs <- prefetchJob{part: part, prefix: m.Prefix(), seg: m.Segments[seg], chunk: from, last: last, reader: s.at}:
				ra.queued.Add(1)
			default:
				ra.dropped.Add(1)
				return
			}
		}
		s.ahead = chunkPos{base, last}
		n += last - chunk
		chunk = last
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
			ra.finished.Add(1)
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
func (r *RemoteReader) chunkCount(prefix string, seg *RemoteSegment) int {
	if v, ok := r.indexes.peek(indexCacheKey(prefix, seg, SuffixIndex)); ok {
		return len(v.(*remoteIndex).chunks)
	}
	return int(max((seg.Size+r.cfg.ChunkBytes-1)/r.cfg.ChunkBytes, 1))
}

// prefetch runs one read-ahead job: the chunks of its run that its reader
// has not reached yet and the cache does not hold, fetched with one GET per
// stretch of consecutive missing chunks.
func (r *RemoteReader) prefetch(ctx context.Context, j prefetchJob) error {
	first := j.chunk
	if at := j.reader.Load(); at != nil {
		if !at.less(chunkPos{j.seg.BaseOffset, j.last}) {
			r.ra.skipped.Add(1)
			return nil
		}
		if at.seg == j.seg.BaseOffset {
			first = max(first, at.chunk+1)
		}
	}
	ix, err := r.segmentIndex(ctx, j.prefix, &j.seg)
	if err != nil {
		return err
	}
	last := min(j.last, len(ix.chunks)-1)
	if first > last {
		return nil
	}
	return r.cache.prefetchRun(ctx, ix.chunkID, ix.chunks, first, last, r.runGetter(ix))
}
