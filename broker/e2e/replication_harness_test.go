package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Helpers of the replication tests (replication_test.go): pausing brokers,
// producers that number their records per partition and remember what was
// acknowledged, and a checker that reads every partition back and holds
// the log against those acknowledgements.

// without is a view of the cluster that asks only the brokers other than
// ids (for Metadata while some are paused: a stopped process accepts
// connections but never answers).
func (c *Cluster) without(ids ...int32) *Cluster {
	v := &Cluster{ZK: c.ZK, Connect: c.Connect, net: c.net, dial: c.dial}
	for i, b := range c.brokers {
		if !slices.Contains(ids, int32(i+1)) {
			v.brokers = append(v.brokers, b)
		}
	}
	return v
}

// pauseBroker stops broker id's process with SIGSTOP. The process is sent
// SIGCONT when the test ends if resumeBroker was not called, so that the
// brokers' cleanup can stop it.
func (c *Cluster) pauseBroker(t *testing.T, id int32) {
	t.Helper()
	b := c.Broker(id)
	p := b.proc()
	if p == nil {
		t.Fatalf("pausing broker %d: not running", id)
	}
	if err := p.signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP broker %d: %v", id, err)
	}
	t.Cleanup(func() { _ = p.signal(syscall.SIGCONT) })
}

// resumeBroker sends SIGCONT to broker id.
func (c *Cluster) resumeBroker(t *testing.T, id int32) {
	t.Helper()
	p := c.Broker(id).proc()
	if p == nil {
		t.Fatalf("resuming broker %d: not running", id)
	}
	if err := p.signal(syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT broker %d: %v", id, err)
	}
}

// createTopicWith is createTopic with topic configs, and waits until
// every partition has a leader and a full ISR.
func (c *Cluster) createTopicWith(t *testing.T, topic string, partitions int32, rf int16, configs map[string]string) kadm.Metadata {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = kadm.StringPtr(v)
	}
	resp, err := kadm.NewClient(c.Client(t)).CreateTopic(ctx, partitions, rf, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating %s (%d partitions, RF %d, %v): %v %s", topic, partitions, rf, configs, err, resp.ErrMessage)
	}
	return c.waitFullISR(t, 60*time.Second, topic, int(partitions), false)
}

// waitFullISR waits until every partition of topic has a live leader and
// all its replicas in the ISR (and, with preferred, is led by its
// preferred replica), and returns that metadata.
func (c *Cluster) waitFullISR(t testing.TB, timeout time.Duration, topic string, partitions int, preferred bool) kadm.Metadata {
	t.Helper()
	var md kadm.Metadata
	what := "a full ISR on every partition of " + topic
	if preferred {
		what += ", led by its preferred replica"
	}
	c.WaitMetadata(t, timeout, what, func(m kadm.Metadata) string {
		td, ok := m.Topics[topic]
		if !ok || len(td.Partitions) != partitions {
			return "topic not listed with all partitions"
		}
		for p, d := range td.Partitions {
			if d.Leader < 0 || len(d.ISR) != len(d.Replicas) || (preferred && d.Leader != d.Replicas[0]) {
				return fmt.Sprintf("partition %d: leader %d, replicas %v, isr %v", p, d.Leader, d.Replicas, d.ISR)
			}
		}
		md = m
		return ""
	})
	return md
}

// seqValue is the value of record seq of partition p: "p-seq".
func seqValue(p int32, seq int) string { return fmt.Sprintf("%d-%06d", p, seq) }

// parseSeqValue is seqValue's inverse.
func parseSeqValue(v string) (p int32, seq int, ok bool) {
	a, b, found := strings.Cut(v, "-")
	if !found || len(b) != 6 {
		return 0, 0, false
	}
	pi, err1 := strconv.Atoi(a)
	si, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || pi < 0 || si < 0 {
		return 0, 0, false
	}
	return int32(pi), si, true
}

// outcome is what became of one produced record.
type outcome struct {
	sentAt time.Time // handed to the producer
	done   bool      // its delivery report came
	doneAt time.Time
	acked  bool
	offset int64 // if acked; -1 if the acknowledgement gave none
	err    string
}

// ackLog is every record a producer sent, by partition and sequence
// number, with its outcome. It is safe for concurrent use.
type ackLog struct {
	mu   sync.Mutex
	recs map[int32][]*outcome
}

func newAckLog() *ackLog { return &ackLog{recs: map[int32][]*outcome{}} }

// sent records that seq of p was handed to the producer; seq must be the
// next one, or a later one (gaps are filled as not yet sent).
func (l *ackLog) sent(p int32, seq int, at time.Time) *outcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.recs[p]) <= seq {
		l.recs[p] = append(l.recs[p], &outcome{})
	}
	o := l.recs[p][seq]
	if o.sentAt.IsZero() {
		o.sentAt = at
	}
	return o
}

// report records seq's delivery report.
func (l *ackLog) report(p int32, seq int, at time.Time, offset int64, err string) {
	o := l.sent(p, seq, at)
	l.mu.Lock()
	defer l.mu.Unlock()
	o.done, o.doneAt = true, at
	if err == "" {
		o.acked, o.offset = true, offset
	} else {
		o.err = err
	}
}

// acksSentAfter counts the acknowledged records of p sent after since,
// and returns when the first of them was acknowledged.
func (l *ackLog) acksSentAfter(p int32, since time.Time) (n int, first time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, o := range l.recs[p] {
		if o.acked && o.sentAt.After(since) {
			n++
			if first.IsZero() || o.doneAt.Before(first) {
				first = o.doneAt
			}
		}
	}
	return n, first
}

// acksBetween counts the acknowledgements of p that came in [from, to).
func (l *ackLog) acksBetween(p int32, from, to time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, o := range l.recs[p] {
		if o.acked && !o.doneAt.Before(from) && o.doneAt.Before(to) {
			n++
		}
	}
	return n
}

// sentBetween counts the records of p handed to the producer in
// [from, to).
func (l *ackLog) sentBetween(p int32, from, to time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, o := range l.recs[p] {
		if !o.sentAt.IsZero() && !o.sentAt.Before(from) && o.sentAt.Before(to) {
			n++
		}
	}
	return n
}

// snapshot copies the outcomes.
func (l *ackLog) snapshot() map[int32][]outcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[int32][]outcome{}
	for p, rs := range l.recs {
		for _, o := range rs {
			out[p] = append(out[p], *o)
		}
	}
	return out
}

// waitAcks waits until every partition in parts has at least n
// acknowledged records sent after since, and returns when each got its
// first one. The test fails after timeout.
func (l *ackLog) waitAcks(t testing.TB, parts []int32, since time.Time, n int, timeout time.Duration, what string) map[int32]time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		firsts := map[int32]time.Time{}
		var missing []string
		for _, p := range parts {
			got, first := l.acksSentAfter(p, since)
			if got < n {
				missing = append(missing, fmt.Sprintf("partition %d: %d", p, got))
			} else {
				firsts[p] = first
			}
		}
		if len(missing) == 0 {
			return firsts
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting %v for %d acknowledgements per partition %s: %s", timeout, n, what, strings.Join(missing, ", "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// seqProducer is a franz-go producer in a goroutine that sends record
// seqValue(p, seq) to each of its partitions every interval, numbering
// them 0, 1, 2, ... per partition, and keeps every record's outcome.
type seqProducer struct {
	cl     *kgo.Client
	topic  string
	parts  []int32
	acks   *ackLog
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// startSeqProducer starts a seqProducer with the cluster's client
// settings plus opts (manual partitioning is added; the rest is kgo's
// default: idempotent, acks=all, unlimited retries).
func (c *Cluster) startSeqProducer(t *testing.T, topic string, parts []int32, interval time.Duration, opts ...kgo.Opt) *seqProducer {
	t.Helper()
	sp := &seqProducer{
		cl:    c.newClient(t, append([]kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...),
		topic: topic, parts: parts, acks: newAckLog(), done: make(chan struct{}),
	}
	ctx, cancel := context.WithCancel(context.Background())
	sp.cancel = cancel
	go func() {
		defer close(sp.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		next := map[int32]int{}
		for {
			for _, p := range parts {
				seq := next[p]
				next[p]++
				sp.acks.sent(p, seq, time.Now())
				// Not ctx: kgo fails buffered records whose context
				// ends, and stop cancels ctx before flushing.
				// TryProduce fails a record rather than block when
				// kgo's buffer is full, so stop cannot hang.
				sp.cl.TryProduce(context.Background(), &kgo.Record{Topic: topic, Partition: p, Value: []byte(seqValue(p, seq))}, func(r *kgo.Record, err error) {
					msg := ""
					if err != nil {
						msg = err.Error()
					}
					sp.acks.report(p, seq, time.Now(), r.Offset, msg)
				})
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { sp.stop(t) })
	return sp
}

// stop ends the producing goroutine, waits up to 30 s for every record to
// be acknowledged or failed, and closes the client (which fails what is
// left). It returns the outcomes.
func (sp *seqProducer) stop(t testing.TB) map[int32][]outcome {
	sp.once.Do(func() {
		sp.cancel()
		<-sp.done
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := sp.cl.Flush(ctx); err != nil {
			t.Logf("producer flush: %v; the records left are failed by Close", err)
		}
		cancel()
		sp.cl.Close()
	})
	return sp.acks.snapshot()
}

// pythonSeqProducer is run by Debian's Python: librdkafka's producer
// (confluent_kafka) with enable.idempotence and acks=all sends
// "p-seq" records to each of nparts partitions every interval seconds until
// its stdin closes, then flushes. Each delivery report is a JSON line
// {"p", "v", "o"} or {"p", "v", "e"}; the last line is {"done", "sent",
// "left"}; after handing each record over it prints {"sp": partition,
// "seq": n}.
const pythonSeqProducer = `
import json, sys, threading, time
import confluent_kafka
from confluent_kafka import Producer

addrs, topic, nparts, interval = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
p = Producer({'bootstrap.servers': addrs, 'enable.idempotence': True, 'acks': 'all',
              'linger.ms': 5, 'message.timeout.ms': 90000, 'retry.backoff.ms': 100,
              'reconnect.backoff.max.ms': 1000, 'topic.metadata.refresh.interval.ms': 1000})
stop = threading.Event()
def watch():
    sys.stdin.read()
    stop.set()
threading.Thread(target=watch, daemon=True).start()
lock = threading.Lock()
def emit(d):
    with lock:
        sys.stdout.write(json.dumps(d) + '\n')
        sys.stdout.flush()
def report(err, msg):
    d = {'p': msg.partition(), 'v': msg.value().decode()}
    if err is None:
        d['o'] = msg.offset()
    else:
        d['e'] = str(err)
    emit(d)
emit({'librdkafka': confluent_kafka.libversion()[0]})
seq = [0] * nparts
while not stop.is_set():
    for part in range(nparts):
        while True:
            try:
                p.produce(topic, value='%d-%06d' % (part, seq[part]), partition=part, on_delivery=report)
                break
            except BufferError:
                p.poll(0.05)
        emit({'sp': part, 'seq': seq[part]})
        seq[part] += 1
    p.poll(interval)
left = p.flush(30)
emit({'done': True, 'sent': seq, 'left': left})
`

// pyProducer runs pythonSeqProducer and collects its reports.
type pyProducer struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	cancel context.CancelFunc
	acks   *ackLog
	stderr strings.Builder
	exited chan struct{} // closed when the reader has seen stdout end and Wait returned

	mu struct {
		sync.Mutex
		version string
		final   *pyFinal
		bad     []string // lines that did not parse
		// noOffset are the reports of records delivered without an
		// offset.
		noOffset []string
		waitErr  error
	}
	once sync.Once
}

// pyFinal is the producer's last line.
type pyFinal struct {
	Done bool    `json:"done"`
	Sent []int   `json:"sent"`
	Left int     `json:"left"`
	P    *int32  `json:"p"`
	V    string  `json:"v"`
	O    *int64  `json:"o"`
	E    *string `json:"e"`
	Lib  string  `json:"librdkafka"`
	SP   *int32  `json:"sp"`
	Seq  *int    `json:"seq"`
}

// startPyProducer starts librdkafka producing to partitions 0..nparts-1
// of topic through the running brokers. It is killed if still running
// when the test ends.
func (c *Cluster) startPyProducer(t *testing.T, topic string, nparts int, interval time.Duration) *pyProducer {
	t.Helper()
	requireConfluentKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	pp := &pyProducer{acks: newAckLog(), cancel: cancel, exited: make(chan struct{})}
	pp.cmd = exec.CommandContext(ctx, debianPython, "-c", pythonSeqProducer, strings.Join(c.LiveAddrs(), ","), topic,
		strconv.Itoa(nparts), strconv.FormatFloat(interval.Seconds(), 'f', 3, 64))
	pp.cmd.Stderr = &pp.stderr
	pp.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var err error
	if pp.stdin, err = pp.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := pp.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := pp.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting %s: %v", debianPython, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			pp.line(sc.Text())
		}
		_, _ = io.Copy(io.Discard, out)
		err := pp.cmd.Wait()
		pp.mu.Lock()
		pp.mu.waitErr = err
		pp.mu.Unlock()
		close(pp.exited)
	}()
	t.Cleanup(func() {
		cancel()
		<-pp.exited
	})
	return pp
}

func (pp *pyProducer) line(s string) {
	now := time.Now()
	var m pyFinal
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		pp.mu.Lock()
		pp.mu.bad = append(pp.mu.bad, s)
		pp.mu.Unlock()
		return
	}
	switch {
	case m.Lib != "":
		pp.mu.Lock()
		pp.mu.version = m.Lib
		pp.mu.Unlock()
	case m.Done:
		pp.mu.Lock()
		pp.mu.final = &m
		pp.mu.Unlock()
	case m.SP != nil && m.Seq != nil:
		pp.acks.sent(*m.SP, *m.Seq, now)
	case m.P != nil:
		p, seq, ok := parseSeqValue(m.V)
		if !ok || p != *m.P {
			pp.mu.Lock()
			pp.mu.bad = append(pp.mu.bad, s)
			pp.mu.Unlock()
			return
		}
		switch {
		case m.E != nil:
			pp.acks.report(p, seq, now, -1, *m.E)
		case m.O != nil && *m.O >= 0:
			pp.acks.report(p, seq, now, *m.O, "")
		default:
			// Delivered, but librdkafka gives no offset.
			pp.acks.report(p, seq, now, -1, "")
			pp.mu.Lock()
			pp.mu.noOffset = append(pp.mu.noOffset, s)
			pp.mu.Unlock()
		}
	default:
		pp.mu.Lock()
		pp.mu.bad = append(pp.mu.bad, s)
		pp.mu.Unlock()
	}
}

// stop closes the producer's stdin, so that it stops sending and
// flushes, waits for it (bounded by its context) and returns the outcomes.
func (pp *pyProducer) stop(t testing.TB) map[int32][]outcome {
	t.Helper()
	pp.once.Do(func() { _ = pp.stdin.Close() })
	select {
	case <-pp.exited:
	case <-time.After(60 * time.Second):
		pp.cancel()
		<-pp.exited
	}
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.mu.waitErr != nil || pp.mu.final == nil {
		t.Fatalf("librdkafka producer: exit %v, final line %v; stderr:\n%s", pp.mu.waitErr, pp.mu.final, tailString(pp.stderr.String(), 4<<10))
	}
	if len(pp.mu.bad) > 0 {
		t.Errorf("librdkafka producer printed %d lines that do not parse, first %q", len(pp.mu.bad), pp.mu.bad[0])
	}
	t.Logf("librdkafka %s producer: sent %v, %d left unflushed", pp.mu.version, pp.mu.final.Sent, pp.mu.final.Left)
	if n := len(pp.mu.noOffset); n > 0 {
		t.Logf("librdkafka reported %d records delivered without an offset, first %q", n, pp.mu.noOffset[:min(n, 5)])
	}
	out := pp.acks.snapshot()
	for p, n := range pp.mu.final.Sent {
		if len(out[int32(p)]) != n {
			t.Errorf("librdkafka producer: %d records of partition %d known from its output, it says it sent %d", len(out[int32(p)]), p, n)
		}
	}
	return out
}

// readLog reads partitions of topic from their start up to their end
// offset (the high watermark, from ListOffsets) and returns the records
// by partition; offsets must be dense from 0.
func (c *Cluster) readLog(t testing.TB, topic string, parts []int32) map[int32][]*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admCl := c.newClient(t)
	defer admCl.Close()
	ends, err := kadm.NewClient(admCl).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("ListEndOffsets %s: %v", topic, err)
	}
	offs := map[int32]kgo.Offset{}
	want := map[int32]int64{}
	logs := map[int32][]*kgo.Record{}
	for _, p := range parts {
		lo, ok := ends.Lookup(topic, p)
		if !ok {
			t.Fatalf("ListEndOffsets %s: no answer for partition %d", topic, p)
		}
		want[p] = lo.Offset
		logs[p] = nil
		if lo.Offset > 0 {
			offs[p] = kgo.NewOffset().At(0)
		}
	}
	if len(offs) == 0 {
		return logs
	}
	cl := c.newClient(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}), kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	remaining := len(offs)
	for remaining > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			have := map[int32]int{}
			for p, l := range logs {
				have[p] = len(l)
			}
			t.Fatalf("reading %s back: %v; have %v of %v records", topic, ctx.Err(), have, want)
		}
		fs.EachError(func(tp string, p int32, err error) { t.Logf("fetch %s-%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			l := logs[r.Partition]
			switch {
			case r.Offset < int64(len(l)):
				return // fetched again after an error
			case r.Offset != int64(len(l)):
				t.Fatalf("%s-%d: read offset %d, want %d (offsets not dense)", topic, r.Partition, r.Offset, len(l))
			case r.Offset >= want[r.Partition]:
				t.Fatalf("%s-%d: read offset %d at or past the end offset %d", topic, r.Partition, r.Offset, want[r.Partition])
			}
			logs[r.Partition] = append(l, r)
			if int64(len(logs[r.Partition])) == want[r.Partition] {
				remaining--
			}
		})
	}
	return logs
}

// seqCheck is what checkSeqLog found on one partition.
type seqCheck struct {
	consumed, acked, failed, unackedVisible int
}

// checkSeqLog holds the log read back against the producer's outcomes
// (all resolved: the producer was stopped and flushed). On every
// partition:
//
//   - every record read is one the producer sent to that partition
//     (value seqValue(p, seq) with seq below the number sent);
//   - sequence numbers strictly increase with the offset: no record is
//     there twice and the send order is kept;
//   - every acknowledged record is there, at exactly the offset its
//     acknowledgement gave (if it gave one: librdkafka may not);
//   - a record that is there but was not acknowledged must be one whose
//     produce failed or never got a delivery report (in flight when the
//     producer stopped): such a record may or may not have been written.
//     A record acknowledged at one offset and seen at another, or seen
//     twice, is an error, as is any record with an unknown value (for
//     example one that was truncated away on one replica and resurfaced).
//
// Producers that fail no record make the last point vacuous: then the
// log holds exactly the acknowledged records.
func checkSeqLog(t testing.TB, who, topic string, logs map[int32][]*kgo.Record, sent map[int32][]outcome) map[int32]seqCheck {
	t.Helper()
	res := map[int32]seqCheck{}
	for p, recs := range logs {
		var st seqCheck
		outs := sent[p]
		seen := make([]bool, len(outs))
		last := -1
		for _, r := range recs {
			rp, seq, ok := parseSeqValue(string(r.Value))
			if !ok || rp != p || seq >= len(outs) || outs[seq].sentAt.IsZero() {
				t.Errorf("%s-%d offset %d: value %q was never sent to this partition by the %s producer", topic, p, r.Offset, r.Value, who)
				continue
			}
			if seq <= last {
				t.Errorf("%s-%d offset %d: record #%d after record #%d (duplicate or out of order)", topic, p, r.Offset, seq, last)
			}
			last = max(last, seq)
			if seen[seq] {
				continue
			}
			seen[seq] = true
			o := outs[seq]
			switch {
			case o.acked && o.offset >= 0 && o.offset != r.Offset:
				t.Errorf("%s-%d: record #%d acknowledged at offset %d but found at %d", topic, p, seq, o.offset, r.Offset)
			case !o.acked:
				st.unackedVisible++
			}
		}
		st.consumed = len(recs)
		for seq, o := range outs {
			switch {
			case o.acked:
				st.acked++
				if !seen[seq] {
					t.Errorf("%s-%d: acknowledged record #%d (offset %d, acknowledged %s) is lost", topic, p, seq, o.offset, o.doneAt.Format("15:04:05.000"))
				}
			case o.done:
				st.failed++
			}
		}
		res[p] = st
	}
	for p, outs := range sent {
		if _, ok := logs[p]; !ok && len(outs) > 0 {
			t.Errorf("%s-%d: %d records sent and the partition was not read", topic, p, len(outs))
		}
	}
	return res
}

// failedErrors summarizes the distinct errors of failed produces.
func failedErrors(sent map[int32][]outcome) map[string]int {
	out := map[string]int{}
	for _, outs := range sent {
		for _, o := range outs {
			if o.done && !o.acked {
				out[o.err]++
			}
		}
	}
	return out
}

// truncationRE matches the broker's log line for a KIP-101 truncation.
var truncationRE = regexp.MustCompile(`replica truncated[^\n]*?topic=(\S+) partition=(\d+) from=(\d+) to=(\d+)`)

// truncations returns the "replica truncated" lines of output for topic
// as (partition, from, to).
func truncations(output, topic string) [][3]int64 {
	var out [][3]int64
	for _, m := range truncationRE.FindAllStringSubmatch(output, -1) {
		if m[1] != topic {
			continue
		}
		var v [3]int64
		for i := range 3 {
			v[i], _ = strconv.ParseInt(m[i+2], 10, 64)
		}
		out = append(out, v)
	}
	return out
}

// errorsIsAny reports whether err is any of targets.
func errorsIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// sameMembers reports whether a and b hold the same brokers.
func sameMembers(a, b []int32) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// isrChange is one "ISR shrunk" or "ISR expanded" line of a leader.
type isrChange struct {
	shrunk    bool
	partition int32
	from, to  []int32
}

// removed lists the members of from that are not in to.
func (c isrChange) removed() []int32 {
	var out []int32
	for _, id := range c.from {
		if !slices.Contains(c.to, id) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// isrChangeRE matches a leader's log line for an ISR change it wrote.
var isrChangeRE = regexp.MustCompile(`msg="ISR (shrunk|expanded)" topic=(\S+) partition=(\d+) from="?\[([\d ]*)\]"? to="?\[([\d ]*)\]"?`)

// isrChanges returns the ISR changes for topic in a broker's output.
func isrChanges(output, topic string) []isrChange {
	var out []isrChange
	ids := func(s string) []int32 {
		var v []int32
		for _, f := range strings.Fields(s) {
			n, _ := strconv.Atoi(f)
			v = append(v, int32(n))
		}
		return v
	}
	for _, m := range isrChangeRE.FindAllStringSubmatch(output, -1) {
		if m[2] != topic {
			continue
		}
		p, _ := strconv.Atoi(m[3])
		out = append(out, isrChange{shrunk: m[1] == "shrunk", partition: int32(p), from: ids(m[4]), to: ids(m[5])})
	}
	return out
}
