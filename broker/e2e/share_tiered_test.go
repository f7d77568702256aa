package e2e

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/strataapi"
	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/segment/poll"
	"github.com/stratastream/strata/tiering/miniotest"
)

// A share group started at the earliest offset of a topic whose history
// is only in the bucket drains it through the broker's remote reader: a
// real broker process tiering to a real MinIO, franz-go share consumers.

const (
	shareTierTopic   = "share-tiered"
	shareTierRecords = 20000 // of about 130 B each: 2.6 MB of log
	shareTierMembers = 2
)

// shareTierValue is record i's value: its offset first, so a delivery
// names the record it should be.
func shareTierValue(i int) []byte { return recordValue(i, 100) }

func TestShareGroupDrainsTieredTopicMinIO(t *testing.T) {
	if strataBin == "" {
		t.Skip("end-to-end tests do not run with -short")
	}
	srv := miniotest.Start(t)
	bucket := srv.NewBucket(t)
	t.Setenv("AWS_ACCESS_KEY_ID", miniotest.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", miniotest.SecretKey)
	b := StartBroker(t,
		"remote.storage.s3.endpoint="+srv.Endpoint(),
		"remote.storage.s3.bucket="+bucket,
		"log.retention.check.interval.ms=200",
		"strata.remote.poll.interval.ms=100",
		"strata.remote.retry.max.ms=1000",
		"offsets.topic.num.partitions=1",
		"share.coordinator.state.topic.num.partitions=1",
	)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchMaxBytes(16384), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	tid := createShareTierTopic(t, cl)
	produceShareTier(t, cl)
	waitHistoryRemote(t, b, srv, bucket, tid)
	if misses := shareTierCacheMisses(t, b.Addr); misses != 0 {
		t.Fatalf("the chunk cache missed %d times before the share group read: something else read the bucket", misses)
	}

	const group = "share-tiered-g"
	setShareGroupConfigs(t, cl, group, map[string]string{"share.auto.offset.reset": "earliest"})
	start := time.Now()
	d := drainShareTier(t, b.Addr, group)
	t.Logf("%d share consumers drained %d records from the bucket in %v", shareTierMembers, shareTierRecords, time.Since(start).Round(time.Millisecond))
	d.check(t)

	// Every acknowledgement reached the share partition: its state, read
	// back from the share coordinator, starts at the log end.
	var st kmsg.ReadShareGroupStateResponseTopicPartition
	if !poll.For(tierWait(), func() bool {
		st, err = readShareState(cl, group, tid, 0)
		return err == nil && st.StartOffset == shareTierRecords
	}) {
		t.Fatalf("share partition state starts at %d (%v), want %d", st.StartOffset, err, shareTierRecords)
	}
	if misses := shareTierCacheMisses(t, b.Addr); misses == 0 {
		t.Fatal("the chunk cache had no misses for the topic: the share group did not read the bucket")
	}
}

// createShareTierTopic creates the one-partition tiered topic: small
// segments rolled every second, one byte and one second of local
// retention, so the whole log leaves local disk once uploaded.
func createShareTierTopic(t *testing.T, cl *kgo.Client) [16]byte {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = shareTierTopic, 1, 1
	for k, v := range map[string]string{"remote.storage.enable": "true", "segment.bytes": "262144", "segment.ms": "1000",
		"local.retention.bytes": "1", "local.retention.ms": "1000", "file.delete.delay.ms": "0"} {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(tierCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Topics[0].ErrorCode; c != 0 {
		t.Fatalf("create topic: error %d %v", c, resp.Topics[0].ErrorMessage)
	}
	return resp.Topics[0].TopicID
}

// produceShareTier produces the topic's records, acks=all.
func produceShareTier(t *testing.T, cl *kgo.Client) {
	t.Helper()
	rs := make([]*kgo.Record, shareTierRecords)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: shareTierTopic, Partition: 0, Key: []byte(tierKey(i)), Value: shareTierValue(i)}
	}
	if err := cl.ProduceSync(tierCtx(t), rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	for i, r := range rs {
		if r.Offset != int64(i) {
			t.Fatalf("record %d landed at offset %d", i, r.Offset)
		}
	}
}

// waitHistoryRemote waits until the bucket's manifest covers the whole
// log from offset 0 and the broker's partition directory holds only the
// empty active segment at the log end.
func waitHistoryRemote(t *testing.T, b *Broker, srv *miniotest.Server, bucket string, tid [16]byte) {
	t.Helper()
	mc := srv.Client()
	var why string
	if !poll.For(tierWait(), func() bool {
		m := readManifestOf(t, mc, bucket, shareTierTopic, coord.TopicID(tid).String(), 0)
		segs := partitionSegments(t, b, shareTierTopic, 0)
		switch {
		case m == nil:
			why = "no manifest"
		case m.LogStartOffset != 0 || m.EndOffset() != shareTierRecords:
			why = fmt.Sprintf("remote log [%d, %d)", m.LogStartOffset, m.EndOffset())
		case len(segs) != 1 || segs[0] != shareTierRecords:
			why = fmt.Sprintf("local segments %v", segs)
		default:
			return true
		}
		return false
	}) {
		t.Fatalf("history not only in the bucket after %v: %s", tierWait(), why)
	}
}

// shareTierCacheMisses is the broker's chunk cache misses for the
// topic's partition, from DescribeTieredStorage.
func shareTierCacheMisses(t *testing.T, addr string) int64 {
	t.Helper()
	resp := describeTiered(t, addr, []strataapi.DescribeTieredStorageRequestTopic{{Topic: shareTierTopic, Partitions: []int32{0}}})
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("DescribeTieredStorage of %s: %+v", shareTierTopic, resp.Topics)
	}
	return resp.Topics[0].Partitions[0].CacheMisses
}

// shareTierDrain is what the share consumers saw.
type shareTierDrain struct {
	all        context.CancelFunc // called once every record was delivered
	mu         sync.Mutex
	deliveries map[int64]int // by offset
	bad        []string      // deliveries whose key or value is not the record's
	ackErrs    []error
}

func (d *shareTierDrain) delivered(r *kgo.Record) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deliveries[r.Offset]++
	if len(d.deliveries) == shareTierRecords {
		d.all()
	}
	i := int(r.Offset)
	if r.Partition != 0 || string(r.Key) != tierKey(i) || !bytes.Equal(r.Value, shareTierValue(i)) {
		d.bad = append(d.bad, fmt.Sprintf("partition %d offset %d key %q value %.20q", r.Partition, r.Offset, r.Key, r.Value))
	}
}

func (d *shareTierDrain) distinct() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.deliveries)
}

func (d *shareTierDrain) onAck(_ *kgo.Client, rs kgo.ShareAckResults) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range rs {
		if r.Err != nil {
			d.ackErrs = append(d.ackErrs, fmt.Errorf("%s/%d: %w", r.Topic, r.Partition, r.Err))
		}
	}
}

// check fails unless every record was delivered once, as produced, and
// every acknowledgement succeeded.
func (d *shareTierDrain) check(t *testing.T) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range int64(shareTierRecords) {
		if n := d.deliveries[i]; n != 1 {
			t.Errorf("record %d delivered %d times, want 1", i, n)
		}
	}
	if len(d.deliveries) != shareTierRecords {
		t.Errorf("%d offsets delivered, want %d", len(d.deliveries), shareTierRecords)
	}
	for _, s := range d.bad {
		t.Errorf("delivery not as produced: %s", s)
	}
	for _, err := range d.ackErrs {
		t.Errorf("acknowledgement failed: %v", err)
	}
}

// drainShareTier runs shareTierMembers franz-go share consumers of group
// that accept every record, until every record was delivered (bounded
// by tierWait), and flushes their acknowledgements.
func drainShareTier(t *testing.T, addr, group string) *shareTierDrain {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), tierWait())
	defer cancel()
	// Polls end once every record was delivered, or at the bound.
	pollCtx, all := context.WithCancel(ctx)
	defer all()
	d := &shareTierDrain{all: all, deliveries: map[int64]int{}}
	var wg sync.WaitGroup
	clients := make([]*kgo.Client, shareTierMembers)
	for i := range clients {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup(group), kgo.ConsumeTopics(shareTierTopic),
			kgo.FetchMaxWait(200*time.Millisecond), kgo.ShareAckCallback(d.onAck))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		clients[i] = cl
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pollCtx.Err() == nil {
				fs := cl.PollRecords(pollCtx, 0)
				fs.EachRecord(func(r *kgo.Record) {
					d.delivered(r)
					r.Ack(kgo.AckAccept)
				})
			}
		}()
	}
	wg.Wait()
	if n := d.distinct(); n < shareTierRecords {
		t.Fatalf("%d of %d records delivered within %v", n, shareTierRecords, tierWait())
	}
	for i, cl := range clients {
		if err := cl.FlushAcks(ctx); err != nil {
			t.Fatalf("consumer %d: flushing acknowledgements: %v", i, err)
		}
	}
	return d
}
