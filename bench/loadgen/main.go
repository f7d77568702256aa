// Command loadgen is the Kafka client load of Strata's benchmarks, built on
// franz-go, in the spirit of kafka-producer-perf-test and the OpenMessaging
// Benchmark. It works against any Kafka broker.
//
// Modes (-mode):
//
//	produce  (the default) -producers clients send -size byte records,
//	         round robin over -partitions partitions, either -records in
//	         all or for -duration, at -rate records/s in all (0: as fast as
//	         the broker takes them), with -acks, -compression and -linger.
//	         -consumers clients read the same partitions from the end
//	         offsets they had before the first record was sent and stop
//	         when they have every record produced (or -drain after the
//	         producers finish). Reported: records/s and MB/s of producers
//	         and consumers; produce latency (Produce call to
//	         acknowledgement, client-side queueing included) and end-to-end
//	         latency (Produce call to the consumer's poll that returned the
//	         record), p50, p99, p99.9 and max, from log-bucketed histograms
//	         (1.6% resolution) with the whole percentile curve in the JSON.
//	consume  reads every partition of -topic from its start to the end
//	         offset it had when the run began, with franz-go's consumer
//	         (records decoded, as an application sees them).
//	fetch    the same range with bare Fetch v11 requests from the first of
//	         -brokers (which must lead every partition), the partitions
//	         spread over -conns connections, -passes times, one reused
//	         buffer per connection, batches counted in place and not
//	         decoded: the broker's fetch bandwidth with the least client
//	         work (one copy, as bench/loopback's receiver makes). -series
//	         writes its throughput every 100 ms.
//	verify   reads the topic from offset 0 with franz-go and checks every
//	         record's offset and value against what one produce run with
//	         one producer wrote (value.go): nothing lost, reordered or
//	         changed.
//
// MB is 10^6 bytes. MB/s counts record values, except in fetch mode, where
// it counts record-batch bytes (what the wire carries). Text on stdout,
// -json (a file, or - for stdout instead of text) and, in produce mode,
// -csv (one row per run, header when new); a progress bar on stderr when
// it is a terminal.
//
// Examples:
//
//	loadgen -brokers 127.0.0.1:9092 -topic t -create -partitions 3 -size 1024 -duration 30s -rate 50000 -consumers 1 -acks all
//	loadgen -brokers 127.0.0.1:9092 -topic t -mode fetch -conns 3 -passes 4
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

// config is one run's settings, as given on the command line.
type config struct {
	Brokers     string            `json:"brokers"`
	Topic       string            `json:"topic"`
	Mode        string            `json:"mode"`
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
	Conns       int               `json:"conns,omitempty"`
	Passes      int               `json:"passes,omitempty"`
	Series      string            `json:"-"`
	Timeout     time.Duration     `json:"-"`
	Drain       time.Duration     `json:"-"`
	JSONPath    string            `json:"-"`
	CSVPath     string            `json:"-"`
	Progress    string            `json:"-"`
}

// seeds returns the -brokers list.
func (c config) seeds() []string { return strings.Split(c.Brokers, ",") }

// side is the throughput and latency of the producers or the consumers.
type side struct {
	Records     int64           `json:"records"`
	Bytes       int64           `json:"bytes"`
	Seconds     float64         `json:"seconds"`
	RecordsPerS float64         `json:"records_per_s"`
	MBPerS      float64         `json:"mb_per_s"`
	Latency     *latencySummary `json:"latency,omitempty"`
}

func (s *side) fill() {
	if s.Seconds > 0 {
		s.RecordsPerS = float64(s.Records) / s.Seconds
		s.MBPerS = float64(s.Bytes) / s.Seconds / 1e6
	}
}

// readSide is a read of a whole topic (modes consume, fetch and verify).
type readSide struct {
	side
	Partitions int   `json:"partitions"`
	Requests   int64 `json:"requests,omitempty"`
	Conns      int   `json:"conns,omitempty"`
	Passes     int   `json:"passes,omitempty"`
}

// result is what one run reports.
type result struct {
	Config  config `json:"config"`
	Start   string `json:"start"`
	Produce *side  `json:"produce,omitempty"`
	// Consume is nil without consumers; its latency is end to end.
	Consume *side `json:"consume,omitempty"`
	// Read is the whole-topic read of modes consume, fetch and verify.
	Read   *readSide `json:"read,omitempty"`
	Errors int64     `json:"errors"`
	Error  string    `json:"error,omitempty"`
}

func main() {
	c := config{TopicConfig: map[string]string{}}
	flag.StringVar(&c.Brokers, "brokers", "127.0.0.1:9092", "seed brokers, comma-separated host:port")
	flag.StringVar(&c.Topic, "topic", "loadgen", "topic")
	flag.StringVar(&c.Mode, "mode", "produce", "produce, consume, fetch or verify")
	flag.StringVar(&c.Label, "label", "", "name of this run in the CSV and JSON")
	flag.BoolVar(&c.Create, "create", false, "create the topic first (an existing one is used as it is)")
	flag.IntVar(&c.RF, "replication-factor", 1, "replication factor of a created topic")
	flag.Var(kvFlag(c.TopicConfig), "topic-config", "key=value config of a created topic (repeatable)")
	flag.IntVar(&c.Partitions, "partitions", 3, "partitions to produce to and consume from (and of a created topic)")
	flag.IntVar(&c.Size, "size", 100, "record value size in bytes (>= 8; verify mode: the size produced, >= 16)")
	flag.Int64Var(&c.Records, "records", 0, "records to produce in all (0: run for -duration)")
	flag.DurationVar(&c.Duration, "duration", 10*time.Second, "how long to produce when -records is 0")
	flag.Float64Var(&c.Rate, "rate", 0, "target records/s over all producers (0: unlimited)")
	flag.IntVar(&c.Producers, "producers", 1, "producer clients")
	flag.IntVar(&c.Consumers, "consumers", 0, "consumer clients (end-to-end latency)")
	flag.StringVar(&c.Acks, "acks", "1", "required acks: 0, 1 or all")
	flag.StringVar(&c.Compression, "compression", "none", "none, gzip, snappy, lz4 or zstd")
	flag.DurationVar(&c.Linger, "linger", 0, "producer linger: how long a partition's batch waits for more records (franz-go's own default is 10ms)")
	flag.IntVar(&c.Conns, "conns", 1, "fetch mode: connections to spread the partitions over")
	flag.IntVar(&c.Passes, "passes", 1, "fetch mode: times to read the whole range (longer, steadier runs)")
	flag.StringVar(&c.Series, "series", "", "fetch mode: write the throughput every 100 ms to this CSV file (seconds, bytes, mb_per_s)")
	flag.DurationVar(&c.Timeout, "timeout", 5*time.Minute, "bound on the whole run")
	flag.DurationVar(&c.Drain, "drain", 15*time.Second, "how long consumers may take to catch up after the producers finish")
	flag.StringVar(&c.JSONPath, "json", "", "write the result as JSON to this file (- for stdout instead of text)")
	flag.StringVar(&c.CSVPath, "csv", "", "produce mode: append the result as a CSV row to this file")
	flag.StringVar(&c.Progress, "progress", "auto", "produce mode: progress bar on stderr: auto (when a terminal), on or off")
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

// run runs the mode; a result with an error is a run that measured
// something before it failed.
func run(ctx context.Context, c config) (*result, error) {
	if c.CSVPath != "" && c.Mode != "produce" {
		return nil, fmt.Errorf("-csv is for produce mode, not %s", c.Mode)
	}
	if c.Mode == "produce" {
		if err := c.checkProduce(); err != nil {
			return nil, err
		}
	}
	adm, err := newAdmin(c.seeds())
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	if c.Create {
		if err := createTopic(ctx, adm, c); err != nil {
			return nil, err
		}
	}
	switch c.Mode {
	case "produce":
		return produceRun(ctx, c, adm)
	case "consume", "fetch", "verify":
		return readRun(ctx, c, adm)
	}
	return nil, fmt.Errorf("-mode %q: want produce, consume, fetch or verify", c.Mode)
}
