package segment

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// An lz4 frame opens with a magic number and a frame descriptor: FLG, BD,
// an optional 8-byte content size (FLG bit 3), an optional 4-byte
// dictionary id (FLG bit 0), and HC, the second byte of the XXH32 of the
// descriptor fields (FLG to the end of the optional ones). Kafka's own lz4
// framing before 0.10 (KAFKA-3160) hashed the magic number too; magic 0
// wrappers keep that checksum on the wire, in both directions, for the
// readers of that time. Wire format: never change these.
var lz4FrameMagic = []byte{0x04, 0x22, 0x4d, 0x18}

const (
	lz4FlagContentSize = 0x08
	lz4FlagDictID      = 0x01
)

// lz4WithChecksum returns frame with its descriptor checksum recomputed:
// the standard one, or Kafka's broken one (over the magic number as well)
// when broken is set. A frame whose descriptor is not whole is returned as
// it is, for the decoder to refuse. It copies only when the byte changes.
func lz4WithChecksum(frame []byte, broken bool) []byte {
	if len(frame) < 7 || !bytes.HasPrefix(frame, lz4FrameMagic) {
		return frame
	}
	end := 6 // FLG, BD
	if frame[4]&lz4FlagContentSize != 0 {
		end += 8
	}
	if frame[4]&lz4FlagDictID != 0 {
		end += 4
	}
	if len(frame) <= end {
		return frame
	}
	from := 4
	if broken {
		from = 0
	}
	hc := byte(xxh32(frame[from:end]) >> 8)
	if frame[end] == hc {
		return frame
	}
	out := bytes.Clone(frame)
	out[end] = hc
	return out
}

// The XXH32 primes.
const (
	xxhPrime1 uint32 = 2654435761
	xxhPrime2 uint32 = 2246822519
	xxhPrime3 uint32 = 3266489917
	xxhPrime4 uint32 = 668265263
	xxhPrime5 uint32 = 374761393
)

// xxh32 is XXH32 with seed 0 (an lz4 frame descriptor with the magic
// number is up to 18 bytes, so the four-lane loop is needed too).
func xxh32(b []byte) uint32 {
	n := uint32(len(b))
	var h uint32
	if len(b) >= 16 {
		p1, p2 := xxhPrime1, xxhPrime2 // variables: the sums wrap
		v1, v2, v3, v4 := p1+p2, p2, uint32(0), -p1
		round := func(v, x uint32) uint32 { return bits.RotateLeft32(v+x*xxhPrime2, 13) * xxhPrime1 }
		for len(b) >= 16 {
			v1 = round(v1, binary.LittleEndian.Uint32(b))
			v2 = round(v2, binary.LittleEndian.Uint32(b[4:]))
			v3 = round(v3, binary.LittleEndian.Uint32(b[8:]))
			v4 = round(v4, binary.LittleEndian.Uint32(b[12:]))
			b = b[16:]
		}
		h = bits.RotateLeft32(v1, 1) + bits.RotateLeft32(v2, 7) + bits.RotateLeft32(v3, 12) + bits.RotateLeft32(v4, 18)
	} else {
		h = xxhPrime5
	}
	h += n
	for ; len(b) >= 4; b = b[4:] {
		h += binary.LittleEndian.Uint32(b) * xxhPrime3
		h = bits.RotateLeft32(h, 17) * xxhPrime4
	}
	for _, c := range b {
		h += uint32(c) * xxhPrime5
		h = bits.RotateLeft32(h, 11) * xxhPrime1
	}
	h ^= h >> 15
	h *= xxhPrime2
	h ^= h >> 13
	h *= xxhPrime3
	h ^= h >> 16
	return h
}
