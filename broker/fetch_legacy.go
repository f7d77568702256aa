package broker

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch v0-v3 serve consumers from before Kafka 0.11, which read message
// sets of magic 0 (v0-v1) or magic 1 (v2-v3), not record batches. As
// Kafka 3.x does, the broker down-converts what it reads (package
// segment's DownConvert), in memory: this path is not zero-copy.
// * Only when message.downconversion.enable (topic config; broker default
//   log.message.downconversion.enable, true) holds; else the partition is
//   UNSUPPORTED_VERSION, as Kafka answers.
// * Control batches are dropped; so are the records of an uncompressed
//   batch below the fetch offset (old librdkafka relies on it); a
//   compressed batch becomes one wrapper message of the same codec and
//   stays whole. Headers are dropped. A zstd batch cannot be written for
//   these readers: UNSUPPORTED_COMPRESSION_TYPE when it is the first to
//   send, else the response stops before it.
// * Size: the converted messages of a partition fit PartitionMaxBytes and
//   the response's MaxBytes (v3+); whole messages only, except the first
//   message of the response: v3 sends it whole even when it is larger
//   (KIP-74), v0-v2 cut it at the limit, the partial message those
//   consumers take as "message larger than my fetch size", as Kafka's
//   hard limit for v0-v2 does.
// * Everything else (leadership, offsets out of range, long polling, high
//   watermark, tiered reads) is as for v4+.

// maxLegacyReads bounds the log reads one partition's down-conversion
// makes: each read takes the budget left after the previous one.
const maxLegacyReads = 64

// legacyMagic is the message format Fetch version v reads.
func legacyMagic(v int16) int8 {
	if v <= 1 {
		return 0
	}
	return 1
}

// fetchPartitionLegacy is fetchPartition for Fetch v0-v3.
func (s *Server) fetchPartitionLegacy(remote *remotePass, t *topicState, p *partition, version int16, rp *kmsg.FetchRequestTopicPartition, budget *int64, minOne *bool, pr *fetchPartResult) {
	if !t.cfg.downConversion {
		pr.errorCode = kerr.UnsupportedVersion.Code
		return
	}
	if _, err := p.leaderCheck(s.cfg.BrokerID); err != nil {
		pr.errorCode = kerr.NotLeaderForPartition.Code
		return
	}
	hw := p.log.HighWatermark()
	pr.highWatermark, pr.lastStableOffset, pr.logStartOffset = hw, hw, p.logStart()
	limit := int(max(min(int64(rp.PartitionMaxBytes), *budget), 0))
	first := *minOne && version >= 3 // v0-v2: a hard limit
	off := rp.FetchOffset
	var out []byte
	var buf []byte
	for i := 0; i < maxLegacyReads; i++ {
		left := limit - len(out)
		if left <= 0 && !(first && len(out) == 0) || i > 0 && off >= hw {
			break
		}
		sl, err := s.readPartition(remote, p, off, left, hw, pr)
		if err != nil {
			if len(out) == 0 {
				pr.errorCode = readErrorCode(s, p, err)
			}
			break
		}
		if sl.Size == 0 {
			break
		}
		if buf, err = readSlice(buf[:0], sl); err != nil {
			if len(out) == 0 {
				pr.errorCode = readSliceErrorCode(s, p, err)
			}
			break
		}
		dc, err := segment.DownConvert(buf, segment.DownConvertOptions{
			Magic: legacyMagic(version), FetchOffset: off, Limit: left,
			MinOne: first && len(out) == 0, MaxDecompressed: segment.DefaultMaxDecompressed,
		})
		if err != nil {
			if len(out) == 0 {
				pr.errorCode = downConvertErrorCode(s, p, err)
			}
			break
		}
		if out == nil {
			out = dc.Set
		} else {
			out = append(out, dc.Set...)
		}
		s.stats.fetchDownConverted.Add(int64(dc.Records))
		if dc.Partial || dc.NextOffset < sl.NextOffset {
			break // the limit is reached inside what was read
		}
		off = dc.NextOffset
	}
	if len(out) > 0 {
		pr.add(recordRange{inline: out})
		*minOne = false
		*budget -= int64(len(out))
	}
}

// readSlice appends the bytes of a log read to dst.
func readSlice(dst []byte, sl segment.ReadSlice) ([]byte, error) {
	dst = slices.Grow(dst, int(sl.Size))[:len(dst)+int(sl.Size)]
	n, err := sl.File.ReadAt(dst[len(dst)-int(sl.Size):], sl.Pos)
	if n == int(sl.Size) {
		return dst, nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = fmt.Errorf("%w: file ends at %d", segment.ErrTruncated, sl.Pos+int64(n))
	}
	return nil, err
}

// readSliceErrorCode maps a failure to read a log slice's bytes: a short
// read (the file shrank under the read) is retriable, not a failed disk.
func readSliceErrorCode(s *Server, p *partition, err error) int16 {
	if errors.Is(err, segment.ErrTruncated) {
		return kerr.KafkaStorageError.Code
	}
	return readErrorCode(s, p, err)
}

// downConvertErrorCode maps a DownConvert failure to a Kafka error code.
func downConvertErrorCode(s *Server, p *partition, err error) int16 {
	if errors.Is(err, segment.ErrLegacyZstd) {
		return kerr.UnsupportedCompressionType.Code
	}
	s.log.Error("fetch down-conversion failed", "topic", p.topic, "partition", p.index, "err", err)
	return kerr.CorruptMessage.Code
}
