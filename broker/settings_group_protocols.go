package broker

import (
	"fmt"
	"math"
	"time"
)

// GroupProtocolConfig holds the broker settings of KIP-1071 streams
// groups (not served; their group configs are stored and described): the
// defaults of their group configs (group_config.go) and the bounds a group
// config must keep within, by Kafka's names. The consumer group (KIP-848)
// settings are Config.Groups.Consumer (settings_broker.go), the share
// group settings Config.Share (settings_share.go).
type GroupProtocolConfig struct {
	// StreamsSessionTimeout, StreamsHeartbeatInterval are
	// group.streams.session.timeout.ms and
	// group.streams.heartbeat.interval.ms, each with its min and max;
	// StreamsNumStandbyReplicas is group.streams.num.standby.replicas (at
	// most StreamsMaxStandbyReplicas, group.streams.max.standby.replicas);
	// StreamsInitialRebalanceDelay is group.streams.initial.rebalance.delay.ms.
	StreamsSessionTimeout, StreamsMinSessionTimeout, StreamsMaxSessionTimeout          time.Duration
	StreamsHeartbeatInterval, StreamsMinHeartbeatInterval, StreamsMaxHeartbeatInterval time.Duration
	StreamsNumStandbyReplicas, StreamsMaxStandbyReplicas                               int32
	StreamsInitialRebalanceDelay                                                       time.Duration
}

// msSetting is an int setting counted in milliseconds, at least min,
// stored in the field p points to.
func msSetting(name, def string, valid *valueRange, p func(g *GroupProtocolConfig) *time.Duration, doc string) setting {
	return setting{name: name, typ: typeInt, def: def, valid: valid, unit: time.Millisecond,
		field: func(c *Config) any { return p(&c.GroupProtocols) }, doc: doc}
}

// groupProtocolSettings are GroupProtocolConfig's settings, with Kafka
// 4.2's defaults and ranges.
var groupProtocolSettings = []setting{
	msSetting("group.streams.session.timeout.ms", "45000", between(1, math.MaxInt32), func(g *GroupProtocolConfig) *time.Duration { return &g.StreamsSessionTimeout },
		"Session timeout of a streams group member, unless the group config streams.session.timeout.ms sets it."),
	msSetting("group.streams.min.session.timeout.ms", "45000", between(1, math.MaxInt32), func(g *GroupProtocolConfig) *time.Duration { return &g.StreamsMinSessionTimeout },
		"Smallest streams.session.timeout.ms a group config may set."),
	msSetting("group.streams.max.session.timeout.ms", "60000", between(1, math.MaxInt32), func(g *GroupProtocolConfig) *time.Duration { return &g.StreamsMaxSessionTimeout },
		"Largest streams.session.timeout.ms a group config may set."),
	msSetting("group.streams.heartbeat.interval.ms", "5000", between(1, math.MaxInt32), func(g *GroupProtocolConfig) *time.Duration { return &g.StreamsHeartbeatInterval },
		"Heartbeat interval given to streams group members, unless the group config streams.heartbeat.interval.ms sets it."),
	msSetting("group.streams.min.heartbeat.interval.ms", "5000", between(1, math.MaxInt32), func(g *GroupProtocolConfig) *time.Duration { return &g.StreamsMinHeartbeatInterval },
		"Smallest streams.heartbeat.interval.ms a group config may set."),
	msSetting("group.streams.max.heartbeat.interval.ms", "15000", between(1, math.MaxInt32), func(g *GroupProtocolConfig) *time.Duration { return &g.StreamsMaxHeartbeatInterval },
		"Largest streams.heartbeat.interval.ms a group config may set."),
	{name: "group.streams.num.standby.replicas", typ: typeInt, def: "0", valid: between(0, math.MaxInt32),
		field: func(c *Config) any { return &c.GroupProtocols.StreamsNumStandbyReplicas },
		doc:   "Standby replicas of each task of a streams group, unless the group config streams.num.standby.replicas sets it."},
	{name: "group.streams.max.standby.replicas", typ: typeInt, def: "2", valid: between(0, math.MaxInt32),
		field: func(c *Config) any { return &c.GroupProtocols.StreamsMaxStandbyReplicas },
		doc:   "Largest streams.num.standby.replicas a group config may set."},
	msSetting("group.streams.initial.rebalance.delay.ms", "3000", between(0, math.MaxInt32), func(g *GroupProtocolConfig) *time.Duration { return &g.StreamsInitialRebalanceDelay },
		"How long the first rebalance of a new streams group waits for more members, unless the group config streams.initial.rebalance.delay.ms sets it."),
}

// checkGroupProtocols checks GroupProtocolConfig as Kafka's
// GroupCoordinatorConfig and ShareGroupConfig do: each default within its
// bounds, each heartbeat interval below its session timeout.
func checkGroupProtocols(c *Config) *ConfigError {
	g := &c.GroupProtocols
	for _, b := range []struct {
		prefix             string
		v, lo, hi          time.Duration
		name, loKey, hiKey string
	}{
		{"group.streams.", g.StreamsSessionTimeout, g.StreamsMinSessionTimeout, g.StreamsMaxSessionTimeout, "session.timeout.ms", "min.session.timeout.ms", "max.session.timeout.ms"},
		{"group.streams.", g.StreamsHeartbeatInterval, g.StreamsMinHeartbeatInterval, g.StreamsMaxHeartbeatInterval, "heartbeat.interval.ms", "min.heartbeat.interval.ms", "max.heartbeat.interval.ms"},
	} {
		k := b.prefix + b.name
		if b.v < b.lo {
			return &ConfigError{Key: k, Value: c.Properties[k], Reason: fmt.Sprintf("must be at least %s%s (%d)", b.prefix, b.loKey, b.lo.Milliseconds())}
		}
		if b.v > b.hi {
			return &ConfigError{Key: k, Value: c.Properties[k], Reason: fmt.Sprintf("must be at most %s%s (%d)", b.prefix, b.hiKey, b.hi.Milliseconds())}
		}
	}
	for _, p := range []struct {
		prefix      string
		hb, session time.Duration
	}{
		{"group.share.", c.Share.Defaults.HeartbeatInterval, c.Share.Defaults.SessionTimeout},
		{"group.streams.", g.StreamsHeartbeatInterval, g.StreamsSessionTimeout},
	} {
		if p.hb >= p.session {
			k := p.prefix + "heartbeat.interval.ms"
			return &ConfigError{Key: k, Value: c.Properties[k], Reason: fmt.Sprintf("must be less than %ssession.timeout.ms (%d)", p.prefix, p.session.Milliseconds())}
		}
	}
	if g.StreamsNumStandbyReplicas > g.StreamsMaxStandbyReplicas {
		k := "group.streams.num.standby.replicas"
		return &ConfigError{Key: k, Value: c.Properties[k], Reason: fmt.Sprintf("must be at most group.streams.max.standby.replicas (%d)", g.StreamsMaxStandbyReplicas)}
	}
	return nil
}
