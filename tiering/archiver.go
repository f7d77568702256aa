package tiering

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratastream/strata/segment"
)

// PartitionLog is what an Archiver needs of a partition's local log.
// *segment.Log implements it.
type PartitionLog interface {
	// Dir is the partition directory, where producer snapshots live too.
	Dir() string
	// Segments describes the segments, oldest first, the active one last.
	Segments() []segment.SegmentInfo
	// HighWatermark bounds what may be uploaded: only committed data.
	HighWatermark() int64
}

// Archiver defaults.
const (
	DefaultSweepGrace      = time.Hour
	DefaultPollInterval    = time.Second
	DefaultRefreshInterval = 30 * time.Second
	DefaultRetryMin        = 500 * time.Millisecond
	DefaultRetryMax        = 30 * time.Second
	// ThrottledRetryMin is the least backoff after a step the store
	// throttled (S3's SlowDown): the first retry of a throttled upload
	// waits this long (within RetryMax), and longer after each
	// further failure, as after any failure.
	ThrottledRetryMin = time.Second
)

// ArchiverConfig configures the Archiver of one partition.
type ArchiverConfig struct {
	Store     ObjectStore
	Log       PartitionLog
	Topic     string
	TopicID   string // the topic incarnation (ValidTopicID): it keys the objects and the manifest
	Partition int32

	// NumPartitions and Configs (the topic's config overrides) are
	// recorded in the manifest so a restore can recreate the topic.
	// UpdateTopic changes them.
	NumPartitions int32
	Configs       map[string]string
	// Retention is the total retention (retention.ms, retention.bytes)
	// applied to the remote log. SetRetention changes it.
	Retention RemoteRetention
	// Compaction is the topic's compaction (compaction.go): the upload
	// gate and the remote cleaner. SetCompaction changes it.
	Compaction Compaction
	// RemoteClean configures the remote cleaner of a compacted topic
	// (remote_cleaner.go).
	RemoteClean RemoteCleanConfig

	// Grace is the sweeper's grace period. The archiver never commits
	// objects whose upload started longer than Grace/2 ago (on Mono), and
	// gives the commit that deadline, so the sweeper cannot delete an
	// object a manifest is about to reference (Sweeper).
	// DefaultSweepGrace when 0.
	Grace time.Duration
	// PollInterval is how often a leader looks for sealed segments that
	// became committed (the high watermark moves without a notice).
	// Notify wakes it sooner. 1 s when 0.
	PollInterval time.Duration
	// RefreshInterval is how often a follower reloads the manifest, so
	// that CanDeleteLocal follows the leader's uploads. 30 s when 0.
	RefreshInterval time.Duration
	// RetryMin and RetryMax bound the exponential backoff after a failed
	// upload or commit. 500 ms and 30 s when 0. A step the store
	// throttled backs off from max(RetryMin, ThrottledRetryMin) instead,
	// and never for less than the store's Retry-After, even past
	// RetryMax.
	RetryMin, RetryMax time.Duration

	// OnLogStartOffset, if set, is called from the archiver's goroutine
	// after a commit moved the remote log start (remote retention, a
	// requested log start), with the new remote log start. The broker
	// moves the local log start up to it if the local log still holds
	// older data.
	OnLogStartOffset func(offset int64)

	// ProducerSnapshot, if set, returns the producer-state snapshot at
	// offset if the broker kept one in memory (taken when the segment
	// ending there rolled); the archiver uploads it with that segment.
	// Without one it reads the snapshot file at offset from the
	// partition directory, if any.
	ProducerSnapshot func(offset int64) ([]byte, bool)

	// TxnIndex, if set, returns the aborted-transaction index entries
	// (segment.TxnIndex's file format) of the local segment at base whose
	// marker is at or after from; the archiver uploads them with the
	// segment (or the slice of it from from on).
	TxnIndex func(base, from int64) []byte

	Logger *slog.Logger
	// Now is the wall clock (retention.ms, times written into the
	// manifest, backoff); time.Now when nil.
	Now func() time.Time
	// Mono is the monotonic clock of the grace guard and of the delete
	// delay of dropped segments (clock.go); SystemMono when nil.
	Mono MonoClock
}

func (c ArchiverConfig) normalized() ArchiverConfig {
	if c.Grace <= 0 {
		c.Grace = DefaultSweepGrace
	}
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.RefreshInterval <= 0 {
		c.RefreshInterval = DefaultRefreshInterval
	}
	if c.RetryMin <= 0 {
		c.RetryMin = DefaultRetryMin
	}
	if c.RetryMax <= 0 {
		c.RetryMax = DefaultRetryMax
	}
	c.RetryMax = max(c.RetryMax, c.RetryMin)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	c.Mono = c.Mono.orSystem()
	c.Configs = maps.Clone(c.Configs)
	c.RemoteClean = c.RemoteClean.normalized()
	return c
}

// Archiver offloads one partition's sealed segments to the object store
// and keeps the partition's view of the committed manifest.
//
// Create one per replica of a partition of a tiered topic, when the
// partition opens; call BecomeLeader when this broker leads the partition
// (with its leader epoch) and BecomeFollower when it stops leading. As
// leader it uploads; as follower it only reloads the manifest now and then,
// so CanDeleteLocal keeps local retention behind the leader's uploads.
// Close stops it (remote.storage.enable turned off, partition closed or
// deleted); remote data stays where it is, readable.
//
// All the work happens on one goroutine, the only writer of the manifest
// for this archiver. Its methods never block on the store: CanDeleteLocal,
// Notify, Lag and Manifest read state under a short mutex.
type Archiver struct {
	cfg  ArchiverConfig
	log  *slog.Logger
	wake chan struct{} // capacity 1
	quit chan struct{}
	done chan struct{}

	ctx    context.Context // canceled by Close, aborting in-flight requests
	cancel context.CancelFunc

	closeOnce sync.Once
	startOnce sync.Once

	// steps counts the steps the goroutine has finished (their outcome
	// recorded), so tests can wait for the loop to have run.
	steps atomic.Int64

	// dropSeen is when the loop first saw each dropped segment (by object
	// name), on cfg.Mono: the start of its delete delay. Loop goroutine
	// only.
	dropSeen map[string]time.Duration
	// rc is the remote cleaner's state. Loop goroutine only. rcWG counts
	// the running round's work goroutine, which Close waits for.
	rc   remoteCleanState
	rcWG sync.WaitGroup

	mu struct {
		sync.Mutex
		// manifest is the last manifest known committed (immutable: it is
		// replaced, never modified), nil until first loaded. etag is its
		// version token, "" when none is stored.
		manifest *Manifest
		etag     string
		stale    bool // reload before the next commit

		leader bool
		epoch  int32
		fenced bool // a newer epoch wrote the manifest; no uploads until a newer BecomeLeader

		retention     RemoteRetention
		compaction    Compaction
		cleanStats    RemoteCleanStats
		configs       map[string]string
		numPartitions int32
		wantLogStart  int64 // a requested remote log start (DeleteRecords), applied by the loop

		retryAt       time.Time     // no attempt before this after a failure
		backoff       time.Duration // the wait chosen after the last failure
		failures      int           // consecutive failed steps
		throttled     int64         // failed steps the store throttled
		lastUpload    time.Time
		lastErr       error
		lastErrAt     time.Time
		lastRefresh   time.Time
		uploadedSegs  int64
		uploadedBytes int64
	}
}

// NewArchiver returns a stopped archiver, as a follower; Start runs it.
func NewArchiver(cfg ArchiverConfig) (*Archiver, error) {
	cfg = cfg.normalized()
	switch {
	case cfg.Store == nil:
		return nil, errors.New("tiering: archiver: no object store")
	case cfg.Log == nil:
		return nil, errors.New("tiering: archiver: no log")
	case !validTopicName(cfg.Topic) || cfg.Partition < 0:
		return nil, fmt.Errorf("tiering: archiver: bad partition %q/%d", cfg.Topic, cfg.Partition)
	case !ValidTopicID(cfg.TopicID):
		return nil, fmt.Errorf("tiering: archiver: %s/%d: bad topic id %q", cfg.Topic, cfg.Partition, cfg.TopicID)
	}
	if err := cfg.Compaction.Validate(); err != nil {
		return nil, err
	}
	a := &Archiver{
		cfg:      cfg,
		log:      cfg.Logger.With("topic", cfg.Topic, "partition", cfg.Partition),
		wake:     make(chan struct{}, 1),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
		dropSeen: map[string]time.Duration{},
	}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.mu.retention = cfg.Retention
	a.mu.compaction = cfg.Compaction
	a.mu.configs = cfg.Configs
	a.mu.numPartitions = cfg.NumPartitions
	return a, nil
}

// Start starts the archiver's goroutine. It first loads the manifest.
func (a *Archiver) Start() {
	a.startOnce.Do(func() { go a.run() })
}

// Close stops the archiver, aborting an upload in progress (its objects
// are left for the sweeper), and waits for its goroutine to exit.
func (a *Archiver) Close() error {
	a.closeOnce.Do(func() {
		close(a.quit)
		a.cancel()
		a.startOnce.Do(func() { close(a.done) }) // never started
	})
	<-a.done
	a.rcWG.Wait() // a remote cleaning's work, canceled with ctx
	return nil
}

// BecomeLeader makes the archiver upload as the leader of epoch. It
// reloads the manifest first: the previous leader may have committed.
func (a *Archiver) BecomeLeader(epoch int32) {
	a.mu.Lock()
	if !a.mu.leader || epoch != a.mu.epoch {
		a.mu.stale = true
		a.mu.retryAt = time.Time{}
		a.mu.failures = 0
	}
	if epoch > a.mu.epoch || !a.mu.leader {
		a.mu.fenced = false
	}
	a.mu.leader, a.mu.epoch = true, epoch
	a.mu.Unlock()
	a.Notify()
}

// BecomeFollower stops uploading; the manifest is still reloaded every
// RefreshInterval. An upload in progress finishes (it holds committed data).
func (a *Archiver) BecomeFollower() {
	a.mu.Lock()
	a.mu.leader, a.mu.fenced = false, false
	a.mu.Unlock()
	a.Notify()
}

// Notify wakes the archiver to look for work; the broker registers it as
// segment.WithOnSeal (see Gate). It never blocks.
func (a *Archiver) Notify() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// UpdateTopic changes the topic facts recorded in the next manifest
// commit.
func (a *Archiver) UpdateTopic(configs map[string]string, numPartitions int32) {
	a.mu.Lock()
	a.mu.configs = maps.Clone(configs)
	a.mu.numPartitions = numPartitions
	a.mu.Unlock()
}

// SetRetention changes the remote retention, applied from the next step.
func (a *Archiver) SetRetention(r RemoteRetention) {
	a.mu.Lock()
	a.mu.retention = r
	a.mu.Unlock()
	a.Notify()
}

// Manifest returns the last manifest known committed, or nil when it was
// not loaded yet. The caller must not modify it.
func (a *Archiver) Manifest() *Manifest {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mu.manifest
}

// CanDeleteLocal reports whether the committed manifest holds all of the
// local segment's offsets in the segment's leader-epoch lineage (or the
// segment lies below the remote log start, in a lineage that can lead
// there), so that local retention may delete it (lineage.go). Use it as
// the segment.WithDeleteVeto of the partition's log (see Gate). It says
// false while the manifest is unknown.
//
// For a compacted topic the segment's offsets reach up to the next local
// segment's base, not only to its NextOffset: the cleaner removes
// records at a segment's end (and may empty it), and deleting it moves the
// local log start to that base. The remote log must reach it too, or the
// local log would begin beyond the remote end with nothing to tell the
// gap from deleted data (compactionGap).
func (a *Archiver) CanDeleteLocal(si segment.SegmentInfo) bool {
	a.mu.Lock()
	m, compacted := a.mu.manifest, a.mu.compaction.Enabled
	a.mu.Unlock()
	if m == nil || si.NextOffset > m.EndOffset() || !coveredInLineage(m, si) {
		return false
	}
	return !compacted || nextLocalBase(a.cfg.Log.Segments(), si) <= m.EndOffset()
}

// nextLocalBase returns the base offset of the local segment after si,
// where the local log starts once si is deleted; si.NextOffset when si is
// not found or is the last.
func nextLocalBase(segs []segment.SegmentInfo, si segment.SegmentInfo) int64 {
	for i, s := range segs {
		if s.BaseOffset == si.BaseOffset && i+1 < len(segs) {
			return max(segs[i+1].BaseOffset, si.NextOffset)
		}
	}
	return si.NextOffset
}

// run is the archiver's goroutine.
func (a *Archiver) run() {
	defer close(a.done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-a.quit:
			return
		case <-timer.C:
		case <-a.wake:
			a.mu.Lock()
			backingOff := a.cfg.Now().Before(a.mu.retryAt)
			a.mu.Unlock()
			if backingOff {
				continue // the timer fires when the backoff ends
			}
		}
		err := a.step(a.ctx)
		select {
		case <-a.quit:
			return
		default:
		}
		wait := a.afterStep(err)
		a.steps.Add(1)
		timer.Reset(wait)
	}
}

// afterStep records the step's outcome and returns the wait before the
// next one.
func (a *Archiver) afterStep(err error) time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.cfg.Now()
	if err == nil {
		if a.mu.failures > 0 {
			a.log.Info("tiering: archiver recovered", "failures", a.mu.failures)
		}
		a.mu.failures = 0
		a.mu.retryAt, a.mu.backoff = time.Time{}, 0
		if a.mu.leader && !a.mu.fenced {
			return a.cfg.PollInterval
		}
		return a.cfg.RefreshInterval
	}
	a.mu.failures++
	a.mu.lastErr, a.mu.lastErrAt = err, now
	if errors.Is(err, ErrFenced) {
		if !a.mu.fenced {
			a.log.Warn("tiering: archiver fenced by a newer leader; uploads stop", "epoch", a.mu.epoch, "err", err)
		}
		a.mu.fenced = true
		a.mu.failures = 0
		return a.cfg.RefreshInterval
	}
	d := a.backoffLocked(err)
	if a.mu.failures == 1 || a.mu.failures%20 == 0 {
		a.log.Warn("tiering: archiver step failed; retrying with backoff", "failures", a.mu.failures, "backoff", d, "err", err)
	}
	a.mu.retryAt, a.mu.backoff = now.Add(d), d
	return d
}

// backoffLocked is the wait after the step that failed with err, the
// a.mu.failures-th in a row: exponential from RetryMin (from
// ThrottledRetryMin when the store throttled) up to RetryMax, ±20%, and
// at least what the store asked for in Retry-After.
func (a *Archiver) backoffLocked(err error) time.Duration {
	base := a.cfg.RetryMin
	if IsThrottled(err) {
		a.mu.throttled++
		base = max(base, ThrottledRetryMin)
	}
	d := min(base<<min(a.mu.failures-1, 20), a.cfg.RetryMax)
	d = d - d/5 + time.Duration(rand.Int64N(int64(d/5)*2+1)) // ±20%
	return max(d, RetryAfter(err))
}

// step does one round of work: load or refresh the manifest; as leader,
// reconcile the remote log with the leader's lineage, upload every
// committed sealed segment not yet remote (cleaned first, for a compacted
// topic), compact the remote log of a compacted topic (remote_cleaner.go),
// apply remote retention and delete the objects of segments dropped longer
// than the delete delay.
func (a *Archiver) step(ctx context.Context) error {
	a.mu.Lock()
	leader, fenced, stale, m := a.mu.leader, a.mu.fenced, a.mu.stale, a.mu.manifest
	refreshDue := a.cfg.Now().Sub(a.mu.lastRefresh) >= a.cfg.RefreshInterval
	a.mu.Unlock()

	if m == nil || stale || ((!leader || fenced) && refreshDue) {
		if err := a.reload(ctx); err != nil {
			return err
		}
	}
	a.noteDropped(a.Manifest())
	if !leader || fenced {
		return nil
	}
	if err := a.reconcileLineage(ctx); err != nil {
		return err
	}
	for {
		select {
		case <-a.quit:
			return nil
		default:
		}
		did, err := a.uploadNext(ctx)
		if err != nil {
			return err
		}
		if !did {
			break
		}
	}
	if err := a.cleanRemote(ctx); err != nil {
		return err
	}
	if err := a.applyRetention(ctx); err != nil {
		return err
	}
	return a.purgeDropped(ctx)
}

// reload reads the stored manifest into the archiver's view. A leader
// finding a newer epoch there is fenced.
func (a *Archiver) reload(ctx context.Context) error {
	m, etag, err := LoadManifest(ctx, a.cfg.Store, a.cfg.Topic, a.cfg.TopicID, a.cfg.Partition)
	if IsNotFound(err) {
		m, etag, err = NewManifest(a.cfg.Topic, a.cfg.TopicID, a.cfg.Partition), "", nil
	}
	if err != nil {
		return fmt.Errorf("tiering: load manifest of %s/%d: %w", a.cfg.Topic, a.cfg.Partition, err)
	}
	a.mu.Lock()
	a.mu.manifest, a.mu.etag, a.mu.stale = m, etag, false
	a.mu.lastRefresh = a.cfg.Now()
	fenced := a.mu.leader && m.LeaderEpoch > a.mu.epoch
	epoch := a.mu.epoch
	a.mu.Unlock()
	if fenced {
		return fmt.Errorf("%w: manifest of %s/%d has leader epoch %d, ours %d", ErrFenced, a.cfg.Topic, a.cfg.Partition, m.LeaderEpoch, epoch)
	}
	return nil
}

// commit writes next (derived from the view) and installs it as the view.
// Any failure other than fencing marks the view stale: the outcome of an
// unanswered put is unknown, and a lost race means someone else wrote.
func (a *Archiver) commit(ctx context.Context, next *Manifest) error {
	a.mu.Lock()
	etag, epoch := a.mu.etag, a.mu.epoch
	next.LeaderEpoch = epoch
	next.NumPartitions = a.mu.numPartitions
	next.Configs = maps.Clone(a.mu.configs)
	a.mu.Unlock()
	next.UpdatedAt = a.cfg.Now().UTC()
	newETag, err := CommitManifest(ctx, a.cfg.Store, next, etag)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.mu.stale = true
		return err
	}
	a.mu.manifest, a.mu.etag = next, newETag
	return nil
}

// view returns the current manifest view and whether this archiver may
// write it.
func (a *Archiver) view() (m *Manifest, epoch int32, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mu.manifest, a.mu.epoch, a.mu.leader && !a.mu.fenced && a.mu.manifest != nil && !a.mu.stale
}
