package share

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/segment/poll"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// deadLetterSink is a DeadLetterFunc that fails its first failures
// calls and records the letters of the others.
type deadLetterSink struct {
	mu       sync.Mutex
	failures int
	calls    int
	written  []DeadLetter
}

var errSinkDown = errors.New("sink down")

func (s *deadLetterSink) write(_ context.Context, _ Key, letters []DeadLetter) ([]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.calls <= s.failures {
		return nil, errSinkDown
	}
	var out []int64
	for _, d := range letters {
		s.written = append(s.written, d)
		out = append(out, d.Offset)
	}
	return out, nil
}

func (s *deadLetterSink) letters() []DeadLetter {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.written)
}

// newDeadLetterManager is a Manager over mp whose groups have a
// dead-letter topic, a delivery limit of 2, and sink as the writer.
func newDeadLetterManager(t *testing.T, mp *MemPersister, sink DeadLetterFunc) *Manager {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Persister = mp
	cfg.DeliveryCountLimit = 2
	cfg.Defaults.AutoOffsetReset = ResetEarliest
	cfg.GroupConfig = func(string) GroupConfig { return GroupConfig{DeadLetterTopic: "dlq"} }
	cfg.DeadLetter = sink
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// persistedStates returns the persisted state of offsets of k.
func persistedStates(t *testing.T, mp *MemPersister, k Key) (int64, map[int64]RecordState) {
	t.Helper()
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = k.Group
	rt := kmsg.NewReadShareGroupStateRequestTopic()
	rt.TopicID = k.TopicID
	rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
	rp.Partition = k.Partition
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := mp.ReadShareGroupState(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	got := resp.Topics[0].Partitions[0]
	out := map[int64]RecordState{}
	for _, b := range got.StateBatches {
		for o := b.FirstOffset; o <= b.LastOffset; o++ {
			out[o] = RecordState(b.DeliveryState)
		}
	}
	return got.StartOffset, out
}

var dlqKey = Key{Group: "g", TopicID: [16]byte{1}, Partition: 0}

func atZero(GroupConfig) (int64, error) { return 0, nil }

// TestDeadLetterArchivedAfterCopy: a rejected record is persisted
// Archiving (state 3) before the acknowledgement's answer, holds the start
// offset while the writer fails, and is archived and persisted once a
// copy is written; a record at the delivery limit likewise.
func TestDeadLetterArchivedAfterCopy(t *testing.T) {
	mp := NewMemPersister()
	sink := &deadLetterSink{failures: 3}
	m := newDeadLetterManager(t, mp, sink.write)
	p, err := m.Partition(context.Background(), dlqKey, 0, atZero)
	if err != nil {
		t.Fatal(err)
	}
	now := m.Now()
	l := m.Limits("g")
	if !l.DeadLetter {
		t.Fatal("Limits.DeadLetter false for a group with a dead-letter topic")
	}
	if got := p.Acquire("a", batches(0, 3, 3), 10, false, now, l); len(got) != 1 {
		t.Fatalf("acquired %v", got)
	}
	if code := m.Acknowledge(context.Background(), dlqKey, p, "a", []AckBatch{{0, 0, []int8{AckReject}}, {1, 1, []int8{AckAccept}}, {2, 2, []int8{AckRelease}}}); code != 0 {
		t.Fatalf("ack: %d", code)
	}
	// The answer came after the write that has 0 Archiving. It holds the
	// start offset until its copy is written.
	if start, st := persistedStates(t, mp, dlqKey); start != 0 || st[0] != Archiving || st[1] != Acknowledged {
		t.Fatalf("persisted start %d states %v, want 0 with 0 archiving, 1 acknowledged", start, st)
	}
	// 2 is delivered again and released at the limit.
	if got := p.Acquire("a", batches(0, 3, 3), 10, false, now, l); !slices.Equal(got, []AcquiredRange{{2, 2, 2}}) {
		t.Fatalf("second acquisition %v", got)
	}
	if code := m.Acknowledge(context.Background(), dlqKey, p, "a", []AckBatch{{2, 2, []int8{AckRelease}}}); code != 0 {
		t.Fatalf("release: %d", code)
	}
	if !poll.For(10*time.Second, func() bool {
		start, _ := p.Offsets()
		return start == 3
	}) {
		t.Fatalf("start offset not past the dead letters: %+v", p.Counts())
	}
	want := []DeadLetter{{Offset: 0, DeliveryCount: 1, Rejected: true}, {Offset: 2, DeliveryCount: 2}}
	if got := sink.letters(); !slices.Equal(got, want) {
		t.Errorf("letters written %v, want %v", got, want)
	}
	if !poll.For(10*time.Second, func() bool { start, _ := persistedStates(t, mp, dlqKey); return start == 3 }) {
		t.Error("the archived window was not persisted")
	}
}

// TestDeadLetterRetriedByNextLeader: records persisted Archiving by a
// leader whose copies never got written are copied by the next one,
// which reads them back as Archiving (rejected below the limit).
func TestDeadLetterRetriedByNextLeader(t *testing.T) {
	mp := NewMemPersister()
	down := &deadLetterSink{failures: 1 << 30}
	m := newDeadLetterManager(t, mp, down.write)
	p, err := m.Partition(context.Background(), dlqKey, 0, atZero)
	if err != nil {
		t.Fatal(err)
	}
	l := m.Limits("g")
	p.Acquire("a", batches(0, 2, 2), 10, false, m.Now(), l)
	if code := m.Acknowledge(context.Background(), dlqKey, p, "a", []AckBatch{{0, 1, []int8{AckReject}}}); code != 0 {
		t.Fatalf("ack: %d", code)
	}
	m.Close()

	sink := &deadLetterSink{}
	next := newDeadLetterManager(t, mp, sink.write)
	p2, err := next.Partition(context.Background(), dlqKey, 1, atZero)
	if err != nil {
		t.Fatal(err)
	}
	if !poll.For(10*time.Second, func() bool { start, _ := p2.Offsets(); return start == 2 }) {
		t.Fatalf("the next leader did not archive the dead letters: %+v", p2.Counts())
	}
	want := []DeadLetter{{Offset: 0, DeliveryCount: 1, Rejected: true}, {Offset: 1, DeliveryCount: 1, Rejected: true}}
	if got := sink.letters(); !slices.Equal(got, want) {
		t.Errorf("letters written %v, want %v", got, want)
	}
}

// TestPartitionArchivesWithoutDeadLetter: without a dead-letter topic a
// rejected record is Archived at once, as before.
func TestPartitionArchivesWithoutDeadLetter(t *testing.T) {
	p := NewPartition(0)
	now := time.Unix(1000, 0)
	p.Acquire("a", batches(0, 1, 1), 10, false, now, testLimits)
	if _, code := p.Acknowledge("a", []AckBatch{{0, 0, []int8{AckReject}}}, now, testLimits); code != 0 {
		t.Fatalf("ack: %d", code)
	}
	if start, _ := p.Offsets(); start != 1 || len(p.DeadLetters(10, testLimits)) != 0 {
		t.Fatalf("start %d, dead letters %v", start, p.DeadLetters(10, testLimits))
	}
}
