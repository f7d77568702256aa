package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/segment"
)

// BenchmarkProduceNoQuota is the cost of the client quotas on the produce
// path: small acks=1 produce requests (16 records of 100 bytes) to an
// in-process broker, "none" without any quota set (the path checks one
// flag), "other-client" with a producer quota set for another client id
// (the quota is resolved, from a cache, to none). Compare "none" with
// the same benchmark before the quotas existed.
func BenchmarkProduceNoQuota(b *testing.B) {
	recs := make([]segment.Record, 16)
	for i := range recs {
		recs[i] = segment.Record{Timestamp: 1700000000000 + int64(i), Value: fmt.Appendf(nil, "%0100d", i)}
	}
	batch, err := segment.BuildBatch(segment.BatchSpec{Records: recs})
	if err != nil {
		b.Fatal(err)
	}
	_, seeds := startTxnBenchServer(b, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID("bench"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	createTxnBenchTopic(b, seeds, "bench-quota", 1, 1)
	run := func(b *testing.B) {
		req := produceRequest("bench-quota", 0, batch)
		req.Acks = 1
		br := cl.Broker(0)
		b.SetBytes(int64(len(batch)))
		b.ReportAllocs()
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
	}
	b.Run("none", run)
	b.Run("other-client", func(b *testing.B) {
		req := kmsg.NewPtrAlterClientQuotasRequest()
		e := kmsg.NewAlterClientQuotasRequestEntry()
		ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
		ent.Type, ent.Name = "client-id", kmsg.StringPtr("someone-else")
		op := kmsg.NewAlterClientQuotasRequestEntryOp()
		op.Key, op.Value = "producer_byte_rate", 1024
		e.Entity, e.Ops = append(e.Entity, ent), append(e.Ops, op)
		req.Entries = append(req.Entries, e)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Entries) != 1 || resp.Entries[0].ErrorCode != 0 {
			b.Skipf("AlterClientQuotas: %v", err)
		}
		run(b)
	})
}
