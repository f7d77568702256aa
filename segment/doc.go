// Package segment is the on-disk log of one partition: the record-batch
// codec, segment files and their indexes, checkpoints, rolling, retention,
// recovery and flushing. Its formats are Apache Kafka's, byte for byte, so
// a batch a producer sends is validated, given its offset and appended
// verbatim, and a fetched batch is sent verbatim.
//
// # Record batch v2
//
// Every batch in a .log file, and on the wire, is a record batch of magic 2.
// Integers are big endian; the CRC is CRC-32C (Castagnoli) over everything
// from the attributes to the end of the batch, so the base offset and the
// partition leader epoch can be rewritten without recomputing it.
//
//	offset  size  field
//	     0     8  baseOffset            offset of the first record
//	     8     4  batchLength           bytes after this field (size - 12)
//	    12     4  partitionLeaderEpoch  set by the leader on append
//	    16     1  magic                 2
//	    17     4  crc                   CRC-32C of bytes 21..end
//	    21     2  attributes            see below
//	    23     4  lastOffsetDelta       last record's offset - baseOffset
//	    27     8  baseTimestamp         first record's timestamp
//	    35     8  maxTimestamp          largest timestamp, or the broker's
//	    43     8  producerId            -1 without an idempotent producer
//	    51     2  producerEpoch         -1 likewise
//	    53     4  baseSequence          -1 likewise
//	    57     4  recordCount           records that follow
//	    61     -  records               compressed as a whole per attributes
//
// Attributes:
//
//	bits 0-2  compression: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd
//	bit  3    timestamp type: 0 CreateTime, 1 LogAppendTime (every record's
//	          timestamp is then maxTimestamp)
//	bit  4    transactional
//	bit  5    control batch (transaction markers)
//	bit  6    delete horizon set (compaction; baseTimestamp holds it)
//
// A batch's record count is at most lastOffsetDelta+1: compaction may remove
// records but keeps the batch's offset range. A producer's batch has exactly
// lastOffsetDelta+1 records, at least one.
//
// # Records
//
// The records section holds recordCount records, each prefixed with its
// length; varints are zigzag (as protobuf's sint), at most 5 bytes for 32-bit
// fields and 10 for 64-bit ones:
//
//	length          varint   bytes from attributes to the end of the record
//	attributes      int8     unused, 0
//	timestampDelta  varlong  timestamp - baseTimestamp
//	offsetDelta     varint   offset - baseOffset; strictly increasing
//	keyLength       varint   -1 for a null key
//	key             bytes
//	valueLength     varint   -1 for a null value
//	value           bytes
//	headerCount     varint
//	headers         headerCount times:
//	  keyLength     varint   never null
//	  key           bytes    UTF-8
//	  valueLength   varint   -1 for a null value
//	  value         bytes
//
// Nothing may follow the last record. When the batch is compressed, the whole
// records section is one compressed payload: a gzip stream, snappy (a raw
// block, or the Xerial framing of the Java client: magic 82 'SNAPPY' 00,
// version and minimum version as int32, then blocks of int32 length and a raw
// snappy block), an lz4 frame, or zstd frames. Decompression is bounded (see
// DecompressLimit) so that a small batch cannot claim unbounded memory.
//
// # Files
//
// A partition directory holds segments. Each is named by its base offset in
// 20 decimal digits, 00000000000000000000 for the first, and has three files:
//
//	<base>.log        record batches back to back, offsets increasing; the
//	                  first batch's base offset is at least <base>
//	<base>.index      sparse offset index, 8-byte entries:
//	                    relative offset u32 | position u32
//	                  the base offset of a batch minus <base>, and where that
//	                  batch starts in the .log
//	<base>.timeindex  sparse time index, 12-byte entries:
//	                    timestamp i64 | relative offset u32
//	                  the segment's largest timestamp so far, and the base
//	                  offset (minus <base>) of the batch holding it
//
// Both index columns only grow, so lookups are binary searches followed by a
// short scan of the .log. The active segment's index files are preallocated
// and zero-filled: the first all-zero entry after the start marks the end.
// Kafka's own offset index maps a batch's last offset rather than its base
// offset; Strata's indexes are its own to rebuild, and recovery rebuilds them
// when they are missing or do not match the log.
//
// Beside them, <base>.txnindex is Kafka's aborted-transaction index of the
// segment (txnindex.go), and control batches carry transaction markers
// (control.go).
//
// Segment is the one package that knows these files: names.go names every
// file of a partition directory (the producer snapshots that live beside
// the segments included) and the directory itself, index.go and
// timeindex.go hold the entry layouts, and inspect.go reads a directory
// without opening a Log, for the tools and the archiver's lag. Other
// packages ask these instead of spelling a name or a layout again.
//
// # Checkpoints
//
// The recovery-point, log-start-offset, leader-epoch and cleaner
// checkpoints of a partition directory are described in checkpoint.go.
//
// # Compaction
//
// Log.Clean is Kafka's log cleaner for one partition (clean.go): an
// OffsetMap of fixed memory, the batch filter (clean_filter.go) and the
// crash-safe swap of cleaned segments through .cleaned files and a .swap
// marker that recovery completes (clean_swap.go). A cleaned segment's
// offsets have gaps; recovery accepts them only below the cleaner
// checkpoint.
//
// A cleaning rewrites groups of consecutive sealed segments; each group
// becomes one segment named by its first source's base offset, written as
// <base>.log.cleaned, <base>.index.cleaned and <base>.timeindex.cleaned.
// The groups are swapped in by batches, and a batch commits when its
// marker, <base of its first group>.swap, is in place. The marker has the
// checkpoint layout (checkpoint.go), version 1, a group a line:
//
//	1                      version
//	<k+1>                  entry count
//	<checkpoint>           cleaner checkpoint once the swap is done
//	<b1> <b2> ... <bn>     group 1: cleaned segment b1 replaces b1..bn
//	...                    groups 2..k
//
// Every base offset of a marker ascends, from line to line too. Builds
// before version 1 wrote one marker per group, version 0, a source a line:
//
//	0                      version
//	<n+1>                  entry count
//	<checkpoint>
//	<b1>                   the sources, ascending; b1 is the cleaned one
//	...
//	<bn>
//
// Recovery completes markers of both versions. A build that knows only
// version 0 refuses a version 1 marker (ErrBadCheckpoint at Open) rather
// than take its groups for one.
package segment
