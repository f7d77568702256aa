package group

import (
	"errors"
	"fmt"
	"log/slog"
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
	}
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
