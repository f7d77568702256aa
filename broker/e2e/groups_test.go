package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupBrokerSettings start a broker whose groups form quickly: the first
// rebalance of a new group waits 100 ms for more members instead of 3 s.
var groupBrokerSettings = []string{"group.initial.rebalance.delay.ms=100"}

// produceIdempotent produces records [0, n) with franz-go's defaults
// (idempotent, acks all), record i to partition i % partitions.
func produceIdempotent(t *testing.T, b *Broker, topic string, partitions, n, size int) {
	t.Helper()
	cl := b.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	produceRecords(t, ctx, cl, topic, partitions, n, size)
	cl.Close()
}

// describeGroupE2E returns a group as DescribeGroups shows it.
func describeGroupE2E(t *testing.T, cl *kgo.Client, group string) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("DescribeGroups %s: %v", group, err)
	}
	if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("DescribeGroups %s: %+v", group, resp.Groups)
	}
	return resp.Groups[0]
}

// waitStableMembers waits until the group is Stable with n members.
func waitStableMembers(t *testing.T, cl *kgo.Client, group string, n int) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		g := describeGroupE2E(t, cl, group)
		if g.State == "Stable" && len(g.Members) == n {
			return g
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s: %s with %d members, want Stable with %d", group, g.State, len(g.Members), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// committedOffsets returns the group's committed offsets of topic's
// partitions [0, partitions), -1 where none.
func committedOffsets(t *testing.T, cl *kgo.Client, group, topic string, partitions int) map[int32]int64 {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	for p := range int32(partitions) {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("OffsetFetch %s: %v", group, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("OffsetFetch %s: %v", group, err)
	}
	out := map[int32]int64{}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				t.Fatalf("OffsetFetch %s %s/%d: %v", group, tp.Topic, p.Partition, err)
			}
			out[p.Partition] = p.Offset
		}
	}
	return out
}

// lineProc is a long-running command whose stdout lines are collected; it
// is stopped with SIGTERM (then SIGKILL) by stop or when the test ends.
type lineProc struct {
	cmd    *exec.Cmd
	stderr strings.Builder
	lines  chan string // closed when stdout ends
	waited chan struct{}
	err    error // valid after waited is closed
	once   sync.Once
}

func startLineProc(t *testing.T, name string, args ...string) *lineProc {
	t.Helper()
	p := &lineProc{cmd: exec.Command(name, args...), lines: make(chan string, 1024), waited: make(chan struct{})}
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, out)
		close(p.lines)
		p.err = p.cmd.Wait()
		close(p.waited)
	}()
	t.Cleanup(p.stop)
	return p
}

// stop sends SIGTERM and waits up to 10 s, then kills.
func (p *lineProc) stop() {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		go func() { // drain what is left so the reader can finish
			for range p.lines {
			}
		}()
		select {
		case <-p.waited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.waited
		}
	})
}

// TestKcatGroupTwoMembers runs two `kcat -G` members of one group on a
// four-partition topic: once the group is Stable with both, records are
// produced; each member reads a non-empty set of partitions, the sets are
// disjoint, and together they read every record exactly once.
func TestKcatGroupTwoMembers(t *testing.T) {
	requireKcat(t)
	const topic, group, partitions, n = "kcat-group", "kcat-g", 4, 2000
	b := StartBroker(t, groupBrokerSettings...)
	b.CreateTopic(t, topic, partitions)
	admin := b.Client(t)

	var members []*lineProc
	for i := range 2 {
		members = append(members, startLineProc(t, "kcat", "-b", b.Addr, "-G", group, "-q", "-u",
			"-X", "client.id=kcat-"+strconv.Itoa(i), "-X", "auto.offset.reset=earliest",
			"-X", "session.timeout.ms=10000", "-X", "heartbeat.interval.ms=500",
			"-f", `%p %o %s\n`, topic))
	}
	g := waitStableMembers(t, admin, group, 2)
	t.Logf("group %s stable at protocol %s with members %s, %s", group, g.Protocol, g.Members[0].ClientID, g.Members[1].ClientID)
	produceIdempotent(t, b, topic, partitions, n, 40)

	type seen struct {
		member int
		offset int64
	}
	got := map[int]seen{}              // record index -> who read it
	parts := [2]map[int32]bool{{}, {}} // partitions per member
	deadline := time.After(60 * time.Second)
	for len(got) < n {
		var line string
		var m int
		var ok bool
		select {
		case line, ok = <-members[0].lines:
			m = 0
		case line, ok = <-members[1].lines:
			m = 1
		case <-deadline:
			t.Fatalf("kcat members read %d of %d records; stderr:\n%s\n%s", len(got), n,
				tailString(members[0].stderr.String(), 2048), tailString(members[1].stderr.String(), 2048))
		}
		if !ok {
			t.Fatalf("kcat member %d exited after %d records: stderr:\n%s", m, len(got), tailString(members[m].stderr.String(), 4096))
		}
		f := strings.SplitN(line, " ", 3)
		if len(f) != 3 {
			t.Fatalf("kcat member %d line %q: want partition, offset and value", m, line)
		}
		p, _ := strconv.Atoi(f[0])
		off, _ := strconv.ParseInt(f[1], 10, 64)
		i, err := strconv.Atoi(strings.TrimSuffix(f[2][:min(13, len(f[2]))], "|"))
		if err != nil || f[2] != string(recordValue(i, 40)) || i%partitions != p || int64(i/partitions) != off {
			t.Fatalf("kcat member %d: record %q at %d/%d was not produced there", m, f[2], p, off)
		}
		if prev, dup := got[i]; dup {
			t.Fatalf("record %d read twice: by member %d at offset %d and by member %d at offset %d", i, prev.member, prev.offset, m, off)
		}
		got[i] = seen{m, off}
		parts[m][int32(p)] = true
	}
	for m := range 2 {
		if len(parts[m]) == 0 {
			t.Fatalf("kcat member %d read nothing", m)
		}
		for p := range parts[m] {
			if parts[1-m][p] {
				t.Fatalf("partition %d read by both members", p)
			}
		}
	}
	t.Logf("member 0 read partitions %v, member 1 %v", keysOf(parts[0]), keysOf(parts[1]))
	for _, m := range members {
		m.stop()
	}
	b.RequireAlive(t)
}

func keysOf(m map[int32]bool) []int32 {
	var out []int32
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// pythonGroups is run by Debian's Python (librdkafka 2.0.2). "produce"
// produces values PREFIX-0 .. PREFIX-(n-1) with enable.idempotence=True;
// "consume" reads as a group member with manual commits until it has want
// records, keeps polling for another second to catch extra records, commits
// synchronously and closes. Both print JSON.
const pythonGroups = `
import json, sys, time
from confluent_kafka import Producer, Consumer, TopicPartition, KafkaException

mode, addr, topic = sys.argv[1], sys.argv[2], sys.argv[3]
if mode == 'produce':
    prefix, n = sys.argv[4], int(sys.argv[5])
    p = Producer({'bootstrap.servers': addr, 'enable.idempotence': True, 'linger.ms': 5})
    acked, errors = [], []
    def report(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            acked.append(msg.value().decode())
    for i in range(n):
        while True:
            try:
                p.produce(topic, key=str(i % 23), value='%s-%d' % (prefix, i), on_delivery=report)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    left = p.flush(60)
    json.dump({'acked': len(acked), 'left': left, 'errors': errors[:10], 'nerrors': len(errors)}, sys.stdout)
else:
    group, want = sys.argv[4], int(sys.argv[5])
    c = Consumer({'bootstrap.servers': addr, 'group.id': group, 'auto.offset.reset': 'earliest',
                  'enable.auto.commit': False, 'session.timeout.ms': 10000, 'heartbeat.interval.ms': 500})
    c.subscribe([topic])
    values, last, errors = [], {}, []
    deadline = time.time() + 60
    extra_until = None
    while time.time() < deadline:
        if extra_until is None and len(values) >= want:
            extra_until = time.time() + 1.0
        if extra_until is not None and time.time() >= extra_until:
            break
        m = c.poll(0.1)
        if m is None:
            continue
        if m.error():
            errors.append(str(m.error()))
            continue
        values.append(m.value().decode())
        last[m.partition()] = m.offset()
    committed = []
    if last:
        offs = [TopicPartition(topic, p, o + 1) for p, o in sorted(last.items())]
        for tp in c.commit(offsets=offs, asynchronous=False):
            committed.append([tp.partition, tp.offset, str(tp.error) if tp.error else None])
    c.close()
    json.dump({'values': values, 'committed': committed, 'errors': errors[:10]}, sys.stdout)
`

// pythonConsume runs the consume mode and returns the values read.
func pythonConsume(t *testing.T, b *Broker, topic, group string, want int) []string {
	t.Helper()
	out := runCmd(t, 90*time.Second, "", debianPython, "-c", pythonGroups, "consume", b.Addr, topic, group, strconv.Itoa(want))
	var res struct {
		Values    []string `json:"values"`
		Committed [][]any  `json:"committed"`
		Errors    []string `json:"errors"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("consumer output: %v\n%s", err, tailString(out, 4096))
	}
	if len(res.Errors) > 0 {
		t.Fatalf("group %s: consumer errors: %v", group, res.Errors)
	}
	for _, c := range res.Committed {
		if c[2] != nil {
			t.Fatalf("group %s: commit of partition %v failed: %v", group, c[0], c[2])
		}
	}
	return res.Values
}

// checkValues fails unless got holds exactly prefix-0 .. prefix-(n-1) of
// each prefix, once each, in any order.
func checkValues(t *testing.T, what string, got []string, prefixes map[string]int) {
	t.Helper()
	var want []string
	for p, n := range prefixes {
		for i := range n {
			want = append(want, fmt.Sprintf("%s-%d", p, i))
		}
	}
	sort.Strings(want)
	got = slices.Clone(got)
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Fatalf("%s: read %d records, want %d (%v)", what, len(got), len(want), prefixes)
	}
}

// TestPythonGroupCommitsAndResumes produces with librdkafka's idempotent
// producer and consumes with librdkafka group consumers that commit: the
// first run of a group reads everything, a second run of the same group
// reads only what was produced after the first one's commits, and a new
// group reads from the beginning.
func TestPythonGroupCommitsAndResumes(t *testing.T) {
	requireConfluentKafka(t)
	const topic, partitions = "python-groups", 3
	b := StartBroker(t, groupBrokerSettings...)
	b.CreateTopic(t, topic, partitions)

	produce := func(prefix string, n int) {
		t.Helper()
		out := runCmd(t, 60*time.Second, "", debianPython, "-c", pythonGroups, "produce", b.Addr, topic, prefix, strconv.Itoa(n))
		var res struct {
			Acked, Left, NErrors int
			Errors               []string
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("producer output: %v\n%s", err, tailString(out, 4096))
		}
		if res.Acked != n || res.Left != 0 || res.NErrors != 0 {
			t.Fatalf("idempotent producer: %d of %d acknowledged, %d left, %d errors: %v", res.Acked, n, res.Left, res.NErrors, res.Errors)
		}
	}
	produce("first", 1000)
	checkIdempotentBatches(t, b, topic, partitions, 1000)

	checkValues(t, "group a, first run", pythonConsume(t, b, topic, "py-a", 1000), map[string]int{"first": 1000})
	admin := b.Client(t)
	offs := committedOffsets(t, admin, "py-a", topic, partitions)
	sum := int64(0)
	for _, off := range offs {
		sum += max(off, 0) // -1: nothing committed (a partition no key went to)
	}
	if sum != 1000 {
		t.Fatalf("group py-a committed %v, want offsets summing to 1000", offs)
	}

	produce("second", 200)
	checkValues(t, "group a, second run", pythonConsume(t, b, topic, "py-a", 200), map[string]int{"second": 200})
	checkValues(t, "group b", pythonConsume(t, b, topic, "py-b", 1200), map[string]int{"first": 1000, "second": 200})
	b.RequireAlive(t)
}

// checkIdempotentBatches reads the topic back with franz-go and checks that
// n records are there, all written by an idempotent producer (a producer id
// in every batch) with no duplicates.
func checkIdempotentBatches(t *testing.T, b *Broker, topic string, partitions, n int) {
	t.Helper()
	cl := b.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	seen := map[string]bool{}
	for len(seen) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records back", len(seen), n)
		}
		for it := fs.RecordIter(); !it.Done(); {
			r := it.Next()
			if r.ProducerID < 0 {
				t.Fatalf("%s/%d@%d: no producer id; the producer was not idempotent", r.Topic, r.Partition, r.Offset)
			}
			if seen[string(r.Value)] {
				t.Fatalf("%s/%d@%d: %s stored twice", r.Topic, r.Partition, r.Offset, r.Value)
			}
			seen[string(r.Value)] = true
		}
	}
	cl.Close()
}

// saramaHandler collects the values of a sarama consumer group session and
// marks each message for commit.
type saramaHandler struct {
	got chan<- []byte
}

func (saramaHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-c.Messages():
			if !ok {
				return nil
			}
			select {
			case h.got <- m.Value:
			case <-s.Context().Done():
				return nil
			}
			s.MarkMessage(m, "")
		case <-s.Context().Done():
			return nil
		}
	}
}

// TestGoClientGroups produces with franz-go's defaults (idempotent: every
// batch carries a producer id) and reads everything with a sarama consumer group (round-robin) and with a
// kafka-go Reader in a group; each group's commits end at the log end.
func TestGoClientGroups(t *testing.T) {
	const topic, partitions, n, size = "go-groups", 3, 3000, 64
	b := StartBroker(t, groupBrokerSettings...)
	b.CreateTopic(t, topic, partitions)
	produceIdempotent(t, b, topic, partitions, n, size)
	checkIdempotentBatches(t, b, topic, partitions, n)
	admin := b.Client(t)
	checkAll := func(what string, got [][]byte) {
		t.Helper()
		seen := make([]bool, n)
		for _, v := range got {
			var i int
			if _, err := fmt.Sscanf(string(v), "%012d|", &i); err != nil || i < 0 || i >= n || string(v) != string(recordValue(i, size)) {
				t.Fatalf("%s: value %.20q was not produced", what, v)
			}
			if seen[i] {
				t.Fatalf("%s: record %d read twice", what, i)
			}
			seen[i] = true
		}
		if len(got) != n {
			t.Fatalf("%s: read %d records, want %d", what, len(got), n)
		}
	}
	waitCommitted := func(group string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			offs := committedOffsets(t, admin, group, topic, partitions)
			sum := int64(0)
			for _, o := range offs {
				sum += o
			}
			if sum == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("group %s committed %v, want the log end (%d records)", group, offs, n)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	t.Run("sarama", func(t *testing.T) {
		cfg := sarama.NewConfig()
		cfg.ClientID = "strata-e2e-sarama-group"
		cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
		cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
		cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRoundRobin()}
		cfg.Consumer.Group.Session.Timeout = 10 * time.Second
		cfg.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
		cfg.Consumer.Return.Errors = true
		cfg.Metadata.Retry.Backoff = 200 * time.Millisecond
		cg, err := sarama.NewConsumerGroup([]string{b.Addr}, "sarama-g", cfg)
		if err != nil {
			t.Fatalf("sarama.NewConsumerGroup: %v", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		got := make(chan []byte, 256)
		done := make(chan error, 1)
		go func() {
			for ctx.Err() == nil {
				if err := cg.Consume(ctx, []string{topic}, saramaHandler{got: got}); err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
					done <- err
					return
				}
			}
			done <- nil
		}()
		go func() {
			for err := range cg.Errors() {
				t.Logf("sarama group error: %v", err)
			}
		}()
		var vals [][]byte
		timeout := time.After(60 * time.Second)
		for len(vals) < n {
			select {
			case v := <-got:
				vals = append(vals, v)
			case err := <-done:
				cancel()
				t.Fatalf("sarama Consume: %v after %d records", err, len(vals))
			case <-timeout:
				cancel()
				t.Fatalf("sarama group read %d of %d records", len(vals), n)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sarama Consume: %v", err)
		}
		if err := cg.Close(); err != nil {
			t.Errorf("sarama group close: %v", err)
		}
		checkAll("sarama group", vals)
		waitCommitted("sarama-g")
	})

	t.Run("kafka-go", func(t *testing.T) {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers:           []string{b.Addr},
			GroupID:           "kafka-go-g",
			Topic:             topic,
			StartOffset:       kafka.FirstOffset,
			MaxWait:           100 * time.Millisecond,
			CommitInterval:    100 * time.Millisecond,
			HeartbeatInterval: 500 * time.Millisecond,
			SessionTimeout:    10 * time.Second,
			RebalanceTimeout:  5 * time.Second,
		})
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		var vals [][]byte
		for len(vals) < n {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				_ = r.Close()
				t.Fatalf("kafka-go ReadMessage after %d records: %v", len(vals), err)
			}
			vals = append(vals, m.Value)
		}
		if err := r.Close(); err != nil { // commits what is pending
			t.Errorf("kafka-go reader close: %v", err)
		}
		checkAll("kafka-go group", vals)
		waitCommitted("kafka-go-g")
	})
	b.RequireAlive(t)
}
