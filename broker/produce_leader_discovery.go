package broker

import (
	"slices"

	"github.com/stratastream/strata/coord"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceLeaderDiscoveryVersion is the first Produce version whose
// response carries CurrentLeader and NodeEndpoints (KIP-951).
const produceLeaderDiscoveryVersion = 10

// addProduceLeaders is KIP-951's leader discovery in a Produce response
// of version 10 or later, as Kafka's KafkaApis.handleProduceRequest: each
// partition answered NOT_LEADER_OR_FOLLOWER (or FENCED_LEADER_EPOCH,
// which Produce does not answer today) carries the partition's current
// leader and leader epoch as this broker last learned them from the
// coordinator (leader -1 when it has none), (-1, -1) when the partition
// is unknown; the response's
// NodeEndpoints carry the address, on the listener lis the request came
// in on, of each such leader that is alive and has that listener (Kafka's
// getAliveBrokerNode), once. A client then goes to the new leader
// without waiting for a metadata refresh. Older versions are unchanged.
// snapshot (the coordinator's) is called only when a partition needs it.
func addProduceLeaders(snapshot func() *coord.Snapshot, lis string, resp *kmsg.ProduceResponse) {
	if resp.Version < produceLeaderDiscoveryVersion {
		return
	}
	var snap *coord.Snapshot
	for ti := range resp.Topics {
		rt := &resp.Topics[ti]
		for pi := range rt.Partitions {
			sp := &rt.Partitions[pi]
			if sp.ErrorCode != kerr.NotLeaderForPartition.Code && sp.ErrorCode != kerr.FencedLeaderEpoch.Code {
				continue
			}
			sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = -1, -1
			if snap == nil {
				snap = snapshot()
			}
			p, ok := snap.Partition(coord.TopicPartition{Topic: rt.Topic, Partition: sp.Partition})
			if !ok {
				continue
			}
			leader := p.State.Leader
			sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = leader, p.State.LeaderEpoch
			named := slices.ContainsFunc(resp.Brokers, func(b kmsg.ProduceResponseBroker) bool { return b.NodeID == leader })
			if leader < 0 || named || !snap.Live(leader) {
				continue
			}
			b, ok := snap.Broker(leader)
			if !ok {
				continue
			}
			host, port, ok := endpointFor(b, lis)
			if !ok {
				continue
			}
			nb := kmsg.NewProduceResponseBroker()
			nb.NodeID, nb.Host, nb.Port, nb.Rack = b.ID, host, port, rackOf(b)
			resp.Brokers = append(resp.Brokers, nb)
		}
	}
}
