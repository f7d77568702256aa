package e2e

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// replyTimeout bounds the wait for a reply or a close on a raw connection.
const replyTimeout = 5 * time.Second

// dialRaw opens a plain TCP connection to the broker, closed at test end.
func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// requestFrame returns a size-prefixed request: header v1 (or v2 when
// flexible) with client id "e2e-raw", then body.
func requestFrame(key, version int16, corr int32, flexible bool, body []byte) []byte {
	h := binary.BigEndian.AppendUint16(nil, uint16(key))
	h = binary.BigEndian.AppendUint16(h, uint16(version))
	h = binary.BigEndian.AppendUint32(h, uint32(corr))
	h = binary.BigEndian.AppendUint16(h, uint16(len("e2e-raw")))
	h = append(h, "e2e-raw"...)
	if flexible {
		h = append(h, 0) // no tagged fields
	}
	h = append(h, body...)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(h))), h...)
}

// readFrame reads one size-prefixed response within replyTimeout.
func readFrame(c net.Conn) ([]byte, error) {
	if err := c.SetReadDeadline(time.Now().Add(replyTimeout)); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 64<<20 {
		return nil, fmt.Errorf("response size %d", n)
	}
	buf := make([]byte, n)
	_, err := io.ReadFull(c, buf)
	return buf, err
}

// isClosed reports whether err means the broker closed the connection.
func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		strings.Contains(fmt.Sprint(err), "connection reset")
}

// expectCloseOrReply sends frame and requires, within replyTimeout, either a
// closed connection or (when corr >= 0) a response carrying corr; never
// silence.
func expectCloseOrReply(t *testing.T, c net.Conn, frame []byte, corr int32) {
	t.Helper()
	if _, err := c.Write(frame); err != nil && !isClosed(err) {
		t.Fatalf("write: %v", err)
	}
	resp, err := readFrame(c)
	switch {
	case err == nil && corr >= 0 && len(resp) >= 4 && int32(binary.BigEndian.Uint32(resp)) == corr:
		t.Logf("answered: %d bytes, correlation id %d", len(resp), corr)
	case err == nil:
		t.Errorf("got a %d-byte response %x..., want a close or a reply to correlation id %d", len(resp), resp[:min(len(resp), 16)], corr)
	case isClosed(err):
		t.Logf("connection closed")
	case errors.Is(err, os.ErrDeadlineExceeded):
		t.Errorf("no reply and no close within %v", replyTimeout)
	default:
		t.Errorf("reading reply: %v", err)
	}
}

// encodeRecords returns the uncompressed records section of a batch holding
// values, with offset deltas 0..n-1 and no keys.
func encodeRecords(values [][]byte) []byte {
	var out []byte
	for i, v := range values {
		var r []byte
		r = append(r, 0)                          // attributes
		r = binary.AppendVarint(r, 0)             // timestamp delta
		r = binary.AppendVarint(r, int64(i))      // offset delta
		r = binary.AppendVarint(r, -1)            // null key
		r = binary.AppendVarint(r, int64(len(v))) // value
		r = append(r, v...)
		r = binary.AppendVarint(r, 0) // headers
		out = binary.AppendVarint(out, int64(len(r)))
		out = append(out, r...)
	}
	return out
}

// encodeBatch returns a valid uncompressed record batch v2 of values.
func encodeBatch(values [][]byte) []byte {
	now := time.Now().UnixMilli()
	rb := kmsg.RecordBatch{
		FirstOffset: 0, PartitionLeaderEpoch: -1, Magic: 2,
		LastOffsetDelta: int32(len(values) - 1), FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(values)), Records: encodeRecords(values),
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// produceRaw sends one batch to topic/partition with acks all and returns
// the partition's error code.
func produceRaw(t *testing.T, cl *kgo.Client, topic string, partition int32, batch []byte) int16 {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(t.Context(), cl)
	if err != nil {
		t.Fatalf("produce request: %v", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("produce response: %+v, want one topic with one partition", resp.Topics)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// TestBadInput throws malformed, oversized and unknown requests at the broker
// on raw connections, and bad batches through a client, and checks that each
// gets Kafka's answer or a closed connection, that the broker keeps serving a
// second client (kcat -L) after each, and that data produced before is
// unchanged.
func TestBadInput(t *testing.T) {
	requireKcat(t)
	b := StartBroker(t, "auto.create.topics.enable=false", "message.max.bytes=65536")
	const topic = "bad-input"
	b.CreateTopic(t, topic, 2)
	var in strings.Builder
	for i := range 500 {
		fmt.Fprintf(&in, "k%d:v%d\n", i, i)
	}
	runCmd(t, 30*time.Second, in.String(), "kcat", "-P", "-b", b.Addr, "-t", topic, "-K:", "-p", "0")
	before := kcatConsume(t, b.Addr, topic)
	if len(before[0]) != 500 {
		t.Fatalf("partition 0 holds %d records before the bad input, want 500", len(before[0]))
	}

	afterEach := func(t *testing.T) {
		t.Helper()
		b.RequireAlive(t)
		kcatMetadataOK(t, b.Addr)
	}
	// run stops the whole test once the broker has died.
	run := func(name string, fn func(t *testing.T)) {
		if !t.Run(name, fn) && !b.Alive() {
			t.Fatalf("the broker died in %s; output:\n%s", name, tailString(b.Output(), 8<<10))
		}
	}
	raw := func(name string, frame []byte, corr int32) {
		run(name, func(t *testing.T) {
			expectCloseOrReply(t, dialRaw(t, b.Addr), frame, corr)
			afterEach(t)
		})
	}

	garbage := make([]byte, 64)
	for i := range garbage {
		garbage[i] = 0xff
	}
	raw("garbage", append(binary.BigEndian.AppendUint32(nil, 64), garbage...), -1)
	raw("oversized", binary.BigEndian.AppendUint32(nil, 0x7fffffff), -1)
	raw("over-request-max", binary.BigEndian.AppendUint32(nil, 100<<20+1), -1)
	raw("negative-size", binary.BigEndian.AppendUint32(nil, 0xffffffff), -1)
	raw("zero-size", binary.BigEndian.AppendUint32(nil, 0), -1)
	raw("truncated-header", []byte{0, 0, 0, 3, 0, 3, 0}, -1)
	raw("unknown-api-key", requestFrame(9999, 0, 41, false, nil), 41)
	raw("produce-v1-no-topics", requestFrame(0, 1, 42, false, []byte{0, 1, 0, 0, 0, 0, 0, 0, 0, 0}), 42)
	raw("metadata-v99", requestFrame(3, 99, 43, true, []byte{0}), 43)
	raw("metadata-body-garbage", requestFrame(3, 1, 44, false, garbage), 44)
	raw("produce-body-truncated", requestFrame(0, 7, 45, false, []byte{0xff, 0xff, 0, 0}), 45)

	run("apiversions-v99", func(t *testing.T) {
		c := dialRaw(t, b.Addr)
		body := []byte{1, 1, 0} // empty compact client software name and version, no tags
		if _, err := c.Write(requestFrame(18, 99, 46, true, body)); err != nil {
			t.Fatalf("write: %v", err)
		}
		resp, err := readFrame(c)
		if err != nil {
			t.Fatalf("ApiVersions v99: %v; want an UNSUPPORTED_VERSION answer in v0 form", err)
		}
		if corr := int32(binary.BigEndian.Uint32(resp)); corr != 46 {
			t.Fatalf("correlation id %d, want 46", corr)
		}
		av := kmsg.NewPtrApiVersionsResponse()
		av.Version = 0
		if err := av.ReadFrom(resp[4:]); err != nil {
			t.Fatalf("decoding v0 ApiVersions response: %v", err)
		}
		if av.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Errorf("error code %d, want %d (UNSUPPORTED_VERSION)", av.ErrorCode, kerr.UnsupportedVersion.Code)
		}
		found := false
		for _, k := range av.ApiKeys {
			if k.ApiKey == 18 {
				found = true
				if k.MinVersion != 0 || k.MaxVersion != 4 {
					t.Errorf("ApiVersions range %d-%d, want 0-4", k.MinVersion, k.MaxVersion)
				}
			}
		}
		if !found {
			t.Errorf("v0 answer lists %d APIs but not ApiVersions (18)", len(av.ApiKeys))
		}
		afterEach(t)
	})

	run("half-frame-held-open", func(t *testing.T) {
		// A client that stalls mid-frame must not hold up anyone else.
		c := dialRaw(t, b.Addr)
		if _, err := c.Write(append(binary.BigEndian.AppendUint32(nil, 1000), make([]byte, 10)...)); err != nil {
			t.Fatalf("write: %v", err)
		}
		afterEach(t)
		c.Close()
	})

	run("random-frames", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range 50 {
			c := dialRaw(t, b.Addr)
			n := rng.IntN(200)
			buf := binary.BigEndian.AppendUint32(nil, uint32(n))
			for range n {
				buf = append(buf, byte(rng.UintN(256)))
			}
			if i%2 == 0 && n >= 4 { // plausible header: a known key, a random version
				binary.BigEndian.PutUint16(buf[4:], uint16(rng.IntN(61)))
			}
			_, _ = c.Write(buf) // the broker may close first
			_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			_, _ = io.Copy(io.Discard, c)
			c.Close()
		}
		afterEach(t)
	})

	cl := b.Client(t)
	run("crc-corrupt", func(t *testing.T) {
		batch := encodeBatch([][]byte{[]byte("corrupt-me"), []byte("x")})
		batch[len(batch)-5] ^= 0x01 // a byte of the last record, under the CRC
		if code := produceRaw(t, cl, topic, 0, batch); code != kerr.CorruptMessage.Code {
			t.Errorf("error code %d (%v), want CORRUPT_MESSAGE", code, kerr.ErrorForCode(code))
		}
		afterEach(t)
	})
	run("over-max-message-bytes", func(t *testing.T) {
		batch := encodeBatch([][]byte{make([]byte, 70000)})
		if code := produceRaw(t, cl, topic, 0, batch); code != kerr.MessageTooLarge.Code {
			t.Errorf("error code %d (%v), want MESSAGE_TOO_LARGE", code, kerr.ErrorForCode(code))
		}
		afterEach(t)
	})
	run("unknown-topic-no-autocreate", func(t *testing.T) {
		batch := encodeBatch([][]byte{[]byte("nowhere")})
		if code := produceRaw(t, cl, "no-such-topic", 0, batch); code != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("error code %d (%v), want UNKNOWN_TOPIC_OR_PARTITION", code, kerr.ErrorForCode(code))
		}
		afterEach(t)
	})
	run("unknown-partition", func(t *testing.T) {
		batch := encodeBatch([][]byte{[]byte("nowhere")})
		if code := produceRaw(t, cl, topic, 7, batch); code != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("error code %d (%v), want UNKNOWN_TOPIC_OR_PARTITION", code, kerr.ErrorForCode(code))
		}
		afterEach(t)
	})
	run("valid-raw-batch", func(t *testing.T) {
		// The hand-built batch is accepted when intact, so the rejections
		// above are for the faults put in, not for the encoding.
		batch := encodeBatch([][]byte{[]byte("raw-1"), []byte("raw-2")})
		if code := produceRaw(t, cl, topic, 1, batch); code != 0 {
			t.Errorf("error code %d (%v), want none", code, kerr.ErrorForCode(code))
		}
	})

	after := kcatConsume(t, b.Addr, topic)
	checkRecords(t, 0, after[0], before[0])
	want1 := []kcatRecord{{1, 0, "", "raw-1"}, {1, 1, "", "raw-2"}}
	checkRecords(t, 1, after[1], want1)
}
