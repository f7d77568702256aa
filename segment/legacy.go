package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// The message formats before record batch v2 ("magic 0" and "magic 1",
// Kafka 0.8 to 0.10), which old producers send in Produce v0-v2 and old
// consumers read in Fetch v0-v3. Strata never stores them: ParseLegacy
// and ConvertLegacy turn a produced message set into one v2 batch, and
// DownConvert turns stored v2 batches back into a message set. The layout
// (big endian; Kafka's LegacyRecord), each entry of a message set:
//
//	offset      int64   absolute; in a magic 1 wrapper's inner set, relative
//	size        int32   bytes of the message that follows
//	crc         uint32  CRC-32 (IEEE) of magic..end
//	magic       int8    0 or 1
//	attributes  int8    bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4),
//	                    bit 3 timestamp type (magic 1: 1 = LogAppendTime)
//	timestamp   int64   magic 1 only; -1 is "no timestamp"
//	key         bytes   int32 length, -1 for null
//	value       bytes   int32 length, -1 for null
//
// A compressed message is a wrapper: its value is a compressed message set
// of uncompressed messages of the same magic (one level only). The wrapper's
// offset is its last inner message's offset. In magic 0 the inner offsets
// are absolute; in magic 1 they are relative (0, 1, ...) and the absolute
// offset of inner message i is wrapperOffset - lastInner + inner_i. A magic
// 1 wrapper with LogAppendTime gives its timestamp to every inner message.
// Wire format: never change these.
const (
	legacyLogOverhead = 12 // offset, size
	legacyCRCSize     = 4
	// LegacyOverheadV0 and LegacyOverheadV1 are the sizes of an empty
	// message (null key and value) of magic 0 and 1, without the offset
	// and size fields.
	LegacyOverheadV0 = 14
	LegacyOverheadV1 = 22

	legacyAttrCodecMask = 0x07
	legacyAttrLogAppend = 0x08
)

// Errors of the legacy message formats. ErrLegacyInvalid wraps ErrCorrupt:
// it is a well-formed message that breaks a rule (a compressed message
// inside a compressed one, an inner magic other than its wrapper's, a
// wrapper without messages, an invalid timestamp); Kafka answers those
// INVALID_RECORD where a damaged message is CORRUPT_MESSAGE.
// ErrLegacyZstd is not corruption: zstd exists only in record batch v2, so
// a zstd message of magic 0 or 1 cannot be read, and a zstd batch cannot be
// written for an old reader (Kafka's UNSUPPORTED_COMPRESSION_TYPE).
var (
	ErrLegacyInvalid = fmt.Errorf("%w: invalid legacy message", ErrCorrupt)
	ErrLegacyZstd    = errors.New("segment: zstd compression needs record batch v2 (magic 2)")
)

// LegacyRecord is one (inner) message of a magic 0 or 1 message set. Key
// and Value alias the set or its decompressed wrapper.
type LegacyRecord struct {
	// Offset is absolute: as stated for magic 0 and for uncompressed
	// magic 1, computed from the wrapper for inner magic 1 messages.
	Offset int64
	Magic  int8
	// Timestamp is -1 for magic 0; for magic 1 the message's, or its
	// wrapper's when the wrapper carries LogAppendTime.
	Timestamp     int64
	LogAppendTime bool
	Key, Value    []byte
}

// LegacySet is a parsed message set.
type LegacySet struct {
	Records []LegacyRecord
	// Codec is the codec of the first compressed (wrapper) message,
	// CodecNone when no message is compressed.
	Codec Codec
	// Messages is the number of top-level messages (wrappers count once).
	Messages int
	// MaxMessageSize is the largest top-level entry, offset and size
	// fields included: what Kafka holds against max.message.bytes.
	MaxMessageSize int
}

// legacyMessage is one message as it is on the wire.
type legacyMessage struct {
	offset     int64
	magic      int8
	attrs      int8
	timestamp  int64
	key, value []byte
	size       int // offset and size fields included
}

func (m *legacyMessage) codec() Codec { return Codec(m.attrs & legacyAttrCodecMask) }

// IsLegacy reports whether b begins with a message of magic 0 or 1 rather
// than a record batch (the magic byte is at the same place in both).
func IsLegacy(b []byte) bool {
	return len(b) > offMagic && (b[offMagic] == 0 || b[offMagic] == 1)
}

// parseLegacyMessage decodes and checks the message at the start of b:
// complete, CRC, magic 0 or 1, a known codec, lengths that add up
// exactly. Errors wrap ErrCorrupt (ErrTruncated for a short b).
func parseLegacyMessage(b []byte) (legacyMessage, error) {
	var m legacyMessage
	if len(b) < legacyLogOverhead {
		return m, fmt.Errorf("%w: %d bytes, a message needs %d", ErrTruncated, len(b), legacyLogOverhead+LegacyOverheadV0)
	}
	m.offset = int64(binary.BigEndian.Uint64(b))
	size := int64(int32(binary.BigEndian.Uint32(b[8:])))
	if size < LegacyOverheadV0 {
		return m, fmt.Errorf("%w: message at offset %d has size %d, at least %d", ErrBadLength, m.offset, size, LegacyOverheadV0)
	}
	if size > int64(len(b)-legacyLogOverhead) {
		return m, fmt.Errorf("%w: message at offset %d needs %d bytes, have %d", ErrTruncated, m.offset, size, len(b)-legacyLogOverhead)
	}
	msg := b[legacyLogOverhead : legacyLogOverhead+size]
	m.size = legacyLogOverhead + int(size)
	stored := binary.BigEndian.Uint32(msg)
	if got := crc32.ChecksumIEEE(msg[legacyCRCSize:]); got != stored {
		return m, fmt.Errorf("%w: message at offset %d: stored %08x, computed %08x", ErrCRCMismatch, m.offset, stored, got)
	}
	m.magic = int8(msg[4])
	m.attrs = int8(msg[5])
	rest := msg[6:]
	switch m.magic {
	case 0:
		m.timestamp = -1
	case 1:
		if size < LegacyOverheadV1 {
			return m, fmt.Errorf("%w: magic 1 message at offset %d has size %d, at least %d", ErrBadLength, m.offset, size, LegacyOverheadV1)
		}
		m.timestamp = int64(binary.BigEndian.Uint64(rest))
		rest = rest[8:]
		if m.timestamp < -1 {
			return m, fmt.Errorf("%w: message at offset %d has timestamp %d", ErrLegacyInvalid, m.offset, m.timestamp)
		}
	default:
		return m, fmt.Errorf("%w: magic %d in a message set (message at offset %d)", ErrBadMagic, m.magic, m.offset)
	}
	switch c := m.codec(); {
	case c == CodecZstd:
		return m, fmt.Errorf("%w (message at offset %d)", ErrLegacyZstd, m.offset)
	case c > CodecZstd:
		return m, fmt.Errorf("%w: codec %d in message at offset %d", ErrUnknownCodec, c, m.offset)
	}
	var err error
	if m.key, rest, err = legacyBytes(rest); err != nil {
		return m, fmt.Errorf("%w: key of message at offset %d: %v", ErrBadLength, m.offset, err)
	}
	if m.value, rest, err = legacyBytes(rest); err != nil {
		return m, fmt.Errorf("%w: value of message at offset %d: %v", ErrBadLength, m.offset, err)
	}
	if len(rest) != 0 {
		return m, fmt.Errorf("%w: message at offset %d has %d bytes after its value", ErrBadLength, m.offset, len(rest))
	}
	return m, nil
}

// legacyBytes reads an int32-length-prefixed field; -1 is null (nil).
func legacyBytes(b []byte) (v, rest []byte, err error) {
	if len(b) < 4 {
		return nil, nil, errors.New("length field truncated")
	}
	n := int64(int32(binary.BigEndian.Uint32(b)))
	b = b[4:]
	switch {
	case n == -1:
		return nil, b, nil
	case n < -1 || n > int64(len(b)):
		return nil, nil, fmt.Errorf("length %d, %d bytes remain", n, len(b))
	}
	return b[:n:n], b[n:], nil
}

// ParseLegacy validates a message set of magic 0 and 1 messages and
// returns its records in order, decompressing wrappers into at most
// maxDecompressed bytes each. Every message must be whole: a trailing
// partial message is ErrTruncated (a producer never sends one). Errors
// wrap ErrCorrupt (ErrLegacyInvalid for the rule breaks it lists), or are
// ErrLegacyZstd.
func ParseLegacy(set []byte, maxDecompressed int) (LegacySet, error) {
	var out LegacySet
	for len(set) > 0 {
		m, err := parseLegacyMessage(set)
		if err != nil {
			return LegacySet{}, err
		}
		set = set[m.size:]
		out.Messages++
		out.MaxMessageSize = max(out.MaxMessageSize, m.size)
		if m.codec() == CodecNone {
			out.Records = append(out.Records, LegacyRecord{
				Offset: m.offset, Magic: m.magic, Timestamp: m.timestamp,
				LogAppendTime: m.magic == 1 && m.attrs&legacyAttrLogAppend != 0,
				Key:           m.key, Value: m.value,
			})
			continue
		}
		if out.Codec == CodecNone {
			out.Codec = m.codec()
		}
		if out.Records, err = appendInner(out.Records, &m, maxDecompressed); err != nil {
			return LegacySet{}, err
		}
	}
	return out, nil
}

// appendInner decompresses wrapper w and appends its inner messages.
func appendInner(dst []LegacyRecord, w *legacyMessage, maxDecompressed int) ([]LegacyRecord, error) {
	if w.value == nil {
		return nil, fmt.Errorf("%w: compressed message at offset %d has a null value", ErrLegacyInvalid, w.offset)
	}
	data, err := decompressLegacy(w.codec(), w.magic, w.value, maxDecompressed)
	if err != nil {
		return nil, fmt.Errorf("%w (wrapper at offset %d)", err, w.offset)
	}
	first := len(dst)
	for len(data) > 0 {
		m, err := parseLegacyMessage(data)
		if err != nil {
			return nil, fmt.Errorf("%w (inside the wrapper at offset %d)", err, w.offset)
		}
		data = data[m.size:]
		switch {
		case m.codec() != CodecNone:
			return nil, fmt.Errorf("%w: compressed message inside the compressed message at offset %d", ErrLegacyInvalid, w.offset)
		case m.magic != w.magic:
			return nil, fmt.Errorf("%w: magic %d message inside a magic %d wrapper at offset %d", ErrLegacyInvalid, m.magic, w.magic, w.offset)
		}
		r := LegacyRecord{Offset: m.offset, Magic: m.magic, Timestamp: m.timestamp, Key: m.key, Value: m.value}
		if w.magic == 1 {
			r.LogAppendTime = w.attrs&legacyAttrLogAppend != 0
			if r.LogAppendTime {
				r.Timestamp = w.timestamp
			}
		}
		dst = append(dst, r)
	}
	if len(dst) == first {
		return nil, fmt.Errorf("%w: compressed message at offset %d holds no messages", ErrLegacyInvalid, w.offset)
	}
	if w.magic == 1 {
		// Relative inner offsets: the wrapper's offset is the last one's.
		base := w.offset - dst[len(dst)-1].Offset
		for i := first; i < len(dst); i++ {
			dst[i].Offset += base
		}
	}
	return dst, nil
}

// decompressLegacy is DecompressLimit for a wrapper's value. Magic 0 lz4
// was written by Kafka before 0.10 with a frame descriptor checksum over
// the wrong bytes (KAFKA-3160); Kafka ignores that checksum when it reads
// magic 0, and so does this, by putting the right one in a copy.
func decompressLegacy(codec Codec, magic int8, data []byte, limit int) ([]byte, error) {
	if codec == CodecLZ4 && magic == 0 {
		data = lz4WithChecksum(data, false /* broken */)
	}
	return DecompressLimit(codec, data, limit)
}
