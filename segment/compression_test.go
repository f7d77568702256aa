package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/golang/snappy"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy/xerial"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// compressible returns n bytes of random words from a small vocabulary:
// every codec shrinks them, none to nothing.
func compressible(n int) []byte {
	words := []string{"offset ", "segment ", "batch ", "record ", "leader ", "epoch ", "replica ", "fetch "}
	r := rand.New(rand.NewPCG(1, uint64(n)))
	b := make([]byte, 0, n+8)
	for len(b) < n {
		b = append(b, words[r.IntN(len(words))]...)
	}
	return b[:n]
}

func TestCompressRoundTrip(t *testing.T) {
	for _, codec := range allCodecs {
		for _, n := range []int{0, 1, 1000, xerialBlockSize, xerialBlockSize + 1, 300_000} {
			in := compressible(n)
			c, err := Compress(codec, in)
			if err != nil {
				t.Fatalf("%s/%d: Compress: %v", codec, n, err)
			}
			out, err := Decompress(codec, c)
			if err != nil {
				t.Fatalf("%s/%d: Decompress: %v", codec, n, err)
			}
			if !bytes.Equal(out, in) {
				t.Errorf("%s/%d: got %d bytes back, want the %d put in", codec, n, len(out), n)
			}
			if codec != CodecNone && n >= 1000 && len(c) >= n {
				t.Errorf("%s/%d: compressed to %d bytes", codec, n, len(c))
			}
		}
	}
}

// TestCompressReadByOthers checks that other implementations read what
// Compress writes: the Java client's framings, as sarama and franz-go read
// them.
func TestCompressReadByOthers(t *testing.T) {
	in := compressible(100_000)
	read := map[Codec]func([]byte) ([]byte, error){
		CodecGzip: func(b []byte) ([]byte, error) {
			r, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				return nil, err
			}
			return io.ReadAll(r)
		},
		CodecSnappy: xerial.Decode,
		CodecLZ4:    func(b []byte) ([]byte, error) { return io.ReadAll(lz4.NewReader(bytes.NewReader(b))) },
		CodecZstd: func(b []byte) ([]byte, error) {
			d, err := zstd.NewReader(nil)
			if err != nil {
				return nil, err
			}
			defer d.Close()
			return d.DecodeAll(b, nil)
		},
	}
	for codec, fn := range read {
		c, err := Compress(codec, in)
		if err != nil {
			t.Fatal(err)
		}
		out, err := fn(c)
		if err != nil || !bytes.Equal(out, in) {
			t.Errorf("%s: got %d bytes, %v; want %d bytes", codec, len(out), err, len(in))
		}
	}
	c, _ := Compress(CodecSnappy, in)
	if !bytes.HasPrefix(c, xerialMagic) {
		t.Errorf("snappy: got prefix %x, want the xerial magic", c[:8])
	}
}

func TestDecompressSnappyFramings(t *testing.T) {
	in := compressible(100_000)
	tests := []struct {
		name string
		data []byte
	}{
		{"raw golang/snappy", snappy.Encode(nil, in)},
		{"raw s2 snappy", s2.EncodeSnappy(nil, in)},
		{"xerial, sarama's encoder", xerial.Encode(nil, in)},
		{"xerial, ours", xerialEncode(in)},
		{"xerial, one block per byte", func() []byte {
			b := append([]byte{}, xerialMagic...)
			b = append(b, 0, 0, 0, 1, 0, 0, 0, 1)
			for _, c := range in[:100] {
				blk := snappy.Encode(nil, []byte{c})
				b = binary.BigEndian.AppendUint32(b, uint32(len(blk)))
				b = append(b, blk...)
			}
			return b
		}()},
	}
	for i, tt := range tests {
		want := in
		if i == len(tests)-1 {
			want = in[:100]
		}
		out, err := Decompress(CodecSnappy, tt.data)
		if err != nil || !bytes.Equal(out, want) {
			t.Errorf("#%d %s: got %d bytes, %v; want %d bytes", i, tt.name, len(out), err, len(want))
		}
	}
	empty := append(append([]byte{}, xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1)
	if out, err := Decompress(CodecSnappy, empty); err != nil || len(out) != 0 {
		t.Errorf("empty xerial: got %d bytes, %v; want 0, nil", len(out), err)
	}
}

func TestDecompressCorrupt(t *testing.T) {
	garbage := []byte("this is not compressed data at all, in any codec")
	xerialBad := append(append([]byte{}, xerialMagic...), 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 9, 1, 2)
	tests := []struct {
		codec Codec
		data  []byte
		want  error
	}{
		{CodecGzip, garbage, ErrDecompress},
		{CodecGzip, nil, ErrDecompress},
		{CodecSnappy, garbage, ErrDecompress},
		{CodecSnappy, xerialBad, ErrDecompress},
		{CodecSnappy, append(bytes.Clone(xerialBad[:16]), 0, 0), ErrDecompress},
		// A few bytes declaring ~117 MB, which no snappy block this short
		// can decode to: refused before allocating.
		{CodecSnappy, []byte{0xff, 0xff, 0xff, 0x38}, ErrDecompress},
		{CodecSnappy, append(bytes.Clone(xerialBad[:16]), 0, 0, 0, 4, 0xff, 0xff, 0xff, 0x38), ErrDecompress},
		{CodecLZ4, garbage, ErrDecompress},
		{CodecZstd, garbage, ErrDecompress},
		{5, garbage, ErrUnknownCodec},
		{-1, garbage, ErrUnknownCodec},
	}
	for i, tt := range tests {
		_, err := Decompress(tt.codec, tt.data)
		if !errors.Is(err, tt.want) || !IsCorrupt(err) {
			t.Errorf("#%d %s: got %v, want %v", i, tt.codec, err, tt.want)
		}
	}
	// A truncated stream of each codec fails rather than returning a prefix.
	in := compressible(100_000)
	for _, codec := range allCodecs[1:] {
		c, _ := Compress(codec, in)
		if _, err := Decompress(codec, c[:len(c)-5]); !errors.Is(err, ErrDecompress) {
			t.Errorf("%s truncated: got %v, want %v", codec, err, ErrDecompress)
		}
	}
}

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// bomb compresses n zero bytes with codec without holding them in memory.
func bomb(t *testing.T, codec Codec, n int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	switch codec {
	case CodecGzip:
		w, _ = gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	case CodecLZ4:
		w = lz4.NewWriter(&buf)
	case CodecZstd:
		zw, err := zstd.NewWriter(&buf, zstd.WithEncoderLevel(zstd.SpeedFastest))
		if err != nil {
			t.Fatal(err)
		}
		w = zw
	case CodecSnappy:
		// Xerial blocks are independent: repeat one block of zeros.
		blk := snappy.Encode(nil, make([]byte, xerialBlockSize))
		buf.Write(xerialMagic)
		buf.Write([]byte{0, 0, 0, 1, 0, 0, 0, 1})
		for range n / xerialBlockSize {
			binary.Write(&buf, binary.BigEndian, uint32(len(blk)))
			buf.Write(blk)
		}
		return buf.Bytes()
	}
	if _, err := io.Copy(w, io.LimitReader(zeros{}, n)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestDecompressRefusesBombs(t *testing.T) {
	if testing.Short() {
		t.Skip("compresses a few hundred megabytes")
	}
	for _, codec := range allCodecs[1:] {
		data := bomb(t, codec, DefaultMaxDecompressed+xerialBlockSize)
		_, err := Decompress(codec, data)
		if !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s: %d compressed bytes: got %v, want %v", codec, len(data), err, ErrTooLarge)
		}
	}
	// A raw snappy block that claims 2 GiB is refused before allocating.
	claim := binary.AppendUvarint(nil, 1<<31)
	if _, err := Decompress(CodecSnappy, append(claim, 0)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("raw snappy claim: got %v, want %v", err, ErrTooLarge)
	}
}

func TestDecompressLimit(t *testing.T) {
	in := compressible(10_000)
	for _, codec := range allCodecs {
		c, err := Compress(codec, in)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := DecompressLimit(codec, c, len(in)); err != nil || len(out) != len(in) {
			t.Errorf("%s at the limit: got %d bytes, %v; want %d, nil", codec, len(out), err, len(in))
		}
		var want error = ErrTooLarge
		if codec == CodecNone {
			want = nil // nothing to bound: the data is already in memory
		}
		if _, err := DecompressLimit(codec, c, len(in)-1); !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Errorf("%s one byte over: got %v, want %v", codec, err, want)
		}
	}
}

// TestDecompressConcurrent exercises the pooled codecs from many goroutines
// (run with -race).
func TestDecompressConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 16 {
		wg.Go(func() {
			for i := range 20 {
				codec := allCodecs[(g+i)%len(allCodecs)]
				in := compressible(1000 + g*100 + i)
				c, err := Compress(codec, in)
				if err != nil {
					errs <- err
					return
				}
				limit := DefaultMaxDecompressed
				if i%2 == 1 {
					limit = len(in)
				}
				out, err := DecompressLimit(codec, c, limit)
				if err != nil || !bytes.Equal(out, in) {
					errs <- fmt.Errorf("%s: got %d bytes, %v; want %d", codec, len(out), err, len(in))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
