package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/stratastream/strata/segment"
)

// The log cleaner: the broker's scheduler of compaction (Kafka's
// LogCleaner and LogCleanerManager); package segment does the cleaning of
// one partition (Log.Clean).
//
//   - log.cleaner.threads goroutines each loop: pick the filthiest
//     cleanable partition, clean it, pick again. With nothing to clean a
//     thread sleeps log.cleaner.backoff.ms.
//   - Candidates are the partitions this broker hosts, leader or follower
//     (each replica compacts its own log, as in Kafka), of topics whose
//     cleanup.policy holds compact (__consumer_offsets is created so).
//     Tiered compacted topics too: their archivers upload segments once
//     cleaned and compact the remote part (tiering/compaction.go).
//   - The pick is Kafka's grabFilthiestCompactedLog (pickFilthiest): a
//     partition is cleanable when its dirty ratio (dirty bytes over clean
//     plus dirty, Log.Cleanable) is above min.cleanable.dirty.ratio, or it
//     has dirty bytes and its first dirty batch is older than
//     max.compaction.lag.ms; the highest ratio wins. With none, a
//     partition whose clean section holds tombstones past their delete
//     horizon is cleaned to drop them (KIP-534).
//   - A partition is cleaned by one thread at a time, never while it
//     moves to another log directory (logdir_move.go aborts a running
//     cleaning first), never once it is closing: stop (from topic
//     deletion, a reassignment away, a failing log directory) cancels the
//     running cleaning and waits for it before the log is closed or
//     deleted. Shutdown cancels all.
//   - The upper bound is the high watermark (Log.Clean's own): nothing a
//     consumer cannot read yet is cleaned, so a follower's truncation
//     never meets a cleaned segment it would need to keep.
//   - Produce and fetch never wait for the cleaner (Log.Clean runs outside
//     the append lock); log.cleaner.io.max.bytes.per.second throttles
//     all threads together. On Linux each thread runs on an OS thread of
//     its own at nice 10 (log_cleaner_linux.go), so that on a busy
//     machine requests get the CPU first.
//   - A failure marks the partition uncleanable until it is reopened
//     (strata_log_cleaner_uncleanable_partitions), as Kafka does: a disk
//     failure also takes its log directory offline; ErrPoisoned (a swap
//     half done) has done so already through the log's poison callback,
//     and reopening it (the next start) completes the swap in recovery.
//
//   - log.cleaner.threads, log.cleaner.dedupe.buffer.size,
//     log.cleaner.io.buffer.load.factor, log.cleaner.io.buffer.size,
//     log.cleaner.io.max.bytes.per.second and log.cleaner.backoff.ms are
//     dynamic broker configs (dynamic_broker_config.go), as Kafka's
//     LogCleaner.reconfigurableConfigs: reconfigure checks them as
//     Kafka's validateReconfiguration does (threads at least 1, at least
//     half and at most double the current count), sets the throttle's rate
//     at once, then, as Kafka's reconfigure, stops the threads (a cleaning
//     in progress is canceled; its partition is picked again) and starts
//     the new count with the new settings.
//
// Lock order: logCleaner.reconfMu, then Server.mu (read, to list
// partitions), then logCleaner.mu; Server.mu and logCleaner.mu are never
// held across a cleaning or a Cleanable.

// CleanerConfig holds the log cleaner's broker settings (log.cleaner.*).
type CleanerConfig struct {
	// Enable is log.cleaner.enable.
	Enable bool
	// Threads is log.cleaner.threads.
	Threads int32
	// DedupeBufferSize is log.cleaner.dedupe.buffer.size: the offset maps'
	// memory, split evenly between the threads.
	DedupeBufferSize int64
	// LoadFactor is log.cleaner.io.buffer.load.factor.
	LoadFactor float64
	// IOBufferSize is log.cleaner.io.buffer.size; 0 is segment's default.
	IOBufferSize int32
	// IOMaxBytesPerSecond is log.cleaner.io.max.bytes.per.second;
	// math.MaxFloat64 is unthrottled.
	IOMaxBytesPerSecond float64
	// Backoff is log.cleaner.backoff.ms.
	Backoff time.Duration
}

// defaultCleanerIOBuffer is the chunk Log.Clean uses when
// log.cleaner.io.buffer.size is 0.
const defaultCleanerIOBuffer = 512 << 10

// logCleaner schedules the cleaning of compacted partitions.
type logCleaner struct {
	s *Server
	// limiter throttles all threads (rate.Inf: unthrottled); its rate and
	// burst change with reconfigure.
	limiter *rate.Limiter
	// ctx ends at shutdown; each generation of threads runs under a child.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// wake ends the threads' backoff early (tests).
	wake    chan struct{}
	metrics cleanerMetrics
	// threads counts the thread goroutines running.
	threads atomic.Int32
	// reconfMu serialises start, reconfigure and shutdown.
	reconfMu sync.Mutex
	// gen is the running generation of threads (nil before start, after
	// shutdown, or with log.cleaner.enable off); guarded by reconfMu,
	// read by the threads through their own pointer.
	gen *cleanerGen
	// onCleaned, if set, is called after each cleaning (tests).
	onCleaned atomic.Pointer[func(cleanEvent)]
	// picks counts the picks made and sleeping the threads in their
	// backoff (tests wait for them).
	picks    atomic.Int64
	sleeping atomic.Int32

	mu struct {
		sync.Mutex
		running map[*partition]*cleaning
		// cfg is the configuration in force (reconfigure changes it).
		cfg CleanerConfig
	}
}

// cleanerGen is one generation of cleaner threads: the configuration
// they run with, and how to stop them.
type cleanerGen struct {
	cfg     CleanerConfig
	mapSize int // bytes of each thread's offset map
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// partClean is a partition's cleaner state (partition.clean), guarded by
// logCleaner.mu.
type partClean struct {
	// stopped: the partition is closing or deleted; it is never cleaned
	// again.
	stopped bool
	// uncleanable is why cleaning it failed; it is not tried again.
	uncleanable error
}

// cleaning is one partition's cleaning in progress.
type cleaning struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// cleanEvent reports one cleaning to the test hook.
type cleanEvent struct {
	p   *partition
	res segment.CleanResult
	err error
}

// cleanCandidate is a compacted partition as the pick sees it.
type cleanCandidate struct {
	p    *partition
	cfg  topicConfig
	info segment.CleanableInfo
}

// newLogCleaner sets up the cleaner of s (not started). The offset maps
// are allocated by each thread on its first cleaning, so a broker
// without compacted data never holds them.
func newLogCleaner(s *Server, cfg CleanerConfig) (*logCleaner, error) {
	c := &logCleaner{s: s, wake: make(chan struct{}, maxCleanerThreads)}
	c.mu.running = map[*partition]*cleaning{}
	c.mu.cfg = cfg
	c.ctx, c.cancel = context.WithCancel(context.Background())
	// Fail at start, not at the first cleaning, if the share is too small.
	if _, err := cleanerMapSize(cfg); err != nil {
		return nil, err
	}
	c.limiter = rate.NewLimiter(cleanerRate(cfg), cleanerIOBuffer(cfg))
	c.metrics = newCleanerMetrics(c)
	return c, nil
}

// maxCleanerThreads is log.cleaner.threads' upper bound (settings_log.go).
const maxCleanerThreads = 64

// cleanerMapSize is the bytes of each thread's offset map under cfg; an
// error if that share cannot hold a map.
func cleanerMapSize(cfg CleanerConfig) (int, error) {
	if cfg.Threads <= 0 {
		return 0, nil
	}
	n := int(min(cfg.DedupeBufferSize/int64(cfg.Threads), math.MaxInt32))
	if _, err := segment.NewOffsetMap(min(n, 1<<16), cfg.LoadFactor); err != nil {
		return 0, fmt.Errorf("broker: log.cleaner.dedupe.buffer.size %d for %d threads: %w", cfg.DedupeBufferSize, cfg.Threads, err)
	}
	return n, nil
}

// cleanerRate is the throttle's rate under cfg.
func cleanerRate(cfg CleanerConfig) rate.Limit {
	if cfg.IOMaxBytesPerSecond >= math.MaxFloat64 {
		return rate.Inf
	}
	return rate.Limit(cfg.IOMaxBytesPerSecond)
}

// cleanerIOBuffer is the chunk size of the cleaner's reads and writes
// under cfg.
func cleanerIOBuffer(cfg CleanerConfig) int {
	if cfg.IOBufferSize > 0 {
		return int(cfg.IOBufferSize)
	}
	return defaultCleanerIOBuffer
}

// config is the configuration in force.
func (c *logCleaner) config() CleanerConfig {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.cfg
}

// start runs the threads, unless log.cleaner.enable is off.
func (c *logCleaner) start() {
	c.reconfMu.Lock()
	defer c.reconfMu.Unlock()
	c.startLocked()
}

// startLocked starts a generation of threads with the configuration in
// force. Caller holds reconfMu.
func (c *logCleaner) startLocked() {
	cfg := c.config()
	if !cfg.Enable || cfg.Threads <= 0 || c.ctx.Err() != nil {
		return
	}
	mapSize, _ := cleanerMapSize(cfg) // checked by newLogCleaner or reconfigure
	g := &cleanerGen{cfg: cfg, mapSize: mapSize}
	g.ctx, g.cancel = context.WithCancel(c.ctx)
	for i := range int(cfg.Threads) {
		c.wg.Add(1)
		g.wg.Add(1)
		go c.run(i, g)
	}
	c.gen = g
}

// stopThreadsLocked cancels the running generation's cleanings and waits
// for its threads. Caller holds reconfMu.
func (c *logCleaner) stopThreadsLocked() {
	if g := c.gen; g != nil {
		g.cancel()
		g.wg.Wait()
		c.gen = nil
	}
}

// shutdown cancels every cleaning and waits for the threads.
func (c *logCleaner) shutdown() {
	c.cancel()
	c.reconfMu.Lock()
	c.stopThreadsLocked()
	c.reconfMu.Unlock()
	c.wg.Wait()
}

// validateReconfiguration checks a new configuration as Kafka's
// LogCleaner.validateReconfiguration does: a changed thread count is at
// least 1, at least half and at most double the current one; and each
// thread's share of the dedupe buffer must hold an offset map.
func (c *logCleaner) validateReconfiguration(next CleanerConfig) error {
	cur := c.config()
	if next.Threads != cur.Threads {
		switch {
		case next.Threads < 1:
			return fmt.Errorf("log cleaner threads should be at least 1")
		case next.Threads < cur.Threads/2:
			return fmt.Errorf("log cleaner threads cannot be reduced to less than half the current value %d", cur.Threads)
		case next.Threads > cur.Threads*2:
			return fmt.Errorf("log cleaner threads cannot be increased to more than double the current value %d", cur.Threads)
		}
	}
	_, err := cleanerMapSize(next)
	return err
}

// initialConfig replaces the configuration before the threads start (the
// dynamic broker configs read at start), as Kafka builds its cleaner from
// the configuration with them applied; next is checked by cleanerMapSize.
func (c *logCleaner) initialConfig(next CleanerConfig) {
	c.reconfMu.Lock()
	defer c.reconfMu.Unlock()
	next.Enable = c.config().Enable
	if c.gen != nil { // already running: restart the threads
		c.limiter.SetLimit(cleanerRate(next))
		c.stopThreadsLocked()
		c.limiter.SetBurst(cleanerIOBuffer(next))
		c.mu.Lock()
		c.mu.cfg = next
		c.mu.Unlock()
		c.startLocked()
		return
	}
	c.limiter.SetLimit(cleanerRate(next))
	c.limiter.SetBurst(cleanerIOBuffer(next))
	c.mu.Lock()
	c.mu.cfg = next
	c.mu.Unlock()
}

// reconfigure applies a configuration validateReconfiguration accepted,
// as Kafka's LogCleaner.reconfigure: the throttle's rate changes at once;
// the threads are stopped (cleanings in progress canceled, their
// partitions picked again later) and the new count started with the new
// maps, buffers and backoff.
func (c *logCleaner) reconfigure(next CleanerConfig) {
	c.reconfMu.Lock()
	defer c.reconfMu.Unlock()
	next.Enable = c.config().Enable // log.cleaner.enable is read at start only
	c.limiter.SetLimit(cleanerRate(next))
	c.stopThreadsLocked()
	// No cleaning runs now, so the burst may shrink: each asks for at
	// most one chunk at a time.
	c.limiter.SetBurst(cleanerIOBuffer(next))
	c.mu.Lock()
	c.mu.cfg = next
	c.mu.Unlock()
	c.startLocked()
}

// stop makes p uncleanable for good and waits for its cleaning in
// progress to end: call it before closing or deleting p's log.
func (c *logCleaner) stop(p *partition) {
	c.mu.Lock()
	p.clean.stopped = true
	c.mu.Unlock()
	c.abort(p)
}

// abort cancels p's cleaning in progress, if any, and waits for it to
// end. A replica move calls it after setting p's future replica, which
// keeps the threads off p until the move ends.
func (c *logCleaner) abort(p *partition) {
	c.mu.Lock()
	r := c.mu.running[p]
	c.mu.Unlock()
	if r != nil {
		r.cancel()
		<-r.done
	}
}

// run is one cleaner thread of generation g.
func (c *logCleaner) run(thread int, g *cleanerGen) {
	defer c.wg.Done()
	defer g.wg.Done()
	c.threads.Add(1)
	defer c.threads.Add(-1)
	restore, err := lowerCleanerPriority()
	if err != nil {
		c.s.log.Warn("log cleaner: cannot lower the thread's priority; it competes with produce and fetch as an equal", "thread", thread, "err", err)
	}
	defer restore()
	var m *segment.OffsetMap
	for g.ctx.Err() == nil {
		job, ctx := c.grab(g)
		if job == nil {
			c.sleep(g)
			continue
		}
		if m == nil {
			var err error
			if m, err = segment.NewOffsetMap(g.mapSize, g.cfg.LoadFactor); err != nil {
				// Checked by newLogCleaner; only memory could fail here.
				c.s.log.Error("log cleaner: cannot allocate the offset map; the thread stops", "thread", thread, "bytes", g.mapSize, "err", err)
				c.release(job.p)
				return
			}
		}
		res, err := job.p.log.Clean(ctx, c.cleanConfig(job, m, g))
		c.finish(job, res, err, g)
		if err != nil || !(res.MappedEnd > res.FirstDirty || res.TombstonesRemoved > 0 || res.MarkersRemoved > 0) {
			// No progress: do not pick the same partition at once again.
			c.sleep(g)
		}
	}
}

// sleep waits log.cleaner.backoff.ms, or until g stops or a wake-up.
func (c *logCleaner) sleep(g *cleanerGen) {
	t := time.NewTimer(g.cfg.Backoff)
	defer t.Stop()
	c.sleeping.Add(1)
	defer c.sleeping.Add(-1)
	select {
	case <-g.ctx.Done():
	case <-t.C:
	case <-c.wake:
	}
}

// kick ends the threads' backoff now, or their next one (tests).
func (c *logCleaner) kick() {
	for range c.config().Threads {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// cleanConfig is the CleanConfig of a job, cleaning with map m.
func (c *logCleaner) cleanConfig(job *cleanCandidate, m *segment.OffsetMap, g *cleanerGen) segment.CleanConfig {
	return segment.CleanConfig{
		Map:                 m,
		DeleteRetentionMs:   job.cfg.deleteRetentionMs,
		MinCompactionLagMs:  job.cfg.minCompactionLagMs,
		IOBufferBytes:       cleanerIOBuffer(g.cfg),
		ProducerLastOffsets: job.p.activeProducerLastOffsets(),
		Limiter:             c.limiter,
		// Open transactions are not cleaned (the dirty section ends
		// at the last stable offset; UncleanableFrom 0 would mean no
		// bound, and a log whose LSO is 0 has nothing to clean), and
		// aborted ones are dropped.
		UncleanableFrom: max(job.p.lastStableOffset(), 1),
		AbortedTxns:     job.p.txns.CollectAborted(0, math.MaxInt64),
		TxnsComplete:    true,
	}
}

// activeProducerLastOffsets maps each producer the partition's state
// knows to the last offset of its last batch, which the cleaner keeps.
func (p *partition) activeProducerLastOffsets() map[int64]int64 {
	out := map[int64]int64{}
	if p.producers == nil {
		return out
	}
	for _, pid := range p.producers.ProducerIDs() {
		if _, batches, ok := p.producers.Producer(pid); ok && len(batches) > 0 {
			out[pid] = batches[len(batches)-1].LastOffset
		}
	}
	return out
}

// grab picks the partition to clean and registers its cleaning; nil when
// none needs it.
func (c *logCleaner) grab(g *cleanerGen) (*cleanCandidate, context.Context) {
	nowMs := c.s.nowFn().UnixMilli()
	var cands []cleanCandidate
	for _, cand := range c.s.compactedPartitions() {
		if !c.mayClean(cand.p) {
			continue
		}
		info, err := cand.p.log.Cleanable(segment.CleanConfig{MinCompactionLagMs: cand.cfg.minCompactionLagMs, UncleanableFrom: max(cand.p.lastStableOffset(), 1)})
		if err != nil {
			if !errors.Is(err, segment.ErrClosed) && !errors.Is(err, segment.ErrPoisoned) {
				c.markUncleanable(cand.p, err)
			}
			continue
		}
		cand.info = info
		cands = append(cands, cand)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	eligible := cands[:0]
	for _, cand := range cands {
		if c.mayCleanLocked(cand.p) {
			eligible = append(eligible, cand)
		}
	}
	best, st := pickFilthiest(eligible, nowMs)
	c.metrics.setPick(st)
	c.picks.Add(1)
	if best == nil {
		return nil, nil
	}
	ctx, cancel := context.WithCancel(g.ctx)
	c.mu.running[best.p] = &cleaning{cancel: cancel, done: make(chan struct{})}
	return best, ctx
}

// mayClean reports whether p may be cleaned now.
func (c *logCleaner) mayClean(p *partition) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mayCleanLocked(p)
}

func (c *logCleaner) mayCleanLocked(p *partition) bool {
	return !p.clean.stopped && p.clean.uncleanable == nil && c.mu.running[p] == nil && p.futureReplica() == nil
}

// markUncleanable records why p cannot be cleaned.
func (c *logCleaner) markUncleanable(p *partition, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.clean.uncleanable == nil {
		p.clean.uncleanable = err
	}
}

// finish records the end of job's cleaning: metrics, errors, and the
// partition free for the next pick.
func (c *logCleaner) finish(job *cleanCandidate, res segment.CleanResult, err error, g *cleanerGen) {
	p := job.p
	canceled := g.ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, segment.ErrClosed)
	switch {
	case err == nil:
		c.metrics.record(res)
		// Aborted transactions whose data the cleaner found gone leave
		// the index; their markers may go at a later cleaning. A failure
		// leaves them listed, which keeps their markers (safe).
		if err := p.txns.Remove(res.AbortedTxnsDone); err != nil {
			c.s.log.Warn("log cleaner: removing aborted transactions from the index failed", "topic", p.topic, "partition", p.index, "err", err)
		}
		if res.Cleaned {
			c.s.log.Debug("log cleaner: partition cleaned", "topic", p.topic, "partition", p.index,
				"first_dirty", res.FirstDirty, "mapped_end", res.MappedEnd, "segments_read", res.SegmentsRead, "segments_written", res.SegmentsWritten,
				"bytes_read", res.BytesRead+res.MapBytesRead, "bytes_written", res.BytesWritten, "records_kept", res.RecordsKept, "records_read", res.RecordsRead,
				"tombstones_removed", res.TombstonesRemoved, "markers_removed", res.MarkersRemoved, "duration", res.Duration.Round(time.Millisecond).String())
		}
	case canceled:
		c.s.log.Debug("log cleaner: cleaning stopped", "topic", p.topic, "partition", p.index, "err", err)
	case errors.Is(err, segment.ErrPoisoned):
		// The log's poison callback took its directory offline; the
		// next open completes the swap.
		c.s.log.Error("log cleaner: a cleaned segment's swap failed; the partition's log is poisoned", "topic", p.topic, "partition", p.index, "err", err)
		c.markUncleanable(p, err)
	default:
		c.s.log.Error("log cleaner: cleaning failed; the partition is marked uncleanable", "topic", p.topic, "partition", p.index, "err", err)
		c.markUncleanable(p, err)
		c.s.storageFailure(p, err)
	}
	c.release(p)
	if h := c.onCleaned.Load(); h != nil {
		(*h)(cleanEvent{p: p, res: res, err: err})
	}
}

// release ends p's cleaning in progress: abort's waiters go on, and p
// may be picked again.
func (c *logCleaner) release(p *partition) {
	c.mu.Lock()
	r := c.mu.running[p]
	delete(c.mu.running, p)
	c.mu.Unlock()
	if r != nil {
		r.cancel()
		close(r.done)
	}
}

// pickStats is what a pick saw, for the metrics.
type pickStats struct {
	maxDirtyRatio      float64
	maxCompactionDelay time.Duration
}

// pickFilthiest is Kafka's grabFilthiestCompactedLog over the candidates:
// the highest dirty ratio among those above their min.cleanable.dirty.ratio
// or with dirty data older than max.compaction.lag.ms; failing that, the
// highest ratio among those holding tombstones past their delete
// horizon; nil if none.
func pickFilthiest(cands []cleanCandidate, nowMs int64) (*cleanCandidate, pickStats) {
	var st pickStats
	var best, tomb *cleanCandidate
	for i := range cands {
		cand := &cands[i]
		info := cand.info
		st.maxDirtyRatio = max(st.maxDirtyRatio, info.DirtyRatio)
		delay := compactionDelayMs(info.FirstDirtyTimestamp, cand.cfg.maxCompactionLagMs, nowMs)
		st.maxCompactionDelay = max(st.maxCompactionDelay, time.Duration(delay)*time.Millisecond)
		if info.CleanBytes+info.DirtyBytes == 0 {
			continue
		}
		if (delay > 0 && info.DirtyBytes > 0) || info.DirtyRatio > cand.cfg.minCleanableRatio {
			if best == nil || info.DirtyRatio > best.info.DirtyRatio {
				best = cand
			}
			continue
		}
		if h := info.EarliestDeleteHorizon; h >= 0 && h <= nowMs {
			if tomb == nil || info.DirtyRatio > tomb.info.DirtyRatio {
				tomb = cand
			}
		}
	}
	if best == nil {
		best = tomb
	}
	return best, st
}

// compactionDelayMs is how far past max.compaction.lag.ms a partition's
// first dirty batch (of timestamp firstDirtyTs, -1 if none) is, 0 if it
// is not (Kafka's LogCleanerManager.maxCompactionDelay).
func compactionDelayMs(firstDirtyTs, maxLagMs, nowMs int64) int64 {
	if firstDirtyTs <= 0 {
		return 0
	}
	cleanUntil := nowMs - max(maxLagMs, 0)
	if firstDirtyTs < cleanUntil {
		return cleanUntil - firstDirtyTs
	}
	return 0
}

// compactedPartitions lists the open partitions of compacted topics this
// broker hosts, with their topic's config.
func (s *Server) compactedPartitions() []cleanCandidate {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []cleanCandidate
	for _, t := range s.mu.topics {
		if !t.cfg.compact {
			continue
		}
		for _, p := range t.parts {
			if p != nil {
				out = append(out, cleanCandidate{p: p, cfg: t.cfg})
			}
		}
	}
	return out
}

// cleanerStop stops p's cleaning before its log is closed or deleted.
func (s *Server) cleanerStop(p *partition) {
	if s.cleaner != nil {
		s.cleaner.stop(p)
	}
}

// cleanerMetrics are the strata_log_cleaner_* metrics.
type cleanerMetrics struct {
	runs, bytesRead, bytesWritten, dirtyBytes, tombstones prometheus.Counter
	maxDirty, maxDelay, lastRun, lastDuration, bufferUse  prometheus.Gauge
	uncleanable, threads, ioLimit                         prometheus.GaugeFunc
}

func newCleanerMetrics(c *logCleaner) cleanerMetrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_log_cleaner_" + name, Help: help})
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: "strata_log_cleaner_" + name, Help: help})
	}
	m := cleanerMetrics{
		runs:         counter("runs_total", "Cleanings that cleaned something."),
		bytesRead:    counter("read_bytes_total", "Bytes the cleaner read: the dirty sections mapped and the segments rewritten."),
		bytesWritten: counter("written_bytes_total", "Bytes of cleaned segments written."),
		dirtyBytes:   counter("dirty_bytes_cleaned_total", "Bytes of dirty log (not cleaned before) that cleanings covered."),
		tombstones:   counter("tombstones_removed_total", "Tombstones dropped past their delete.retention.ms."),
		maxDirty:     gauge("max_dirty_percent", "The highest dirty ratio (percent of dirty bytes) of a compacted partition at the cleaner's last pick."),
		maxDelay:     gauge("max_compaction_delay_seconds", "How far past its max.compaction.lag.ms the most overdue compacted partition was at the last pick (Kafka's max-compaction-delay-secs)."),
		lastRun:      gauge("last_run_timestamp_seconds", "When the last cleaning ended (Unix time)."),
		lastDuration: gauge("last_run_duration_seconds", "How long the last cleaning took."),
		bufferUse:    gauge("last_buffer_utilization_ratio", "How full the offset map was at the last cleaning."),
	}
	m.uncleanable = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "strata_log_cleaner_uncleanable_partitions",
		Help: "Compacted partitions a cleaning failed on (a corrupt batch, a disk error); not cleaned again until the broker restarts.",
	}, func() float64 {
		n := 0
		parts := c.s.allPartitions()
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, p := range parts {
			if p.clean.uncleanable != nil {
				n++
			}
		}
		return float64(n)
	})
	m.threads = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "strata_log_cleaner_threads",
		Help: "Cleaner threads running (log.cleaner.threads, changeable at run time; 0 with log.cleaner.enable off).",
	}, func() float64 { return float64(c.threads.Load()) })
	m.ioLimit = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "strata_log_cleaner_io_max_bytes_per_second",
		Help: "The cleaner threads' throttle in force (log.cleaner.io.max.bytes.per.second, changeable at run time); the largest double is unthrottled.",
	}, func() float64 { return float64(c.limiter.Limit()) })
	c.s.metrics.reg.MustRegister(m.runs, m.bytesRead, m.bytesWritten, m.dirtyBytes, m.tombstones,
		m.maxDirty, m.maxDelay, m.lastRun, m.lastDuration, m.bufferUse, m.uncleanable, m.threads, m.ioLimit)
	return m
}

// setPick records what a pick saw.
func (m cleanerMetrics) setPick(st pickStats) {
	m.maxDirty.Set(100 * st.maxDirtyRatio)
	m.maxDelay.Set(st.maxCompactionDelay.Seconds())
}

// record counts one finished cleaning.
func (m cleanerMetrics) record(res segment.CleanResult) {
	if !res.Cleaned {
		return
	}
	m.runs.Inc()
	m.bytesRead.Add(float64(res.BytesRead + res.MapBytesRead))
	m.bytesWritten.Add(float64(res.BytesWritten))
	m.dirtyBytes.Add(float64(res.MapBytesRead))
	m.tombstones.Add(float64(res.TombstonesRemoved))
	m.lastRun.Set(float64(time.Now().UnixMilli()) / 1000)
	m.lastDuration.Set(res.Duration.Seconds())
	m.bufferUse.Set(res.MapUtilization)
}
