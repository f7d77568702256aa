package coord

import (
	"errors"
	"slices"
	"testing"
)

func TestApplyReassignment(t *testing.T) {
	live := func(id int32) bool { return id >= 1 && id <= 6 }
	tp := TopicPartition{"t", 0}
	tests := []struct {
		name                       string
		p                          PartitionInfo
		target                     []int32
		replicas, adding, removing []int32
		err                        error
		allowUnclean               bool
	}{
		{"disjoint: target first", PartitionInfo{Replicas: []int32{1, 2, 3}}, []int32{4, 5, 6},
			[]int32{4, 5, 6, 1, 2, 3}, []int32{4, 5, 6}, []int32{1, 2, 3}, nil, false},
		{"overlap (Kafka's example)", PartitionInfo{Replicas: []int32{1, 2, 3}}, []int32{3, 4, 2},
			[]int32{3, 4, 2, 1}, []int32{4}, []int32{1}, nil, false},
		{"grow", PartitionInfo{Replicas: []int32{1}}, []int32{1, 2}, []int32{1, 2}, []int32{2}, nil, nil, false},
		{"shrink", PartitionInfo{Replicas: []int32{1, 2}}, []int32{2}, []int32{2, 1}, nil, []int32{1}, nil, false},
		{"reorder only: nothing to move", PartitionInfo{Replicas: []int32{1, 2}}, []int32{2, 1}, []int32{2, 1}, nil, nil, nil, false},
		{"replace one in progress: original kept", PartitionInfo{Replicas: []int32{4, 5, 6, 1, 2, 3}, Adding: []int32{4, 5, 6}, Removing: []int32{1, 2, 3}},
			[]int32{1, 5}, []int32{1, 5, 2, 3}, []int32{5}, []int32{2, 3}, nil, false},
		{"cancel", PartitionInfo{Replicas: []int32{3, 4, 2, 1}, Adding: []int32{4}, Removing: []int32{1}}, nil,
			[]int32{3, 2, 1}, nil, nil, nil, false},
		{"cancel without one", PartitionInfo{Replicas: []int32{1}}, nil, nil, nil, nil, ErrNoReassignmentInProgress, false},
		{"empty", PartitionInfo{Replicas: []int32{1}}, []int32{}, nil, nil, nil, ErrInvalidAssignment, false},
		{"duplicate", PartitionInfo{Replicas: []int32{1}}, []int32{2, 2}, nil, nil, nil, ErrInvalidAssignment, false},
		{"negative", PartitionInfo{Replicas: []int32{1}}, []int32{-1}, nil, nil, nil, ErrInvalidAssignment, false},
		{"adds a broker that is not live", PartitionInfo{Replicas: []int32{1}}, []int32{1, 7}, nil, nil, nil, ErrInvalidAssignment, false},
		{"keeps a replica that is not live", PartitionInfo{Replicas: []int32{7, 1}}, []int32{7, 2}, []int32{7, 2, 1}, []int32{2}, []int32{1}, nil, false},
		{"move off the only in-sync replica: it stays until the target is in sync", PartitionInfo{Replicas: []int32{1}, State: PartitionState{Leader: 1, ISR: []int32{1}}},
			[]int32{2}, []int32{2, 1}, []int32{2}, []int32{1}, nil, false},
		{"cancel when only an added replica is in sync", PartitionInfo{Replicas: []int32{3, 1}, Adding: []int32{3}, Removing: []int32{1}, State: PartitionState{Leader: 3, ISR: []int32{3}}},
			nil, nil, nil, nil, ErrInvalidAssignment, false},
		{"retarget dropping the only in-sync replica", PartitionInfo{Replicas: []int32{3, 1}, Adding: []int32{3}, Removing: []int32{1}, State: PartitionState{Leader: 3, ISR: []int32{3}}},
			[]int32{4}, nil, nil, nil, ErrInvalidAssignment, false},
		{"the same cancel with unclean election allowed", PartitionInfo{Replicas: []int32{3, 1}, Adding: []int32{3}, Removing: []int32{1}, State: PartitionState{Leader: 3, ISR: []int32{3}}},
			nil, []int32{1}, nil, nil, nil, true},
		{"offline partition (empty ISR): nothing in sync to lose", PartitionInfo{Replicas: []int32{1}, State: PartitionState{Leader: NoLeader}},
			[]int32{2}, []int32{2, 1}, []int32{2}, []int32{1}, nil, false},
	}
	for i, tc := range tests {
		p := tc.p.Clone()
		err := applyReassignment(&p, ReassignmentChange{TopicPartition: tp, Target: tc.target, AllowUnclean: tc.allowUnclean}, live)
		if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("#%d %s: got error %v, want %v", i, tc.name, err, tc.err)
			continue
		}
		if err != nil {
			if !slices.Equal(p.Replicas, tc.p.Replicas) {
				t.Errorf("#%d %s: refused change modified the replicas: %v", i, tc.name, p.Replicas)
			}
			continue
		}
		if !slices.Equal(p.Replicas, tc.replicas) || !slices.Equal(p.Adding, tc.adding) || !slices.Equal(p.Removing, tc.removing) {
			t.Errorf("#%d %s: got replicas %v adding %v removing %v, want %v %v %v", i, tc.name, p.Replicas, p.Adding, p.Removing, tc.replicas, tc.adding, tc.removing)
		}
	}
}

func TestPlanReassignment(t *testing.T) {
	moving := func(leader, epoch int32, isr ...int32) PartitionInfo {
		p := part([]int32{2, 3, 1}, leader, epoch, isr...) // [1,2] -> [2,3]
		p.Adding, p.Removing = []int32{3}, []int32{1}
		return p
	}
	all := liveness([]int32{1, 2, 3})
	tests := []struct {
		name           string
		p              PartitionInfo
		l              Liveness
		ready, changed bool
		want           PartitionState
	}{
		{"new replica not in the ISR: wait", moving(1, 4, 1, 2), all, false, false, PartitionState{}},
		{"caught up, leader removed: first target replica in the ISR leads", moving(1, 4, 1, 2, 3), all, true, true,
			PartitionState{Leader: 2, LeaderEpoch: 5, ISR: []int32{2, 3}, ControllerEpoch: 9}},
		{"caught up, leader stays: ISR cut, same epoch", moving(3, 4, 3, 1, 2), all, true, true,
			PartitionState{Leader: 3, LeaderEpoch: 4, ISR: []int32{3, 2}, ControllerEpoch: 9}},
		{"state already right", moving(2, 6, 2, 3), all, true, false, PartitionState{Leader: 2, LeaderEpoch: 6, ISR: []int32{2, 3}}},
		{"target replica shutting down is passed over", moving(1, 4, 1, 2, 3), liveness([]int32{1, 2, 3}, 2), true, true,
			PartitionState{Leader: 3, LeaderEpoch: 5, ISR: []int32{2, 3}, ControllerEpoch: 9}},
		{"no target replica can lead: wait", moving(1, 4, 1, 2, 3), liveness([]int32{1}), false, false, PartitionState{}},
	}
	for i, tc := range tests {
		ready, got, changed := PlanReassignment(tc.p, tc.l, 9)
		if ready != tc.ready || changed != tc.changed {
			t.Errorf("#%d %s: got ready %v changed %v, want %v %v", i, tc.name, ready, changed, tc.ready, tc.changed)
			continue
		}
		if ready && !got.Equal(tc.want) {
			t.Errorf("#%d %s: got %+v, want %+v", i, tc.name, got, tc.want)
		}
	}
}

// TestPlanPartitionAfterCancel: a leader or ISR member that is no longer
// a replica (a cancelled reassignment) is treated as lost.
func TestPlanPartitionAfterCancel(t *testing.T) {
	p := part([]int32{1, 2}, 3, 4, 1, 2, 3) // 3 was being added and led
	got, reason, changed := PlanPartition(p, liveness([]int32{1, 2, 3}), PlanOptions{}, 9)
	want := PartitionState{Leader: 1, LeaderEpoch: 5, ISR: []int32{1, 2}, ControllerEpoch: 9}
	if !changed || !got.Equal(want) || reason != ReasonReassignment {
		t.Fatalf("leader not a replica: got %+v %q %v, want %+v", got, reason, changed, want)
	}
	p = part([]int32{1, 2}, 1, 4, 1, 2, 3)
	got, _, changed = PlanPartition(p, liveness([]int32{1, 2, 3}), PlanOptions{}, 9)
	want = PartitionState{Leader: 1, LeaderEpoch: 4, ISR: []int32{1, 2}, ControllerEpoch: 9}
	if !changed || !got.Equal(want) {
		t.Fatalf("ISR member not a replica: got %+v %v, want %+v", got, changed, want)
	}
}
