package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/tiering"
)

// Tiered storage in the broker (DESIGN.md, "Tiered storage"; package
// tiering does the work):
//
//   - At start the broker opens its object store (tiering.OpenStore: S3
//     when remote.storage.s3.endpoint or .bucket is set, else the local
//     directory remote.storage.dir, default <first of log.dirs>/objects), checks it
//     in the background (a missing bucket, wrong credentials or an
//     unreachable endpoint are logged clearly; local data is served
//     regardless and the archivers retry), and creates one RemoteReader
//     (chunk cache in remote.cache.dir, default <first of log.dirs>/remote-cache,
//     bounded by remote.cache.bytes) and a Sweeper loop.
//   - Every partition log is opened through a tiering.Gate, whose delete
//     veto keeps local retention from deleting segments the committed
//     manifest does not hold while remote.storage.enable is on. With it
//     on, the log's retention is local.retention.ms|bytes (-2: the total
//     retention) and an Archiver uploads sealed segments while this broker
//     leads the partition.
//   - Topic config changes apply at once: retention, remote.storage.enable
//     on (archiver started) or off (archiver stopped; remote data stays
//     readable; local retention goes back to the total retention).
//   - Deleting a topic deletes its remote data too (in the background),
//     by topic id: a topic created again under the same name has another
//     id, so other keys, and its data is never touched.
//
// The broker default of remote.storage.enable is
// remote.log.storage.system.enable, false unless set: tiering costs a
// store and uploads, so topics opt in (or the broker turns it on for all).

// TieringConfig holds the broker's tiered storage settings.
type TieringConfig struct {
	// Store selects the object store. Store.Dir empty means
	// <MetaDir>/objects.
	Store tiering.StoreConfig
	// CacheDir is remote.cache.dir; empty means <MetaDir>/remote-cache.
	CacheDir string
	// CacheBytes is remote.cache.bytes (0: tiering's default).
	CacheBytes int64
	// ChunkBytes is remote.cache.chunk.bytes (0: tiering's default).
	ChunkBytes int64
	// ReadAheadChunks is remote.cache.readahead.chunks (0: tiering's
	// default; -1: no read-ahead).
	ReadAheadChunks int
	// ReadAheadThreads is remote.cache.readahead.threads (0: tiering's
	// default).
	ReadAheadThreads int
	// PollInterval is how often an archiver looks for committed sealed
	// segments (strata.remote.poll.interval.ms; 0: tiering's default).
	PollInterval time.Duration
	// RefreshInterval is how often a follower reloads a partition's
	// manifest to learn what the leader uploaded, and so what it may
	// delete locally (strata.remote.manifest.refresh.interval.ms; 0:
	// tiering's default).
	RefreshInterval time.Duration
	// SweepInterval is how often orphaned objects are swept
	// (strata.remote.sweep.interval.ms; 0: defaultSweepInterval).
	SweepInterval time.Duration
	// Restore lists the topics to recreate from the object store at
	// start if they do not exist (strata.remote.restore.topics; "*" is
	// every topic there). See tier_restore.go.
	Restore []string
	// RetryMax bounds the archivers' backoff after a failed upload
	// (strata.remote.retry.max.ms; 0: tiering's default).
	RetryMax time.Duration
	// SweepGrace is how old an unreferenced object must be before the
	// sweeper deletes it (strata.remote.sweep.grace.ms; 0:
	// tiering.DefaultSweepGrace).
	SweepGrace time.Duration
	// RemoteCleanInterval is the least time between two remote cleanings
	// of a compacted tiered partition (strata.remote.cleaner.interval.ms;
	// 0: tiering's default).
	RemoteCleanInterval time.Duration
	// RemoteCleanMapBytes is the memory of a remote cleaning's offset map
	// (strata.remote.cleaner.dedupe.buffer.size; 0: tiering's default).
	RemoteCleanMapBytes int64
	// RemoteFetch bounds the remote reads of fetches
	// (fetch_remote_quota.go).
	RemoteFetch RemoteFetchConfig
}

// Defaults of the broker's own tiering settings: how often orphaned
// objects are swept, and the directories of the local-directory store and
// of the chunk cache under log.dirs.
const (
	defaultSweepInterval = 10 * time.Minute
	defaultStoreDir      = "objects"
	defaultCacheDir      = "remote-cache"
	defaultCleanDir      = "remote-clean"
)

// tieringDefault describes a tiering setting left to package tiering's
// default (the zero value in TieringConfig).
func tieringDefault(v any) string { return fmt.Sprint(v) + ", package tiering's default" }

// tieringSettings are the tiered storage settings: the topic configs
// remote.storage.enable and local.retention.*, and the broker's object
// store, chunk cache and archivers (Config.Tiering). Where a setting is
// unset, TieringConfig holds zero and package tiering's default applies.
var tieringSettings = []setting{
	{name: "remote.log.storage.system.enable", topic: "remote.storage.enable", typ: typeBoolean, def: "false", dynamic: true,
		topicField: func(tc *topicConfig) any { return &tc.remoteStorage },
		doc:        "Offload sealed segments to the object store and serve old offsets from there (tiered storage)."},
	{name: "log.local.retention.ms", topic: "local.retention.ms", typ: typeLong, def: "-2", valid: atLeast(-2), dynamic: true,
		topicField: func(tc *topicConfig) any { return &tc.localRetentionMs },
		doc:        "With remote.storage.enable: age after which uploaded segments are deleted locally; -2 is retention.ms."},
	{name: "log.local.retention.bytes", topic: "local.retention.bytes", typ: typeLong, def: "-2", valid: atLeast(-2), dynamic: true,
		topicField: func(tc *topicConfig) any { return &tc.localRetentionBytes },
		doc:        "With remote.storage.enable: size of the local log before uploaded segments are deleted locally; -2 is retention.bytes."},
	{name: tiering.SettingS3Endpoint, typ: typeString, unset: "none",
		field: func(c *Config) any { return &c.Tiering.Store.S3.Endpoint },
		doc:   "S3 endpoint URL, e.g. http://127.0.0.1:9000 for MinIO. With neither an endpoint nor a bucket, the local-directory store is used."},
	{name: tiering.SettingS3Bucket, typ: typeString, unset: "none",
		field: func(c *Config) any { return &c.Tiering.Store.S3.Bucket },
		doc:   "S3 bucket of tiered segments (credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or the AWS chain)."},
	{name: tiering.SettingS3Region, typ: typeString, unset: tieringDefault(tiering.DefaultS3Region),
		field: func(c *Config) any { return &c.Tiering.Store.S3.Region },
		doc:   "S3 region."},
	{name: tiering.SettingS3Prefix, typ: typeString, unset: "none",
		field: func(c *Config) any { return &c.Tiering.Store.S3.Prefix },
		doc:   "Key prefix of every object in the bucket."},
	{name: tiering.SettingS3PathStyle, typ: typeBoolean, unset: "true when an endpoint is set, else false",
		set: setS3PathStyle,
		doc: "Path-style S3 addressing: the bucket in the path rather than the host name."},
	{name: tiering.SettingStorageDir, typ: typeString, unset: "<first of log.dirs>/" + defaultStoreDir,
		field: func(c *Config) any { return &c.Tiering.Store.Dir },
		doc:   "Directory of the local-directory object store."},
	{name: "remote.cache.dir", typ: typeString, unset: "<first of log.dirs>/" + defaultCacheDir,
		field: func(c *Config) any { return &c.Tiering.CacheDir },
		doc:   "On-disk cache of chunks read from the object store."},
	{name: "remote.cache.bytes", typ: typeLong, unset: tieringDefault(tiering.DefaultRemoteCacheBytes), valid: atLeast(1),
		field: func(c *Config) any { return &c.Tiering.CacheBytes },
		doc:   "Bound on the remote chunk cache."},
	{name: "remote.cache.chunk.bytes", typ: typeLong, unset: tieringDefault(tiering.DefaultRemoteChunkBytes), valid: between(1024, math.MaxInt32),
		field: func(c *Config) any { return &c.Tiering.ChunkBytes },
		doc:   "Size of a remote read chunk, the unit of the chunk cache: a read that misses GETs one chunk, read-ahead GETs up to 16 MiB of chunks at once."},
	{name: "remote.cache.readahead.chunks", typ: typeLong, unset: tieringDefault(tiering.DefaultReadAheadChunks), valid: between(-1, 1024),
		field: func(c *Config) any { return &c.Tiering.ReadAheadChunks },
		doc:   "Chunks fetched ahead of a sequential remote reader such as a replay from offset 0; -1 turns read-ahead off."},
	{name: "remote.cache.readahead.threads", typ: typeLong, unset: tieringDefault(tiering.DefaultReadAheadWorkers), valid: between(1, 256),
		field: func(c *Config) any { return &c.Tiering.ReadAheadThreads },
		doc:   "Goroutines, shared by all partitions, that run read-ahead GETs."},
	{name: "strata.remote.poll.interval.ms", typ: typeLong, unset: tieringDefault(msString(tiering.DefaultPollInterval)), valid: between(1, maxMs),
		field: func(c *Config) any { return &c.Tiering.PollInterval }, unit: time.Millisecond,
		doc: "How often archivers look for sealed segments to upload."},
	{name: "strata.remote.manifest.refresh.interval.ms", typ: typeLong, unset: tieringDefault(msString(tiering.DefaultRefreshInterval)), valid: between(1, maxMs),
		field: func(c *Config) any { return &c.Tiering.RefreshInterval }, unit: time.Millisecond,
		doc: "How often a follower replica reloads a partition's manifest from the bucket, to free the local segments the leader uploaded (one GET per followed partition each time)."},
	{name: "strata.remote.sweep.interval.ms", typ: typeLong, unset: msString(defaultSweepInterval), valid: between(1, maxMs),
		field: func(c *Config) any { return &c.Tiering.SweepInterval }, unit: time.Millisecond,
		doc: "How often objects no manifest references are looked for."},
	{name: "strata.remote.sweep.grace.ms", typ: typeLong, unset: tieringDefault(msString(tiering.DefaultSweepGrace)), valid: between(1, maxMs),
		field: func(c *Config) any { return &c.Tiering.SweepGrace }, unit: time.Millisecond,
		doc: "How long the sweeper watches an object no manifest references before deleting it, on the broker's monotonic clock (object times and wall clocks play no part); archivers commit an upload only within half of it."},
	{name: "strata.remote.retry.max.ms", typ: typeLong, unset: tieringDefault(msString(tiering.DefaultRetryMax)), valid: between(1, maxMs),
		field: func(c *Config) any { return &c.Tiering.RetryMax }, unit: time.Millisecond,
		doc: "Longest wait between retries of a failed upload."},
	{name: "strata.remote.cleaner.interval.ms", typ: typeLong, unset: tieringDefault(msString(tiering.DefaultRemoteCleanInterval)), valid: between(1, maxMs),
		field: func(c *Config) any { return &c.Tiering.RemoteCleanInterval }, unit: time.Millisecond,
		doc: "Least time between two remote cleanings of one partition of a compacted tiered topic (its leader compacts what is in the bucket when min.cleanable.dirty.ratio or max.compaction.lag.ms asks for it)."},
	{name: "strata.remote.cleaner.dedupe.buffer.size", typ: typeLong, unset: tieringDefault(tiering.DefaultRemoteCleanMapBytes), valid: between(1024, math.MaxInt32),
		field: func(c *Config) any { return &c.Tiering.RemoteCleanMapBytes },
		doc:   "Memory of the offset map of one remote cleaning (24 bytes a key); a remote dirty range with more keys is cleaned in several rounds."},
	{name: "strata.remote.restore.topics", typ: typeList, unset: "none",
		field: func(c *Config) any { return &c.Tiering.Restore },
		doc:   "Topics to recreate at start from the object store if they do not exist (comma-separated, or * for all): same id, partitions and configs; consumers read from offset 0, producers continue after the remote end."},
}

// setS3PathStyle reads remote.storage.s3.path.style.access as
// strconv.ParseBool does (1, t, TRUE, ... are accepted); empty is unset.
func setS3PathStyle(c *Config, v string) error {
	if v == "" {
		return nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return errors.New("must be true or false")
	}
	c.Tiering.Store.S3.PathStyle = &b
	return nil
}

// brokerTier is the broker's tiered storage: one store, one reader.
type brokerTier struct {
	store  tiering.ObjectStore
	reader *tiering.RemoteReader
	// reads runs the remote reads of fetches, within quota
	// (fetch_remote_pool.go, fetch_remote_quota.go).
	reads *remoteReadPool
	quota *remoteQuota
	what  string // the store, for logs
	// cleanDir holds the remote cleaner's replacement files while they
	// are written and uploaded (<first of log.dirs>/remote-clean, emptied
	// at start); cleanLimiter paces the remote cleaners together
	// (log.cleaner.io.max.bytes.per.second), nil when unthrottled.
	cleanDir     string
	cleanLimiter *rate.Limiter
	ctx          context.Context
	cancel       context.CancelFunc
	wg           sync.WaitGroup
}

// partTier is one partition's tiering: its gate (always there, so that
// remote.storage.enable can be turned on live) and its archiver while
// tiering is on.
type partTier struct {
	gate *tiering.Gate
	mu   sync.Mutex
	arch *tiering.Archiver
	// epochBase is added to the leader epoch the archiver uploads as: the
	// manifest's epoch when the partition was restored (tier_restore.go).
	epochBase int32
	// frozen is the last manifest known while no archiver runs
	// (remote.storage.enable turned off): remote data stays readable.
	frozen atomic.Pointer[tiering.Manifest]
}

// openTiering opens the object store and the remote reader. A store that
// cannot be opened (bad configuration) fails the start; a store that
// cannot be reached is logged, and the archivers retry.
func (s *Server) openTiering() error {
	tc := s.cfg.Tiering
	if tc.Store.Dir == "" {
		tc.Store.Dir = filepath.Join(s.cfg.MetaDir(), defaultStoreDir)
	}
	if tc.CacheDir == "" {
		tc.CacheDir = filepath.Join(s.cfg.MetaDir(), defaultCacheDir)
	}
	ctx, cancel := context.WithCancel(context.Background())
	store, err := tiering.OpenStore(ctx, tc.Store)
	if err != nil {
		cancel()
		return fmt.Errorf("broker: tiered storage: %w", err)
	}
	bt := &brokerTier{store: store, ctx: ctx, cancel: cancel, what: "dir " + tc.Store.Dir,
		cleanDir: filepath.Join(s.cfg.MetaDir(), defaultCleanDir)}
	// What a remote cleaning cut by a crash left is garbage.
	if err := os.RemoveAll(bt.cleanDir); err != nil {
		cancel()
		return fmt.Errorf("broker: tiered storage: %w", err)
	}
	if err := os.MkdirAll(bt.cleanDir, 0o755); err != nil {
		cancel()
		return fmt.Errorf("broker: tiered storage: %w", err)
	}
	if r := s.cfg.Cleaner.IOMaxBytesPerSecond; r > 0 && r < math.MaxFloat64 {
		bt.cleanLimiter = rate.NewLimiter(rate.Limit(r), 64<<10)
	}
	if tc.Store.UsesS3() {
		bt.what = fmt.Sprintf("s3 bucket %q at %q", tc.Store.S3.Bucket, tc.Store.S3.Endpoint)
	}
	rf := tc.RemoteFetch
	bt.quota = newRemoteQuota(remoteFetchRate(rf.MaxBytesPerSecond, runtime.NumCPU()), time.Now)
	bt.reader, err = tiering.NewRemoteReader(store, tiering.ReaderConfig{
		CacheDir: tc.CacheDir, CacheBytes: tc.CacheBytes, ChunkBytes: tc.ChunkBytes,
		ReadAheadChunks: tc.ReadAheadChunks, ReadAheadWorkers: tc.ReadAheadThreads,
		Logger: s.log.With("component", "remote-reader"),
		Pacer:  bt.quota.pacer,
	})
	if err != nil {
		cancel()
		return fmt.Errorf("broker: tiered storage: %w", err)
	}
	bt.reads = newRemoteReadPool(rf.ReaderThreads, rf.ReaderMaxPending)
	s.tier = bt
	bt.wg.Add(2)
	go func() {
		defer bt.wg.Done()
		cctx, ccancel := context.WithTimeout(ctx, 15*time.Second)
		defer ccancel()
		if err := tiering.CheckStore(cctx, store); err != nil {
			if ctx.Err() == nil {
				s.log.Error("tiered storage: object store not usable; local data is served, uploads retry later",
					"store", bt.what, "err", err)
			}
			return
		}
		s.log.Info("tiered storage: object store ready", "store", bt.what)
	}()
	go func() {
		defer bt.wg.Done()
		interval := tc.SweepInterval
		if interval <= 0 {
			interval = defaultSweepInterval
		}
		sw := &tiering.Sweeper{Store: store, Grace: tc.SweepGrace, Logger: s.log.With("component", "remote-sweeper")}
		sw.Run(ctx, interval)
	}()
	return nil
}

// stopTiering stops the sweeper and closes the reader. The archivers are
// closed with their partitions.
func (s *Server) stopTiering() {
	bt := s.tier
	if bt == nil {
		return
	}
	bt.cancel()
	bt.wg.Wait()
	bt.reads.close()
	_ = bt.reader.Close()
}

// tierRetention is a topic's retention in tiering's terms.
func tierRetention(cfg topicConfig) tiering.Retention {
	return tiering.Retention{Ms: cfg.seg.RetentionMs, Bytes: cfg.seg.RetentionBytes, LocalMs: cfg.localRetentionMs, LocalBytes: cfg.localRetentionBytes,
		DeleteDelayMs: cfg.seg.FileDeleteDelayMs}
}

// tierCompaction is a topic's compaction in tiering's terms: the upload
// gate and the remote cleaner of a compacted tiered topic.
func tierCompaction(cfg topicConfig) tiering.Compaction {
	if !cfg.compact {
		return tiering.Compaction{}
	}
	return tiering.Compaction{
		Enabled: true, MinCleanableDirtyRatio: cfg.minCleanableRatio,
		MinCompactionLagMs: cfg.minCompactionLagMs, MaxCompactionLagMs: cfg.maxCompactionLagMs,
		DeleteRetentionMs: cfg.deleteRetentionMs, SegmentBytes: cfg.seg.SegmentBytes,
	}
}

// remoteCleanConfig is the remote cleaner's configuration: the broker's
// strata.remote.cleaner.* settings, log.cleaner.enable and the shared
// throttle of log.cleaner.io.max.bytes.per.second.
func (s *Server) remoteCleanConfig() tiering.RemoteCleanConfig {
	rc := tiering.RemoteCleanConfig{
		Interval: s.cfg.Tiering.RemoteCleanInterval, MapBytes: int(s.cfg.Tiering.RemoteCleanMapBytes),
		TempDir: s.tier.cleanDir, Disabled: !s.cfg.Cleaner.Enable,
	}
	if s.tier.cleanLimiter != nil {
		rc.Limiter = s.tier.cleanLimiter
	}
	return rc
}

// newPartTier returns the tiering of a partition about to be opened.
// Internal topics (__consumer_offsets, __transaction_state) are never
// tiered.
func newPartTier(topic string, cfg topicConfig) *partTier {
	return &partTier{gate: tiering.NewGate(tiered(topic, cfg))}
}

// tiered reports whether the topic's partitions are offloaded.
func tiered(topic string, cfg topicConfig) bool {
	return cfg.remoteStorage && !isInternalTopic(topic)
}

// segConfig is the segment configuration of the partition's local log:
// local retention when tiered.
func (pt *partTier) segConfig(cfg topicConfig) segment.Config {
	if !pt.gate.Tiered() {
		return cfg.seg // exactly as without tiering
	}
	return tierRetention(cfg).LocalConfig(cfg.seg, true)
}

// manifest returns the committed manifest the partition knows: its
// archiver's, or the one frozen when tiering was turned off.
func (pt *partTier) manifest() *tiering.Manifest {
	if pt == nil {
		return nil
	}
	if a := pt.archiver(); a != nil {
		return a.Manifest()
	}
	return pt.frozen.Load()
}

// archiver returns the partition's archiver, or nil.
func (pt *partTier) archiver() *tiering.Archiver {
	if pt == nil {
		return nil
	}
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return pt.arch
}

// remoteManifest returns the partition's committed manifest if it has
// remote segments, else nil.
func (p *partition) remoteManifest() *tiering.Manifest {
	m := p.tier.manifest()
	if m == nil || len(m.Segments) == 0 || m.LogStartOffset >= m.EndOffset() {
		return nil
	}
	return m
}

// logStart is the partition's log start offset: the remote log start when
// the remote log reaches down below the local one.
func (p *partition) logStart() int64 {
	local := p.log.LogStartOffset()
	if m := p.remoteManifest(); m != nil && m.LogStartOffset < local && m.EndOffset() >= local {
		return m.LogStartOffset
	}
	return local
}

// tierStart starts the archiver of a newly opened partition if its topic
// is tiered, as leader when this broker leads it.
func (s *Server) tierStart(p *partition, topicID string, cfg topicConfig, overrides map[string]string, numPartitions int32) {
	if p.tier == nil || s.tier == nil {
		return
	}
	if !tiered(p.topic, cfg) {
		if !isInternalTopic(p.topic) {
			s.loadFrozenManifest(p, topicID)
		}
		return
	}
	if p.tier.archiver() != nil {
		return
	}
	s.restoredStart(p, topicID)
	p.tier.mu.Lock()
	defer p.tier.mu.Unlock()
	if p.tier.arch != nil {
		return
	}
	p.tier.epochBase = readEpochBase(p.path())
	a, err := tiering.NewArchiver(tiering.ArchiverConfig{
		Store: s.tier.store, Log: p.log, Topic: p.topic, TopicID: topicID, Partition: p.index,
		NumPartitions: numPartitions, Configs: overrides,
		Retention:       tierRetention(cfg).Remote(),
		Compaction:      tierCompaction(cfg),
		RemoteClean:     s.remoteCleanConfig(),
		PollInterval:    s.cfg.Tiering.PollInterval,
		RefreshInterval: s.cfg.Tiering.RefreshInterval,
		Grace:           s.cfg.Tiering.SweepGrace,
		RetryMax:        s.cfg.Tiering.RetryMax,
		OnLogStartOffset: func(off int64) {
			if p.log.LogStartOffset() < off {
				if err := p.log.SetLogStartOffset(off); err != nil && !errors.Is(err, segment.ErrClosed) {
					s.log.Warn("tiered storage: moving the local log start failed", "topic", p.topic, "partition", p.index, "offset", off, "err", err)
				}
			}
		},
		ProducerSnapshot: p.rollSnaps.get,
		TxnIndex:         p.segmentTxnIndex,
		Logger:           s.log,
	})
	if err != nil {
		s.log.Error("tiered storage: archiver not started", "topic", p.topic, "partition", p.index, "err", err)
		return
	}
	p.tier.arch = a
	p.tier.gate.Attach(a)
	a.Start()
	if l := p.leadership(); l.leader == s.cfg.BrokerID {
		a.BecomeLeader(l.epoch + p.tier.epochBase)
	}
}

// tierStop stops the partition's archiver, if any (remote data stays).
func (p *partition) tierStop() {
	if p.tier == nil {
		return
	}
	p.tier.mu.Lock()
	a := p.tier.arch
	p.tier.arch = nil
	p.tier.mu.Unlock()
	if a != nil {
		p.tier.gate.Detach(a)
		_ = a.Close()
		if m := a.Manifest(); m != nil {
			p.tier.frozen.Store(m)
		}
	}
}

// loadFrozenManifest loads, in the background, the manifest of a
// partition whose topic is not tiered (any more), so that what was
// offloaded before stays readable.
func (s *Server) loadFrozenManifest(p *partition, topicID string) {
	bt := s.tier
	bt.wg.Add(1)
	go func() {
		defer bt.wg.Done()
		ctx, cancel := context.WithTimeout(bt.ctx, 30*time.Second)
		defer cancel()
		m, _, err := tiering.LoadManifest(ctx, bt.store, p.topic, topicID, p.index)
		if err != nil {
			if !errors.Is(err, tiering.ErrNotFound) && ctx.Err() == nil {
				s.log.Warn("tiered storage: loading the manifest of an untiered partition failed", "topic", p.topic, "partition", p.index, "err", err)
			}
			return
		}
		if m != nil && len(m.Segments) > 0 && p.tier.archiver() == nil {
			p.tier.frozen.CompareAndSwap(nil, m)
		}
	}()
}

// tierLeadership tells the archiver about a leadership change.
func (s *Server) tierLeadership(p *partition) {
	a := p.tier.archiver()
	if a == nil {
		return
	}
	if l := p.leadership(); l.leader == s.cfg.BrokerID {
		p.tier.mu.Lock()
		base := p.tier.epochBase
		p.tier.mu.Unlock()
		a.BecomeLeader(l.epoch + base)
	} else {
		a.BecomeFollower()
	}
}

// tierConfigChanged applies a topic config change to an open partition:
// the local log's retention, remote.storage.enable, remote retention and
// the configs recorded in the manifest.
func (s *Server) tierConfigChanged(p *partition, ts *topicState) {
	if p.tier == nil {
		p.log.UpdateConfig(ts.cfg.seg)
		return
	}
	on := tiered(p.topic, ts.cfg)
	if !on {
		p.tierStop()
	}
	p.tier.gate.SetTiered(on)
	p.log.UpdateConfig(p.tier.segConfig(ts.cfg))
	if on {
		if a := p.tier.archiver(); a != nil {
			a.SetRetention(tierRetention(ts.cfg).Remote())
			if err := a.SetCompaction(tierCompaction(ts.cfg)); err != nil {
				s.log.Warn("tiered storage: compaction settings not applied", "topic", p.topic, "partition", p.index, "err", err)
			}
			a.UpdateTopic(ts.overrides, int32(len(ts.parts)))
		} else {
			s.tierStart(p, ts.id.String(), ts.cfg, ts.overrides, int32(len(ts.parts)))
		}
	}
}

// tierDelete stops the archiver of a deleted topic's partition and
// deletes the partition's remote data, that of the topic id topicID, in
// the background.
func (s *Server) tierDelete(p *partition, topicID string, tiered bool) {
	p.tierStop()
	if s.tier == nil {
		return
	}
	bt := s.tier
	bt.reader.ForgetPartition(tiering.PartitionKey{Topic: p.topic, Partition: p.index})
	bt.wg.Add(1)
	go func() {
		defer bt.wg.Done()
		ctx, cancel := context.WithTimeout(bt.ctx, 2*time.Minute)
		defer cancel()
		for delay := time.Second; ; delay = min(2*delay, 30*time.Second) {
			err := tiering.DeletePartition(ctx, bt.store, p.topic, topicID, p.index)
			if err == nil {
				return
			}
			if !tiered {
				return // never tiered (or turned off): one try is enough
			}
			s.log.Warn("tiered storage: deleting remote data of a deleted topic failed", "topic", p.topic, "partition", p.index, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
		}
	}()
}
