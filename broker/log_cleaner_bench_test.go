package broker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stratastream/strata/segment/poll"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkProduceWhileCleaning measures produce throughput and latency
// to a compacted topic with the log cleaner on and off, in alternating
// rounds (the machine's load drifts; compare each round's pair). Each op
// is one record of 1 KiB (incompressible, uncompressed) of 20,000 keys,
// produced by 4 producers each sending batches of 16 records with
// ProduceSync (acks=all); p99-ms is the 99th percentile of those calls.
// The topic (2 MiB segments) is first filled with 32 MiB of the same
// keys; with the cleaner on (one thread, unthrottled, 1 s backoff) the
// measurement starts once a cleaning of it runs, and the cleaner goes on
// cleaning as segments seal and the dirty ratio passes 0.5, on the same
// disk as the appends. cleaner-MB is what the cleanings that ran during
// the measurement read and wrote (they are waited for), cleaning-% the
// share of the measurement during which one ran:
//
//	go test ./broker -run '^$' -bench BenchmarkProduceWhileCleaning -benchtime 100000x
func BenchmarkProduceWhileCleaning(b *testing.B) {
	for round := 1; round <= 3; round++ {
		for _, on := range []bool{false, true} {
			name := fmt.Sprintf("round%d/cleaner=%s", round, map[bool]string{false: "off", true: "on"}[on])
			b.Run(name, func(b *testing.B) { benchProduceCompacted(b, on) })
		}
	}
}

func benchProduceCompacted(b *testing.B, cleaner bool) {
	const keys, valueSize, batch, producers = 20000, 1024, 16, 4
	cfg, err := ConfigFromProperties(map[string]string{
		"listeners":                      "PLAINTEXT://127.0.0.1:0",
		"metrics.listener":               "",
		"log.dirs":                       b.TempDir(),
		"offsets.topic.num.partitions":   "1",
		"log.cleaner.enable":             strconv.FormatBool(cleaner),
		"log.cleaner.backoff.ms":         "1000",
		"log.cleaner.dedupe.buffer.size": "33554432",
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
	defer func() { _ = s.Shutdown(context.Background()) }()
	admin, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()))
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	createTopicB(b, admin, "changelog", map[string]string{"cleanup.policy": "compact", "segment.bytes": "2097152"})

	rng := rand.New(rand.NewPCG(1, 2))
	values := make([][]byte, 64)
	for i := range values {
		values[i] = make([]byte, valueSize)
		for j := range values[i] {
			values[i][j] = byte(rng.Uint32())
		}
	}
	produce := func(n int, lat [][]time.Duration) error {
		per := (n + producers - 1) / producers
		var wg sync.WaitGroup
		errs := make(chan error, producers)
		for w := range producers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.ProducerBatchCompression(kgo.NoCompression()),
					kgo.DefaultProduceTopic("changelog"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
				if err != nil {
					errs <- err
					return
				}
				defer cl.Close()
				r := rand.New(rand.NewPCG(uint64(w), uint64(n)))
				for sent := 0; sent < per; sent += batch {
					recs := make([]*kgo.Record, min(batch, per-sent))
					for i := range recs {
						recs[i] = &kgo.Record{Partition: 0, Key: []byte("key-" + strconv.Itoa(r.IntN(keys))), Value: values[r.IntN(len(values))]}
					}
					t0 := time.Now()
					if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
						errs <- err
						return
					}
					if lat != nil {
						lat[w] = append(lat[w], time.Since(t0))
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		return <-errs
	}
	if err := produce(32<<20/valueSize, nil); err != nil {
		b.Fatal(err)
	}
	p := s.topic("changelog").local(0)
	// The prefill's dirty pages would be written back during the
	// measurement of one mode and not the other.
	syscall.Sync()
	if !cleaner {
		// As long as the other mode may wait for its first cleaning
		// (the backoff), so that both start as settled.
		settle := time.NewTimer(cfg.Cleaner.Backoff)
		<-settle.C
	} else if !poll.For(time.Minute, func() bool { return s.cleaner.isRunning(p) }) {
		b.Fatal("no cleaning started within a minute")
	}
	before, runsBefore := s.cleaner.metricsSnapshot()
	lat := make([][]time.Duration, producers)
	b.SetBytes(valueSize)
	b.ResetTimer()
	stopSampling := make(chan struct{})
	var samples, busy int
	sampled := make(chan struct{})
	go func() { // how much of the measurement a cleaning ran
		defer close(sampled)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-t.C:
				samples++
				if s.cleaner.isRunning(p) {
					busy++
				}
			}
		}
	}()
	start := time.Now()
	err = produce(b.N, lat)
	elapsed := time.Since(start)
	b.StopTimer()
	close(stopSampling)
	<-sampled
	if err != nil {
		b.Fatal(err)
	}
	// The cleaning that overlapped the end.
	poll.For(2*time.Minute, func() bool { return !s.cleaner.isRunning(p) })
	after, runsAfter := s.cleaner.metricsSnapshot()
	all := slices.Concat(lat...)
	slices.Sort(all)
	b.ReportMetric(float64(b.N*valueSize)/elapsed.Seconds()/1e6, "MB/s")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric((after-before)/1e6, "cleaner-MB")
	b.ReportMetric(runsAfter-runsBefore, "cleanings")
	b.ReportMetric(100*float64(busy)/float64(max(samples, 1)), "cleaning-%")
}

// metricsSnapshot is the bytes the cleaner has read and written so far,
// and its cleanings.
func (c *logCleaner) metricsSnapshot() (bytes, runs float64) {
	var read, written, n dto.Metric
	if c.metrics.bytesRead.Write(&read) != nil || c.metrics.bytesWritten.Write(&written) != nil || c.metrics.runs.Write(&n) != nil {
		return 0, 0
	}
	return read.GetCounter().GetValue() + written.GetCounter().GetValue(), n.GetCounter().GetValue()
}

// isRunning reports whether p is being cleaned.
func (c *logCleaner) isRunning(p *partition) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.running[p] != nil
}

// createTopicB creates a one-partition topic for a benchmark.
func createTopicB(b *testing.B, cl *kgo.Client, name string, configs map[string]string) {
	b.Helper()
	ptrs := map[string]*string{}
	for k, v := range configs {
		ptrs[k] = &v
	}
	resp, err := kadm.NewClient(cl).CreateTopic(context.Background(), 1, 1, ptrs, name)
	if err != nil || resp.Err != nil {
		b.Fatalf("create %s: %v %v", name, err, resp.Err)
	}
}
