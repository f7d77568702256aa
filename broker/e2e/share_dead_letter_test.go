package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratastream/strata/segment/poll"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// dlqClusterSettings are the settings of the dead-letter tests' clusters:
// share state with three replicas, one-second acquisition locks, quick
// heartbeats.
var dlqClusterSettings = []string{
	"share.coordinator.state.topic.num.partitions=3",
	"share.coordinator.state.topic.replication.factor=3",
	"share.coordinator.state.topic.min.isr=2",
	"group.share.min.record.lock.duration.ms=1000",
	"group.share.record.lock.duration.ms=1000",
	"group.share.min.heartbeat.interval.ms=100",
	"group.share.heartbeat.interval.ms=200",
}

// setShareGroupConfigs sets GROUP configs of group with
// IncrementalAlterConfigs, as an admin tool does.
func setShareGroupConfigs(t *testing.T, cl *kgo.Client, group string, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for k, v := range configs {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value, c.Op = k, kmsg.StringPtr(v), kmsg.IncrementalAlterConfigOpSet
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("IncrementalAlterConfigs: %v", err)
	}
	if err := kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil {
		t.Fatalf("IncrementalAlterConfigs of group %s: %v", group, err)
	}
}

// deadLetter is a record of a dead-letter topic as a plain consumer
// reads it.
type deadLetter struct {
	key, value string
	headers    map[string]string
}

// dlqReader reads a dead-letter topic with a plain (non-share) consumer
// from its start, keyed by the source "topic/partition/offset" its
// headers name.
type dlqReader struct {
	mu  sync.Mutex
	got map[string][]deadLetter
}

// startDLQReader reads topic until the test ends.
func startDLQReader(t *testing.T, c *Cluster, topic string) *dlqReader {
	t.Helper()
	r := &dlqReader{got: map[string][]deadLetter{}}
	cl := c.newClient(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(rec *kgo.Record) {
				d := deadLetter{key: string(rec.Key), value: string(rec.Value), headers: map[string]string{}}
				for _, h := range rec.Headers {
					d.headers[h.Key] = string(h.Value)
				}
				where := d.headers["__dlq.errors.topic"] + "/" + d.headers["__dlq.errors.partition"] + "/" + d.headers["__dlq.errors.offset"]
				r.mu.Lock()
				r.got[where] = append(r.got[where], d)
				r.mu.Unlock()
			})
		}
	}()
	t.Cleanup(func() { cancel(); <-done; cl.Close() })
	return r
}

// has reports whether the source record where has a dead-letter copy.
func (r *dlqReader) has(where string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got[where]) > 0
}

// snapshot returns the copies read so far.
func (r *dlqReader) snapshot() map[string][]deadLetter {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]deadLetter, len(r.got))
	for k, v := range r.got {
		out[k] = append([]deadLetter(nil), v...)
	}
	return out
}

// sourceRecord is one record the test produced: where it landed and what
// the consumer does with it.
type sourceRecord struct {
	key, value string
	// fate: "reject" is rejected, "accept" accepted, "slow" held past its
	// lock at every delivery.
	fate string
}

// produceFates produces n records to topic (partitions round robin) with
// fate(i), and returns them by "topic/partition/offset".
func produceFates(t *testing.T, c *Cluster, topic string, partitions, n int, fate func(i int) string) map[string]sourceRecord {
	t.Helper()
	cl := c.newClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	defer cl.Close()
	out := map[string]sourceRecord{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range n {
		f := fate(i)
		r := &kgo.Record{Topic: topic, Partition: int32(i % partitions), Key: fmt.Appendf(nil, "k-%s-%d", topic, i), Value: fmt.Appendf(nil, "%s-%d", f, i),
			Headers: []kgo.RecordHeader{{Key: "fate", Value: []byte(f)}}}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		out[fmt.Sprintf("%s/%d/%d", topic, r.Partition, r.Offset)] = sourceRecord{key: string(r.Key), value: string(r.Value), fate: f}
	}
	return out
}

// fateOf is the fate a record's value names.
func fateOf(r *kgo.Record) string { f, _, _ := strings.Cut(string(r.Value), "-"); return f }

// whereOf is a record's "topic/partition/offset".
func whereOf(r *kgo.Record) string { return fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset) }

// runShareConsumer polls a franz-go share consumer of topic in group
// until the test ends, acking each record by handle.
func runShareConsumer(t *testing.T, c *Cluster, group, topic string, handle func(cl *kgo.Client, r *kgo.Record)) {
	t.Helper()
	cl := c.newClient(t, kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollRecords(ctx, 50)
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) { handle(cl, r) })
		}
	}()
	t.Cleanup(func() { cancel(); <-done; cl.Close() })
}

// ackByFate rejects "reject" records and accepts the others.
func ackByFate(_ *kgo.Client, r *kgo.Record) {
	if fateOf(r) == "reject" {
		r.Ack(kgo.AckReject)
		return
	}
	r.Ack(kgo.AckAccept)
}

// checkDeadLetters checks the copies against what was produced: a
// "reject" record has one copy (at least one with atLeastOnce) with
// the reason of a rejection, a "slow" one the reason of the delivery
// limit at delivery limit, both with the key, value, headers and the
// __dlq.errors.* headers; an "accept" record has none.
func checkDeadLetters(t *testing.T, group string, produced map[string]sourceRecord, got map[string][]deadLetter, limit int, atLeastOnce bool) {
	t.Helper()
	for where, src := range produced {
		copies := got[where]
		if src.fate == "accept" {
			if len(copies) != 0 {
				t.Errorf("accepted record %s has %d dead-letter copies", where, len(copies))
			}
			continue
		}
		if len(copies) == 0 || len(copies) > 1 && !atLeastOnce {
			t.Errorf("%s record %s: %d dead-letter copies, want 1", src.fate, where, len(copies))
			continue
		}
		topic, rest, _ := strings.Cut(where, "/")
		part, off, _ := strings.Cut(rest, "/")
		want := map[string]string{"fate": src.fate, "__dlq.errors.topic": topic, "__dlq.errors.partition": part,
			"__dlq.errors.offset": off, "__dlq.errors.group": group, "__dlq.errors.message": "Offset rejected by client."}
		if src.fate == "slow" {
			want["__dlq.errors.message"] = "Offset delivery count exceeded the threshold."
			want["__dlq.errors.delivery.count"] = strconv.Itoa(limit)
		} else if !atLeastOnce {
			want["__dlq.errors.delivery.count"] = "1"
		}
		for _, d := range copies {
			if d.key != src.key || d.value != src.value {
				t.Errorf("%s: copy %q=%q, want %q=%q", where, d.key, d.value, src.key, src.value)
			}
			for k, v := range want {
				if d.headers[k] != v {
					t.Errorf("%s: header %s = %q, want %q", where, k, d.headers[k], v)
				}
			}
		}
	}
	for where := range got {
		if _, ok := produced[where]; !ok {
			t.Errorf("dead-letter copy of %s, which was not produced", where)
		}
	}
}

// TestShareGroupDeadLetterFranzGo: three brokers; a franz-go share
// consumer rejects half the records of a topic of three partitions (so
// that most copies cross to the dead-letter partition's leader over the
// replication listener) and accepts the rest; two more members of the
// group hold the records of a second topic past their lock at every
// delivery (each waits until the record was delivered again or reached
// the dead-letter topic) until they are archived at the delivery limit.
// A plain consumer of the dead-letter topic then finds every rejected and
// every timed-out record once, with its key, value, headers and the
// __dlq.errors.* headers, and no accepted one.
func TestShareGroupDeadLetterFranzGo(t *testing.T) {
	const limit = 2
	c := StartCluster(t, 3, append(dlqClusterSettings, "group.share.delivery.count.limit="+strconv.Itoa(limit))...)
	c.createTopic(t, "work", 3, 3)
	c.createTopic(t, "slow", 1, 3)
	c.createTopic(t, "dlq.work", 1, 3)
	admin := c.Client(t)
	setShareGroupConfigs(t, admin, "dq", map[string]string{
		"share.auto.offset.reset":                   "earliest",
		"errors.deadletterqueue.topic.name":         "dlq.work",
		"errors.deadletterqueue.copy.record.enable": "true",
	})
	produced := produceFates(t, c, "work", 3, 30, func(i int) string { return [...]string{"reject", "accept"}[i%2] })
	for k, v := range produceFates(t, c, "slow", 1, 6, func(int) string { return "slow" }) {
		produced[k] = v
	}
	dlq := startDLQReader(t, c, "dlq.work")

	runShareConsumer(t, c, "dq", "work", ackByFate)
	// The slow members hold each record they get, not polling (so
	// franz-go neither accepts it nor fetches for them), until the record
	// was delivered again (its lock expired) or reached the dead-letter
	// topic (its last lock expired).
	var mu sync.Mutex
	deliveries := map[string]int32{}
	hold := func(_ *kgo.Client, r *kgo.Record) {
		where := whereOf(r)
		mu.Lock()
		deliveries[where] = max(deliveries[where], r.DeliveryCount())
		mu.Unlock()
		poll.For(30*time.Second, func() bool {
			mu.Lock()
			again := deliveries[where] > r.DeliveryCount()
			mu.Unlock()
			return again || dlq.has(where)
		})
	}
	runShareConsumer(t, c, "dq", "slow", hold)
	runShareConsumer(t, c, "dq", "slow", hold)

	want := 0
	for _, src := range produced {
		if src.fate != "accept" {
			want++
		}
	}
	if !poll.For(50*time.Second, func() bool { return len(dlq.snapshot()) >= want }) {
		t.Fatalf("%d source records in the dead-letter topic, want %d", len(dlq.snapshot()), want)
	}
	checkDeadLetters(t, "dq", produced, dlq.snapshot(), limit, false)
}

// TestShareGroupDeadLetterLeaderKilled: three brokers, the source
// partition and the dead-letter topic with three replicas. A producer
// keeps producing while a franz-go share consumer rejects half the
// records and accepts the rest; once some copies are written, the source
// partition's leader (the share-partition leader, which writes the
// copies) is killed with SIGKILL, and the producer goes on for a while.
// The new leader reads the share state back, records rejected but not
// yet archived among it, and writes their copies: every rejected record
// is in the dead-letter topic at least once, with its headers, and no
// accepted one.
func TestShareGroupDeadLetterLeaderKilled(t *testing.T) {
	const limit = 5
	c := StartCluster(t, 3, append(dlqClusterSettings, "group.share.delivery.count.limit="+strconv.Itoa(limit))...)
	md := c.createTopicWith(t, "kq", 1, 3, map[string]string{"min.insync.replicas": "2"})
	c.createTopicWith(t, "dlq.kq", 1, 3, map[string]string{"min.insync.replicas": "2"})
	admin := c.Client(t)
	setShareGroupConfigs(t, admin, "dk", map[string]string{
		"share.auto.offset.reset":                   "earliest",
		"errors.deadletterqueue.topic.name":         "dlq.kq",
		"errors.deadletterqueue.copy.record.enable": "true",
	})
	dlq := startDLQReader(t, c, "dlq.kq")
	leader := leadersOf(md, "kq")[0]
	prod := startFateProducer(t, c, "kq")
	runShareConsumer(t, c, "dk", "kq", ackByFate)

	if !poll.For(30*time.Second, func() bool { return len(dlq.snapshot()) >= 20 }) {
		t.Fatalf("%d dead-letter copies before the kill, want 20", len(dlq.snapshot()))
	}
	c.Broker(leader).Kill(t)
	atKill := prod.count()
	t.Logf("killed broker %d, the leader of kq/0, with %d records produced and %d copied", leader, atKill, len(dlq.snapshot()))
	if !poll.For(30*time.Second, func() bool { return prod.count() >= atKill+100 }) {
		t.Fatalf("the producer made no progress after the kill: %d records", prod.count())
	}
	produced := prod.stop()
	rejected := 0
	for _, src := range produced {
		if src.fate == "reject" {
			rejected++
		}
	}
	if !poll.For(45*time.Second, func() bool { return len(dlq.snapshot()) >= rejected }) {
		t.Fatalf("%d rejected records in the dead-letter topic after the kill, want %d", len(dlq.snapshot()), rejected)
	}
	got := dlq.snapshot()
	dups := 0
	for _, copies := range got {
		dups += len(copies) - 1
	}
	t.Logf("%d records produced, %d rejected ones copied, %d copies more than once", len(produced), len(got), dups)
	checkDeadLetters(t, "dk", produced, got, limit, true)
}

// fateProducer produces records of alternating fates (reject, accept) to
// one partition, one at a time with acks=all, until stopped.
type fateProducer struct {
	mu       sync.Mutex
	produced map[string]sourceRecord
	stopping atomic.Bool // no record is cut off mid-produce: each produced record is known
	done     chan struct{}
}

func startFateProducer(t *testing.T, c *Cluster, topic string) *fateProducer {
	t.Helper()
	cl := c.newClient(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	p := &fateProducer{produced: map[string]sourceRecord{}, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer cl.Close()
		for i := 0; !p.stopping.Load(); i++ {
			f := [...]string{"reject", "accept"}[i%2]
			r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k-%s-%d", topic, i), Value: fmt.Appendf(nil, "%s-%d", f, i),
				Headers: []kgo.RecordHeader{{Key: "fate", Value: []byte(f)}}}
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
			err := cl.ProduceSync(ctx, r).FirstErr()
			cancel()
			if err != nil {
				t.Errorf("produce %d: %v", i, err)
				return
			}
			p.mu.Lock()
			p.produced[whereOf(r)] = sourceRecord{key: string(r.Key), value: string(r.Value), fate: f}
			p.mu.Unlock()
		}
	}()
	t.Cleanup(func() { p.stop() })
	return p
}

// count is how many records were produced so far.
func (p *fateProducer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.produced)
}

// stop stops the producer and returns what it produced.
func (p *fateProducer) stop() map[string]sourceRecord {
	p.stopping.Store(true)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.produced
}
