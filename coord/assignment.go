package coord

import (
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"sort"
)

// AssignOptions tune AssignReplicas.
type AssignOptions struct {
	// StartIndex is the index (in the ID-sorted, for racks rack-alternated,
	// broker list) of partition StartPartition's first replica; it also
	// seeds the follower shift. -1 picks one at random, as Kafka does, so
	// topics do not all put partition 0 on the same broker.
	StartIndex int
	// StartPartition is the number of the first partition to assign
	// (non-zero when adding partitions to a topic).
	StartPartition int
}

// RandomStart is AssignOptions for a new topic: random start index.
var RandomStart = AssignOptions{StartIndex: -1}

// AssignReplicas assigns replicationFactor replicas to each of partitions
// partitions over brokers with Kafka's algorithm (AdminUtils
// assignReplicasToBrokers): partition p's first replica (its preferred
// leader) is broker (p+start) mod n, so leaders go round-robin and spread
// evenly; the followers follow at a shift that grows by one every n
// partitions, so replicas spread as well. If every broker has a rack, the
// broker list alternates racks and a partition's replicas land on
// distinct racks as far as possible (then on distinct brokers); if no
// broker has one racks are ignored; a mix is ErrInvalidAssignment, as in
// Kafka. To add partitions to a topic, pass StartPartition = its current
// count and StartIndex = the index of its partition 0's first replica
// (AddStartIndex).
func AssignReplicas(brokers []BrokerInfo, partitions, replicationFactor int, opts AssignOptions) ([][]int32, error) {
	if partitions <= 0 {
		return nil, fmt.Errorf("%w: %d partitions", ErrInvalidAssignment, partitions)
	}
	if replicationFactor <= 0 {
		return nil, fmt.Errorf("%w: replication factor %d", ErrInvalidAssignment, replicationFactor)
	}
	if replicationFactor > len(brokers) {
		return nil, fmt.Errorf("%w: replication factor %d larger than the %d live brokers", ErrInvalidAssignment, replicationFactor, len(brokers))
	}
	withRack := 0
	for _, b := range brokers {
		if b.Rack != "" {
			withRack++
		}
	}
	if withRack != 0 && withRack != len(brokers) {
		return nil, fmt.Errorf("%w: %d of %d brokers have a rack; either all or none must", ErrInvalidAssignment, withRack, len(brokers))
	}
	list, racks := brokerList(brokers, withRack > 0)
	start := opts.StartIndex
	if start < 0 {
		start = rand.IntN(len(list))
	}
	if racks == nil {
		return assignPlain(list, partitions, replicationFactor, start, opts.StartPartition), nil
	}
	return assignRackAware(list, racks, partitions, replicationFactor, start, opts.StartPartition), nil
}

// AddStartIndex is the StartIndex for adding partitions to t: the position
// of its partition 0's first replica in the broker list AssignReplicas
// uses, or -1 (random) if that broker is not in brokers.
func AddStartIndex(brokers []BrokerInfo, t *TopicInfo) int {
	if len(t.Partitions) == 0 || len(t.Partitions[0].Replicas) == 0 {
		return -1
	}
	withRack := true
	for _, b := range brokers {
		withRack = withRack && b.Rack != ""
	}
	list, _ := brokerList(brokers, withRack && len(brokers) > 0)
	if i := slices.Index(list, t.Partitions[0].Replicas[0]); i >= 0 {
		return i
	}
	return -1
}

// brokerList orders broker IDs as the algorithm wants them: by ID, or
// with racks, alternating racks (rack names sorted, IDs sorted within a
// rack): r1:1, r2:4, r3:7, r1:2, ...
func brokerList(brokers []BrokerInfo, withRacks bool) ([]int32, map[int32]string) {
	ids := make([]int32, len(brokers))
	for i, b := range brokers {
		ids[i] = b.ID
	}
	slices.Sort(ids)
	if !withRacks {
		return ids, nil
	}
	rackOf := map[int32]string{}
	byRack := map[string][]int32{}
	for _, b := range brokers {
		rackOf[b.ID] = b.Rack
		byRack[b.Rack] = append(byRack[b.Rack], b.ID)
	}
	names := make([]string, 0, len(byRack))
	for r, ids := range byRack {
		slices.Sort(ids)
		names = append(names, r)
	}
	sort.Strings(names)
	out := make([]int32, 0, len(brokers))
	next := map[string]int{}
	for i := 0; len(out) < len(brokers); i = (i + 1) % len(names) {
		r := names[i]
		if next[r] < len(byRack[r]) {
			out = append(out, byRack[r][next[r]])
			next[r]++
		}
	}
	return out, rackOf
}

// replicaIndex is the position of a partition's j-th follower.
func replicaIndex(first, shift, j, n int) int {
	s := 1 + (shift+j)%(n-1)
	return (first + s) % n
}

// partitionStarts yields, for partitions startPartition,
// startPartition+1, ... (partitions of them) over a list of n brokers, the
// index of the partition's first replica and the shift of its followers,
// as AdminUtils steps them: first replicas go round-robin from start; the
// shift begins at start and grows by one every n partitions.
func partitionStarts(n, partitions, start, startPartition int) iter.Seq2[int, int] {
	return func(yield func(first, shift int) bool) {
		shift := start
		for p := startPartition; p < startPartition+partitions; p++ {
			if p > 0 && p%n == 0 {
				shift++
			}
			if !yield((p+start)%n, shift) {
				return
			}
		}
	}
}

func assignPlain(list []int32, partitions, rf, start, startPartition int) [][]int32 {
	n := len(list)
	out := make([][]int32, 0, partitions)
	for first, shift := range partitionStarts(n, partitions, start, startPartition) {
		reps := []int32{list[first]}
		for j := 0; j < rf-1; j++ {
			reps = append(reps, list[replicaIndex(first, shift, j, n)])
		}
		out = append(out, reps)
	}
	return out
}

func assignRackAware(list []int32, rackOf map[int32]string, partitions, rf, start, startPartition int) [][]int32 {
	n := len(list)
	numRacks := 0
	seen := map[string]bool{}
	for _, r := range rackOf {
		if !seen[r] {
			seen[r] = true
			numRacks++
		}
	}
	out := make([][]int32, 0, partitions)
	for first, shift := range partitionStarts(n, partitions, start, startPartition) {
		leader := list[first]
		reps := []int32{leader}
		racks := map[string]bool{rackOf[leader]: true}
		used := map[int32]bool{leader: true}
		k := 0
		for j := 0; j < rf-1; j++ {
			for {
				b := list[replicaIndex(first, shift*numRacks, k, n)]
				k++
				// Skip a broker whose rack already has a replica while
				// some rack has none, or that already has one while some
				// broker has none.
				if (!racks[rackOf[b]] || len(racks) == numRacks) && (!used[b] || len(used) == n) {
					reps = append(reps, b)
					racks[rackOf[b]] = true
					used[b] = true
					break
				}
			}
		}
		out = append(out, reps)
	}
	return out
}
