package share

import "slices"

// AssignorName is the assignor share groups use, as ShareGroupDescribe
// names it.
const AssignorName = "simple"

// assign is the simple assignor of KIP-932: for every topic, the members
// subscribed to it (sorted by id) share its partitions. With no more
// members than partitions, partition i goes to member i mod members, so
// each member gets all but at most one of an even share; with more
// members than partitions, member i gets partition i mod partitions, so
// a partition goes to several members and each member gets one. members
// maps a member id to its subscribed topic names; partitions returns a
// topic's partition count (0 for a topic that does not exist).
func assign(members map[string][]string, partitions func(topic string) int32) map[string]map[string][]int32 {
	subs := map[string][]string{}
	ids := make([]string, 0, len(members))
	for id := range members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		for _, t := range members[id] {
			subs[t] = append(subs[t], id)
		}
	}
	out := make(map[string]map[string][]int32, len(members))
	for _, id := range ids {
		out[id] = map[string][]int32{}
	}
	for t, ms := range subs {
		n := int(partitions(t))
		if n <= 0 {
			continue
		}
		if len(ms) <= n {
			for p := 0; p < n; p++ {
				id := ms[p%len(ms)]
				out[id][t] = append(out[id][t], int32(p))
			}
			continue
		}
		for i, id := range ms {
			out[id][t] = append(out[id][t], int32(i%n))
		}
	}
	return out
}
