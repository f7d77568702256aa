package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	register(&command{
		name:    "consume",
		summary: "print the records of a topic",
		run:     runConsume,
	})
}

const consumeUsage = `Usage: strata consume [flags] TOPIC

Prints the records of TOPIC, like kafka-console-consumer.sh: all its
partitions, or one with --partition. It starts at the end of each partition
(new records only) unless --from-beginning, --offset or --from-time says
otherwise, and runs until Ctrl-C, --max-messages, --timeout or, with
--exit-at-end (-e, as kcat -e), until every partition reached the end it
had when its consumption began: the records there then, and no more.

With --group it joins that consumer group, shares the partitions with the
group's other members and commits the offsets of the records it printed
(every few seconds and when it stops). The start flags then apply only to
partitions where the group has no committed offset yet.

Text output is a line per record as kafka-console-consumer.sh prints it,
with its --property names: [CreateTime:MS<tab>] with print.timestamp=true,
[Partition:P<tab>] with print.partition=true, [Offset:N<tab>] with
print.offset=true, [K1:V1,K2:V2<tab>] (or NO_HEADERS) with
print.headers=true, [KEY<tab>] with print.key=true, then the value (off
with print.value=false). key.separator replaces the tab, headers.separator
the comma, line.separator the newline, null.literal the "null" a null key
or value prints as. --print-key is print.key=true; --print-offset is
print.partition=true and print.offset=true. JSON output (--format json) is an object
a line: {"topic", "partition", "offset", "timestamp" (Unix milliseconds),
"key", "value", "headers": [{"key", "value"}]}. A key or value is a string
when it is valid UTF-8, null when null, else base64 with "key_base64" or
"value_base64" true (for headers, "value_base64").

Progress (records, MB/s, the position against the end of the partitions
seen) goes to stderr at most four times a second when stderr is a
terminal; --progress shows it anyway, --no-progress never.

Exit status: 0 when it stopped as asked (Ctrl-C, --max-messages,
--timeout); 1 when the topic does not exist or consuming failed; 2 for a
usage error.
`

const consumeExample = `
Example:
  strata consume --from-beginning --max-messages 10 --print-key orders
  strata consume --partition 0 --offset 42 --format json orders
  strata consume --from-time 2024-05-01T12:00:00Z --timeout 5s orders
  strata consume --group billing orders
  strata consume -e --from-beginning --property print.timestamp=true --property print.key=true orders
`

// fetchMaxWait is how long the broker may hold a fetch without records:
// Kafka's consumer default, not franz-go's 5 s, so that a partition
// assigned while a fetch waits starts soon.
const fetchMaxWait = 500 * time.Millisecond

func runConsume(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("consume", consumeUsage, consumeExample, stdout, stderr)
	fromBeginning := c.fs.Bool("from-beginning", false, "start at the first record still in the log")
	offset := c.fs.String("offset", "", "start at `N` (or earliest, latest) in --partition")
	fromTime := c.fs.String("from-time", "", "start at the first record at or after `T`: RFC 3339 or Unix milliseconds")
	partition := c.fs.Int("partition", -1, "consume only partition `P`")
	group := c.fs.String("group", "", "consume as a member of consumer group `G` and commit offsets")
	maxMessages := c.fs.Int("max-messages", 0, "exit after `N` records (default: no limit)")
	timeout := c.fs.Duration("timeout", 0, "exit once no record arrived for `D`, such as 5s or 1m (default: never)")
	format := c.formatFlag()
	printKey := c.fs.Bool("print-key", false, "text format: print the key and a tab before the value (--property print.key=true)")
	printOffset := c.fs.Bool("print-offset", false, "text format: print the partition and offset before the record (print.partition and print.offset)")
	exitAtEnd := c.fs.Bool("exit-at-end", false, "exit once every partition reached the end it had when its consumption began")
	c.fs.BoolVar(exitAtEnd, "e", false, "the same as --exit-at-end (kcat -e)")
	progress := c.fs.Bool("progress", false, "show progress on stderr even when it is not a terminal")
	noProgress := c.fs.Bool("no-progress", false, "never show progress")
	props := &consoleProps{known: consumerProperties}
	c.fs.Var(propertyFlag{props}, "property", "kafka-console-consumer.sh's formatter `KEY=VALUE`: print.timestamp, print.key, print.headers, print.partition, print.offset, print.value (true or false), key.separator, headers.separator, line.separator, null.literal; repeatable")
	topic, status, ok := c.parseTopicArg(args)
	if !ok {
		return status
	}
	p, err := newPrinter(props, *printKey, *printOffset)
	if err != nil {
		return c.usageError("%v", err)
	}
	p.json = format.json()
	if p.json && len(props.set) > 0 {
		return c.usageError("--property sets the text format: it does not go with --format json")
	}
	if *progress && *noProgress {
		return c.usageError("give one of --progress and --no-progress")
	}

	start := kgo.NewOffset().AtEnd()
	exact := int64(-1) // --offset N
	var fromMs int64   // --from-time
	starts := 0
	if *fromBeginning {
		start = kgo.NewOffset().AtStart()
		starts++
	}
	if *fromTime != "" {
		ms, err := parseTime(*fromTime)
		if err != nil {
			return c.usageError("--from-time %q: %v", *fromTime, err)
		}
		start = kgo.NewOffset().AfterMilli(ms)
		fromMs = ms
		starts++
	}
	if *offset != "" {
		switch *offset {
		case "earliest":
			start = kgo.NewOffset().AtStart()
		case "latest":
			start = kgo.NewOffset().AtEnd()
		default:
			n, err := strconv.ParseInt(*offset, 10, 64)
			if err != nil || n < 0 {
				return c.usageError("--offset %q: want an offset (0 or more), earliest or latest", *offset)
			}
			exact = n
		}
		starts++
		if *partition < 0 {
			return c.usageError("--offset needs --partition: offsets are per partition")
		}
	}
	switch {
	case starts > 1:
		return c.usageError("give one of --from-beginning, --offset and --from-time")
	case *partition < -1:
		return c.usageError("--partition %d: want a partition number", *partition)
	case *group != "" && *partition >= 0:
		return c.usageError("--group and --partition cannot go together: the group assigns the partitions")
	case *maxMessages < 0:
		return c.usageError("--max-messages %d: want 0 or more", *maxMessages)
	case *timeout < 0:
		return c.usageError("--timeout %v: want a positive duration", *timeout)
	}
	spec := startSpec{start: start}
	switch {
	case *fromBeginning || *offset == "earliest":
		spec.kind = startEarliest
	case *fromTime != "":
		spec.kind, spec.ms = startTime, fromMs
	case *offset != "" && *offset != "latest":
		spec.kind = startExact
	}

	ctx, stop := signalContext()
	defer stop()
	at, err := c.checkConsume(ctx, topic, int32(*partition), exact)
	if err != nil {
		return c.fail(err)
	}
	if exact >= 0 {
		start = kgo.NewOffset().At(at)
		spec.exact = at
	}
	var end *endTracker
	if *exitAtEnd {
		end = newEndTracker()
	}

	// The --timeout clock starts once there are partitions to consume:
	// joining a group may take seconds (group.initial.rebalance.delay.ms).
	ready := make(chan struct{})
	var readyOnce sync.Once
	markReady := func() { readyOnce.Do(func() { close(ready) }) }
	opts := []kgo.Opt{kgo.FetchMaxWait(fetchMaxWait)}
	if end != nil {
		// The markers of transactions count toward the end.
		opts = append(opts, kgo.KeepControlRecords())
	}
	switch {
	case *group != "":
		opts = append(opts, kgo.ConsumerGroup(*group), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(start), kgo.AutoCommitMarks(),
			kgo.OnPartitionsAssigned(func(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
				if end != nil {
					end.addAll(spec.positions(ctx, kadm.NewClient(cl), topic, assigned[topic], *group))
				}
				markReady()
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
				if end != nil {
					end.remove(revoked[topic])
				}
			}),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
				if end != nil {
					end.remove(lost[topic])
				}
			}))
	case *partition >= 0:
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {int32(*partition): start}}))
	default:
		opts = append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(start))
	}
	if *group == "" {
		markReady()
	}
	s, ctx, err := c.connect(ctx, opts...)
	if err != nil {
		return c.fail(err)
	}
	defer s.close()
	if end != nil && *group == "" {
		var parts []int32 // nil: all
		if *partition >= 0 {
			parts = []int32{int32(*partition)}
		}
		end.addAll(spec.positions(ctx, s.adm, topic, parts, ""))
	}

	out := bufio.NewWriter(stdout)
	p.out = out
	cons := &consumer{s: s, p: p, limit: *maxMessages, idle: *timeout, group: *group != "", ready: ready, stderr: stderr, startIdle: idleTimer, end: end}
	if *progress || !*noProgress && isTerminal(stderr) {
		cons.progress = newConsumeProgress(stderr, isTerminal(stderr))
	}
	count, err := cons.run(ctx)
	cons.progress.finish()
	if ferr := out.Flush(); err == nil && ferr != nil {
		err = ferr
	}
	fmt.Fprintf(stderr, "Processed a total of %s\n", plural(int64(count), "message"))
	if *group != "" {
		cctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		cerr := s.cl.CommitMarkedOffsets(cctx)
		cancel()
		if cerr != nil && err == nil {
			err = fmt.Errorf("committing the offsets of group %s: %w", *group, cerr)
		}
	}
	if err != nil {
		return c.fail(err)
	}
	return 0
}

// parseTime parses RFC 3339 or Unix milliseconds into Unix milliseconds.
func parseTime(s string) (int64, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms < 0 {
			return 0, errors.New("want Unix milliseconds of 0 or more")
		}
		return ms, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, errors.New("want RFC 3339 (2006-01-02T15:04:05Z07:00) or Unix milliseconds")
	}
	return t.UnixMilli(), nil
}

// checkTopic fails unless topic exists with the partition (any partition
// when partition is -1).
func checkTopic(ctx context.Context, s *session, topic string, partition int32) error {
	if partition >= 0 {
		return checkPartition(ctx, s, topic, partition)
	}
	md, err := s.adm.Metadata(ctx, topic)
	if err != nil {
		return err
	}
	if !md.Topics.Has(topic) {
		return unknownTopic(topic)
	}
	return nil
}

// checkConsume checks that topic and partition (-1: any) exist before
// consuming, and returns exact (-1: none) kept within the partition's log,
// saying so on stderr when it moved: Kafka's consumer would jump to the
// end of the log from an offset past it.
func (c *clientCmd) checkConsume(ctx context.Context, topic string, partition int32, exact int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	s, ctx, err := c.connect(ctx)
	if err != nil {
		return 0, err
	}
	defer s.close()
	if err := checkTopic(ctx, s, topic, partition); err != nil || exact < 0 {
		return exact, err
	}
	starts, err := s.adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	ends, err := s.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	first, ok1 := starts.Lookup(topic, partition)
	end, ok2 := ends.Lookup(topic, partition)
	switch {
	case !ok1 || !ok2:
		return 0, fmt.Errorf("the broker's answer does not mention partition %s-%d", topic, partition)
	case first.Err != nil:
		return 0, fmt.Errorf("the log start of %s-%d: %w", topic, partition, first.Err)
	case end.Err != nil:
		return 0, fmt.Errorf("the log end of %s-%d: %w", topic, partition, end.Err)
	case exact < first.Offset:
		fmt.Fprintf(c.stderr, "strata consume: offset %d is before the start of %s-%d; starting at %d\n", exact, topic, partition, first.Offset)
		return first.Offset, nil
	case exact > end.Offset:
		fmt.Fprintf(c.stderr, "strata consume: offset %d is past the end of %s-%d; starting at the end, %d\n", exact, topic, partition, end.Offset)
		return end.Offset, nil
	}
	return exact, nil
}

// consumer prints the records of a session.
type consumer struct {
	s      *session
	p      *printer
	limit  int           // records to print; 0: no limit
	idle   time.Duration // stop when no record arrived for this long; 0: never
	group  bool          // mark printed records for commit
	ready  chan struct{} // closed when partitions are assigned: the idle clock starts then
	stderr io.Writer
	// startIdle starts the idle clock of one poll: idleTimer, taken
	// when the command starts, as goroutines may call it after it ended.
	startIdle func(time.Duration) *time.Timer
	end       *endTracker      // --exit-at-end; nil without
	progress  *consumeProgress // nil: none
}

// idleTimer starts the --timeout clock of one poll. Tests replace it to
// see when the clock starts.
var idleTimer = time.NewTimer

// errIdle ends a poll after --timeout without records.
var errIdle = errors.New("no records within --timeout")

// run prints records until ctx ends, limit records were printed or none
// arrived for idle. It returns the number printed and the error that
// stopped it, if it was not asked to stop.
func (c *consumer) run(ctx context.Context) (int, error) {
	count := 0
	for c.limit == 0 || count < c.limit {
		if c.end.finished() {
			return count, c.end.error()
		}
		want := -1
		if c.limit > 0 {
			want = c.limit - count
		}
		fetches, idled := c.poll(ctx, want)
		if fetches.IsClientClosed() {
			return count, nil
		}
		var fatal error
		fetches.EachError(func(topic string, partition int32, err error) {
			switch {
			case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, errIdle), errors.Is(err, errAtEnd):
			case isDataLoss(err):
				fmt.Fprintf(c.stderr, "strata consume: warning: %v\n", err)
			case fatal == nil:
				fatal = fmt.Errorf("partition %s-%d: %w", topic, partition, err)
			}
		})
		var werr error
		c.progress.fetched(fetches)
		fetches.EachRecord(func(r *kgo.Record) {
			if werr != nil || c.limit > 0 && count >= c.limit || !c.end.take(r) {
				return
			}
			if r.Attrs.IsControl() { // kept for --exit-at-end only
				if c.group {
					c.s.cl.MarkCommitRecords(r)
				}
				return
			}
			if werr = c.p.print(r); werr != nil {
				return
			}
			count++
			c.progress.record(r)
			if c.group {
				c.s.cl.MarkCommitRecords(r)
			}
		})
		c.progress.tick(false)
		if werr != nil {
			return count, werr
		}
		if err := c.p.out.Flush(); err != nil {
			return count, err
		}
		switch {
		case fatal != nil:
			return count, fatal
		case ctx.Err() != nil:
			return count, abortCause(ctx) // nil after Ctrl-C
		case c.end.finished():
			return count, c.end.error()
		case fetches.NumRecords() == 0 && idled:
			return count, nil // --timeout
		}
	}
	return count, nil
}

// poll polls up to want records (-1: any number), for at most c.idle
// once c.ready is closed; idled says whether that time ran out.
func (c *consumer) poll(ctx context.Context, want int) (fetches kgo.Fetches, idled bool) {
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if c.end != nil {
		go func() {
			select {
			case <-c.end.done:
				cancel(errAtEnd)
			case <-pctx.Done():
			}
		}()
	}
	if c.idle > 0 {
		go func() {
			select {
			case <-c.ready:
			case <-pctx.Done():
				return
			}
			t := c.startIdle(c.idle)
			defer t.Stop()
			select {
			case <-t.C:
				cancel(errIdle)
			case <-pctx.Done():
			}
		}()
	}
	fetches = c.s.cl.PollRecords(pctx, want)
	return fetches, errors.Is(context.Cause(pctx), errIdle)
}

func isDataLoss(err error) bool {
	_, ok := errors.AsType[*kgo.ErrDataLoss](err)
	return ok
}

// printer writes records as text or JSON lines.
type printer struct {
	out  *bufio.Writer
	json bool
	enc  *json.Encoder
	// The text format: DefaultMessageFormatter's settings.
	printTimestamp, printPartition, printOffset, printHeaders, printKey, printValue bool
	keySep, lineSep, headersSep, nullLiteral                                        string
}

// newPrinter is the text format of the --property flags, with --print-key
// and --print-offset as their shorthands.
func newPrinter(props *consoleProps, printKey, printOffset bool) (*printer, error) {
	p := &printer{
		keySep:      props.str("key.separator", "\t"),
		lineSep:     props.str("line.separator", "\n"),
		headersSep:  props.str("headers.separator", ","),
		nullLiteral: props.str("null.literal", "null"),
	}
	for _, b := range []struct {
		key string
		def bool
		to  *bool
	}{
		{"print.timestamp", false, &p.printTimestamp},
		{"print.partition", printOffset, &p.printPartition},
		{"print.offset", printOffset, &p.printOffset},
		{"print.headers", false, &p.printHeaders},
		{"print.key", printKey, &p.printKey},
		{"print.value", true, &p.printValue},
	} {
		v, err := props.bool(b.key, b.def)
		if err != nil {
			return nil, err
		}
		*b.to = v
	}
	return p, nil
}

// jsonRecord is a record in --format json. Wire format of the CLI: only
// add fields.
type jsonRecord struct {
	Topic       string       `json:"topic"`
	Partition   int32        `json:"partition"`
	Offset      int64        `json:"offset"`
	Timestamp   int64        `json:"timestamp"`
	Key         *string      `json:"key"`
	KeyBase64   bool         `json:"key_base64,omitempty"`
	Value       *string      `json:"value"`
	ValueBase64 bool         `json:"value_base64,omitempty"`
	Headers     []jsonHeader `json:"headers"`
}

type jsonHeader struct {
	Key         string  `json:"key"`
	Value       *string `json:"value"`
	ValueBase64 bool    `json:"value_base64,omitempty"`
}

// jsonBytes is b as a JSON string: itself when valid UTF-8, else base64
// (the flag says which); nil for null.
func jsonBytes(b []byte) (*string, bool) {
	if b == nil {
		return nil, false
	}
	if utf8.Valid(b) {
		s := string(b)
		return &s, false
	}
	s := base64.StdEncoding.EncodeToString(b)
	return &s, true
}

func (p *printer) print(r *kgo.Record) error {
	if p.json {
		if p.enc == nil {
			p.enc = json.NewEncoder(p.out)
			p.enc.SetEscapeHTML(false)
		}
		j := jsonRecord{
			Topic:     r.Topic,
			Partition: r.Partition,
			Offset:    r.Offset,
			Timestamp: r.Timestamp.UnixMilli(),
			Headers:   make([]jsonHeader, 0, len(r.Headers)),
		}
		j.Key, j.KeyBase64 = jsonBytes(r.Key)
		j.Value, j.ValueBase64 = jsonBytes(r.Value)
		for _, h := range r.Headers {
			jh := jsonHeader{Key: h.Key}
			jh.Value, jh.ValueBase64 = jsonBytes(h.Value)
			j.Headers = append(j.Headers, jh)
		}
		return p.enc.Encode(&j)
	}
	// As DefaultMessageFormatter.writeTo: each field, then the key
	// separator when another field follows, else the line separator.
	type field struct {
		on    bool
		write func()
	}
	fields := []field{
		{p.printTimestamp, func() {
			switch r.Attrs.TimestampType() {
			case 0:
				fmt.Fprintf(p.out, "CreateTime:%d", r.Timestamp.UnixMilli())
			case 1:
				fmt.Fprintf(p.out, "LogAppendTime:%d", r.Timestamp.UnixMilli())
			default:
				p.out.WriteString("NO_TIMESTAMP")
			}
		}},
		{p.printPartition, func() { fmt.Fprintf(p.out, "Partition:%d", r.Partition) }},
		{p.printOffset, func() { fmt.Fprintf(p.out, "Offset:%d", r.Offset) }},
		{p.printHeaders, func() {
			if len(r.Headers) == 0 {
				p.out.WriteString("NO_HEADERS")
			}
			for i, h := range r.Headers {
				if i > 0 {
					p.out.WriteString(p.headersSep)
				}
				p.out.WriteString(h.Key + ":")
				p.writeNullable(h.Value)
			}
		}},
		{p.printKey, func() { p.writeNullable(r.Key) }},
		{p.printValue, func() { p.writeNullable(r.Value) }},
	}
	last := -1
	for i, f := range fields {
		if f.on {
			last = i
		}
	}
	for i, f := range fields {
		if !f.on {
			continue
		}
		f.write()
		if i < last {
			p.out.WriteString(p.keySep)
		} else {
			p.out.WriteString(p.lineSep)
		}
	}
	return nil
}

func (p *printer) writeNullable(b []byte) {
	if b == nil {
		p.out.WriteString(p.nullLiteral)
		return
	}
	p.out.Write(b)
}
