// Package group is Strata's consumer group coordinator: the group state
// machine of Kafka's classic protocol (JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup), the consumer groups of KIP-848 (ConsumerGroupHeartbeat,
// ConsumerGroupDescribe), committed offsets (OffsetCommit, OffsetFetch,
// OffsetDelete, and TxnOffsetCommit with the transaction markers that
// complete it), group administration (DescribeGroups, ListGroups,
// DeleteGroups), and their durability in the internal topic
// __consumer_offsets. It knows nothing of sockets: the Kafka server decodes
// each request with kmsg, calls the Coordinator method of its API and
// encodes the kmsg response it gets back.
//
// # Calling the coordinator
//
//	c, err := group.New(cfg)                  // owns no partition yet
//	rep, err := c.Load(p, log)                // each partition of __consumer_offsets this broker leads
//	ctx = group.WithClient(ctx, group.Client{ID: clientID, Host: "/" + ip})
//	resp := c.JoinGroup(ctx, req)             // and the other methods, one per API
//	c.Unload(p)                               // leadership of p moved away
//	c.Close()                                 // shutdown, before closing the logs
//
// Every method takes a decoded request of any version listed by APIs() and
// returns the response of the same version, never nil. JoinGroup, SyncGroup,
// OffsetCommit, DeleteGroups and OffsetDelete block (for the rebalance, the
// leader's assignment, or the append to the log); the others return at
// once. Run each request in its own goroutine and cancel its ctx when the
// connection closes: an abandoned JoinGroup or SyncGroup is withdrawn from
// the group (the response then returned is not meant to be sent). Close
// answers every waiting request. Groups are served only for partitions
// loaded with Load: others get NOT_COORDINATOR, a loading one
// COORDINATOR_LOAD_IN_PROGRESS, everything after Close
// COORDINATOR_NOT_AVAILABLE.
//
// # Group states
//
// A group is Empty when created (by a first JoinGroup, or by a commit of a
// group that does not exist) and moves as Kafka's does:
//
//	        join                      all members joined, or rebalance timeout
//	Empty ────────► PreparingRebalance ─────────────────────► CompletingRebalance
//	  ▲               │  ▲     ▲                                  │       │
//	  │ nobody left   │  │     │ join with new protocols, leave,  │       │ leader's SyncGroup
//	  └───────────────┘  │     │ session expiry, sync timeout     │       │ appended to the log
//	                     │     └──────────────────────────────────┘       ▼
//	                     └──── leader's join, new protocols, leave, ──── Stable
//	                           session expiry, sync timeout
//
//	Empty ──► Dead: DeleteGroups, or its offsets expired. Any ──► Dead: Unload, Close.
//
// PreparingRebalance waits until every member has sent JoinGroup again
// (and every member id handed out with MEMBER_ID_REQUIRED has come back or
// expired), or until the longest rebalance timeout of the members passes;
// dynamic members that did not rejoin are then dropped. Coming from Empty
// it first waits group.initial.rebalance.delay.ms, again each time a new
// member arrives, up to the rebalance timeout. Completing the join phase
// bumps the generation, selects the protocol (among those every member
// supports, the one most members prefer) and answers every waiting
// JoinGroup; the first member to have joined is leader and alone receives
// the member list. In CompletingRebalance, SyncGroups wait for the
// leader's; its assignment is appended to __consumer_offsets, then every
// member gets its own part and the group is Stable. Members that do not
// sync within the rebalance timeout are dropped and the group rebalances.
// A member whose heartbeats stop for its session timeout is dropped (not
// while its JoinGroup or SyncGroup waits). A static member (KIP-345) that
// restarts takes over its old member's place under a new member id; the
// old id is fenced, and a Stable group does not rebalance for it.
//
// # Consumer groups (KIP-848)
//
// A consumer group is driven by its members' heartbeats; the server
// assigns. Three epochs order everything: the group epoch goes up when a
// member joins or leaves, a subscription changes, or the subscribed
// topics change (created, deleted, more partitions: the coordinator
// resolves subscriptions against Config.Topics, topic names and regular
// expressions matching whole names); the target assignment, computed by
// the assignor (uniform or range, the one most members name) when the
// group epoch passed it, carries the group epoch it was computed at; each
// member's epoch says which target it has reconciled to.
//
//	member heartbeat ──► subscription changed? ──► group epoch + 1
//	                 ──► group epoch > target epoch? ──► new target
//	                 ──► reconcile the member towards its target:
//
//	  Stable ──(target epoch moved)──► revoke partitions not in the target?
//	     ▲                              │ yes: UnrevokedPartitions, same epoch,
//	     │                              │      until the heartbeat no longer
//	     │                              │      lists them (or the rebalance
//	     │                              │      timeout removes the member)
//	     │                              ▼ no: member epoch = target epoch,
//	     └──────── all target partitions free ◄── new partitions only if no
//	                                              one else owns them, else
//	                                              UnreleasedPartitions
//
// The coordinator keeps the owner of every partition (a member's assigned
// and revoking partitions), so a partition is never given to a member
// while another still has it. A member whose heartbeats stop for the
// session timeout, or who leaves (epoch -1), is removed and its partitions
// are free; a static member (instance id) leaving with epoch -2 keeps its
// assignment, unavailable to others, until it rejoins under a new member
// id (it inherits the assignment) or its session times out. An Empty
// classic group becomes a consumer group on a first heartbeat and an
// empty consumer group a classic one on a JoinGroup, keeping its offsets;
// groups with members convert under group.consumer.migration.policy
// (online migration: consumer_migration.go, consumer_classic.go).
//
// # Records in __consumer_offsets
//
// Group ids map to partitions as in Kafka (PartitionFor). Every write is
// one uncompressed record batch v2 (no producer id, timestamps from
// Config.Now) appended to the group's partition: an OffsetCommit one
// record per partition, a group change one record, a deletion the
// tombstones together. A TxnOffsetCommit is the same offset records in a
// transactional batch of the producer (its id and epoch, base sequence
// -1); the transaction's COMMIT or ABORT control batch, which the
// transaction coordinator has the partition leader append, ends it. A tombstone is a record with a null value; the last
// record of a key wins. The keys and values are Kafka's own schemas
// (OffsetCommitKey/Value, GroupMetadataKey/Value, encoded by kmsg): each
// begins with an int16 version that says what follows, so the format is
// versioned and Kafka's tools can read it. Strings are an int16 length and
// UTF-8 bytes (length -1: null, in the fields marked nullable); bytes are
// an int32 length and the bytes; integers are big-endian.
//
//	offset key, version 1 (0 is read the same way)
//	+-----------+---------------+---------------+-----------------+
//	| version=1 | group         | topic         | partition       |
//	| int16     | string        | string        | int32           |
//	+-----------+---------------+---------------+-----------------+
//
//	offset value, version 3 (written unless the commit had a retention time)
//	+-----------+--------------+----------------+----------+---------------+
//	| version=3 | offset       | leader epoch   | metadata | commit time   |
//	| int16     | int64        | int32 (-1:none)| string   | int64 ms      |
//	+-----------+--------------+----------------+----------+---------------+
//
//	offset value, version 1 (OffsetCommit v2-v4 with a retention time)
//	+-----------+--------------+----------+---------------+---------------+
//	| version=1 | offset       | metadata | commit time   | expire time   |
//	| int16     | int64        | string   | int64 ms      | int64 ms      |
//	+-----------+--------------+----------+---------------+---------------+
//
//	group key, version 2
//	+-----------+---------------+
//	| version=2 | group         |
//	| int16     | string        |
//	+-----------+---------------+
//
//	group value, version 3
//	+-----------+---------------+------------+-------------------+-------------------+----------------+---------------+
//	| version=3 | protocol type | generation | protocol          | leader            | state time     | member count  |
//	| int16     | string        | int32      | nullable string   | nullable string   | int64 ms       | int32         |
//	+-----------+---------------+------------+-------------------+-------------------+----------------+---------------+
//	then per member:
//	+-----------+-------------------+-----------+-------------+-------------------+-----------------+--------------+------------+
//	| member id | instance id       | client id | client host | rebalance timeout | session timeout | subscription | assignment |
//	| string    | nullable string   | string    | string      | int32 ms          | int32 ms        | bytes        | bytes      |
//	+-----------+-------------------+-----------+-------------+-------------------+-----------------+--------------+------------+
//
// The group value is written when the leader's assignment is stored (the
// members with their metadata for the selected protocol and their
// assignments), when a static member is replaced without a rebalance, and
// when the group becomes Empty (no members, null protocol and leader).
//
// Consumer groups are written as Kafka's group coordinator writes them,
// with key types 3 to 8 (ConsumerGroup*Key, version 3-8, strings as
// above) and values of version 0 in Kafka's flexible encoding: compact
// strings and arrays (an unsigned varint of length+1, 0 for null),
// 16-byte topic ids, big-endian integers, and after every struct a
// tagged-field section (an unsigned varint count of (tag, size, bytes)),
// written empty and skipped when read.
//
//	key                                         value (version 0)
//	3 group                 ConsumerGroupMetadata  epoch int32
//	4 group                 PartitionMetadata      [topic id, name, partitions int32, [] racks]
//	5 group, member         MemberMetadata         instance id?, rack id?, client id, client host,
//	                                               [topic names], regex?, rebalance timeout int32,
//	                                               server assignor?
//	6 group                 TargetAssignmentMetadata  assignment epoch int32
//	7 group, member         TargetAssignmentMember    [topic id, [partition int32]]
//	8 group, member         CurrentMemberAssignment   member epoch, previous epoch int32, state int8,
//	                                                  [assigned], [pending revocation]
//
// After each change the group appends the records whose value differs
// from what it last wrote, in one batch, and a heartbeat is answered
// once the batch is appended. A removed member gets tombstones of its
// keys 5, 7 and 8; a deleted consumer group, or one that becomes a
// classic group, of all its keys; a classic group that becomes a
// consumer group a tombstone of its group key. Load rebuilds a consumer
// group from its records: epochs, topic metadata, members with their
// targets and current assignments, the owners of their partitions, and
// sessions restarted, so members heartbeat on to the new coordinator
// without rejoining.
// Share groups (KIP-932) are written the same way with key types 10 to
// 15 (ShareGroup*Key), values of version 0. Package share owns their
// membership and hands it over as a ShareGroupState; StoreShareGroup
// appends the records whose value differs from the previous state, in
// Kafka's order (a removed member's tombstones, subscriptions, epoch,
// targets, target epoch, current assignments, state partitions), and a
// deleted group's tombstones. Load gives the share groups it replayed
// back in LoadReport.ShareGroups; they make no group of this package.
//
//	key                                         value (version 0)
//	10 group, member        MemberMetadata         rack id?, client id, client host, [topic names]
//	11 group                ShareGroupMetadata     epoch int32 (tag 0: metadata hash int64, skipped)
//	12 group                TargetAssignmentMetadata  assignment epoch int32
//	13 group, member        TargetAssignmentMember    [topic id, [partition int32]]
//	14 group, member        CurrentMemberAssignment   member epoch, previous epoch int32, state int8,
//	                                                  [assigned]
//	15 group                StatePartitionMetadata    [initializing: topic id, name, [partition]],
//	                                                  [initialized: same], [deleting: topic id, name]
//
// Load replays a partition from its start: offsets and groups come back,
// a group with members as Stable at its generation with its sessions
// restarted. Values of versions 0-4 are read; other key or value versions
// are skipped and counted in the LoadReport.
//
// # Offsets in transactions
//
// A transactional commit is held pending per (group, producer) from its
// append until the producer's marker: OffsetFetch does not show it, and
// with require_stable answers UNSTABLE_OFFSET_COMMIT for its partitions.
// TxnMarker, called once the marker is durable in the partition, applies
// a COMMIT's offsets unless the group holds a commit of the same
// partition that is newer in log order (each offset remembers the log
// offset of its batch, as Kafka's CommitRecordMetadataAndOffset does), and
// drops an ABORT's. Load replays the same way: transactional offset
// records wait per producer for the control batch that ends them, a
// COMMIT applies them with the same log-order rule, an ABORT drops them,
// and those whose marker is not in the log stay pending after the load. A
// marker announced while the partition loads is applied when the load
// ends (the replay may have read it already; the second application finds
// nothing). A group tombstone drops the group's pending offsets (DeleteGroups
// kills the group in memory); offset tombstones leave them pending.
//
// # Compaction
//
// The log is compacted, never trimmed by retention: the server keeps
// __consumer_offsets with retention.ms=-1 and retention.bytes=-1, and the
// log cleaner keeps the last record of every key. Every deletion is
// therefore a tombstone of the key it deletes, as Kafka's
// GroupMetadataManager writes them: an offset key with a null value for
// each offset that expires (offsets.retention.minutes, KIP-211: counted
// from when a group with a protocol type became Empty, from each commit
// for a group that only commits, from each commit for the topics no member
// of a Stable "consumer" group subscribes to, and of a KIP-848 consumer
// group, with members or not, as Kafka's ConsumerGroup; at the commit's own expire
// time for OffsetCommit v2-v4 with a retention time), for each offset
// OffsetDelete deletes, for each offset of a group DeleteGroups deletes
// and for each offset of a deleted topic (DeleteTopicOffsets, Kafka's
// cleanupGroupMetadata on partitions deleted); a group key with a null
// value when a group is deleted, or expires (or loses its last offsets
// to a topic deletion) Empty with no offsets left. The cleaner keeps a tombstone for
// delete.retention.ms after the cleaning that first kept it, long enough
// for a coordinator loading the partition to see it, then removes it with
// the records it deleted. Load replays a compacted partition as any
// other: the offsets the cleaner removed are gaps that the reads skip,
// up to the log end when the last records were removed, and a key whose
// records are all gone was deleted.
//
// # Locks
//
// Coordinator.mu guards the partition and group maps; each group's mu its
// state; each partition writer's mu its queue. Order: group.mu, then
// Coordinator.mu or writer.mu; never the reverse, and no lock is held
// during an Append. The writer applies a write's effect on memory after
// its append returned, in log order, so memory never shows what the log
// does not hold, and both agree on the order of writes.
package group
