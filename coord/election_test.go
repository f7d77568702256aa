package coord

import (
	"errors"
	"slices"
	"testing"
)

func liveness(live []int32, shutting ...int32) Liveness {
	return Liveness{
		Live:         func(id int32) bool { return slices.Contains(live, id) },
		ShuttingDown: func(id int32) bool { return slices.Contains(shutting, id) },
	}
}

func part(replicas []int32, leader, epoch int32, isr ...int32) PartitionInfo {
	return PartitionInfo{Replicas: replicas, State: PartitionState{Leader: leader, LeaderEpoch: epoch, ISR: isr}, Version: 3}
}

func TestPlanPartition(t *testing.T) {
	r123 := []int32{1, 2, 3}
	tests := []struct {
		name    string
		p       PartitionInfo
		l       Liveness
		opts    PlanOptions
		changed bool
		want    PartitionState
		reason  Reason
	}{
		{"all fine", part(r123, 1, 0, 1, 2, 3), liveness(r123), PlanOptions{Preferred: true}, false, PartitionState{}, ""},
		{"leader lost: next in assignment order from the ISR", part(r123, 1, 4, 3, 1, 2), liveness([]int32{2, 3}), PlanOptions{}, true,
			PartitionState{Leader: 2, LeaderEpoch: 5, ISR: []int32{3, 2}, ControllerEpoch: 9}, ReasonLeaderLost},
		{"leader lost: only live ISR member", part(r123, 1, 0, 1, 3), liveness([]int32{2, 3}), PlanOptions{}, true,
			PartitionState{Leader: 3, LeaderEpoch: 1, ISR: []int32{3}, ControllerEpoch: 9}, ReasonLeaderLost},
		{"no live ISR member: offline, ISR kept", part(r123, 1, 2, 1), liveness([]int32{2, 3}), PlanOptions{}, true,
			PartitionState{Leader: NoLeader, LeaderEpoch: 3, ISR: []int32{1}, ControllerEpoch: 9}, ReasonOffline},
		{"no live ISR member, unclean: first live replica", part(r123, 1, 2, 1), liveness([]int32{3, 2}), PlanOptions{Unclean: true}, true,
			PartitionState{Leader: 2, LeaderEpoch: 3, ISR: []int32{2}, ControllerEpoch: 9}, ReasonUnclean},
		{"already offline, nobody back", part(r123, NoLeader, 3, 1), liveness([]int32{2}), PlanOptions{}, false, PartitionState{}, ""},
		{"offline, an ISR member returns", part(r123, NoLeader, 3, 1), liveness([]int32{1, 2}), PlanOptions{}, true,
			PartitionState{Leader: 1, LeaderEpoch: 4, ISR: []int32{1}, ControllerEpoch: 9}, ReasonLeaderLost},
		{"all brokers gone at once: ISR kept whole", part(r123, 1, 0, 1, 2), liveness(nil), PlanOptions{}, true,
			PartitionState{Leader: NoLeader, LeaderEpoch: 1, ISR: []int32{1, 2}, ControllerEpoch: 9}, ReasonOffline},
		{"follower lost: ISR shrinks, epoch kept", part(r123, 1, 2, 1, 2, 3), liveness([]int32{1, 2}), PlanOptions{}, true,
			PartitionState{Leader: 1, LeaderEpoch: 2, ISR: []int32{1, 2}, ControllerEpoch: 9}, ReasonISRShrink},
		{"controlled shutdown of the leader", part(r123, 1, 0, 1, 2, 3), liveness(r123, 1), PlanOptions{}, true,
			PartitionState{Leader: 2, LeaderEpoch: 1, ISR: []int32{2, 3}, ControllerEpoch: 9}, ReasonControlledShutdown},
		{"controlled shutdown of a follower", part(r123, 1, 0, 1, 2, 3), liveness(r123, 3), PlanOptions{}, true,
			PartitionState{Leader: 1, LeaderEpoch: 0, ISR: []int32{1, 2}, ControllerEpoch: 9}, ReasonISRShrink},
		{"controlled shutdown, nobody to take over", part(r123, 1, 0, 1), liveness(r123, 1), PlanOptions{}, false, PartitionState{}, ""},
		{"leader lost, only a shutting-down ISR member: it leads", part(r123, 1, 0, 1, 2), liveness([]int32{2, 3}, 2), PlanOptions{}, true,
			PartitionState{Leader: 2, LeaderEpoch: 1, ISR: []int32{2}, ControllerEpoch: 9}, ReasonLeaderLost},
		{"shutting-down broker not elected when another can lead", part(r123, 1, 0, 1, 2, 3), liveness([]int32{2, 3}, 2), PlanOptions{}, true,
			PartitionState{Leader: 3, LeaderEpoch: 1, ISR: []int32{3}, ControllerEpoch: 9}, ReasonLeaderLost},
		{"preferred back in ISR: takes over", part(r123, 2, 1, 2, 3, 1), liveness(r123), PlanOptions{Preferred: true}, true,
			PartitionState{Leader: 1, LeaderEpoch: 2, ISR: []int32{2, 3, 1}, ControllerEpoch: 9}, ReasonPreferred},
		{"preferred back in ISR, auto rebalance off", part(r123, 2, 1, 2, 3, 1), liveness(r123), PlanOptions{}, false, PartitionState{}, ""},
		{"preferred live but not in ISR: stays", part(r123, 2, 1, 2, 3), liveness(r123), PlanOptions{Preferred: true}, false, PartitionState{}, ""},
		{"preferred shutting down: stays", part(r123, 2, 1, 2, 1), liveness(r123, 1), PlanOptions{Preferred: true}, true,
			PartitionState{Leader: 2, LeaderEpoch: 1, ISR: []int32{2}, ControllerEpoch: 9}, ReasonISRShrink},
	}
	for i, tc := range tests {
		got, reason, changed := PlanPartition(tc.p, tc.l, tc.opts, 9)
		if changed != tc.changed {
			t.Errorf("#%d %s: got changed %v (%+v), want %v", i, tc.name, changed, got, tc.changed)
			continue
		}
		if !changed {
			if !got.Equal(tc.p.State) {
				t.Errorf("#%d %s: unchanged state differs: %+v", i, tc.name, got)
			}
			continue
		}
		if !got.Equal(tc.want) || reason != tc.reason {
			t.Errorf("#%d %s: got %+v (%s), want %+v (%s)", i, tc.name, got, reason, tc.want, tc.reason)
		}
	}
}

func TestPlanPartitionDoesNotAlias(t *testing.T) {
	p := part([]int32{1, 2, 3}, 1, 0, 1, 2, 3)
	got, _, _ := PlanPartition(p, liveness([]int32{2, 3}), PlanOptions{}, 1)
	got.ISR[0] = 99
	if p.State.ISR[0] != 1 {
		t.Fatalf("decision shares the input's ISR: %v", p.State.ISR)
	}
}

func TestPlanPreferred(t *testing.T) {
	r := []int32{1, 2}
	tests := []struct {
		p    PartitionInfo
		l    Liveness
		want error
	}{
		{part(r, 2, 3, 2, 1), liveness(r), nil},
		{part(r, 1, 3, 2, 1), liveness(r), ErrElectionNotNeeded},
		{part(r, 2, 3, 2), liveness(r), ErrPreferredLeaderNotAvailable},
		{part(r, 2, 3, 2, 1), liveness([]int32{2}), ErrPreferredLeaderNotAvailable},
		{part(r, 2, 3, 2, 1), liveness(r, 1), ErrPreferredLeaderNotAvailable},
	}
	for i, tc := range tests {
		st, err := PlanPreferred(tc.p, tc.l, 5)
		if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
			t.Errorf("#%d: got %v, want %v", i, err, tc.want)
			continue
		}
		if err == nil && (st.Leader != 1 || st.LeaderEpoch != 4 || st.ControllerEpoch != 5 || !slices.Equal(st.ISR, []int32{2, 1})) {
			t.Errorf("#%d: got %+v", i, st)
		}
	}
}
