// Command loadgen is a Kafka producer and consumer load generator built on
// franz-go, in the spirit of kafka-producer-perf-test and the OpenMessaging
// Benchmark.
//
// -producers clients send -size byte records, round robin over -partitions
// partitions, either -records in all or for -duration, at -rate records/s
// in all (0: as fast as the broker takes them), with -acks and
// -compression. -consumers clients read the same partitions from the end
// offsets they had before the first record was sent, and stop when they have
// every record produced (or -drain after the producers finish). Every
// record's value starts with the wall-clock time of its Produce call (8
// bytes, Unix nanoseconds), so end-to-end latency is the time from Produce
// to the consumer's poll that returned it.
//
// Reported: records/s and MB/s (10^6 bytes of record values) of the
// producers and of the consumers; produce latency (Produce call to
// acknowledgement, client-side queueing included) and end-to-end latency,
// p50, p99, p99.9 and max, from log-bucketed histograms (1.6% resolution)
// with the whole percentile curve in the JSON. Text on stdout, -json and
// -csv files (the CSV gets one row per run, header when new), a progress
// bar on stderr when it is a terminal.
//
// Example:
//
//	loadgen -brokers 127.0.0.1:9092 -topic t -create -partitions 3 -size 1024 -duration 30s -rate 50000 -consumers 1 -acks all
package main

import (
	"context"
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/bench/internal/benchutil"
)

// config is one run's settings, as given on the command line.
type config struct {
	Brokers     string            `json:"brokers"`
	Topic       string            `json:"topic"`
	Label       string            `json:"label,omitempty"`
	Create      bool              `json:"create"`
	RF          int               `json:"replication_factor"`
	TopicConfig map[string]string `json:"topic_config,omitempty"`
	Partitions  int               `json:"partitions"`
	Size        int               `json:"size"`
	Records     int64             `json:"records,omitempty"`
	Duration    time.Duration     `json:"duration_ns,omitempty"`
	Rate        float64           `json:"rate"`
	Producers   int               `json:"producers"`
	Consumers   int               `json:"consumers"`
	Acks        string            `json:"acks"`
	Compression string            `json:"compression"`
	Linger      time.Duration     `json:"linger_ns"`
	Timeout     time.Duration     `json:"-"`
	Drain       time.Duration     `json:"-"`
	JSONPath    string            `json:"-"`
	CSVPath     string            `json:"-"`
	Progress    string            `json:"-"`
}

// side is the throughput and latency of the producers or the consumers.
type side struct {
	Records     int64           `json:"records"`
	Bytes       int64           `json:"bytes"`
	Seconds     float64         `json:"seconds"`
	RecordsPerS float64         `json:"records_per_s"`
	MBPerS      float64         `json:"mb_per_s"`
	Latency     *latencySummary `json:"latency"`
}

// result is what one run reports.
type result struct {
	Config  config `json:"config"`
	Start   string `json:"start"`
	Produce *side  `json:"produce"`
	// Consume is nil without consumers; its latency is end to end.
	Consume *side  `json:"consume,omitempty"`
	Errors  int64  `json:"errors"`
	Error   string `json:"error,omitempty"`
}

type kvFlag map[string]string

func (m kvFlag) String() string { return fmt.Sprint(map[string]string(m)) }
func (m kvFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("%q: want key=value", s)
	}
	m[k] = v
	return nil
}

func main() {
	c := config{TopicConfig: map[string]string{}}
	flag.StringVar(&c.Brokers, "brokers", "127.0.0.1:9092", "seed brokers, comma-separated host:port")
	flag.StringVar(&c.Topic, "topic", "loadgen", "topic")
	flag.StringVar(&c.Label, "label", "", "name of this run in the CSV and JSON")
	flag.BoolVar(&c.Create, "create", false, "create the topic first (an existing one is used as it is)")
	flag.IntVar(&c.RF, "replication-factor", 1, "replication factor of a created topic")
	flag.Var(kvFlag(c.TopicConfig), "topic-config", "key=value config of a created topic (repeatable)")
	flag.IntVar(&c.Partitions, "partitions", 3, "partitions to produce to and consume from")
	flag.IntVar(&c.Size, "size", 100, "record value size in bytes (>= 8)")
	flag.Int64Var(&c.Records, "records", 0, "records to produce in all (0: run for -duration)")
	flag.DurationVar(&c.Duration, "duration", 10*time.Second, "how long to produce when -records is 0")
	flag.Float64Var(&c.Rate, "rate", 0, "target records/s over all producers (0: unlimited)")
	flag.IntVar(&c.Producers, "producers", 1, "producer clients")
	flag.IntVar(&c.Consumers, "consumers", 0, "consumer clients (end-to-end latency)")
	flag.StringVar(&c.Acks, "acks", "1", "required acks: 0, 1 or all")
	flag.StringVar(&c.Compression, "compression", "none", "none, gzip, snappy, lz4 or zstd")
	flag.DurationVar(&c.Linger, "linger", 0, "producer linger: how long a partition's batch waits for more records (franz-go's own default is 10ms)")
	flag.DurationVar(&c.Timeout, "timeout", 5*time.Minute, "bound on the whole run")
	flag.DurationVar(&c.Drain, "drain", 15*time.Second, "how long consumers may take to catch up after the producers finish")
	flag.StringVar(&c.JSONPath, "json", "", "write the result as JSON to this file (- for stdout instead of text)")
	flag.StringVar(&c.CSVPath, "csv", "", "append the result as a CSV row to this file")
	flag.StringVar(&c.Progress, "progress", "auto", "progress bar on stderr: auto (when a terminal), on or off")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	res, err := run(ctx, c)
	if res == nil {
		fmt.Fprintf(os.Stderr, "loadgen: %v\n", err)
		os.Exit(1)
	}
	if err != nil {
		res.Error = err.Error()
	}
	if werr := write(c, res); werr != nil {
		fmt.Fprintf(os.Stderr, "loadgen: %v\n", werr)
		os.Exit(1)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "loadgen: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) (*result, error) {
	switch {
	case c.Size < 8:
		return nil, fmt.Errorf("-size %d: want at least 8", c.Size)
	case c.Producers < 1 || c.Partitions < 1 || c.Consumers < 0:
		return nil, errors.New("-producers and -partitions must be at least 1")
	case c.Records <= 0 && c.Duration <= 0:
		return nil, errors.New("want -records or -duration")
	}
	acks, err := benchutil.Acks(c.Acks)
	if err != nil {
		return nil, err
	}
	codec, err := benchutil.Codec(c.Compression)
	if err != nil {
		return nil, err
	}
	seeds := strings.Split(c.Brokers, ",")
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	if c.Create {
		if err := createTopic(ctx, admin, c); err != nil {
			return nil, err
		}
	}
	ends, err := waitEndOffsets(ctx, admin, c.Topic, c.Partitions)
	if err != nil {
		return nil, err
	}

	res := &result{Config: c, Start: time.Now().UTC().Format(time.RFC3339)}
	g := &gen{c: c, prodLat: newHistogram(), e2eLat: newHistogram()}

	// Consumers first, positioned at the end offsets, so that they see
	// every record produced.
	consCtx, stopCons := context.WithCancel(ctx)
	defer stopCons()
	var consWG sync.WaitGroup
	consErrs := make(chan error, c.Consumers)
	for i := range c.Consumers {
		offs := map[int32]kgo.Offset{}
		for p := i; p < c.Partitions; p += c.Consumers {
			offs[int32(p)] = kgo.NewOffset().At(ends[int32(p)])
		}
		if len(offs) == 0 {
			continue
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{c.Topic: offs}),
			kgo.FetchMaxWait(100*time.Millisecond),
			kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(16<<20))
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		consWG.Add(1)
		go func() {
			defer consWG.Done()
			if err := g.consume(consCtx, cl); err != nil {
				consErrs <- err
			}
		}()
	}

	prog := newProgress(c)
	var prodWG sync.WaitGroup
	prodErrs := make(chan error, c.Producers)
	start := time.Now()
	g.start = start
	for i := range c.Producers {
		opts := []kgo.Opt{
			kgo.SeedBrokers(seeds...),
			kgo.DisableIdempotentWrite(),
			kgo.RequiredAcks(acks),
			kgo.ProducerBatchCompression(codec),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.MaxBufferedRecords(max(10_000, 4<<20/c.Size)),
			kgo.MaxProduceRequestsInflightPerBroker(5),
			kgo.ProduceRequestTimeout(30 * time.Second),
			kgo.RecordDeliveryTimeout(min(c.Timeout, 2*time.Minute)),
		}
		opts = append(opts, kgo.ProducerLinger(c.Linger))
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		prodWG.Add(1)
		go func() {
			defer prodWG.Done()
			if err := g.produce(ctx, cl, i); err != nil {
				prodErrs <- err
			}
		}()
	}
	tick := time.NewTicker(250 * time.Millisecond)
	prodDone := make(chan struct{})
	go func() { prodWG.Wait(); close(prodDone) }()
wait:
	for {
		select {
		case <-tick.C:
			prog.show(g, time.Since(start))
		case <-prodDone:
			break wait
		}
	}
	prodSecs := g.lastAck.Load().Sub(start).Seconds()
	sent := g.acked.Load()
	res.Produce = &side{Records: sent, Bytes: sent * int64(c.Size), Seconds: prodSecs, Latency: g.prodLat.summary()}
	res.Produce.fill()
	res.Errors = g.failed.Load()
	var errs []error
	close(prodErrs)
	for err := range prodErrs {
		errs = append(errs, err)
	}
	if n := g.failed.Load(); n > 0 {
		errs = append(errs, fmt.Errorf("%d records failed; first: %v", n, g.firstErr.Load()))
	}

	if c.Consumers > 0 {
		deadline := time.Now().Add(c.Drain)
		for g.consumed.Load() < sent && time.Now().Before(deadline) && ctx.Err() == nil {
			prog.show(g, time.Since(start))
			time.Sleep(50 * time.Millisecond)
		}
		stopCons()
		consWG.Wait()
		close(consErrs)
		for err := range consErrs {
			errs = append(errs, err)
		}
		got := g.consumed.Load()
		if got < sent {
			errs = append(errs, fmt.Errorf("consumers got %d of %d records within -drain %v", got, sent, c.Drain))
		}
		var secs float64
		if f, l := g.firstCons.Load(), g.lastCons.Load(); f != nil && l != nil {
			secs = l.Sub(start).Seconds()
		}
		res.Consume = &side{Records: got, Bytes: got * int64(c.Size), Seconds: secs, Latency: g.e2eLat.summary()}
		res.Consume.fill()
	}
	prog.done(g, time.Since(start))
	return res, errors.Join(errs...)
}

func (s *side) fill() {
	if s.Seconds > 0 {
		s.RecordsPerS = float64(s.Records) / s.Seconds
		s.MBPerS = float64(s.Bytes) / s.Seconds / 1e6
	}
}

// gen is the state the producers and consumers share.
type gen struct {
	c        config
	start    time.Time
	prodLat  *histogram
	e2eLat   *histogram
	sent     atomic.Int64
	acked    atomic.Int64
	failed   atomic.Int64
	consumed atomic.Int64
	firstErr atomic.Value
	lastAck  atomicTime
	// firstCons and lastCons bound the consumers' activity.
	firstCons, lastCons atomicTime
}

type atomicTime struct{ p atomic.Pointer[time.Time] }

func (a *atomicTime) Store(t time.Time) { a.p.Store(&t) }
func (a *atomicTime) Load() *time.Time  { return a.p.Load() }
func (a *atomicTime) Sub(t time.Time) time.Duration {
	if p := a.p.Load(); p != nil {
		return p.Sub(t)
	}
	return 0
}

// produce is producer number idx: records idx, idx+P, ... until its share
// of -records is sent or -duration has passed, paced to its share of -rate.
func (g *gen) produce(ctx context.Context, cl *kgo.Client, idx int) error {
	c := g.c
	filler := make([]byte, c.Size)
	for i := range filler {
		filler[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[(i*7+i/13)%36]
	}
	var interval time.Duration
	if c.Rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(c.Producers) / c.Rate)
	}
	end := g.start.Add(c.Duration)
	var wg sync.WaitGroup
	for k := int64(0); ; k++ {
		i := k*int64(c.Producers) + int64(idx)
		if c.Records > 0 && i >= c.Records {
			break
		}
		now := time.Now()
		if c.Records <= 0 && now.After(end) {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if interval > 0 {
			if due := g.start.Add(time.Duration(k) * interval); due.Sub(now) > time.Millisecond {
				time.Sleep(due.Sub(now))
			}
		}
		v := make([]byte, c.Size)
		copy(v, filler)
		t0 := time.Now()
		binary.BigEndian.PutUint64(v, uint64(t0.UnixNano()))
		r := &kgo.Record{Topic: c.Topic, Partition: int32(i % int64(c.Partitions)), Value: v}
		wg.Add(1)
		g.sent.Add(1)
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			now := time.Now()
			if err != nil {
				if g.failed.Add(1) == 1 {
					g.firstErr.Store(err.Error())
				}
			} else {
				g.prodLat.record(now.Sub(t0))
				g.acked.Add(1)
				g.lastAck.Store(now)
			}
			wg.Done()
		})
	}
	err := cl.Flush(ctx)
	wg.Wait()
	return err
}

// consume polls until ctx ends, recording each record's end-to-end latency.
func (g *gen) consume(ctx context.Context, cl *kgo.Client) error {
	local := newHistogram()
	defer g.e2eLat.merge(local)
	for {
		fs := cl.PollFetches(ctx)
		now := time.Now()
		if ctx.Err() != nil {
			return nil
		}
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.Canceled) {
				return fmt.Errorf("fetch %s/%d: %w", e.Topic, e.Partition, e.Err)
			}
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			if len(r.Value) >= 8 {
				local.record(now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))))
			}
			n++
		})
		if n > 0 {
			if g.firstCons.Load() == nil {
				g.firstCons.Store(now)
			}
			g.lastCons.Store(now)
			g.consumed.Add(int64(n))
		}
	}
}

func createTopic(ctx context.Context, cl *kgo.Client, c config) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = c.Topic, int32(c.Partitions), int16(c.RF)
	for k, v := range c.TopicConfig {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cfg)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", c.Topic, err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			msg := ""
			if t.ErrorMessage != nil {
				msg = ": " + *t.ErrorMessage
			}
			return fmt.Errorf("create topic %s (RF %d): %w%s", t.Topic, c.RF, err, msg)
		}
	}
	return nil
}

// waitEndOffsets returns the end offset of partitions 0..n-1 of topic,
// retrying (bounded by ctx and 30 s) while a new topic's leaders are
// elected.
func waitEndOffsets(ctx context.Context, cl *kgo.Client, topic string, n int) (map[int32]int64, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ends, err := endOffsets(ctx, cl, topic, n)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return ends, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func endOffsets(ctx context.Context, cl *kgo.Client, topic string, n int) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range n {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = int32(p), -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	shards := cl.RequestSharded(ctx, req)
	ends := map[int32]int64{}
	for _, sh := range shards {
		if sh.Err != nil {
			return nil, fmt.Errorf("list offsets: %w", sh.Err)
		}
		for _, t := range sh.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return nil, fmt.Errorf("list offsets %s/%d: %w", t.Topic, p.Partition, err)
				}
				ends[p.Partition] = p.Offset
			}
		}
	}
	if len(ends) != n {
		return nil, fmt.Errorf("list offsets %s: %d of %d partitions answered", topic, len(ends), n)
	}
	return ends, nil
}

// write prints the text summary and writes the JSON and CSV files.
func write(c config, res *result) error {
	if c.JSONPath == "-" {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Print(text(res))
	if c.JSONPath != "" {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(c.JSONPath, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if c.CSVPath != "" {
		return appendCSV(c.CSVPath, res)
	}
	return nil
}

func text(res *result) string {
	var b strings.Builder
	c := res.Config
	rate := "unlimited"
	if c.Rate > 0 {
		rate = fmt.Sprintf("%.0f records/s", c.Rate)
	}
	fmt.Fprintf(&b, "loadgen %s: %d B records, %d partitions, %d producer(s), %d consumer(s), acks=%s, compression %s, rate %s\n",
		c.Topic, c.Size, c.Partitions, c.Producers, c.Consumers, c.Acks, c.Compression, rate)
	line := func(name string, s *side, what string) {
		if s == nil {
			return
		}
		l := s.Latency
		fmt.Fprintf(&b, "  %-8s %d records in %.2fs: %.0f records/s, %.2f MB/s; %s latency ms p50 %.3f p99 %.3f p99.9 %.3f max %.3f\n",
			name, s.Records, s.Seconds, s.RecordsPerS, s.MBPerS, what, l.P50Ms, l.P99Ms, l.P999Ms, l.MaxMs)
	}
	line("produce", res.Produce, "produce")
	line("consume", res.Consume, "end-to-end")
	if res.Error != "" {
		fmt.Fprintf(&b, "  error: %s\n", res.Error)
	}
	return b.String()
}

var csvHeader = []string{"label", "topic", "size", "partitions", "producers", "consumers", "acks", "compression", "target_rate",
	"records", "seconds", "records_per_s", "mb_per_s", "p50_ms", "p99_ms", "p999_ms", "max_ms",
	"consumed", "consume_records_per_s", "consume_mb_per_s", "e2e_p50_ms", "e2e_p99_ms", "e2e_p999_ms", "e2e_max_ms", "errors", "error"}

func appendCSV(path string, res *result) error {
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	if statErr != nil {
		_ = w.Write(csvHeader)
	}
	c, p := res.Config, res.Produce
	g := func(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }
	row := []string{c.Label, c.Topic, fmt.Sprint(c.Size), fmt.Sprint(c.Partitions), fmt.Sprint(c.Producers), fmt.Sprint(c.Consumers),
		c.Acks, c.Compression, g(c.Rate), fmt.Sprint(p.Records), g(p.Seconds), g(p.RecordsPerS), g(p.MBPerS),
		g(p.Latency.P50Ms), g(p.Latency.P99Ms), g(p.Latency.P999Ms), g(p.Latency.MaxMs)}
	if s := res.Consume; s != nil {
		row = append(row, fmt.Sprint(s.Records), g(s.RecordsPerS), g(s.MBPerS), g(s.Latency.P50Ms), g(s.Latency.P99Ms), g(s.Latency.P999Ms), g(s.Latency.MaxMs))
	} else {
		row = append(row, "", "", "", "", "", "", "")
	}
	row = append(row, fmt.Sprint(res.Errors), res.Error)
	_ = w.Write(row)
	w.Flush()
	return errors.Join(w.Error(), f.Close())
}
