// Package sharestate is Strata's share coordinator (KIP-932): it keeps the
// state of every share partition (which records of a share group's view of
// a topic partition are acknowledged, archived or still to deliver, and
// how often each was delivered) durable in the internal topic
// __share_group_state, and answers the share coordinator RPCs
// (InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState,
// DeleteShareGroupState, ReadShareGroupStateSummary).
//
// Share groups reach it through the Persister interface, which the broker
// implements by routing each request to the coordinator of its share
// partitions; *Coordinator is itself a Persister of the partitions loaded
// into it.
//
// # Calling the coordinator
//
//	c, err := sharestate.New(cfg)    // owns no partition yet
//	rep, err := c.Load(p, log)       // each partition of __share_group_state this broker leads
//	resp, _ := c.WriteShareGroupState(ctx, req) // and the other RPCs
//	c.Unload(p)                      // leadership of p moved away
//	c.Close()
//
// A share partition (group id, topic id, partition) lives in partition
// abs(hashCode("group:topicId:partition")) % n of __share_group_state, as
// Kafka's ShareCoordinatorService places it (PartitionFor). Share
// partitions of a partition not loaded get NOT_COORDINATOR, of one being
// loaded COORDINATOR_LOAD_IN_PROGRESS, everything after Close
// COORDINATOR_NOT_AVAILABLE. A write answers after its record is appended
// and replicated (the Log's Append, acks=all); on failure memory is left
// as it was.
//
// # Records
//
// Kafka's share-coordinator records (share-coordinator/src/main/resources/
// common/message), one per record of the compacted topic, big-endian:
//
//	key (not flexible)
//	  int16  type          0: ShareSnapshotKey, 1: ShareUpdateKey
//	  int16  len | bytes   GroupId
//	  [16]byte             TopicId
//	  int32                Partition
//
//	value (version 0, flexible)
//	  int16  version       0
//	  uint16               SnapshotEpoch
//	  int32                StateEpoch        (snapshot only)
//	  int32                LeaderEpoch
//	  int64                StartOffset
//	  uvarint n+1          StateBatches, n of:
//	    int64 FirstOffset | int64 LastOffset | int8 DeliveryState | int16 DeliveryCount | uvarint 0 (tags)
//	  uvarint              tagged fields: tag 0 (4 bytes, int32) DeliveryCompleteCount when known
//
//	for example the snapshot {epoch 1, state epoch 2, leader epoch 3, start 4, [5..6 acked, count 1]}:
//	  00 00 | 00 01 | 00 00 00 02 | 00 00 00 03 | 00..00 04 | 02 |
//	  00..00 05 | 00..00 06 | 02 | 00 01 | 00 | 00
//
// DeliveryState is 0 available, 2 acknowledged, 3 archiving (KIP-1191:
// on its way to the group's dead-letter topic), 4 archived; acquired
// records (1) are written as available. A null value
// is a tombstone. The delivery-complete count (WriteShareGroupState v1,
// ReadShareGroupStateSummary v1) is a Strata tagged field, which Kafka's
// readers skip.
//
// # Writes
//
// A write of a share partition is a ShareUpdate record unless the share
// partition has no state yet, its state epoch changes, or
// UpdatesPerSnapshot updates were written since its last snapshot: then a
// ShareSnapshot with the whole state and the next snapshot epoch. Replay
// takes a snapshot as the state and merges an update of the same snapshot
// epoch into it (its batches override the offsets they cover; offsets
// below the start offset are dropped). Kafka's update records carry only
// their write's batches, which compaction (it keeps one record per key)
// would lose; Strata's carry every batch written since the snapshot, so
// the last update record alone restores them, and replaying every update
// in order gives the same state as Kafka's rule. Initialize writes a
// snapshot at the new state epoch and start offset; Delete writes
// tombstones for both keys.
//
// Fencing, as Kafka's share coordinator: a Write or Read with a leader
// epoch older than the last written or read is FENCED_LEADER_EPOCH (-1 is
// not checked; the epochs Read saw are kept in memory only), a Write or
// Initialize with a state epoch older than the stored one
// FENCED_STATE_EPOCH, a zero topic id or negative partition
// INVALID_REQUEST, a topic partition Config.PartitionExists does not know
// UNKNOWN_TOPIC_OR_PARTITION.
package sharestate
