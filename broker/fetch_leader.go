package broker

import (
	"slices"

	"github.com/stratastream/strata/coord"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// leaderHints collects a Fetch response's KIP-951 leader discovery
// (v16+): the current leader of each partition answered
// NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH, and the addresses of
// those leaders on the request's listener, from one coordinator snapshot.
type leaderHints struct {
	snap  *coord.Snapshot
	nodes map[int32]kmsg.FetchResponseBroker
}

// lookup returns the leader and leader epoch the coordinator knows for
// the partition, as Kafka's getCurrentLeader: -1 and -1 for an unknown
// partition; leader -1 when there is none or it is not live. A live
// leader reachable on lis joins the endpoints.
func (h *leaderHints) lookup(s *Server, topic string, partition int32, lis string) (leader, epoch int32) {
	if h.snap == nil {
		h.snap = s.coord.Snapshot()
	}
	t, ok := h.snap.Topics[topic]
	if !ok || partition < 0 || int(partition) >= len(t.Partitions) {
		return -1, -1
	}
	st := t.Partitions[partition].State
	leader, epoch = st.Leader, st.LeaderEpoch
	if leader == coord.NoLeader || !h.snap.Live(leader) {
		return -1, epoch
	}
	if b, ok := h.snap.Broker(leader); ok {
		if host, port, ok := endpointFor(b, lis); ok {
			if h.nodes == nil {
				h.nodes = map[int32]kmsg.FetchResponseBroker{}
			}
			n := kmsg.NewFetchResponseBroker()
			n.NodeID, n.Host, n.Port, n.Rack = leader, host, port, rackOf(b)
			h.nodes[leader] = n
		}
	}
	return leader, epoch
}

// endpoints returns the collected leaders' addresses by node id.
func (h *leaderHints) endpoints() []kmsg.FetchResponseBroker {
	if len(h.nodes) == 0 {
		return nil
	}
	out := make([]kmsg.FetchResponseBroker, 0, len(h.nodes))
	for _, n := range h.nodes {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b kmsg.FetchResponseBroker) int { return int(a.NodeID) - int(b.NodeID) })
	return out
}
