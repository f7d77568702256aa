package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Recompress returns the record batch b (one whole, validated v2 batch)
// with its records section compressed with codec at the level lv gives it
// (CompressLevels; CodecNone: stored
// uncompressed), as Kafka's LogValidator does on append when a topic's
// compression.type differs from the batch's codec: the records are the
// same bytes once decompressed; base offset, leader epoch, last offset
// delta, timestamps, producer id, epoch and base sequence, record count
// and the timestamp-type, transactional and control flags are kept; the
// codec bits, the length and the CRC are new. A batch already in codec is
// returned as it is.
//
// Decompression is bounded by maxDecompressed: a batch whose records
// decompress to more fails with ErrTooLarge, one that does not decompress
// with ErrDecompress (both ErrCorrupt). b is not modified.
func Recompress(b []byte, codec Codec, lv Levels, maxDecompressed int) ([]byte, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return nil, err
	}
	if len(b) != h.Size() {
		return nil, fmt.Errorf("%w: batch is %d bytes, its header says %d", ErrBadLength, len(b), h.Size())
	}
	if h.Compression() == codec {
		return b, nil
	}
	if codec < CodecNone || codec > CodecZstd {
		return nil, fmt.Errorf("%w: codec %d", ErrUnknownCodec, codec)
	}
	records, err := DecompressLimit(h.Compression(), b[HeaderSize:], maxDecompressed)
	if err != nil {
		return nil, err
	}
	body, err := CompressLevels(codec, records, lv)
	if err != nil {
		return nil, err
	}
	attrs := uint16(h.Attributes)&^attrCompressionMask | uint16(codec)
	out := make([]byte, 0, HeaderSize+len(body))
	out = appendBatchHeader(out, h, attrs, h.BaseTimestamp, h.MaxTimestamp, h.RecordCount, len(body))
	out = append(out, body...)
	binary.BigEndian.PutUint32(out[offCRC:], crc32.Checksum(out[offAttributes:], castagnoli))
	return out, nil
}
