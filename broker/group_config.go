package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stratastream/strata/coord"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Group configs, as Kafka 4.2's GroupConfig: the configs of one consumer
// (KIP-848), share or streams group, the GROUP config resource of
// DescribeConfigs, AlterConfigs and IncrementalAlterConfigs. A group
// config overrides the broker setting it defaults from (group.consumer.*,
// group.share.*, group.streams.*; settings_group_protocols.go) and must
// keep within that setting's min and max. They are stored in the
// coordinator as /config/groups/<group id> (the id sanitized as a user
// name is: URL encoding), with a /config/changes notification, and every
// broker follows them (followEntityConfigs). A group's configs exist
// whether or not the group does, and outlive it, as in Kafka.
//
// The values in force (Server.groupConfig) are the stored ones that are
// valid, clamped to the broker's bounds in force (a bound may change
// after a group config was set), else the broker's defaults.

// GroupConfig is a group's configs in force.
type GroupConfig struct {
	// ConsumerSessionTimeout, ConsumerHeartbeatInterval:
	// consumer.session.timeout.ms, consumer.heartbeat.interval.ms.
	ConsumerSessionTimeout, ConsumerHeartbeatInterval time.Duration
	// ShareSessionTimeout, ShareHeartbeatInterval,
	// ShareRecordLockDuration: share.session.timeout.ms,
	// share.heartbeat.interval.ms, share.record.lock.duration.ms.
	ShareSessionTimeout, ShareHeartbeatInterval, ShareRecordLockDuration time.Duration
	// ShareAutoOffsetReset is share.auto.offset.reset: where a share
	// partition without state starts.
	ShareAutoOffsetReset ShareAutoOffsetReset
	// ShareReadCommitted is share.isolation.level=read_committed: only
	// committed transactional records are delivered.
	ShareReadCommitted bool
	// ShareDeadLetterTopic, ShareDeadLetterCopyRecord:
	// errors.deadletterqueue.topic.name and
	// errors.deadletterqueue.copy.record.enable (KIP-1191,
	// share_dead_letter.go).
	ShareDeadLetterTopic      string
	ShareDeadLetterCopyRecord bool
	// StreamsSessionTimeout, StreamsHeartbeatInterval,
	// StreamsNumStandbyReplicas, StreamsInitialRebalanceDelay:
	// streams.session.timeout.ms, streams.heartbeat.interval.ms,
	// streams.num.standby.replicas, streams.initial.rebalance.delay.ms.
	StreamsSessionTimeout, StreamsHeartbeatInterval time.Duration
	StreamsNumStandbyReplicas                       int32
	StreamsInitialRebalanceDelay                    time.Duration
}

// ShareAutoOffsetReset is a share.auto.offset.reset value.
type ShareAutoOffsetReset struct {
	// Strategy is ShareResetLatest, ShareResetEarliest or
	// ShareResetByDuration.
	Strategy string
	// Duration, for ShareResetByDuration: start at the first record no
	// older than this.
	Duration time.Duration
}

// The share.auto.offset.reset strategies.
const (
	ShareResetLatest     = "latest"
	ShareResetEarliest   = "earliest"
	ShareResetByDuration = "by_duration"
)

// groupConfigKey is one group config: its name, type and range (in v:
// the checks of Kafka's GroupConfig.CONFIG), the broker setting it
// defaults from (or its fixed default in v.def), the broker settings
// bounding it, and where its value goes.
type groupConfigKey struct {
	v        setting
	broker   string
	min, max string
	set      func(g *GroupConfig, v string)
}

// groupConfigKeys are Kafka 4.2's group configs, by name.
var groupConfigKeys = []groupConfigKey{
	groupMs("consumer.heartbeat.interval.ms", 1, "group.consumer.", "heartbeat.interval.ms", func(g *GroupConfig) *time.Duration { return &g.ConsumerHeartbeatInterval },
		"The heartbeat interval given to the members of a consumer group."),
	groupMs("consumer.session.timeout.ms", 1, "group.consumer.", "session.timeout.ms", func(g *GroupConfig) *time.Duration { return &g.ConsumerSessionTimeout },
		"The timeout to detect client failures when using the consumer group protocol."),
	{v: setting{name: "errors.deadletterqueue.copy.record.enable", typ: typeBoolean, def: "false",
		doc: "Whether a share group's dead-letter record carries the original record's key, value and headers beside the dead-letter headers; false writes the headers alone."},
		set: func(g *GroupConfig, v string) { g.ShareDeadLetterCopyRecord = v == "true" }},
	{v: setting{name: "errors.deadletterqueue.topic.name", typ: typeString, def: "", check: checkDeadLetterTopicName,
		doc: "The dead-letter topic of a share group: its rejected records and those reaching the delivery count limit are written there (with __dlq.errors.* headers naming the source) before they are archived. Empty: none."},
		set: func(g *GroupConfig, v string) { g.ShareDeadLetterTopic = v }},
	{v: setting{name: "share.auto.offset.reset", typ: typeString, def: ShareResetLatest, check: checkShareAutoOffsetReset,
		doc: "Where a share partition without state starts: earliest, latest, or by_duration:<ISO-8601 duration> (PnDTnHnMn.nS, not negative): the first record no older than that."},
		set: func(g *GroupConfig, v string) { g.ShareAutoOffsetReset, _ = parseShareAutoOffsetReset(v) }},
	groupMs("share.heartbeat.interval.ms", 1, "group.share.", "heartbeat.interval.ms", func(g *GroupConfig) *time.Duration { return &g.ShareHeartbeatInterval },
		"The heartbeat interval given to the members of a share group."),
	{v: setting{name: "share.isolation.level", typ: typeString, def: "read_uncommitted", enum: []string{"read_committed", "read_uncommitted"},
		doc: "read_committed delivers only committed transactional records (and no aborted ones); read_uncommitted delivers every record up to the high watermark."},
		set: func(g *GroupConfig, v string) { g.ShareReadCommitted = v == "read_committed" }},
	groupMs("share.record.lock.duration.ms", 1000, "group.share.", "record.lock.duration.ms", func(g *GroupConfig) *time.Duration { return &g.ShareRecordLockDuration },
		"The record acquisition lock duration of a share group."),
	groupMs("share.session.timeout.ms", 1, "group.share.", "session.timeout.ms", func(g *GroupConfig) *time.Duration { return &g.ShareSessionTimeout },
		"The timeout to detect client failures when using the share group protocol."),
	groupMs("streams.heartbeat.interval.ms", 1, "group.streams.", "heartbeat.interval.ms", func(g *GroupConfig) *time.Duration { return &g.StreamsHeartbeatInterval },
		"The heartbeat interval given to the members of a streams group."),
	{v: setting{name: "streams.initial.rebalance.delay.ms", typ: typeInt, valid: atLeast(0),
		doc: "How long the first rebalance of a new streams group waits for more members."},
		broker: "group.streams.initial.rebalance.delay.ms",
		set:    func(g *GroupConfig, v string) { g.StreamsInitialRebalanceDelay = msValue(v) }},
	{v: setting{name: "streams.num.standby.replicas", typ: typeInt, valid: atLeast(0),
		doc: "The number of standby replicas of each task of a streams group."},
		broker: "group.streams.num.standby.replicas", max: "group.streams.max.standby.replicas",
		set: func(g *GroupConfig, v string) { n, _ := strconv.Atoi(v); g.StreamsNumStandbyReplicas = int32(n) }},
	groupMs("streams.session.timeout.ms", 1, "group.streams.", "session.timeout.ms", func(g *GroupConfig) *time.Duration { return &g.StreamsSessionTimeout },
		"The timeout to detect client failures when using the streams group protocol."),
}

// groupMs is a group config counted in milliseconds, at least min,
// defaulting from prefix+name and bounded by prefix+"min."+name and
// prefix+"max."+name.
func groupMs(name string, min int64, prefix, broker string, p func(g *GroupConfig) *time.Duration, doc string) groupConfigKey {
	return groupConfigKey{v: setting{name: name, typ: typeInt, valid: atLeast(min), doc: doc},
		broker: prefix + broker, min: prefix + "min." + broker, max: prefix + "max." + broker,
		set: func(g *GroupConfig, v string) { *p(g) = msValue(v) }}
}

// msValue is a checked count of milliseconds.
func msValue(v string) time.Duration {
	n, _ := strconv.ParseInt(v, 10, 64)
	return time.Duration(n) * time.Millisecond
}

var groupConfigKeyByName = func() map[string]*groupConfigKey {
	out := map[string]*groupConfigKey{}
	for i := range groupConfigKeys {
		k := &groupConfigKeys[i]
		for _, b := range []string{k.broker, k.min, k.max} {
			if b != "" && brokerSettingByName[b] == nil {
				panic("broker: group config " + k.v.name + " names the unknown broker setting " + b)
			}
		}
		out[k.v.name] = k
	}
	return out
}()

// groupSessionPairs are the group configs whose heartbeat interval must
// stay below their session timeout (Kafka's GroupConfig.validateValues).
var groupSessionPairs = [][2]string{
	{"consumer.heartbeat.interval.ms", "consumer.session.timeout.ms"},
	{"share.heartbeat.interval.ms", "share.session.timeout.ms"},
	{"streams.heartbeat.interval.ms", "streams.session.timeout.ms"},
}

// isoDuration is what Java's Duration.parse takes: PnDTnHnMn.nS, each
// part optional (but one), case-insensitive, with optional signs.
var isoDuration = regexp.MustCompile(`(?i)^([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?$`)

// parseISODuration parses an ISO-8601 duration as Java's Duration.parse.
func parseISODuration(v string) (time.Duration, error) {
	m := isoDuration.FindStringSubmatch(v)
	if m == nil || (m[2] == "" && m[4] == "" && m[5] == "" && m[6] == "") || strings.EqualFold(m[3], "T") {
		return 0, fmt.Errorf("%q is not an ISO-8601 duration (PnDTnHnMn.nS)", v)
	}
	var total float64
	for i, unit := range map[int]float64{2: 86400, 4: 3600, 5: 60, 6: 1} {
		if m[i] == "" {
			continue
		}
		n, err := strconv.ParseInt(m[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q: %v", v, err)
		}
		total += float64(n) * unit
	}
	var nanos int64
	if m[7] != "" {
		frac := (m[7] + "000000000")[:9]
		nanos, _ = strconv.ParseInt(frac, 10, 64)
		if strings.HasPrefix(m[6], "-") {
			nanos = -nanos
		}
	}
	if math.Abs(total) > float64(math.MaxInt64/int64(time.Second)) {
		return 0, fmt.Errorf("%q is too long", v)
	}
	d := time.Duration(total)*time.Second + time.Duration(nanos)
	if m[1] == "-" {
		d = -d
	}
	return d, nil
}

// parseShareAutoOffsetReset parses share.auto.offset.reset as Kafka's
// ShareGroupAutoOffsetResetStrategy: case-insensitive, a negative
// duration refused.
func parseShareAutoOffsetReset(v string) (ShareAutoOffsetReset, error) {
	l := strings.ToLower(strings.TrimSpace(v))
	switch {
	case l == ShareResetLatest || l == ShareResetEarliest:
		return ShareAutoOffsetReset{Strategy: l}, nil
	case strings.HasPrefix(l, ShareResetByDuration+":"):
		d, err := parseISODuration(strings.TrimSpace(v)[len(ShareResetByDuration)+1:])
		if err != nil {
			return ShareAutoOffsetReset{}, err
		}
		if d < 0 {
			return ShareAutoOffsetReset{}, errors.New("a negative duration is not allowed")
		}
		return ShareAutoOffsetReset{Strategy: ShareResetByDuration, Duration: d}, nil
	}
	return ShareAutoOffsetReset{}, fmt.Errorf("value %q must be one of latest, earliest, by_duration:PnDTnHnMn.nS", v)
}

func checkShareAutoOffsetReset(v string) error { _, err := parseShareAutoOffsetReset(v); return err }

// groupCfgs holds the stored group configs, by entity name (the
// sanitized group id), as the coordinator's cache last showed them.
type groupCfgs struct {
	p atomic.Pointer[map[string]map[string]string]
}

// loadGroupConfigs takes the stored group configs from the coordinator's
// cache: at start and after every change notification.
func (s *Server) loadGroupConfigs() {
	m := s.coord.EntityConfigs(coord.EntityGroups)
	s.groupCfgs.p.Store(&m)
}

// storedGroupConfig is a group's stored configs (shared: do not modify).
func (s *Server) storedGroupConfig(groupID string) map[string]string {
	p := s.groupCfgs.p.Load()
	if p == nil {
		return nil
	}
	return (*p)[coord.SanitizeUser(groupID)]
}

// groupConfigDefault is a group config's value when the group sets none:
// its broker setting's in force, or its fixed default.
func (s *Server) groupConfigDefault(k *groupConfigKey) (value string, source kmsg.ConfigSource, setting string) {
	if k.broker == "" {
		return k.v.def, kmsg.ConfigSourceDefaultConfig, ""
	}
	v, _ := brokerSettingByName[k.broker].current(&s.cfg)
	src := kmsg.ConfigSourceDefaultConfig
	if _, ok := s.cfg.Properties[k.broker]; ok {
		src = kmsg.ConfigSourceStaticBrokerConfig
	}
	return v, src, k.broker
}

// brokerBound is a broker setting's value in force, as a number.
func (s *Server) brokerBound(name string) int64 {
	v, _ := brokerSettingByName[name].current(&s.cfg)
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

// groupConfig returns a group's configs in force.
func (s *Server) groupConfig(groupID string) GroupConfig {
	stored := s.storedGroupConfig(groupID)
	var g GroupConfig
	for i := range groupConfigKeys {
		k := &groupConfigKeys[i]
		v, _, _ := s.groupConfigDefault(k)
		if sv, ok := stored[k.v.name]; ok && k.v.validate(sv) == nil {
			v = strings.TrimSpace(sv)
			if k.v.typ == typeInt {
				n, _ := strconv.ParseInt(v, 10, 64)
				if k.min != "" {
					n = max(n, s.brokerBound(k.min))
				}
				if k.max != "" {
					n = min(n, s.brokerBound(k.max))
				}
				v = strconv.FormatInt(n, 10)
			}
		}
		k.set(&g, v)
	}
	return g
}

// groupConfigEntries is the DescribeConfigs answer of a GROUP resource:
// every group config, from the group's own (GROUP_CONFIG) or its
// default, with the broker setting as a synonym.
func (s *Server) groupConfigEntries(groupID string) []configEntry {
	stored := s.storedGroupConfig(groupID)
	var out []configEntry
	for i := range groupConfigKeys {
		k := &groupConfigKeys[i]
		dv, dsrc, dname := s.groupConfigDefault(k)
		e := configEntry{name: k.v.name, value: dv, source: dsrc, typ: k.v.typ.kafka(), doc: k.v.doc}
		if sv, ok := stored[k.v.name]; ok && k.v.validate(sv) == nil {
			e.value, e.source = strings.TrimSpace(sv), kmsg.ConfigSourceGroupConfig
			e.synonyms = append(e.synonyms, configSynonym{name: k.v.name, value: e.value, source: e.source})
		}
		if dname == "" {
			dname = k.v.name
		}
		e.synonyms = append(e.synonyms, configSynonym{name: dname, value: dv, source: dsrc})
		if e.source != kmsg.ConfigSourceGroupConfig {
			e.source = kmsg.ConfigSourceDefaultConfig // as Kafka: a group's unset config is its default
		}
		out = append(out, e)
	}
	return out
}

// checkGroupConfig validates a group's whole new configs as Kafka's
// GroupConfig.validate does, with the broker's bounds in force; the
// message is Kafka's.
func (s *Server) checkGroupConfig(cfg map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(cfg)) {
		k := groupConfigKeyByName[name]
		if k == nil {
			return newKafkaError(kerr.InvalidConfig, "Unknown group config name: %s", name)
		}
		if err := k.v.validate(cfg[name]); err != nil {
			return newKafkaError(kerr.InvalidConfig, "Invalid value %s for configuration %s: %v", cfg[name], name, err)
		}
		if k.v.typ != typeInt {
			continue
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(cfg[name]), 10, 64)
		if k.min != "" && n < s.brokerBound(k.min) {
			return newKafkaError(kerr.InvalidConfig, "%s must be greater than or equal to %s", name, k.min)
		}
		if k.max != "" && n > s.brokerBound(k.max) {
			return newKafkaError(kerr.InvalidConfig, "%s must be less than or equal to %s", name, k.max)
		}
	}
	value := func(name string) int64 {
		v, ok := cfg[name]
		if !ok {
			v, _, _ = s.groupConfigDefault(groupConfigKeyByName[name])
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		return n
	}
	for _, p := range groupSessionPairs {
		if value(p[1]) <= value(p[0]) {
			return newKafkaError(kerr.InvalidConfig, "%s must be greater than %s", p[1], p[0])
		}
	}
	return nil
}

// alterGroupConfigs applies one GROUP resource's changes (replace, for
// AlterConfigs: the configs not given are removed), checked as a whole
// and written to the coordinator unless validateOnly.
func (s *Server) alterGroupConfigs(groupID string, ops []brokerConfigOp, replace, validateOnly bool) error {
	if groupID == "" {
		return newKafkaError(kerr.InvalidRequest, "Group name must not be empty")
	}
	seen := map[string]bool{}
	for _, c := range ops {
		if seen[c.name] {
			return newKafkaError(kerr.InvalidRequest, "error due to duplicate config keys: %s", c.name)
		}
		seen[c.name] = true
	}
	next := func(cur map[string]string) (map[string]string, error) {
		out := map[string]string{}
		if !replace {
			maps.Copy(out, cur)
		}
		for _, c := range ops {
			if groupConfigKeyByName[c.name] == nil {
				return nil, newKafkaError(kerr.InvalidConfig, "Unknown group config name: %s", c.name)
			}
			switch c.op {
			case kmsg.IncrementalAlterConfigOpSet:
				if c.value == nil {
					return nil, newKafkaError(kerr.InvalidConfig, "Null value not supported for group config %s", c.name)
				}
				out[c.name] = strings.TrimSpace(*c.value)
			case kmsg.IncrementalAlterConfigOpDelete:
				delete(out, c.name)
			case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
				return nil, newKafkaError(kerr.InvalidConfig, "Config value append is not allowed for config key: %s", c.name)
			default:
				return nil, newKafkaError(kerr.InvalidRequest, "unknown config operation %d for %s", c.op, c.name)
			}
		}
		if err := s.checkGroupConfig(out); err != nil {
			return nil, err
		}
		if len(out) == 0 {
			return nil, nil
		}
		return out, nil
	}
	entity := coord.SanitizeUser(groupID)
	if entity == "." || entity == ".." {
		return newKafkaError(kerr.InvalidRequest, "group id %q cannot be stored as a znode name", groupID)
	}
	if validateOnly {
		_, err := next(s.coord.EntityConfigs(coord.EntityGroups)[entity])
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	err := s.coord.AlterEntityConfig(ctx, coord.EntityGroups, entity, next)
	var ke *kafkaError
	if errors.As(err, &ke) {
		return err
	}
	if err != nil {
		return coordError(err, "write the group configs")
	}
	s.log.Info("group configs written", "group", groupID, "configs", len(ops))
	s.loadGroupConfigs() // read-your-writes; the watch brings the same
	return nil
}
