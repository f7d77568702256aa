package segment

import (
	"log/slog"
	"math"
	"os"
	"time"
)

// Config holds the per-partition settings of a Log. Field comments give
// Kafka's topic-config name for each. Start from DefaultConfig and change what
// you need: Open replaces values that Kafka would reject (zero or negative
// sizes and intervals) by the default, as noted per field.
type Config struct {
	// SegmentBytes is segment.bytes: a segment is rolled when the next
	// append would not fit. Default 1 GiB; at most math.MaxInt32, since
	// index positions are 32-bit. Zero or less means the default.
	SegmentBytes int64
	// SegmentMs is segment.ms: a non-empty segment is rolled once its
	// first batch was appended this long ago (wall clock). Default 7 days.
	// Zero or less means the default.
	SegmentMs int64
	// SegmentIndexBytes is segment.index.bytes: the size of the offset
	// index (and time index) of a segment; a full index rolls the segment.
	// Default 10 MiB. Values below 12 mean the default.
	SegmentIndexBytes int
	// IndexIntervalBytes is index.interval.bytes: an offset index entry is
	// added for a batch that starts at least this many bytes after the
	// previous entry. Default 4096; 0 indexes every batch. Negative means
	// the default.
	IndexIntervalBytes int
	// RetentionBytes is retention.bytes: whole sealed segments are deleted,
	// oldest first, while the log is larger than this. -1 (the default)
	// is unlimited; 0 means the default.
	RetentionBytes int64
	// RetentionMs is retention.ms: a sealed segment whose largest timestamp
	// is older than this is deleted. Default 7 days; -1 is unlimited; 0
	// means the default.
	RetentionMs int64
	// FlushMessages is flush.messages: the log is fsynced once this many
	// records are unflushed. 1 makes every Append wait for its fsync.
	// Default math.MaxInt64 (never); zero or less means the default.
	FlushMessages int64
	// FlushMs is flush.ms: unflushed data is fsynced after this long.
	// Default math.MaxInt64 (never); zero or less means the default.
	FlushMs int64
	// FileDeleteDelayMs is file.delete.delay.ms: files of a deleted segment
	// are unlinked at once, but their descriptors stay open this long so
	// in-flight zero-copy reads finish. Default 60000; negative means 0.
	FileDeleteDelayMs int64
}

// DefaultConfig returns Kafka's defaults for the settings in Config.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:       1 << 30,
		SegmentMs:          7 * 24 * 3600 * 1000,
		SegmentIndexBytes:  10 << 20,
		IndexIntervalBytes: 4096,
		RetentionBytes:     -1,
		RetentionMs:        7 * 24 * 3600 * 1000,
		FlushMessages:      math.MaxInt64,
		FlushMs:            math.MaxInt64,
		FileDeleteDelayMs:  60000,
	}
}

// normalized returns cfg with invalid values replaced by the defaults.
func (cfg Config) normalized() Config {
	d := DefaultConfig()
	if cfg.SegmentBytes <= 0 {
		cfg.SegmentBytes = d.SegmentBytes
	}
	if cfg.SegmentBytes > math.MaxInt32 {
		cfg.SegmentBytes = math.MaxInt32
	}
	if cfg.SegmentMs <= 0 {
		cfg.SegmentMs = d.SegmentMs
	}
	if cfg.SegmentIndexBytes < TimeIndexEntrySize {
		cfg.SegmentIndexBytes = d.SegmentIndexBytes
	}
	if cfg.IndexIntervalBytes < 0 {
		cfg.IndexIntervalBytes = d.IndexIntervalBytes
	}
	if cfg.RetentionBytes == 0 || cfg.RetentionBytes < -1 {
		cfg.RetentionBytes = d.RetentionBytes
	}
	if cfg.RetentionMs == 0 || cfg.RetentionMs < -1 {
		cfg.RetentionMs = d.RetentionMs
	}
	if cfg.FlushMessages <= 0 {
		cfg.FlushMessages = d.FlushMessages
	}
	if cfg.FlushMs <= 0 {
		cfg.FlushMs = d.FlushMs
	}
	if cfg.FileDeleteDelayMs < 0 {
		cfg.FileDeleteDelayMs = 0
	}
	return cfg
}

// Option changes how Open sets up a Log.
type Option func(*options)

type options struct {
	now      func() time.Time
	logger   *slog.Logger
	onSeal   []func(SegmentInfo)
	veto     func(SegmentInfo) bool
	syncHook func(upTo int64)
	onPoison func(err error)
	// keepEpochs, if set and true, keeps the leader epochs of segments
	// retention deletes (WithKeepEpochs).
	keepEpochs func() bool

	wrapFile func(path string, f *os.File) File // segment files are written through the result

	// Internal hooks, for tests and benchmarks in this package.
	ckptInterval time.Duration // least time between background recovery-point checkpoints
	// afterFunc runs f in its own goroutine once d has passed, unless the
	// returned stop is called first (reporting whether it stopped f), as
	// time.AfterFunc does; it times the delayed close of deleted segments.
	afterFunc func(d time.Duration, f func()) (stop func() bool)
	// cleanHook is called at named points of a cleaning (clean.go,
	// clean_swap.go); an error stops the cleaning there as a crash would.
	cleanHook func(point string) error
}

func defaultOptions() options {
	return options{
		now:          time.Now,
		logger:       slog.Default(),
		wrapFile:     func(_ string, f *os.File) File { return f },
		ckptInterval: time.Second,
		afterFunc:    func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop },
	}
}

// WithClock sets the clock used for segment.ms, retention.ms and segment
// ages. Tests inject a fake one; the default is time.Now.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// WithLogger sets where the log reports recovery and background failures.
// The default is slog.Default().
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

// WithOnSeal registers fn to be called after a segment is sealed (rolled),
// outside the log's locks, so fn may call back into the Log. Several
// callbacks may be registered; they run in order on the goroutine that
// rolled the segment.
func WithOnSeal(fn func(SegmentInfo)) Option {
	return func(o *options) { o.onSeal = append(o.onSeal, fn) }
}

// WithKeepEpochs makes retention keep the leader epochs of the segments
// it deletes while keep returns true: the log's older part lives on
// elsewhere (tiered storage), so the partition's log start is below the
// local one and its leader-epoch history must still answer for it, as
// Kafka keeps it down to the log start offset, not the local log start.
// Moving the log start with SetLogStartOffset still drops the epochs below
// it.
func WithKeepEpochs(keep func() bool) Option {
	return func(o *options) { o.keepEpochs = keep }
}

// keepsEpochs reports whether deleted segments' epochs stay.
func (o *options) keepsEpochs() bool { return o.keepEpochs != nil && o.keepEpochs() }

// WithDeleteVeto sets a function retention asks, oldest segment first, before
// deleting a segment; false keeps that segment and every newer one for now
// (tiering vetoes segments not yet uploaded). It is called outside the log's
// locks.
func WithDeleteVeto(fn func(SegmentInfo) bool) Option {
	return func(o *options) { o.veto = fn }
}

// WithSyncHook sets a function called by the flusher after each successful
// fsync round with the new recovery point. It exists for tests.
func WithSyncHook(fn func(upTo int64)) Option {
	return func(o *options) { o.syncHook = fn }
}

// WithOnPoison sets a function called once, in a goroutine of its own,
// when the log is poisoned (ErrPoisoned: a write, fsync or checkpoint
// write failed), with the cause. The owner reacts to the failing disk
// there (a broker takes the log's directory offline).
func WithOnPoison(fn func(err error)) Option {
	return func(o *options) { o.onPoison = fn }
}

// WithFileWrapper makes the log write segment files (.log, .index,
// .timeindex) through wrap's result, so tests can inject faults (a
// failing write or fsync). Reads and zero-copy sends use the *os.File.
func WithFileWrapper(wrap func(path string, f *os.File) File) Option {
	return func(o *options) { o.wrapFile = wrap }
}

// withCheckpointInterval sets the least time between recovery-point
// checkpoints written by the flusher (Close and truncation always write).
func withCheckpointInterval(d time.Duration) Option {
	return func(o *options) { o.ckptInterval = d }
}

// withAfterFunc replaces time.AfterFunc for the delayed close of deleted
// segments (file.delete.delay.ms), so tests decide when the delay is over.
func withAfterFunc(fn func(d time.Duration, f func()) (stop func() bool)) Option {
	return func(o *options) { o.afterFunc = fn }
}

// withCleanHook sets the cleaner's test hook (options.cleanHook). It is
// called with flushMu held at the swap's points (before-marker, committed
// and the steps of completeSwap), so it must not call the Log there.
func withCleanHook(fn func(point string) error) Option {
	return func(o *options) { o.cleanHook = fn }
}
