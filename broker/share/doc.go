// Package share is share groups (KIP-932, "queues for Kafka"): the
// membership of share groups, the share partitions that hand each record
// of a topic partition to one member at a time under an acquisition
// lock, and the share sessions members fetch through. The broker's
// handlers (76_share_group_heartbeat.go to 79_share_acknowledge.go) call
// in; share-partition state is kept durable through a
// sharestate.Persister (the share coordinator).
//
// # Membership
//
// A share group is coordinated by its group coordinator (the leader of
// its __consumer_offsets partition). Members join with ShareGroupHeartbeat
// at epoch 0 with a member id of their own and their subscribed topic
// names, heartbeat every share.heartbeat.interval.ms, and leave at epoch
// -1; a member silent for share.session.timeout.ms is removed. Every
// change of members, subscriptions or the subscribed topics' partition
// counts bumps the group epoch and the simple assignor assigns again:
// each topic's partitions are spread over its subscribers, and when
// members outnumber partitions a partition goes to several members.
// There is no revocation: a member's epoch moves to the assignment's on
// its next heartbeat, and a partition may be fetched by its old and new
// members alike; the acquisition locks keep records apart.
//
// Membership lives in memory on the coordinator and is kept durable in
// __consumer_offsets (Config.Store: the group coordinator, package group,
// which owns the records' encoding and the partition's log). Every
// change of a group (created, members, subscriptions, epochs,
// assignments) is appended as the records that differ from what the log
// holds, with Kafka's ShareGroup* record types, before the heartbeat is
// answered. A group outlives its members: without them it is Empty
// (listed, described, its id refused to classic and consumer groups)
// until Delete tombstones its records. Restore, called when the
// coordinator loads a partition, brings its groups back at their epochs
// with their members, whose sessions start at the load, as Kafka's
// coordinator does: members heartbeat on, and the gone ones expire.
//
// Where each fact lives: the membership (epochs, members, assignments)
// in Groups; what the log holds of each group (shareGroup.written, to
// compute the next records) in Groups too; the record layouts, the
// append and the replay in package group (share_records.go); the
// share-partition state in the share coordinator (sharestate).
//
// # Share partitions
//
// A share partition is one group's view of one topic partition, kept by
// the partition's leader:
//
//	         start                            end
//	           |                               |
//	...done... | in flight: a record each      | never acquired
//	  (acked   | AVAILABLE ACQUIRED ACKNOWLEDGED| (available)
//	/archived) | ARCHIVED                      |
//
// Records move between states so:
//
//	AVAILABLE --acquire--> ACQUIRED (delivery count + 1, locked for
//	                                 record.lock.duration)
//	ACQUIRED --ACCEPT--> ACKNOWLEDGED
//	ACQUIRED --REJECT, GAP--> ARCHIVED
//	ACQUIRED --RELEASE, lock expiry, session close, member gone-->
//	         AVAILABLE, or ARCHIVED at group.share.delivery.count.limit
//	ACQUIRED --RENEW--> ACQUIRED (lock restarted)
//
// With a dead-letter topic (errors.deadletterqueue.topic.name, KIP-1191)
// a REJECT and the delivery limit go to ARCHIVING instead, which holds
// the start offset; once the broker wrote the record's copy to the
// topic it becomes ARCHIVED (dead_letter.go says in which order the
// states are persisted).
//
// The start offset moves over acknowledged and archived records at the
// front. At most group.share.partition.max.record.locks records are in
// flight (end - start); past that only released records inside the
// window are acquired. Acquisition works on the record batches the
// broker read from the log at FetchOffset (the first available record,
// else end): offsets in control batches and in gaps between batches
// (compacted away) are archived as they are passed; a gap longer than
// the window waits until the window empties and is then skipped. A share partition
// without state starts by share.auto.offset.reset: latest (the high
// watermark, the default), earliest (the log start, remote included),
// or by_duration:<ISO-8601> (the first offset at or after now minus the
// duration).
//
// # Persistence
//
// On first use at a leader epoch the share partition is read with
// ReadShareGroupState (UNKNOWN_TOPIC_OR_PARTITION or a negative start
// offset: InitializeShareGroupState at the reset offset). Every
// acknowledgement is written with WriteShareGroupState before its
// answer; a failed write undoes it and answers the persister's error
// (COORDINATOR_NOT_AVAILABLE for a call that failed). Releases and lock
// expiries are written when they happen, without a request waiting: a
// failed write marks the partition unsaved and the sweeper writes it
// again every second until one succeeds. Until then the share
// coordinator is behind: a new leader may deliver a record once more,
// never lose an acknowledgement. The write is the whole window (start offset and one
// state batch per run of equal state and delivery count; acquired
// records as available, a lock does not outlive its leader). A new
// leader epoch drops the share partition and reads it again.
//
// # Share sessions
//
// ShareFetch at ShareSessionEpoch 0 opens a session for (group, member)
// on this broker with the request's partitions; each later request
// carries the next epoch and adds partitions (ForgottenTopicsData
// removes them); -1 closes the session and releases the records the
// member holds in its partitions, as does the close of the connection
// that opened it. ShareAcknowledge needs an open session. A member that
// leaves or is removed has its sessions on the coordinator's broker
// closed and its records there released; other leaders release them
// when its sessions there close or the locks expire.
//
// Under share.isolation.level=read_committed the read stops at the last
// stable offset and the batches of aborted transactions are archived
// unseen, as in Kafka.
//
// Group ids are one namespace: the broker refuses a share group's id on
// JoinGroup, ConsumerGroupHeartbeat and the offset APIs (OffsetCommit,
// TxnOffsetCommit, OffsetFetch, OffsetDelete), and a classic or consumer
// group's id on a share join. Not done: ShareGroupStatePartitionMetadata
// is read, replayed and tombstoned but not written (partition leaders
// initialize share state on first use, unknown to the coordinator).
//
// Lock order: Manager.mu before a Partition's mu; Sessions.mu is a
// leaf, and Groups.mu is one within this package: it is held while
// Store queues a group's records (taking the group coordinator's
// locks, never I/O), so the log holds a group's changes in the order
// they were made; the coordinator never calls into Groups. A
// Partition's mu is held across its own Persister writes, so one
// partition's writes apply in order; no lock of the Manager is held
// across I/O.
package share
