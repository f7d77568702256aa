package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// batchFilter decides, batch by batch, what a cleaning keeps: Kafka's
// LogCleaner.shouldRetainRecord and checkBatchRetention, with
// MemoryRecords.filterTo rewriting what remains.
//
// A record below end (the end of the section the offset map covers) is kept
// when it has a key, its offset is at least the map's offset for the key,
// and it is not a tombstone past its batch's delete horizon. Every record
// at or above end is kept. Records without a key are dropped below end, as
// Kafka's cleaner drops them (the broker refuses them on compacted topics;
// any that are there came before the topic was compacted).
//
// A batch that keeps all its records is copied verbatim, unless it keeps a
// tombstone and has no delete horizon yet: then it is rewritten with the
// horizon set to now + delete.retention.ms (KIP-534). A batch that keeps
// some records is rewritten with the same base offset, last offset delta,
// producer id, epoch and base sequence, attributes and codec, the kept
// records' bytes copied (appendRewritten) and recompressed, max timestamp
// recomputed and a new CRC. A
// batch that keeps none is dropped, except the last batch of a producer
// (lastOfProducer), which becomes an empty batch so the producer's last
// sequence and epoch survive (Kafka's RETAIN_EMPTY). Control batches are
// kept whole, unless the cleaning tracks transactions (Log.Clean with
// CleanConfig.TxnsComplete): then a marker whose transaction has no data
// left gets a delete horizon and goes once it has passed (clean_txn.go).
type batchFilter struct {
	m                 *OffsetMap
	end               int64
	nowMs             int64
	deleteRetentionMs int64
	lastOfProducer    map[int64]int64 // producer id -> last offset of its last batch
	aborted           abortedSet      // aborted transactions (clean_txn.go)
	txn               markerTracker   // which markers may go (clean_txn.go)
	maxDecompressed   int
	stats             *CleanResult

	rewrote bool // the last filter call rewrote its batch
	// validated: every batch given to filter was validated by the caller
	// (Log.Clean's scanner checks each batch's CRC as it reads it), so
	// filter does not check it again.
	validated bool

	recs []cleanRec // scratch: the batch's records
	// cache holds the records the map pass walked (clean_cache.go); nil
	// for a BatchCleaner.
	cache   *recCache
	kept    []int32 // scratch: indexes of the records kept
	scratch []byte  // uncompressed records of a rewritten batch

	readBuf, outBuf []byte // Log.Clean's I/O buffers, reused from group to group
}

// cleanBuffers are Log.Clean's scratch memory, kept by the offset map (one
// per cleaner thread) from cleaning to cleaning, so that a cleaning does
// not allocate (and the runtime zero) its buffers afresh: the read buffer
// of both passes (IOBufferBytes, or one batch if larger), the output
// buffer (about as much), and the filter's scratch (a batch's records).
type cleanBuffers struct {
	read, out, records []byte
	recs               []cleanRec
	kept               []int32
}

// takeBuffers makes b's buffers f's; keepBuffers gives them back.
func (f *batchFilter) takeBuffers(b *cleanBuffers) {
	f.readBuf, f.outBuf, f.scratch, f.recs, f.kept = b.read, b.out, b.records, b.recs, b.kept
	*b = cleanBuffers{}
}

func (f *batchFilter) keepBuffers(b *cleanBuffers) {
	*b = cleanBuffers{read: f.readBuf, out: f.outBuf[:0], records: f.scratch[:0], recs: f.recs[:0], kept: f.kept[:0]}
}

// batchRecords does NewRecordIter's checks and decompression of batch b
// (header h), without the batch's own checks (CRC included) when
// validated. It returns the header the records are read with (the one
// parsed from b) and the records section, decompressed.
func batchRecords(b []byte, h Header, validated bool, maxDecompressed int) (Header, []byte, error) {
	if !validated {
		var err error
		if h, err = ValidateBatch(b); err != nil {
			return h, nil, err
		}
	}
	if len(b) != h.Size() {
		return h, nil, fmt.Errorf("%w: batch at base offset %d is %d bytes, given %d", ErrBadLength, h.BaseOffset, h.Size(), len(b))
	}
	data, err := DecompressLimit(h.Compression(), b[HeaderSize:], maxDecompressed)
	if err != nil {
		return h, nil, fmt.Errorf("%w (batch at base offset %d)", err, h.BaseOffset)
	}
	return h, data, nil
}

// filter appends to dst what the cleaning keeps of batch b, a whole
// validated batch with header h.
func (f *batchFilter) filter(dst, b []byte, h Header) ([]byte, error) {
	f.stats.RecordsRead += int64(h.RecordCount)
	f.rewrote = false
	if h.Control() && h.BaseOffset < f.end && f.txn.on {
		return f.filterMarker(dst, b, h)
	}
	if h.Control() || h.BaseOffset >= f.end {
		f.stats.RecordsKept += int64(h.RecordCount)
		return append(dst, b...), nil
	}
	f.txn.onDataBatch(h, f.aborted)
	if out, ok := f.filterAborted(dst, b, h); ok {
		return out, nil
	}
	// The records as the map pass walked them (clean_cache.go), or walked
	// now; data, the records section, is needed only to rewrite.
	var data []byte
	recs, cached := f.cache.lookup(&h)
	if !cached {
		var rh Header
		var err error
		if rh, data, err = batchRecords(b, h, f.validated, f.maxDecompressed); err != nil {
			return dst, err
		}
		if f.recs, err = scanRecords(&rh, data, f.recs[:0]); err != nil {
			return dst, err
		}
		recs = f.recs
	}
	horizon, hasHorizon := h.DeleteHorizon()
	retainDeletes := !hasHorizon || f.nowMs < horizon
	f.m.touchHinted(recs)
	f.kept = f.kept[:0]
	tombstoneKept := false
	for i := range recs {
		r := &recs[i]
		if r.off < f.end {
			switch {
			case r.keyless:
				f.stats.KeylessDropped++
				continue
			case r.off < f.m.latestOf(r):
				continue
			case r.nullVal && !retainDeletes:
				f.stats.TombstonesRemoved++
				continue
			}
		}
		tombstoneKept = tombstoneKept || r.nullVal
		f.kept = append(f.kept, int32(i))
	}
	removed := len(recs) - len(f.kept)
	f.stats.RecordsKept += int64(len(f.kept))
	setHorizon := tombstoneKept && !hasHorizon
	switch {
	case len(f.kept) == 0:
		// An emptied batch, or one a cleaning emptied before: kept only
		// while it is its producer's last.
		if !h.HasProducerID() || f.lastOfProducer[h.ProducerID] != h.LastOffset() {
			return dst, nil
		}
		f.stats.EmptyBatchesKept++
		if h.RecordCount == 0 {
			return append(dst, b...), nil
		}
		f.rewrote = true
		return appendEmptyBatch(dst, h), nil
	case removed == 0 && !setHorizon:
		return append(dst, b...), nil
	}
	if setHorizon {
		horizon, hasHorizon = f.newHorizon(), true
	}
	f.rewrote = true
	if cached {
		var err error
		if _, data, err = batchRecords(b, h, f.validated, f.maxDecompressed); err != nil {
			return dst, err
		}
	}
	return f.appendRewritten(dst, h, recs, data, hasHorizon, horizon)
}

// newHorizon is the delete horizon a batch gets when a cleaning first
// keeps a tombstone or a removable marker in it: now + delete.retention.ms.
func (f *batchFilter) newHorizon() int64 {
	if f.deleteRetentionMs > math.MaxInt64-f.nowMs {
		return math.MaxInt64
	}
	return f.nowMs + f.deleteRetentionMs
}

// appendRewritten appends a batch holding the kept records (f.kept,
// indexes into all, the batch's records walked from data, the records
// section of the batch h) in place of h: same offsets range,
// producer fields, partition leader epoch, timestamp type and codec; with
// the delete horizon when hasHorizon. The base timestamp is the first kept
// record's timestamp (or the horizon), as Kafka's MemoryRecords.filterTo
// writes it; each kept record's bytes are copied, with only its timestamp
// delta re-encoded when the base timestamp moved (appendSpliced): the
// bytes appendRecord would encode from the record's fields.
func (f *batchFilter) appendRewritten(dst []byte, h Header, all []cleanRec, data []byte, hasHorizon bool, horizon int64) ([]byte, error) {
	attrs := uint16(h.Attributes) &^ attrDeleteHorizon
	baseTS := all[f.kept[0]].ts
	if h.LogAppendTime() {
		baseTS = h.BaseTimestamp // every record reads as maxTimestamp anyway
	}
	if hasHorizon {
		attrs |= attrDeleteHorizon
		baseTS = horizon
	}
	maxTS := int64(-1)
	recs := f.scratch[:0]
	for _, i := range f.kept {
		r := &all[i]
		maxTS = max(maxTS, r.ts)
		recs = appendSpliced(recs, data, r, r.ts-baseTS)
	}
	f.scratch = recs
	if h.LogAppendTime() {
		maxTS = h.MaxTimestamp
	}
	body := recs
	if c := h.Compression(); c != CodecNone {
		var err error
		if body, err = Compress(c, recs); err != nil {
			return dst, fmt.Errorf("segment: clean: recompress batch at base offset %d: %w", h.BaseOffset, err)
		}
	}
	start := len(dst)
	dst = appendBatchHeader(dst, h, attrs, baseTS, maxTS, int32(len(f.kept)), len(body))
	dst = append(dst, body...)
	binary.BigEndian.PutUint32(dst[start+offCRC:], crc32.Checksum(dst[start+offAttributes:], castagnoli))
	return dst, nil
}

// appendEmptyBatch appends a batch without records that keeps h's offsets
// range, producer fields and epoch: Kafka's DefaultRecordBatch.writeEmptyHeader
// (uncompressed, both timestamps the batch's max timestamp, no horizon).
func appendEmptyBatch(dst []byte, h Header) []byte {
	attrs := uint16(h.Attributes) & (attrTimestampType | attrTransactional | attrControl)
	start := len(dst)
	dst = appendBatchHeader(dst, h, attrs, h.MaxTimestamp, h.MaxTimestamp, 0, 0)
	binary.BigEndian.PutUint32(dst[start+offCRC:], crc32.Checksum(dst[start+offAttributes:], castagnoli))
	return dst
}

// appendBatchHeader appends a v2 header for a batch taking h's base offset,
// last offset delta, leader epoch and producer fields, with the given
// attributes, timestamps and record count, and bodyLen bytes of records to
// follow. The CRC is left zero.
func appendBatchHeader(dst []byte, h Header, attrs uint16, baseTS, maxTS int64, count int32, bodyLen int) []byte {
	var b [HeaderSize]byte
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(h.BaseOffset))
	binary.BigEndian.PutUint32(b[offBatchLength:], uint32(HeaderSize-LogOverhead+bodyLen))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(h.PartitionLeaderEpoch))
	b[offMagic] = Magic
	binary.BigEndian.PutUint16(b[offAttributes:], attrs)
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(h.LastOffsetDelta))
	binary.BigEndian.PutUint64(b[offBaseTimestamp:], uint64(baseTS))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(maxTS))
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(h.ProducerID))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(h.ProducerEpoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], uint32(h.BaseSequence))
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(count))
	return append(dst, b[:]...)
}
