package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/broker/share"
	"github.com/stratastream/strata/segment/poll"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startShareServer runs a server with share groups over an in-memory
// persister; new share partitions start at the earliest offset, and
// acquisition locks last lock.
func startShareServer(t *testing.T, lock time.Duration) (*Server, *share.MemPersister) {
	t.Helper()
	return startShareServerWith(t, lock, nil, nil)
}

// startShareServerWith is startShareServer with the settings props and
// the config changed by change.
func startShareServerWith(t *testing.T, lock time.Duration, props map[string]string, change func(*Config)) (*Server, *share.MemPersister) {
	t.Helper()
	cfg, mp := shareTestConfig(t, lock, props)
	if change != nil {
		change(&cfg)
	}
	return startServerConfig(t, cfg), mp
}

// shareTestConfig is the config startShareServerWith runs, for a test
// that restarts the server on it.
func shareTestConfig(t *testing.T, lock time.Duration, props map[string]string) (Config, *share.MemPersister) {
	t.Helper()
	cfg := testConfig(t, props)
	mp := share.NewMemPersister()
	cfg.SharePersister = mp
	cfg.Share.Defaults.AutoOffsetReset = share.ResetEarliest
	cfg.Share.MinRecordLockDuration = lock
	cfg.Share.Defaults.RecordLockDuration = lock
	cfg.Share.MinHeartbeatInterval = 100 * time.Millisecond
	cfg.Share.Defaults.HeartbeatInterval = 100 * time.Millisecond
	return cfg, mp
}

// produceValues produces n records with values "<prefix><i>" spread over
// the topic's partitions.
func produceValues(t *testing.T, s *Server, topic, prefix string, n int) {
	t.Helper()
	cl := newClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i % 3), Value: fmt.Appendf(nil, "%s%d", prefix, i)})
	}
	if err := cl.ProduceSync(testCtx(t), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// shareLedger records what share consumers were given.
type shareLedger struct {
	mu        sync.Mutex
	delivered map[string]int // value: deliveries seen
}

func (l *shareLedger) add(v string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.delivered[v]++
}

func (l *shareLedger) distinct() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.delivered)
}

// consumeShare polls a share consumer into the ledger until ctx ends;
// each polled record is accepted by the next poll (franz-go's default),
// or acked with ack when it is set.
func consumeShare(ctx context.Context, cl *kgo.Client, l *shareLedger, ack func(*kgo.Record) kgo.AckStatus) {
	for ctx.Err() == nil {
		fs := cl.PollRecords(ctx, 100)
		if fs.IsClientClosed() {
			return
		}
		fs.EachRecord(func(r *kgo.Record) {
			l.add(string(r.Value))
			if ack != nil {
				r.Ack(ack(r))
			}
		})
	}
}

// newShareConsumer returns a share group consumer of topic for s.
func newShareConsumer(t *testing.T, s *Server, group, topic string) *kgo.Client {
	t.Helper()
	return newClient(t, s, kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.FetchMaxWait(200*time.Millisecond))
}

// waitShareDone waits until the three share partitions of group have
// their start offset at end: everything acknowledged or archived.
func waitShareDone(t *testing.T, s *Server, group string, end int64) {
	t.Helper()
	waitSharePartsDone(t, s, group, end, 3)
}

// waitSharePartsDone is waitShareDone for a topic of parts partitions.
func waitSharePartsDone(t *testing.T, s *Server, group string, end int64, parts int) {
	t.Helper()
	if !poll.For(20*time.Second, func() bool {
		n := 0
		for _, p := range s.sharePartitionsOf(group) {
			if start, _ := p.Offsets(); start < end {
				return false
			}
			n++
		}
		return n == parts
	}) {
		for k, p := range s.sharePartitionsOf(group) {
			start, e := p.Offsets()
			t.Logf("partition %d: start %d end %d %+v", k.Partition, start, e, p.Counts())
		}
		t.Fatalf("share partitions of %s not finished at %d", group, end)
	}
}

// sharePartitionsOf returns the loaded share partitions of group.
func (s *Server) sharePartitionsOf(group string) map[share.Key]*share.Partition {
	out := map[share.Key]*share.Partition{}
	for k := range s.shares.Stats() {
		if k.Group == group {
			p, err := s.shares.Partition(context.Background(), k, s.topicByID([16]byte(k.TopicID)).local(k.Partition).leaderEpoch(), nil)
			if err == nil {
				out[k] = p
			}
		}
	}
	return out
}

func TestShareGroupConsumersDrainTopic(t *testing.T) {
	s, _ := startShareServer(t, 30*time.Second)
	admin := newClient(t, s)
	createTopic(t, admin, "queue", 3, nil)
	produceValues(t, s, "queue", "v", 300)
	for _, consumers := range []int{1, 3} {
		t.Run(fmt.Sprintf("consumers=%d", consumers), func(t *testing.T) {
			group := fmt.Sprintf("g%d", consumers)
			l := &shareLedger{delivered: map[string]int{}}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for range consumers {
				cl := newShareConsumer(t, s, group, "queue")
				wg.Add(1)
				go func() { defer wg.Done(); consumeShare(ctx, cl, l, nil) }()
			}
			poll.Until(t, 20*time.Second, "every record delivered", func() bool { return l.distinct() == 300 })
			waitShareDone(t, s, group, 100)
			cancel()
			wg.Wait()
			for v, n := range l.delivered {
				if n != 1 {
					t.Errorf("%s delivered %d times, want once", v, n)
				}
			}
		})
	}
}

func TestShareGroupDescribeMembers(t *testing.T) {
	s, _ := startShareServer(t, 30*time.Second)
	admin := newClient(t, s)
	createTopic(t, admin, "queue", 3, nil)
	l := &shareLedger{delivered: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for range 2 {
		cl := newShareConsumer(t, s, "dg", "queue")
		wg.Add(1)
		go func() { defer wg.Done(); consumeShare(ctx, cl, l, nil) }()
	}
	var got kmsg.ShareGroupDescribeResponseGroup
	poll.Until(t, 20*time.Second, "two members with all partitions", func() bool {
		req := kmsg.NewPtrShareGroupDescribeRequest()
		req.GroupIDs = []string{"dg"}
		resp, err := req.RequestWith(testCtx(t), admin)
		if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
			return false
		}
		got = resp.Groups[0]
		parts := 0
		for _, m := range got.Members {
			for _, tp := range m.Assignment.TopicPartitions {
				parts += len(tp.Partitions)
			}
		}
		return len(got.Members) == 2 && parts == 3
	})
	if got.Assignor != share.AssignorName || got.GroupEpoch < 2 {
		t.Fatalf("group %+v", got)
	}

	// One id namespace for every group type, as Kafka: ListGroups shows
	// the share group (and filters it by type); a classic JoinGroup or a
	// KIP-848 heartbeat for its id is refused.
	listed := func(types ...string) []kmsg.ListGroupsResponseGroup {
		req := kmsg.NewPtrListGroupsRequest()
		req.TypesFilter = types
		resp, err := req.RequestWith(testCtx(t), admin)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("ListGroups: %v %v", resp, err)
		}
		return resp.Groups
	}
	if gs := listed(); len(gs) != 1 || gs[0].Group != "dg" || gs[0].GroupType != "share" || gs[0].ProtocolType != "share" || gs[0].GroupState != "Stable" {
		t.Fatalf("ListGroups: %+v", gs)
	}
	if gs := listed("consumer", "classic"); len(gs) != 0 {
		t.Fatalf("ListGroups of consumer and classic groups: %+v", gs)
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "dg", "consumer", 10000, 10000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	if resp, err := join.RequestWith(testCtx(t), admin); err != nil || resp.ErrorCode != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("JoinGroup of a share group's id: %+v %v", resp, err)
	}
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.RebalanceTimeoutMillis, hb.SubscribedTopicNames = "dg", "m-1", 10000, []string{"queue"}
	if resp, err := hb.RequestWith(testCtx(t), admin); err != nil || resp.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("ConsumerGroupHeartbeat of a share group's id: %+v %v", resp, err)
	}
}

func TestShareGroupRedeliversAfterClose(t *testing.T) {
	s, _ := startShareServer(t, 30*time.Second)
	admin := newClient(t, s)
	createTopic(t, admin, "queue", 3, nil)
	produceValues(t, s, "queue", "v", 30)
	// The first consumer takes records and leaves without acknowledging
	// them: it releases what it holds as it closes.
	first, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.ShareGroup("rg"), kgo.ConsumeTopics("queue"), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	poll.Until(t, 20*time.Second, "first consumer holds records", func() bool {
		fs := first.PollRecords(testCtx(t), 100)
		held += fs.NumRecords()
		return held > 0
	})
	first.Close()
	l := &shareLedger{delivered: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	second := newShareConsumer(t, s, "rg", "queue")
	done := make(chan struct{})
	go func() { defer close(done); consumeShare(ctx, second, l, nil) }()
	poll.Until(t, 20*time.Second, "second consumer gets every record", func() bool { return l.distinct() == 30 })
	waitShareDone(t, s, "rg", 10)
	cancel()
	<-done
}

func TestShareGroupReleaseAndReject(t *testing.T) {
	s, _ := startShareServerWith(t, 30*time.Second, map[string]string{"metrics.listener": "127.0.0.1:0"}, nil)
	admin := newClient(t, s)
	createTopic(t, admin, "queue", 3, nil)
	produceValues(t, s, "queue", "v", 30)
	// Every record is released until it has been delivered twice, then
	// the even ones are accepted and the odd ones rejected.
	l := &shareLedger{delivered: map[string]int{}}
	seen := map[string]int{}
	var mu sync.Mutex
	ack := func(r *kgo.Record) kgo.AckStatus {
		mu.Lock()
		defer mu.Unlock()
		v := string(r.Value)
		seen[v]++
		switch {
		case seen[v] < 2:
			return kgo.AckRelease
		case len(v)%2 == 0:
			return kgo.AckAccept
		default:
			return kgo.AckReject
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cl := newShareConsumer(t, s, "ar", "queue")
	done := make(chan struct{})
	go func() { defer close(done); consumeShare(ctx, cl, l, ack) }()
	waitShareDone(t, s, "ar", 10)
	cancel()
	<-done
	for v, n := range l.delivered {
		if n != 2 {
			t.Errorf("%s delivered %d times, want 2 (released once)", v, n)
		}
	}
	// v0-v9 are accepted, v10-v29 rejected.
	fams := scrape(t, s)
	for _, c := range []struct {
		name string
		want float64
	}{
		{"strata_share_group_acquired_records_total", 60},
		{"strata_share_group_redelivered_records_total", 30},
		{"strata_share_group_archived_records_total", 20},
	} {
		if got := mustValue(t, fams, c.name, "group", "ar"); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestShareGroupQueueChecker runs consumers that accept, release or
// reject at random and are closed holding records, and checks the queue
// semantics: every record ends accepted or archived, none is accepted
// twice, none is delivered more than group.share.delivery.count.limit
// times.
func TestShareGroupQueueChecker(t *testing.T) {
	s, _ := startShareServer(t, 30*time.Second)
	createTopic(t, newClient(t, s), "queue", 3, nil)
	const n = 600
	produceValues(t, s, "queue", "v", n)
	var mu sync.Mutex
	accepted := map[string]int{}
	rejected := map[string]bool{}
	l := &shareLedger{delivered: map[string]int{}}
	i := 0
	ack := func(r *kgo.Record) kgo.AckStatus {
		mu.Lock()
		defer mu.Unlock()
		i++
		v := string(r.Value)
		switch i % 10 {
		case 3:
			return kgo.AckRelease
		case 7:
			rejected[v] = true
			return kgo.AckReject
		}
		accepted[v]++
		return kgo.AckAccept
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for c := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; ctx.Err() == nil; round++ {
				// Each consumer lives for a few polls, then closes
				// holding the records of its last poll unacknowledged.
				cl, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.ShareGroup("qc"), kgo.ConsumeTopics("queue"),
					kgo.FetchMaxWait(200*time.Millisecond), kgo.ShareMaxRecords(int32(7+c)))
				if err != nil {
					t.Error(err)
					return
				}
				for p := 0; p < 5+c && ctx.Err() == nil; p++ {
					fs := cl.PollRecords(ctx, 50)
					last := p == 4+c
					fs.EachRecord(func(r *kgo.Record) {
						l.add(string(r.Value))
						if !last {
							r.Ack(ack(r))
						}
					})
				}
				cl.Close()
			}
		}()
	}
	waitShareDone(t, s, "qc", n/3)
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for v, k := range accepted {
		if k > 1 {
			t.Errorf("%s accepted %d times", v, k)
		}
	}
	// Every record not accepted was archived: rejected, or at the delivery
	// limit. Deliveries are counted by the broker: a consumer that
	// closes with a share fetch in flight had records acquired that the
	// application never polled (they are released by the session's
	// close), so the application's own count may be lower.
	var totals share.Totals
	for k, st := range s.shares.Stats() {
		if k.Group == "qc" {
			totals.Acquired += st.Totals.Acquired
			totals.Archived += st.Totals.Archived
		}
	}
	seen, unaccepted := 0, 0
	for v, k := range l.delivered {
		seen += k
		if k > share.DefaultDeliveryCountLimit {
			t.Errorf("%s delivered %d times, more than the limit %d", v, k, share.DefaultDeliveryCountLimit)
		}
		if accepted[v] == 0 {
			unaccepted++ // rejected, or archived at the limit
		}
	}
	if int64(seen) > totals.Acquired {
		t.Errorf("the consumers saw %d deliveries, the broker acquired records %d times", seen, totals.Acquired)
	}
	if totals.Archived != int64(unaccepted) {
		t.Errorf("the broker archived %d records; %d were never accepted (%d rejected, the others at the delivery limit)", totals.Archived, unaccepted, len(rejected))
	}
	if len(l.delivered) != n {
		t.Errorf("%d of %d records delivered", len(l.delivered), n)
	}
}

func TestShareGroupReadCommitted(t *testing.T) {
	s, _ := startShareServer(t, 30*time.Second)
	admin := newClient(t, s)
	createTopic(t, admin, "queue", 3, nil)
	// The group config, as an operator sets it (IncrementalAlterConfigs
	// on the GROUP resource).
	if code, msg := alterGroupConfig(t, admin, "rc", setGroupOp("share.isolation.level", "read_committed")); code != 0 {
		t.Fatalf("set share.isolation.level: %d %s", code, msg)
	}
	txn, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.TransactionalID("share-txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(txn.Close)
	for _, commit := range []kgo.TransactionEndTry{kgo.TryAbort, kgo.TryCommit} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range 30 {
			r := &kgo.Record{Topic: "queue", Partition: int32(i % 3), Value: fmt.Appendf(nil, "%v-%d", bool(commit), i)}
			if err := txn.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := txn.EndTransaction(testCtx(t), commit); err != nil {
			t.Fatal(err)
		}
	}
	l := &shareLedger{delivered: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	cl := newShareConsumer(t, s, "rc", "queue")
	done := make(chan struct{})
	go func() { defer close(done); consumeShare(ctx, cl, l, nil) }()
	// 10 aborted records, a marker, 10 committed, a marker per partition.
	waitShareDone(t, s, "rc", 22)
	cancel()
	<-done
	for v := range l.delivered {
		if v[:4] != "true" {
			t.Errorf("aborted record %s delivered", v)
		}
	}
	if l.distinct() != 30 {
		t.Errorf("%d committed records delivered, want 30", l.distinct())
	}
}

func TestShareGroupDrainsTieredTopic(t *testing.T) {
	s, _ := startShareServerWith(t, 30*time.Second, tieredProps, nil)
	cl := newClient(t, s)
	const topic, n = "tiered", 2000
	createTopic(t, cl, topic, 1, tieredTopicConfigs)
	produceTiered(t, cl, topic, 0, n)
	waitTiered(t, s, topic)
	l := &shareLedger{delivered: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	sc := newShareConsumer(t, s, "tg", topic)
	done := make(chan struct{})
	go func() { defer close(done); consumeShare(ctx, sc, l, nil) }()
	waitSharePartsDone(t, s, "tg", n, 1)
	cancel()
	<-done
	if l.distinct() != n {
		t.Fatalf("%d of %d records delivered", l.distinct(), n)
	}
	if st := s.tier.reader.Stats(); st.Cache.Misses == 0 {
		t.Fatalf("the remote reader was not used: %+v", st)
	}
}
