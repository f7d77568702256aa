package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// recordValue returns the deterministic, unique value of record i: its index
// in decimal, then filler derived from i, size bytes in all (size >= 16).
func recordValue(i int, size int) []byte {
	v := make([]byte, size)
	n := copy(v, fmt.Sprintf("%012d|", i))
	x := uint64(i)*0x9E3779B97F4A7C15 + 1
	for j := n; j < size; j++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		v[j] = 'a' + byte(x%26)
	}
	return v
}

// recordKey returns the 8-byte big-endian key of record i.
func recordKey(i int) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(i))
}

// produceRecords produces records [0, n) to topic, record i to partition
// i % partitions, and waits for every acknowledgement. It fails the test on
// any produce error.
func produceRecords(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, partitions, n, size int) {
	t.Helper()
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
		failed   atomic.Int64
		offsets  = make([]atomic.Int64, partitions) // next offset expected per partition
		misorder atomic.Int64
	)
	for i := range n {
		r := &kgo.Record{Topic: topic, Partition: int32(i % partitions), Key: recordKey(i), Value: recordValue(i, size)}
		wg.Add(1)
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				failed.Add(1)
				errOnce.Do(func() { firstErr = fmt.Errorf("record %d: %w", i, err) })
				return
			}
			// Acks arrive in order per partition; offsets must be 0, 1, 2...
			if !offsets[r.Partition].CompareAndSwap(r.Offset, r.Offset+1) {
				misorder.Add(1)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatalf("flush after %d records: %v", n, err)
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("%d of %d records failed; first: %v", failed.Load(), n, firstErr)
	}
	if m := misorder.Load(); m > 0 {
		t.Errorf("%d acknowledgements had an offset other than the next one in their partition", m)
	}
}

// TestFranzMillionLz4 produces 1,000,000 lz4-compressed records of 100 B
// with franz-go (idempotence off) over six partitions and reads each
// partition back directly: same keys and values, byte for byte, in order, at
// offsets 0..n-1, still lz4-compressed as sent.
func TestFranzMillionLz4(t *testing.T) {
	const (
		topic      = "franz-million"
		partitions = 6
		n          = 1_000_000
		size       = 100
	)
	b := StartBroker(t)
	b.CreateTopic(t, topic, partitions)
	// A bound against a hang, not a speed check: with -race on a loaded
	// two-core machine (CI once ran at a load of 18) the produce alone
	// took 100 s.
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()

	start := time.Now()
	pcl := b.Client(t,
		kgo.DisableIdempotentWrite(),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()),
		kgo.MaxBufferedRecords(100_000),
		kgo.ProducerLinger(5*time.Millisecond),
	)
	produceRecords(t, ctx, pcl, topic, partitions, n, size)
	t.Logf("produced %d records in %v", n, time.Since(start).Round(time.Millisecond))

	start = time.Now()
	offsets := map[int32]kgo.Offset{}
	for p := range int32(partitions) {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	ccl := b.Client(t,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxBytes(32<<20),
		kgo.FetchMaxPartitionBytes(8<<20),
	)
	next := make([]int64, partitions)
	read := 0
	hwm := make([]int64, partitions)
	for read < n {
		fs := ccl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records before the deadline: %v (next offsets %v)", read, n, ctx.Err(), next)
		}
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				t.Fatalf("fetch %s/%d: %v", fe.Topic, fe.Partition, fe.Err)
			}
		}
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			hwm[fp.Partition] = fp.HighWatermark
		})
		for it := fs.RecordIter(); !it.Done(); {
			r := it.Next()
			p := r.Partition
			if r.Offset != next[p] {
				t.Fatalf("partition %d: offset %d, want %d", p, r.Offset, next[p])
			}
			i := int(next[p])*partitions + int(p)
			if i >= n {
				t.Fatalf("partition %d: record at offset %d beyond the %d produced", p, r.Offset, n)
			}
			if !bytes.Equal(r.Key, recordKey(i)) || !bytes.Equal(r.Value, recordValue(i, size)) {
				t.Fatalf("partition %d offset %d: key %x value %q, want key %x value %q", p, r.Offset, r.Key, r.Value, recordKey(i), recordValue(i, size))
			}
			if c := r.Attrs.CompressionType(); c != 3 {
				t.Fatalf("partition %d offset %d: batch compression %d, want 3 (lz4, as produced)", p, r.Offset, c)
			}
			next[p]++
			read++
		}
	}
	for p := range partitions {
		if want := int64((n - p + partitions - 1) / partitions); next[p] != want || hwm[p] != want {
			t.Errorf("partition %d: read %d records, high watermark %d, want %d", p, next[p], hwm[p], want)
		}
	}
	t.Logf("read %d records in %v", read, time.Since(start).Round(time.Millisecond))
}
