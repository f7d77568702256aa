package replica

import (
	"context"

	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/segment"
)

// This file is everything replication needs from the broker, as
// interfaces the broker implements: the hosted partitions and the
// cluster metadata (Host), and each partition's append lock and producer
// state (Appender).

// Host is the broker as the Manager sees it.
type Host interface {
	// Coordinator is where the partitions' leadership and ISR live.
	Coordinator

	// Partitions returns every partition this broker hosts, ordered by
	// topic name and then partition index.
	Partitions() []*Partition

	// Partition finds partition index of topic. exists is false when
	// the cluster has no such partition as far as this broker knows;
	// p is nil when it exists but this broker hosts no replica of it.
	Partition(topic string, index int32) (p *Partition, exists bool)
}

// Coordinator is the part of coord.Coordinator that replication uses;
// its methods keep coord.Coordinator's contracts. The Host may resolve
// it lazily: the Manager is created before the broker opens its
// coordinator, and uses it only for partitions the Host has returned.
type Coordinator interface {
	// Snapshot is the metadata cache: follower liveness (an ISR is not
	// expanded with a broker that is not registered) and the leaders'
	// replication addresses.
	Snapshot() *coord.Snapshot

	// PartitionState reads a partition's state and its znode version,
	// after an ISR write lost a compare-and-set.
	PartitionState(ctx context.Context, topic string, partition int32) (coord.PartitionState, int32, error)

	// UpdatePartitionState writes a partition's state if its version is
	// still version and returns the new version; coord.ErrVersionConflict
	// if it is not.
	UpdatePartitionState(ctx context.Context, topic string, partition int32, st coord.PartitionState, version int32) (int32, error)
}

// Appender is the broker's side of one hosted partition: the lock that
// every append to its log takes (produce, group commits, replication),
// and the idempotent-producer state kept beside the log.
//
// The lock comes before Partition's own lock (lock order in
// partition.go). Replication holds it while it appends, truncates, or
// assigns a leader epoch in the log, so none of these interleaves with a
// produce.
type Appender interface {
	// Lock and Unlock take and release the partition's append lock.
	Lock()
	Unlock()

	// AppendReplicatedLocked appends batches from the leader verbatim
	// (segment.Log.AppendReplicated: CRC-checked, contiguous) and
	// records their producers. The caller holds the lock.
	AppendReplicatedLocked(batches []byte) error

	// ReloadProducersLocked rebuilds the producer state from the log
	// after replication truncated it. The caller holds the lock.
	ReloadProducersLocked() error

	// RemoteStateAt returns what the object store holds of the
	// partition's log below offset, for a replica about to start over
	// at offset (the leader's local log start): the zero RemoteState
	// when the partition has nothing in a store. It is called without
	// the lock and may block on the store until ctx ends.
	RemoteStateAt(ctx context.Context, offset int64) (RemoteState, error)

	// StartOverLocked replaces the log by an empty one that starts at
	// offset (segment.Log.TruncateFullyAndStartAt) and seeds it with st:
	// its leader epochs go into the epoch cache and its producer
	// snapshot becomes the producer state at offset. The caller holds
	// the lock.
	StartOverLocked(offset int64, st RemoteState) error
}

// RemoteState is the object store's part of a tiered partition's log
// below the offset where a new replica starts (KIP-1023: a follower of a
// tiered topic copies only the leader's local log and builds the rest of
// its state from the store, as Kafka's buildRemoteLogAuxState does), so
// the replica answers OffsetForLeaderEpoch for the whole log and knows
// the idempotent producers whose last batches are only in the store.
type RemoteState struct {
	// Epochs are the leader epochs that began below the offset, oldest
	// first.
	Epochs []segment.EpochEntry
	// ProducerSnapshot is the producer state at exactly the offset (the
	// snapshot uploaded with the remote segment that ends there), nil
	// when the store has none there.
	ProducerSnapshot []byte
}
