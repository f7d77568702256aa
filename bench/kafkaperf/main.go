// Command kafkaperf is a Kafka load generator built on franz-go, used to
// measure a Strata broker (or any Kafka broker).
//
// Modes:
//
//	produce  N records of -size bytes over -partitions partitions (round robin,
//	         manual partitioner), idempotence off, with -acks and
//	         -compression; reports records/s, MB/s and the latency from
//	         Produce to acknowledgement (p50, p99, p99.9, max).
//	consume  reads every partition of -topic from the start to the end offset
//	         it had when the run began with franz-go's consumer (records
//	         decoded, as an application sees them); reports records/s, MB/s.
//	fetch    the same range with bare Fetch v11 requests on a connection of
//	         its own, one reused buffer, batches counted in place and not
//	         decoded: the broker's fetch bandwidth with the least client work
//	         (one copy, as bench/loopback's receiver makes).
//
// MB is 10^6 bytes. MB/s counts record values for produce and consume (what
// the application moves) and record-batch bytes for fetch (what the wire
// carries). With -json the result is one JSON object on stdout.
//
// Example:
//
//	kafkaperf -brokers 127.0.0.1:9092 -mode produce -topic t -create -records 1000000 -size 100 -acks 1
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/bench/internal/benchutil"
)

// result is what one run reports.
type result struct {
	Mode        string  `json:"mode"`
	Topic       string  `json:"topic"`
	Records     int64   `json:"records"`
	Bytes       int64   `json:"bytes"`
	Size        int     `json:"size,omitempty"`
	Partitions  int     `json:"partitions"`
	Acks        string  `json:"acks,omitempty"`
	Compression string  `json:"compression,omitempty"`
	Seconds     float64 `json:"seconds"`
	RecordsPerS float64 `json:"records_per_s"`
	MBPerS      float64 `json:"mb_per_s"`
	P50Ms       float64 `json:"p50_ms,omitempty"`
	P99Ms       float64 `json:"p99_ms,omitempty"`
	P999Ms      float64 `json:"p999_ms,omitempty"`
	MaxMs       float64 `json:"max_ms,omitempty"`
	Requests    int64   `json:"requests,omitempty"`
	Conns       int     `json:"conns,omitempty"`
	Passes      int     `json:"passes,omitempty"`
}

type config struct {
	brokers     string
	topic       string
	mode        string
	records     int
	size        int
	partitions  int
	acks        string
	compression string
	linger      time.Duration
	create      bool
	timeout     time.Duration
	jsonOut     bool
	conns       int
	passes      int
	series      string
}

// fetched counts the record-batch bytes fetch mode has read so far, for
// the -series sampler.
var fetched atomic.Int64

func main() {
	var c config
	flag.StringVar(&c.brokers, "brokers", "127.0.0.1:9092", "seed broker host:port")
	flag.StringVar(&c.topic, "topic", "kafkaperf", "topic")
	flag.StringVar(&c.mode, "mode", "produce", "produce, consume or fetch")
	flag.IntVar(&c.records, "records", 1_000_000, "records to produce")
	flag.IntVar(&c.size, "size", 100, "record value size in bytes (>= 8)")
	flag.IntVar(&c.partitions, "partitions", 3, "partitions to produce to (and to create with -create)")
	flag.StringVar(&c.acks, "acks", "1", "required acks: 0, 1 or all")
	flag.StringVar(&c.compression, "compression", "none", "none, gzip, snappy, lz4 or zstd")
	flag.DurationVar(&c.linger, "linger", 0, "producer linger (0: franz-go's default)")
	flag.BoolVar(&c.create, "create", false, "create the topic with -partitions partitions first")
	flag.DurationVar(&c.timeout, "timeout", 3*time.Minute, "bound on the whole run")
	flag.BoolVar(&c.jsonOut, "json", false, "print the result as one JSON object")
	flag.IntVar(&c.conns, "conns", 1, "fetch mode: connections to spread the partitions over")
	flag.IntVar(&c.passes, "passes", 1, "fetch mode: times to read the whole range (longer, steadier runs)")
	flag.StringVar(&c.series, "series", "", "fetch mode: write the throughput every 100 ms to this CSV file (seconds, bytes, mb_per_s)")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	res, err := run(ctx, c)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kafkaperf: %v\n", err)
		os.Exit(1)
	}
	if c.jsonOut {
		if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
			fmt.Fprintf(os.Stderr, "kafkaperf: %v\n", err)
			os.Exit(1)
		}
		return
	}
	fmt.Printf("%s %s: %d records, %.1f MB in %.2fs: %.0f records/s, %.1f MB/s",
		res.Mode, res.Topic, res.Records, float64(res.Bytes)/1e6, res.Seconds, res.RecordsPerS, res.MBPerS)
	if res.Mode == "produce" {
		fmt.Printf(", latency p50 %.2f ms p99 %.2f ms p99.9 %.2f ms max %.2f ms", res.P50Ms, res.P99Ms, res.P999Ms, res.MaxMs)
	}
	fmt.Println()
}

func run(ctx context.Context, c config) (*result, error) {
	if c.size < 8 {
		return nil, fmt.Errorf("-size %d: want at least 8", c.size)
	}
	admin, err := kgo.NewClient(kgo.SeedBrokers(c.brokers))
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	if c.create {
		if err := createTopic(ctx, admin, c.topic, c.partitions); err != nil {
			return nil, err
		}
	}
	switch c.mode {
	case "produce":
		return produce(ctx, c)
	case "consume":
		ends, err := endOffsets(ctx, admin, c.topic)
		if err != nil {
			return nil, err
		}
		return consume(ctx, c, ends)
	case "fetch":
		ends, err := endOffsets(ctx, admin, c.topic)
		if err != nil {
			return nil, err
		}
		return fetch(ctx, c, ends)
	}
	return nil, fmt.Errorf("-mode %q: want produce, consume or fetch", c.mode)
}

func createTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, int32(partitions), 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topics %s: %w", t.Topic, err)
		}
	}
	return nil
}

// produce sends c.records records and measures throughput and the latency
// from Produce to acknowledgement.
func produce(ctx context.Context, c config) (*result, error) {
	acks, err := benchutil.Acks(c.acks)
	if err != nil {
		return nil, err
	}
	codec, err := benchutil.Codec(c.compression)
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.brokers),
		kgo.DisableIdempotentWrite(),
		kgo.RequiredAcks(acks),
		kgo.ProducerBatchCompression(codec),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(max(10_000, 4<<20/c.size)),
		kgo.MaxProduceRequestsInflightPerBroker(5),
	}
	if c.linger > 0 {
		opts = append(opts, kgo.ProducerLinger(c.linger))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()

	// Values differ per record (an index, then filler) so that compression
	// has realistic but not degenerate input.
	filler := make([]byte, c.size)
	for i := range filler {
		filler[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[(i*7+i/13)%36]
	}
	lat := make([]time.Duration, c.records)
	var (
		wg       sync.WaitGroup
		failed   atomic.Int64
		errOnce  sync.Once
		firstErr error
	)
	start := time.Now()
	for i := range c.records {
		v := make([]byte, c.size)
		copy(v, filler)
		binary.BigEndian.PutUint64(v, uint64(i))
		r := &kgo.Record{Topic: c.topic, Partition: int32(i % c.partitions), Value: v}
		t0 := time.Now()
		wg.Add(1)
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			lat[i] = time.Since(t0)
			if err != nil {
				failed.Add(1)
				errOnce.Do(func() { firstErr = err })
			}
			wg.Done()
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return nil, fmt.Errorf("flush: %w", err)
	}
	wg.Wait()
	elapsed := time.Since(start)
	if n := failed.Load(); n > 0 {
		return nil, fmt.Errorf("%d of %d records failed; first: %w", n, c.records, firstErr)
	}
	slices.Sort(lat)
	pct := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))]) / 1e6
	}
	res := &result{
		Mode: "produce", Topic: c.topic, Records: int64(c.records), Bytes: int64(c.records) * int64(c.size),
		Size: c.size, Partitions: c.partitions, Acks: c.acks, Compression: c.compression,
		Seconds: elapsed.Seconds(),
		P50Ms:   pct(0.50), P99Ms: pct(0.99), P999Ms: pct(0.999), MaxMs: float64(lat[len(lat)-1]) / 1e6,
	}
	res.fill()
	return res, nil
}

func (r *result) fill() {
	r.RecordsPerS = float64(r.Records) / r.Seconds
	r.MBPerS = float64(r.Bytes) / r.Seconds / 1e6
}

// endOffsets returns the latest offset of every partition of topic.
func endOffsets(ctx context.Context, cl *kgo.Client, topic string) (map[int32]int64, error) {
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	md, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	if len(md.Topics) != 1 || md.Topics[0].ErrorCode != 0 {
		return nil, fmt.Errorf("metadata %s: %+v", topic, md.Topics)
	}
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, p := range md.Topics[0].Partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p.Partition, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("list offsets: %w", err)
	}
	ends := map[int32]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("list offsets %s/%d: %w", t.Topic, p.Partition, err)
			}
			ends[p.Partition] = p.Offset
		}
	}
	return ends, nil
}

// consume reads every partition from the start to ends with franz-go's
// consumer.
func consume(ctx context.Context, c config, ends map[int32]int64) (*result, error) {
	offsets := map[int32]kgo.Offset{}
	var want int64
	for p, end := range ends {
		if end > 0 {
			offsets[p] = kgo.NewOffset().AtStart()
			want += end
		}
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(c.brokers),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{c.topic: offsets}),
		kgo.FetchMaxBytes(64<<20),
		kgo.FetchMaxPartitionBytes(16<<20),
	)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var n, bytes int64
	start := time.Now()
	for n < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("consumed %d of %d records: %w", n, want, err)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return nil, fmt.Errorf("fetch %s/%d: %w", errs[0].Topic, errs[0].Partition, errs[0].Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < ends[r.Partition] {
				n++
				bytes += int64(len(r.Value) + len(r.Key))
			}
		})
	}
	res := &result{Mode: "consume", Topic: c.topic, Records: n, Bytes: bytes, Partitions: len(ends), Seconds: time.Since(start).Seconds()}
	res.fill()
	return res, nil
}

// fetchVersion is the Fetch version the bare fetcher speaks: the newest
// without flexible encoding, served by Kafka since 2.3 and by Strata.
const fetchVersion = 11

// fetch reads every partition from the start to ends with bare Fetch v11
// requests, its partitions spread over c.conns connections of its own, each
// connection asking for all of its partitions at once, reading each
// response into one reused buffer and walking batch headers in place: one
// copy from the socket, as bench/loopback's receiver does, so that the
// figure is the broker's, not the client's decoding.
func fetch(ctx context.Context, c config, ends map[int32]int64) (*result, error) {
	conns := max(1, min(c.conns, len(ends)))
	shares := make([]map[int32]int64, conns)
	for i := range shares {
		shares[i] = map[int32]int64{}
	}
	i := 0
	for p, end := range ends {
		shares[i%conns][p] = end
		i++
	}
	type tally struct {
		records, bytes, requests int64
		err                      error
	}
	tallies := make(chan tally, conns)
	start := time.Now()
	if c.series != "" {
		stop := sampleSeries(c.series, start)
		defer func() {
			if err := stop(); err != nil {
				fmt.Fprintf(os.Stderr, "kafkaperf: -series: %v\n", err)
			}
		}()
	}
	for _, share := range shares {
		go func() {
			var t tally
			for range max(1, c.passes) {
				r, b, q, err := fetchConn(ctx, c.brokers, c.topic, share)
				t.records, t.bytes, t.requests = t.records+r, t.bytes+b, t.requests+q
				if t.err = err; err != nil {
					break
				}
			}
			tallies <- t
		}()
	}
	res := &result{Mode: "fetch", Topic: c.topic, Partitions: len(ends), Conns: conns, Passes: max(1, c.passes)}
	var errs []error
	for range conns {
		t := <-tallies
		res.Records += t.records
		res.Bytes += t.bytes
		res.Requests += t.requests
		errs = append(errs, t.err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	res.Seconds = time.Since(start).Seconds()
	res.fill()
	return res, nil
}

// fetchConn fetches the partitions in ends, from offset 0 to their end, on
// one connection.
func fetchConn(ctx context.Context, addr, topic string, ends map[int32]int64) (records, bytes, requests int64, err error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, 0, 0, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(dl); err != nil {
			return 0, 0, 0, err
		}
	}
	next := map[int32]int64{}
	for p := range ends {
		next[p] = 0
	}
	var (
		req, buf []byte
		size     [4]byte
	)
	for corr := int32(1); ; corr++ {
		fr := kmsg.NewPtrFetchRequest()
		fr.Version = fetchVersion
		fr.ReplicaID = -1
		fr.MaxWaitMillis = 100
		fr.MinBytes = 1
		fr.MaxBytes = 64 << 20
		fr.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		for p, off := range next {
			if off < ends[p] {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, 32<<20
				rp.CurrentLeaderEpoch, rp.LogStartOffset = -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
		}
		if len(rt.Partitions) == 0 {
			break
		}
		fr.Topics = append(fr.Topics, rt)

		// Request header v1: key, version, correlation id, client id.
		req = append(req[:0], 0, 0, 0, 0)
		req = binary.BigEndian.AppendUint16(req, 1)
		req = binary.BigEndian.AppendUint16(req, fetchVersion)
		req = binary.BigEndian.AppendUint32(req, uint32(corr))
		req = binary.BigEndian.AppendUint16(req, 9)
		req = append(req, "kafkaperf"...)
		req = fr.AppendTo(req)
		binary.BigEndian.PutUint32(req, uint32(len(req)-4))
		if _, err := conn.Write(req); err != nil {
			return 0, 0, 0, fmt.Errorf("fetch: %w", err)
		}
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			return 0, 0, 0, fmt.Errorf("fetch response: %w", err)
		}
		n := int(binary.BigEndian.Uint32(size[:]))
		if n < 4 || n > 1<<30 {
			return 0, 0, 0, fmt.Errorf("fetch response size %d", n)
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(conn, buf); err != nil {
			return 0, 0, 0, fmt.Errorf("fetch response: %w", err)
		}
		requests++
		if got := int32(binary.BigEndian.Uint32(buf)); got != corr {
			return 0, 0, 0, fmt.Errorf("fetch response: correlation id %d, want %d", got, corr)
		}
		resp := kmsg.NewPtrFetchResponse()
		resp.Version = fetchVersion
		if err := resp.UnsafeReadFrom(buf[4:]); err != nil {
			return 0, 0, 0, fmt.Errorf("fetch response: %w", err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return 0, 0, 0, fmt.Errorf("fetch: %w", err)
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return 0, 0, 0, fmt.Errorf("fetch %s/%d at %d: %w", t.Topic, p.Partition, next[p.Partition], err)
				}
				n, last, count := walkBatches(p.RecordBatches)
				if last >= 0 {
					next[p.Partition] = last + 1
				}
				bytes += int64(n)
				records += count
				fetched.Add(int64(n))
			}
		}
	}
	return records, bytes, requests, nil
}

// walkBatches returns the bytes of whole record batches at the start of b,
// the last offset of the last whole batch (-1 if none) and the records they
// hold, from the v2 batch header: base offset (8), length (4), epoch (4),
// magic (1), crc (4), attributes (2), last offset delta (4), timestamps
// (16), producer (14), record count (4).
func walkBatches(b []byte) (n int, last int64, records int64) {
	last = -1
	for len(b[n:]) >= 61 {
		h := b[n:]
		size := 12 + int(int32(binary.BigEndian.Uint32(h[8:])))
		if size < 61 || size > len(h) {
			break
		}
		last = int64(binary.BigEndian.Uint64(h)) + int64(int32(binary.BigEndian.Uint32(h[23:])))
		records += int64(int32(binary.BigEndian.Uint32(h[57:])))
		n += size
	}
	return n, last, records
}

// sampleSeries writes the fetched byte count every 100 ms to path until the
// returned function is called, which writes the last sample and closes the
// file.
func sampleSeries(path string, start time.Time) func() error {
	f, err := os.Create(path)
	if err != nil {
		return func() error { return err }
	}
	fmt.Fprintln(f, "seconds,bytes,mb_per_s")
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		prevT, prevB := 0.0, int64(0)
		sample := func() {
			now, b := time.Since(start).Seconds(), fetched.Load()
			// A last interval much shorter than the period would be
			// mostly noise.
			if now-prevT >= 0.05 {
				fmt.Fprintf(f, "%.3f,%d,%.1f\n", now, b, float64(b-prevB)/(now-prevT)/1e6)
			}
			prevT, prevB = now, b
		}
		for {
			select {
			case <-t.C:
				sample()
			case <-done:
				sample()
				return
			}
		}
	}()
	return func() error {
		close(done)
		<-finished
		return f.Close()
	}
}
