package replica

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/broker/producer"
	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/segment"
)

// replicaTestPartition opens a partition log in a temporary directory,
// with its replication state on broker 1, and appends, for each (epoch,
// count) pair in order, count one-record batches written at that leader
// epoch.
func replicaTestPartition(t *testing.T, epochs ...[2]int) *Partition {
	t.Helper()
	dir := t.TempDir()
	l, err := segment.Open(dir, segment.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	app := &testAppender{dir: dir, log: l, producers: producer.NewStateManager(0)}
	p := NewPartition("t", coord.TopicID{}, 0, 1 /* self */, l, app)
	off := int64(0)
	for _, e := range epochs {
		for i := 0; i < e[1]; i++ {
			b, err := segment.BuildBatch(segment.BatchSpec{BaseOffset: off, PartitionLeaderEpoch: int32(e[0]),
				Records: []segment.Record{{Timestamp: 1, Value: []byte("v")}}})
			if err != nil {
				t.Fatal(err)
			}
			if err := app.AppendReplicatedLocked(b); err != nil {
				t.Fatal(err)
			}
			off++
		}
	}
	return p
}

// testAppender is the broker's side of a test partition: an append lock,
// and producer state kept as the broker keeps it.
type testAppender struct {
	sync.Mutex
	dir       string
	log       *segment.Log
	producers *producer.StateManager
	remote    RemoteState // what RemoteStateAt answers
}

func (a *testAppender) AppendReplicatedLocked(recs []byte) error {
	if _, err := a.log.AppendReplicated(recs); err != nil {
		return err
	}
	for off := 0; off < len(recs); {
		h, err := segment.ParseHeader(recs[off:])
		if err != nil {
			return err
		}
		if h.ProducerID >= 0 && !h.Control() {
			a.producers.Update(h, h.BaseOffset)
		}
		off += h.Size()
	}
	return nil
}

func (a *testAppender) ReloadProducersLocked() error {
	end := a.log.LogEndOffset()
	// As the broker does for a tiered partition: producers whose last
	// batches are below the local log start are kept.
	_, err := a.producers.LoadRetaining(a.dir, a.log.LogStartOffset(), end, 0, func(from int64) ([]byte, error) {
		return a.log.ReadCopy(from, 1<<20, end)
	})
	return err
}

func (a *testAppender) RemoteStateAt(context.Context, int64) (RemoteState, error) {
	return a.remote, nil
}

func (a *testAppender) StartOverLocked(offset int64, st RemoteState) error {
	if err := a.log.TruncateFullyAndStartAt(offset); err != nil {
		return err
	}
	for _, e := range st.Epochs {
		if err := a.log.Epochs().Assign(e.Epoch, e.StartOffset); err != nil {
			return err
		}
	}
	if st.ProducerSnapshot != nil {
		if err := producer.WriteSnapshot(a.dir, offset, st.ProducerSnapshot); err != nil {
			return err
		}
	}
	return a.ReloadProducersLocked()
}

// TestLeaderHighWatermarkAndISR walks a leader's replication state
// through follower reports, an expansion and a shrink.
func TestLeaderHighWatermarkAndISR(t *testing.T) {
	const self = int32(1)
	p := replicaTestPartition(t, [2]int{0, 10})
	p.log.SetHighWatermark(0)
	now := time.Unix(1000, 0)
	pi := coord.PartitionInfo{Replicas: []int32{1, 2, 3}, Version: 4,
		State: coord.PartitionState{Leader: self, LeaderEpoch: 1, ISR: []int32{1, 2}, ControllerEpoch: 1}}
	if !p.syncLeadership(pi, now) {
		t.Fatal("syncLeadership did not report becoming leader")
	}
	p.AdvanceHighWatermark()
	if hw := p.log.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d before the in-sync follower reported, want 0", hw)
	}
	// Broker 3 is not in the ISR: its report does not move the high
	// watermark, and it is not added while behind it.
	if isr := p.followerReport(3, 1, 4, -1, now, true); isr != nil {
		t.Fatalf("broker 3 at 4 proposed for the ISR %v while the high watermark is 0? want nil", isr)
	}
	if isr := p.followerReport(2, 1, 6, -1, now, true); isr != nil {
		t.Fatalf("in-sync broker 2 proposed %v", isr)
	}
	if hw := p.log.HighWatermark(); hw != 6 {
		t.Fatalf("high watermark %d after broker 2 reached 6, want 6", hw)
	}
	// A report from another epoch is ignored.
	p.followerReport(2, 0, 10, -1, now, true)
	if hw := p.log.HighWatermark(); hw != 6 {
		t.Fatalf("high watermark %d after a stale-epoch report, want 6", hw)
	}
	// Broker 3 catches up past the high watermark and the epoch start
	// (10, the log end when this broker became leader): proposed.
	isr := p.followerReport(3, 1, 10, -1, now, true)
	if !slices.Equal(isr, []int32{1, 2, 3}) {
		t.Fatalf("broker 3 at the log end: proposed %v, want [1 2 3]", isr)
	}
	// While the expansion is in flight the high watermark waits for
	// broker 3 too (it already has 10) and for broker 2 (6).
	p.AdvanceHighWatermark()
	if hw := p.log.HighWatermark(); hw != 6 {
		t.Fatalf("high watermark %d during the expansion, want 6", hw)
	}
	// Apply the write as writeISR does on success.
	p.mu.Lock()
	p.isr, p.isrVersion, p.proposed = []int32{1, 2, 3}, 5, nil
	p.mu.Unlock()

	// Broker 2 stops; after the lag time it is proposed out.
	later := now.Add(31 * time.Second)
	p.followerReport(3, 1, 10, -1, later, true)
	if isr := p.laggingISR(30*time.Second, later); !slices.Equal(isr, []int32{1, 3}) {
		t.Fatalf("lagging broker 2: proposed %v, want [1 3]", isr)
	}
	// The shrink is not committed yet: the high watermark still waits
	// for broker 2.
	p.AdvanceHighWatermark()
	if hw := p.log.HighWatermark(); hw != 6 {
		t.Fatalf("high watermark %d while the shrink is in flight, want 6", hw)
	}
	p.mu.Lock()
	p.isr, p.isrVersion, p.proposed = []int32{1, 3}, 6, nil
	p.mu.Unlock()
	p.AdvanceHighWatermark()
	if hw := p.log.HighWatermark(); hw != 10 {
		t.Fatalf("high watermark %d after the shrink, want 10", hw)
	}
	// A snapshot with an older ISR version does not roll the ISR back.
	p.syncLeadership(pi, later)
	if isr, _ := p.isrSnapshot(); !slices.Equal(isr, []int32{1, 3}) {
		t.Fatalf("ISR %v after an older snapshot, want [1 3]", isr)
	}
	// Losing the leadership wakes waiters and stops the bookkeeping.
	pi2 := pi.Clone()
	pi2.Version, pi2.State.Leader, pi2.State.LeaderEpoch = 7, 3, 2
	p.syncLeadership(pi2, later)
	if _, leading := p.leaderEpochIfLeading(); leading {
		t.Fatal("still leading after the leadership moved")
	}
}

// TestIdleFollowerStaysInSync: a follower at the leader's log end that
// keeps reporting (its fetcher's heartbeat) stays in the ISR however long
// the partition is idle; one that stops reporting leaves it after the lag
// time; and an append gives the follower that was at the end the lag time
// from the append to fetch it. The append is stamped by the partition's
// clock, fixed here.
func TestIdleFollowerStaysInSync(t *testing.T) {
	const self = int32(1)
	const lag = 30 * time.Second
	p := replicaTestPartition(t, [2]int{0, 5})
	start := time.Unix(10_000, 0)
	pi := coord.PartitionInfo{Replicas: []int32{1, 2}, Version: 1,
		State: coord.PartitionState{Leader: self, LeaderEpoch: 1, ISR: []int32{1, 2}}}
	p.syncLeadership(pi, start)
	// Heartbeats every 500ms for an hour of idleness.
	for at := start; at.Before(start.Add(time.Hour)); at = at.Add(10 * time.Minute) {
		p.followerReport(2, 1, 5, -1, at, true)
		if isr := p.laggingISR(lag, at.Add(500*time.Millisecond)); isr != nil {
			t.Fatalf("a reporting follower at the log end, idle for %v, proposed out: %v", at.Sub(start), isr)
		}
	}
	// Silent for an hour but at the log end: still in sync (Kafka's rule).
	if isr := p.laggingISR(lag, start.Add(2*time.Hour)); isr != nil {
		t.Fatalf("a follower at the log end, silent for an hour, proposed out: %v", isr)
	}
	now := start.Add(3 * time.Hour)
	p.followerReport(2, 1, 5, -1, now.Add(-time.Minute), true)
	b, err := segment.BuildBatch(segment.BatchSpec{BaseOffset: 5, PartitionLeaderEpoch: 1, Records: []segment.Record{{Timestamp: 1, Value: []byte("v")}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.app.AppendReplicatedLocked(b); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.clock = func() time.Time { return now }
	p.mu.Unlock()
	p.AdvanceHighWatermark()
	if isr := p.laggingISR(lag, now.Add(lag)); isr != nil {
		t.Fatalf("the lag time after an append, the follower that was at the end proposed out: %v", isr)
	}
	if isr := p.laggingISR(lag, now.Add(lag+time.Millisecond)); !slices.Equal(isr, []int32{1}) {
		t.Fatalf("past the lag time after an append it never fetched nor reported: proposed %v, want [1]", isr)
	}
}

// TestSilentFollowerLeavesISR: a follower that stops reporting leaves
// the ISR after the lag time once the leader's log has moved past it (at
// the log end it stays, as in Kafka), and comes back with its next report
// at the log end once it is registered again.
func TestSilentFollowerLeavesISR(t *testing.T) {
	const self = int32(1)
	const lag = 30 * time.Second
	p := replicaTestPartition(t, [2]int{0, 5})
	now := time.Unix(5000, 0)
	pi := coord.PartitionInfo{Replicas: []int32{1, 2}, Version: 1,
		State: coord.PartitionState{Leader: self, LeaderEpoch: 1, ISR: []int32{1, 2}}}
	p.syncLeadership(pi, now)
	p.followerReport(2, 1, 4, -1, now, true)
	later := now.Add(lag + time.Second)
	if isr := p.laggingISR(lag, later); !slices.Equal(isr, []int32{1}) {
		t.Fatalf("a follower behind the log end, silent for longer than the lag: proposed %v, want [1]", isr)
	}
	p.mu.Lock()
	p.isr, p.isrVersion, p.proposed = []int32{1}, 2, nil
	p.mu.Unlock()
	// Still fetching but its session expired: not added back (the
	// controller would remove it again at once).
	if isr := p.followerReport(2, 1, 5, -1, later, false); isr != nil {
		t.Fatalf("an unregistered follower at the log end proposed %v, want nil", isr)
	}
	if isr := p.followerReport(2, 1, 5, -1, later, true); !slices.Equal(isr, []int32{1, 2}) {
		t.Fatalf("its next report at the log end: proposed %v, want [1 2]", isr)
	}
}
