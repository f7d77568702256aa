// Package producer owns the broker's producer state: the allocation of
// producer ids (InitProducerId) and, per partition, the sequence
// bookkeeping that turns a producer's retries into exactly-once appends
// and the producers' open transactions that hold the last stable offset,
// with its snapshots and its rebuild from the log.
//
// It knows record batches only through package segment's header; it does not
// append, read or own segment files, and it knows nothing of connections.
// The server (package broker) wires it in.
//
// # Producer ids
//
// An IDAllocator hands out producer ids from blocks that a BlockSource
// reserves durably before any id of the block is used. FileBlockSource keeps
// the end of the last reserved block in one small file in the data directory,
// replaced atomically (temp file, fsync, rename, fsync directory); after a
// restart, or a crash between a reservation and the use of its ids, the next
// block starts past everything ever reserved, so ids are never handed out
// twice. Unused ids of a block are skipped, never reused. There is no
// cluster-wide allocator: each broker keeps its own FileBlockSource, and the
// broker (package broker) wraps it in a BlockSource that places broker b's
// ids at b·2^32 + n, so brokers never hand out the same id and never need to
// ask each other.
//
// InitProducerId (versions 0 to 4) is answered by IDAllocator.InitProducerID:
//
//   - no transactional id, no producer id: a new id, epoch 0.
//   - no transactional id, producer id and epoch given (v3+, KIP-360): the
//     same id with the epoch bumped by one, provided the id is one this
//     broker can have issued (below its next id); when the epoch is
//     exhausted (>= 32766, Kafka's rule) or the id is unknown, a new id with
//     epoch 0. Only one of the two set: INVALID_REQUEST, as Kafka does.
//     (Real idempotent producers bump their epoch locally and only ask here
//     when it is exhausted; Kafka itself always gives a new id.)
//   - a transactional id: the server hands the request to the transaction
//     coordinator (package txn), which takes new producer ids from the
//     same allocator (IDAllocator.Next). InitProducerID itself refuses one
//     with COORDINATOR_NOT_AVAILABLE (retriable: the client looks the
//     coordinator up again); the empty string is INVALID_REQUEST, as in
//     Kafka.
//   - the block source failing: COORDINATOR_LOAD_IN_PROGRESS (retriable),
//     as Kafka does when no id block is available.
//
// # Per-partition state
//
// A StateManager keeps, for each producer id seen in a partition, its epoch
// and the metadata of its last five batches (first and last sequence, first
// and last offset, max timestamp). Check runs before an append, Update after
// it. The rules, Kafka's since 2.5 (KIP-360):
//
//   - a batch without a producer id (-1) passes untouched;
//   - a batch whose epoch and sequence range equal one of the five cached
//     batches is a duplicate: Check returns its metadata and the server
//     answers with the original offsets without appending;
//   - an epoch lower than the known one: INVALID_PRODUCER_EPOCH;
//   - a higher epoch must start at sequence 0, else
//     OUT_OF_ORDER_SEQUENCE_NUMBER; the new epoch replaces the old one and
//     its cached batches;
//   - the same epoch must continue at last sequence + 1, else
//     OUT_OF_ORDER_SEQUENCE_NUMBER; this includes the retry of a batch older
//     than the five cached ones (Kafka answers it the same way);
//   - sequences wrap from 2147483647 to 0;
//   - a producer the partition does not know is accepted at any sequence.
//     State is rebuilt from the log on restart, so a producer is unknown
//     only when retention, DeleteRecords or expiry removed its state: the
//     KIP-360 case, where Kafka 2.5+ accepts too (and never returns
//     UNKNOWN_PRODUCER_ID from an append);
//   - transactional batches follow the same rules and open the producer's
//     transaction in the partition (its first offset is kept, Kafka's
//     currentTxnFirstOffset); a non-transactional batch while it is open
//     is INVALID_TXN_STATE; control batches from clients are
//     INVALID_RECORD, and so is a negative epoch or sequence with a
//     producer id.
//
// # Transactions
//
// CheckMarker and ApplyMarker are a transaction marker's Check and Update:
// a marker from an epoch below the producer's is INVALID_PRODUCER_EPOCH,
// one of a coordinator epoch below that of the producer's last marker
// TRANSACTION_COORDINATOR_FENCED. ApplyMarker (leader, follower and
// replay) ends the open transaction and returns it as a CompletedTxn
// (producer, first offset, marker offset, aborted, and Kafka's last
// stable offset at completion: the first offset of the earliest other
// open transaction); a marker without an open transaction returns
// nothing, as in Kafka. LastStableOffset(hw) is min(hw, the first offset
// of the earliest open transaction or completed one whose marker is not
// below hw yet). Update applies transactional batches with base sequence
// -1 (the group coordinator's offset commits) without sequence
// bookkeeping. InTransaction tells the server whether a batch is the
// producer's first of a transaction, which KIP-890 verifies with the
// coordinator, and counts markers so a marker during that verification
// is noticed. Load reports the transactions the replay completed
// (LoadReport.Completed), from which the server rebuilds the
// aborted-transaction index from the replay's start on.
//
// Errors from Check wrap a *kerr.Error; ErrorCode extracts the code.
//
// # Locking
//
// Check, the append and Update must run as one step under the partition's
// append lock, which the server holds: Check's verdict is only valid until
// the next Update. A StateManager also has its own mutex so that snapshots,
// expiry and inspection may run from other goroutines; it is never held
// during I/O. Lock order: partition append lock, then StateManager.mu.
// Readers take no append lock, and the log makes a batch readable before
// its append returns (and Update runs): a transactional batch is appended
// between HoldAppend and ReleaseAppend, which hold the last stable offset
// at the log end meanwhile, so that read_committed never reads a
// transaction that Update has not recorded yet.
//
// # Snapshots
//
// EncodeSnapshot captures the state as it stands at a log offset (every
// batch below it applied, none at or above it); WriteSnapshot stores it as
// <20-digit offset>.snapshot in a directory, replaced atomically. Load, at
// partition open and after the log is truncated, deletes snapshots beyond
// the log end, takes the newest that decodes (a corrupt one is deleted and
// the next older, or the log start, used instead), replays the batches from
// there to the log end, forgets producers whose last batch is below the log
// start, and prunes all but the two newest snapshots.
//
// A snapshot file, all integers big-endian; never change a version's layout,
// add a version instead:
//
//	0       4         6         10                18        22
//	+-------+---------+---------+-----------------+---------+-------------
//	| magic | version |   crc   |   log offset    |  count  | entries ...
//	+-------+---------+---------+-----------------+---------+-------------
//
//	magic      "STPS"
//	version    2 (1 is still read: its entries have no transaction fields)
//	crc        CRC-32C (Castagnoli) of bytes [10, end of file)
//	log offset the state reflects every batch below it; equals the file name
//	count      number of entries
//
//	entry, in strictly ascending producer id order (version 1: the
//	first 11 bytes, then 1 <= n <= 5 batches):
//	0                 8       10  11      15          23          31          39
//	+-----------------+-------+---+-------+-----------+-----------+-----------+----
//	|   producer id   | epoch | n | coord | txn first | last off  | last ts   | n batches, oldest first (0 <= n <= 5)
//	+-----------------+-------+---+-------+-----------+-----------+-----------+----
//
//	coord      coordinator epoch of the last marker, -1 before one
//	txn first  first offset of the open transaction, -1 when none
//	last off   offset of the producer's last batch (data or marker)
//	last ts    its timestamp
//
//	batch (32 bytes):
//	0         4         8                 16                24             32
//	+---------+---------+-----------------+-----------------+--------------+
//	|first seq|last seq |  first offset   |   last offset   |  timestamp   |
//	+---------+---------+-----------------+-----------------+--------------+
//
// After the entries (version 2): a count int32 and that many completed
// transactions whose marker may not be replicated yet, in marker order,
// 33 bytes each: producer id int64, first offset int64, marker offset
// int64, aborted byte (0 or 1), last stable offset int64.
//
// A decoder accepts a file only when every byte is accounted for: known
// magic and version, matching CRC, producer ids >= 0 and ascending, epochs
// >= 0, offsets ascending within an entry and below the snapshot's offset,
// last sequence equal to first sequence plus the batch's offset span
// (wrapping). So a decoded snapshot encodes back to the same bytes.
//
// # Expiry
//
// ExpireProducers forgets producers whose last batch's timestamp is older
// than producer.id.expiration.ms (Kafka's default: one day), measured
// against broker time as Kafka does. Neither it nor TruncateHead forgets a
// producer with an open transaction: the transaction holds the last
// stable offset, and its marker must find it.
package producer
