package share

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratastream/strata/segment/poll"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// failingWrites is a MemPersister whose writes fail while fail is set.
type failingWrites struct {
	*MemPersister
	fail atomic.Bool
}

func (f *failingWrites) WriteShareGroupState(ctx context.Context, req *kmsg.WriteShareGroupStateRequest) (*kmsg.WriteShareGroupStateResponse, error) {
	if f.fail.Load() {
		return nil, errors.New("share coordinator gone")
	}
	return f.MemPersister.WriteShareGroupState(ctx, req)
}

// onWarn is a slog handler that runs fn on every warning.
type onWarn struct{ fn func() }

func (h onWarn) Enabled(context.Context, slog.Level) bool { return true }
func (h onWarn) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn {
		h.fn()
	}
	return nil
}
func (h onWarn) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h onWarn) WithGroup(string) slog.Handler      { return h }

// TestManagerAcknowledgeUndoKeepsOthers: an acknowledgement whose write
// fails is undone before anything else touches the partition. Member a
// releases its records 0-4 and the write fails; member b's fetch, run
// the moment the manager logs the failure, must not get them (they go
// back to a) and must keep what it gets: b accepts all of it, a accepts
// 0-4. An undo after b's acquisition would hand 0-4 back to a while b
// holds them and forget b's 5-9.
func TestManagerAcknowledgeUndoKeepsOthers(t *testing.T) {
	fp := &failingWrites{MemPersister: NewMemPersister()}
	k := Key{Group: "g", TopicID: [16]byte{1}, Partition: 0}
	var m *Manager
	var p *Partition
	var bGot atomic.Pointer[[]AcquiredRange]
	cfg := DefaultConfig()
	cfg.Persister = fp
	cfg.Logger = slog.New(onWarn{func() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			got := p.Acquire("b", batches(0, 10, 10), 100, true, m.Now(), m.Limits(k.Group))
			bGot.Store(&got)
		}()
		// b's fetch finishes here only if the partition is free while
		// the failed acknowledgement is not yet undone.
		poll.For(500*time.Millisecond, func() bool {
			select {
			case <-done:
				return true
			default:
				return false
			}
		})
	}})
	var err error
	if m, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	if p, err = m.Partition(ctx, k, 0, func(GroupConfig) (int64, error) { return 0, nil }); err != nil {
		t.Fatal(err)
	}
	if got := p.Acquire("a", batches(0, 5, 5), 100, true, m.Now(), m.Limits(k.Group)); len(got) != 1 || got[0].First != 0 || got[0].Last != 4 {
		t.Fatalf("a acquired %v, want 0-4", got)
	}
	fp.fail.Store(true)
	if code := m.Acknowledge(ctx, k, p, "a", []AckBatch{{0, 4, []int8{AckRelease}}}); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("a's release with the write failing: code %d, want COORDINATOR_NOT_AVAILABLE", code)
	}
	fp.fail.Store(false)
	poll.Until(t, 10*time.Second, "b's fetch done", func() bool { return bGot.Load() != nil })
	for _, r := range *bGot.Load() {
		if r.First < 5 {
			t.Errorf("b acquired %d-%d, which a still holds", r.First, r.Last)
		}
		if code := m.Acknowledge(ctx, k, p, "b", []AckBatch{{r.First, r.Last, []int8{AckAccept}}}); code != 0 {
			t.Errorf("b's accept of %d-%d: code %d", r.First, r.Last, code)
		}
	}
	if code := m.Acknowledge(ctx, k, p, "a", []AckBatch{{0, 4, []int8{AckAccept}}}); code != 0 {
		t.Errorf("a's accept of 0-4 after its release was undone: code %d", code)
	}
}

// TestManagerSweepWritesUnsavedAgain: a change no request waits for (a
// lock expiry archiving records at the delivery limit) whose write
// fails is written again by the sweeper once the share coordinator
// answers, so the window finished here is finished there too.
func TestManagerSweepWritesUnsavedAgain(t *testing.T) {
	fp := &failingWrites{MemPersister: NewMemPersister()}
	var clock atomic.Int64
	clock.Store(time.Unix(1000, 0).UnixNano())
	cfg := DefaultConfig()
	cfg.Persister = fp
	cfg.Now = func() time.Time { return time.Unix(0, clock.Load()) }
	cfg.DeliveryCountLimit = 1
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	k := Key{Group: "g", TopicID: [16]byte{1}, Partition: 0}
	p, err := m.Partition(ctx, k, 0, func(GroupConfig) (int64, error) { return 0, nil })
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Acquire("a", batches(0, 5, 5), 100, true, m.Now(), m.Limits(k.Group)); len(got) != 1 || got[0].Last != 4 {
		t.Fatalf("a acquired %v, want 0-4", got)
	}
	persistedStart := func() int64 {
		req := kmsg.NewPtrReadShareGroupStateRequest()
		req.GroupID = k.Group
		rt := kmsg.NewReadShareGroupStateRequestTopic()
		rt.TopicID = k.TopicID
		rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
		rp.Partition = k.Partition // leader epoch 0, the partition's
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := fp.MemPersister.ReadShareGroupState(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		got := resp.Topics[0].Partitions[0]
		if got.ErrorCode != 0 {
			t.Fatalf("reading the persisted state: %v", kerr.ErrorForCode(got.ErrorCode))
		}
		return got.StartOffset
	}

	fp.fail.Store(true)
	clock.Add(int64(m.Limits(k.Group).Lock + time.Second))
	m.Sweep() // the locks expire: 0-4 archived at the limit, the write fails
	if start, _ := p.Offsets(); start != 5 {
		t.Fatalf("start offset after the expiry: %d, want 5", start)
	}
	if got := persistedStart(); got != 0 {
		t.Fatalf("persisted start offset with writes failing: %d, want 0", got)
	}
	fp.fail.Store(false)
	clock.Add(int64(persistRetry))
	m.Sweep()
	if got := persistedStart(); got != 5 {
		t.Fatalf("persisted start offset after the share coordinator answers again: %d, want 5", got)
	}
}

// TestManagerDescribe: Describe leaves out share partitions that are not
// loaded, reports a loaded one's window, counts and totals, keeps a stale
// one that holds acquired records and leaves it out once it holds none.
func TestManagerDescribe(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Persister = NewMemPersister()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	k := Key{Group: "g", TopicID: [16]byte{1}, Partition: 0}
	if got := m.Describe("g", nil); len(got) != 0 {
		t.Fatalf("nothing loaded: got %v", got)
	}
	ctx := context.Background()
	p, err := m.Partition(ctx, k, 0, func(GroupConfig) (int64, error) { return 3, nil })
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Acquire("a", batches(3, 8, 5), 100, true, m.Now(), m.Limits(k.Group)); len(got) != 1 {
		t.Fatalf("acquired %v, want 3-7", got)
	}
	want := PartitionState{Start: 3, End: 8, Counts: Counts{Acquired: 5}, Totals: Totals{Acquired: 5}}
	if got := m.Describe("g", nil); len(got) != 1 || got[k] != want {
		t.Errorf("loaded: got %v, want %v", got, want)
	}
	if got := m.Describe("other", nil); len(got) != 0 {
		t.Errorf("another group: got %v", got)
	}
	if got := m.Describe("g", func(Key) bool { return false }); len(got) != 0 {
		t.Errorf("none selected: got %v", got)
	}
	m.MarkStale("g")
	if got := m.Describe("g", nil); got[k] != want {
		t.Errorf("stale with records acquired: got %v, want %v", got, want)
	}
	if code := m.Acknowledge(ctx, k, p, "a", []AckBatch{{3, 7, []int8{AckRelease}}}); code != 0 {
		t.Fatalf("release: code %d", code)
	}
	if got := m.Describe("g", nil); len(got) != 0 {
		t.Errorf("stale without records acquired: got %v, want nothing", got)
	}
}
