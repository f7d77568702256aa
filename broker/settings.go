package broker

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The settings registry: every broker setting and topic config Strata
// accepts is one entry (a setting) in one of the tables that settings
// concatenates below: settings_broker.go (listeners, data directory,
// requests, cluster, replication, groups), settings_log.go (the log's
// settings: topic configs and their broker defaults), tiering.go and
// metrics.go. Everything else is derived from the entries:
//
//   - ConfigFromProperties (config.go): the defaults, the parsing and the
//     validation of broker settings, in one loop;
//   - topic configs (topic_config.go): checkTopicConfig, the broker
//     defaults in Config.TopicDefaults, resolveTopicConfig;
//   - DescribeConfigs and CreateTopics answers: values, sources,
//     synonyms, types, read-only flags (brokerConfigEntries,
//     topicConfigEntries);
//   - `strata broker --help` and `strata docs config`, which writes
//     docs/configuration.md (configdoc.go).
//
// A default is written once, in its entry (or taken from the package that
// owns it, such as segment.DefaultConfig); help texts never repeat it.

// setting is one broker setting, one topic config, or both: a broker
// setting that is the default of a topic config (log.retention.ms of
// retention.ms), named as Kafka names them.
type setting struct {
	// name is the broker setting's name; "" for a topic config that no
	// broker setting provides a default for.
	name string
	// topic is the topic config this setting is, or that the broker
	// setting is the default of; "" for a broker-only setting. The
	// broker's value is kept in Config.TopicDefaults[topic].
	topic string
	// synonymOf, for a broker setting that gives another's value in a
	// coarser unit (log.retention.hours of log.retention.ms), names that
	// other setting; scale is how many of its units one unit of this one
	// is (3600000). Of a setting and its synonyms only the finest unit
	// that is set is read, as in Kafka.
	synonymOf string
	scale     int64
	// typ is the value's type: how it is parsed and what DescribeConfigs
	// calls it.
	typ settingType
	// def is the value when the setting is not given, as DescribeConfigs
	// reports it (possibly empty). A setting without one has unset
	// instead.
	def string
	// unset, for a setting without a value of its own, says what applies
	// when it is not given ("the listener"). DescribeConfigs leaves the
	// setting out until it is set.
	unset string
	// dynamic says the topic config can change at run time, per topic,
	// through AlterConfigs and IncrementalAlterConfigs.
	dynamic bool
	// dynamicBroker says the broker setting is a dynamic broker config:
	// it can change at run time per broker or as the cluster default,
	// stored in the coordinator (dynamic_broker_config.go); other broker
	// settings are read at start only (but for the TLS store reload,
	// ssl_reload.go).
	dynamicBroker bool
	// valid bounds a number (nil: any value of typ); enum lists the values
	// a string may take; check, when set, validates further.
	valid *valueRange
	// validDouble bounds a double, both ends included.
	validDouble *[2]float64
	enum        []string
	check       func(v string) error
	// field points into the Config the broker setting sets: a *bool,
	// *string, *[]string, *int16, *int32, *int, *int64, *float64, or a
	// *time.Duration counted in unit. Nil for a topic config's default
	// (kept in Config.TopicDefaults) and for a setting that is only
	// checked.
	field func(c *Config) any
	unit  time.Duration
	// set, instead of field, parses and checks the value itself and
	// stores it, for a setting whose field differs from its text
	// (listeners); typ, valid, enum and check are then not applied. value
	// renders the field back for DescribeConfigs.
	set   func(c *Config, v string) error
	value func(c *Config) string
	// topicField points into the topicConfig a topic config sets, like
	// field; topicSet replaces it where the field differs from the text.
	// Neither is set for topic configs read from the overrides directly.
	topicField func(tc *topicConfig) any
	topicSet   func(tc *topicConfig, v string) error
	// doc is the help text: one or two sentences, no default.
	doc string
	// perListener says the setting may also be given for one listener,
	// as listener.name.<name>.<setting>, which then wins there
	// (Config.ListenerProperties); perMechanism that it may be given for
	// one SASL mechanism, as <mechanism>.<setting>, also per listener.
	perListener, perMechanism bool
	// sensitive hides the value (a password): DescribeConfigs returns
	// null with IsSensitive, and errors do not quote it.
	sensitive bool

	// synonyms are the settings with synonymOf naming this one, finest
	// unit first (filled by indexSettings).
	synonyms []*setting
}

// settingType is a setting's type, by Kafka's names.
type settingType int8

const (
	typeBoolean settingType = iota + 1
	typeString
	typeList // comma-separated
	typeShort
	typeInt
	typeLong
	typeDouble
)

// kafka is the type as DescribeConfigs reports it.
func (t settingType) kafka() kmsg.ConfigType {
	switch t {
	case typeBoolean:
		return kmsg.ConfigTypeBoolean
	case typeString:
		return kmsg.ConfigTypeString
	case typeList:
		return kmsg.ConfigTypeList
	case typeShort:
		return kmsg.ConfigTypeShort
	case typeInt:
		return kmsg.ConfigTypeInt
	case typeDouble:
		return kmsg.ConfigTypeDouble
	}
	return kmsg.ConfigTypeLong
}

func (t settingType) String() string {
	return [...]string{"?", "boolean", "string", "list", "short", "int", "long", "double"}[t]
}

// bits is the size of a number type, for strconv.ParseInt; 0 for others.
func (t settingType) bits() int {
	switch t {
	case typeShort:
		return 16
	case typeInt:
		return 32
	case typeLong:
		return 64
	}
	return 0
}

// valueRange bounds a number, both ends included.
type valueRange struct{ min, max int64 }

// atLeast bounds a number from below only (above by its type).
func atLeast(min int64) *valueRange { return &valueRange{min, math.MaxInt64} }

// between bounds a number on both sides.
func between(min, max int64) *valueRange { return &valueRange{min, max} }

// String describes the range for the documentation; a duration's
// millisecond bound (maxMs, some 292 years) is left out.
func (r *valueRange) String() string {
	if r.max == math.MaxInt64 || r.max == maxMs {
		return fmt.Sprintf("at least %d", r.min)
	}
	return fmt.Sprintf("%d to %d", r.min, r.max)
}

// maxMs is the largest count of milliseconds a time.Duration holds.
const maxMs = math.MaxInt64 / int64(time.Millisecond)

// msString renders a duration as Kafka's *.ms settings count it.
func msString(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

// settings is the registry, in the order ConfigFromProperties applies the
// given values (log.dir before log.dirs, so that log.dirs wins).
var settings = slices.Concat(brokerSettings, logSettings, cleanerSettings, clusterSettings, groupSettings, groupProtocolSettings, shareSettings, shareCoordinatorSettings, tieringSettings, metricsSettings, saslSettings, sslSettings, aclSettings, throttleSettings, tokenSettings, remoteFetchSettings)

// brokerSettingByName and topicSettingByName index the registry by broker
// setting name and by topic config name.
var brokerSettingByName, topicSettingByName = indexSettings(settings)

// topicSettings are the entries that are topic configs, sorted by topic
// config name.
var topicSettings = func() []*setting {
	var out []*setting
	for _, s := range topicSettingByName {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *setting) int { return strings.Compare(a.topic, b.topic) })
	return out
}()

// sortedBrokerSettings are the broker settings, sorted by name.
var sortedBrokerSettings = func() []*setting {
	var out []*setting
	for _, s := range brokerSettingByName {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *setting) int { return strings.Compare(a.name, b.name) })
	return out
}()

// indexSettings indexes the registry and links synonyms to the setting
// they are synonyms of. A name given twice, or a synonym of an unknown
// setting, is a mistake in the tables and panics when the package loads.
func indexSettings(all []setting) (byName, byTopic map[string]*setting) {
	byName, byTopic = map[string]*setting{}, map[string]*setting{}
	for i := range all {
		s := &all[i]
		if s.name != "" {
			if _, dup := byName[s.name]; dup {
				panic("broker: setting " + s.name + " is in the registry twice")
			}
			byName[s.name] = s
		}
		if s.topic != "" && s.synonymOf == "" {
			if _, dup := byTopic[s.topic]; dup {
				panic("broker: topic config " + s.topic + " is in the registry twice")
			}
			byTopic[s.topic] = s
		}
	}
	for i := range all {
		s := &all[i]
		if s.synonymOf == "" {
			continue
		}
		p, ok := byName[s.synonymOf]
		if !ok || p.synonymOf != "" {
			panic("broker: setting " + s.name + " is a synonym of " + s.synonymOf + ", which is not a setting of its own")
		}
		p.synonyms = append(p.synonyms, s)
		slices.SortFunc(p.synonyms, func(a, b *setting) int { return cmp.Compare(a.scale, b.scale) })
	}
	return byName, byTopic
}

// brokerNames are the broker settings that give the setting's value, the
// first one set winning: the setting itself, then its synonyms.
func (s *setting) brokerNames() []string {
	var out []string
	if s.name != "" {
		out = append(out, s.name)
	}
	for _, syn := range s.synonyms {
		out = append(out, syn.name)
	}
	return out
}

// label is the setting's broker name, or its topic config name if it has
// none.
func (s *setting) label() string {
	if s.name != "" {
		return s.name
	}
	return s.topic
}

// hasDefault reports whether the setting has a value when not given.
func (s *setting) hasDefault() bool { return s.unset == "" && s.synonymOf == "" }

// validate checks a value (surrounding spaces ignored) by the setting's
// type, range, enum and check. The message is meant for whoever gave the
// value: the operator, or a client (INVALID_CONFIG).
func (s *setting) validate(v string) error {
	v = strings.TrimSpace(v)
	switch s.typ {
	case typeBoolean:
		if v != "true" && v != "false" {
			return fmt.Errorf("value %q must be one of true, false", v)
		}
	case typeShort, typeInt, typeLong:
		n, err := strconv.ParseInt(v, 10, s.typ.bits())
		if err != nil {
			article := "a"
			if s.typ == typeInt {
				article = "an"
			}
			return fmt.Errorf("not %s %s: %q", article, s.typ, v)
		}
		if r := s.valid; r != nil && (n < r.min || n > r.max) {
			if r.max == math.MaxInt64 {
				return fmt.Errorf("value %d must be at least %d", n, r.min)
			}
			return fmt.Errorf("value %d must be between %d and %d", n, r.min, r.max)
		}
	case typeDouble:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("not a double: %q", v)
		}
		if r := s.validDouble; r != nil && (f < r[0] || f > r[1]) {
			return fmt.Errorf("value %v must be between %v and %v", f, r[0], r[1])
		}
	}
	if s.enum != nil && !slices.Contains(s.enum, v) {
		return fmt.Errorf("value %q must be one of %s", v, strings.Join(s.enum, ", "))
	}
	if s.check != nil {
		return s.check(v)
	}
	return nil
}

// apply checks a broker setting's value (trimmed) and stores it in c.
func (s *setting) apply(c *Config, v string) error {
	if s.set != nil {
		return s.set(c, v)
	}
	if err := s.validate(v); err != nil {
		return err
	}
	switch {
	case s.topic != "":
		c.TopicDefaults[s.topic] = v
	case s.field != nil:
		return storeValue(s.field(c), v, s.unit)
	}
	return nil
}

// applyScaled reads the value of a setting given by one of its synonyms,
// or by itself (scale 1): an integer in the synonym's unit, stored in the
// setting's unit. A negative value in a coarser unit is -1 (unlimited).
func (s *setting) applyScaled(c *Config, from *setting, v string) error {
	scale := max(from.scale, 1)
	n, err := strconv.ParseInt(v, 10, from.typ.bits())
	if err != nil {
		return fmt.Errorf("not a %s: %q", from.typ, v)
	}
	if n > 0 && n > math.MaxInt64/scale {
		return fmt.Errorf("value %d is too large", n)
	}
	if n < 0 && scale > 1 {
		n = -1
	} else {
		n *= scale
	}
	return s.apply(c, strconv.FormatInt(n, 10))
}

// current is the value of a broker setting in c, as DescribeConfigs
// reports it when the setting is not given; ok is false for a setting
// without a value of its own.
func (s *setting) current(c *Config) (v string, ok bool) {
	switch {
	case !s.hasDefault():
		return "", false
	case s.topic != "":
		return c.TopicDefaults[s.topic], true
	case s.value != nil:
		return s.value(c), true
	case s.field != nil:
		return formatValue(s.field(c), s.unit), true
	}
	return s.def, true
}

// storeValue stores a checked value in the field p points to.
func storeValue(p any, v string, unit time.Duration) error {
	v = strings.TrimSpace(v)
	switch p := p.(type) {
	case *bool:
		if v != "true" && v != "false" {
			return fmt.Errorf("not a boolean: %q", v)
		}
		*p = v == "true"
		return nil
	case *string:
		*p = v
		return nil
	case *[]string:
		*p = splitList(v)
		return nil
	case *float64:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return err
		}
		*p = f
		return nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return err
	}
	switch p := p.(type) {
	case *int16:
		*p = int16(n)
	case *int32:
		*p = int32(n)
	case *int:
		*p = int(n)
	case *int64:
		*p = n
	case *time.Duration:
		*p = time.Duration(n) * unit
	default:
		panic(fmt.Sprintf("broker: setting field of type %T", p))
	}
	return nil
}

// formatValue renders the field p points to as a setting's text.
func formatValue(p any, unit time.Duration) string {
	switch p := p.(type) {
	case *bool:
		return strconv.FormatBool(*p)
	case *string:
		return *p
	case *[]string:
		return strings.Join(*p, ",")
	case *float64:
		return strconv.FormatFloat(*p, 'g', -1, 64)
	case *int16:
		return strconv.Itoa(int(*p))
	case *int32:
		return strconv.Itoa(int(*p))
	case *int:
		return strconv.Itoa(*p)
	case *int64:
		return strconv.FormatInt(*p, 10)
	case *time.Duration:
		return strconv.FormatInt(int64(*p/unit), 10)
	}
	panic(fmt.Sprintf("broker: setting field of type %T", p))
}

// splitList splits a list value at commas, dropping spaces and empty
// items.
func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
