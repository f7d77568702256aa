package main

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// parts builds partitions t-0, t-1, ... from replica lists.
func parts(lists ...[]int32) []planPartition {
	var out []planPartition
	for i, l := range lists {
		out = append(out, planPartition{Topic: "t", Partition: int32(i), Replicas: l})
	}
	return out
}

func brokersNoRack(ids ...int32) []planBroker {
	var out []planBroker
	for _, id := range ids {
		out = append(out, planBroker{ID: id})
	}
	return out
}

// checkPlan checks the invariants every plan keeps: same partitions,
// same replication factor, no broker twice, nothing on excluded, racks
// (at most ceil(rf/racks) per rack).
func checkPlan(t *testing.T, name string, brokers []planBroker, in []planPartition, plan *rebalancePlan, excluded int32) {
	t.Helper()
	rack := map[int32]string{}
	racks := map[string]bool{}
	for _, b := range brokers {
		if b.ID == excluded {
			continue
		}
		rack[b.ID] = b.Rack
		if b.Rack != "" {
			racks[b.Rack] = true
		}
	}
	if len(plan.Target) != len(in) {
		t.Fatalf("%s: %d partitions in the plan, want %d", name, len(plan.Target), len(in))
	}
	for i, p := range plan.Target {
		if p.Topic != in[i].Topic || p.Partition != in[i].Partition || len(p.Replicas) != len(in[i].Replicas) {
			t.Errorf("%s: partition %d became %+v from %+v", name, i, p, in[i])
		}
		per := map[string]int{}
		for j, r := range p.Replicas {
			if _, ok := rack[r]; !ok {
				t.Errorf("%s: %s has a replica on broker %d", name, p.name(), r)
			}
			if slices.Contains(p.Replicas[:j], r) {
				t.Errorf("%s: %s lists broker %d twice", name, p.name(), r)
			}
			per[rack[r]]++
		}
		if len(racks) > 0 {
			max := (len(p.Replicas) + len(racks) - 1) / len(racks)
			for r, n := range per {
				if n > max {
					t.Errorf("%s: %s has %d replicas on rack %s (max %d): %v", name, p.name(), n, r, max, p.Replicas)
				}
			}
		}
	}
}

func spread(m map[int32]int) int {
	v := slices.Collect(maps.Values(m))
	return slices.Max(v) - slices.Min(v)
}

func TestPlanReassignment(t *testing.T) {
	racked := []planBroker{{1, "a"}, {2, "b"}, {3, "c"}, {4, "a"}, {5, "b"}, {6, "c"}}
	cases := []struct {
		name    string
		brokers []planBroker
		parts   []planPartition
		mode    planMode
		broker  int32
		// want
		moves         int // -1: do not check
		replicaSpread int // max - min replicas per broker after, at most
		leaderSpread  int
		share         int // modeAddBroker: replicas on broker after
	}{
		{name: "balanced stays", brokers: brokersNoRack(1, 2, 3),
			parts: parts([]int32{1, 2}, []int32{2, 3}, []int32{3, 1}), mode: modeRebalance, moves: 0, replicaSpread: 0, leaderSpread: 0},
		{name: "all on one broker", brokers: brokersNoRack(1, 2, 3),
			parts: parts([]int32{1}, []int32{1}, []int32{1}, []int32{1}, []int32{1}, []int32{1}), mode: modeRebalance, moves: 4, replicaSpread: 0, leaderSpread: 0},
		{name: "leaders only reorder", brokers: brokersNoRack(1, 2),
			parts: parts([]int32{1, 2}, []int32{1, 2}, []int32{1, 2}, []int32{1, 2}), mode: modeRebalance, moves: 0, replicaSpread: 0, leaderSpread: 0},
		{name: "add broker 4", brokers: brokersNoRack(1, 2, 3, 4),
			parts: parts([]int32{1, 2}, []int32{2, 3}, []int32{3, 1}, []int32{1, 2}, []int32{2, 3}, []int32{3, 1}), mode: modeAddBroker, broker: 4, moves: 3, replicaSpread: 1, leaderSpread: 1, share: 3},
		{name: "add broker uneven", brokers: brokersNoRack(1, 2, 3),
			parts: parts([]int32{1, 2}, []int32{1, 2}, []int32{1, 2}, []int32{1, 2}, []int32{1, 2}), mode: modeAddBroker, broker: 3, moves: 3, replicaSpread: 1, leaderSpread: 3, share: 3}, // add-broker moves leaders only to the new broker
		{name: "rebalance after add", brokers: brokersNoRack(1, 2, 3, 4),
			parts: parts([]int32{1, 2, 3}, []int32{2, 3, 1}, []int32{3, 1, 2}, []int32{1, 2, 3}), mode: modeRebalance, moves: 3, replicaSpread: 0, leaderSpread: 0},
		{name: "decommission 1", brokers: brokersNoRack(1, 2, 3, 4),
			parts: parts([]int32{1, 2}, []int32{2, 3}, []int32{3, 4}, []int32{4, 1}, []int32{1, 3}, []int32{2, 4}), mode: modeDecommission, broker: 1, moves: 3, replicaSpread: 0, leaderSpread: 1},
		{name: "racks fixed on rebalance", brokers: racked,
			parts: parts([]int32{1, 4}, []int32{2, 5}, []int32{3, 6}), mode: modeRebalance, moves: 3, replicaSpread: 1, leaderSpread: 1},
		{name: "racks kept on decommission", brokers: racked,
			parts: parts([]int32{1, 2, 3}, []int32{4, 5, 6}, []int32{1, 5, 6}, []int32{4, 2, 3}), mode: modeDecommission, broker: 1, moves: 2, replicaSpread: 2, leaderSpread: 1}, // broker 4 is rack a's only broker left: it takes both
		{name: "racks: more replicas than racks", brokers: []planBroker{{1, "a"}, {2, "a"}, {3, "b"}, {4, "b"}},
			parts: parts([]int32{1, 2, 3}, []int32{1, 2, 4}), mode: modeRebalance, moves: -1, replicaSpread: 1, leaderSpread: 1},
		{name: "dead broker's replicas move", brokers: brokersNoRack(1, 2, 3),
			parts: parts([]int32{1, 9}, []int32{9, 2}), mode: modeRebalance, moves: 2, replicaSpread: 1, leaderSpread: 1},
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
		reps, leaders := countReplicas(plan.Target, ids)
		if tc.moves >= 0 && plan.Moves != tc.moves {
			t.Errorf("%s: %d moves, want %d\n%v", tc.name, plan.Moves, tc.moves, plan.Target)
		}
		if s := spread(reps); s > tc.replicaSpread {
			t.Errorf("%s: replicas per broker %v (spread %d > %d)", tc.name, reps, s, tc.replicaSpread)
		}
		if s := spread(leaders); s > tc.leaderSpread {
			t.Errorf("%s: leaders per broker %v (spread %d > %d)", tc.name, leaders, s, tc.leaderSpread)
		}
		if tc.mode == modeAddBroker && reps[tc.broker] != tc.share {
			t.Errorf("%s: broker %d holds %d replicas, want %d", tc.name, tc.broker, reps[tc.broker], tc.share)
		}
		// Planning the target again changes nothing: the plan is stable.
		if tc.mode == modeRebalance {
			again, err := planReassignment(tc.brokers, plan.Target, modeRebalance, 0, true)
			if err != nil || len(again.Changed()) != 0 {
				t.Errorf("%s: replanning the target: %v, changes %v", tc.name, err, again.Changed())
			}
		}
	}
}

func TestPlanReassignmentRefusals(t *testing.T) {
	cases := []struct {
		name    string
		brokers []planBroker
		parts   []planPartition
		mode    planMode
		broker  int32
		err     string
	}{
		{name: "too few brokers left", brokers: brokersNoRack(1, 2, 3), parts: parts([]int32{1, 2, 3}), mode: modeDecommission, broker: 1,
			err: "cannot decommission broker 1: partition t-0 has 3 replicas and only 2 brokers would remain (2,3)"},
		{name: "racks lost", brokers: []planBroker{{1, "a"}, {2, "b"}, {3, "c"}, {4, "b"}}, parts: parts([]int32{1, 2, 3}), mode: modeDecommission, broker: 1,
			err: "only 2 racks would remain; add a broker on the rack of broker 1 (a)"},
		{name: "unknown broker", brokers: brokersNoRack(1, 2), parts: parts([]int32{1}), mode: modeDecommission, broker: 7,
			err: "broker 7 is not in the cluster (live brokers: 1,2)"},
		{name: "add unknown broker", brokers: brokersNoRack(1, 2), parts: parts([]int32{1}), mode: modeAddBroker, broker: 7,
			err: "broker 7 is not in the cluster"},
		{name: "mixed racks", brokers: []planBroker{{1, "a"}, {2, ""}}, parts: parts([]int32{1}), mode: modeRebalance,
			err: "brokers 1 have a rack (broker.rack) and brokers 2 do not"},
		{name: "rf above brokers", brokers: brokersNoRack(1, 2), parts: parts([]int32{1, 2, 3}), mode: modeRebalance,
			err: "partition t-0 has 3 replicas but the cluster has 2 brokers"},
	}
	for _, tc := range cases {
		_, err := planReassignment(tc.brokers, tc.parts, tc.mode, tc.broker, true)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.err)
		}
	}
	// --disable-rack-aware plans what racks would refuse.
	if _, err := planReassignment([]planBroker{{1, "a"}, {2, "b"}, {3, "c"}, {4, "b"}}, parts([]int32{1, 2, 3}), modeDecommission, 1, false); err != nil {
		t.Errorf("rack-unaware decommission: %v", err)
	}
}

// TestThrottleTargets checks Kafka's throttle rule for a plan: leader
// throttles on the current replicas, follower throttles on the new ones,
// the brokers of both; a reorder copies nothing and throttles nothing.
func TestThrottleTargets(t *testing.T) {
	cur := parts([]int32{1, 2}, []int32{2, 3}, []int32{3, 1})
	tgt := parts([]int32{1, 4}, []int32{3, 2}, []int32{3, 1})
	r := &rebalanceRun{plan: &rebalancePlan{Current: cur, Target: tgt}, changed: []int{0, 1}}
	brokers, leader, follower := r.throttleTargets()
	if !slices.Equal(brokers, []int32{1, 2, 4}) {
		t.Errorf("brokers %v, want 1,2,4", brokers)
	}
	if got := strings.Join(leader["t"], ","); got != "0:1,0:2" {
		t.Errorf("leader throttled replicas %q, want 0:1,0:2", got)
	}
	if got := strings.Join(follower["t"], ","); got != "0:4" {
		t.Errorf("follower throttled replicas %q, want 0:4", got)
	}
}

// TestPlanAddBrokerLeadersAnySizes plans add-broker 4 for the layout of
// TestClusterAddBrokerDecommission (6 partitions of 2 replicas, 2 of 3,
// preferred leaders even over brokers 1-3) under every pattern of three
// partition sizes: the sizes choose which replicas move, and whichever
// move, broker 4 ends with its share of replicas and of leaders, the
// others keeping two leaders each (a CI run once gave broker 4 one
// leader, broker 2 three).
func TestPlanAddBrokerLeadersAnySizes(t *testing.T) {
	layout := [][]int32{{1, 2}, {2, 3}, {3, 1}, {1, 2}, {2, 3}, {3, 1}, {1, 2, 3}, {2, 3, 1}}
	sizes := []int64{477, 478, 480}
	brokers := brokersNoRack(1, 2, 3, 4)
	patterns := 1
	for range layout {
		patterns *= len(sizes)
	}
	for n := range patterns {
		in := parts(layout...)
		for i, k := 0, n; i < len(in); i, k = i+1, k/len(sizes) {
			in[i].Replicas = slices.Clone(in[i].Replicas)
			in[i].Bytes = sizes[k%len(sizes)]
		}
		plan, err := planReassignment(brokers, in, modeAddBroker, 4, true)
		if err != nil {
			t.Fatalf("pattern %d: %v", n, err)
		}
		checkPlan(t, "add-broker", brokers, in, plan, -1)
		reps, leaders := countReplicas(plan.Target, []int32{1, 2, 3, 4})
		if plan.Moves != 4 || reps[4] != 4 || spread(leaders) != 0 {
			t.Fatalf("pattern %d: %d moves, replicas %v, leaders %v; want 4 moves, 4 replicas and 2 leaders on broker 4, 2 leaders each\n%v", n, plan.Moves, reps, leaders, plan.Target)
		}
	}
}
