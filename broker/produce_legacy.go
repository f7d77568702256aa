package broker

import (
	"errors"

	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Produce v0-v2 carry message sets of magic 0 and 1 (Kafka 0.8 to 0.10
// producers). As Kafka 3.x does, the broker validates such a set and
// converts it to one record batch v2 before the rules of 00_produce.go and
// the append (package segment's ParseLegacy and ConvertLegacy):
// * every message whole, CRC-32 (IEEE) intact, lengths exact, codec none,
//   gzip, snappy (raw or Xerial) or lz4 (magic 0's old lz4 descriptor
//   checksum accepted): else CORRUPT_MESSAGE;
// * a compressed message inside a compressed one, an inner magic other
//   than its wrapper's, an empty or null wrapper, a timestamp below -1:
//   INVALID_RECORD; zstd: UNSUPPORTED_COMPRESSION_TYPE; an empty set:
//   INVALID_RECORD;
// * a message (a wrapper with its offset and size fields) larger than
//   max.message.bytes: MESSAGE_TOO_LARGE (the converted batch is held
//   against it too);
// * the batch keeps the keys, values and order; magic 1 timestamps are
//   kept, magic 0 messages get -1 (no timestamp); it is compressed with the
//   topic's compression.type, or with the set's codec (that of its first
//   wrapper) when that is "producer"; it has no producer id, so no
//   idempotence; the topic's message.timestamp.type applies on append.
// A set of record batches v2 (magic 2, which Kafka also takes in v2) goes
// through unchanged. Headers do not exist before magic 2.

// convertLegacyProduce returns the records of a Produce v0-v2 partition
// as the record batch v2 to append.
func (s *Server) convertLegacyProduce(records []byte, cfg topicConfig) ([]byte, error) {
	maxMessageBytes := cfg.maxMessageBytes
	if len(records) == 0 {
		return nil, newKafkaError(kerr.InvalidRecord, "produce request partitions must hold at least one message")
	}
	if !segment.IsLegacy(records) {
		return records, nil
	}
	set, err := segment.ParseLegacy(records, segment.DefaultMaxDecompressed)
	switch {
	case errors.Is(err, segment.ErrLegacyZstd):
		return nil, newKafkaError(kerr.UnsupportedCompressionType, "%v", err)
	case errors.Is(err, segment.ErrLegacyInvalid):
		return nil, newKafkaError(kerr.InvalidRecord, "%v", err)
	case err != nil:
		return nil, newKafkaError(kerr.CorruptMessage, "%v", err)
	}
	if int64(set.MaxMessageSize) > int64(maxMessageBytes) {
		return nil, newKafkaError(kerr.MessageTooLarge, "message of %d bytes is larger than max.message.bytes %d", set.MaxMessageSize, maxMessageBytes)
	}
	codec := set.Codec
	if cfg.recompress {
		codec = segment.CodecNone // compressed once below, at the topic's level
	}
	batch, err := segment.ConvertLegacy(set, codec)
	if err != nil {
		return nil, newKafkaError(kerr.InvalidRecord, "%v", err)
	}
	if cfg.recompress {
		if batch, err = segment.Recompress(batch, cfg.codec, cfg.levels, segment.DefaultMaxDecompressed); err != nil {
			return nil, newKafkaError(kerr.InvalidRecord, "%v", err)
		}
	}
	s.stats.produceConverted.Add(int64(len(set.Records)))
	return batch, nil
}
