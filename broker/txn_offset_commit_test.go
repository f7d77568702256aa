package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/group"
	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/segment/poll"
)

// rawTxnProducer is a transactional producer driven with raw requests:
// InitProducerId, AddOffsetsToTxn, TxnOffsetCommit, EndTxn.
type rawTxnProducer struct {
	t     *testing.T
	cl    *kgo.Client
	id    string
	pid   int64
	epoch int16
}

// retriableTxnCode reports whether a transaction API answer is one a
// client retries.
func retriableTxnCode(code int16) bool {
	switch code {
	case kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorLoadInProgress.Code, kerr.NotCoordinator.Code, kerr.ConcurrentTransactions.Code:
		return true
	}
	return false
}

// retryTxn runs call until it answers a code that is not retriable, for at
// most 30 s, and returns that code.
func retryTxn(t *testing.T, what string, call func() int16) int16 {
	t.Helper()
	var code int16
	start := time.Now()
	if !poll.For(30*time.Second, func() bool { code = call(); return !retriableTxnCode(code) }) {
		t.Fatalf("%s: still %v after 30s", what, kerr.ErrorForCode(code))
	}
	if d := time.Since(start); d > time.Second {
		t.Logf("%s answered %v after %v", what, kerr.ErrorForCode(code), d)
	}
	return code
}

func initTxnProducer(t *testing.T, s *Server, id string) *rawTxnProducer {
	t.Helper()
	p := &rawTxnProducer{t: t, cl: newClient(t, s), id: id}
	code := retryTxn(t, "InitProducerId "+id, func() int16 {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &p.id
		req.TransactionTimeoutMillis = 60000
		resp, err := req.RequestWith(testCtx(t), p.cl)
		if err != nil {
			t.Fatal(err)
		}
		p.pid, p.epoch = resp.ProducerID, resp.ProducerEpoch
		return resp.ErrorCode
	})
	if code != 0 {
		t.Fatalf("InitProducerId %s: %v", id, kerr.ErrorForCode(code))
	}
	return p
}

func (p *rawTxnProducer) addOffsets(groupID string) {
	p.t.Helper()
	code := retryTxn(p.t, "AddOffsetsToTxn "+p.id, func() int16 {
		req := kmsg.NewPtrAddOffsetsToTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group = p.id, p.pid, p.epoch, groupID
		resp, err := req.RequestWith(testCtx(p.t), p.cl)
		if err != nil {
			p.t.Fatal(err)
		}
		return resp.ErrorCode
	})
	if code != 0 {
		p.t.Fatalf("AddOffsetsToTxn %s: %v", p.id, kerr.ErrorForCode(code))
	}
}

// commitOffsets sends TxnOffsetCommit at the newest version client and
// broker share (kgo sets it: v4 today) and returns the codes per topic
// and partition.
func (p *rawTxnProducer) commitOffsets(groupID string, offsets map[string]map[int32]int64) map[string]map[int32]int16 {
	p.t.Helper()
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = p.id, groupID, p.pid, p.epoch, -1
	for topic, ps := range offsets {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = topic
		for part, off := range ps {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = part, off
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(testCtx(p.t), p.cl)
	if err != nil {
		p.t.Fatal(err)
	}
	out := map[string]map[int32]int16{}
	for _, rt := range resp.Topics {
		out[rt.Topic] = map[int32]int16{}
		for _, rp := range rt.Partitions {
			out[rt.Topic][rp.Partition] = rp.ErrorCode
		}
	}
	return out
}

// mustCommitOffsets is commitOffsets that fails the test unless every
// partition is committed.
func (p *rawTxnProducer) mustCommitOffsets(groupID, topic string, offsets map[int32]int64) {
	p.t.Helper()
	for tp, codes := range p.commitOffsets(groupID, map[string]map[int32]int64{topic: offsets}) {
		for part, code := range codes {
			if code != 0 {
				p.t.Fatalf("TxnOffsetCommit of %s %s/%d: %v", p.id, tp, part, kerr.ErrorForCode(code))
			}
		}
	}
}

func (p *rawTxnProducer) end(commit bool) {
	p.t.Helper()
	code := retryTxn(p.t, "EndTxn "+p.id, func() int16 {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = p.id, p.pid, p.epoch, commit
		resp, err := req.RequestWith(testCtx(p.t), p.cl)
		if err != nil {
			p.t.Fatal(err)
		}
		return resp.ErrorCode
	})
	if code != 0 {
		p.t.Fatalf("EndTxn %s (commit %v): %v", p.id, commit, kerr.ErrorForCode(code))
	}
}

// txnOffsetFetch is OffsetFetch v7 of one partition, with require_stable
// as given.
func txnOffsetFetch(t *testing.T, cl *kgo.Client, groupID, topic string, partition int32, stable bool) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 7
	req.Group = groupID
	req.RequireStable = stable
	req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: topic, Partitions: []int32{partition}}}
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		return -1, resp.ErrorCode
	}
	p := resp.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

// waitStableOffset polls OffsetFetch with require_stable until it answers
// want (the markers are written after EndTxn returns, as in Kafka).
func waitStableOffset(t *testing.T, cl *kgo.Client, groupID, topic string, partition int32, want int64) {
	t.Helper()
	var off int64
	var code int16
	start := time.Now()
	if !poll.For(30*time.Second, func() bool {
		off, code = txnOffsetFetch(t, cl, groupID, topic, partition, true)
		return code == 0 && off == want
	}) {
		t.Fatalf("%s %s/%d: require_stable answers %d %v after 30s, want %d", groupID, topic, partition, off, kerr.ErrorForCode(code), want)
	}
	t.Logf("%s %s/%d stable at %d after %v", groupID, topic, partition, want, time.Since(start))
}

// TestTxnOffsetCommitThroughServer runs a transaction's offset commit over
// the wire against the transaction coordinator: the offsets are written to
// the group's partition of __consumer_offsets as a transactional batch
// that the partition's producer state records, are unstable until EndTxn
// has its markers written, and are committed then. A producer whose
// transaction does not hold the group's partition is refused
// (KIP-890 verification).
func TestTxnOffsetCommitThroughServer(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	createTopic(t, cl, "in", 2, nil)

	p := initTxnProducer(t, s, "etl")
	p.addOffsets("g")
	got := p.commitOffsets("g", map[string]map[int32]int64{"in": {0: 10, 1: 11}, "missing": {0: 1}})
	for topic, codes := range got {
		for part, code := range codes {
			want := int16(0)
			if topic == "missing" {
				want = kerr.UnknownTopicOrPartition.Code
			}
			if code != want {
				t.Errorf("%s/%d: got %v, want %v", topic, part, kerr.ErrorForCode(code), kerr.ErrorForCode(want))
			}
		}
	}

	part := int32(s.groups.PartitionFor("g"))
	lp := s.topic(group.Topic).local(part)
	if e, _, ok := lp.producers.Producer(p.pid); !ok || e != p.epoch {
		t.Errorf("producer state of %s/%d: got epoch %d, known %v; want epoch %d", group.Topic, part, e, ok, p.epoch)
	}
	if open, _, _ := lp.producers.InTransaction(p.pid); !open {
		t.Errorf("producer state of %s/%d: producer %d has no open transaction", group.Topic, part, p.pid)
	}
	if off, code := txnOffsetFetch(t, cl, "g", "in", 1, false); off != -1 || code != 0 {
		t.Errorf("before the marker: got %d %v, want -1 and no error", off, kerr.ErrorForCode(code))
	}
	if _, code := txnOffsetFetch(t, cl, "g", "in", 1, true); code != kerr.UnstableOffsetCommit.Code {
		t.Errorf("before the marker, require_stable: got %v, want UNSTABLE_OFFSET_COMMIT", kerr.ErrorForCode(code))
	}

	// Another producer, whose transaction never added the group: v4
	// (KIP-890) answers TRANSACTION_ABORTABLE; TestTxnAbortableByVersion
	// has v0-3's INVALID_TXN_STATE.
	other := initTxnProducer(t, s, "other")
	if code := other.commitOffsets("g", map[string]map[int32]int64{"in": {0: 99}})["in"][0]; code != kerr.TransactionAbortable.Code {
		t.Errorf("producer without AddOffsetsToTxn: got %v, want TRANSACTION_ABORTABLE", kerr.ErrorForCode(code))
	}

	p.end(true)
	waitStableOffset(t, cl, "g", "in", 0, 10)
	waitStableOffset(t, cl, "g", "in", 1, 11)
	if open, _, _ := lp.producers.InTransaction(p.pid); open {
		t.Errorf("producer %d's transaction still open in %s/%d after its marker", p.pid, group.Topic, part)
	}
}

// TestTxnOffsetsCompletedByMarkers: transactional offsets in
// __consumer_offsets completed by the transaction coordinator's markers: a
// COMMIT makes them visible, an ABORT drops them, an open transaction
// holds the partition's last stable offset back; a restart replays the log
// with its control batches to the same offsets and keeps the open
// transaction's pending until EndTxn after the restart completes it.
func TestTxnOffsetsCompletedByMarkers(t *testing.T) {
	cfg := testConfig(t, nil)
	s := startServerConfig(t, cfg)
	cl := newClient(t, s)
	createTopic(t, cl, "in", 1, nil)
	part := int32(s.groups.PartitionFor("g"))

	a := initTxnProducer(t, s, "a")
	a.addOffsets("g")
	a.mustCommitOffsets("g", "in", map[int32]int64{0: 10})
	a.end(true)
	waitStableOffset(t, cl, "g", "in", 0, 10)

	b := initTxnProducer(t, s, "b")
	b.addOffsets("g")
	b.mustCommitOffsets("g", "in", map[int32]int64{0: 50})
	b.end(false)
	waitStableOffset(t, cl, "g", "in", 0, 10) // the abort marker dropped 50

	hwBefore := latestOffset(t, cl, group.Topic, part, 0)
	c := initTxnProducer(t, s, "c")
	c.addOffsets("g")
	c.mustCommitOffsets("g", "in", map[int32]int64{0: 70})
	if lso, hw := latestOffset(t, cl, group.Topic, part, 1), latestOffset(t, cl, group.Topic, part, 0); lso != hwBefore || hw <= lso {
		t.Errorf("open transaction in %s/%d: last stable offset %d, high watermark %d; want the LSO at %d, below the high watermark", group.Topic, part, lso, hw, hwBefore)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	s = startServerConfig(t, cfg)
	cl = newClient(t, s)
	var off int64
	var code int16
	if !poll.For(30*time.Second, func() bool {
		off, code = txnOffsetFetch(t, cl, "g", "in", 0, false)
		return code == 0
	}) {
		t.Fatalf("after restart: OffsetFetch answers %v after 30s", kerr.ErrorForCode(code))
	}
	if off != 10 {
		t.Errorf("after restart: got %d, want 10", off)
	}
	if _, code := txnOffsetFetch(t, cl, "g", "in", 0, true); code != kerr.UnstableOffsetCommit.Code {
		t.Errorf("after restart, require_stable with c's transaction open: got %v, want UNSTABLE_OFFSET_COMMIT", kerr.ErrorForCode(code))
	}
	c.cl = cl
	c.end(true)
	waitStableOffset(t, cl, "g", "in", 0, 70)
}

// offsetsInLog returns the committed offsets of group/topic/partition that
// records of l hold (plain and transactional), in log order.
func offsetsInLog(t *testing.T, l *segment.Log, groupID, topic string, partition int32) []int64 {
	t.Helper()
	var out []int64
	off, end := l.LogStartOffset(), l.LogEndOffset()
	for off < end {
		buf, err := l.ReadCopy(off, 1<<20, end)
		if err != nil {
			t.Fatal(err)
		}
		if len(buf) == 0 {
			break
		}
		err = segment.SplitBatches(buf, func(h segment.Header, batch []byte) error {
			off = h.NextOffset()
			if h.Control() {
				return nil
			}
			it, err := segment.NewRecordIter(batch, segment.DefaultMaxDecompressed)
			if err != nil {
				return err
			}
			for {
				rec, ok, err := it.Next()
				if err != nil || !ok {
					return err
				}
				var k kmsg.OffsetCommitKey
				if len(rec.Key) < 2 || rec.Key[1] > 1 || k.ReadFrom(rec.Key) != nil || rec.Value == nil {
					continue // group metadata, tombstones
				}
				if k.Group != groupID || k.Topic != topic || k.Partition != partition {
					continue
				}
				var v kmsg.OffsetCommitValue
				if err := v.ReadFrom(rec.Value); err != nil {
					return err
				}
				out = append(out, v.Offset)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestTxnOffsetsCompacted: __consumer_offsets holding a plain commit, a
// committed, an aborted and an open transaction's offsets of one key,
// cleaned by the broker's log cleaner: the aborted transaction's record is
// removed, the committed one supersedes the older plain commit (as in
// Kafka, committed transactional records enter the offset map), the open
// one is kept (the cleaner stops at the last stable offset), and a
// restart loads the committed transaction's offset with the open one
// pending; once it commits, a restart loads its offset.
func TestTxnOffsetsCompacted(t *testing.T) {
	cfg := testConfig(t, map[string]string{
		"offsets.topic.num.partitions":    "1",
		"offsets.topic.segment.bytes":     "1024",
		"log.cleaner.backoff.ms":          "50",
		"log.cleaner.min.cleanable.ratio": "0.01",
	})
	s := startServerConfig(t, cfg)
	cl := newClient(t, s)
	createTopic(t, cl, "in", 2, nil)
	alter(t, cl, group.Topic, map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "0", "segment.bytes": "1024"})
	l := s.topic(group.Topic).local(0).log
	fillers := 0
	fill := func(n int) { // plain commits of another group roll segments
		for range n {
			simpleCommit(t, cl, "filler", "in", 2, int64(fillers))
			fillers++
		}
	}

	simpleCommit(t, cl, "g", "in", 1, 5)
	a := initTxnProducer(t, s, "a")
	a.addOffsets("g")
	a.mustCommitOffsets("g", "in", map[int32]int64{0: 10})
	a.end(true)
	waitStableOffset(t, cl, "g", "in", 0, 10)
	b := initTxnProducer(t, s, "b")
	b.addOffsets("g")
	b.mustCommitOffsets("g", "in", map[int32]int64{0: 20})
	b.end(false)
	waitStableOffset(t, cl, "g", "in", 0, 10)
	fill(20)
	c := initTxnProducer(t, s, "c")
	c.addOffsets("g")
	c.mustCommitOffsets("g", "in", map[int32]int64{0: 30})
	if got := offsetsInLog(t, l, "g", "in", 0); len(got) != 4 {
		t.Fatalf("records of g/in/0 before cleaning: %v, want [5 10 20 30]", got)
	}

	start := time.Now()
	var got []int64
	if !poll.For(time.Minute, func() bool {
		fill(1)
		s.cleaner.kick()
		got = offsetsInLog(t, l, "g", "in", 0)
		return fmt.Sprint(got) == "[10 30]"
	}) {
		t.Fatalf("records of g/in/0 after a minute of cleaning: %v, want [10 30]: the plain 5 superseded by the committed 10, the aborted 20 gone", got)
	}
	t.Logf("aborted record cleaned after %v (%d filler commits), cleaner checkpoint %d, log end %d; records of the key %v",
		time.Since(start), fillers, l.CleanerCheckpoint(), l.LogEndOffset(), got)

	restart := func() {
		t.Helper()
		if err := s.Shutdown(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		s = startServerConfig(t, cfg)
		cl = newClient(t, s)
		l = s.topic(group.Topic).local(0).log
	}
	restart()
	var off int64
	var code int16
	if !poll.For(30*time.Second, func() bool { off, code = txnOffsetFetch(t, cl, "g", "in", 0, false); return code == 0 }) {
		t.Fatalf("after restart: OffsetFetch answers %v after 30s", kerr.ErrorForCode(code))
	}
	if off != 10 {
		t.Errorf("after cleaning and a restart: got %d, want 10", off)
	}
	if _, code := txnOffsetFetch(t, cl, "g", "in", 0, true); code != kerr.UnstableOffsetCommit.Code {
		t.Errorf("after cleaning and a restart, require_stable with c open: got %v, want UNSTABLE_OFFSET_COMMIT", kerr.ErrorForCode(code))
	}
	c.cl = cl
	c.end(true)
	waitStableOffset(t, cl, "g", "in", 0, 30)
	fill(20)
	s.cleaner.kick()
	restart()
	if !poll.For(30*time.Second, func() bool { off, code = txnOffsetFetch(t, cl, "g", "in", 0, true); return code == 0 }) {
		t.Fatalf("after the second restart: OffsetFetch answers %v after 30s", kerr.ErrorForCode(code))
	}
	if off != 30 {
		t.Errorf("after the second restart: got %d, want 30", off)
	}
}
