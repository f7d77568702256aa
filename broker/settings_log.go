package broker

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/stratastream/strata/segment"
)

// segDefaults are package segment's defaults of a partition log, the
// defaults of the topic configs it implements.
var segDefaults = segment.DefaultConfig()

// logSettings are the topic configs of the partition logs, each with the
// broker setting that is its default (Kafka's log.* names) and the
// synonyms of those in coarser units. The broker settings are dynamic
// broker configs (Kafka's DynamicLogConfig, dynamic_broker_config.go):
// a new value is the default of every topic without an override at once;
// not unclean.leader.election.enable, which the controller reads at
// start. The tiering topic configs are in
// tiering.go.
var logSettings = []setting{
	{name: "log.cleanup.policy", topic: "cleanup.policy", typ: typeList, def: "delete", dynamic: true, dynamicBroker: true, check: checkCleanupPolicy,
		topicSet: setCleanupPolicy,
		doc:      `How old data is discarded, a list of "delete" (retention by time and size: retention.ms, retention.bytes) and "compact" (the log cleaner keeps the latest record of every key). "compact" alone turns retention by time and size off.`},
	{name: "log.cleaner.min.cleanable.ratio", topic: "min.cleanable.dirty.ratio", typ: typeDouble, def: "0.5", validDouble: &[2]float64{0, 1}, dynamic: true, dynamicBroker: true,
		topicField: func(tc *topicConfig) any { return &tc.minCleanableRatio },
		doc:        "A compacted log is cleaned once its dirty (not yet cleaned) bytes are at least this share of its cleanable bytes, or once max.compaction.lag.ms requires it."},
	{name: "log.cleaner.min.compaction.lag.ms", topic: "min.compaction.lag.ms", typ: typeLong, def: "0", valid: atLeast(0), dynamic: true, dynamicBroker: true,
		topicField: func(tc *topicConfig) any { return &tc.minCompactionLagMs },
		doc:        "A record stays uncompacted at least this long after it was written (segments holding newer records are not cleaned)."},
	{name: "log.cleaner.max.compaction.lag.ms", topic: "max.compaction.lag.ms", typ: typeLong, def: itoa64(math.MaxInt64), valid: atLeast(1), dynamic: true, dynamicBroker: true,
		topicField: func(tc *topicConfig) any { return &tc.maxCompactionLagMs },
		doc:        "A dirty record is cleaned at the latest this long after it was written, whatever the dirty ratio (the active segment is never cleaned: segment.ms bounds it)."},
	{name: "log.cleaner.delete.retention.ms", topic: "delete.retention.ms", typ: typeLong, def: "86400000", valid: atLeast(0), dynamic: true, dynamicBroker: true,
		topicField: func(tc *topicConfig) any { return &tc.deleteRetentionMs },
		doc:        "How long a tombstone (a record with a null value) of a compacted topic is kept after the cleaning that first reached it, so that consumers reading from the start see the delete."},
	{name: "log.segment.delete.delay.ms", topic: "file.delete.delay.ms", typ: typeLong, def: itoa64(segDefaults.FileDeleteDelayMs), valid: atLeast(0), dynamic: true, dynamicBroker: true,
		topicField: func(tc *topicConfig) any { return &tc.seg.FileDeleteDelayMs },
		doc:        "How long a deleted segment's files stay open so in-flight reads finish; for tiered topics also how long the objects of segments dropped from the manifest (remote retention, DeleteRecords) stay in the store."},
	{name: "log.flush.interval.messages", topic: "flush.messages", typ: typeLong, def: itoa64(segDefaults.FlushMessages), valid: atLeast(1), dynamic: true, dynamicBroker: true,
		topicField: func(tc *topicConfig) any { return &tc.seg.FlushMessages },
		doc:        "Fsync after this many messages; 1 fsyncs before every produce response."},
	{name: "log.flush.interval.ms", topic: "flush.ms", typ: typeLong, def: itoa64(segDefaults.FlushMs), valid: atLeast(0), dynamic: true, dynamicBroker: true,
		topicField: func(tc *topicConfig) any { return &tc.seg.FlushMs },
		doc:        "Fsync at least this often."},
	{name: "log.index.interval.bytes", topic: "index.interval.bytes", typ: typeInt, def: strconv.Itoa(segDefaults.IndexIntervalBytes), valid: atLeast(0), dynamic: true, dynamicBroker: true,
		topicField: func(tc *topicConfig) any { return &tc.seg.IndexIntervalBytes },
		doc:        "Bytes of log between offset index entries."},
	{name: "message.max.bytes", topic: "max.message.bytes", typ: typeInt, def: "1048588", valid: atLeast(0), dynamic: true, dynamicBroker: true,
		topicField: func(tc *topicConfig) any { return &tc.maxMessageBytes },
		doc:        "Largest record batch a producer may send."},
	{name: "log.message.timestamp.type", topic: "message.timestamp.type", typ: typeString, def: "CreateTime", enum: []string{"CreateTime", "LogAppendTime"}, dynamic: true, dynamicBroker: true,
		topicSet: func(tc *topicConfig, v string) error { tc.logAppendTime = v == "LogAppendTime"; return nil },
		doc:      "CreateTime keeps the producer's timestamps; LogAppendTime sets broker time."},
	{name: "compression.type", topic: "compression.type", typ: typeString, def: "producer", enum: compressionTypes, dynamic: true, dynamicBroker: true,
		topicSet: setCompressionType,
		doc:      `The codec batches are stored with: "producer" keeps the producer's; "uncompressed", "gzip", "snappy", "lz4" or "zstd" recompress (or decompress) on append a batch the producer compressed otherwise, keeping its records, offsets, timestamps and producer fields, as Kafka's LogValidator. Recompression costs broker CPU on produce only: fetches send the stored batches as always. The codec's level is compression.gzip.level, compression.lz4.level or compression.zstd.level.`},
	{name: "compression.gzip.level", topic: "compression.gzip.level", typ: typeInt, def: "-1", valid: between(-1, segment.GzipMaxLevel), check: checkGzipLevel, dynamic: true, dynamicBroker: true,
		topicField: func(tc *topicConfig) any { return &tc.levels.Gzip },
		doc:        "The gzip level compression.type=gzip recompresses with: 1 (fastest) to 9 (smallest), or -1 for the codec's own (KIP-390)."},
	{name: "compression.lz4.level", topic: "compression.lz4.level", typ: typeInt, def: "9", valid: between(segment.LZ4MinLevel, segment.LZ4MaxLevel), dynamic: true, dynamicBroker: true,
		topicField: func(tc *topicConfig) any { return &tc.levels.LZ4 },
		doc:        "The lz4 level compression.type=lz4 recompresses with, 1 to 17 (KIP-390): 9 is the fast compressor, as in Kafka; the others the high-compression levels, those above 9 compressing as 9."},
	{name: "compression.zstd.level", topic: "compression.zstd.level", typ: typeInt, def: "3", valid: between(segment.ZstdMinLevel, segment.ZstdMaxLevel), dynamic: true, dynamicBroker: true,
		topicField: func(tc *topicConfig) any { return &tc.levels.Zstd },
		doc:        "The zstd level compression.type=zstd recompresses with, -131072 to 22 (KIP-390); the encoder has four speeds: below 3, 3 to 5, 6 to 9, and 10 up."},
	{name: "log.message.downconversion.enable", topic: "message.downconversion.enable", typ: typeBoolean, def: "true", dynamic: true, dynamicBroker: true,
		topicField: func(tc *topicConfig) any { return &tc.downConversion },
		doc:        "Whether consumers of Fetch v0-v3 (clients from before Kafka 0.11) get the topic's record batches converted to the message format they read (magic 0 or 1); when false they get UNSUPPORTED_VERSION. The conversion is done in memory, not zero-copy."},
	{name: "min.insync.replicas", topic: "min.insync.replicas", typ: typeInt, def: "1", valid: atLeast(1), dynamic: true, dynamicBroker: true,
		topicField: func(tc *topicConfig) any { return &tc.minInsyncReps },
		doc:        "Replicas that must hold a batch for acks=all to succeed."},
	{name: "log.retention.bytes", topic: "retention.bytes", typ: typeLong, def: itoa64(segDefaults.RetentionBytes), dynamic: true, dynamicBroker: true,
		topicField: func(tc *topicConfig) any { return &tc.seg.RetentionBytes },
		doc:        "Size a partition may grow to before old segments are deleted; -1 is unlimited."},
	{name: "log.retention.ms", topic: "retention.ms", typ: typeLong, def: itoa64(segDefaults.RetentionMs), valid: atLeast(-1), dynamic: true, dynamicBroker: true,
		topicField: func(tc *topicConfig) any { return &tc.seg.RetentionMs },
		doc:        "Age after which segments are deleted; -1 is unlimited."},
	{name: "log.retention.minutes", synonymOf: "log.retention.ms", scale: 60 * 1000, typ: typeLong,
		doc: "log.retention.ms in minutes, read when log.retention.ms is not set."},
	{name: "log.retention.hours", synonymOf: "log.retention.ms", scale: 3600 * 1000, typ: typeLong,
		doc: "log.retention.ms in hours, read when neither log.retention.ms nor log.retention.minutes is set."},
	{name: "log.segment.bytes", topic: "segment.bytes", typ: typeInt, def: itoa64(segDefaults.SegmentBytes), valid: atLeast(14), dynamic: true, dynamicBroker: true,
		topicField: func(tc *topicConfig) any { return &tc.seg.SegmentBytes },
		doc:        "Size at which a segment file is rolled."},
	{name: "log.index.size.max.bytes", topic: "segment.index.bytes", typ: typeInt, def: strconv.Itoa(segDefaults.SegmentIndexBytes), valid: atLeast(4), dynamic: true, dynamicBroker: true,
		topicField: func(tc *topicConfig) any { return &tc.seg.SegmentIndexBytes },
		doc:        "Size of a segment's offset index; a full index rolls the segment."},
	{name: "log.roll.ms", topic: "segment.ms", typ: typeLong, def: itoa64(segDefaults.SegmentMs), valid: atLeast(1), dynamic: true, dynamicBroker: true,
		topicField: func(tc *topicConfig) any { return &tc.seg.SegmentMs },
		doc:        "Age at which a segment is rolled even if not full."},
	{name: "log.roll.hours", synonymOf: "log.roll.ms", scale: 3600 * 1000, typ: typeLong,
		doc: "log.roll.ms in hours, read when log.roll.ms is not set."},
	{name: "unclean.leader.election.enable", topic: "unclean.leader.election.enable", typ: typeBoolean, def: "false", dynamic: true,
		doc: "With no live in-sync replica, elect an out-of-sync one (losing what it lacks) rather than leave the partition offline."},
}

// checkCleanupPolicy accepts a list of delete and compact, as Kafka's
// ValidList.in(compact, delete); an empty list is refused.
func checkCleanupPolicy(v string) error {
	items := splitList(v)
	if len(items) == 0 {
		return fmt.Errorf("value %q: cleanup.policy is a list of delete, compact", v)
	}
	for _, p := range items {
		if p != "delete" && p != "compact" {
			return fmt.Errorf("invalid value %q for cleanup.policy: each item must be one of delete, compact", p)
		}
	}
	return nil
}

// setCleanupPolicy stores a checked cleanup.policy.
func setCleanupPolicy(tc *topicConfig, v string) error {
	if err := checkCleanupPolicy(v); err != nil {
		return err
	}
	items := splitList(v)
	tc.compact, tc.deletePolicy = slices.Contains(items, "compact"), slices.Contains(items, "delete")
	return nil
}

// cleanerSettings are the broker's log cleaner settings (log_cleaner.go);
// the per-topic compaction configs are in logSettings. Those marked
// dynamicBroker are Kafka's LogCleaner.reconfigurableConfigs, applied by
// logCleaner.reconfigure.
var cleanerSettings = []setting{
	{name: "log.cleaner.enable", typ: typeBoolean, def: "true",
		field: func(c *Config) any { return &c.Cleaner.Enable },
		doc:   "Run the log cleaner, which compacts the topics with cleanup.policy compact (__consumer_offsets among them)."},
	{name: "log.cleaner.threads", typ: typeInt, def: "1", valid: between(0, maxCleanerThreads), dynamicBroker: true,
		field: func(c *Config) any { return &c.Cleaner.Threads },
		doc:   "Cleaner goroutines, each cleaning one partition at a time; 0 cleans nothing."},
	{name: "log.cleaner.dedupe.buffer.size", typ: typeLong, def: "134217728", valid: atLeast(1024), dynamicBroker: true,
		field: func(c *Config) any { return &c.Cleaner.DedupeBufferSize },
		doc:   "Memory of the cleaners' offset maps (24 bytes a key), shared by the threads (each gets its share, at most 2 GiB); a dirty section with more keys than a map holds is cleaned in several rounds."},
	{name: "log.cleaner.io.buffer.load.factor", typ: typeDouble, def: "0.9", validDouble: &[2]float64{0.01, 1}, dynamicBroker: true,
		field: func(c *Config) any { return &c.Cleaner.LoadFactor },
		doc:   "How full an offset map may get before a cleaning stops mapping and cleans what it mapped."},
	{name: "log.cleaner.io.buffer.size", typ: typeInt, def: "524288", valid: atLeast(0), dynamicBroker: true,
		field: func(c *Config) any { return &c.Cleaner.IOBufferSize },
		doc:   "Size of the cleaner's read and write chunks; 0 is 512 KiB."},
	{name: "log.cleaner.io.max.bytes.per.second", typ: typeDouble, def: "1.7976931348623157e+308", validDouble: &[2]float64{1, math.MaxFloat64}, dynamicBroker: true,
		field: func(c *Config) any { return &c.Cleaner.IOMaxBytesPerSecond },
		doc:   "Bound on the bytes all cleaner threads together read and write per second; the largest double is no bound."},
	{name: "log.cleaner.backoff.ms", typ: typeLong, def: "15000", valid: between(0, maxMs), dynamicBroker: true,
		field: func(c *Config) any { return &c.Cleaner.Backoff }, unit: time.Millisecond,
		doc: "How long a cleaner thread sleeps when no partition needs cleaning."},
}

// itoa64 renders an int64 in decimal.
func itoa64(n int64) string { return strconv.FormatInt(n, 10) }

// compressionTypes are compression.type's values, in Kafka's order.
var compressionTypes = []string{"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"}

// setCompressionType applies compression.type (one of compressionTypes,
// checked by the registry).
func setCompressionType(tc *topicConfig, v string) error {
	codecs := map[string]segment.Codec{"uncompressed": segment.CodecNone, "gzip": segment.CodecGzip, "snappy": segment.CodecSnappy,
		"lz4": segment.CodecLZ4, "zstd": segment.CodecZstd}
	c, ok := codecs[v]
	if !ok && v != "producer" {
		return fmt.Errorf("compression.type %q is not one of %v", v, compressionTypes)
	}
	tc.recompress, tc.codec = ok, c
	return nil
}

// checkGzipLevel refuses 0, which Kafka's range (-1, or 1 to 9) leaves out.
func checkGzipLevel(v string) error {
	if v == "0" {
		return fmt.Errorf("compression.gzip.level is -1 or 1 to 9, not 0")
	}
	return nil
}
