package group

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"
)

// Config holds the coordinator's settings, with Kafka's broker-config names
// in the comments. Start from DefaultConfig: a zero Config is not valid.
type Config struct {
	// NumPartitions is offsets.topic.num.partitions: how many partitions
	// __consumer_offsets has. Groups are spread over them by PartitionFor.
	// It must never change once groups exist. Default 50.
	NumPartitions int

	// InitialRebalanceDelay is group.initial.rebalance.delay.ms: how long
	// the first rebalance of an empty group waits for more members, reset
	// by each newcomer, up to the rebalance timeout. Default 3 s; 0 is
	// allowed.
	InitialRebalanceDelay time.Duration

	// MinSessionTimeout and MaxSessionTimeout are group.min.session.timeout.ms
	// and group.max.session.timeout.ms: a JoinGroup asking for a session
	// timeout outside them gets INVALID_SESSION_TIMEOUT. Defaults 6 s and
	// 30 min.
	MinSessionTimeout time.Duration
	MaxSessionTimeout time.Duration

	// OffsetsRetention is offsets.retention.minutes: committed offsets of a
	// group that has been Empty this long (of a group without a protocol:
	// not committed to for this long) are deleted, and an Empty group with
	// no offsets left is deleted with them. Default 7 days.
	OffsetsRetention time.Duration

	// OffsetsRetentionCheckInterval is offsets.retention.check.interval.ms:
	// how often the expiry pass runs. Default 10 min; 0 disables the pass.
	OffsetsRetentionCheckInterval time.Duration

	// OffsetMetadataMaxBytes is offset.metadata.max.bytes: a commit whose
	// metadata is longer gets OFFSET_METADATA_TOO_LARGE for that partition.
	// Default 4096; at most 32767 (the record format's string length).
	OffsetMetadataMaxBytes int

	// MaxAppendBytes bounds the batches the writer of one partition hands
	// to a single Log.Append call when it groups several writes together.
	// A single write larger than this is still appended alone. Default 1 MiB.
	MaxAppendBytes int

	// PartitionExists, when set, is asked for every partition of an
	// OffsetCommit; false answers UNKNOWN_TOPIC_OR_PARTITION for it, as
	// Kafka does for topics it does not know. Nil accepts every partition.
	// It is called with a group's lock held: it must not call back into
	// the Coordinator.
	PartitionExists func(topic string, partition int32) bool

	// Consumer holds the settings of consumer groups (KIP-848).
	Consumer ConsumerConfig

	// Topics, when set, returns the cluster's topics as the broker's
	// metadata has them, for resolving consumer groups' subscriptions.
	// It is called with a group's lock held: it must not call back into
	// the Coordinator, and should return the same pointer while the
	// topics do not change (the groups resolve their subscriptions again
	// when it changes). Nil: no topics exist.
	Topics func() *TopicSnapshot

	// Now is the clock for the timestamps written to __consumer_offsets
	// and for offset retention (timeouts use the runtime's monotonic
	// timers). Nil means time.Now.
	Now func() time.Time

	// Logger receives the coordinator's events. Nil means slog.Default().
	Logger *slog.Logger

	// timers runs the timeouts (timers.go); nil means the runtime's. Only
	// this package's tests set it.
	timers timers
}

// ConsumerConfig holds the group.consumer.* settings and the rebalance
// protocols the coordinator serves.
type ConsumerConfig struct {
	// Enabled is "consumer" in group.coordinator.rebalance.protocols:
	// ConsumerGroupHeartbeat is served. Without it every heartbeat gets
	// UNSUPPORTED_VERSION and clients stay on the classic protocol.
	Enabled bool

	// SessionTimeout and HeartbeatInterval are
	// group.consumer.session.timeout.ms and
	// group.consumer.heartbeat.interval.ms: a member whose heartbeats
	// stop for the session timeout is removed; the interval is what
	// every heartbeat response tells the member. Defaults 45 s and 5 s.
	SessionTimeout    time.Duration
	HeartbeatInterval time.Duration

	// MinSessionTimeout, MaxSessionTimeout, MinHeartbeatInterval and
	// MaxHeartbeatInterval are the group.consumer.min/max.* bounds of the
	// per-group overrides (group.consumer.session.timeout.ms and
	// group.consumer.heartbeat.interval.ms of a GROUP config resource).
	// Defaults 45 s, 60 s, 5 s, 15 s.
	MinSessionTimeout, MaxSessionTimeout       time.Duration
	MinHeartbeatInterval, MaxHeartbeatInterval time.Duration

	// MaxSize is group.consumer.max.size: a member joining a group that
	// has this many gets GROUP_MAX_SIZE_REACHED. Default MaxInt32.
	MaxSize int

	// Assignors is group.consumer.assignors: the server-side assignors a
	// member may name, the first being the default. Default uniform,
	// range.
	Assignors []string

	// MigrationPolicy is group.consumer.migration.policy (bidirectional,
	// upgrade, downgrade, disabled): which directions of online
	// migration a group with members may take (consumer_migration.go).
	// Empty groups convert between the protocols under every policy.
	MigrationPolicy string

	// GroupTimeouts, when set, returns a group's session timeout and
	// heartbeat interval (its GROUP config overrides); zero values mean
	// the defaults above. It is called with the group's lock held.
	GroupTimeouts func(groupID string) (session, heartbeat time.Duration)
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		NumPartitions:                 50,
		InitialRebalanceDelay:         3 * time.Second,
		MinSessionTimeout:             6 * time.Second,
		MaxSessionTimeout:             30 * time.Minute,
		OffsetsRetention:              7 * 24 * time.Hour,
		OffsetsRetentionCheckInterval: 10 * time.Minute,
		OffsetMetadataMaxBytes:        4096,
		MaxAppendBytes:                1 << 20,
		Consumer:                      DefaultConsumerConfig(),
	}
}

// DefaultConsumerConfig returns Kafka's defaults of the group.consumer.*
// settings.
func DefaultConsumerConfig() ConsumerConfig {
	return ConsumerConfig{
		Enabled:              true,
		SessionTimeout:       45 * time.Second,
		HeartbeatInterval:    5 * time.Second,
		MinSessionTimeout:    45 * time.Second,
		MaxSessionTimeout:    60 * time.Second,
		MinHeartbeatInterval: 5 * time.Second,
		MaxHeartbeatInterval: 15 * time.Second,
		MaxSize:              math.MaxInt32,
		Assignors:            []string{AssignorUniform, AssignorRange},
		MigrationPolicy:      "bidirectional",
	}
}

// validate checks the consumer settings.
func (cc *ConsumerConfig) validate() error {
	switch {
	case cc.SessionTimeout <= 0 || cc.HeartbeatInterval <= 0:
		return fmt.Errorf("%w: consumer session timeout %v and heartbeat interval %v must be positive", ErrInvalidConfig, cc.SessionTimeout, cc.HeartbeatInterval)
	case cc.HeartbeatInterval >= cc.SessionTimeout:
		return fmt.Errorf("%w: consumer heartbeat interval %v must be below the session timeout %v", ErrInvalidConfig, cc.HeartbeatInterval, cc.SessionTimeout)
	case cc.MaxSize < 1:
		return fmt.Errorf("%w: consumer group max size %d < 1", ErrInvalidConfig, cc.MaxSize)
	case len(cc.Assignors) == 0:
		return fmt.Errorf("%w: no consumer group assignor", ErrInvalidConfig)
	}
	for _, a := range cc.Assignors {
		if a != AssignorUniform && a != AssignorRange {
			return fmt.Errorf("%w: unknown consumer group assignor %q (uniform, range)", ErrInvalidConfig, a)
		}
	}
	switch cc.MigrationPolicy {
	case "", "bidirectional", "upgrade", "downgrade", "disabled":
	default:
		return fmt.Errorf("%w: group.consumer.migration.policy %q", ErrInvalidConfig, cc.MigrationPolicy)
	}
	return nil
}

// ErrInvalidConfig is returned by New for a Config it cannot run with.
var ErrInvalidConfig = errors.New("group: invalid config")

func (cfg *Config) validate() error {
	switch {
	case cfg.NumPartitions < 1:
		return fmt.Errorf("%w: NumPartitions %d < 1", ErrInvalidConfig, cfg.NumPartitions)
	case cfg.InitialRebalanceDelay < 0:
		return fmt.Errorf("%w: negative InitialRebalanceDelay", ErrInvalidConfig)
	case cfg.MinSessionTimeout < 0 || cfg.MaxSessionTimeout < cfg.MinSessionTimeout:
		return fmt.Errorf("%w: session timeout bounds [%v, %v]", ErrInvalidConfig, cfg.MinSessionTimeout, cfg.MaxSessionTimeout)
	case cfg.OffsetsRetention <= 0:
		return fmt.Errorf("%w: OffsetsRetention %v <= 0", ErrInvalidConfig, cfg.OffsetsRetention)
	case cfg.OffsetsRetentionCheckInterval < 0:
		return fmt.Errorf("%w: negative OffsetsRetentionCheckInterval", ErrInvalidConfig)
	case cfg.OffsetMetadataMaxBytes < 0 || cfg.OffsetMetadataMaxBytes > maxStringLen:
		return fmt.Errorf("%w: OffsetMetadataMaxBytes %d outside [0, %d]", ErrInvalidConfig, cfg.OffsetMetadataMaxBytes, maxStringLen)
	case cfg.MaxAppendBytes < 1:
		return fmt.Errorf("%w: MaxAppendBytes %d < 1", ErrInvalidConfig, cfg.MaxAppendBytes)
	}
	if err := cfg.Consumer.validate(); err != nil {
		return err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.timers == nil {
		cfg.timers = runtimeTimers{}
	}
	return nil
}
