package main

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// This file is the planner of `strata cluster rebalance`, `add-broker`
// and `decommission`: pure functions from the brokers and the current
// assignment to a target assignment. The rules:
//
//   - the replication factor of a partition never changes, and a broker
//     holds at most one replica of a partition;
//   - racks: with every broker on a rack, a partition's replicas are on
//     as many different racks as possible (at most ceil(RF/racks) on one
//     rack, so on distinct racks when there are at least RF racks);
//   - minimal moves: a replica moves only to leave a broker that is
//     going away, to fix a rack violation, or to even out the replica
//     count per broker (max - min <= 1 where the racks allow it); a
//     moved replica keeps its position in the list;
//   - local bytes: each replica weighs its partition's local size (the
//     leader's, from DescribeLogDirs: for a tiered partition its local
//     tail only). Bytes never add a move, they choose among the moves
//     the count rules make. A broker to move to is the one with the
//     fewest replicas, then the fewest bytes; a broker to move from the
//     one with the most replicas, then the most bytes. Of the replicas
//     that may go from A to B, the largest that does not reverse their
//     difference in bytes (size <= (bytes(A) - bytes(B)) / 2) moves, so
//     the two even out; when none is that small, the smallest moves, so
//     the least is copied. Ties: a replica that is not the preferred
//     leader, then the first partition;
//   - preferred leaders (first replicas) are then evened out per broker
//     by reordering replica lists, which copies nothing: a leadership
//     goes from a broker with the most to one with at least two fewer,
//     directly or along a chain (A leads a partition B is a replica of,
//     B leads one C is a replica of, ...) whose middle brokers keep
//     their count. add-broker's chains end only at the new broker or
//     at a broker whose preferred replica the plan moved.

// planBroker is a broker the planner may place replicas on.
type planBroker struct {
	ID   int32
	Rack string
}

// planPartition is a partition's replica list, preferred leader first.
type planPartition struct {
	Topic     string
	Partition int32
	Replicas  []int32
	// Bytes is the partition's local size (its leader's), what moving
	// one replica copies; -1 if unknown (planned as 0).
	Bytes int64
}

// weight is the bytes the planner counts for one replica of p.
func (p planPartition) weight() int64 { return max(p.Bytes, 0) }

func (p planPartition) name() string { return fmt.Sprintf("%s-%d", p.Topic, p.Partition) }

// planMode is what the plan is for.
type planMode int

const (
	modeRebalance    planMode = iota // even out all brokers
	modeAddBroker                    // fill the new broker up to its share
	modeDecommission                 // move every replica off the broker
)

// rebalancePlan is the planner's answer: the target of every partition
// (in the order given), and the replica moves it takes.
type rebalancePlan struct {
	Current, Target []planPartition
	// Moves counts replicas placed on a broker that did not hold them.
	Moves int
}

// Copies returns the bytes the move of the named partition copies: its
// size once per new replica; -1 if its size is unknown, 0 if it is not
// in the plan or only reordered.
func (p *rebalancePlan) Copies(name string) int64 {
	for i := range p.Target {
		if p.Target[i].name() != name {
			continue
		}
		n := 0
		for _, r := range p.Target[i].Replicas {
			if !slices.Contains(p.Current[i].Replicas, r) {
				n++
			}
		}
		if n > 0 && p.Target[i].Bytes < 0 {
			return -1
		}
		return int64(n) * p.Target[i].weight()
	}
	return 0
}

// Changed returns the indexes of the partitions whose target differs
// from their current replicas (a move or a new order).
func (p *rebalancePlan) Changed() []int {
	var out []int
	for i := range p.Target {
		if !slices.Equal(p.Current[i].Replicas, p.Target[i].Replicas) {
			out = append(out, i)
		}
	}
	return out
}

// countBytes returns the local bytes per broker of parts (each replica
// weighing its partition's size), with a zero entry for every broker of
// ids.
func countBytes(parts []planPartition, ids []int32) map[int32]int64 {
	out := map[int32]int64{}
	for _, id := range ids {
		out[id] = 0
	}
	for _, p := range parts {
		for _, r := range p.Replicas {
			out[r] += p.weight()
		}
	}
	return out
}

// countReplicas returns replicas and preferred leaders per broker of
// parts, with a zero entry for every broker of ids.
func countReplicas(parts []planPartition, ids []int32) (replicas, leaders map[int32]int) {
	replicas, leaders = map[int32]int{}, map[int32]int{}
	for _, id := range ids {
		replicas[id], leaders[id] = 0, 0
	}
	for _, p := range parts {
		for i, r := range p.Replicas {
			replicas[r]++
			if i == 0 {
				leaders[r]++
			}
		}
	}
	return replicas, leaders
}

// planner holds the working state of one plan.
type planner struct {
	eligible []int32          // brokers that may hold replicas, sorted
	rack     map[int32]string // broker -> rack ("" without racks)
	racks    int              // distinct racks among eligible (0 without racks)
	parts    []planPartition  // the target being built
	count    map[int32]int    // replicas per eligible broker in parts
	bytes    map[int32]int64  // local bytes per eligible broker in parts
}

// maxPerRack is how many replicas of a partition of rf replicas one rack
// may hold.
func (pl *planner) maxPerRack(rf int) int {
	if pl.racks == 0 {
		return rf
	}
	return (rf + pl.racks - 1) / pl.racks
}

// canPlace reports whether replica index at of partition pi may move to
// broker to: to is eligible, not already a replica, and its rack stays
// within maxPerRack.
func (pl *planner) canPlace(pi, at int, to int32) bool {
	p := pl.parts[pi]
	if _, ok := pl.count[to]; !ok || slices.Contains(p.Replicas, to) {
		return false
	}
	if pl.racks == 0 {
		return true
	}
	same := 0
	for i, r := range p.Replicas {
		if i != at && pl.rack[r] == pl.rack[to] {
			same++
		}
	}
	return same+1 <= pl.maxPerRack(len(p.Replicas))
}

// rackViolation returns the index of a replica of partition pi on a rack
// holding more than maxPerRack of its replicas, or -1. It picks the
// last such replica, so a preferred leader stays if it can.
func (pl *planner) rackViolation(pi int) int {
	if pl.racks == 0 {
		return -1
	}
	p := pl.parts[pi]
	per := map[string]int{}
	for _, r := range p.Replicas {
		per[pl.rack[r]]++
	}
	for i := len(p.Replicas) - 1; i >= 0; i-- {
		if per[pl.rack[p.Replicas[i]]] > pl.maxPerRack(len(p.Replicas)) {
			return i
		}
	}
	return -1
}

// move places replica at of partition pi on broker to.
func (pl *planner) move(pi, at int, to int32) {
	from := pl.parts[pi].Replicas[at]
	w := pl.parts[pi].weight()
	if _, ok := pl.count[from]; ok {
		pl.count[from]--
		pl.bytes[from] -= w
	}
	pl.parts[pi].Replicas[at] = to
	pl.count[to]++
	pl.bytes[to] += w
}

// leastLoaded returns the eligible brokers by replica count, then local
// bytes, then id.
func (pl *planner) leastLoaded() []int32 {
	ids := slices.Clone(pl.eligible)
	slices.SortStableFunc(ids, func(a, b int32) int {
		return cmp.Or(cmp.Compare(pl.count[a], pl.count[b]), cmp.Compare(pl.bytes[a], pl.bytes[b]))
	})
	return ids
}

// placeAnywhere moves replica at of partition pi to the least loaded
// broker that may take it; false if none may.
func (pl *planner) placeAnywhere(pi, at int) bool {
	for _, to := range pl.leastLoaded() {
		if pl.canPlace(pi, at, to) {
			pl.move(pi, at, to)
			return true
		}
	}
	return false
}

// moveOne moves one replica from broker from to broker to; false if
// none can move. Which one: the largest that does not reverse the two
// brokers' difference in local bytes, else the smallest; ties go to a
// replica that is not the preferred leader, then to the first partition.
func (pl *planner) moveOne(from, to int32) bool {
	diff := pl.bytes[from] - pl.bytes[to]
	best, bestAt := -1, -1
	// better reports whether candidate (pi, at) beats the best so far.
	better := func(pi, at int) bool {
		if best < 0 {
			return true
		}
		s, bs := pl.parts[pi].weight(), pl.parts[best].weight()
		even, bestEven := 2*s <= diff, 2*bs <= diff
		switch {
		case even != bestEven:
			return even
		case s != bs && even:
			return s > bs
		case s != bs:
			return s < bs
		}
		return bestAt == 0 && at > 0
	}
	for pi, p := range pl.parts {
		at := slices.Index(p.Replicas, from)
		if at < 0 || !pl.canPlace(pi, at, to) {
			continue
		}
		if better(pi, at) {
			best, bestAt = pi, at
		}
	}
	if best < 0 {
		return false
	}
	pl.move(best, bestAt, to)
	return true
}

// shiftLeader moves one preferred leadership from a broker with the
// most to one with at least two fewer, along the shortest chain of swaps: in each partition of the chain the
// leader trades places with the replica that leads the next. It returns
// false when no such chain exists, so the leaders are as even as the
// replica lists allow. In modeAddBroker a chain ends only at broker or
// at a broker that leads fewer than before (its preferred replica
// moved), so the plan shuffles no more than it must.
func (pl *planner) shiftLeader(mode planMode, broker int32, before map[int32]int) bool {
	_, leaders := countReplicas(pl.parts, pl.eligible)
	from := slices.Clone(pl.eligible)
	slices.SortStableFunc(from, func(a, b int32) int { return cmp.Compare(leaders[b], leaders[a]) })
	for _, src := range from {
		// via[b] is the partition whose leadership reaches b in the
		// search from src.
		via := map[int32]int{src: -1}
		queue := []int32{src}
		for len(queue) > 0 {
			a := queue[0]
			queue = queue[1:]
			for pi, p := range pl.parts {
				if p.Replicas[0] != a {
					continue
				}
				for _, b := range p.Replicas[1:] {
					if _, seen := via[b]; seen {
						continue
					}
					via[b] = pi
					target := leaders[src]-leaders[b] > 1 && (mode != modeAddBroker || b == broker || leaders[b] < before[b])
					if !target {
						queue = append(queue, b)
						continue
					}
					for b != src {
						pi := via[b]
						r := pl.parts[pi].Replicas
						at := slices.Index(r, b)
						next := r[0]
						r[0], r[at] = r[at], r[0]
						b = next
					}
					return true
				}
			}
		}
	}
	return false
}

// planReassignment plans the target assignment of parts on brokers for
// mode; broker is the new broker (modeAddBroker) or the one to drain
// (modeDecommission). rackAware false ignores racks. It refuses, with the
// reason, a plan that cannot keep the rules.
func planReassignment(brokers []planBroker, parts []planPartition, mode planMode, broker int32, rackAware bool) (*rebalancePlan, error) {
	if len(brokers) == 0 {
		return nil, fmt.Errorf("no brokers")
	}
	rack := map[int32]string{}
	var withRack, without []int32
	for _, b := range brokers {
		if _, dup := rack[b.ID]; dup {
			return nil, fmt.Errorf("broker %d is listed twice", b.ID)
		}
		rack[b.ID] = b.Rack
		if b.Rack != "" {
			withRack = append(withRack, b.ID)
		} else {
			without = append(without, b.ID)
		}
	}
	if rackAware && len(withRack) > 0 && len(without) > 0 {
		return nil, fmt.Errorf("brokers %s have a rack (broker.rack) and brokers %s do not: set broker.rack on every broker, or plan with --disable-rack-aware", joinIDs(withRack), joinIDs(without))
	}
	if !rackAware || len(withRack) == 0 {
		for id := range rack {
			rack[id] = ""
		}
	}
	ids := slices.Sorted(maps.Keys(rack))
	eligible := ids
	switch mode {
	case modeAddBroker, modeDecommission:
		if _, ok := rack[broker]; !ok {
			return nil, fmt.Errorf("broker %d is not in the cluster (live brokers: %s)", broker, joinIDs(ids))
		}
	}
	if mode == modeDecommission {
		eligible = slices.DeleteFunc(slices.Clone(ids), func(id int32) bool { return id == broker })
	}
	racksOf := func(set []int32) int {
		rs := map[string]bool{}
		for _, id := range set {
			if rack[id] != "" {
				rs[rack[id]] = true
			}
		}
		return len(rs)
	}
	pl := &planner{eligible: eligible, rack: rack, racks: racksOf(eligible), count: map[int32]int{}, bytes: map[int32]int64{}}
	for _, id := range eligible {
		pl.count[id] = 0
	}
	plan := &rebalancePlan{}
	for _, p := range parts {
		if len(p.Replicas) == 0 {
			return nil, fmt.Errorf("partition %s has no replicas", p.name())
		}
		if len(p.Replicas) > len(eligible) {
			if mode == modeDecommission && len(p.Replicas) <= len(ids) {
				return nil, fmt.Errorf("cannot decommission broker %d: partition %s has %d replicas and only %d brokers would remain (%s); add a broker first", broker, p.name(), len(p.Replicas), len(eligible), joinIDs(eligible))
			}
			return nil, fmt.Errorf("partition %s has %d replicas but the cluster has %d brokers", p.name(), len(p.Replicas), len(eligible))
		}
		if mode == modeDecommission && racksOf(ids) >= len(p.Replicas) && pl.racks < len(p.Replicas) {
			return nil, fmt.Errorf("cannot decommission broker %d: partition %s has %d replicas on distinct racks, and without broker %d only %d racks would remain; add a broker on the rack of broker %d (%s) first, or plan with --disable-rack-aware", broker, p.name(), len(p.Replicas), broker, pl.racks, broker, rack[broker])
		}
		plan.Current = append(plan.Current, planPartition{p.Topic, p.Partition, slices.Clone(p.Replicas), p.Bytes})
		pl.parts = append(pl.parts, planPartition{p.Topic, p.Partition, slices.Clone(p.Replicas), p.Bytes})
		for _, r := range p.Replicas {
			if _, ok := pl.count[r]; ok {
				pl.count[r]++
				pl.bytes[r] += p.weight()
			}
		}
	}

	// 1. Replicas on brokers that are not eligible (the decommissioned
	// broker, brokers no longer in the cluster) move.
	for pi := range pl.parts {
		for at, r := range pl.parts[pi].Replicas {
			if _, ok := pl.count[r]; ok {
				continue
			}
			if !pl.placeAnywhere(pi, at) {
				return nil, fmt.Errorf("partition %s: no broker can take its replica on broker %d (every other broker already holds a replica, or its rack is full)", pl.parts[pi].name(), r)
			}
		}
	}
	// 2. Rack violations (rebalance only: the other modes move no more
	// than they must).
	if mode == modeRebalance {
		for pi := range pl.parts {
			for range len(pl.parts[pi].Replicas) {
				at := pl.rackViolation(pi)
				if at < 0 || !pl.placeAnywhere(pi, at) {
					break
				}
			}
		}
	}
	// 3. Replica count per broker.
	total := 0
	for _, n := range pl.count {
		total += n
	}
	share := total / len(eligible)
	limit := total * len(eligible) // every step lowers the spread; bound anyway
	switch mode {
	case modeAddBroker:
		for range limit {
			if pl.count[broker] >= share {
				break
			}
			moved := false
			for _, from := range slices.Backward(pl.leastLoaded()) {
				if from != broker && pl.count[from] > pl.count[broker]+1 && pl.moveOne(from, broker) {
					moved = true
					break
				}
			}
			if !moved {
				break
			}
		}
	default:
		for range limit {
			order := pl.leastLoaded()
			moved := false
		search:
			for _, from := range slices.Backward(order) {
				for _, to := range order {
					if pl.count[from]-pl.count[to] <= 1 {
						break
					}
					if pl.moveOne(from, to) {
						moved = true
						break search
					}
				}
			}
			if !moved {
				break
			}
		}
	}
	// 4. Preferred leaders per broker.
	_, leadersBefore := countReplicas(plan.Current, eligible)
	for range limit {
		if !pl.shiftLeader(mode, broker, leadersBefore) {
			break
		}
	}
	plan.Target = pl.parts
	for i := range plan.Target {
		for _, r := range plan.Target[i].Replicas {
			if !slices.Contains(plan.Current[i].Replicas, r) {
				plan.Moves++
			}
		}
	}
	return plan, nil
}

// describeCounts renders replicas, leaders and (withBytes) local bytes
// per broker before and after.
func describeCounts(plan *rebalancePlan, ids []int32, withBytes bool) string {
	rb, lb := countReplicas(plan.Current, ids)
	ra, la := countReplicas(plan.Target, ids)
	bb, ba := countBytes(plan.Current, ids), countBytes(plan.Target, ids)
	all := slices.Sorted(maps.Keys(rb))
	for id := range ra {
		if !slices.Contains(all, id) {
			all = append(all, id)
		}
	}
	slices.Sort(all)
	var b strings.Builder
	fmt.Fprintf(&b, "BROKER\tREPLICAS BEFORE\tREPLICAS AFTER\tLEADERS BEFORE\tLEADERS AFTER")
	if withBytes {
		fmt.Fprintf(&b, "\tBYTES BEFORE\tBYTES AFTER")
	}
	fmt.Fprintln(&b)
	for _, id := range all {
		fmt.Fprintf(&b, "%d\t%d\t%d\t%d\t%d", id, rb[id], ra[id], lb[id], la[id])
		if withBytes {
			fmt.Fprintf(&b, "\t%s\t%s", describeBytes(bb[id]), describeBytes(ba[id]))
		}
		fmt.Fprintln(&b)
	}
	return b.String()
}

// describeBytes is "1234 bytes (1.2 KiB)", "-" when unknown (< 0).
func describeBytes(n int64) string {
	switch {
	case n < 0:
		return "-"
	case n < 1024:
		return plural(n, "byte")
	}
	return fmt.Sprintf("%d bytes (%s)", n, formatBytes(n))
}
