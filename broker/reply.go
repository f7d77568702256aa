package broker

import (
	"encoding/binary"
	"os"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// reply is what a handler hands to the connection's writer.
type reply struct {
	// msg is a response encoded with kmsg.
	msg kmsg.Response
	// raw is a body encoded by hand around file ranges (Fetch). Its
	// version decides the response header.
	raw *rawBody
	// none: send nothing (acks=0 produce).
	none bool
	// closeConn: close the connection after this reply (acks=0 produce
	// that failed, which is how Kafka tells such a producer).
	closeConn bool
	// throttleMs is the client quota throttle (client_quotas.go), of
	// throttleType; rawClientThrottle says a raw body's version
	// throttles client side (Fetch v8+).
	throttleMs        int32
	throttleType      quotaType
	rawClientThrottle bool
}

// rawBody is a response body made of in-memory bytes and file ranges, in
// order. The file ranges are sent with sendfile where the connection
// allows it.
type rawBody struct {
	flexible bool
	pieces   []piece
	size     int64
	// release, if set, is called once the body was sent or could not
	// be (it unpins remote chunks; fetch_remote.go).
	release func()
}

// piece is either bytes (file == nil) or a range of a file.
type piece struct {
	buf       []byte
	file      *os.File
	pos, size int64
}

// rawBuilder builds a rawBody: bytes are appended to one buffer, and file
// ranges cut it into pieces.
type rawBuilder struct {
	buf []byte
	// cuts are the positions in buf where a file range goes, with the
	// range.
	cuts []rawCut
}

type rawCut struct {
	at        int
	file      *os.File
	pos, size int64
}

func (b *rawBuilder) file(f *os.File, pos, size int64) {
	if size == 0 {
		return
	}
	b.cuts = append(b.cuts, rawCut{at: len(b.buf), file: f, pos: pos, size: size})
}

// inline adds bytes to the body. Used where file ranges are not available
// or were copied already (tests, non-zero-copy reads).
func (b *rawBuilder) inline(p []byte) { b.buf = append(b.buf, p...) }

func (b *rawBuilder) finish(flexible bool) *rawBody {
	body := &rawBody{flexible: flexible}
	last := 0
	for _, c := range b.cuts {
		if c.at > last {
			body.pieces = append(body.pieces, piece{buf: b.buf[last:c.at]})
		}
		body.pieces = append(body.pieces, piece{file: c.file, pos: c.pos, size: c.size})
		last = c.at
	}
	if last < len(b.buf) {
		body.pieces = append(body.pieces, piece{buf: b.buf[last:]})
	}
	for _, p := range body.pieces {
		if p.file != nil {
			body.size += p.size
		} else {
			body.size += int64(len(p.buf))
		}
	}
	return body
}

// appendResponseHeader appends the size placeholder, correlation id and,
// for flexible responses other than ApiVersions, the empty tagged fields
// of response header v1. The caller patches the size.
func appendResponseHeader(dst []byte, corr int32, flexibleHeader bool) []byte {
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	if flexibleHeader {
		dst = append(dst, 0)
	}
	return dst
}

// encodeResponse encodes a kmsg response into a complete frame appended
// to dst.
func encodeResponse(dst []byte, corr int32, resp kmsg.Response) []byte {
	base := len(dst)
	dst = appendResponseHeader(dst, corr, resp.IsFlexible() && resp.Key() != apiVersionsKey)
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[base:], uint32(len(dst)-base-4))
	return dst
}
