package broker

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSettingsRegistryEntries checks that every entry of the settings
// registry is complete and consistent: one way to say its default, a
// field that matches its type, a range the field can hold, a help text
// that does not repeat the default.
func TestSettingsRegistryEntries(t *testing.T) {
	for i := range settings {
		s := &settings[i]
		name := s.label()
		switch {
		case s.synonymOf != "":
			if s.def != "" || s.unset != "" || s.scale <= 1 || s.topic != "" || s.field != nil || s.set != nil {
				t.Errorf("%s: a synonym has a scale above 1 and no default, topic config or field of its own", name)
			}
		case (s.def == "") == (s.unset == "") && !(s.def == "" && (s.name == "zookeeper.connect" || s.topic != "" && s.typ == typeList)):
			// zookeeper.connect is the one setting whose default is
			// empty, and list topic configs (the throttled replicas)
			// default to the empty list, as in Kafka.
			t.Errorf("%s: want exactly one of def and unset (def %q, unset %q)", name, s.def, s.unset)
		}
		if s.topic != "" && s.synonymOf == "" && !s.hasDefault() {
			t.Errorf("%s: a topic config needs a default", name)
		}
		if s.dynamic && s.topic == "" {
			t.Errorf("%s: only topic configs change at run time", name)
		}
		if s.topic != "" && s.field != nil {
			t.Errorf("%s: a topic config's broker default is kept in TopicDefaults, not a field", name)
		}
		if s.set != nil && (s.field != nil || s.valid != nil || s.enum != nil || s.check != nil) {
			t.Errorf("%s: set parses the value itself; field, valid, enum and check would be ignored", name)
		}
		if s.value != nil && s.set == nil {
			t.Errorf("%s: value renders what set stores; without set, field is rendered", name)
		}
		if s.doc == "" || strings.Contains(strings.ToLower(s.doc), "default") && !strings.Contains(s.doc, "chroot") {
			t.Errorf("%s: doc %q: want a help text that does not state a default", name, s.doc)
		}
		if s.field != nil {
			checkSettingField(t, s, s.field(&Config{}))
		}
		if s.topicField != nil {
			checkSettingField(t, s, s.topicField(&topicConfig{}))
		}
	}
}

// checkSettingField checks that a field holds every value the setting
// accepts.
func checkSettingField(t *testing.T, s *setting, p any) {
	t.Helper()
	name := s.label()
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if b := s.typ.bits(); b > 0 && b < 64 {
		lo, hi = -1<<(b-1), 1<<(b-1)-1
	}
	if s.valid != nil {
		lo, hi = max(lo, s.valid.min), min(hi, s.valid.max)
	}
	fits := func(min, max int64) bool { return lo >= min && hi <= max }
	var ok bool
	switch p.(type) {
	case *bool:
		ok = s.typ == typeBoolean
	case *string:
		ok = s.typ == typeString
	case *[]string:
		ok = s.typ == typeList
	case *int16:
		ok = s.typ.bits() > 0 && fits(math.MinInt16, math.MaxInt16)
	case *int32:
		ok = s.typ.bits() > 0 && fits(math.MinInt32, math.MaxInt32)
	case *int, *int64:
		ok = s.typ.bits() > 0
	case *float64:
		ok = s.typ == typeDouble
	case *time.Duration:
		ok = s.typ.bits() > 0 && s.unit > 0
		ok = ok && fits(math.MinInt64/int64(s.unit), math.MaxInt64/int64(s.unit))
	default:
		t.Errorf("%s: field of type %T", name, p)
		return
	}
	if _, isDuration := p.(*time.Duration); !isDuration && s.unit != 0 {
		ok = false
	}
	if !ok {
		t.Errorf("%s: a %s with values %d to %d (unit %v) does not fit a field of type %T", name, s.typ, lo, hi, s.unit, p)
	}
}

// TestSettingsDefaultsRoundTrip checks each default against the rest of
// the registry's machinery: giving the default explicitly changes nothing,
// and DescribeConfigs reports it for a broker started with no settings.
func TestSettingsDefaultsRoundTrip(t *testing.T) {
	def := DefaultConfig()
	described := map[string]configEntry{}
	for _, e := range def.brokerConfigEntries() {
		described[e.name] = e
	}
	for _, s := range sortedBrokerSettings {
		e, ok := described[s.name]
		if !s.hasDefault() {
			if ok {
				t.Errorf("%s: described as %q, but it has no value of its own", s.name, e.value)
			}
			continue
		}
		if !ok || e.value != s.def || e.source != kmsg.ConfigSourceDefaultConfig || e.typ != s.typ.kafka() || !e.readOnly {
			t.Errorf("%s: described as %+v, want default %q", s.name, e, s.def)
		}
		c, err := ConfigFromProperties(map[string]string{s.name: s.def})
		if err != nil {
			t.Errorf("%s=%q: %v", s.name, s.def, err)
			continue
		}
		c.Properties = def.Properties
		if !reflect.DeepEqual(c, def) {
			t.Errorf("%s=%q: the config differs from DefaultConfig", s.name, s.def)
		}
	}
	for _, s := range topicSettings {
		if got := def.TopicDefaults[s.topic]; got != s.def {
			t.Errorf("TopicDefaults[%s] = %q, want %q", s.topic, got, s.def)
		}
	}
	if len(def.TopicDefaults) != len(topicSettings) {
		t.Errorf("%d topic defaults, want %d", len(def.TopicDefaults), len(topicSettings))
	}
}

// TestSettingsSynonyms checks the finest unit wins and that only it is
// read, as in Kafka.
func TestSettingsSynonyms(t *testing.T) {
	for i, tc := range []struct {
		props  map[string]string
		topic  string
		want   string
		errKey string
	}{
		{map[string]string{"log.retention.hours": "2"}, "retention.ms", "7200000", ""},
		{map[string]string{"log.retention.hours": "2", "log.retention.minutes": "30"}, "retention.ms", "1800000", ""},
		{map[string]string{"log.retention.ms": "1000", "log.retention.hours": "x"}, "retention.ms", "1000", ""},
		{map[string]string{"log.retention.hours": "-3"}, "retention.ms", "-1", ""},
		{map[string]string{"log.roll.hours": "1"}, "segment.ms", "3600000", ""},
		{map[string]string{"log.roll.hours": "-1"}, "", "", "log.roll.hours"},
		{map[string]string{"log.retention.minutes": "153722867280912931"}, "", "", "log.retention.minutes"},
	} {
		c, err := ConfigFromProperties(tc.props)
		if tc.errKey != "" {
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Key != tc.errKey {
				t.Errorf("#%d %v: got %v, want an error naming %s", i, tc.props, err, tc.errKey)
			}
			continue
		}
		if err != nil || c.TopicDefaults[tc.topic] != tc.want {
			t.Errorf("#%d %v: got %s=%q (%v), want %q", i, tc.props, tc.topic, c.TopicDefaults[tc.topic], err, tc.want)
		}
	}
}

// TestTopicConfigValidation checks the topic configs' validation and the
// messages a client gets with INVALID_CONFIG.
func TestTopicConfigValidation(t *testing.T) {
	for i, tc := range []struct {
		name, value string
		want        string // "" for valid
	}{
		{"segment.bytes", "14", ""},
		{"segment.bytes", "13", `topic config "segment.bytes": value 13 must be at least 14`},
		{"segment.bytes", "3000000000", `topic config "segment.bytes": not an int: "3000000000"`},
		{"retention.ms", "x", `topic config "retention.ms": not a long: "x"`},
		{"retention.bytes", "-9223372036854775808", ""},
		{"message.timestamp.type", "Now", `topic config "message.timestamp.type": value "Now" must be one of CreateTime, LogAppendTime`},
		{"remote.storage.enable", "yes", `topic config "remote.storage.enable": value "yes" must be one of true, false`},
		{"cleanup.policy", "delete", ""},
		{"cleanup.policy", "compact", ""},
		{"cleanup.policy", "compact, delete", ""},
		{"cleanup.policy", "delete,compact", ""},
		{"cleanup.policy", "", `topic config "cleanup.policy": value "": cleanup.policy is a list of delete, compact`},
		{"cleanup.policy", "compact,tidy", `topic config "cleanup.policy": invalid value "tidy" for cleanup.policy: each item must be one of delete, compact`},
		{"min.cleanable.dirty.ratio", "0", ""},
		{"min.cleanable.dirty.ratio", "1", ""},
		{"min.cleanable.dirty.ratio", "1.5", `topic config "min.cleanable.dirty.ratio": value 1.5 must be between 0 and 1`},
		{"min.cleanable.dirty.ratio", "NaN", `topic config "min.cleanable.dirty.ratio": not a double: "NaN"`},
		{"min.compaction.lag.ms", "-1", `topic config "min.compaction.lag.ms": value -1 must be at least 0`},
		{"max.compaction.lag.ms", "0", `topic config "max.compaction.lag.ms": value 0 must be at least 1`},
		{"delete.retention.ms", "0", ""},
		{"delete.retention.ms", "-1", `topic config "delete.retention.ms": value -1 must be at least 0`},
		{"local.retention.ms", "-2", ""},
		{"local.retention.ms", "-3", `topic config "local.retention.ms": value -3 must be at least -2`},
		{"bogus", "1", `unknown topic config "bogus"`},
	} {
		v := tc.value
		err := checkTopicConfig(tc.name, &v)
		if got := errString(err); got != tc.want {
			t.Errorf("#%d %s=%s: got %q, want %q", i, tc.name, tc.value, got, tc.want)
		}
	}
	if err := checkTopicConfig("segment.bytes", nil); err == nil {
		t.Errorf("null value: no error")
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestResolveTopicConfig checks that every topic config reaches the field
// the registry names.
func TestResolveTopicConfig(t *testing.T) {
	tc, err := resolveTopicConfig(DefaultConfig().TopicDefaults, map[string]string{
		"segment.bytes": "100000", "segment.ms": "5", "segment.index.bytes": "4096", "index.interval.bytes": "10",
		"retention.bytes": "7", "retention.ms": "8", "flush.messages": "9", "flush.ms": "11", "file.delete.delay.ms": "12",
		"max.message.bytes": "13", "min.insync.replicas": "2", "message.timestamp.type": "LogAppendTime",
		"remote.storage.enable": "true", "local.retention.ms": "14", "local.retention.bytes": "15",
		"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.25", "min.compaction.lag.ms": "16",
		"max.compaction.lag.ms": "17", "delete.retention.ms": "18",
	})
	if err != nil {
		t.Fatal(err)
	}
	s := tc.seg
	if s.SegmentBytes != 100000 || s.SegmentMs != 5 || s.SegmentIndexBytes != 4096 || s.IndexIntervalBytes != 10 ||
		s.RetentionBytes != 7 || s.RetentionMs != 8 || s.FlushMessages != 9 || s.FlushMs != 11 || s.FileDeleteDelayMs != 12 ||
		tc.maxMessageBytes != 13 || tc.minInsyncReps != 2 || !tc.logAppendTime ||
		!tc.remoteStorage || tc.localRetentionMs != 14 || tc.localRetentionBytes != 15 ||
		!tc.compact || !tc.deletePolicy || tc.minCleanableRatio != 0.25 || tc.minCompactionLagMs != 16 ||
		tc.maxCompactionLagMs != 17 || tc.deleteRetentionMs != 18 {
		t.Fatalf("resolved %+v", tc)
	}
}

// TestResolveCleanupPolicy checks that cleanup.policy=compact alone turns
// retention by time and size off, and that the defaults are Kafka's.
func TestResolveCleanupPolicy(t *testing.T) {
	defaults := DefaultConfig().TopicDefaults
	for i, tc := range []struct {
		policy                string
		compact, deletePolicy bool
		retentionMs           int64
	}{
		{"delete", false, true, 3600000},
		{"compact", true, false, -1},
		{"compact,delete", true, true, 3600000},
	} {
		got, err := resolveTopicConfig(defaults, map[string]string{"cleanup.policy": tc.policy, "retention.ms": "3600000", "retention.bytes": "1000"})
		if err != nil {
			t.Fatal(err)
		}
		wantBytes := int64(1000)
		if !tc.deletePolicy {
			wantBytes = -1
		}
		if got.compact != tc.compact || got.deletePolicy != tc.deletePolicy || got.seg.RetentionMs != tc.retentionMs || got.seg.RetentionBytes != wantBytes {
			t.Errorf("#%d %s: got compact %v delete %v retention.ms %d retention.bytes %d", i, tc.policy, got.compact, got.deletePolicy, got.seg.RetentionMs, got.seg.RetentionBytes)
		}
	}
	tc, err := resolveTopicConfig(defaults, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tc.minCleanableRatio != 0.5 || tc.minCompactionLagMs != 0 || tc.maxCompactionLagMs != math.MaxInt64 || tc.deleteRetentionMs != 86400000 {
		t.Errorf("defaults: %+v", tc)
	}
	c := DefaultConfig().Cleaner
	if !c.Enable || c.Threads != 1 || c.DedupeBufferSize != 134217728 || c.LoadFactor != 0.9 || c.IOBufferSize != 524288 ||
		c.IOMaxBytesPerSecond != math.MaxFloat64 || c.Backoff != 15*time.Second {
		t.Errorf("cleaner defaults: %+v", c)
	}
}

// TestCompactionLagConflict checks Kafka's cross-check of the compaction
// lags, per topic and for the broker defaults.
func TestCompactionLagConflict(t *testing.T) {
	_, err := resolveTopicConfig(DefaultConfig().TopicDefaults, map[string]string{"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
	if want := "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"; errString(err) != want {
		t.Errorf("topic: got %v, want %q", err, want)
	}
	_, err = ConfigFromProperties(map[string]string{"log.cleaner.min.compaction.lag.ms": "10", "log.cleaner.max.compaction.lag.ms": "5"})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Key != "log.cleaner.min.compaction.lag.ms" {
		t.Errorf("broker: got %v", err)
	}
}
