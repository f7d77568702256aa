package segment

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Levels are the per-codec compression levels of Kafka's topic configs
// compression.gzip.level, compression.lz4.level and
// compression.zstd.level (KIP-390), in Kafka's ranges and with its
// defaults (DefaultLevels). Snappy has no levels.
type Levels struct {
	Gzip int // -1 (the codec's default) or 1 to 9
	LZ4  int // 1 to 17; 9, Kafka's default, is the fast compressor
	Zstd int // -131072 to 22
}

// DefaultLevels are Kafka's defaults: what Compress uses.
var DefaultLevels = Levels{Gzip: -1, LZ4: 9, Zstd: 3}

// Kafka's level ranges (KIP-390). Wire-visible config limits: never change.
const (
	GzipMinLevel, GzipMaxLevel = 1, 9
	LZ4MinLevel, LZ4MaxLevel   = 1, 17
	ZstdMinLevel, ZstdMaxLevel = -131072, 22
)

// CompressLevels is Compress with the level lv gives codec. The levels map
// onto the Go codecs' own: gzip's directly; lz4's default (9) onto the
// fast compressor, as Kafka's, and the others onto the high-compression
// levels 1 to 9 (higher levels capped at 9); zstd's onto the encoder's
// four speeds as zstd.EncoderLevelFromZstd maps them.
func CompressLevels(codec Codec, data []byte, lv Levels) ([]byte, error) {
	switch {
	case lv == DefaultLevels:
		return Compress(codec, data)
	case codec == CodecGzip:
		return gzipLevel(data, lv.Gzip)
	case codec == CodecLZ4:
		return lz4Level(data, lv.LZ4)
	case codec == CodecZstd:
		return zstdLevelEncoder(lv.Zstd).EncodeAll(data, make([]byte, 0, len(data)/2+64)), nil
	}
	return Compress(codec, data)
}

func gzipLevel(data []byte, level int) ([]byte, error) {
	if level == -1 {
		return gzipData(data)
	}
	if level < GzipMinLevel || level > GzipMaxLevel {
		return nil, fmt.Errorf("segment: gzip level %d", level)
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, level)
	if err != nil {
		return nil, fmt.Errorf("segment: gzip: %w", err)
	}
	if _, err := zw.Write(data); err != nil {
		return nil, fmt.Errorf("segment: gzip: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("segment: gzip: %w", err)
	}
	return buf.Bytes(), nil
}

func lz4Level(data []byte, level int) ([]byte, error) {
	if level == DefaultLevels.LZ4 {
		return lz4Data(data)
	}
	if level < LZ4MinLevel || level > LZ4MaxLevel {
		return nil, fmt.Errorf("segment: lz4 level %d", level)
	}
	hc := []lz4.CompressionLevel{lz4.Level1, lz4.Level2, lz4.Level3, lz4.Level4, lz4.Level5, lz4.Level6, lz4.Level7, lz4.Level8, lz4.Level9}
	var buf bytes.Buffer
	zw := lz4.NewWriter(&buf)
	if err := zw.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.CompressionLevelOption(hc[min(level, 9)-1])); err != nil {
		return nil, fmt.Errorf("segment: lz4: %w", err)
	}
	if _, err := zw.Write(data); err != nil {
		return nil, fmt.Errorf("segment: lz4: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("segment: lz4: %w", err)
	}
	return buf.Bytes(), nil
}

// zstdEncoders holds one shared encoder per speed (EncodeAll is safe for
// concurrent use).
var zstdEncoders sync.Map // zstd.EncoderLevel -> *zstd.Encoder

func zstdLevelEncoder(level int) *zstd.Encoder {
	el := zstd.EncoderLevelFromZstd(level)
	if el == zstd.SpeedDefault {
		return zstdEncoder()
	}
	if e, ok := zstdEncoders.Load(el); ok {
		return e.(*zstd.Encoder)
	}
	enc, err := zstd.NewWriter(nil, zstd.WithZeroFrames(true), zstd.WithEncoderConcurrency(4), zstd.WithEncoderLevel(el))
	if err != nil {
		panic("segment: zstd encoder: " + err.Error()) // only on invalid options
	}
	e, _ := zstdEncoders.LoadOrStore(el, enc)
	return e.(*zstd.Encoder)
}
