package coord

import (
	"maps"
	"slices"
	"sort"
)

// Snapshot is the cluster state as one session last saw it: what a broker's
// metadata cache needs. Snapshots are immutable once published and shared
// between readers: do not modify one (Clone what you need to change).
type Snapshot struct {
	// ClusterID is the cluster's ID.
	ClusterID string
	// Connected is false while the coordination service is unreachable;
	// the rest is then the last known state.
	Connected bool
	// Brokers are the live (registered) brokers, ordered by ID.
	Brokers []BrokerInfo
	// Controller is the current controller.
	Controller ControllerInfo
	// Topics are the topics by name, without those pending deletion.
	Topics map[string]*TopicInfo
	// PendingDeletion maps topics whose deletion is recorded but not
	// finished to their IDs.
	PendingDeletion map[string]TopicID
	// Seq goes up by one at every published change.
	Seq uint64
}

func emptySnapshot(clusterID string) *Snapshot {
	return &Snapshot{
		ClusterID:       clusterID,
		Controller:      ControllerInfo{ID: NoLeader},
		Topics:          map[string]*TopicInfo{},
		PendingDeletion: map[string]TopicID{},
	}
}

// shallow copies the snapshot's containers; TopicInfo values are shared
// and must be replaced, not modified.
func (s *Snapshot) shallow() *Snapshot {
	c := *s
	c.Brokers = slices.Clone(s.Brokers)
	c.Topics = maps.Clone(s.Topics)
	c.PendingDeletion = maps.Clone(s.PendingDeletion)
	return &c
}

// Broker returns the live broker id.
func (s *Snapshot) Broker(id int32) (BrokerInfo, bool) {
	i, ok := slices.BinarySearchFunc(s.Brokers, id, func(b BrokerInfo, id int32) int { return int(b.ID) - int(id) })
	if !ok {
		return BrokerInfo{}, false
	}
	return s.Brokers[i], true
}

// Live reports whether broker id is registered.
func (s *Snapshot) Live(id int32) bool {
	_, ok := s.Broker(id)
	return ok
}

// Topic returns the topic name.
func (s *Snapshot) Topic(name string) (*TopicInfo, bool) {
	t, ok := s.Topics[name]
	return t, ok
}

// TopicByID returns the topic with the given ID.
func (s *Snapshot) TopicByID(id TopicID) (*TopicInfo, bool) {
	for _, t := range s.Topics {
		if t.ID == id {
			return t, true
		}
	}
	return nil, false
}

// TopicNames lists the topics, sorted.
func (s *Snapshot) TopicNames() []string {
	names := make([]string, 0, len(s.Topics))
	for n := range s.Topics {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Partition returns one partition.
func (s *Snapshot) Partition(tp TopicPartition) (PartitionInfo, bool) {
	t, ok := s.Topics[tp.Topic]
	if !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
		return PartitionInfo{}, false
	}
	return t.Partitions[tp.Partition], true
}

// LedBy lists the partitions whose leader is broker id, sorted.
func (s *Snapshot) LedBy(id int32) []TopicPartition {
	var out []TopicPartition
	for _, name := range s.TopicNames() {
		for i, p := range s.Topics[name].Partitions {
			if p.State.Leader == id {
				out = append(out, TopicPartition{name, int32(i)})
			}
		}
	}
	return out
}

// OfflineReplicas lists the replicas of p whose brokers are not live, as
// Metadata responses report them.
func (s *Snapshot) OfflineReplicas(p PartitionInfo) []int32 {
	var out []int32
	for _, r := range p.Replicas {
		if !s.Live(r) {
			out = append(out, r)
		}
	}
	return out
}
