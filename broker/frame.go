package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/bufpool"
)

// apiVersionsKey is ApiVersions' key: its response header is always v0 and
// an unsupported version of it is answered rather than refused.
const apiVersionsKey = 18

// Errors from reading and decoding request frames. Each closes the
// connection that sent the frame.
var (
	ErrFrameTooLarge      = errors.New("broker: request frame larger than socket.request.max.bytes")
	ErrFrameMalformed     = errors.New("broker: malformed request frame")
	ErrUnknownAPIKey      = errors.New("broker: unknown api key")
	ErrUnsupportedVersion = errors.New("broker: unsupported api version")
)

// request is one decoded request with its header.
type request struct {
	key      int16
	version  int16
	corr     int32
	clientID *string
	// kreq is the decoded body. It is nil when unsupported is set.
	kreq kmsg.Request
	api  *api
	// unsupported marks an ApiVersions request at a version we do not
	// serve: its body was not decoded and the answer is
	// UNSUPPORTED_VERSION in v0 form.
	unsupported bool
	// size is the frame size, for accounting.
	size int
	// frame is the buffer the request was read into, which kreq
	// aliases; conn.processLoop gives it back to the frame pool once the
	// request is answered if api.reusesFrame.
	frame []byte
	// reserved is what the request holds of queued.max.request.bytes
	// (conn.go), released once it is answered or dropped.
	reserved int64
	// ctx is the connection's context with the client (group.WithClient):
	// it is cancelled when the connection's reader stops (the client went
	// away, the connection failed or was refused a frame, the server shuts
	// down). Handlers that block pass it on and drop their response when
	// it is done.
	ctx context.Context
	// conn is the connection the request came on (nil in tests that
	// build requests by hand).
	conn *conn
	// start is when its handling began (conn.process).
	start time.Time
}

// Growth of a frame's buffer as its body arrives (readFrameBody).
const (
	// frameFirstChunk is the most a frame's buffer holds before any of
	// its body has been read.
	frameFirstChunk = 16 << 10
	// frameGrowth is how many times the bytes read so far the buffer
	// grows to when they fill it.
	frameGrowth = 8
)

// readFrame reads one size-prefixed frame (readFrameSize, then
// readFrameBody).
func readFrame(r io.Reader, sizeBuf []byte, max int32) (frame []byte, n int, err error) {
	size, n, err := readFrameSize(r, sizeBuf, max)
	if err != nil {
		return nil, n, err
	}
	frame, err = readFrameBody(r, size)
	return frame, n, err
}

// readFrameSize reads a frame's size prefix and checks it against max:
// nothing is allocated for a frame that is refused. sizeBuf must have
// length 4; readFrameSize reports in n how many bytes of the prefix were
// read, so a caller timing out while idle can tell "nothing arrived" from
// "a frame started".
func readFrameSize(r io.Reader, sizeBuf []byte, max int32) (size int32, n int, err error) {
	n, err = io.ReadFull(r, sizeBuf[:4])
	if err != nil {
		return 0, n, err
	}
	size = int32(binary.BigEndian.Uint32(sizeBuf))
	if size < 0 || size > max {
		return 0, n, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, size, max)
	}
	if size < 8 {
		return 0, n, fmt.Errorf("%w: %d bytes is shorter than a request header", ErrFrameMalformed, size)
	}
	return size, n, nil
}

// readFrameBody reads a frame body of size bytes. Its buffer grows as the
// body arrives: frameFirstChunk at first, then frameGrowth times the
// bytes read each time they fill it, so a client that announces a large
// frame and sends little of it holds at most frameGrowth times what it
// sent (plus frameFirstChunk), and a frame that arrives whole is copied
// at most 1/(frameGrowth-1) of its size on the way.
//
// The buffers come from bufpool and those it outgrows go back to it;
// the caller may give the frame back with bufpool.Put once nothing reads
// it, or leave it to the garbage collector. conn.processLoop gives back
// the frames of requests whose API handler keeps nothing of the
// request's bytes (api.reusesFrame); every other frame is left to the
// garbage collector. A frame is always the slice of exactly the bytes
// read into it, so an earlier request's bytes beyond it are never seen.
func readFrameBody(r io.Reader, size int32) ([]byte, error) {
	buf := bufpool.Get(min(int(size), frameFirstChunk))
	have := 0
	for {
		n, err := io.ReadFull(r, buf[have:])
		have += n
		if err != nil {
			bufpool.Put(buf)
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if have == int(size) {
			return buf, nil
		}
		next := bufpool.Get(min(int(size), have*frameGrowth))
		copy(next, buf)
		bufpool.Put(buf)
		buf = next
	}
}

// parseRequest decodes the header and body of one frame (without its size
// prefix). It never panics on arbitrary input. Errors wrap
// ErrFrameMalformed, ErrUnknownAPIKey or ErrUnsupportedVersion. The
// returned request aliases frame.
func parseRequest(frame []byte) (*request, error) {
	if len(frame) < 8 {
		return nil, fmt.Errorf("%w: %d bytes is shorter than a request header", ErrFrameMalformed, len(frame))
	}
	r := &request{
		key:     int16(binary.BigEndian.Uint16(frame[0:])),
		version: int16(binary.BigEndian.Uint16(frame[2:])),
		corr:    int32(binary.BigEndian.Uint32(frame[4:])),
		size:    len(frame),
	}
	a := apis[r.key]
	newRequest := kmsg.RequestForKey
	if sa := strataAPIs[r.key]; a == nil && sa != nil {
		a, newRequest = &sa.api, func(int16) kmsg.Request { return sa.newRequest() }
	}
	if a == nil {
		return r, fmt.Errorf("%w: %d (version %d)", ErrUnknownAPIKey, r.key, r.version)
	}
	r.api = a
	if r.version < a.min || r.version > a.max {
		if r.key == apiVersionsKey {
			// KIP-511: answer with the range we serve, in v0 form.
			// Only the correlation id is needed, so the rest of the
			// header (whose layout depends on the version) is not
			// read.
			r.unsupported = true
			return r, nil
		}
		return r, fmt.Errorf("%w: key %d version %d, served %d-%d", ErrUnsupportedVersion, r.key, r.version, a.min, a.max)
	}
	kreq := newRequest(r.key)
	kreq.SetVersion(r.version)
	rd := kbin.Reader{Src: frame[8:]}
	r.clientID = rd.NullableString()
	if kreq.IsFlexible() {
		kmsg.SkipTags(&rd)
	}
	if !rd.Ok() {
		return r, fmt.Errorf("%w: request header of key %d version %d", ErrFrameMalformed, r.key, r.version)
	}
	if err := kreq.ReadFrom(rd.Src); err != nil {
		return r, fmt.Errorf("%w: key %d version %d: %v", ErrFrameMalformed, r.key, r.version, err)
	}
	r.kreq = kreq
	return r, nil
}

// MaxDecodeAmplification bounds the bytes decoding a request frame
// allocates, as a multiple of the frame's size (doc.go, "Decoding";
// TestDecodeAllocationBound measures it over every API version served).
const MaxDecodeAmplification = 64
