package replica

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/stratastream/strata/broker/producer"
	"github.com/stratastream/strata/proto/replpb"
	"github.com/stratastream/strata/segment"
)

// truncateWith runs the follower's truncation step for p against a leader
// that answers each question with answer(asked), at most 8 rounds as the
// fetcher does, and returns the log end offset after it.
func truncateWith(t *testing.T, p *Partition, answer func(asked int32) (int32, int64)) int64 {
	t.Helper()
	m := &Manager{cfg: Config{FetchBackoff: time.Second}, log: slog.New(slog.DiscardHandler)}
	f := &fetcher{m: m, leader: 2, wake: make(chan struct{}, 1), parts: map[tpKey]*fetchPart{}}
	key := tpKey{p.topic, p.index}
	fp := &fetchPart{p: p, epoch: 9, state: fetchTruncating, leaderStart: -1, leaderEnd: -1}
	f.parts[key] = fp
	latest, _, _ := p.log.Epochs().Latest()
	asked := latest
	for round := 0; round < 8; round++ {
		le, end := answer(asked)
		more, ok := f.truncateOne(epochAsk{key: key, fp: fp, latest: latest, epoch: asked}, &replpb.EpochEnd{Topic: key.topic, Partition: key.index, LeaderEpoch: le, EndOffset: end})
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

// TestRestartWithRemoteState: a replica whose log ends below the leader's
// log start starts over there with the leader epochs and the producer
// state the object store holds below it (KIP-1023), and not before it
// has read them.
func TestRestartWithRemoteState(t *testing.T) {
	p := replicaTestPartition(t, [2]int{0, 3})
	app := p.app.(*testAppender)
	// The store's producer state at 100: producer 7 wrote 90..99.
	ps := producer.NewStateManager(0)
	b, err := segment.BuildBatch(segment.BatchSpec{BaseOffset: 90, Idempotent: true, ProducerID: 7, ProducerEpoch: 2, BaseSequence: 40,
		Records: make([]segment.Record, 10)})
	if err != nil {
		t.Fatal(err)
	}
	h, err := segment.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	ps.Update(h, 90)
	snap, err := ps.EncodeSnapshot(100)
	if err != nil {
		t.Fatal(err)
	}
	app.remote = RemoteState{Epochs: []segment.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 4, StartOffset: 60}}, ProducerSnapshot: snap}

	m := &Manager{cfg: Config{FetchBackoff: time.Second}, log: slog.New(slog.DiscardHandler)}
	f := &fetcher{m: m, leader: 2, wake: make(chan struct{}, 1), parts: map[tpKey]*fetchPart{}}
	key := tpKey{p.topic, p.index}
	fp := &fetchPart{p: p, epoch: 5, state: fetchTruncating, leaderStart: 100, leaderEnd: 150}
	f.parts[key] = fp
	latest, _, _ := p.log.Epochs().Latest()
	ans := &replpb.EpochEnd{Topic: key.topic, Partition: key.index, LeaderEpoch: 5, EndOffset: 150}

	// Without the store's state read first, it does not start over.
	if more, ok := f.truncateOne(epochAsk{key: key, fp: fp, latest: latest, epoch: latest}, ans); more >= 0 || ok {
		t.Fatalf("started over without the remote state: more %d ok %v", more, ok)
	}
	if got := p.log.LogStartOffset(); got != 0 {
		t.Fatalf("log start %d before the remote state was read", got)
	}
	r, ok := f.remoteBefore(context.Background(), key, fp)
	if !ok || r == nil || r.offset != 100 {
		t.Fatalf("remoteBefore: %+v %v", r, ok)
	}
	if more, ok := f.truncateOne(epochAsk{key: key, fp: fp, latest: latest, epoch: latest, restart: r}, ans); more >= 0 || !ok {
		t.Fatalf("truncateOne: more %d ok %v", more, ok)
	}
	if fp.state != fetchFetching {
		t.Fatal("not fetching after the restart")
	}
	if s, e := p.log.LogStartOffset(), p.log.LogEndOffset(); s != 100 || e != 100 {
		t.Fatalf("log [%d, %d), want [100, 100)", s, e)
	}
	if got, want := p.log.Epochs().Entries(), app.remote.Epochs; !slices.Equal(got, want) {
		t.Fatalf("epochs %v, want %v", got, want)
	}
	if e, end := p.log.Epochs().EndOffsetFor(1); e != 1 || end != 60 {
		t.Fatalf("EndOffsetFor(1) = %d, %d; want 1, 60", e, end)
	}
	epoch, batches, ok := app.producers.Producer(7)
	if !ok || epoch != 2 || len(batches) == 0 || batches[len(batches)-1].LastOffset != 99 {
		t.Fatalf("producer 7 after the restart: ok %v epoch %d batches %+v", ok, epoch, batches)
	}
	// A replica already at or beyond the leader's start does not read the store.
	fp.leaderStart = 50
	if r, ok := f.remoteBefore(context.Background(), key, fp); r != nil || !ok {
		t.Fatalf("remoteBefore with the log beyond the leader's start: %+v %v", r, ok)
	}
}
