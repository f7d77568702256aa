package strataapi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// MaxResponseBytes bounds a response frame RoundTrip reads.
const MaxResponseBytes = 64 << 20

// ErrConnClosed is RoundTrip's error when the broker closed the
// connection instead of answering: the mark of a broker that does not
// serve the key (a Kafka broker, or an older Strata).
var ErrConnClosed = errors.New("strataapi: the broker closed the connection (not a Strata broker, or one without this API)")

// RoundTrip writes req on rw as one request frame with correlation id
// corr and client id clientID, reads the answer and decodes it into resp.
// It works for Kafka's requests too (SASL before one of ours); rw must be
// a connection nothing else reads or writes meanwhile.
func RoundTrip(rw io.ReadWriter, clientID string, corr int32, req kmsg.Request, resp kmsg.Response) error {
	fmtr := kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))
	if _, err := rw.Write(fmtr.AppendRequest(nil, req, corr)); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(rw, size[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return ErrConnClosed
		}
		return err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > MaxResponseBytes {
		return fmt.Errorf("%w: response frame of %d bytes", ErrMalformed, n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(rw, body); err != nil {
		return err
	}
	rd := kbin.Reader{Src: body}
	if got := rd.Int32(); got != corr {
		return fmt.Errorf("%w: response to correlation id %d, want %d", ErrMalformed, got, corr)
	}
	if req.IsFlexible() && req.Key() != 18 { // ApiVersions answers with header v0
		kmsg.SkipTags(&rd)
	}
	if !rd.Ok() {
		return fmt.Errorf("%w: truncated response header", ErrMalformed)
	}
	resp.SetVersion(req.GetVersion())
	return resp.ReadFrom(rd.Src)
}
