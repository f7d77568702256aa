package broker

import (
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"

	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkFetch reads a partition from the page cache over loopback with
// raw Fetch requests, by response size, with zero copy on and off. The
// client discards the bytes, so the numbers are the broker's send path.
func BenchmarkFetch(b *testing.B) {
	for _, zc := range []bool{true, false} {
		for _, size := range []int{64 << 10, 1 << 20, 16 << 20} {
			name := "zerocopy=" + strconv.FormatBool(zc) + "/" + strconv.Itoa(size>>10) + "KiB"
			b.Run(name, func(b *testing.B) { benchFetch(b, zc, int32(size)) })
		}
	}
}

func benchFetch(b *testing.B, zeroCopy bool, maxBytes int32) {
	cfg, err := ConfigFromProperties(map[string]string{
		"listeners":              "PLAINTEXT://127.0.0.1:0",
		"log.dirs":               b.TempDir(),
		"strata.fetch.zero.copy": strconv.FormatBool(zeroCopy),
	})
	if err != nil {
		b.Fatal(err)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := NewServer(cfg)
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = s.Serve() }()
	defer func() { _ = s.Shutdown(b.Context()) }()
	if _, err := s.createTopic(createTopicSpec{name: "bench", partitions: 1, replFactor: 1}); err != nil {
		b.Fatal(err)
	}
	log := s.topic("bench").parts[0].log
	spec := segment.BatchSpec{}
	for i := 0; i < 1000; i++ {
		spec.Records = append(spec.Records, segment.Record{Value: make([]byte, 1000)})
	}
	for log.LogEndOffset() < 64000 { // about 64 MB
		batch, err := segment.BuildBatch(spec)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := log.Append(batch, segment.AppendOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	end := log.LogEndOffset()

	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	fmtr := kmsg.NewRequestFormatter()
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.MaxBytes = maxBytes
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "bench"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = maxBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	buf := make([]byte, 1<<20)
	var offset int64
	var total int64
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
		n := int64(binary.BigEndian.Uint32(size[:]))
		if _, err := io.CopyBuffer(io.Discard, io.LimitReader(c, n), buf); err != nil {
			b.Fatal(err)
		}
		total += n
		// Advance by roughly what was fetched; wrap at the end.
		offset += max(n/1070, 1000)
		offset -= offset % 1000
		if offset >= end {
			offset = 0
		}
	}
	b.SetBytes(total / int64(b.N))
	st := s.Stats()
	b.ReportMetric(float64(st.FetchZeroCopyBytes)/float64(b.N), "sendfile-B/op")
}
