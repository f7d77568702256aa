package broker

import (
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkFetchDownConvert compares, in one run, consuming a partition
// from the page cache over loopback as a current consumer does (Fetch
// v12: the stored record batches v2, zero copy) and as consumers from
// before Kafka 0.11 do (Fetch v3 and v2, a kcat with
// broker.version.fallback=0.10.0: down-converted to magic 1 in memory;
// Fetch v1: magic 0), for uncompressed and lz4 batches of 1000 records of
// 1000 bytes, 1 MiB per fetch. MB/s counts the record values delivered
// (the messages' overhead differs between formats); cpu-s/GB is the
// process's CPU time (getrusage: broker and the client that walks the
// responses) per GB of values:
//
//	go test ./broker -run '^$' -bench 'BenchmarkFetchDownConvert$' -benchtime 3s
func BenchmarkFetchDownConvert(b *testing.B) {
	for _, codec := range []segment.Codec{segment.CodecNone, segment.CodecLZ4} {
		s, end := downConvertBenchServer(b, codec)
		for _, version := range []int16{12, 3, 2, 1} {
			b.Run(codec.String()+"/v"+itoa64(int64(version)), func(b *testing.B) { benchFetchVersion(b, s, version, end) })
		}
	}
}

const benchValueSize = 1000

// downConvertBenchServer starts a broker whose topic "bench" holds about
// 64 MB of batches of codec, values of pseudo-random letters.
func downConvertBenchServer(b *testing.B, codec segment.Codec) (*Server, int64) {
	cfg, err := ConfigFromProperties(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "metrics.listener": "", "log.dirs": b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := NewServer(cfg)
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = s.Serve() }()
	b.Cleanup(func() { _ = s.Shutdown(b.Context()) })
	if _, err := s.createTopic(createTopicSpec{name: "bench", partitions: 1, replFactor: 1}); err != nil {
		b.Fatal(err)
	}
	p := s.topic("bench").parts[0]
	x := uint64(1)
	for p.log.LogEndOffset() < 64000 {
		spec := segment.BatchSpec{Codec: codec}
		for i := 0; i < 1000; i++ {
			v := make([]byte, benchValueSize)
			for j := range v {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				v[j] = 'a' + byte(x%26)
			}
			spec.Records = append(spec.Records, segment.Record{Timestamp: 1_700_000_000_000, Key: []byte("key"), Value: v})
		}
		batch, err := segment.BuildBatch(spec)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.log.Append(batch, segment.AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	p.repl.AdvanceHighWatermark()
	return s, p.log.HighWatermark()
}

func benchFetchVersion(b *testing.B, s *Server, version int16, end int64) {
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	fmtr := kmsg.NewRequestFormatter()
	req := fetchRequest("bench", 0, 0, 1<<20)
	req.Version = version
	var buf []byte
	var offset, records, wire int64
	cpu0 := processCPU(b)
	conv0 := s.Stats().FetchConvertedRecords
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req.Topics[0].Partitions[0].FetchOffset = offset
		if _, err := c.Write(fmtr.AppendRequest(nil, req, int32(i))); err != nil {
			b.Fatal(err)
		}
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			b.Fatal(err)
		}
		n := int(binary.BigEndian.Uint32(size[:]))
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
		wire += int64(n)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		body := buf[4:] // after the correlation id
		if resp.IsFlexible() {
			body = body[1:] // and the header's (empty) tagged fields
		}
		if err := resp.ReadFrom(body); err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			b.Fatalf("fetch v%d response: %v", version, err)
		}
		next := nextOffsetIn(b, resp.Topics[0].Partitions[0].RecordBatches, version)
		if next <= offset {
			b.Fatalf("fetch v%d at %d: no progress (error %d)", version, offset, resp.Topics[0].Partitions[0].ErrorCode)
		}
		records += next - offset
		if offset = next; offset >= end {
			offset = 0
		}
	}
	b.StopTimer()
	payload := float64(records * benchValueSize)
	b.SetBytes(records * benchValueSize / int64(b.N))
	b.ReportMetric((processCPU(b)-cpu0).Seconds()/(payload/1e9), "cpu-s/GB")
	b.ReportMetric(float64(wire)/payload, "wire/value-bytes")
	if version < 4 && s.Stats().FetchConvertedRecords == conv0 {
		b.Fatal("nothing was down-converted")
	}
}

// nextOffsetIn walks a response's records (batches v2, or a message set)
// and returns the offset after the last whole one.
func nextOffsetIn(b *testing.B, data []byte, version int16) int64 {
	next := int64(-1)
	for len(data) >= 12 {
		off := int64(binary.BigEndian.Uint64(data))
		size := int(binary.BigEndian.Uint32(data[8:]))
		if 12+size > len(data) {
			break
		}
		if version >= 4 {
			h, err := segment.ParseHeader(data)
			if err != nil {
				b.Fatal(err)
			}
			next = h.NextOffset()
		} else {
			next = off + 1 // a wrapper's offset is its last inner message's
		}
		data = data[12+size:]
	}
	return next
}
