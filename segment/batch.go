package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Record batch v2 wire constants. They are Kafka's on-disk and on-wire
// format: never change them.
const (
	offBaseOffset      = 0
	offBatchLength     = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57

	// HeaderSize is the size of a v2 batch header, up to and including the
	// record count.
	HeaderSize = 61
	// LogOverhead is the part of a batch not counted by its length field
	// (base offset and the length itself).
	LogOverhead = 12
	// Magic is the only record format version Strata stores.
	Magic = 2

	attrCompressionMask = 0x07
	attrTimestampType   = 0x08
	attrTransactional   = 0x10
	attrControl         = 0x20
	attrDeleteHorizon   = 0x40
)

// Codec is a batch compression codec, as numbered in the attributes.
type Codec int8

// The compression codecs Kafka defines.
const (
	CodecNone   Codec = 0
	CodecGzip   Codec = 1
	CodecSnappy Codec = 2
	CodecLZ4    Codec = 3
	CodecZstd   Codec = 4
)

// String returns Kafka's name for the codec.
func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecGzip:
		return "gzip"
	case CodecSnappy:
		return "snappy"
	case CodecLZ4:
		return "lz4"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("unknown(%d)", int8(c))
}

// Errors returned when a batch is malformed. Every one of them wraps
// ErrCorrupt, so IsCorrupt tells corruption apart from I/O failure.
var (
	ErrCorrupt       = errors.New("segment: corrupt record batch")
	ErrBadMagic      = fmt.Errorf("%w: unsupported magic", ErrCorrupt)
	ErrCRCMismatch   = fmt.Errorf("%w: crc mismatch", ErrCorrupt)
	ErrTruncated     = fmt.Errorf("%w: truncated", ErrCorrupt)
	ErrBadLength     = fmt.Errorf("%w: invalid batch length", ErrCorrupt)
	ErrCountMismatch = fmt.Errorf("%w: record count inconsistent with last offset delta", ErrCorrupt)
	ErrUnknownCodec  = fmt.Errorf("%w: unknown compression codec", ErrCorrupt)
)

// IsCorrupt reports whether err says that stored or received bytes are not a
// valid record batch (as opposed to an I/O failure).
func IsCorrupt(err error) bool { return errors.Is(err, ErrCorrupt) }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is the decoded fixed part of a v2 record batch.
type Header struct {
	BaseOffset           int64
	BatchLength          int32
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	RecordCount          int32
}

// Size is the number of bytes the whole batch occupies.
func (h *Header) Size() int { return int(h.BatchLength) + LogOverhead }

// LastOffset is the offset of the batch's last record.
func (h *Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// NextOffset is the offset that follows the batch.
func (h *Header) NextOffset() int64 { return h.LastOffset() + 1 }

// Compression is the batch's codec.
func (h *Header) Compression() Codec { return Codec(h.Attributes & attrCompressionMask) }

// LogAppendTime reports whether the timestamps are broker-assigned.
func (h *Header) LogAppendTime() bool { return h.Attributes&attrTimestampType != 0 }

// Transactional reports the transactional bit.
func (h *Header) Transactional() bool { return h.Attributes&attrTransactional != 0 }

// Control reports whether the batch holds control records.
func (h *Header) Control() bool { return h.Attributes&attrControl != 0 }

// DeleteHorizon returns the batch's delete horizon (KIP-534): set by the
// cleaner when it first keeps a tombstone of the batch, the time in
// milliseconds after which a later cleaning drops the batch's tombstones.
// The base timestamp field holds it, and record timestamp deltas are then
// relative to it. ok is false when the attribute is not set.
func (h *Header) DeleteHorizon() (ms int64, ok bool) {
	if h.Attributes&attrDeleteHorizon == 0 {
		return 0, false
	}
	return h.BaseTimestamp, true
}

// HasProducerID reports whether the batch comes from an idempotent or
// transactional producer (a producer id other than -1).
func (h *Header) HasProducerID() bool { return h.ProducerID >= 0 }

// ParseHeader decodes the header at the start of b without checking the CRC
// or that the whole batch is present. It fails with ErrTruncated when b is
// shorter than a header, ErrBadMagic for a magic other than 2 and
// ErrBadLength when the length field cannot describe a batch.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < LogOverhead+5 {
		return h, fmt.Errorf("%w: %d bytes, header needs %d", ErrTruncated, len(b), HeaderSize)
	}
	h.BaseOffset = int64(binary.BigEndian.Uint64(b[offBaseOffset:]))
	h.BatchLength = int32(binary.BigEndian.Uint32(b[offBatchLength:]))
	h.PartitionLeaderEpoch = int32(binary.BigEndian.Uint32(b[offLeaderEpoch:]))
	h.Magic = int8(b[offMagic])
	if h.Magic != Magic {
		return h, fmt.Errorf("%w: magic %d at base offset %d", ErrBadMagic, h.Magic, h.BaseOffset)
	}
	if h.BatchLength < HeaderSize-LogOverhead {
		return h, fmt.Errorf("%w: length %d", ErrBadLength, h.BatchLength)
	}
	if len(b) < HeaderSize {
		return h, fmt.Errorf("%w: %d bytes, header needs %d", ErrTruncated, len(b), HeaderSize)
	}
	h.CRC = binary.BigEndian.Uint32(b[offCRC:])
	h.Attributes = int16(binary.BigEndian.Uint16(b[offAttributes:]))
	h.LastOffsetDelta = int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:]))
	h.BaseTimestamp = int64(binary.BigEndian.Uint64(b[offBaseTimestamp:]))
	h.MaxTimestamp = int64(binary.BigEndian.Uint64(b[offMaxTimestamp:]))
	h.ProducerID = int64(binary.BigEndian.Uint64(b[offProducerID:]))
	h.ProducerEpoch = int16(binary.BigEndian.Uint16(b[offProducerEpoch:]))
	h.BaseSequence = int32(binary.BigEndian.Uint32(b[offBaseSequence:]))
	h.RecordCount = int32(binary.BigEndian.Uint32(b[offRecordCount:]))
	return h, nil
}

// ValidateBatch checks that b begins with one complete, intact batch: magic,
// length, CRC-32C over attributes to end, a known codec, and a record count
// that fits the last offset delta (count <= delta+1; compaction may remove
// records but never adds them). It returns the header; the batch is
// b[:h.Size()].
func ValidateBatch(b []byte) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	size := h.Size()
	if len(b) < size {
		return h, fmt.Errorf("%w: batch at base offset %d needs %d bytes, have %d", ErrTruncated, h.BaseOffset, size, len(b))
	}
	if got := crc32.Checksum(b[offAttributes:size], castagnoli); got != h.CRC {
		return h, fmt.Errorf("%w: batch at base offset %d: stored %08x, computed %08x", ErrCRCMismatch, h.BaseOffset, h.CRC, got)
	}
	if c := h.Compression(); c > CodecZstd {
		return h, fmt.Errorf("%w: codec %d at base offset %d", ErrUnknownCodec, c, h.BaseOffset)
	}
	if h.LastOffsetDelta < 0 || h.RecordCount < 0 || int64(h.RecordCount) > int64(h.LastOffsetDelta)+1 {
		return h, fmt.Errorf("%w: count %d, last offset delta %d at base offset %d", ErrCountMismatch, h.RecordCount, h.LastOffsetDelta, h.BaseOffset)
	}
	return h, nil
}

// ValidateProduced applies ValidateBatch and the stricter rules for a batch
// fresh from a producer: at least one record, and exactly lastOffsetDelta+1 of
// them.
func ValidateProduced(b []byte) (Header, error) {
	h, err := ValidateBatch(b)
	if err != nil {
		return h, err
	}
	if h.RecordCount == 0 || int64(h.RecordCount) != int64(h.LastOffsetDelta)+1 {
		return h, fmt.Errorf("%w: count %d, last offset delta %d", ErrCountMismatch, h.RecordCount, h.LastOffsetDelta)
	}
	return h, nil
}

// SetBaseOffset rewrites the base offset in place. The CRC does not cover it.
func SetBaseOffset(b []byte, offset int64) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(offset))
}

// SetPartitionLeaderEpoch rewrites the partition leader epoch in place. The
// CRC does not cover it.
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(epoch))
}

// SetLogAppendTime marks the batch as carrying broker time: it sets the
// timestamp-type attribute, writes ts as the max timestamp (which consumers
// then use for every record) and recomputes the CRC. b must be a whole,
// validated batch.
func SetLogAppendTime(b []byte, ts int64) {
	attrs := binary.BigEndian.Uint16(b[offAttributes:]) | attrTimestampType
	binary.BigEndian.PutUint16(b[offAttributes:], attrs)
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(ts))
	size := int(binary.BigEndian.Uint32(b[offBatchLength:])) + LogOverhead
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:size], castagnoli))
}

// SplitBatches walks a buffer of concatenated batches, validating each, and
// calls fn with each batch's header and bytes. It stops at the first error
// from validation or from fn. A trailing partial batch is reported as
// ErrTruncated.
func SplitBatches(buf []byte, fn func(h Header, batch []byte) error) error {
	for len(buf) > 0 {
		h, err := ValidateBatch(buf)
		if err != nil {
			return err
		}
		n := h.Size()
		if err := fn(h, buf[:n]); err != nil {
			return err
		}
		buf = buf[n:]
	}
	return nil
}
