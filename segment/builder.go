package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// BatchSpec describes a batch for BuildBatch. The zero value plus Records is
// a plain uncompressed batch from a non-idempotent producer at offset 0.
type BatchSpec struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	Codec                Codec

	// Idempotent writes ProducerID, ProducerEpoch and BaseSequence. When
	// false the batch carries Kafka's "no producer": -1 in all three.
	Idempotent    bool
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32

	Transactional bool
	Control       bool

	// LogAppendTime, when > 0, marks the batch as carrying broker time and
	// makes it the max timestamp, as SetLogAppendTime does.
	LogAppendTime int64

	// KeepOffsets makes each record keep its Offset (strictly increasing,
	// not below BaseOffset), leaving gaps as compaction does. Otherwise
	// record i gets BaseOffset+i and Record.Offset is ignored.
	KeepOffsets bool
	// LastOffsetDelta, with KeepOffsets, raises the batch's last offset
	// delta above the last record's, as for a compacted batch whose last
	// records were removed (or an empty one).
	LastOffsetDelta int32

	Records []Record
}

// BuildBatch encodes spec as a record batch v2: record deltas, base and max
// timestamps (the first record's and the largest; -1 without records),
// last offset delta, compression and CRC. It is for tools and tests; the
// broker stores the batches producers send. It fails when the offsets do
// not fit the rules above or the batch would exceed the 2 GiB format limit.
func BuildBatch(spec BatchSpec) ([]byte, error) {
	baseTS, maxTS := int64(-1), int64(-1)
	if len(spec.Records) > 0 {
		baseTS, maxTS = spec.Records[0].Timestamp, spec.Records[0].Timestamp
	}
	lastDelta := int64(len(spec.Records)) - 1
	if spec.KeepOffsets {
		lastDelta = int64(spec.LastOffsetDelta)
	}
	if lastDelta < 0 {
		lastDelta = 0
	}
	var records []byte
	prev := int64(-1)
	for i, r := range spec.Records {
		delta := int64(i)
		if spec.KeepOffsets {
			delta = r.Offset - spec.BaseOffset
			if r.Offset < spec.BaseOffset || delta <= prev || delta > math.MaxInt32 {
				return nil, fmt.Errorf("segment: BuildBatch: record %d has offset %d after %d, base offset %d", i, r.Offset, spec.BaseOffset+prev, spec.BaseOffset)
			}
			lastDelta = max(lastDelta, delta)
		}
		prev = delta
		maxTS = max(maxTS, r.Timestamp)
		records = appendRecord(records, r, r.Timestamp-baseTS, delta)
	}
	if lastDelta > math.MaxInt32 {
		return nil, errors.New("segment: BuildBatch: more records than a batch can hold")
	}
	body, err := Compress(spec.Codec, records)
	if err != nil {
		return nil, err
	}
	if len(body) > math.MaxInt32-HeaderSize {
		return nil, fmt.Errorf("segment: BuildBatch: %d bytes of records exceed the batch size limit", len(body))
	}

	attrs := uint16(spec.Codec) & attrCompressionMask
	if spec.Transactional {
		attrs |= attrTransactional
	}
	if spec.Control {
		attrs |= attrControl
	}
	pid, epoch, seq := int64(-1), int16(-1), int32(-1)
	if spec.Idempotent {
		pid, epoch, seq = spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence
	}
	b := make([]byte, HeaderSize, HeaderSize+len(body))
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(spec.BaseOffset))
	binary.BigEndian.PutUint32(b[offBatchLength:], uint32(HeaderSize-LogOverhead+len(body)))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(spec.PartitionLeaderEpoch))
	b[offMagic] = Magic
	binary.BigEndian.PutUint16(b[offAttributes:], attrs)
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(lastDelta))
	binary.BigEndian.PutUint64(b[offBaseTimestamp:], uint64(baseTS))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(maxTS))
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(pid))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(epoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], uint32(seq))
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(len(spec.Records)))
	b = append(b, body...)
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	if spec.LogAppendTime > 0 {
		SetLogAppendTime(b, spec.LogAppendTime)
	}
	return b, nil
}

// appendRecord appends one record in the v2 record format.
func appendRecord(dst []byte, r Record, tsDelta, offDelta int64) []byte {
	size := 1 + varintLen(tsDelta) + varintLen(offDelta) + nullableLen(r.Key) + nullableLen(r.Value) + varintLen(int64(len(r.Headers)))
	for _, h := range r.Headers {
		size += varintLen(int64(len(h.Key))) + len(h.Key) + nullableLen(h.Value)
	}
	dst = binary.AppendVarint(dst, int64(size))
	dst = append(dst, 0) // attributes
	dst = binary.AppendVarint(dst, tsDelta)
	dst = binary.AppendVarint(dst, offDelta)
	dst = appendNullableBytes(dst, r.Key)
	dst = appendNullableBytes(dst, r.Value)
	dst = binary.AppendVarint(dst, int64(len(r.Headers)))
	for _, h := range r.Headers {
		dst = binary.AppendVarint(dst, int64(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendNullableBytes(dst, h.Value)
	}
	return dst
}

// varintLen is the length of v as a zigzag varint.
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// nullableLen is the encoded length of a nullable bytes field.
func nullableLen(v []byte) int {
	if v == nil {
		return varintLen(-1)
	}
	return varintLen(int64(len(v))) + len(v)
}

func appendNullableBytes(dst, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(v)))
	return append(dst, v...)
}
