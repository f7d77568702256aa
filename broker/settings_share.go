package broker

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/stratastream/strata/broker/share"
)

// shareDefaults are package share's defaults of the share group settings.
var shareDefaults = share.DefaultConfig()

// shareMsSetting is a setting of a duration in milliseconds.
func shareMsSetting(name string, def int64, lo, hi int64, field func(c *Config) any, doc string) setting {
	return setting{name: name, typ: typeInt, def: strconv.FormatInt(def, 10), valid: between(lo, hi), field: field, unit: time.Millisecond, doc: doc}
}

// shareSettings are the share group settings (Config.Share), by Kafka's
// names and with its defaults and bounds.
var shareSettings = []setting{
	{name: "errors.deadletterqueue.auto.create.topics.enable", typ: typeBoolean, def: "false",
		field: func(c *Config) any { return &c.Share.DeadLetterAutoCreate },
		doc:   "Whether a share group's dead-letter topic (errors.deadletterqueue.topic.name) that does not exist is created, with the broker's topic settings, when a record is first written to it; its name must start with errors.deadletterqueue.topic.name.prefix. Otherwise such records are archived without a copy and counted in strata_share_dead_letter_failed_records_total."},
	{name: "errors.deadletterqueue.topic.name.prefix", typ: typeString, def: "dlq.",
		field: func(c *Config) any { return &c.Share.DeadLetterTopicPrefix },
		doc:   "The prefix a share group's dead-letter topic name must have to be created automatically (errors.deadletterqueue.auto.create.topics.enable)."},
	shareMsSetting("group.share.record.lock.duration.ms", shareDefaults.Defaults.RecordLockDuration.Milliseconds(), 1000, 3_600_000,
		func(c *Config) any { return &c.Share.Defaults.RecordLockDuration },
		"How long a share group member holds the records it acquired before they are delivered to another (a group's share.record.lock.duration.ms overrides it)."),
	shareMsSetting("group.share.min.record.lock.duration.ms", shareDefaults.MinRecordLockDuration.Milliseconds(), 1000, 3_600_000,
		func(c *Config) any { return &c.Share.MinRecordLockDuration },
		"Shortest acquisition lock a share group may be configured with."),
	shareMsSetting("group.share.max.record.lock.duration.ms", shareDefaults.MaxRecordLockDuration.Milliseconds(), 1000, 3_600_000,
		func(c *Config) any { return &c.Share.MaxRecordLockDuration },
		"Longest acquisition lock a share group may be configured with."),
	shareMsSetting("group.share.session.timeout.ms", shareDefaults.Defaults.SessionTimeout.Milliseconds(), 1, math.MaxInt32,
		func(c *Config) any { return &c.Share.Defaults.SessionTimeout },
		"A share group member that sends no heartbeat for this long is removed from its group and its records released (a group's share.session.timeout.ms overrides it)."),
	shareMsSetting("group.share.min.session.timeout.ms", shareDefaults.MinSessionTimeout.Milliseconds(), 1, math.MaxInt32,
		func(c *Config) any { return &c.Share.MinSessionTimeout },
		"Shortest session timeout a share group may be configured with."),
	shareMsSetting("group.share.max.session.timeout.ms", shareDefaults.MaxSessionTimeout.Milliseconds(), 1, math.MaxInt32,
		func(c *Config) any { return &c.Share.MaxSessionTimeout },
		"Longest session timeout a share group may be configured with."),
	shareMsSetting("group.share.heartbeat.interval.ms", shareDefaults.Defaults.HeartbeatInterval.Milliseconds(), 1, math.MaxInt32,
		func(c *Config) any { return &c.Share.Defaults.HeartbeatInterval },
		"How often share group members are told to heartbeat (a group's share.heartbeat.interval.ms overrides it)."),
	shareMsSetting("group.share.min.heartbeat.interval.ms", shareDefaults.MinHeartbeatInterval.Milliseconds(), 1, math.MaxInt32,
		func(c *Config) any { return &c.Share.MinHeartbeatInterval },
		"Shortest heartbeat interval a share group may be configured with."),
	shareMsSetting("group.share.max.heartbeat.interval.ms", shareDefaults.MaxHeartbeatInterval.Milliseconds(), 1, math.MaxInt32,
		func(c *Config) any { return &c.Share.MaxHeartbeatInterval },
		"Longest heartbeat interval a share group may be configured with."),
	{name: "group.share.max.size", typ: typeInt, def: strconv.Itoa(shareDefaults.MaxGroupSize), valid: between(10, 1000),
		field: func(c *Config) any { return &c.Share.MaxGroupSize },
		doc:   "Most members a share group may have; a member joining past it gets GROUP_MAX_SIZE_REACHED."},
	{name: "group.share.max.groups", typ: typeInt, def: strconv.Itoa(shareDefaults.MaxGroups), valid: between(1, 100),
		field: func(c *Config) any { return &c.Share.MaxGroups },
		doc:   "Most share groups a broker coordinates."},
	{name: "group.share.delivery.count.limit", typ: typeInt, def: strconv.Itoa(int(shareDefaults.DeliveryCountLimit)), valid: between(2, 10),
		field: func(c *Config) any { return &c.Share.DeliveryCountLimit },
		doc:   "A record of a share group delivered this many times is archived instead of delivered again."},
	{name: "group.share.partition.max.record.locks", typ: typeInt, def: strconv.Itoa(shareDefaults.PartitionMaxRecordLocks), valid: between(100, 10000),
		field: func(c *Config) any { return &c.Share.PartitionMaxRecordLocks },
		doc:   "Most records of one share partition in flight (from its start offset to the last acquired record); past it nothing more is acquired until the start offset moves."},
	{name: "group.share.max.share.sessions", typ: typeInt, def: strconv.Itoa(shareDefaults.MaxSessions), valid: between(1, math.MaxInt32),
		field: func(c *Config) any { return &c.Share.MaxSessions },
		doc:   "Most share sessions a broker keeps; a ShareFetch opening one more gets SHARE_SESSION_LIMIT_REACHED."},
}

// checkShareSettings checks that each share group default is inside its
// bounds, as Kafka requires at start.
func checkShareSettings(c *Config) *ConfigError {
	for _, b := range []struct {
		name      string
		v, lo, hi int64
	}{
		{"group.share.record.lock.duration.ms", c.Share.Defaults.RecordLockDuration.Milliseconds(), c.Share.MinRecordLockDuration.Milliseconds(), c.Share.MaxRecordLockDuration.Milliseconds()},
		{"group.share.session.timeout.ms", c.Share.Defaults.SessionTimeout.Milliseconds(), c.Share.MinSessionTimeout.Milliseconds(), c.Share.MaxSessionTimeout.Milliseconds()},
		{"group.share.heartbeat.interval.ms", c.Share.Defaults.HeartbeatInterval.Milliseconds(), c.Share.MinHeartbeatInterval.Milliseconds(), c.Share.MaxHeartbeatInterval.Milliseconds()},
	} {
		if b.v < b.lo || b.v > b.hi {
			return &ConfigError{Key: b.name, Value: c.Properties[b.name], Reason: fmt.Sprintf("must be between its min (%d) and max (%d)", b.lo, b.hi)}
		}
	}
	return nil
}
