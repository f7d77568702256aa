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
// producer id, epoch and base sequence, attributes and codec, records
// re-encoded and recompressed, max timestamp recomputed and a new CRC. A
// batch that keeps none is dropped, except the last batch of a producer
// (lastOfProducer), which becomes an empty batch so the producer's last
// sequence and epoch survive (Kafka's RETAIN_EMPTY). Control batches are
// kept whole.
type batchFilter struct {
	m                 *OffsetMap
	end               int64
	nowMs             int64
	deleteRetentionMs int64
	lastOfProducer    map[int64]int64 // producer id -> last offset of its last batch
	aborted           abortedSet      // aborted transactions (clean_txn.go)
	maxDecompressed   int
	stats             *CleanResult

	rewrote bool // the last filter call rewrote its batch

	all     []Record              // scratch: the batch's records
	hashes  [][offsetMapHash]byte // scratch: their keys' hashes
	recs    []Record              // scratch: the records kept
	scratch []byte                // uncompressed records of a rewritten batch
}

// decodeHashed appends the records of it to recs and their keys' hashes
// to hashes (a keyless record's hash is unused).
func decodeHashed(it *RecordIter, recs []Record, hashes [][offsetMapHash]byte) ([]Record, [][offsetMapHash]byte, error) {
	for {
		rec, ok, err := it.Next()
		if err != nil {
			return recs, hashes, err
		}
		if !ok {
			return recs, hashes, nil
		}
		var h [offsetMapHash]byte
		if rec.Key != nil {
			h = hashKey(rec.Key)
		}
		recs = append(recs, rec)
		hashes = append(hashes, h)
	}
}

// filter appends to dst what the cleaning keeps of batch b, a whole
// validated batch with header h.
func (f *batchFilter) filter(dst, b []byte, h Header) ([]byte, error) {
	f.stats.RecordsRead += int64(h.RecordCount)
	f.rewrote = false
	if h.Control() || h.BaseOffset >= f.end {
		f.stats.RecordsKept += int64(h.RecordCount)
		return append(dst, b...), nil
	}
	if out, ok := f.filterAborted(dst, b, h); ok {
		return out, nil
	}
	it, err := NewRecordIter(b, f.maxDecompressed)
	if err != nil {
		return dst, err
	}
	horizon, hasHorizon := h.DeleteHorizon()
	retainDeletes := !hasHorizon || f.nowMs < horizon
	if f.all, f.hashes, err = decodeHashed(it, f.all[:0], f.hashes[:0]); err != nil {
		return dst, err
	}
	f.recs = f.recs[:0]
	removed, tombstoneKept := 0, false
	for i, rec := range f.all {
		keep := true
		if rec.Offset < f.end {
			switch {
			case rec.Key == nil:
				keep = false
				f.stats.KeylessDropped++
			case rec.Offset < f.m.getHash(&f.hashes[i]):
				keep = false
			case rec.Value == nil && !retainDeletes:
				keep = false
				f.stats.TombstonesRemoved++
			}
		}
		if !keep {
			removed++
			continue
		}
		tombstoneKept = tombstoneKept || rec.Value == nil
		f.recs = append(f.recs, rec)
	}
	f.stats.RecordsKept += int64(len(f.recs))
	setHorizon := tombstoneKept && !hasHorizon
	switch {
	case len(f.recs) == 0:
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
		horizon, hasHorizon = f.nowMs+f.deleteRetentionMs, true
		if f.deleteRetentionMs > math.MaxInt64-f.nowMs {
			horizon = math.MaxInt64
		}
	}
	f.rewrote = true
	return f.appendRewritten(dst, h, hasHorizon, horizon)
}

// appendRewritten appends a batch holding f.recs in place of the batch h:
// same offsets range, producer fields, partition leader epoch, timestamp
// type and codec; with the delete horizon when hasHorizon.
func (f *batchFilter) appendRewritten(dst []byte, h Header, hasHorizon bool, horizon int64) ([]byte, error) {
	attrs := uint16(h.Attributes) &^ attrDeleteHorizon
	baseTS := f.recs[0].Timestamp
	if h.LogAppendTime() {
		baseTS = h.BaseTimestamp // every record reads as maxTimestamp anyway
	}
	if hasHorizon {
		attrs |= attrDeleteHorizon
		baseTS = horizon
	}
	maxTS := int64(-1)
	recs := f.scratch[:0]
	for _, r := range f.recs {
		maxTS = max(maxTS, r.Timestamp)
		recs = appendRecord(recs, r, r.Timestamp-baseTS, r.Offset-h.BaseOffset)
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
	dst = appendBatchHeader(dst, h, attrs, baseTS, maxTS, int32(len(f.recs)), len(body))
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
