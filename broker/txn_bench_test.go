package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/segment/poll"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The transactions benchmarks (issue 19, part 4) compare, in the same
// run and on in-process brokers, transactional produce with idempotent
// produce of the same load, and read_committed consumption with
// read_uncommitted consumption of the same data. Rounds alternate the
// modes (the machine's load drifts); each transactional sub-benchmark
// reports x-idempotent, its MB/s over the idempotent one's of its round,
// and each read_committed one x-uncommitted. cpu-s/GB is the whole
// process's CPU time (getrusage: the broker or brokers and the franz-go
// client together, as they share the process) per GB of record values.

// txnBenchRatio holds the reference MB/s of each round (keyed by the
// benchmark's name without its mode), which the later modes of the round
// are divided by.
var txnBenchRatio = struct {
	sync.Mutex
	ref map[string]float64
	// consume is each read_committed round's ratio (its last run's).
	consume map[string]float64
}{ref: map[string]float64{}, consume: map[string]float64{}}

// BenchmarkTxnProduce produces b.N records of 1 KiB (incompressible,
// uncompressed, acks=all, franz-go's defaults otherwise: 10 ms linger,
// sticky partitioning) to a topic of 3 partitions from one franz-go
// client: idempotent (no transactions), transactional with one
// transaction per 1,000 records, and transactional with one transaction
// per 100 ms (BeginTransaction, Produce, Flush, EndTransaction commit).
// txn-per-1000-retry1ms is txn-per-1000 with franz-go's
// ConcurrentTransactionsBackoff at 1 ms instead of 20 ms: a transaction
// begun right after the previous one's EndTransaction gets
// CONCURRENT_TRANSACTIONS from AddPartitionsToTxn until that one's
// markers are written and replicated and its CompleteCommit is in
// __transaction_state (as in Kafka), and the client backs off before
// retrying. flush-ms/txn and endtxn-ms/txn are the mean time per
// transaction in its closing Flush (which waits for every record of the
// transaction to be acknowledged, the first produce included) and in
// EndTransaction. The -v2 modes run with transaction.version 2 finalized
// (KIP-890 part 2: no AddPartitionsToTxn, the partitions added by their
// leaders, an epoch bump per EndTxn v5).
// single is one broker; rf3 is three in-process brokers on a real
// ZooKeeper with the topic and __transaction_state at replication factor
// 3 (min.insync.replicas 2):
//
//	go test ./broker -run '^$' -bench BenchmarkTxnProduce -benchtime 100000x
func BenchmarkTxnProduce(b *testing.B) {
	for _, topo := range []string{"single", "rf3"} {
		for round := 1; round <= 2; round++ {
			for _, mode := range []string{"idempotent", "txn-per-1000", "txn-per-1000-endwait0", "txn-per-1000-retry1ms", "txn-per-100ms", "txn-per-1000-v2", "txn-per-100ms-v2"} {
				b.Run(fmt.Sprintf("%s/round%d/%s", topo, round, mode), func(b *testing.B) {
					benchTxnProduce(b, topo == "rf3", mode, fmt.Sprintf("produce/%s/%d", topo, round))
				})
			}
		}
	}
}

func benchTxnProduce(b *testing.B, cluster bool, mode, round string) {
	const valueSize = 1024
	var extra map[string]string
	if mode == "txn-per-1000-endwait0" {
		// Kafka's EndTxn: answered once the decision is stored.
		extra = map[string]string{"strata.transaction.end.wait.ms": "0"}
	}
	seeds := startTxnBenchBrokers(b, cluster, extra)
	rf := int16(1)
	if cluster {
		rf = 3
	}
	createTxnBenchTopic(b, seeds, "txbench", 3, rf)
	if strings.HasSuffix(mode, "-v2") {
		finalizeTxnV2(b, seeds)
	}
	value := make([]byte, valueSize)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range value {
		value[i] = byte(rng.Uint32())
	}
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("txbench"),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RetryTimeout(60 * time.Second)}
	txn := mode != "idempotent"
	if txn {
		opts = append(opts, kgo.TransactionalID("bench-"+mode), kgo.TransactionTimeout(60*time.Second))
	}
	if mode == "txn-per-1000-retry1ms" {
		opts = append(opts, kgo.ConcurrentTransactionsBackoff(time.Millisecond))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// Warm up: metadata, producer id, the coordinator's partition
	// loaded, the partitions' first batches.
	if txn {
		if err := cl.BeginTransaction(); err != nil {
			b.Fatal(err)
		}
	}
	for range 3000 {
		cl.Produce(ctx, &kgo.Record{Value: value}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if txn {
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			b.Fatal(err)
		}
	}

	var errMu sync.Mutex
	var produceErr error
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			errMu.Lock()
			produceErr = errors.Join(produceErr, err)
			errMu.Unlock()
		}
	}
	txns := 0
	var flushing, ending time.Duration // in each transaction's Flush and EndTransaction
	cpu0 := processCPU(b)
	b.SetBytes(valueSize)
	b.ResetTimer()
	start := time.Now()
	for sent := 0; sent < b.N; {
		if txn {
			if err := cl.BeginTransaction(); err != nil {
				b.Fatal(err)
			}
		}
		began := time.Now()
		for n := 0; sent < b.N; {
			cl.Produce(ctx, &kgo.Record{Value: value}, promise)
			sent++
			n++
			if strings.HasPrefix(mode, "txn-per-1000") && n == 1000 || strings.HasPrefix(mode, "txn-per-100ms") && time.Since(began) >= 100*time.Millisecond {
				break
			}
		}
		if !txn {
			continue
		}
		t0 := time.Now()
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			b.Fatal(err)
		}
		flushing += t1.Sub(t0)
		ending += time.Since(t1)
		txns++
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cpu := processCPU(b) - cpu0
	if produceErr != nil {
		b.Fatal(produceErr)
	}
	mbps := float64(b.N) * valueSize / elapsed.Seconds() / 1e6
	gb := float64(b.N) * valueSize / 1e9
	b.ReportMetric(cpu.Seconds()/gb, "cpu-s/GB")
	if txn {
		b.ReportMetric(float64(txns), "txns")
		b.ReportMetric(float64(b.N)/float64(max(txns, 1)), "records/txn")
		b.ReportMetric(flushing.Seconds()*1e3/float64(max(txns, 1)), "flush-ms/txn")
		b.ReportMetric(ending.Seconds()*1e3/float64(max(txns, 1)), "endtxn-ms/txn")
	}
	reportTxnBenchRatio(b, round, !txn, mbps, "x-idempotent")
}

// finalizeTxnV2 finalizes transaction.version 2 on the brokers at seeds
// and waits until each of them answers it in ApiVersions.
func finalizeTxnV2(b *testing.B, seeds []string) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	res, err := kadm.NewClient(cl).UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: 2, UpgradeType: 1})
	if err == nil {
		err = res["transaction.version"].Err
	}
	if err != nil {
		b.Fatal(err)
	}
	for _, seed := range seeds {
		one, err := kgo.NewClient(kgo.SeedBrokers(seed))
		if err != nil {
			b.Fatal(err)
		}
		ok := poll.For(30*time.Second, func() bool {
			resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, one)
			if err != nil {
				return false
			}
			for _, f := range resp.FinalizedFeatures {
				if f.Name == "transaction.version" && f.MaxVersionLevel == 2 {
					return true
				}
			}
			return false
		})
		one.Close()
		if !ok {
			b.Fatalf("%s does not finalize transaction.version 2", seed)
		}
	}
}

// BenchmarkTxnConsume reads, with franz-go's consumer, a topic of 3
// partitions holding 64 MiB of 1 KiB records written by a transactional
// producer (one committed transaction per 1,000 records), from offset 0
// to the end, with isolation.level read_uncommitted and read_committed
// in five alternating rounds; each op is one whole pass by a new consumer.
// reading-MB/s leaves each consumer's start out; x-uncommitted is a
// round's read_committed reading-MB/s over its read_uncommitted one, and
// x-uncommitted-median-so-far the median of the rounds so far (the
// figure for the goal: one round's ratio moves with the machine's load).
// sendfile-B/op is the bytes the broker sent with sendfile (zero copy),
// which read_committed fetches use as read_uncommitted ones do:
//
//	go test ./broker -run '^$' -bench BenchmarkTxnConsume -benchtime 20x
func BenchmarkTxnConsume(b *testing.B) {
	const valueSize, records = 1024, 64 << 10
	s, seeds := startTxnBenchServer(b, nil)
	createTxnBenchTopic(b, seeds, "txread", 3, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("txread"),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.TransactionalID("bench-fill"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	value := make([]byte, valueSize)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range value {
		value[i] = byte(rng.Uint32())
	}
	for sent := 0; sent < records; sent += 1000 {
		if err := cl.BeginTransaction(); err != nil {
			b.Fatal(err)
		}
		for range min(1000, records-sent) {
			cl.Produce(ctx, &kgo.Record{Value: value}, nil)
		}
		if err := cl.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			b.Fatal(err)
		}
	}
	cl.Close()
	// Every marker written: the last stable offsets reach the ends.
	if !poll.For(time.Minute, func() bool {
		for _, p := range s.topic("txread").parts {
			hw := p.log.HighWatermark()
			if p.lastStableOffsetAt(hw) != hw || hw != p.log.LogEndOffset() {
				return false
			}
		}
		return true
	}) {
		b.Fatal("last stable offsets did not reach the log ends within a minute")
	}
	// Five rounds, each reading both ways: the ratio of a round moves
	// with the machine's load, their median far less.
	for round := 1; round <= 5; round++ {
		for _, committed := range []bool{false, true} {
			name := fmt.Sprintf("round%d/%s", round, map[bool]string{false: "read_uncommitted", true: "read_committed"}[committed])
			b.Run(name, func(b *testing.B) {
				benchTxnConsume(b, s, seeds, committed, records, valueSize, "consume/"+strconv.Itoa(round))
			})
		}
	}
}

func benchTxnConsume(b *testing.B, s *Server, seeds []string, committed bool, records, valueSize int, round string) {
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	zc0 := s.Stats().FetchZeroCopyBytes
	cpu0 := processCPU(b)
	b.SetBytes(int64(records * valueSize))
	b.ResetTimer()
	// reading is the time from each client's first poll with records to
	// its last, and readBytes what came in the polls after that first
	// one: the client's start (metadata, ListOffsets) left out, as
	// kafka-consumer-perf-test leaves the group join out of fetch.MB.sec.
	var reading time.Duration
	var readBytes int
	for range b.N {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("txread"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(iso))
		if err != nil {
			b.Fatal(err)
		}
		got := 0
		var first time.Time
		deadline := time.Now().Add(5 * time.Minute)
		for got < records && time.Now().Before(deadline) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			fs := cl.PollFetches(ctx)
			cancel()
			if err := fs.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				b.Fatal(err)
			}
			fs.EachRecord(func(r *kgo.Record) {
				if len(r.Value) != valueSize {
					b.Fatalf("record at %d: %d bytes, want %d", r.Offset, len(r.Value), valueSize)
				}
				got++
			})
			if first.IsZero() && got > 0 {
				first = time.Now()
				readBytes -= got * valueSize
			}
		}
		reading += time.Since(first)
		readBytes += got * valueSize
		cl.Close()
		if got != records {
			b.Fatalf("read %d records, want %d", got, records)
		}
	}
	b.StopTimer()
	gb := float64(b.N*records*valueSize) / 1e9
	b.ReportMetric((processCPU(b)-cpu0).Seconds()/gb, "cpu-s/GB")
	b.ReportMetric(float64(s.Stats().FetchZeroCopyBytes-zc0)/float64(b.N), "sendfile-B/op")
	readMBps := float64(readBytes) / 1e6 / reading.Seconds()
	b.ReportMetric(readMBps, "reading-MB/s")
	reportTxnBenchRatio(b, round, !committed, readMBps, "x-uncommitted")
	if !committed {
		return
	}
	txnBenchRatio.Lock()
	defer txnBenchRatio.Unlock()
	if ref := txnBenchRatio.ref[round]; ref > 0 {
		txnBenchRatio.consume[round] = readMBps / ref
		rs := slices.Sorted(maps.Values(txnBenchRatio.consume))
		b.ReportMetric(rs[len(rs)/2], "x-uncommitted-median-so-far")
	}
}

// reportTxnBenchRatio records mbps as round's reference, or reports it
// over the reference as metric.
func reportTxnBenchRatio(b *testing.B, round string, reference bool, mbps float64, metric string) {
	txnBenchRatio.Lock()
	defer txnBenchRatio.Unlock()
	if reference {
		txnBenchRatio.ref[round] = mbps
		return
	}
	if ref := txnBenchRatio.ref[round]; ref > 0 {
		b.ReportMetric(mbps/ref, metric)
	}
}

// startTxnBenchBrokers starts one broker, or three on a real ZooKeeper
// with __transaction_state at replication factor 3, and returns their
// addresses.
func startTxnBenchBrokers(b *testing.B, cluster bool, extra map[string]string) []string {
	if !cluster {
		_, seeds := startTxnBenchServer(b, extra)
		return seeds
	}
	zk := zktest.Start(b)
	connect := zk.ConnectString("/strata-txn-bench")
	var servers []*Server
	var seeds []string
	for i := range 3 {
		props := map[string]string{"broker.id": strconv.Itoa(i + 1), "zookeeper.connect": connect,
			"transaction.state.log.replication.factor": "3", "offsets.topic.replication.factor": "3",
			"min.insync.replicas": "2"}
		maps.Copy(props, extra)
		s, addr := startTxnBenchServer(b, props)
		servers = append(servers, s)
		seeds = append(seeds, addr...)
	}
	if !poll.For(time.Minute, func() bool { return len(servers[0].coord.Snapshot().Brokers) == 3 }) {
		b.Fatal("three brokers not registered within a minute")
	}
	return seeds
}

// startTxnBenchServer starts a broker for a benchmark, with a small
// __transaction_state, stopped at the benchmark's end.
func startTxnBenchServer(b *testing.B, props map[string]string) (*Server, []string) {
	all := map[string]string{
		"listeners":                            "PLAINTEXT://127.0.0.1:0",
		"metrics.listener":                     "",
		"log.dirs":                             b.TempDir(),
		"offsets.topic.num.partitions":         "1",
		"transaction.state.log.num.partitions": "1",
		"log.cleaner.dedupe.buffer.size":       "4194304",
	}
	for k, v := range props {
		all[k] = v
	}
	cfg, err := ConfigFromProperties(all)
	if err != nil {
		b.Fatal(err)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := NewServer(cfg)
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = s.Serve() }()
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil && !errors.Is(err, ErrServerClosed) {
			b.Errorf("shutdown: %v", err)
		}
	})
	return s, []string{s.Addr().String()}
}

// createTxnBenchTopic creates a topic through the Kafka API.
func createTxnBenchTopic(b *testing.B, seeds []string, name string, partitions int32, rf int16) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		b.Fatal(err)
	}
	if c := resp.Topics[0].ErrorCode; c != 0 {
		b.Fatalf("create topic %s: %v", name, kerr.ErrorForCode(c))
	}
}
