package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
)

// ConvertLegacy builds the record batch v2 that a produced message set
// becomes, as Kafka's LogValidator does on append: one batch, base offset
// 0 (the log assigns offsets), its records in order with their keys and
// values, no producer id, compressed with codec (the broker's choice: the
// source's codec unless the topic says otherwise). Magic 0 records get
// timestamp -1 (no timestamp); magic 1 records keep theirs (a message's or
// its wrapper's LogAppendTime included: the topic's timestamp type then
// decides, on append). Inner offsets are not kept, as in Kafka. It fails
// for an empty set.
func ConvertLegacy(set LegacySet, codec Codec) ([]byte, error) {
	if len(set.Records) == 0 {
		return nil, fmt.Errorf("%w: empty message set", ErrLegacyInvalid)
	}
	if len(set.Records) > math.MaxInt32 {
		return nil, fmt.Errorf("%w: %d messages do not fit a batch", ErrLegacyInvalid, len(set.Records))
	}
	recs := make([]Record, len(set.Records))
	for i, r := range set.Records {
		recs[i] = Record{Timestamp: r.Timestamp, Key: r.Key, Value: r.Value}
		if r.Magic == 0 {
			recs[i].Timestamp = -1
		}
	}
	return BuildBatch(BatchSpec{Codec: codec, Records: recs})
}

// DownConvertOptions says what DownConvert writes and how much.
type DownConvertOptions struct {
	// Magic is the message format to write: 0 or 1.
	Magic int8
	// FetchOffset is where the reader asked to start: uncompressed
	// records below it are dropped (a compressed batch stays whole, as in
	// Kafka: its wrapper cannot be split).
	FetchOffset int64
	// Limit is the most bytes the set may take.
	Limit int
	// MinOne keeps the first converted message (or wrapper) whole even
	// when it is larger than Limit (Fetch v3+, KIP-74). Without it such a
	// message is cut at Limit, the partial message that readers of Fetch
	// v0-v2 expect when a message exceeds their fetch size.
	MinOne bool
	// MaxDecompressed bounds one batch's decompressed records.
	MaxDecompressed int
}

// DownConverted is what DownConvert wrote.
type DownConverted struct {
	Set []byte
	// NextOffset is the offset after the last whole message written, or
	// after the last batch skipped (control batches, batches emptied by
	// compaction or below FetchOffset): where the next read starts.
	// FetchOffset when nothing was consumed.
	NextOffset int64
	// Records is the number of records written whole.
	Records int
	// Partial says Set ends in a message cut at Limit.
	Partial bool
}

// DownConvert converts the record batches v2 in batches (whole batches, as
// a log read returns them; a trailing partial batch is ignored) into a
// message set of magic 0 or 1, as Kafka's RecordsUtil.downConvert: control
// batches are dropped, headers are dropped, an uncompressed batch becomes
// one message per record, a compressed batch one wrapper message of the
// same codec (lz4 in magic 0 with Kafka's old descriptor checksum), magic
// 1 keeps the timestamps and their type. It stops before the batch (or, in
// an uncompressed batch, the record) that would take the set past
// opt.Limit; see MinOne. A zstd batch cannot be converted: ErrLegacyZstd
// when it comes first, else the set stops before it. Other errors wrap
// ErrCorrupt.
func DownConvert(batches []byte, opt DownConvertOptions) (DownConverted, error) {
	out := DownConverted{NextOffset: opt.FetchOffset}
	if opt.Magic != 0 && opt.Magic != 1 {
		return out, fmt.Errorf("segment: DownConvert: magic %d, want 0 or 1", opt.Magic)
	}
	// Magic 0 and 1 take at most LegacyOverheadV1+12 bytes per record
	// where v2 takes at least 7: most sets are a little larger than their
	// batches.
	out.Set = make([]byte, 0, min(max(opt.Limit, 0), len(batches)+len(batches)/16)+4096)
	var tmp []byte
	var ends []legacyEnd
	for len(batches) > 0 {
		h, err := ValidateBatch(batches)
		if errors.Is(err, ErrTruncated) {
			break
		}
		if err != nil {
			return out, err
		}
		batch := batches[:h.Size()]
		batches = batches[h.Size():]
		if h.Control() {
			out.NextOffset = max(out.NextOffset, h.NextOffset())
			continue
		}
		if h.Compression() == CodecZstd {
			if len(out.Set) == 0 && !out.Partial {
				return out, fmt.Errorf("%w (batch at base offset %d)", ErrLegacyZstd, h.BaseOffset)
			}
			break
		}
		if h.Compression() != CodecNone && len(out.Set) > 0 && len(out.Set)+h.Size() > opt.Limit {
			// Its wrapper would not fit either (a message set is no
			// smaller than its batch): spare the recompression.
			break
		}
		tmp = slices.Grow(tmp[:0], min(h.Size()+h.Size()/8, max(opt.Limit-len(out.Set), 0))+4096)
		tmp, ends, err = convertBatch(tmp, ends[:0], batch, opt, opt.Limit-len(out.Set))
		if err != nil {
			return out, err
		}
		if len(ends) == 0 {
			out.NextOffset = max(out.NextOffset, h.NextOffset())
			continue
		}
		if len(out.Set)+len(tmp) <= opt.Limit {
			out.Set = append(out.Set, tmp...)
			out.Records += ends[len(ends)-1].records
			out.NextOffset = max(out.NextOffset, h.NextOffset())
			continue
		}
		// Over the limit: whole messages that fit, then the first rules.
		taken := 0
		for taken < len(ends) && len(out.Set)+ends[taken].end <= opt.Limit {
			taken++
		}
		switch {
		case taken > 0:
		case len(out.Set) > 0:
		case opt.MinOne:
			taken = 1
		default:
			out.Set = append(out.Set, tmp[:max(opt.Limit, 0)]...)
			out.Partial = len(out.Set) > 0
			return out, nil
		}
		if taken > 0 {
			e := ends[taken-1]
			out.Set = append(out.Set, tmp[:e.end]...)
			out.Records += e.records
			out.NextOffset = max(out.NextOffset, e.next)
		}
		break
	}
	return out, nil
}

// legacyEnd marks where a converted message ends in the converted batch:
// its end position, the records written up to it, the offset after it.
type legacyEnd struct {
	end     int
	records int
	next    int64
}

// convertBatch appends the conversion of one validated, non-control batch
// to dst, and the end of each message to ends. An uncompressed batch stops
// after the first message that ends past room: the caller cannot take
// more.
func convertBatch(dst []byte, ends []legacyEnd, batch []byte, opt DownConvertOptions, room int) ([]byte, []legacyEnd, error) {
	it, err := NewRecordIter(batch, opt.MaxDecompressed)
	if err != nil {
		return nil, nil, err
	}
	h := it.Header()
	tsAttr := int8(0)
	if opt.Magic == 1 && h.LogAppendTime() {
		tsAttr = legacyAttrLogAppend
	}
	compressed := h.Compression() != CodecNone
	var inner []byte
	var first, last int64
	n := 0
	maxTS := int64(-1)
	for {
		rec, ok, err := it.Next()
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			break
		}
		if !compressed {
			if rec.Offset < opt.FetchOffset {
				continue
			}
			dst = appendLegacyMessage(dst, rec.Offset, opt.Magic, tsAttr, rec.Timestamp, rec.Key, rec.Value)
			n++
			ends = append(ends, legacyEnd{end: len(dst), records: n, next: rec.Offset + 1})
			if len(dst) > room {
				return dst, ends, nil
			}
			continue
		}
		if n == 0 {
			first = rec.Offset
		}
		last = rec.Offset
		maxTS = max(maxTS, rec.Timestamp)
		off := rec.Offset
		if opt.Magic == 1 {
			off -= first // relative inner offsets
		}
		inner = appendLegacyMessage(inner, off, opt.Magic, tsAttr, rec.Timestamp, rec.Key, rec.Value)
		n++
	}
	if !compressed || n == 0 {
		return dst, ends, nil
	}
	value, err := Compress(h.Compression(), inner)
	if err != nil {
		return nil, nil, err
	}
	if opt.Magic == 0 && h.Compression() == CodecLZ4 {
		value = lz4WithChecksum(value, true /* broken, as magic 0 readers expect */)
	}
	if h.LogAppendTime() {
		maxTS = h.MaxTimestamp
	}
	dst = appendLegacyMessage(dst, last, opt.Magic, tsAttr|int8(h.Compression()), maxTS, nil, value)
	ends = append(ends, legacyEnd{end: len(dst), records: n, next: h.NextOffset()})
	return dst, ends, nil
}

// appendLegacyMessage appends one message-set entry. timestamp is written
// only for magic 1.
func appendLegacyMessage(dst []byte, offset int64, magic, attrs int8, timestamp int64, key, value []byte) []byte {
	size := LegacyOverheadV0 + len(key) + len(value)
	if magic == 1 {
		size += 8
	}
	dst = binary.BigEndian.AppendUint64(dst, uint64(offset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(size))
	crcAt := len(dst)
	dst = append(dst, 0, 0, 0, 0, byte(magic), byte(attrs))
	if magic == 1 {
		dst = binary.BigEndian.AppendUint64(dst, uint64(timestamp))
	}
	dst = appendLegacyBytes(dst, key)
	dst = appendLegacyBytes(dst, value)
	binary.BigEndian.PutUint32(dst[crcAt:], crc32.ChecksumIEEE(dst[crcAt+legacyCRCSize:]))
	return dst
}

func appendLegacyBytes(dst, v []byte) []byte {
	if v == nil {
		return binary.BigEndian.AppendUint32(dst, math.MaxUint32) // -1: null
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(v)))
	return append(dst, v...)
}
