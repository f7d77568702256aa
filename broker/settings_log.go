package broker

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/stratastream/strata/segment"
)

// segDefaults are package segment's defaults of a partition log, the
// defaults of the topic configs it implements.
var segDefaults = segment.DefaultConfig()

// logSettings are the topic configs of the partition logs, each with the
// broker setting that is its default (Kafka's log.* names) and the
// synonyms of those in coarser units. The tiering topic configs are in
// tiering.go.
var logSettings = []setting{
	{name: "log.cleanup.policy", topic: "cleanup.policy", typ: typeList, def: "delete", dynamic: true, check: checkCleanupPolicy,
		doc: `How old segments are discarded; only "delete" (retention by time and size) is supported.`},
	{name: "log.segment.delete.delay.ms", topic: "file.delete.delay.ms", typ: typeLong, def: itoa64(segDefaults.FileDeleteDelayMs), valid: atLeast(0), dynamic: true,
		topicField: func(tc *topicConfig) any { return &tc.seg.FileDeleteDelayMs },
		doc:        "How long a deleted segment's files stay open so in-flight reads finish; for tiered topics also how long the objects of segments dropped from the manifest (remote retention, DeleteRecords) stay in the store."},
	{name: "log.flush.interval.messages", topic: "flush.messages", typ: typeLong, def: itoa64(segDefaults.FlushMessages), valid: atLeast(1), dynamic: true,
		topicField: func(tc *topicConfig) any { return &tc.seg.FlushMessages },
		doc:        "Fsync after this many messages; 1 fsyncs before every produce response."},
	{name: "log.flush.interval.ms", topic: "flush.ms", typ: typeLong, def: itoa64(segDefaults.FlushMs), valid: atLeast(0), dynamic: true,
		topicField: func(tc *topicConfig) any { return &tc.seg.FlushMs },
		doc:        "Fsync at least this often."},
	{name: "log.index.interval.bytes", topic: "index.interval.bytes", typ: typeInt, def: strconv.Itoa(segDefaults.IndexIntervalBytes), valid: atLeast(0), dynamic: true,
		topicField: func(tc *topicConfig) any { return &tc.seg.IndexIntervalBytes },
		doc:        "Bytes of log between offset index entries."},
	{name: "message.max.bytes", topic: "max.message.bytes", typ: typeInt, def: "1048588", valid: atLeast(0), dynamic: true,
		topicField: func(tc *topicConfig) any { return &tc.maxMessageBytes },
		doc:        "Largest record batch a producer may send."},
	{name: "log.message.timestamp.type", topic: "message.timestamp.type", typ: typeString, def: "CreateTime", enum: []string{"CreateTime", "LogAppendTime"}, dynamic: true,
		topicSet: func(tc *topicConfig, v string) error { tc.logAppendTime = v == "LogAppendTime"; return nil },
		doc:      "CreateTime keeps the producer's timestamps; LogAppendTime sets broker time."},
	{name: "min.insync.replicas", topic: "min.insync.replicas", typ: typeInt, def: "1", valid: atLeast(1), dynamic: true,
		topicField: func(tc *topicConfig) any { return &tc.minInsyncReps },
		doc:        "Replicas that must hold a batch for acks=all to succeed."},
	{name: "log.retention.bytes", topic: "retention.bytes", typ: typeLong, def: itoa64(segDefaults.RetentionBytes), dynamic: true,
		topicField: func(tc *topicConfig) any { return &tc.seg.RetentionBytes },
		doc:        "Size a partition may grow to before old segments are deleted; -1 is unlimited."},
	{name: "log.retention.ms", topic: "retention.ms", typ: typeLong, def: itoa64(segDefaults.RetentionMs), valid: atLeast(-1), dynamic: true,
		topicField: func(tc *topicConfig) any { return &tc.seg.RetentionMs },
		doc:        "Age after which segments are deleted; -1 is unlimited."},
	{name: "log.retention.minutes", synonymOf: "log.retention.ms", scale: 60 * 1000, typ: typeLong,
		doc: "log.retention.ms in minutes, read when log.retention.ms is not set."},
	{name: "log.retention.hours", synonymOf: "log.retention.ms", scale: 3600 * 1000, typ: typeLong,
		doc: "log.retention.ms in hours, read when neither log.retention.ms nor log.retention.minutes is set."},
	{name: "log.segment.bytes", topic: "segment.bytes", typ: typeInt, def: itoa64(segDefaults.SegmentBytes), valid: atLeast(14), dynamic: true,
		topicField: func(tc *topicConfig) any { return &tc.seg.SegmentBytes },
		doc:        "Size at which a segment file is rolled."},
	{name: "log.index.size.max.bytes", topic: "segment.index.bytes", typ: typeInt, def: strconv.Itoa(segDefaults.SegmentIndexBytes), valid: atLeast(4), dynamic: true,
		topicField: func(tc *topicConfig) any { return &tc.seg.SegmentIndexBytes },
		doc:        "Size of a segment's offset index; a full index rolls the segment."},
	{name: "log.roll.ms", topic: "segment.ms", typ: typeLong, def: itoa64(segDefaults.SegmentMs), valid: atLeast(1), dynamic: true,
		topicField: func(tc *topicConfig) any { return &tc.seg.SegmentMs },
		doc:        "Age at which a segment is rolled even if not full."},
	{name: "log.roll.hours", synonymOf: "log.roll.ms", scale: 3600 * 1000, typ: typeLong,
		doc: "log.roll.ms in hours, read when log.roll.ms is not set."},
	{name: "unclean.leader.election.enable", topic: "unclean.leader.election.enable", typ: typeBoolean, def: "false", dynamic: true,
		doc: "With no live in-sync replica, elect an out-of-sync one (losing what it lacks) rather than leave the partition offline."},
}

// checkCleanupPolicy accepts cleanup.policy=delete: compaction is not
// implemented.
func checkCleanupPolicy(v string) error {
	for _, p := range strings.Split(v, ",") {
		switch strings.TrimSpace(p) {
		case "delete":
		case "compact":
			return fmt.Errorf("cleanup.policy=compact is not supported yet (only delete)")
		default:
			return fmt.Errorf("value %q: cleanup.policy is a list of delete, compact", v)
		}
	}
	return nil
}

// itoa64 renders an int64 in decimal.
func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
