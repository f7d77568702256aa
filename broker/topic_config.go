package broker

import (
	"fmt"
	"strings"

	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// checkTopicConfig validates one topic config by its entry in the
// settings registry. The error message is meant for the client
// (INVALID_CONFIG).
func checkTopicConfig(name string, value *string) error {
	s, ok := topicSettingByName[name]
	if !ok {
		return fmt.Errorf("unknown topic config %q", name)
	}
	if value == nil {
		return fmt.Errorf("topic config %q: null value", name)
	}
	if err := s.validate(*value); err != nil {
		return fmt.Errorf("topic config %q: %v", name, err)
	}
	return nil
}

// checkTopicConfigDynamic refuses to change, at run time, a topic config
// the registry marks as not dynamic (settable at CreateTopics only).
func checkTopicConfigDynamic(name string) error {
	if s, ok := topicSettingByName[name]; ok && !s.dynamic {
		return fmt.Errorf("topic config %q cannot be changed at run time", name)
	}
	return nil
}

// topicConfig is a topic's effective configuration: its overrides over the
// broker's defaults.
type topicConfig struct {
	seg             segment.Config
	maxMessageBytes int32
	logAppendTime   bool
	// downConversion lets Fetch v0-v3 convert to magic 0 and 1
	// (fetch_legacy.go).
	downConversion bool
	minInsyncReps  int32
	// compression.type: with recompress, a produced batch in another
	// codec than codec is recompressed on append (00_produce.go); false
	// for "producer", which keeps the producer's codec.
	recompress bool
	codec      segment.Codec
	levels     segment.Levels // compression.*.level
	// Compaction (log_cleaner.go): cleanup.policy holds compact, delete
	// or both; the cleaner's thresholds.
	compact, deletePolicy                                     bool
	minCleanableRatio                                         float64
	minCompactionLagMs, maxCompactionLagMs, deleteRetentionMs int64
	// Tiered storage (tiering.go).
	remoteStorage       bool
	localRetentionMs    int64
	localRetentionBytes int64
	// Replication throttling (replication_throttle.go).
	leaderThrottled, followerThrottled throttledReplicas
}

// resolveTopicConfig merges overrides over defaults (both by topic config
// name; defaults holds every supported name) and parses the result into
// the fields the registry names.
func resolveTopicConfig(defaults, overrides map[string]string) (topicConfig, error) {
	for name, v := range overrides {
		if err := checkTopicConfig(name, &v); err != nil {
			return topicConfig{}, err
		}
	}
	tc := topicConfig{seg: segment.DefaultConfig()}
	var first error
	for _, s := range topicSettings {
		v, ok := overrides[s.topic]
		if !ok {
			v = defaults[s.topic]
		}
		v = strings.TrimSpace(v)
		var err error
		switch {
		case s.topicSet != nil:
			err = s.topicSet(&tc, v)
		case s.topicField != nil:
			err = storeValue(s.topicField(&tc), v, 0)
		}
		if err != nil && first == nil {
			first = fmt.Errorf("topic config %q: %v", s.topic, err)
		}
	}
	if first == nil && tc.minCompactionLagMs > tc.maxCompactionLagMs {
		// Kafka's LogConfig.validateValues.
		first = fmt.Errorf("conflict topic config setting min.compaction.lag.ms (%d) > max.compaction.lag.ms (%d)", tc.minCompactionLagMs, tc.maxCompactionLagMs)
	}
	if !tc.deletePolicy {
		// cleanup.policy=compact: retention by time and size is off.
		tc.seg.RetentionMs, tc.seg.RetentionBytes = -1, -1
	}
	return tc, first
}

// configEntry is one config as DescribeConfigs and CreateTopics (v5+)
// report it.
type configEntry struct {
	name     string
	value    string
	source   kmsg.ConfigSource
	typ      kmsg.ConfigType
	readOnly bool
	doc      string
	synonyms []configSynonym
	// sensitive: the value is a secret, described as null.
	sensitive bool
}

// configSynonym is a setting that provides a config's value, strongest
// first (the topic override, the broker setting, Kafka's default).
type configSynonym struct {
	name   string
	value  string
	source kmsg.ConfigSource
}

// topicConfigEntries describes every supported topic config of a topic
// with the given overrides, under broker configuration c, the topic
// defaults in force and the dynamic broker configs dyn gives (nil: none),
// in Kafka's synonym order: the override, the dynamic broker configs, the
// static ones, the default.
func (c *Config) topicConfigEntries(overrides, defaults map[string]string, dyn func(*setting) []configSynonym) []configEntry {
	out := make([]configEntry, 0, len(topicSettings))
	for _, s := range topicSettings {
		e := configEntry{name: s.topic, typ: s.typ.kafka(), doc: s.doc, readOnly: !s.dynamic}
		if v, ok := overrides[s.topic]; ok {
			e.synonyms = append(e.synonyms, configSynonym{name: s.topic, value: v, source: kmsg.ConfigSourceDynamicTopicConfig})
		}
		if dyn != nil && s.name != "" {
			e.synonyms = append(e.synonyms, dyn(s)...)
		}
		for _, bk := range s.brokerNames() {
			if v, ok := c.Properties[bk]; ok {
				e.synonyms = append(e.synonyms, configSynonym{name: bk, value: strings.TrimSpace(v), source: kmsg.ConfigSourceStaticBrokerConfig})
			}
		}
		e.synonyms = append(e.synonyms, configSynonym{name: s.label(), value: s.def, source: kmsg.ConfigSourceDefaultConfig})
		e.value, e.source = e.synonyms[0].value, e.synonyms[0].source
		if e.source != kmsg.ConfigSourceDynamicTopicConfig && e.source != kmsg.ConfigSourceDefaultConfig {
			e.value = defaults[s.topic] // in the topic config's unit
		}
		out = append(out, e)
	}
	return out
}
