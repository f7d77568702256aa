package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/segment"
)

// TestCompressionTypeRealClients: franz-go produces snappy batches to a
// topic whose compression.type is zstd; the stored batches are zstd
// (read raw with Fetch), kcat (librdkafka) consumes every record as sent;
// IncrementalAlterConfigs turns the topic to "producer" and later batches
// keep snappy.
func TestCompressionTypeRealClients(t *testing.T) {
	requireKcat(t)
	b := StartBroker(t)
	const topic = "ct-zstd"
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ProducerBatchCompression(kgo.SnappyCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	zstd := "zstd"
	if resp, err := adm.CreateTopics(ctx, 1, 1, map[string]*string{"compression.type": &zstd}, topic); err != nil || resp.Error() != nil {
		t.Fatalf("create: %v %v", err, resp.Error())
	}
	produce := func(from, n int) {
		t.Helper()
		var rs []*kgo.Record
		for i := from; i < from+n; i++ {
			rs = append(rs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("value-%d-%080d", i, i))})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	produce(0, 500)
	if codecs := storedCodecs(ctx, t, cl, topic); len(codecs) != 1 || codecs[segment.CodecZstd] == 0 {
		t.Fatalf("stored codecs %v, want only zstd", codecs)
	}

	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "compression.type", Value: kmsg.StringPtr("producer")}}, topic); err != nil {
		t.Fatalf("IncrementalAlterConfigs: %v", err)
	}
	produce(500, 100)
	if codecs := storedCodecs(ctx, t, cl, topic); codecs[segment.CodecSnappy] == 0 || codecs[segment.CodecZstd] == 0 {
		t.Fatalf("after compression.type=producer: stored codecs %v, want zstd then snappy", codecs)
	}

	got := kcatConsume(t, b.Addr, topic)[0]
	if len(got) != 600 {
		t.Fatalf("kcat read %d records, want 600", len(got))
	}
	for i, r := range got {
		if r.Offset != int64(i) || r.Key != fmt.Sprintf("k%d", i) || r.Value != fmt.Sprintf("value-%d-%080d", i, i) {
			t.Fatalf("kcat record %d: %+v", i, r)
		}
	}
	b.RequireAlive(t)
}

// topicID is topic's id from metadata (Fetch v13+ names topics by id).
func topicID(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) [16]byte {
	t.Helper()
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil || md.Topics[topic].Err != nil {
		t.Fatalf("metadata %s: %v %v", topic, err, md.Topics[topic].Err)
	}
	return md.Topics[topic].ID
}

// storedCodecs fetches topic/0 from offset 0 to its end with raw Fetch
// requests and counts the stored batches by codec.
func storedCodecs(ctx context.Context, t *testing.T, cl *kgo.Client, topic string) map[segment.Codec]int {
	t.Helper()
	out := map[segment.Codec]int{}
	for off, rounds := int64(0), 0; rounds < 1000; rounds++ {
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis, req.MaxBytes, req.ReplicaID = 0, 1<<20, -1
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = topic, topicID(ctx, t, cl, topic)
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = 0, off, 1<<20
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("fetch at %d: error %d", off, p.ErrorCode)
		}
		start := off
		if err := segment.SplitBatches(p.RecordBatches, func(h segment.Header, b []byte) error {
			if _, err := segment.ValidateBatch(b); err != nil {
				return err
			}
			out[h.Compression()]++
			off = h.NextOffset()
			return nil
		}); err != nil {
			t.Fatalf("fetched batches: %v", err)
		}
		if off == start || off >= p.HighWatermark {
			return out
		}
	}
	t.Fatal("topic not read to its end in 1000 fetches")
	return nil
}
