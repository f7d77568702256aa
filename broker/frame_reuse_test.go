package broker

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratastream/strata/broker/bufpool"
)

// TestReusedFramesReadWhole reads frames of many sizes one after the other,
// giving each back to the pool, so later frames are read into buffers that
// held earlier ones: each comes out exactly as sent, none longer or
// shorter, whatever the buffer held before.
func TestReusedFramesReadWhole(t *testing.T) {
	sizes := []int{8, 100, 1 << 10, 5000, frameFirstChunk, frameFirstChunk + 1, 200 << 10, 1 << 20, 3<<20 + 7, 100, 8}
	for round := range 3 {
		for i, size := range sizes {
			want := bytes.Repeat([]byte{byte(round*len(sizes) + i + 1)}, size)
			got, err := readFrameBody(bytes.NewReader(want), int32(size))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("round %d, frame of %d bytes: err %v, intact %v (len %d)", round, size, err, bytes.Equal(got, want), len(got))
			}
			bufpool.Put(got)
		}
	}
}

// TestProduceFramesReusedKeepRecords produces records of many sizes from
// two franz-go clients at once, with compressed and uncompressed batches,
// so produce frames are read into buffers that held other clients'
// frames; every record is then consumed and compared with what was sent:
// a frame given back too early, or a stale byte past a frame's end, would
// change a value or fail a CRC.
func TestProduceFramesReusedKeepRecords(t *testing.T) {
	s := startServer(t, nil)
	admin := newClient(t, s)
	createTopic(t, admin, "reuse", 3, nil)
	ctx := testCtx(t)
	value := func(producer, i int) []byte {
		size := 1 + (i*7919)%(300<<10)
		return bytes.Repeat([]byte{byte(producer*100 + i%97)}, size)
	}
	const perProducer = 300
	errs := make(chan error, 2)
	for pr, codec := range []kgo.CompressionCodec{kgo.NoCompression(), kgo.Lz4Compression()} {
		go func() {
			cl := newClient(t, s, kgo.DefaultProduceTopic("reuse"), kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(0))
			var first error
			for i := range perProducer {
				key := []byte(fmt.Sprintf("%d/%d", pr, i))
				if err := cl.ProduceSync(ctx, &kgo.Record{Key: key, Value: value(pr, i)}).FirstErr(); err != nil && first == nil {
					first = fmt.Errorf("producer %d record %d: %w", pr, i, err)
				}
			}
			errs <- first
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	cl := newClient(t, s, kgo.ConsumeTopics("reuse"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(4<<20))
	seen := map[string]bool{}
	for len(seen) < 2*perProducer {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consume after %d records: %v", len(seen), err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			var pr, i int
			if _, err := fmt.Sscanf(string(r.Key), "%d/%d", &pr, &i); err != nil {
				t.Fatalf("record key %q: %v", r.Key, err)
			}
			if !bytes.Equal(r.Value, value(pr, i)) {
				t.Fatalf("record %s: value of %d bytes differs from the %d sent", r.Key, len(r.Value), len(value(pr, i)))
			}
			seen[string(r.Key)] = true
		})
	}
}
