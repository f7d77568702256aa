package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRestartAfterKill kills the broker with SIGKILL while a franz-go
// producer (idempotence off) is writing, restarts it on the same data
// directory and port, and checks that every acknowledged record is at its
// acknowledged offset with its bytes, that the log holds nothing but records
// that were sent, in send order, and that the recovered log takes appends at
// the right offsets.
//
// The flush subtest runs with log.flush.interval.messages=1: each batch is
// fsynced before its acknowledgement. A SIGKILL keeps the page cache, so at
// this level both subtests expect everything acknowledged; that the fsync
// happens before the response is checked by the broker's own test hook.
func TestRestartAfterKill(t *testing.T) {
	for _, tc := range []struct {
		name      string
		acks      kgo.Acks
		overrides []string
	}{
		{"acks1", kgo.LeaderAck(), nil},
		{"acksAll-flush1", kgo.AllISRAcks(), []string{"log.flush.interval.messages=1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const topic, partitions, rounds = "crash", 3, 2
			// Small segments, so that the kill lands after several rolls
			// and recovery has more than one segment to look at.
			b := StartBroker(t, append([]string{"log.segment.bytes=1048576"}, tc.overrides...)...)
			b.CreateTopic(t, topic, partitions)

			var acked []ackedRecord
			sent := 0
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
			for round := range rounds {
				// Kill at a random point: after 20k to 200k acknowledgements,
				// or after 2 s, whichever comes first.
				killAt := 20_000 + rng.IntN(180_000)
				a, n := produceUntilKilled(t, b, tc.acks, topic, partitions, sent, killAt)
				acked, sent = append(acked, a...), n
				b.Restart(t)
				checkAfterRestart(t, b, topic, partitions, acked, sent, round == rounds-1)
			}
		})
	}
}

// ackedRecord is one acknowledged record: its index i and where it went.
type ackedRecord struct {
	partition int32
	offset    int64
	i         int
}

// produceUntilKilled produces records i = first, first+1, ... (record i to
// partition i % partitions, value recordValue(i, 200)) with the given acks,
// SIGKILLs the broker after 2 s or killAt acknowledgements, and returns the
// acknowledged records and the index after the last record handed to the
// client.
func produceUntilKilled(t *testing.T, b *Broker, acks kgo.Acks, topic string, partitions, first, killAt int) ([]ackedRecord, int) {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(b.Addr),
		kgo.DisableIdempotentWrite(),
		kgo.RequiredAcks(acks),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(time.Millisecond),
		kgo.MaxBufferedRecords(5000),
		kgo.RecordDeliveryTimeout(5*time.Second),
		kgo.ProduceRequestTimeout(5*time.Second),
	)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	var (
		mu       sync.Mutex
		acked    []ackedRecord
		errCount int
		firstErr error
		wg       sync.WaitGroup
	)
	enough := make(chan struct{})
	var enoughOnce sync.Once
	sent := first
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := first; ctx.Err() == nil; i++ {
			r := &kgo.Record{Topic: topic, Partition: int32(i % partitions), Key: recordKey(i), Value: recordValue(i, 200)}
			wg.Add(1)
			cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				defer wg.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errCount++
					if firstErr == nil {
						firstErr = err
					}
					return
				}
				acked = append(acked, ackedRecord{r.Partition, r.Offset, i})
				if len(acked) >= killAt {
					enoughOnce.Do(func() { close(enough) })
				}
			})
			sent = i + 1
		}
	}()

	start := time.Now()
	select {
	case <-enough:
	case <-time.After(2 * time.Second):
	}
	mu.Lock()
	before := len(acked)
	mu.Unlock()
	if before == 0 {
		b.RequireAlive(t)
		t.Fatalf("no record acknowledged in %v; first error: %v", time.Since(start), firstErr)
	}
	b.Kill(t)
	cancel()
	<-produced

	closed := make(chan struct{})
	go func() {
		cl.Close() // fails what is still buffered
		wg.Wait()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatalf("producer did not settle within 30s of the kill")
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("killed after %v: %d records sent, %d acknowledged (%d before the kill), %d failed (first: %v)",
		time.Since(start).Round(time.Millisecond), sent-first, len(acked), before, errCount, firstErr)
	return acked, sent
}

// checkAfterRestart reads every partition of the restarted broker and
// checks the acknowledged records and the log's contents; with appendAfter
// it then checks that the recovered log takes appends at its end.
func checkAfterRestart(t *testing.T, b *Broker, topic string, partitions int, acked []ackedRecord, sent int, appendAfter bool) {
	t.Helper()
	ends := listEndOffsets(t, b, topic, partitions)
	logs := readPartitions(t, b, topic, ends)

	for p, recs := range logs {
		last := -1
		for off, r := range recs {
			i, ok := indexOf(r, sent)
			if !ok {
				t.Fatalf("partition %d offset %d: key %x value %.40q is not a record that was sent", p, off, r.Key, r.Value)
			}
			if i%partitions != int(p) {
				t.Fatalf("partition %d offset %d: record %d belongs to partition %d", p, off, i, i%partitions)
			}
			if i <= last {
				t.Fatalf("partition %d offset %d: record %d after record %d; send order not kept", p, off, i, last)
			}
			last = i
		}
	}
	lost := 0
	for _, a := range acked {
		recs := logs[a.partition]
		if a.offset >= int64(len(recs)) {
			if lost++; lost <= 5 {
				t.Errorf("record %d acknowledged at %d/%d is gone: partition ends at %d", a.i, a.partition, a.offset, len(recs))
			}
			continue
		}
		r := recs[a.offset]
		if !bytes.Equal(r.Key, recordKey(a.i)) || !bytes.Equal(r.Value, recordValue(a.i, 200)) {
			if lost++; lost <= 5 {
				t.Errorf("record %d acknowledged at %d/%d: found key %x value %.40q instead", a.i, a.partition, a.offset, r.Key, r.Value)
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged records lost or changed after SIGKILL and restart (end offsets %v)", lost, len(acked), ends)
	}
	t.Logf("after restart: end offsets %v hold all %d acknowledged records", ends, len(acked))

	if !appendAfter {
		return
	}
	cl := b.Client(t, kgo.DisableIdempotentWrite(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(partitions) {
		r := &kgo.Record{Topic: topic, Partition: p, Value: []byte("after-restart")}
		res := cl.ProduceSync(t.Context(), r)
		if err := res.FirstErr(); err != nil {
			t.Fatalf("produce to partition %d after restart: %v", p, err)
		}
		if r.Offset != ends[p] {
			t.Errorf("partition %d: append after restart at offset %d, want %d", p, r.Offset, ends[p])
		}
	}
}

// indexOf recovers i from a record written by produceUntilKilled, checking
// its value.
func indexOf(r *kgo.Record, sent int) (int, bool) {
	if len(r.Key) != 8 {
		return 0, false
	}
	i := int(binary.BigEndian.Uint64(r.Key))
	if i < 0 || i >= sent || !bytes.Equal(r.Value, recordValue(i, 200)) {
		return 0, false
	}
	return i, true
}

// listEndOffsets returns the latest offset (high watermark) of each
// partition, via ListOffsets.
func listEndOffsets(t testing.TB, b *Broker, topic string, partitions int) map[int32]int64 {
	t.Helper()
	cl := b.Client(t)
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range int32(partitions) {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p
		rp.CurrentLeaderEpoch = -1
		rp.Timestamp = -1 // latest
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("ListOffsets: %v", err)
	}
	ends := map[int32]int64{}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				t.Fatalf("ListOffsets %s/%d: %v", tp.Topic, p.Partition, err)
			}
			ends[p.Partition] = p.Offset
		}
	}
	if len(ends) != partitions {
		t.Fatalf("ListOffsets: %d partitions answered, want %d", len(ends), partitions)
	}
	return ends
}

// readPartitions consumes each partition from its start up to ends[p] and
// returns the records by partition, indexed by offset (the log start must be
// 0 and offsets dense: no compaction here).
func readPartitions(t testing.TB, b *Broker, topic string, ends map[int32]int64) map[int32][]*kgo.Record {
	t.Helper()
	offsets := map[int32]kgo.Offset{}
	logs := map[int32][]*kgo.Record{}
	remaining := 0
	for p, end := range ends {
		logs[p] = nil
		if end > 0 {
			offsets[p] = kgo.NewOffset().AtStart()
			remaining++
		}
	}
	if remaining == 0 {
		return logs
	}
	cl := b.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for remaining > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			have := map[int32]int{}
			for p, l := range logs {
				have[p] = len(l)
			}
			t.Fatalf("reading back: %v; have %v of %v records", ctx.Err(), have, ends)
		}
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				t.Fatalf("fetch %s/%d: %v", fe.Topic, fe.Partition, fe.Err)
			}
		}
		for it := fs.RecordIter(); !it.Done(); {
			r := it.Next()
			l := logs[r.Partition]
			if r.Offset != int64(len(l)) {
				t.Fatalf("partition %d: read offset %d, want %d", r.Partition, r.Offset, len(l))
			}
			if r.Offset >= ends[r.Partition] {
				t.Fatalf("partition %d: read offset %d at or past the end offset %d", r.Partition, r.Offset, ends[r.Partition])
			}
			logs[r.Partition] = append(l, r)
			if int64(len(logs[r.Partition])) == ends[r.Partition] {
				remaining--
			}
		}
	}
	return logs
}
