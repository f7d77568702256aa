package broker

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/segment/poll"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// dlqRecord is a dead-letter record as a test reads it back.
type dlqRecord struct {
	key, value string
	headers    map[string]string
}

// readDeadLetters reads topic from the start with a plain consumer until
// it has want records (or fails the test), keyed by source
// "partition/offset".
func readDeadLetters(t *testing.T, s *Server, topic string, want int) map[string][]dlqRecord {
	t.Helper()
	cl := newClient(t, s, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	out := map[string][]dlqRecord{}
	n := 0
	ok := poll.For(20*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			d := dlqRecord{key: string(r.Key), value: string(r.Value), headers: map[string]string{}}
			for _, h := range r.Headers {
				d.headers[h.Key] = string(h.Value)
			}
			k := d.headers[dlqHeaderPartition] + "/" + d.headers[dlqHeaderOffset]
			out[k] = append(out[k], d)
			n++
		})
		return n >= want
	})
	if !ok {
		t.Fatalf("%s: %d dead-letter records, want %d", topic, n, want)
	}
	return out
}

// produceDeadLetterSources produces n records "k<i>"/"v<i>" with a header "h"="<i>"
// over the 3 partitions of topic and returns "partition/offset" -> i.
func produceDeadLetterSources(t *testing.T, s *Server, topic string, from, n int) map[string]int {
	t.Helper()
	cl := newClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	out := map[string]int{}
	for i := from; i < from+n; i++ {
		r := &kgo.Record{Topic: topic, Partition: int32(i % 3), Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(strconv.Itoa(i))}}}
		if err := cl.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] = i
	}
	return out
}

// startDeadLetterServer is a share server with a delivery limit of 2 and
// a topic "queue" of 3 partitions.
func startDeadLetterServer(t *testing.T, props map[string]string) (*Server, *kgo.Client) {
	t.Helper()
	if props == nil {
		props = map[string]string{}
	}
	props["metrics.listener"] = "127.0.0.1:0"
	s, _ := startShareServerWith(t, 30*time.Second, props, func(c *Config) { c.Share.DeliveryCountLimit = 2 })
	admin := newClient(t, s)
	createTopic(t, admin, "queue", 3, nil)
	return s, admin
}

// consumeDeciding runs a share consumer of group until the share
// partitions are done at end, acking each record by decide(i, delivery).
func consumeDeciding(t *testing.T, s *Server, group string, end int64, index map[string]int, decide func(i, delivery int) kgo.AckStatus) {
	t.Helper()
	seen := map[int]int{}
	var mu sync.Mutex
	ack := func(r *kgo.Record) kgo.AckStatus {
		mu.Lock()
		defer mu.Unlock()
		i := index[fmt.Sprintf("%d/%d", r.Partition, r.Offset)]
		seen[i]++
		return decide(i, seen[i])
	}
	ctx, cancel := context.WithCancel(context.Background())
	cl := newShareConsumer(t, s, group, "queue")
	done := make(chan struct{})
	go func() { defer close(done); consumeShare(ctx, cl, &shareLedger{delivered: map[string]int{}}, ack) }()
	waitShareDone(t, s, group, end)
	cancel()
	<-done
	cl.Close()
}

// TestShareDeadLetterRejectedAndDeliveryLimit: rejected records and
// those released up to the delivery limit are copied, with key, value,
// headers and the __dlq.errors.* headers, to the group's dead-letter
// topic once each, and their offsets are archived; accepted ones are not.
func TestShareDeadLetterRejectedAndDeliveryLimit(t *testing.T) {
	s, admin := startDeadLetterServer(t, nil)
	createTopic(t, admin, "dlq.queue", 1, nil)
	if code, msg := alterGroupConfig(t, admin, "g", setGroupOp("errors.deadletterqueue.topic.name", "dlq.queue"),
		setGroupOp("errors.deadletterqueue.copy.record.enable", "true")); code != 0 {
		t.Fatalf("IncrementalAlterConfigs: %v %s", kerr.ErrorForCode(code), msg)
	}
	index := produceDeadLetterSources(t, s, "queue", 0, 30)
	// i%3: 0 rejected, 1 accepted, 2 released until the limit.
	consumeDeciding(t, s, "g", 10, index, func(i, _ int) kgo.AckStatus {
		return [...]kgo.AckStatus{kgo.AckReject, kgo.AckAccept, kgo.AckRelease}[i%3]
	})
	got := readDeadLetters(t, s, "dlq.queue", 20)
	for where, i := range index {
		recs := got[where]
		if i%3 == 1 {
			if len(recs) != 0 {
				t.Errorf("accepted record %d (%s) in the dead-letter topic", i, where)
			}
			continue
		}
		if len(recs) != 1 {
			t.Errorf("record %d (%s): %d dead-letter copies, want 1", i, where, len(recs))
			continue
		}
		d := recs[0]
		reason, count := dlqReasonRejected, "1"
		if i%3 == 2 {
			reason, count = dlqReasonDeliveryLimit, "2"
		}
		part, off, _ := strings.Cut(where, "/")
		want := map[string]string{"h": strconv.Itoa(i), dlqHeaderTopic: "queue", dlqHeaderPartition: part, dlqHeaderOffset: off,
			dlqHeaderGroup: "g", dlqHeaderDeliveryCount: count, dlqHeaderMessage: reason}
		if d.key != fmt.Sprintf("k%d", i) || d.value != fmt.Sprintf("v%d", i) {
			t.Errorf("record %d: copy %q/%q, want k%d/v%d", i, d.key, d.value, i, i)
		}
		for k, v := range want {
			if d.headers[k] != v {
				t.Errorf("record %d: header %s = %q, want %q", i, k, d.headers[k], v)
			}
		}
	}
	for k, p := range s.sharePartitionsOf("g") {
		if c := p.Counts(); c.Archiving != 0 {
			t.Errorf("partition %d: %d records still archiving", k.Partition, c.Archiving)
		}
	}
	fams := scrape(t, s)
	if got := mustValue(t, fams, "strata_share_dead_letter_records_total", "group", "g"); got != 20 {
		t.Errorf("dead-letter records written = %v, want 20", got)
	}
}

// TestShareDeadLetterTopicChangedAtRuntime: the dead-letter topic follows
// the GROUP config as IncrementalAlterConfigs changes it: none (archived
// uncopied), one topic, another, a missing one without auto-creation
// (archived uncopied, counted as failed), and one the broker creates
// under errors.deadletterqueue.auto.create.topics.enable. Without
// copy.record.enable the copies carry the headers alone.
func TestShareDeadLetterTopicChangedAtRuntime(t *testing.T) {
	s, admin := startDeadLetterServer(t, map[string]string{"errors.deadletterqueue.auto.create.topics.enable": "true"})
	createTopic(t, admin, "dlq.a", 1, nil)
	createTopic(t, admin, "dlq.b", 2, nil)
	rejectAll := func(int, int) kgo.AckStatus { return kgo.AckReject }
	setTopic := func(name string) {
		t.Helper()
		if code, msg := alterGroupConfig(t, admin, "rt", setGroupOp("errors.deadletterqueue.topic.name", name)); code != 0 {
			t.Fatalf("set %q: %v %s", name, kerr.ErrorForCode(code), msg)
		}
	}
	// Round r produces 3 records (one per partition) and rejects them.
	round := func(r int) map[string]int {
		t.Helper()
		index := produceDeadLetterSources(t, s, "queue", 3*r, 3)
		consumeDeciding(t, s, "rt", int64(r+1), index, rejectAll)
		return index
	}
	round(0) // no dead-letter topic
	setTopic("dlq.a")
	round(1)
	setTopic("dlq.b")
	round(2)
	setTopic("no.such.topic") // no prefix: not created
	round(3)
	setTopic("dlq.created")
	round(4)

	for _, c := range []struct {
		topic  string
		offset string // the source offset each copy names
	}{{"dlq.a", "1"}, {"dlq.b", "2"}, {"dlq.created", "4"}} {
		got := readDeadLetters(t, s, c.topic, 3)
		if len(got) != 3 {
			t.Errorf("%s: copies of %v, want one per partition", c.topic, got)
		}
		for where, recs := range got {
			if _, off, _ := strings.Cut(where, "/"); off != c.offset || len(recs) != 1 {
				t.Errorf("%s: %d copies of %s, want 1 of offset %s", c.topic, len(recs), where, c.offset)
			}
			if d := recs[0]; d.key != "" || d.value != "" || d.headers["h"] != "" {
				t.Errorf("%s: copy of %s carries the record without copy.record.enable: %+v", c.topic, where, d)
			}
		}
	}
	if s.topic("no.such.topic") != nil {
		t.Error("no.such.topic was created without the prefix")
	}
	fams := scrape(t, s)
	if got := mustValue(t, fams, "strata_share_dead_letter_records_total", "group", "rt"); got != 9 {
		t.Errorf("dead-letter records written = %v, want 9", got)
	}
	if got := mustValue(t, fams, "strata_share_dead_letter_failed_records_total", "group", "rt"); got != 3 {
		t.Errorf("dead-letter records failed = %v, want 3", got)
	}
	// An internal topic is refused as the group config.
	if code, _ := alterGroupConfig(t, admin, "rt", setGroupOp("errors.deadletterqueue.topic.name", "__consumer_offsets")); code != kerr.InvalidConfig.Code {
		t.Errorf("__consumer_offsets as the dead-letter topic: %v, want INVALID_CONFIG", kerr.ErrorForCode(code))
	}
}
