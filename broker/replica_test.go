package broker

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/stratastream/strata/broker/producer"
	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/proto/replpb"
	"github.com/stratastream/strata/segment"
)

// replicaTestPartition opens a partition log in a temporary directory and
// appends, for each (epoch, count) pair in order, count one-record batches
// written at that leader epoch.
func replicaTestPartition(t *testing.T, epochs ...[2]int) *partition {
	t.Helper()
	dir := t.TempDir()
	l, err := segment.Open(dir, segment.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	p := &partition{topic: "t", index: 0, dir: dir, log: l, producers: producer.NewStateManager(0)}
	p.repl.init()
	off := int64(0)
	for _, e := range epochs {
		for i := 0; i < e[1]; i++ {
			b, err := segment.BuildBatch(segment.BatchSpec{BaseOffset: off, PartitionLeaderEpoch: int32(e[0]),
				Records: []segment.Record{{Timestamp: 1, Value: []byte("v")}}})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.appendReplicatedLocked(b); err != nil {
				t.Fatal(err)
			}
			off++
		}
	}
	return p
}

// truncateWith runs the follower's truncation step for p against a leader
// that answers each question with answer(asked), at most 8 rounds as the
// fetcher does, and returns the log end offset after it.
func truncateWith(t *testing.T, p *partition, answer func(asked int32) (int32, int64)) int64 {
	t.Helper()
	s := &Server{log: slog.New(slog.DiscardHandler), cfg: Config{ReplicaFetchBackoff: time.Second}}
	m := &replicaManager{s: s}
	f := &fetcher{m: m, leader: 2, wake: make(chan struct{}, 1), parts: map[tpKey]*fetchPart{}}
	key := tpKey{p.topic, p.index}
	fp := &fetchPart{p: p, epoch: 9, state: fetchTruncating, leaderStart: -1, leaderEnd: -1}
	f.parts[key] = fp
	latest, _, _ := p.log.Epochs().Latest()
	asked := latest
	for round := 0; round < 8; round++ {
		le, end := answer(asked)
		more, ok := f.truncateOne(key, fp, latest, asked, &replpb.EpochEnd{Topic: key.topic, Partition: key.index, LeaderEpoch: le, EndOffset: end})
		if more < 0 {
			if !ok {
				t.Fatalf("truncation asked to retry later")
			}
			if fp.state != fetchFetching {
				t.Fatalf("partition not fetching after truncation")
			}
			return p.log.LogEndOffset()
		}
		asked = more
	}
	t.Fatalf("truncation did not converge in 8 rounds")
	return -1
}

// leaderLog answers EpochEnds like a leader whose log has the given
// (epoch, start offset) entries and log end offset, as
// segment.EpochCache.EndOffsetFor does.
func leaderLog(entries [][2]int64, leo int64) func(int32) (int32, int64) {
	return func(asked int32) (int32, int64) {
		for i := len(entries) - 1; i >= 0; i-- {
			if int32(entries[i][0]) <= asked {
				if i == len(entries)-1 {
					return int32(entries[i][0]), leo
				}
				return int32(entries[i][0]), entries[i+1][1]
			}
		}
		return segment.UndefinedEpoch, segment.UndefinedEpochOffset
	}
}

func TestTruncationRules(t *testing.T) {
	cases := []struct {
		name     string
		follower [][2]int // (epoch, batches)
		leader   func(int32) (int32, int64)
		want     int64
	}{
		{
			// Same latest epoch, the leader's log shorter: the
			// follower's extra records were never committed (the
			// leader lost its unflushed tail in a crash).
			name:     "same epoch, leader shorter",
			follower: [][2]int{{1, 10}},
			leader:   leaderLog([][2]int64{{1, 0}}, 7),
			want:     7,
		},
		{
			name:     "same epoch, follower behind: nothing to cut",
			follower: [][2]int{{1, 5}},
			leader:   leaderLog([][2]int64{{1, 0}}, 9),
			want:     5,
		},
		{
			// KIP-101: the follower's epoch 2 suffix was never
			// replicated; the leader moved from epoch 1 to 3 at offset
			// 6.
			name:     "diverging suffix of a deposed leader",
			follower: [][2]int{{1, 8}, {2, 4}},
			leader:   leaderLog([][2]int64{{1, 0}, {3, 6}}, 20),
			want:     6,
		},
		{
			// KIP-279: the leader answers epoch 2, which the follower
			// never had (it has 1 and 3); the follower asks again about
			// 1, its largest epoch below 2, and cuts where the leader's
			// epoch 1 ended.
			name:     "several missed epochs",
			follower: [][2]int{{1, 5}, {3, 5}},
			leader:   leaderLog([][2]int64{{1, 0}, {2, 4}, {4, 9}}, 15),
			want:     4,
		},
		{
			// Second round of KIP-279 where the follower's epoch ends
			// before the leader's: cut at the follower's end of it.
			name:     "common epoch ends first on the follower",
			follower: [][2]int{{0, 3}, {2, 5}},
			leader:   leaderLog([][2]int64{{0, 0}, {1, 6}}, 10),
			want:     3,
		},
		{
			name:     "leader without any epoch at or below ours: keep the high watermark",
			follower: [][2]int{{1, 6}},
			leader:   leaderLog(nil, 0),
			want:     2,
		},
		{
			name:     "empty follower",
			follower: nil,
			leader:   leaderLog([][2]int64{{1, 0}}, 10),
			want:     0,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := replicaTestPartition(t, tc.follower...)
			p.log.SetHighWatermark(2)
			if got := truncateWith(t, p, tc.leader); got != tc.want {
				t.Errorf("log end after truncation %d, want %d", got, tc.want)
			}
		})
	}
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
	if !p.syncLeadership(self, pi, now) {
		t.Fatal("syncLeadership did not report becoming leader")
	}
	p.advanceHighWatermark(self)
	if hw := p.log.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d before the in-sync follower reported, want 0", hw)
	}
	// Broker 3 is not in the ISR: its report does not move the high
	// watermark, and it is not added while behind it.
	if isr := p.followerReport(self, 3, 1, 4, now, true); isr != nil {
		t.Fatalf("broker 3 at 4 proposed for the ISR %v while the high watermark is 0? want nil", isr)
	}
	if isr := p.followerReport(self, 2, 1, 6, now, true); isr != nil {
		t.Fatalf("in-sync broker 2 proposed %v", isr)
	}
	if hw := p.log.HighWatermark(); hw != 6 {
		t.Fatalf("high watermark %d after broker 2 reached 6, want 6", hw)
	}
	// A report from another epoch is ignored.
	p.followerReport(self, 2, 0, 10, now, true)
	if hw := p.log.HighWatermark(); hw != 6 {
		t.Fatalf("high watermark %d after a stale-epoch report, want 6", hw)
	}
	// Broker 3 catches up past the high watermark and the epoch start
	// (10, the log end when this broker became leader): proposed.
	isr := p.followerReport(self, 3, 1, 10, now, true)
	if !slices.Equal(isr, []int32{1, 2, 3}) {
		t.Fatalf("broker 3 at the log end: proposed %v, want [1 2 3]", isr)
	}
	// While the expansion is in flight the high watermark waits for
	// broker 3 too (it already has 10) and for broker 2 (6).
	p.advanceHighWatermark(self)
	if hw := p.log.HighWatermark(); hw != 6 {
		t.Fatalf("high watermark %d during the expansion, want 6", hw)
	}
	// Apply the write as writeISR does on success.
	p.repl.mu.Lock()
	p.repl.isr, p.repl.isrVersion, p.repl.proposed = []int32{1, 2, 3}, 5, nil
	p.repl.mu.Unlock()

	// Broker 2 stops; after the lag time it is proposed out.
	later := now.Add(31 * time.Second)
	p.followerReport(self, 3, 1, 10, later, true)
	if isr := p.laggingISR(self, 30*time.Second, later); !slices.Equal(isr, []int32{1, 3}) {
		t.Fatalf("lagging broker 2: proposed %v, want [1 3]", isr)
	}
	// The shrink is not committed yet: the high watermark still waits
	// for broker 2.
	p.advanceHighWatermark(self)
	if hw := p.log.HighWatermark(); hw != 6 {
		t.Fatalf("high watermark %d while the shrink is in flight, want 6", hw)
	}
	p.repl.mu.Lock()
	p.repl.isr, p.repl.isrVersion, p.repl.proposed = []int32{1, 3}, 6, nil
	p.repl.mu.Unlock()
	p.advanceHighWatermark(self)
	if hw := p.log.HighWatermark(); hw != 10 {
		t.Fatalf("high watermark %d after the shrink, want 10", hw)
	}
	// A snapshot with an older ISR version does not roll the ISR back.
	p.syncLeadership(self, pi, later)
	if isr, _ := p.isrSnapshot(); !slices.Equal(isr, []int32{1, 3}) {
		t.Fatalf("ISR %v after an older snapshot, want [1 3]", isr)
	}
	// Losing the leadership wakes waiters and stops the bookkeeping.
	pi2 := pi.Clone()
	pi2.Version, pi2.State.Leader, pi2.State.LeaderEpoch = 7, 3, 2
	p.syncLeadership(self, pi2, later)
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
	p.syncLeadership(self, pi, start)
	// Heartbeats every 500ms for an hour of idleness.
	for at := start; at.Before(start.Add(time.Hour)); at = at.Add(10 * time.Minute) {
		p.followerReport(self, 2, 1, 5, at, true)
		if isr := p.laggingISR(self, lag, at.Add(500*time.Millisecond)); isr != nil {
			t.Fatalf("a reporting follower at the log end, idle for %v, proposed out: %v", at.Sub(start), isr)
		}
	}
	// Silent for an hour but at the log end: still in sync (Kafka's rule).
	if isr := p.laggingISR(self, lag, start.Add(2*time.Hour)); isr != nil {
		t.Fatalf("a follower at the log end, silent for an hour, proposed out: %v", isr)
	}
	now := start.Add(3 * time.Hour)
	p.followerReport(self, 2, 1, 5, now.Add(-time.Minute), true)
	b, err := segment.BuildBatch(segment.BatchSpec{BaseOffset: 5, PartitionLeaderEpoch: 1, Records: []segment.Record{{Timestamp: 1, Value: []byte("v")}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.appendReplicatedLocked(b); err != nil {
		t.Fatal(err)
	}
	p.repl.mu.Lock()
	p.repl.clock = func() time.Time { return now }
	p.repl.mu.Unlock()
	p.advanceHighWatermark(self)
	if isr := p.laggingISR(self, lag, now.Add(lag)); isr != nil {
		t.Fatalf("the lag time after an append, the follower that was at the end proposed out: %v", isr)
	}
	if isr := p.laggingISR(self, lag, now.Add(lag+time.Millisecond)); !slices.Equal(isr, []int32{1}) {
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
	p.syncLeadership(self, pi, now)
	p.followerReport(self, 2, 1, 4, now, true)
	later := now.Add(lag + time.Second)
	if isr := p.laggingISR(self, lag, later); !slices.Equal(isr, []int32{1}) {
		t.Fatalf("a follower behind the log end, silent for longer than the lag: proposed %v, want [1]", isr)
	}
	p.repl.mu.Lock()
	p.repl.isr, p.repl.isrVersion, p.repl.proposed = []int32{1}, 2, nil
	p.repl.mu.Unlock()
	// Still fetching but its session expired: not added back (the
	// controller would remove it again at once).
	if isr := p.followerReport(self, 2, 1, 5, later, false); isr != nil {
		t.Fatalf("an unregistered follower at the log end proposed %v, want nil", isr)
	}
	if isr := p.followerReport(self, 2, 1, 5, later, true); !slices.Equal(isr, []int32{1, 2}) {
		t.Fatalf("its next report at the log end: proposed %v, want [1 2]", isr)
	}
}
