package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratastream/strata/broker/group"
	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/tiering"
)

// Tiered storage in the broker (DESIGN.md, "Tiered storage"; package
// tiering does the work):
//
//   - At start the broker opens its object store (tiering.OpenStore: S3
//     when remote.storage.s3.endpoint or .bucket is set, else the local
//     directory remote.storage.dir, default <log.dirs>/objects), checks it
//     in the background (a missing bucket, wrong credentials or an
//     unreachable endpoint are logged clearly; local data is served
//     regardless and the archivers retry), and creates one RemoteReader
//     (chunk cache in remote.cache.dir, default <log.dirs>/remote-cache,
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
//   - Deleting a topic deletes its remote data too (in the background).
//
// The broker default of remote.storage.enable is
// remote.log.storage.system.enable, false unless set: tiering costs a
// store and uploads, so topics opt in (or the broker turns it on for all).

// TieringConfig holds the broker's tiered storage settings.
type TieringConfig struct {
	// Store selects the object store. Store.Dir empty means
	// <LogDir>/objects.
	Store tiering.StoreConfig
	// CacheDir is remote.cache.dir; empty means <LogDir>/remote-cache.
	CacheDir string
	// CacheBytes is remote.cache.bytes (0: tiering's default, 1 GiB).
	CacheBytes int64
	// ChunkBytes is remote.cache.chunk.bytes (0: tiering's default).
	ChunkBytes int64
	// ReadAheadChunks is remote.cache.readahead.chunks (0: tiering's
	// default, 4; -1: no read-ahead).
	ReadAheadChunks int
	// ReadAheadThreads is remote.cache.readahead.threads (0: tiering's
	// default, 8).
	ReadAheadThreads int
	// PollInterval is how often an archiver looks for committed sealed
	// segments (strata.remote.poll.interval.ms; 0: tiering's default).
	PollInterval time.Duration
	// RefreshInterval is how often a follower reloads a partition's
	// manifest to learn what the leader uploaded, and so what it may
	// delete locally (strata.remote.manifest.refresh.interval.ms; 0:
	// tiering's default, 30 s).
	RefreshInterval time.Duration
	// SweepInterval is how often orphaned objects are swept
	// (strata.remote.sweep.interval.ms, default 10 minutes).
	SweepInterval time.Duration
	// Restore lists the topics to recreate from the object store at
	// start if they do not exist (strata.remote.restore.topics; "*" is
	// every topic there). See tier_restore.go.
	Restore []string
	// RetryMax bounds the archivers' backoff after a failed upload
	// (strata.remote.retry.max.ms; 0: tiering's default, 30 s).
	RetryMax time.Duration
	// SweepGrace is how old an unreferenced object must be before the
	// sweeper deletes it (0: tiering.DefaultSweepGrace).
	SweepGrace time.Duration
}

// tieringBrokerKeys are the tiering settings for brokerKeys.
var tieringBrokerKeys = map[string]string{
	"remote.log.storage.system.enable":           "default remote.storage.enable of topics: offload sealed segments to the object store (default false)",
	"remote.storage.s3.endpoint":                 "S3 endpoint URL, e.g. http://127.0.0.1:9000 for MinIO; unset (and no bucket) uses the local-directory store",
	"remote.storage.s3.bucket":                   "S3 bucket of tiered segments (credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or the AWS chain)",
	"remote.storage.s3.region":                   "S3 region (default us-east-1)",
	"remote.storage.s3.prefix":                   "key prefix of every object in the bucket",
	"remote.storage.s3.path.style.access":        "path-style S3 addressing (default true when an endpoint is set)",
	"remote.storage.dir":                         "directory of the local-directory object store (default <log.dirs>/objects)",
	"remote.cache.dir":                           "on-disk cache of chunks read from the object store (default <log.dirs>/remote-cache)",
	"remote.cache.bytes":                         "bound on the remote chunk cache (default 1073741824)",
	"remote.cache.chunk.bytes":                   "size of a remote read chunk, the unit of the chunk cache: a read that misses GETs one chunk, read-ahead GETs up to 16 MiB of chunks at once (default 4194304)",
	"remote.cache.readahead.chunks":              "chunks fetched ahead of a sequential remote reader such as a replay from offset 0 (default 4; -1 turns read-ahead off)",
	"remote.cache.readahead.threads":             "goroutines, shared by all partitions, that run read-ahead GETs (default 8)",
	"log.local.retention.ms":                     "default local.retention.ms of tiered topics (-2: retention.ms)",
	"log.local.retention.bytes":                  "default local.retention.bytes of tiered topics (-2: retention.bytes)",
	"strata.remote.poll.interval.ms":             "how often archivers look for sealed segments to upload (default 1000)",
	"strata.remote.manifest.refresh.interval.ms": "how often a follower replica reloads a partition's manifest from the bucket, to free the local segments the leader uploaded (default 30000; one GET per followed partition each time)",
	"strata.remote.sweep.interval.ms":            "how often objects no manifest references are looked for (default 600000)",
	"strata.remote.sweep.grace.ms":               "age after which an unreferenced object is deleted (default 3600000)",
	"strata.remote.retry.max.ms":                 "longest wait between retries of a failed upload (default 30000)",
	"strata.remote.restore.topics":               "topics to recreate at start from the object store if they do not exist (comma-separated, or * for all): same id, partitions and configs; consumers read from offset 0, producers continue after the remote end",
}

func init() {
	for k, v := range tieringBrokerKeys {
		brokerKeys[k] = v
	}
}

// tieringSettings reads the tiering settings into c.Tiering.
func (c *Config) tieringSettings(val func(k string) (string, bool), intIn func(k string, min, max int64) (int64, bool, error), bad func(k, reason string) error) error {
	store, err := tiering.StoreConfigFromSettings(val)
	if err != nil {
		return bad(tiering.SettingS3PathStyle, "must be true or false")
	}
	c.Tiering.Store = store
	if v, ok := val("strata.remote.restore.topics"); ok {
		for _, n := range strings.Split(v, ",") {
			if n = strings.TrimSpace(n); n != "" {
				c.Tiering.Restore = append(c.Tiering.Restore, n)
			}
		}
	}
	if v, ok := val("remote.cache.dir"); ok {
		c.Tiering.CacheDir = v
	}
	const maxMs = math.MaxInt64 / int64(time.Millisecond)
	for _, s := range []struct {
		key      string
		min, max int64
		set      func(n int64)
	}{
		{"remote.cache.bytes", 1, math.MaxInt64, func(n int64) { c.Tiering.CacheBytes = n }},
		{"remote.cache.chunk.bytes", 1024, math.MaxInt32, func(n int64) { c.Tiering.ChunkBytes = n }},
		{"remote.cache.readahead.chunks", -1, 1024, func(n int64) { c.Tiering.ReadAheadChunks = int(n) }},
		{"remote.cache.readahead.threads", 1, 256, func(n int64) { c.Tiering.ReadAheadThreads = int(n) }},
		{"strata.remote.poll.interval.ms", 1, maxMs, func(n int64) { c.Tiering.PollInterval = time.Duration(n) * time.Millisecond }},
		{"strata.remote.manifest.refresh.interval.ms", 1, maxMs, func(n int64) { c.Tiering.RefreshInterval = time.Duration(n) * time.Millisecond }},
		{"strata.remote.sweep.interval.ms", 1, maxMs, func(n int64) { c.Tiering.SweepInterval = time.Duration(n) * time.Millisecond }},
		{"strata.remote.sweep.grace.ms", 1, maxMs, func(n int64) { c.Tiering.SweepGrace = time.Duration(n) * time.Millisecond }},
		{"strata.remote.retry.max.ms", 1, maxMs, func(n int64) { c.Tiering.RetryMax = time.Duration(n) * time.Millisecond }},
	} {
		n, ok, err := intIn(s.key, s.min, s.max)
		if err != nil {
			return err
		}
		if ok {
			s.set(n)
		}
	}
	return nil
}

// brokerTier is the broker's tiered storage: one store, one reader.
type brokerTier struct {
	store  tiering.ObjectStore
	reader *tiering.RemoteReader
	what   string // the store, for logs
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
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
		tc.Store.Dir = filepath.Join(s.cfg.LogDir, "objects")
	}
	if tc.CacheDir == "" {
		tc.CacheDir = filepath.Join(s.cfg.LogDir, "remote-cache")
	}
	ctx, cancel := context.WithCancel(context.Background())
	store, err := tiering.OpenStore(ctx, tc.Store)
	if err != nil {
		cancel()
		return fmt.Errorf("broker: tiered storage: %w", err)
	}
	bt := &brokerTier{store: store, ctx: ctx, cancel: cancel, what: "dir " + tc.Store.Dir}
	if tc.Store.UsesS3() {
		bt.what = fmt.Sprintf("s3 bucket %q at %q", tc.Store.S3.Bucket, tc.Store.S3.Endpoint)
	}
	bt.reader, err = tiering.NewRemoteReader(store, tiering.ReaderConfig{
		CacheDir: tc.CacheDir, CacheBytes: tc.CacheBytes, ChunkBytes: tc.ChunkBytes,
		ReadAheadChunks: tc.ReadAheadChunks, ReadAheadWorkers: tc.ReadAheadThreads,
		Logger: s.log.With("component", "remote-reader"),
	})
	if err != nil {
		cancel()
		return fmt.Errorf("broker: tiered storage: %w", err)
	}
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
			interval = 10 * time.Minute
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
	_ = bt.reader.Close()
}

// tierRetention is a topic's retention in tiering's terms.
func tierRetention(cfg topicConfig) tiering.Retention {
	return tiering.Retention{Ms: cfg.seg.RetentionMs, Bytes: cfg.seg.RetentionBytes, LocalMs: cfg.localRetentionMs, LocalBytes: cfg.localRetentionBytes}
}

// newPartTier returns the tiering of a partition about to be opened.
// Internal topics (__consumer_offsets) are never tiered.
func newPartTier(topic string, cfg topicConfig) *partTier {
	return &partTier{gate: tiering.NewGate(tiered(topic, cfg))}
}

// tiered reports whether the topic's partitions are offloaded.
func tiered(topic string, cfg topicConfig) bool {
	return cfg.remoteStorage && topic != group.Topic
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
		if p.topic != group.Topic {
			s.loadFrozenManifest(p)
		}
		return
	}
	if p.tier.archiver() != nil {
		return
	}
	s.restoredStart(p)
	p.tier.mu.Lock()
	defer p.tier.mu.Unlock()
	if p.tier.arch != nil {
		return
	}
	p.tier.epochBase = readEpochBase(p.dir)
	a, err := tiering.NewArchiver(tiering.ArchiverConfig{
		Store: s.tier.store, Log: p.log, Topic: p.topic, TopicID: topicID, Partition: p.index,
		NumPartitions: numPartitions, Configs: overrides,
		Retention:       tierRetention(cfg).Remote(),
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
		Logger: s.log,
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
func (s *Server) loadFrozenManifest(p *partition) {
	bt := s.tier
	bt.wg.Add(1)
	go func() {
		defer bt.wg.Done()
		ctx, cancel := context.WithTimeout(bt.ctx, 30*time.Second)
		defer cancel()
		m, _, err := tiering.LoadManifest(ctx, bt.store, p.topic, p.index)
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
			a.UpdateTopic(ts.overrides, int32(len(ts.parts)))
		} else {
			s.tierStart(p, ts.id.String(), ts.cfg, ts.overrides, int32(len(ts.parts)))
		}
	}
}

// tierDelete stops the archiver of a deleted topic's partition and
// deletes the partition's remote data in the background.
func (s *Server) tierDelete(p *partition, tiered bool) {
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
			err := tiering.DeletePartition(ctx, bt.store, p.topic, p.index)
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

// parseTierTopicConfig fills the tiering fields of tc.
func parseTierTopicConfig(tc *topicConfig, get func(string) string) error {
	tc.remoteStorage = get("remote.storage.enable") == "true"
	var err error
	if tc.localRetentionMs, err = strconv.ParseInt(get("local.retention.ms"), 10, 64); err != nil {
		return fmt.Errorf("topic config %q: %v", "local.retention.ms", err)
	}
	if tc.localRetentionBytes, err = strconv.ParseInt(get("local.retention.bytes"), 10, 64); err != nil {
		return fmt.Errorf("topic config %q: %v", "local.retention.bytes", err)
	}
	return nil
}
