package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	register(&command{
		name:    "produce",
		summary: "send lines from stdin or a file to a topic, a record a line",
		run:     runProduce,
	})
}

const produceUsage = `Usage: strata produce [flags] TOPIC

Sends each line of stdin (or of --file) to TOPIC as one record, like
kafka-console-producer.sh. A line ends at \n or \r\n; the last one needs
no newline. With --key-separator a line is split at the first separator
into key and value; without it the key is null. Kafka's spelling works
too: --property parse.key=true splits at a tab, or at
--property key.separator=SEP (as --key-separator SEP); key.separator
without parse.key=true is ignored, as Kafka ignores it. Records without
--partition are spread by key as Kafka's default partitioner does.

Writes are idempotent (no duplicates on retry) unless --acks is 0 or 1.
A topic that does not exist is created if the broker allows it
(auto.create.topics.enable). When --file is read and stderr is a terminal,
a progress bar shows on stderr. At the end a summary goes to stdout:
records, bytes of keys and values, seconds.

Exit status: 0 when every record was acknowledged; 1 when one was not
(the first error is printed), or a line has no key separator; 2 for a
usage error; 130 after Ctrl-C.
`

const produceExample = `
Example:
  printf 'user-1:hello\nuser-2:world\n' | strata produce --key-separator : \
      --header source=cli --compression zstd orders
  strata produce --file events.txt --acks 1 orders
`

// stdin is where produce reads lines without --file; tests replace it.
var stdin io.Reader = os.Stdin

// produceDeliveryTimeout bounds how long a record may wait for its
// acknowledgement, retries included, before it counts as failed.
const produceDeliveryTimeout = 2 * time.Minute

func runProduce(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("produce", produceUsage, produceExample, stdout, stderr)
	file := c.fs.String("file", "", "read lines from file `PATH` instead of stdin")
	keySep := c.fs.String("key-separator", "", "split each line into key and value at the first `SEP`")
	var headers keyValueFlag
	c.fs.Var(&headers, "header", "add header `KEY=VALUE` to every record; repeatable")
	compression := c.fs.String("compression", "none", "batch compression `CODEC`: none, gzip, snappy, lz4 or zstd")
	acks := c.fs.String("acks", "all", "`ACKS` to wait for: 0 (none), 1 (the leader's) or all (the in-sync replicas')")
	partition := c.fs.Int("partition", -1, "send every record to partition `P` (default: by key)")
	props := &consoleProps{known: producerProperties}
	c.fs.Var(propertyFlag{props}, "property", "kafka-console-producer.sh's `KEY=VALUE`: parse.key=true (split at key.separator, default a tab), key.separator=SEP; repeatable")
	topic, status, ok := c.parseTopicArg(args)
	if !ok {
		return status
	}
	parseKey, err := props.bool("parse.key", false)
	if err != nil {
		return c.usageError("%v", err)
	}
	if parseKey {
		sep := props.str("key.separator", "\t")
		switch {
		case sep == "":
			return c.usageError("--property key.separator is empty: give a separator")
		case *keySep != "" && *keySep != sep:
			return c.usageError("--key-separator %q and --property key.separator=%q differ: give one", *keySep, sep)
		}
		*keySep = sep
	}

	opts := []kgo.Opt{
		kgo.DefaultProduceTopic(topic),
		kgo.AllowAutoTopicCreation(),
		kgo.RecordDeliveryTimeout(produceDeliveryTimeout),
	}
	codec, err := codecOpt(*compression)
	if err != nil {
		return c.usageError("--compression %q: %v", *compression, err)
	}
	opts = append(opts, kgo.ProducerBatchCompression(codec))
	switch *acks {
	case "all", "-1":
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	default:
		return c.usageError("--acks %q: want 0, 1 or all", *acks)
	}
	if *partition < -1 {
		return c.usageError("--partition %d: want a partition number", *partition)
	}
	if *partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}

	in := stdin
	var size int64 = -1
	if *file != "" {
		f, err := os.Open(*file)
		if err != nil {
			return c.fail(err)
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			size = st.Size()
		}
		in = f
	}

	ctx, stop := signalContext()
	defer stop()
	s, ctx, err := c.connect(ctx, opts...)
	if err != nil {
		return c.fail(err)
	}
	defer s.close()
	if *partition >= 0 {
		if err := checkPartition(ctx, s, topic, int32(*partition)); err != nil {
			return c.fail(err)
		}
	}

	p := &producer{
		s:         s,
		topic:     topic,
		keySep:    []byte(*keySep),
		partition: int32(*partition),
		in:        &countingReader{r: in},
	}
	for _, kv := range headers {
		p.headers = append(p.headers, kgo.RecordHeader{Key: kv[0], Value: []byte(kv[1])})
	}
	var bar *progressBar
	if *file != "" && size > 0 && isTerminal(stderr) {
		bar = startProgress(stderr, size, p)
	}
	start := time.Now()
	readErr := p.run(ctx)
	bar.stop()
	elapsed := time.Since(start)

	acked, bytesAcked, failed := p.acked.Load(), p.bytes.Load(), p.failed.Load()
	unacked := p.sent.Load() - acked
	fmt.Fprintf(stdout, "Produced %s (%s of keys and values) to %s in %.2f s", plural(acked, "record"), plural(bytesAcked, "byte"), topic, elapsed.Seconds())
	if secs := elapsed.Seconds(); secs > 0 && acked > 0 {
		fmt.Fprintf(stdout, " (%.0f records/s)", float64(acked)/secs)
	}
	fmt.Fprintln(stdout, ".")
	switch {
	case abortCause(ctx) != nil:
		return c.fail(fmt.Errorf("%s not acknowledged: %w", plural(unacked, "record"), abortCause(ctx)))
	case ctx.Err() != nil:
		fmt.Fprintf(stderr, "strata produce: interrupted; %s not acknowledged\n", plural(unacked, "record"))
		return 130
	case readErr != nil:
		return c.fail(readErr)
	case failed > 0:
		err := p.firstErr()
		return c.fail(withHint(fmt.Errorf("%s not acknowledged; the first error: %w", plural(failed, "record"), err), produceHint(err, topic)))
	}
	return 0
}

func produceHint(err error, topic string) string {
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return "The broker does not create topics on first use (auto.create.topics.enable=false): create it with 'strata topic create --topic " + topic + "'."
	case errors.Is(err, kerr.MessageTooLarge):
		return "A line is larger than the topic's max.message.bytes: raise it with 'strata topic alter --topic " + topic + " --add-config max.message.bytes=N'."
	}
	return hintFor(err)
}

func codecOpt(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, errors.New("want none, gzip, snappy, lz4 or zstd")
}

// checkPartition fails unless topic exists with the partition.
func checkPartition(ctx context.Context, s *session, topic string, partition int32) error {
	md, err := s.adm.Metadata(ctx, topic)
	if err != nil {
		return err
	}
	if !md.Topics.Has(topic) {
		return unknownTopic(topic)
	}
	if _, ok := md.Topics[topic].Partitions[partition]; !ok {
		return withHint(fmt.Errorf("topic %s has no partition %d (it has %d)", topic, partition, len(md.Topics[topic].Partitions)),
			"Partitions are numbered from 0; add some with 'strata topic alter --topic "+topic+" --partitions N'.")
	}
	return nil
}

// producer sends the lines of in and counts what was acknowledged.
type producer struct {
	s         *session
	topic     string
	keySep    []byte
	partition int32 // -1: by key
	headers   []kgo.RecordHeader
	in        *countingReader

	sent, acked, failed, bytes atomic.Int64
	mu                         struct {
		sync.Mutex
		first error
	}
}

func (p *producer) firstErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.first
}

// run reads and sends every line, then waits for the acknowledgements. It
// returns an error for bad input; failed records are counted.
func (p *producer) run(ctx context.Context) error {
	lines := make(chan []byte, 64)
	readErr := make(chan error, 1)
	go func() {
		defer close(lines)
		br := bufio.NewReaderSize(p.in, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				line = bytes.TrimSuffix(line, []byte("\n"))
				line = bytes.TrimSuffix(line, []byte("\r"))
				select {
				case lines <- line:
				case <-ctx.Done():
					return
				}
			}
			if err == io.EOF {
				return
			}
			if err != nil {
				readErr <- fmt.Errorf("reading input: %w", err)
				return
			}
		}
	}()

	var inputErr error
	n := 0
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case line, ok := <-lines:
			if !ok {
				break loop
			}
			n++
			r := &kgo.Record{Topic: p.topic, Value: line, Headers: p.headers, Partition: p.partition}
			if len(p.keySep) > 0 {
				k, v, found := bytes.Cut(line, p.keySep)
				if !found {
					inputErr = withHint(fmt.Errorf("line %d has no key separator %q", n, p.keySep),
						fmt.Sprintf("The lines before it were sent. Every line needs KEY%sVALUE with --key-separator.", p.keySep))
					break loop
				}
				r.Key, r.Value = k, v
			}
			p.sent.Add(1)
			p.s.cl.Produce(ctx, r, p.done)
		}
	}
	if inputErr == nil {
		select {
		case inputErr = <-readErr:
		default:
		}
	}
	fctx := ctx
	if ctx.Err() != nil && abortCause(ctx) == nil {
		// Interrupted: give what was sent a moment to be acknowledged.
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
	}
	if err := p.s.cl.Flush(fctx); err != nil {
		// Flush gave up: fail what is still buffered so that it is
		// counted. Its own error is the same context error.
		_ = p.s.cl.AbortBufferedRecords(context.Background())
	}
	return inputErr
}

func (p *producer) done(r *kgo.Record, err error) {
	if err != nil {
		p.failed.Add(1)
		p.mu.Lock()
		if p.mu.first == nil {
			p.mu.first = err
		}
		p.mu.Unlock()
		return
	}
	p.acked.Add(1)
	p.bytes.Add(int64(len(r.Key) + len(r.Value)))
}

// countingReader counts the bytes read through it, for the progress bar.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressBar redraws a line on a terminal: the share of the file read
// and the records acknowledged so far.
type progressBar struct {
	w     io.Writer
	size  int64
	p     *producer
	start time.Time
	quit  chan struct{}
	done  chan struct{}
}

func startProgress(w io.Writer, size int64, p *producer) *progressBar {
	b := &progressBar{w: w, size: size, p: p, start: time.Now(), quit: make(chan struct{}), done: make(chan struct{})}
	go b.loop()
	return b
}

func (b *progressBar) loop() {
	defer close(b.done)
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-b.quit:
			b.draw()
			fmt.Fprintln(b.w)
			return
		case <-t.C:
			b.draw()
		}
	}
}

func (b *progressBar) draw() {
	const width = 30
	read := b.p.in.n.Load()
	frac := min(float64(read)/float64(b.size), 1)
	filled := int(frac * width)
	rate := float64(read) / max(time.Since(b.start).Seconds(), 0.001) / (1 << 20)
	fmt.Fprintf(b.w, "\r[%s%s] %3.0f%%  %d records acknowledged  %.1f MiB/s ",
		strings.Repeat("=", filled), strings.Repeat(" ", width-filled), frac*100, b.p.acked.Load(), rate)
}

// stop draws the bar a last time and ends its line. A nil bar is a no-op.
func (b *progressBar) stop() {
	if b == nil {
		return
	}
	close(b.quit)
	<-b.done
}
