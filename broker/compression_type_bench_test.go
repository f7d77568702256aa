package broker

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/segment"
)

// BenchmarkProduceRecompress produces one snappy batch of 256 records of
// 1 KiB (JSON-like, compressible) per request, acks=1, to an in-process
// broker: "producer" is the plain append (the batch stored as sent), the
// others recompress it on append. MB/s is of uncompressed record bytes;
// cpu-s/GB is the process's user+system CPU (broker and client) per GB of
// them, so the recompression's cost is the difference to "producer".
func BenchmarkProduceRecompress(b *testing.B) {
	recs := make([]segment.Record, 256)
	raw := 0
	for i := range recs {
		v := []byte(fmt.Sprintf(`{"order":%d,"customer":"c-%05d","items":[`, i, i*7919%100000))
		for len(v) < 1000 {
			v = fmt.Appendf(v, `{"sku":"s-%04d","qty":%d,"price":%d.%02d},`, len(v)*31%10000, len(v)%9+1, len(v)%500, len(v)%100)
		}
		v = append(v, "]}"...)
		recs[i] = segment.Record{Timestamp: 1700000000000 + int64(i), Key: fmt.Appendf(nil, "order-%d", i), Value: v}
		raw += len(v) + len(recs[i].Key)
	}
	batch, err := segment.BuildBatch(segment.BatchSpec{Codec: segment.CodecSnappy, Records: recs})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("batch: %d records, %d bytes raw, %d bytes snappy", len(recs), raw, len(batch))
	_, seeds := startTxnBenchServer(b, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	types := []string{"producer", "uncompressed", "lz4", "zstd", "gzip"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, typ := range types {
		topic := "bench-" + typ
		createTxnBenchTopic(b, seeds, topic, 1, 1)
		alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
		ar := kmsg.NewIncrementalAlterConfigsRequestResource()
		ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		ar.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "compression.type", Value: kmsg.StringPtr(typ)}}
		alter.Resources = append(alter.Resources, ar)
		if resp, err := alter.RequestWith(ctx, cl); err != nil || resp.Resources[0].ErrorCode != 0 {
			b.Fatalf("compression.type=%s: %v %+v", typ, err, resp)
		}
	}
	for _, typ := range types {
		b.Run(typ, func(b *testing.B) {
			topic := "bench-" + typ
			req := produceRequest(topic, 0, batch)
			req.Acks = 1
			br := cl.Broker(0)
			b.SetBytes(int64(raw))
			cpu0 := cpuTime(b)
			b.ResetTimer()
			for range b.N {
				resp, err := br.Request(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				if c := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; c != 0 {
					b.Fatal(kerr.ErrorForCode(c))
				}
			}
			b.StopTimer()
			gb := float64(b.N) * float64(raw) / 1e9
			b.ReportMetric((cpuTime(b)-cpu0).Seconds()/gb, "cpu-s/GB")
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
