package share

import (
	"errors"
	"log/slog"
	"time"

	"github.com/stratastream/strata/broker/group"
	"github.com/stratastream/strata/broker/sharestate"
)

// Offset reset policies of share.auto.offset.reset: where a share
// partition without persisted state starts.
const (
	ResetLatest     = "latest"
	ResetEarliest   = "earliest"
	ResetByDuration = "by_duration" // with GroupConfig.AutoOffsetResetDuration
)

// GroupConfig holds the per-group configs of a share group (Kafka's
// group configs, set with IncrementalAlterConfigs on a GROUP resource),
// resolved against the broker settings.
type GroupConfig struct {
	// AutoOffsetReset is share.auto.offset.reset's strategy: ResetLatest,
	// ResetEarliest, or ResetByDuration: the first record no older than
	// AutoOffsetResetDuration (the broker parses the value, group_config.go).
	AutoOffsetReset         string
	AutoOffsetResetDuration time.Duration
	// RecordLockDuration is share.record.lock.duration.ms.
	RecordLockDuration time.Duration
	// SessionTimeout is share.session.timeout.ms, HeartbeatInterval
	// share.heartbeat.interval.ms.
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration
	// ReadCommitted is share.isolation.level=read_committed.
	ReadCommitted bool
	// DeadLetterTopic is errors.deadletterqueue.topic.name (KIP-1191):
	// the topic rejected records and those at the delivery limit are
	// copied to; "" for none.
	DeadLetterTopic string
}

// Config configures the share group membership and share partitions of
// one broker. The durations and limits are the group.share.* broker
// settings, by Kafka's names.
type Config struct {
	// Persister stores share-partition state (the share coordinator).
	// Required.
	Persister sharestate.Persister
	// GroupConfig returns a group's configs; nil returns Defaults.
	GroupConfig func(group string) GroupConfig
	// Defaults are the broker settings the group configs default to.
	Defaults GroupConfig
	// MaxGroupSize is group.share.max.size; MaxGroups
	// group.share.max.groups.
	MaxGroupSize int
	MaxGroups    int
	// DeliveryCountLimit is group.share.delivery.count.limit: a record
	// delivered this often is archived instead of made available again.
	DeliveryCountLimit int32
	// PartitionMaxRecordLocks is group.share.partition.max.record.locks:
	// at most this many records of a share partition are in flight.
	PartitionMaxRecordLocks int
	// MaxSessions is group.share.max.share.sessions: share sessions this
	// broker keeps.
	MaxSessions int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Logger logs state that could not be persisted (slog.Default when
	// nil).
	Logger *slog.Logger
	// The bounds of the group configs (group.share.min.* and
	// group.share.max.*): a group config outside them is brought inside.
	MinRecordLockDuration, MaxRecordLockDuration time.Duration
	MinSessionTimeout, MaxSessionTimeout         time.Duration
	MinHeartbeatInterval, MaxHeartbeatInterval   time.Duration
	// DeadLetterAutoCreate is
	// errors.deadletterqueue.auto.create.topics.enable and
	// DeadLetterTopicPrefix errors.deadletterqueue.topic.name.prefix
	// (KIP-1191): a group's dead-letter topic that does not exist is
	// created when the first is set and its name has the prefix.
	DeadLetterAutoCreate  bool
	DeadLetterTopicPrefix string
	// DeadLetter writes the dead-letter copies of Archiving records
	// (dead_letter.go); nil archives them uncopied.
	DeadLetter DeadLetterFunc
	// Store keeps the share groups' membership durable: the group
	// coordinator, which appends it to __consumer_offsets. Nil keeps it
	// in memory only.
	Store Store
	// MemberGone, when set, is called (without locks held) after a member
	// left or was fenced, so the broker can release its records.
	MemberGone func(group, member string)
}

// Store appends share group state to __consumer_offsets;
// *group.Coordinator is one. StoreShareGroup appends the records that
// bring the log from prev (nil: nothing of the group) to next (nil: the
// group deleted) and returns at once: a nonzero Kafka error code when
// the coordinator does not own the group's partition, else a channel
// that gets the append's result (nil when nothing differed). It is
// called with Groups' lock held, so it must not call back into Groups.
type Store interface {
	StoreShareGroup(prev, next *group.ShareGroupState) (int16, <-chan error)
}

// Defaults of the group.share.* settings, Kafka's.
const (
	DefaultRecordLockDuration      = 30 * time.Second
	DefaultSessionTimeout          = 45 * time.Second
	DefaultHeartbeatInterval       = 5 * time.Second
	DefaultMaxGroupSize            = 200
	DefaultMaxGroups               = 10
	DefaultDeliveryCountLimit      = 5
	DefaultPartitionMaxRecordLocks = 2000
	DefaultMaxSessions             = 2000
	DefaultMinRecordLockDuration   = 15 * time.Second
	DefaultMaxRecordLockDuration   = 60 * time.Second
	DefaultMinSessionTimeout       = 45 * time.Second
	DefaultMaxSessionTimeout       = 60 * time.Second
	DefaultMinHeartbeatInterval    = 5 * time.Second
	DefaultMaxHeartbeatInterval    = 15 * time.Second
)

// DefaultConfig is Config with Kafka's defaults and no Persister.
func DefaultConfig() Config {
	return Config{
		Defaults: GroupConfig{
			AutoOffsetReset:    ResetLatest,
			RecordLockDuration: DefaultRecordLockDuration,
			SessionTimeout:     DefaultSessionTimeout,
			HeartbeatInterval:  DefaultHeartbeatInterval,
		},
		MaxGroupSize:            DefaultMaxGroupSize,
		MaxGroups:               DefaultMaxGroups,
		DeliveryCountLimit:      DefaultDeliveryCountLimit,
		PartitionMaxRecordLocks: DefaultPartitionMaxRecordLocks,
		MaxSessions:             DefaultMaxSessions,
		MinRecordLockDuration:   DefaultMinRecordLockDuration,
		MaxRecordLockDuration:   DefaultMaxRecordLockDuration,
		MinSessionTimeout:       DefaultMinSessionTimeout,
		MaxSessionTimeout:       DefaultMaxSessionTimeout,
		MinHeartbeatInterval:    DefaultMinHeartbeatInterval,
		MaxHeartbeatInterval:    DefaultMaxHeartbeatInterval,
	}
}

// ErrNoPersister is returned by New without a Persister.
var ErrNoPersister = errors.New("share: no persister")

// withDefaults fills the unset fields.
func (c Config) withDefaults() (Config, error) {
	if c.Persister == nil {
		return c, ErrNoPersister
	}
	d := DefaultConfig()
	if c.Defaults.AutoOffsetReset == "" {
		c.Defaults.AutoOffsetReset = d.Defaults.AutoOffsetReset
	}
	if c.Defaults.RecordLockDuration <= 0 {
		c.Defaults.RecordLockDuration = d.Defaults.RecordLockDuration
	}
	if c.Defaults.SessionTimeout <= 0 {
		c.Defaults.SessionTimeout = d.Defaults.SessionTimeout
	}
	if c.Defaults.HeartbeatInterval <= 0 {
		c.Defaults.HeartbeatInterval = d.Defaults.HeartbeatInterval
	}
	if c.MaxGroupSize <= 0 {
		c.MaxGroupSize = d.MaxGroupSize
	}
	if c.MaxGroups <= 0 {
		c.MaxGroups = d.MaxGroups
	}
	if c.DeliveryCountLimit <= 0 {
		c.DeliveryCountLimit = d.DeliveryCountLimit
	}
	if c.PartitionMaxRecordLocks <= 0 {
		c.PartitionMaxRecordLocks = d.PartitionMaxRecordLocks
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = d.MaxSessions
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	lookup := c.GroupConfig
	if lookup == nil {
		def := c.Defaults
		lookup = func(string) GroupConfig { return def }
	}
	c.GroupConfig = func(group string) GroupConfig { return c.bound(lookup(group)) }
	return c, nil
}

// bound brings a group config inside the bounds, its unset fields
// taken from the defaults.
func (c Config) bound(g GroupConfig) GroupConfig {
	clamp := func(d, def, lo, hi time.Duration) time.Duration {
		if d <= 0 {
			d = def
		}
		if lo > 0 && d < lo {
			d = lo
		}
		if hi > 0 && d > hi {
			d = hi
		}
		return d
	}
	if g.AutoOffsetReset == "" {
		g.AutoOffsetReset = c.Defaults.AutoOffsetReset
	}
	g.RecordLockDuration = clamp(g.RecordLockDuration, c.Defaults.RecordLockDuration, c.MinRecordLockDuration, c.MaxRecordLockDuration)
	g.SessionTimeout = clamp(g.SessionTimeout, c.Defaults.SessionTimeout, c.MinSessionTimeout, c.MaxSessionTimeout)
	g.HeartbeatInterval = clamp(g.HeartbeatInterval, c.Defaults.HeartbeatInterval, c.MinHeartbeatInterval, c.MaxHeartbeatInterval)
	return g
}
