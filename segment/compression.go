package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// DefaultMaxDecompressed is the decompressed size Decompress and Records
// accept for one batch's records. It bounds the memory a hostile or corrupt
// batch can claim: a few kilobytes of zstd can describe gigabytes.
const DefaultMaxDecompressed = 128 << 20

// Errors from the compression codecs. Both wrap ErrCorrupt.
var (
	ErrDecompress = fmt.Errorf("%w: cannot decompress records", ErrCorrupt)
	ErrTooLarge   = fmt.Errorf("%w: decompressed records exceed the limit", ErrCorrupt)
)

// xerialMagic opens a snappy payload in the Xerial ("snappy-java") framing
// that the Java client and librdkafka write: the magic, a version and a
// minimum compatible version (int32 each, both 1), then blocks, each a
// big-endian int32 length and a raw snappy block. Wire format: never change.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const (
	xerialHeaderSize = 16       // magic, version, compatible version
	xerialBlockSize  = 32 << 10 // uncompressed bytes per block, as snappy-java writes
)

// Decompress returns the records section of a batch compressed with codec,
// refusing to produce more than DefaultMaxDecompressed bytes. For CodecNone
// it returns data itself. Snappy is accepted both raw and in the Xerial
// framing. Errors wrap ErrDecompress, ErrTooLarge or ErrUnknownCodec.
func Decompress(codec Codec, data []byte) ([]byte, error) {
	return DecompressLimit(codec, data, DefaultMaxDecompressed)
}

// DecompressLimit is Decompress with a caller-chosen bound: a compressed
// payload that decompresses to more than limit bytes fails with ErrTooLarge,
// and no more than about limit bytes are allocated on the way (for zstd, at
// least 8 MiB: see zstdMinMemory). CodecNone returns data whatever its size.
func DecompressLimit(codec Codec, data []byte, limit int) ([]byte, error) {
	if limit < 0 {
		limit = 0
	}
	var (
		out []byte
		err error
	)
	switch codec {
	case CodecNone:
		return data, nil // nothing is allocated, so nothing to bound
	case CodecGzip:
		out, err = gunzip(data, limit)
	case CodecSnappy:
		out, err = unsnappy(data, limit)
	case CodecLZ4:
		out, err = unlz4(data, limit)
	case CodecZstd:
		out, err = unzstd(data, limit)
	default:
		return nil, fmt.Errorf("%w: codec %d", ErrUnknownCodec, codec)
	}
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrDecompress, codec, err)
	}
	return out, nil
}

// Compress encodes a records section with codec, the way the Java client
// does: gzip, snappy in the Xerial framing, lz4 frames with 64 KiB blocks,
// zstd frames. For CodecNone it returns data itself.
func Compress(codec Codec, data []byte) ([]byte, error) {
	switch codec {
	case CodecNone:
		return data, nil
	case CodecGzip:
		return gzipData(data)
	case CodecSnappy:
		return xerialEncode(data), nil
	case CodecLZ4:
		return lz4Data(data)
	case CodecZstd:
		return zstdEncoder().EncodeAll(data, make([]byte, 0, len(data)/2+64)), nil
	}
	return nil, fmt.Errorf("%w: codec %d", ErrUnknownCodec, codec)
}

// readLimited copies r into memory, failing with ErrTooLarge past limit.
func readLimited(r io.Reader, sizeHint, limit int) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(min(sizeHint, limit) + bytes.MinRead)
	n, err := buf.ReadFrom(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if n > int64(limit) {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
	}
	return buf.Bytes(), nil
}

var gzipReaders, gzipWriters, lz4Readers, lz4Writers, zstdDecoders sync.Pool

func gunzip(data []byte, limit int) ([]byte, error) {
	zr, _ := gzipReaders.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(bytes.NewReader(data))
	} else {
		err = zr.Reset(bytes.NewReader(data))
	}
	if err != nil {
		return nil, err
	}
	defer gzipReaders.Put(zr)
	return readLimited(zr, 4*len(data), limit)
}

func gzipData(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, _ := gzipWriters.Get().(*gzip.Writer)
	if zw == nil {
		zw = gzip.NewWriter(&buf)
	} else {
		zw.Reset(&buf)
	}
	defer gzipWriters.Put(zw)
	if _, err := zw.Write(data); err != nil {
		return nil, fmt.Errorf("segment: gzip: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("segment: gzip: %w", err)
	}
	return buf.Bytes(), nil
}

func unlz4(data []byte, limit int) ([]byte, error) {
	zr, _ := lz4Readers.Get().(*lz4.Reader)
	if zr == nil {
		zr = lz4.NewReader(bytes.NewReader(data))
	} else {
		zr.Reset(bytes.NewReader(data))
	}
	defer lz4Readers.Put(zr)
	return readLimited(zr, 4*len(data), limit)
}

func lz4Data(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, _ := lz4Writers.Get().(*lz4.Writer)
	if zw == nil {
		zw = lz4.NewWriter(&buf)
		// 64 KiB blocks are what the Java client writes and what every
		// Kafka reader accepts.
		if err := zw.Apply(lz4.BlockSizeOption(lz4.Block64Kb)); err != nil {
			return nil, fmt.Errorf("segment: lz4: %w", err)
		}
	} else {
		zw.Reset(&buf)
	}
	defer lz4Writers.Put(zw)
	if _, err := zw.Write(data); err != nil {
		return nil, fmt.Errorf("segment: lz4: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("segment: lz4: %w", err)
	}
	return buf.Bytes(), nil
}

// zstdEncoder is shared: EncodeAll is safe for concurrent use.
var zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
	enc, err := zstd.NewWriter(nil, zstd.WithZeroFrames(true), zstd.WithEncoderConcurrency(4))
	if err != nil {
		panic("segment: zstd encoder: " + err.Error()) // only on invalid options
	}
	return enc
})

// zstdMinMemory is the least memory bound given to the zstd decoder. The
// decoder refuses frames whose window exceeds its bound even when their
// content is small, and the Java client's streaming frames declare windows
// of 2 MiB (level 3) to 8 MiB (level 19); below this, limit is enforced
// on the output after decoding.
const zstdMinMemory = 8 << 20

// unzstd decodes with a pooled single-threaded decoder whose memory bound is
// set per call; the decoder checks a frame's declared size before
// allocating and stops a frame that outgrows the bound.
func unzstd(data []byte, limit int) ([]byte, error) {
	bound := zstd.WithDecoderMaxMemory(uint64(max(limit, zstdMinMemory)))
	dec, _ := zstdDecoders.Get().(*zstd.Decoder)
	if dec == nil {
		var err error
		dec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), bound)
		if err != nil {
			return nil, err
		}
	} else if err := dec.ResetWithOptions(nil, bound); err != nil {
		return nil, err
	}
	defer zstdDecoders.Put(dec)
	out, err := dec.DecodeAll(data, nil)
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || err == nil && len(out) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
	}
	return out, err
}

// unsnappy decodes raw snappy or the Xerial framing, told apart by the magic.
func unsnappy(data []byte, limit int) ([]byte, error) {
	if len(data) >= xerialHeaderSize && bytes.HasPrefix(data, xerialMagic) {
		return xerialDecode(data[xerialHeaderSize:], limit)
	}
	if _, err := snappyLen(data, limit); err != nil {
		return nil, err
	}
	return snappy.Decode(nil, data)
}

// snappyMaxRatio bounds what one byte of a snappy block can decode to: the
// densest element is a 3-byte copy of 64 bytes.
const snappyMaxRatio = 22

// snappyLen returns the decoded length a snappy block declares, refusing
// lengths over limit and lengths the block is too short to produce, so that
// a few bytes cannot make the decoder allocate up to the limit.
func snappyLen(block []byte, limit int) (int, error) {
	n, err := snappy.DecodedLen(block)
	switch {
	case err != nil:
		return 0, err
	case n > limit:
		return 0, fmt.Errorf("%w: snappy block declares %d bytes, limit %d", ErrTooLarge, n, limit)
	case n > snappyMaxRatio*len(block):
		return 0, fmt.Errorf("snappy block of %d bytes declares %d", len(block), n)
	}
	return n, nil
}

// xerialDecode decodes the blocks after the Xerial header. It sums the
// blocks' declared lengths against limit before allocating anything.
func xerialDecode(blocks []byte, limit int) ([]byte, error) {
	total := 0
	for rest := blocks; len(rest) > 0; {
		if len(rest) < 4 {
			return nil, errors.New("xerial: truncated block length")
		}
		size := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(size) > uint64(len(rest)) {
			return nil, fmt.Errorf("xerial: block of %d bytes, %d remain", size, len(rest))
		}
		n, err := snappyLen(rest[:size], limit)
		if err != nil {
			return nil, err
		}
		if total += n; total > limit {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
		}
		rest = rest[size:]
	}
	out := make([]byte, 0, total)
	for len(blocks) > 0 {
		size := binary.BigEndian.Uint32(blocks)
		block := blocks[4 : 4+size]
		blocks = blocks[4+size:]
		n, _ := snappy.DecodedLen(block)
		dst, err := snappy.Decode(out[len(out):len(out)+n], block)
		if err != nil {
			return nil, err
		}
		out = out[:len(out)+len(dst)]
	}
	return out, nil
}

// xerialEncode frames data as snappy-java does: header, then 32 KiB blocks.
func xerialEncode(data []byte) []byte {
	blocks := (len(data) + xerialBlockSize - 1) / xerialBlockSize
	out := make([]byte, 0, xerialHeaderSize+blocks*(4+snappy.MaxEncodedLen(xerialBlockSize)))
	out = append(out, xerialMagic...)
	out = binary.BigEndian.AppendUint32(out, 1) // version
	out = binary.BigEndian.AppendUint32(out, 1) // minimum compatible version
	var scratch []byte
	for len(data) > 0 {
		n := min(len(data), xerialBlockSize)
		scratch = snappy.Encode(scratch[:cap(scratch)], data[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(scratch)))
		out = append(out, scratch...)
		data = data[n:]
	}
	return out
}
