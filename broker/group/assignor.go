package group

import "sort"

// Server-side assignors of consumer groups (ServerAssignor in
// ConsumerGroupHeartbeat), by Kafka's names.
const (
	AssignorUniform = "uniform"
	AssignorRange   = "range"
)

// assignInput is what an assignor computes a target assignment from.
type assignInput struct {
	members []*consumerMember       // ordered by id
	topics  map[string]TopicMeta    // the subscribed topics that exist
	prev    map[string]partitionSet // the previous target, for stickiness
}

// assignFunc computes a target assignment: every partition of a
// subscribed topic goes to exactly one member subscribing to it.
type assignFunc func(in assignInput) map[string]partitionSet

func assignorFunc(name string) assignFunc {
	switch name {
	case AssignorRange:
		return assignRange
	default:
		return assignUniform
	}
}

// sortedTopics returns the topics ordered by name.
func (in assignInput) sortedTopics() []TopicMeta {
	ts := make([]TopicMeta, 0, len(in.topics))
	for _, t := range in.topics {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	return ts
}

func emptyAssignment(members []*consumerMember) map[string]partitionSet {
	out := make(map[string]partitionSet, len(members))
	for _, m := range members {
		out[m.id] = make(partitionSet)
	}
	return out
}

// assignRange is Kafka's server-side range assignor: per topic, the
// members subscribing to it in id order each take a contiguous range of
// partitions, the first ones one more when the count does not divide.
func assignRange(in assignInput) map[string]partitionSet {
	out := emptyAssignment(in.members)
	for _, t := range in.sortedTopics() {
		var subs []*consumerMember
		for _, m := range in.members {
			if m.subscribes(t.Name) {
				subs = append(subs, m)
			}
		}
		if len(subs) == 0 {
			continue
		}
		n := int32(len(subs))
		per, extra := t.Partitions/n, t.Partitions%n
		next := int32(0)
		for i, m := range subs {
			count := per
			if int32(i) < extra {
				count++
			}
			for p := next; p < next+count; p++ {
				out[m.id][topicPartition{t.ID, p}] = struct{}{}
			}
			next += count
		}
	}
	return out
}

// assignUniform is the uniform assignor: partitions spread as evenly as
// the subscriptions allow, each partition staying with its previous
// target owner when that keeps the balance (sticky), so a member joining
// or leaving moves as few partitions as possible. Members with the same
// subscriptions end up with counts that differ by at most one.
func assignUniform(in assignInput) map[string]partitionSet {
	out := emptyAssignment(in.members)
	byID := make(map[string]*consumerMember, len(in.members))
	for _, m := range in.members {
		byID[m.id] = m
	}
	type part struct {
		tp      topicPartition
		name    string
		members []string // eligible, in id order
	}
	var parts []part
	for _, t := range in.sortedTopics() {
		var eligible []string
		for _, m := range in.members {
			if m.subscribes(t.Name) {
				eligible = append(eligible, m.id)
			}
		}
		if len(eligible) == 0 {
			continue
		}
		for p := int32(0); p < t.Partitions; p++ {
			parts = append(parts, part{tp: topicPartition{t.ID, p}, name: t.Name, members: eligible})
		}
	}
	// Keep the previous owners that are still members and subscribe.
	prevOwner := make(map[topicPartition]string)
	for id, set := range in.prev {
		if byID[id] == nil {
			continue
		}
		for tp := range set {
			prevOwner[tp] = id
		}
	}
	holder := make(map[topicPartition]string, len(parts))
	count := make(map[string]int, len(in.members))
	var free []part
	for _, p := range parts {
		if id, ok := prevOwner[p.tp]; ok && byID[id].subscribes(p.name) {
			holder[p.tp] = id
			count[id]++
			continue
		}
		free = append(free, p)
	}
	least := func(ids []string) string {
		best := ids[0]
		for _, id := range ids[1:] {
			if count[id] < count[best] {
				best = id
			}
		}
		return best
	}
	for _, p := range free {
		id := least(p.members)
		holder[p.tp] = id
		count[id]++
	}
	// Balance: move a partition from a member to an eligible one that has
	// at least two fewer, until no such move is left. Each move lowers
	// the sum of squared counts, so the loop ends.
	for moved := true; moved; {
		moved = false
		for _, p := range parts {
			from := holder[p.tp]
			to := least(p.members)
			if count[to] < count[from]-1 {
				holder[p.tp] = to
				count[from]--
				count[to]++
				moved = true
			}
		}
	}
	for _, p := range parts {
		out[holder[p.tp]][p.tp] = struct{}{}
	}
	return out
}

// preferredAssignor is the assignor most members asked for, the first
// configured one when none did (Kafka's computePreferredServerAssignor);
// ties go to the name that sorts first.
func preferredAssignor(members []*consumerMember, configured []string) string {
	votes := make(map[string]int)
	for _, m := range members {
		if m.assignor != "" {
			votes[m.assignor]++
		}
	}
	best := ""
	for name, n := range votes {
		if best == "" || n > votes[best] || (n == votes[best] && name < best) {
			best = name
		}
	}
	if best != "" {
		return best
	}
	if len(configured) > 0 {
		return configured[0]
	}
	return AssignorUniform
}
