// Package strataapi holds the request and response types of Strata's own
// APIs: requests that Kafka does not define, served on the Kafka listener
// next to Kafka's, for what only a Strata broker knows. Each is a
// kmsg.Request / kmsg.Response, so the broker decodes and answers it as it
// does Kafka's, and a client frames it as any Kafka request.
//
// The API keys are outside Kafka's range (Kafka's keys are below 100) and
// are never listed in ApiVersions, so no Kafka client sees them, and one
// that sends such a key to a Kafka broker is disconnected. A client that
// wants one sends it on its own connection (after SASL, if the listener
// needs it) and treats a closed connection as "not a Strata broker, or one
// too old".
//
// Encoding: Kafka's flexible encoding (KIP-482) throughout: request header
// v2 (api key, version, correlation id, client id, tagged fields),
// response header v1 (correlation id, tagged fields); compact strings and
// arrays (length + 1 as an unsigned varint, 0 for null); every structure
// ends with a tagged-field section, where later versions add fields that
// older readers skip. The wire constants below never change.
//
// # DescribeTieredStorage (key 10000), v0
//
// The tiered-storage state of partitions this broker leads: what
// `strata tier status --bootstrap-server` shows beside ListOffsets (-4,
// -1) and DescribeLogDirs.
//
//	Request v0:
//	  Topics           COMPACT_NULLABLE_ARRAY  null: every partition this broker
//	                                           leads whose topic tiers
//	    Topic          COMPACT_STRING
//	    Partitions     COMPACT_ARRAY of INT32  empty: every partition of the
//	                                           topic this broker leads
//	    TAG_BUFFER
//	  TAG_BUFFER
//
//	Response v0:
//	  ThrottleMillis   INT32
//	  ErrorCode        INT16   CLUSTER_AUTHORIZATION_FAILED without DESCRIBE
//	                           on the cluster (then no topics)
//	  CacheHits        INT64   the broker's chunk cache since it started:
//	  CacheJoins       INT64   reads served from memory or disk, reads that
//	  CacheMisses      INT64   joined a GET in flight, reads that made a
//	  CacheEvictions   INT64   GET, chunks evicted, and bytes held now;
//	  CacheBytes       INT64   all -1 when the broker has no tiered storage
//	  Topics           COMPACT_ARRAY
//	    Topic          COMPACT_STRING
//	    ErrorCode      INT16   UNKNOWN_TOPIC_OR_PARTITION for a topic the
//	                           broker does not know (then no partitions)
//	    Partitions     COMPACT_ARRAY
//	      Partition        INT32
//	      ErrorCode        INT16  UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER,
//	                              KAFKA_STORAGE_ERROR; the fields below are -1
//	      ManifestEpoch    INT32  leader epoch that wrote the remote manifest
//	      RemoteLogStart   INT64  the committed manifest's log start offset
//	      RemoteLogEnd     INT64  offset after its last remote record
//	      RemoteBytes      INT64
//	      RemoteSegments   INT32
//	      LastUploadMs     INT64  commit time of the newest remote segment
//	      LocalSegments    INT32  segment files of the local log
//	      PendingSegments  INT32  sealed local segments not all remote yet
//	      PendingBytes     INT64
//	      OldestPendingMs  INT64  age of the oldest of them (0 when none)
//	      CacheHits        INT64  this partition's share of the cache's
//	      CacheJoins       INT64  counters
//	      CacheMisses      INT64
//	      TAG_BUFFER
//	    TAG_BUFFER
//	  TAG_BUFFER
//
// The remote fields (ManifestEpoch to LastUploadMs) are -1 while no
// manifest is known (nothing uploaded yet, or it was not loaded yet), and
// LastUploadMs is -1 with no segment remote.
//
// # DescribeSharePartitions (key 10001), v0
//
// The in-memory state of one share group's share partitions (KIP-932) on
// the partitions this broker leads, where share partitions live: what
// `strata groups describe` shows as IN-FLIGHT beside
// DescribeShareGroupOffsets' start offset and lag. A share partition
// exists in memory only once a member fetched from it on this leader
// (or after the leader read it back for one); before that the answer
// says not loaded instead of showing zeros.
//
//	Request v0:
//	  GroupID          COMPACT_STRING
//	  Topics           COMPACT_NULLABLE_ARRAY  null: every share partition of
//	                                           the group loaded here
//	    Topic          COMPACT_STRING
//	    Partitions     COMPACT_ARRAY of INT32  empty: every partition of the
//	                                           topic this broker leads
//	    TAG_BUFFER
//	  TAG_BUFFER
//
//	Response v0:
//	  ThrottleMillis   INT32
//	  ErrorCode        INT16   GROUP_AUTHORIZATION_FAILED without DESCRIBE on
//	                           the group, INVALID_GROUP_ID for an empty id
//	                           (then no topics)
//	  Topics           COMPACT_ARRAY
//	    Topic          COMPACT_STRING
//	    ErrorCode      INT16   TOPIC_AUTHORIZATION_FAILED without DESCRIBE on
//	                           the topic, UNKNOWN_TOPIC_OR_PARTITION for a
//	                           topic the broker does not know (then no
//	                           partitions)
//	    Partitions     COMPACT_ARRAY
//	      Partition          INT32
//	      ErrorCode          INT16  UNKNOWN_TOPIC_OR_PARTITION,
//	                                NOT_LEADER_OR_FOLLOWER; the fields below
//	                                are false and -1
//	      Loaded             BOOL   false: no in-memory state here (never
//	                                used on this leader, or to be read again
//	                                from the share coordinator); the fields
//	                                below are -1
//	      StartOffset        INT64  the share-partition start offset
//	      EndOffset          INT64  the end of the in-flight window
//	      Available          INT32  in-flight records by state
//	      Acquired           INT32
//	      Acknowledged       INT32
//	      Archiving          INT32
//	      Archived           INT32
//	      AcquiredTotal      INT64  records acquired, acquired again and
//	      RedeliveredTotal   INT64  archived since the share partition was
//	      ArchivedTotal      INT64  loaded on this broker
//	      TAG_BUFFER
//	    TAG_BUFFER
//	  TAG_BUFFER
//
// Decoding is bounded: an array announces at most as many elements as
// bytes remain (each element takes at least one byte), so a frame cannot
// make the decoder allocate more than a small multiple of its size.
package strataapi
