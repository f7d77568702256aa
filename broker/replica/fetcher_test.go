package replica

import (
	"log/slog"
	"testing"
	"time"

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
