package main

import (
	"slices"
	"strings"
	"testing"
)

// sized builds partitions t-0, t-1, ... from replica lists and sizes.
func sized(sizes []int64, lists ...[]int32) []planPartition {
	out := parts(lists...)
	for i := range out {
		out[i].Bytes = sizes[i]
	}
	return out
}

// TestPlanReassignmentBytes checks that local bytes choose among the
// moves the counts need, and never add one.
func TestPlanReassignmentBytes(t *testing.T) {
	racked := []planBroker{{1, "a"}, {2, "b"}, {3, "a"}, {4, "b"}}
	cases := []struct {
		name    string
		brokers []planBroker
		parts   []planPartition
		mode    planMode
		broker  int32
		// want
		moves  int
		copies int64           // bytes the plan copies
		bytes  map[int32]int64 // local bytes per broker after
		stay   []int           // partitions whose replicas must not change
	}{
		{name: "one huge and many small: the small move", brokers: brokersNoRack(1, 2, 3),
			parts: sized([]int64{1000, 10, 10, 10, 10, 10}, []int32{1}, []int32{1}, []int32{1}, []int32{1}, []int32{1}, []int32{1}), mode: modeRebalance,
			moves: 4, copies: 40, bytes: map[int32]int64{1: 1010, 2: 20, 3: 20}, stay: []int{0}},
		{name: "even out without overshooting", brokers: brokersNoRack(1, 2),
			parts: sized([]int64{50, 50, 1, 1}, []int32{1}, []int32{1}, []int32{1}, []int32{1}), mode: modeRebalance,
			moves: 2, copies: 51, bytes: map[int32]int64{1: 51, 2: 51}},
		{name: "ties in count go to the broker with fewer bytes", brokers: brokersNoRack(1, 2, 3),
			parts: sized([]int64{100, 1, 5, 5}, []int32{1}, []int32{2}, []int32{3}, []int32{3}), mode: modeDecommission, broker: 3,
			moves: 2, copies: 10, bytes: map[int32]int64{1: 105, 2: 6}, stay: []int{0, 1}},
		{name: "add a broker on a rack: the huge partition stays", brokers: racked,
			parts: sized([]int64{1000, 10, 10, 10, 10, 10}, []int32{1, 2}, []int32{1, 2}, []int32{3, 2}, []int32{1, 2}, []int32{3, 2}, []int32{1, 2}),
			mode:  modeAddBroker, broker: 4, moves: 3, copies: 30, bytes: map[int32]int64{1: 1030, 2: 1020, 3: 20, 4: 30}, stay: []int{0}},
	}
	for _, tc := range cases {
		plan, err := planReassignment(tc.brokers, tc.parts, tc.mode, tc.broker, true)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		excluded := int32(-1)
		if tc.mode == modeDecommission {
			excluded = tc.broker
		}
		checkPlan(t, tc.name, tc.brokers, tc.parts, plan, excluded)
		var ids []int32
		for _, b := range tc.brokers {
			if b.ID != excluded {
				ids = append(ids, b.ID)
			}
		}
		if plan.Moves != tc.moves {
			t.Errorf("%s: got %d moves, want %d: %v", tc.name, plan.Moves, tc.moves, plan.Target)
		}
		var copies int64
		for _, i := range plan.Changed() {
			copies += plan.Copies(plan.Target[i].name())
		}
		if copies != tc.copies {
			t.Errorf("%s: got %d bytes copied, want %d: %v", tc.name, copies, tc.copies, plan.Target)
		}
		got := countBytes(plan.Target, ids)
		for id, want := range tc.bytes {
			if got[id] != want {
				t.Errorf("%s: broker %d holds %d bytes after, want %d (all: %v; target %v)", tc.name, id, got[id], want, got, plan.Target)
			}
		}
		for _, i := range tc.stay {
			if !slices.Equal(plan.Target[i].Replicas, tc.parts[i].Replicas) {
				t.Errorf("%s: %s moved from %v to %v", tc.name, tc.parts[i].name(), tc.parts[i].Replicas, plan.Target[i].Replicas)
			}
		}
		reps, _ := countReplicas(plan.Target, ids)
		if tc.mode == modeRebalance && spread(reps) > 1 {
			t.Errorf("%s: replicas per broker %v", tc.name, reps)
		}
	}
}

// TestPlanCopiesUnknown checks that a move of a partition of unknown
// size copies an unknown amount, and a reorder copies nothing.
func TestPlanCopiesUnknown(t *testing.T) {
	plan := &rebalancePlan{
		Current: sized([]int64{-1, 7, 7}, []int32{1}, []int32{1, 2}, []int32{3}),
		Target:  sized([]int64{-1, 7, 7}, []int32{2}, []int32{2, 1}, []int32{4}),
	}
	for name, want := range map[string]int64{"t-0": -1, "t-1": 0, "t-2": 7, "t-9": 0} {
		if got := plan.Copies(name); got != want {
			t.Errorf("%s: got %d bytes copied, want %d", name, got, want)
		}
	}
	if got := describeCounts(plan, []int32{1, 2, 3, 4}, true); !slices.Contains(strings.Split(got, "\n"), "3\t1\t0\t1\t0\t7 bytes\t0 bytes") {
		t.Errorf("counts:\n%s", got)
	}
}
