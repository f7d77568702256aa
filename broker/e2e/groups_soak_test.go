package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// soakBrokerSettings start a broker whose groups form quickly and whose
// __consumer_offsets has three partitions rather than fifty.
var soakBrokerSettings = []string{
	"group.initial.rebalance.delay.ms=100",
	"offsets.topic.num.partitions=3",
}

// soakValueSize is the size of every record value in these tests.
const soakValueSize = 100

// seqOf returns the index i of a value written as recordValue(i,
// soakValueSize), checking the whole value.
func seqOf(v []byte) (int, bool) {
	if len(v) != soakValueSize || v[12] != '|' {
		return 0, false
	}
	i, err := strconv.Atoi(string(v[:12]))
	if err != nil || i < 0 || string(recordValue(i, soakValueSize)) != string(v) {
		return 0, false
	}
	return i, true
}

// groupMember is one franz-go group consumer whose poll loop runs in its own
// goroutine and hands every record to onRecord.
type groupMember struct {
	name     string
	cl       *kgo.Client
	cancel   context.CancelFunc
	done     chan struct{} // closed when the poll loop returns
	assigned chan struct{} // closed on the first non-empty assignment
	left     sync.Once

	mu struct {
		sync.Mutex
		errs []error // fetch errors seen by the poll loop
	}
}

// startGroupMember starts a member of group consuming topic with franz-go's
// defaults plus opts. onRecord is called from the member's poll loop only.
// The client is closed when the test ends if leave was not called.
func startGroupMember(t *testing.T, b *Broker, name, group, topic string, onRecord func(*kgo.Record), opts ...kgo.Opt) *groupMember {
	t.Helper()
	m := &groupMember{name: name, done: make(chan struct{}), assigned: make(chan struct{})}
	var once sync.Once
	base := []kgo.Opt{
		kgo.SeedBrokers(b.Addr),
		kgo.ClientID(name),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		// Only OnPartitionsAssigned: setting OnPartitionsRevoked would
		// replace the default revoke, which commits.
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, added map[string][]int32) {
			if len(added[topic]) > 0 {
				once.Do(func() { close(m.assigned) })
			}
		}),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient %s: %v", name, err)
	}
	m.cl = cl
	t.Cleanup(func() { m.leave() })
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			if errors.Is(fs.Err0(), kgo.ErrClientClosed) {
				return
			}
			for _, fe := range fs.Errors() {
				if !errors.Is(fe.Err, context.Canceled) {
					m.mu.Lock()
					m.mu.errs = append(m.mu.errs, fmt.Errorf("%s/%d: %w", fe.Topic, fe.Partition, fe.Err))
					m.mu.Unlock()
				}
			}
			// Records returned with a canceled context are still
			// handed over: the next poll marks them for commit.
			fs.EachRecord(onRecord)
		}
	}()
	return m
}

// leave stops the poll loop, marks everything it polled for commit (a poll
// with a canceled context does only that), and closes the client, which
// leaves the group: the default revoke commits the polled offsets. It is
// safe to call more than once.
func (m *groupMember) leave() {
	m.left.Do(func() {
		m.cancel()
		<-m.done
		canceled, cancel := context.WithCancel(context.Background())
		cancel()
		m.cl.PollFetches(canceled)
		m.cl.Close()
	})
}

// fetchErrors returns the fetch errors the poll loop has seen.
func (m *groupMember) fetchErrors() []error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.mu.errs)
}

// fetchCommitted returns the group's committed offsets of topic's partitions
// [0, partitions), -1 where none, or the first error.
func fetchCommitted(ctx context.Context, cl *kgo.Client, group, topic string, partitions int) (map[int32]int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	for p := range int32(partitions) {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("%s/%d: %w", tp.Topic, p.Partition, err)
			}
			out[p.Partition] = p.Offset
		}
	}
	if len(out) != partitions {
		return nil, fmt.Errorf("%d partitions answered, want %d", len(out), partitions)
	}
	return out, nil
}

// commitMonitor polls a group's committed offsets every 100 ms and records
// every time one goes backwards.
type commitMonitor struct {
	cancel context.CancelFunc
	done   chan struct{}

	// Valid after done is closed.
	samples    int
	errs       []error
	backwards  []string
	last       map[int32]int64
	increments int // observed forward moves, summed over partitions
}

func startCommitMonitor(cl *kgo.Client, group, topic string, partitions int) *commitMonitor {
	ctx, cancel := context.WithCancel(context.Background())
	m := &commitMonitor{cancel: cancel, done: make(chan struct{}), last: map[int32]int64{}}
	go func() {
		defer close(m.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			offs, err := fetchCommitted(rctx, cl, group, topic, partitions)
			rcancel()
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				m.errs = append(m.errs, err)
			default:
				m.samples++
				for p, off := range offs {
					prev, seen := m.last[p]
					if seen && off < prev {
						m.backwards = append(m.backwards, fmt.Sprintf("partition %d: %d after %d (sample %d)", p, off, prev, m.samples))
					}
					if seen && off > prev {
						m.increments++
					}
					m.last[p] = off
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return m
}

func (m *commitMonitor) stop() {
	m.cancel()
	<-m.done
}

// seqCounts counts how often each record index was consumed.
type seqCounts struct {
	mu struct {
		sync.Mutex
		counts   []uint8 // by record index, saturating
		distinct int
		dups     int
		bad      []string // records that were never produced
	}
}

// add counts one consumed record and returns the number of distinct
// records consumed so far.
func (s *seqCounts) add(r *kgo.Record) int {
	i, ok := seqOf(r.Value)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ok {
		if len(s.mu.bad) < 5 {
			s.mu.bad = append(s.mu.bad, fmt.Sprintf("%d@%d: %.40q", r.Partition, r.Offset, r.Value))
		}
		return s.mu.distinct
	}
	if i >= len(s.mu.counts) {
		s.mu.counts = append(s.mu.counts, make([]uint8, i+1-len(s.mu.counts)+1024)...)
	}
	switch c := s.mu.counts[i]; {
	case c == 0:
		s.mu.distinct++
	default:
		s.mu.dups++
	}
	if s.mu.counts[i] < 255 {
		s.mu.counts[i]++
	}
	return s.mu.distinct
}

func (s *seqCounts) distinct() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.distinct
}

// count returns how often record i was consumed.
func (s *seqCounts) count(i int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= len(s.mu.counts) {
		return 0
	}
	return int(s.mu.counts[i])
}

// waitUntil polls cond every 20 ms until it holds or ctx ends, and reports
// whether it held.
func waitUntil(ctx context.Context, cond func() bool) bool {
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return true
}

// TestFranzGoDefaultsGroupRebalance produces 1,000,000 lz4 records of 100 B
// with franz-go's default producer (idempotent, default partitioner) to six
// partitions while a group of franz-go consumers with their defaults
// (cooperative-sticky, autocommit, default revoke commits) reads them: two
// members start, a third joins at 150,000 records and one of the first two
// leaves at 400,000. Every record must be consumed at least once (duplicates
// across rebalances are counted and logged), the committed offsets polled
// every 100 ms must never go backwards, and once the members have left the
// commits must equal the log end offsets.
//
// The producer is paced at 80,000 records/s so that the rebalances land
// while records are still flowing; the members heartbeat every 500 ms and
// autocommit every second (defaults: 3 s and 5 s) so that a rebalance takes
// well under a second and the monitor sees many commits.
func TestFranzGoDefaultsGroupRebalance(t *testing.T) {
	const (
		topic      = "soak-rebalance"
		group      = "soak-rebalance-g"
		partitions = 6
		n          = 1_000_000
		rate       = 80_000 // records per second
		joinAt     = 150_000
		leaveAt    = 400_000
	)
	b := StartBroker(t, soakBrokerSettings...)
	b.CreateTopic(t, topic, partitions)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	admin := b.Client(t)
	mon := startCommitMonitor(admin, group, topic, partitions)
	defer mon.stop()

	var seen seqCounts
	onRecord := func(r *kgo.Record) { seen.add(r) }
	memberOpts := []kgo.Opt{kgo.HeartbeatInterval(500 * time.Millisecond), kgo.AutoCommitInterval(time.Second)}
	a := startGroupMember(t, b, "member-a", group, topic, onRecord, memberOpts...)
	bm := startGroupMember(t, b, "member-b", group, topic, onRecord, memberOpts...)
	waitStableMembers(t, admin, group, 2)
	_, gen0 := a.cl.GroupMetadata()

	start := time.Now()
	pcl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(pcl.Close)
	produced := make(chan error, 1)
	go func() { produced <- producePaced(ctx, pcl, topic, n, rate) }()

	wait := func(what string, cond func() bool) {
		t.Helper()
		if !waitUntil(ctx, cond) {
			t.Fatalf("%s: %v after %v; %d distinct records consumed", what, ctx.Err(), time.Since(start).Round(time.Millisecond), seen.distinct())
		}
	}
	wait("waiting for the join point", func() bool { return seen.distinct() >= joinAt })
	t.Logf("%d records consumed after %v; member-c joins", seen.distinct(), time.Since(start).Round(time.Millisecond))
	c := startGroupMember(t, b, "member-c", group, topic, onRecord, memberOpts...)
	wait("waiting for member-c's assignment", func() bool {
		select {
		case <-c.assigned:
			return true
		default:
			return false
		}
	})
	atJoin := seen.distinct()
	wait("waiting for the leave point", func() bool { return seen.distinct() >= leaveAt })
	t.Logf("%d records consumed after %v (member-c assigned at %d); member-a leaves", seen.distinct(), time.Since(start).Round(time.Millisecond), atJoin)
	a.leave()
	waitStableMembers(t, admin, group, 2)
	atLeave := seen.distinct()
	_, genLeave := bm.cl.GroupMetadata()
	t.Logf("group stable with member-b and member-c at generation %d (was %d with a and b) after %d records", genLeave, gen0, atLeave)

	select {
	case err := <-produced:
		if err != nil {
			t.Fatalf("producing: %v", err)
		}
	case <-ctx.Done():
		t.Fatalf("producer did not finish: %v", ctx.Err())
	}
	t.Logf("produced %d records in %v", n, time.Since(start).Round(time.Millisecond))
	wait("waiting for every record", func() bool { return seen.distinct() >= n })
	t.Logf("consumed all %d records in %v", n, time.Since(start).Round(time.Millisecond))
	bm.leave()
	c.leave()
	mon.stop()

	seen.mu.Lock()
	dups, bad := seen.mu.dups, seen.mu.bad
	seen.mu.Unlock()
	if len(bad) > 0 {
		t.Errorf("consumed records that were never produced: %v", bad)
	}
	t.Logf("%d records consumed more than once across the rebalances (at-least-once)", dups)
	for _, m := range []*groupMember{a, bm, c} {
		if errs := m.fetchErrors(); len(errs) > 0 {
			t.Errorf("%s: %d fetch errors, first: %v", m.name, len(errs), errs[0])
		}
	}
	if genLeave-gen0 < 2 {
		t.Errorf("generation moved from %d to %d: want at least two rebalances", gen0, genLeave)
	}
	if atLeave >= n {
		t.Errorf("the rebalances finished only after all %d records were consumed; not mid-consumption", n)
	}
	t.Logf("commit monitor: %d samples, %d forward moves, %d errors", mon.samples, mon.increments, len(mon.errs))
	if len(mon.errs) > 0 {
		t.Errorf("OffsetFetch failed %d times while polling; first: %v", len(mon.errs), mon.errs[0])
	}
	if len(mon.backwards) > 0 {
		t.Errorf("committed offsets went backwards %d times: %v", len(mon.backwards), mon.backwards[:min(10, len(mon.backwards))])
	}

	ends := listEndOffsets(t, b, topic, partitions)
	total := int64(0)
	for _, e := range ends {
		total += e
	}
	if total != n {
		t.Errorf("end offsets %v sum to %d, want %d", ends, total, n)
	}
	committed, err := fetchCommitted(ctx, admin, group, topic, partitions)
	if err != nil {
		t.Fatalf("OffsetFetch after the members left: %v", err)
	}
	if !maps.Equal(committed, ends) {
		t.Errorf("committed offsets %v after every member left, want the log end offsets %v", committed, ends)
	}
	b.RequireAlive(t)
}

// producePaced produces records [0, n) with values recordValue(i,
// soakValueSize) and no key, at most rate a second, and waits for every
// acknowledgement. It returns the first produce error.
func producePaced(ctx context.Context, cl *kgo.Client, topic string, n, rate int) error {
	var (
		wg       sync.WaitGroup
		failed   atomic.Int64
		errOnce  sync.Once
		firstErr error
	)
	start := time.Now()
	for i := range n {
		if i%1000 == 0 {
			if d := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))); d > 0 {
				time.Sleep(d)
			}
		}
		r := &kgo.Record{Topic: topic, Value: recordValue(i, soakValueSize)}
		wg.Add(1)
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				failed.Add(1)
				errOnce.Do(func() { firstErr = fmt.Errorf("record %d: %w", i, err) })
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		return fmt.Errorf("%d of %d records failed; first: %w", f, n, firstErr)
	}
	return nil
}

// initProducerID asks the broker for a new idempotent producer id, retrying
// retriable errors until ctx ends.
func initProducerID(t *testing.T, ctx context.Context, cl *kgo.Client) int64 {
	t.Helper()
	for {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionTimeoutMillis = 60000
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil {
			if resp.ProducerID < 0 {
				t.Fatalf("InitProducerId: producer id %d", resp.ProducerID)
			}
			return resp.ProducerID
		}
		if !kerr.IsRetriable(err) || ctx.Err() != nil {
			t.Fatalf("InitProducerId: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// killRunConsumer is what the group member of the kill test has seen.
type killRunConsumer struct {
	mu struct {
		sync.Mutex
		restarted  bool            // set just before the restart
		nextBefore map[int32]int64 // before: offset after the last record consumed
		firstAfter map[int32]int64 // after: offset of the first record consumed
		next       map[int32]int64 // offset after the last record consumed
		committed  map[int32]int64 // highest offset a commit response acknowledged
		commitErrs []error
	}
}

func (c *killRunConsumer) record(r *kgo.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := r.Partition
	if !c.mu.restarted {
		c.mu.nextBefore[p] = r.Offset + 1
	} else if _, ok := c.mu.firstAfter[p]; !ok {
		c.mu.firstAfter[p] = r.Offset
	}
	c.mu.next[p] = r.Offset + 1
}

// commitDone is the member's AutoCommitCallback (it also sees the default
// revoke's commits): it keeps the highest offset acknowledged per partition.
func (c *killRunConsumer) commitDone(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.mu.commitErrs = append(c.mu.commitErrs, err)
		return
	}
	sent := map[int32]int64{}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			sent[rp.Partition] = rp.Offset
		}
	}
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				c.mu.commitErrs = append(c.mu.commitErrs, fmt.Errorf("%s/%d: %w", tp.Topic, p.Partition, err))
				continue
			}
			if off, ok := sent[p.Partition]; ok && off > c.mu.committed[p.Partition] {
				c.mu.committed[p.Partition] = off
			}
		}
	}
}

// killRunProducer is what the producer of the kill test has been told.
type killRunProducer struct {
	wg sync.WaitGroup
	mu struct {
		sync.Mutex
		sent     int // records handed to the client
		acked    []ackedRecord
		pids     map[int64]bool // producer ids of acknowledged records
		failed   int
		firstErr error
	}
}

func (p *killRunProducer) ackedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.mu.acked)
}

// TestKillDuringGroupAndIdempotentProduce SIGKILLs the broker while one
// franz-go client produces idempotently (defaults: acks all, five requests in
// flight) to three partitions and a franz-go group member consumes them with
// autocommit, restarts it on the same data directory and port, and lets the
// same two clients carry on. Afterwards:
//
//   - the log holds each record at most once, in send order per partition,
//     and every acknowledged record at its acknowledged offset;
//   - the commits acknowledged before the kill survived it, the member's
//     first record of each partition after the restart lies between them and
//     where it had read to (it neither starts over nor skips), and every
//     record in the log was consumed;
//   - producer ids handed out after the restart (InitProducerId, and a new
//     franz-go producer's batches) differ from every id handed out before.
func TestKillDuringGroupAndIdempotentProduce(t *testing.T) {
	const (
		topic      = "soak-kill"
		group      = "soak-kill-g"
		partitions = 3
		ackedKill  = 40_000 // acknowledgements before the kill
		ackedAfter = 40_000 // more acknowledgements before producing stops
		outage     = time.Second
	)
	b := StartBroker(t, soakBrokerSettings...)
	b.CreateTopic(t, topic, partitions)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Second)
	defer cancel()
	admin := b.Client(t)
	pidBefore := initProducerID(t, ctx, admin)

	// A hand-built producer with pidBefore writes two batches to rawTopic;
	// the second is sent again after the restart, as a retry whose answer
	// was lost in the crash would be.
	const rawTopic = "soak-kill-raw"
	b.CreateTopic(t, rawTopic, 1)
	rawBatch := func(seq int32) []byte {
		t.Helper()
		spec := segment.BatchSpec{Idempotent: true, ProducerID: pidBefore, BaseSequence: seq}
		for i := range int(rawBatchLen) {
			spec.Records = append(spec.Records, segment.Record{Timestamp: time.Now().UnixMilli(), Value: []byte(fmt.Sprintf("raw-%d", int(seq)+i))})
		}
		batch, err := segment.BuildBatch(spec)
		if err != nil {
			t.Fatalf("BuildBatch: %v", err)
		}
		return batch
	}
	retried := rawBatch(rawBatchLen)
	sendRawBatch(t, ctx, admin, rawTopic, rawBatch(0), 0)
	sendRawBatch(t, ctx, admin, rawTopic, retried, rawBatchLen)

	var cons killRunConsumer
	cons.mu.nextBefore, cons.mu.firstAfter, cons.mu.next, cons.mu.committed = map[int32]int64{}, map[int32]int64{}, map[int32]int64{}, map[int32]int64{}
	var seen seqCounts
	member := startGroupMember(t, b, "kill-member", group, topic, func(r *kgo.Record) {
		seen.add(r)
		cons.record(r)
	}, kgo.HeartbeatInterval(500*time.Millisecond), kgo.AutoCommitInterval(500*time.Millisecond), kgo.AutoCommitCallback(cons.commitDone))
	waitStableMembers(t, admin, group, 1)

	pcl, err := kgo.NewClient(
		kgo.SeedBrokers(b.Addr),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(60*time.Second),
		kgo.RetryTimeout(60*time.Second),
	)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(pcl.Close)
	var prod killRunProducer
	prod.mu.pids = map[int64]bool{}
	// The producer sleeps 10 ms every 200 records (at most 20,000 records
	// a second) except in a burst, when it fills the client's buffer so that
	// requests are in flight when the broker dies.
	var stopProducing, burst atomic.Bool
	producing := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(producing)
		for i := 0; !stopProducing.Load() && ctx.Err() == nil; i++ {
			if i%200 == 0 && !burst.Load() {
				time.Sleep(10 * time.Millisecond)
			}
			r := &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: recordValue(i, soakValueSize)}
			prod.wg.Add(1)
			pcl.Produce(ctx, r, func(r *kgo.Record, err error) {
				defer prod.wg.Done()
				prod.mu.Lock()
				defer prod.mu.Unlock()
				if err != nil {
					if prod.mu.failed++; prod.mu.firstErr == nil {
						prod.mu.firstErr = fmt.Errorf("record %d: %w", i, err)
					}
					return
				}
				prod.mu.acked = append(prod.mu.acked, ackedRecord{r.Partition, r.Offset, i})
				prod.mu.pids[r.ProducerID] = true
			})
			prod.mu.Lock()
			prod.mu.sent = i + 1
			prod.mu.Unlock()
		}
	}()

	wait := func(what string, cond func() bool) {
		t.Helper()
		if !waitUntil(ctx, cond) {
			prod.mu.Lock()
			defer prod.mu.Unlock()
			t.Fatalf("%s: %v after %v; %d records sent, %d acknowledged, %d failed (first: %v)",
				what, ctx.Err(), time.Since(start).Round(time.Millisecond), prod.mu.sent, len(prod.mu.acked), prod.mu.failed, prod.mu.firstErr)
		}
	}
	wait("producing before the kill", func() bool {
		cons.mu.Lock()
		defer cons.mu.Unlock()
		return prod.ackedCount() >= ackedKill && len(cons.mu.committed) == partitions
	})
	burst.Store(true)
	time.Sleep(30 * time.Millisecond)
	prod.mu.Lock()
	sentAtKill, ackedAtKill := prod.mu.sent, len(prod.mu.acked)
	prod.mu.Unlock()
	b.Kill(t)
	burst.Store(false)
	time.Sleep(outage)
	// No response can arrive from here until the restarted broker listens:
	// what was acknowledged so far was acknowledged before the kill.
	cons.mu.Lock()
	cons.mu.restarted = true
	committedBefore := maps.Clone(cons.mu.committed)
	nextBefore := maps.Clone(cons.mu.nextBefore)
	cons.mu.Unlock()
	ackedBefore := prod.ackedCount()
	b.Restart(t)
	t.Logf("killed after %v with %d records sent and %d acknowledged (%d by the restart); commits %v, consumer at %v",
		time.Since(start).Round(time.Millisecond), sentAtKill, ackedAtKill, ackedBefore, committedBefore, nextBefore)

	// The acknowledged commits survived the kill.
	var afterRestart map[int32]int64
	for {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		afterRestart, err = fetchCommitted(rctx, admin, group, topic, partitions)
		rcancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("OffsetFetch after the restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The retry is answered with its first offset and not stored again.
	sendRawBatch(t, ctx, admin, rawTopic, retried, rawBatchLen)
	sendRawBatch(t, ctx, admin, rawTopic, rawBatch(2*rawBatchLen), 2*rawBatchLen)
	if end := listEndOffsets(t, b, rawTopic, 1)[0]; end != 3*rawBatchLen {
		t.Errorf("%s: end offset %d after three distinct batches of %d records and one retry, want %d", rawTopic, end, rawBatchLen, 3*rawBatchLen)
	}
	for p, off := range committedBefore {
		if afterRestart[p] < off {
			t.Errorf("partition %d: committed offset %d after the restart, but a commit of %d was acknowledged before the kill", p, afterRestart[p], off)
		}
	}

	wait("producing after the restart", func() bool { return prod.ackedCount() >= ackedBefore+ackedAfter })
	stopProducing.Store(true)
	<-producing
	fctx, fcancel := context.WithTimeout(ctx, 70*time.Second)
	if err := pcl.Flush(fctx); err != nil {
		t.Errorf("producer flush: %v", err)
	}
	fcancel()
	prod.wg.Wait()
	prod.mu.Lock()
	sent, acked, failed, firstErr, pids := prod.mu.sent, prod.mu.acked, prod.mu.failed, prod.mu.firstErr, maps.Clone(prod.mu.pids)
	prod.mu.Unlock()
	t.Logf("produced for %v: %d records sent, %d acknowledged, %d failed (first: %v), producer ids %v",
		time.Since(start).Round(time.Millisecond), sent, len(acked), failed, firstErr, slices.Sorted(maps.Keys(pids)))
	if failed > 0 {
		t.Errorf("%d of %d records failed although the outage (%v) was far shorter than the delivery timeout; first: %v", failed, sent, outage, firstErr)
	}

	ends := listEndOffsets(t, b, topic, partitions)
	wait("consuming to the end offsets", func() bool {
		cons.mu.Lock()
		defer cons.mu.Unlock()
		for p, end := range ends {
			if cons.mu.next[p] < end {
				return false
			}
		}
		return true
	})
	member.leave()

	// (a) Each record at most once, in send order; every acknowledged one
	// where it was acknowledged.
	logs := readPartitions(t, b, topic, ends)
	inLog := make([]bool, sent)
	logPids := map[int64]bool{}
	for p, recs := range logs {
		last := -1
		for off, r := range recs {
			i, ok := seqOf(r.Value)
			if !ok || i >= sent || i%partitions != int(p) {
				t.Fatalf("partition %d offset %d: value %.40q is not a record sent to it", p, off, r.Value)
			}
			if inLog[i] {
				t.Errorf("partition %d offset %d: record %d is in the log twice", p, off, i)
			} else if i <= last {
				t.Errorf("partition %d offset %d: record %d after record %d; send order not kept", p, off, i, last)
			}
			inLog[i] = true
			last = max(last, i)
			if r.ProducerID < 0 {
				t.Fatalf("partition %d offset %d: no producer id; the producer was not idempotent", p, off)
			}
			logPids[r.ProducerID] = true
		}
	}
	lost := 0
	for _, a := range acked {
		recs := logs[a.partition]
		if a.offset >= int64(len(recs)) || !slices.Equal(recs[a.offset].Value, recordValue(a.i, soakValueSize)) {
			if lost++; lost <= 5 {
				t.Errorf("record %d acknowledged at %d/%d is not there (partition ends at %d)", a.i, a.partition, a.offset, len(recs))
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged records lost or moved", lost, len(acked))
	}
	t.Logf("log: end offsets %v, %d records, producer ids %v", ends, countTrue(inLog), slices.Sorted(maps.Keys(logPids)))

	// (b) The member resumed between its acknowledged commits and its
	// position, and consumed everything.
	cons.mu.Lock()
	firstAfter := maps.Clone(cons.mu.firstAfter)
	commitErrs := slices.Clone(cons.mu.commitErrs)
	cons.mu.Unlock()
	for p := range int32(partitions) {
		first, ok := firstAfter[p]
		switch {
		case !ok:
			t.Errorf("partition %d: nothing consumed after the restart", p)
		case first < max(committedBefore[p], 0):
			t.Errorf("partition %d: first record after the restart at offset %d, before the commit of %d acknowledged before the kill", p, first, committedBefore[p])
		case first > nextBefore[p]:
			t.Errorf("partition %d: first record after the restart at offset %d, but only up to %d had been consumed: records skipped", p, first, nextBefore[p])
		}
	}
	t.Logf("after the restart the member resumed at %v (commits acknowledged before the kill %v, consumed up to %v); %d commit errors (first: %v)",
		firstAfter, committedBefore, nextBefore, len(commitErrs), firstOf(commitErrs))
	missed := 0
	for i, ok := range inLog {
		if ok && seen.count(i) == 0 {
			if missed++; missed <= 5 {
				t.Errorf("record %d is in the log but was never consumed", i)
			}
		}
	}
	seen.mu.Lock()
	t.Logf("consumer: %d distinct records, %d read again, %d missed; %d fetch errors (first: %v)",
		seen.mu.distinct, seen.mu.dups, missed, len(member.fetchErrors()), firstOf(member.fetchErrors()))
	seen.mu.Unlock()

	// (c) Producer ids after the restart are new.
	before := maps.Clone(logPids)
	maps.Copy(before, pids)
	before[pidBefore] = true
	pidAfter := initProducerID(t, ctx, admin)
	ncl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	defer ncl.Close()
	r := &kgo.Record{Topic: topic, Partition: 0, Value: []byte("new producer")}
	if err := ncl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatalf("new producer after the restart: %v", err)
	}
	t.Logf("producer ids: InitProducerId %d before the kill, %d after; new producer %d; first producer and log %v",
		pidBefore, pidAfter, r.ProducerID, slices.Sorted(maps.Keys(before)))
	if before[pidAfter] {
		t.Errorf("InitProducerId after the restart returned producer id %d, already handed out before the kill", pidAfter)
	}
	if before[r.ProducerID] || r.ProducerID == pidAfter || r.ProducerID < 0 {
		t.Errorf("new producer after the restart got producer id %d; ids in use before %v, InitProducerId after %d", r.ProducerID, slices.Sorted(maps.Keys(before)), pidAfter)
	}
	b.RequireAlive(t)
}

// rawBatchLen is the number of records in each hand-built batch.
const rawBatchLen = 10

// sendRawBatch produces batch to partition 0 of topic with acks all,
// retrying retriable errors until ctx ends, and fails the test unless it is
// accepted at wantOffset.
func sendRawBatch(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, batch []byte, wantOffset int64) {
	t.Helper()
	h, err := segment.ParseHeader(batch)
	if err != nil {
		t.Fatalf("ParseHeader: %v", err)
	}
	for {
		req := kmsg.NewPtrProduceRequest()
		req.Acks = -1
		req.TimeoutMillis = 10000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && (len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1) {
			t.Fatalf("produce response: %+v, want one topic with one partition", resp.Topics)
		}
		if err == nil {
			rp := resp.Topics[0].Partitions[0]
			if err = kerr.ErrorForCode(rp.ErrorCode); err == nil {
				if rp.BaseOffset != wantOffset {
					t.Errorf("%s: batch of producer %d with sequence %d answered at offset %d, want %d", topic, h.ProducerID, h.BaseSequence, rp.BaseOffset, wantOffset)
				}
				return
			}
		}
		if !kerr.IsRetriable(err) || ctx.Err() != nil {
			t.Fatalf("%s: batch of producer %d with sequence %d: %v", topic, h.ProducerID, h.BaseSequence, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

func firstOf(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}
