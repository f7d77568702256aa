package broker

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topicConfigDef describes one supported topic config.
type topicConfigDef struct {
	name string
	// brokerKey is the broker setting that provides the default.
	brokerKey string
	typ       kmsg.ConfigType
	// kafkaDefault is the default when the broker does not set brokerKey.
	kafkaDefault string
	// check parses and validates a value.
	check func(v string) error
	doc   string
}

func longAtLeast(min int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return fmt.Errorf("not a long: %q", v)
		}
		if n < min {
			return fmt.Errorf("value %d must be at least %d", n, min)
		}
		return nil
	}
}

func intAtLeast(min int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil {
			return fmt.Errorf("not an int: %q", v)
		}
		if n < min {
			return fmt.Errorf("value %d must be at least %d", n, min)
		}
		return nil
	}
}

func oneOf(values ...string) func(string) error {
	return func(v string) error {
		for _, ok := range values {
			if strings.TrimSpace(v) == ok {
				return nil
			}
		}
		return fmt.Errorf("value %q must be one of %s", v, strings.Join(values, ", "))
	}
}

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

// topicConfigDefs lists the topic configs Strata supports, by Kafka name.
// Any other topic config is refused with INVALID_CONFIG.
var topicConfigDefs = []topicConfigDef{
	{"cleanup.policy", "log.cleanup.policy", kmsg.ConfigTypeList, "delete", checkCleanupPolicy,
		"How old segments are discarded; only \"delete\" (retention by time and size) is supported."},
	{"file.delete.delay.ms", "log.segment.delete.delay.ms", kmsg.ConfigTypeLong, "60000", longAtLeast(0),
		"How long a deleted segment's files stay open so in-flight reads finish."},
	{"flush.messages", "log.flush.interval.messages", kmsg.ConfigTypeLong, strconv.FormatInt(math.MaxInt64, 10), longAtLeast(1),
		"Fsync after this many messages; 1 fsyncs before every produce response."},
	{"flush.ms", "log.flush.interval.ms", kmsg.ConfigTypeLong, strconv.FormatInt(math.MaxInt64, 10), longAtLeast(0),
		"Fsync at least this often."},
	{"index.interval.bytes", "log.index.interval.bytes", kmsg.ConfigTypeInt, "4096", intAtLeast(0),
		"Bytes of log between offset index entries."},
	{"max.message.bytes", "message.max.bytes", kmsg.ConfigTypeInt, "1048588", intAtLeast(0),
		"Largest record batch a producer may send."},
	{"message.timestamp.type", "log.message.timestamp.type", kmsg.ConfigTypeString, "CreateTime", oneOf("CreateTime", "LogAppendTime"),
		"CreateTime keeps the producer's timestamps; LogAppendTime sets broker time."},
	{"min.insync.replicas", "min.insync.replicas", kmsg.ConfigTypeInt, "1", intAtLeast(1),
		"Replicas that must hold a batch for acks=all to succeed."},
	{"local.retention.bytes", "log.local.retention.bytes", kmsg.ConfigTypeLong, "-2", longAtLeast(-2),
		"With remote.storage.enable: size of the local log before uploaded segments are deleted locally; -2 is retention.bytes."},
	{"local.retention.ms", "log.local.retention.ms", kmsg.ConfigTypeLong, "-2", longAtLeast(-2),
		"With remote.storage.enable: age after which uploaded segments are deleted locally; -2 is retention.ms."},
	{"remote.storage.enable", "remote.log.storage.system.enable", kmsg.ConfigTypeBoolean, "false", oneOf("true", "false"),
		"Offload sealed segments to the object store and serve old offsets from there (tiered storage)."},
	{"retention.bytes", "log.retention.bytes", kmsg.ConfigTypeLong, "-1", longAtLeast(math.MinInt64),
		"Size a partition may grow to before old segments are deleted; -1 is unlimited."},
	{"retention.ms", "log.retention.ms", kmsg.ConfigTypeLong, "604800000", longAtLeast(-1),
		"Age after which segments are deleted; -1 is unlimited."},
	{"segment.bytes", "log.segment.bytes", kmsg.ConfigTypeInt, "1073741824", intAtLeast(14),
		"Size at which a segment file is rolled."},
	{"segment.index.bytes", "log.index.size.max.bytes", kmsg.ConfigTypeInt, "10485760", intAtLeast(4),
		"Size of a segment's offset index; a full index rolls the segment."},
	{"segment.ms", "log.roll.ms", kmsg.ConfigTypeLong, "604800000", longAtLeast(1),
		"Age at which a segment is rolled even if not full."},
	{"unclean.leader.election.enable", "unclean.leader.election.enable", kmsg.ConfigTypeBoolean, "false", oneOf("true", "false"),
		"With no live in-sync replica, elect an out-of-sync one (losing what it lacks) rather than leave the partition offline."},
}

var topicConfigByName = func() map[string]*topicConfigDef {
	m := make(map[string]*topicConfigDef, len(topicConfigDefs))
	for i := range topicConfigDefs {
		m[topicConfigDefs[i].name] = &topicConfigDefs[i]
	}
	return m
}()

// checkTopicConfig validates one topic config. The error message is meant
// for the client (INVALID_CONFIG).
func checkTopicConfig(name string, value *string) error {
	def, ok := topicConfigByName[name]
	if !ok {
		return fmt.Errorf("unknown topic config %q", name)
	}
	if value == nil {
		return fmt.Errorf("topic config %q: null value", name)
	}
	if err := def.check(*value); err != nil {
		return fmt.Errorf("topic config %q: %v", name, err)
	}
	return nil
}

// topicConfig is a topic's effective configuration: its overrides over the
// broker's defaults.
type topicConfig struct {
	seg             segment.Config
	maxMessageBytes int32
	logAppendTime   bool
	minInsyncReps   int32
	// Tiered storage (tiering.go).
	remoteStorage       bool
	localRetentionMs    int64
	localRetentionBytes int64
}

// resolveTopicConfig merges overrides over defaults (both by topic config
// name; defaults holds every supported name) and parses the result.
func resolveTopicConfig(defaults, overrides map[string]string) (topicConfig, error) {
	get := func(name string) string {
		if v, ok := overrides[name]; ok {
			return strings.TrimSpace(v)
		}
		return strings.TrimSpace(defaults[name])
	}
	for name, v := range overrides {
		if err := checkTopicConfig(name, &v); err != nil {
			return topicConfig{}, err
		}
	}
	var err error
	long := func(name string) int64 {
		n, perr := strconv.ParseInt(get(name), 10, 64)
		if perr != nil && err == nil {
			err = fmt.Errorf("topic config %q: %v", name, perr)
		}
		return n
	}
	tc := topicConfig{seg: segment.DefaultConfig()}
	tc.seg.SegmentBytes = long("segment.bytes")
	tc.seg.SegmentMs = long("segment.ms")
	tc.seg.SegmentIndexBytes = int(long("segment.index.bytes"))
	tc.seg.IndexIntervalBytes = int(long("index.interval.bytes"))
	tc.seg.RetentionBytes = long("retention.bytes")
	tc.seg.RetentionMs = long("retention.ms")
	tc.seg.FlushMessages = long("flush.messages")
	tc.seg.FlushMs = long("flush.ms")
	tc.seg.FileDeleteDelayMs = long("file.delete.delay.ms")
	tc.maxMessageBytes = int32(long("max.message.bytes"))
	tc.minInsyncReps = int32(long("min.insync.replicas"))
	tc.logAppendTime = get("message.timestamp.type") == "LogAppendTime"
	if terr := parseTierTopicConfig(&tc, get); terr != nil && err == nil {
		err = terr
	}
	return tc, err
}

// topicConfigNames returns the supported topic config names, sorted.
func topicConfigNames() []string {
	out := make([]string, 0, len(topicConfigDefs))
	for _, d := range topicConfigDefs {
		out = append(out, d.name)
	}
	sort.Strings(out)
	return out
}

// configEntry is one config as DescribeConfigs and CreateTopics (v5+)
// report it.
type configEntry struct {
	name     string
	value    string
	source   kmsg.ConfigSource
	typ      kmsg.ConfigType
	doc      string
	synonyms []configSynonym
}

// configSynonym is a setting that provides a config's value, strongest
// first (the topic override, the broker setting, Kafka's default).
type configSynonym struct {
	name   string
	value  string
	source kmsg.ConfigSource
}

// brokerSynonyms lists the broker settings behind a topic config, finest
// unit first; the first one set wins.
func brokerSynonyms(def *topicConfigDef) []string {
	switch def.name {
	case "retention.ms":
		return []string{"log.retention.ms", "log.retention.minutes", "log.retention.hours"}
	case "segment.ms":
		return []string{"log.roll.ms", "log.roll.hours"}
	}
	return []string{def.brokerKey}
}

// topicConfigEntries describes every supported topic config of a topic
// with the given overrides, under broker configuration c.
func (c *Config) topicConfigEntries(overrides map[string]string) []configEntry {
	out := make([]configEntry, 0, len(topicConfigDefs))
	for _, name := range topicConfigNames() {
		def := topicConfigByName[name]
		e := configEntry{name: name, typ: def.typ, doc: def.doc, value: c.TopicDefaults[name], source: kmsg.ConfigSourceDefaultConfig}
		if v, ok := overrides[name]; ok {
			e.synonyms = append(e.synonyms, configSynonym{name: name, value: v, source: kmsg.ConfigSourceDynamicTopicConfig})
		}
		for _, bk := range brokerSynonyms(def) {
			if v, ok := c.Properties[bk]; ok {
				e.synonyms = append(e.synonyms, configSynonym{name: bk, value: strings.TrimSpace(v), source: kmsg.ConfigSourceStaticBrokerConfig})
			}
		}
		e.synonyms = append(e.synonyms, configSynonym{name: def.brokerKey, value: def.kafkaDefault, source: kmsg.ConfigSourceDefaultConfig})
		e.value, e.source = e.synonyms[0].value, e.synonyms[0].source
		if e.source == kmsg.ConfigSourceStaticBrokerConfig {
			e.value = c.TopicDefaults[name] // scaled to the topic config's unit
		}
		out = append(out, e)
	}
	return out
}
