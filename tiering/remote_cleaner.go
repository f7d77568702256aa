package tiering

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/stratastream/strata/segment"
)

// The remote cleaner: log compaction of the part of a compacted topic that
// is only in the bucket.
//
// The local cleaner compacts the local log; once a segment is uploaded and
// deleted locally, its records superseded by later uploads stay in the
// bucket unless something compacts it there. On the leader, as one more
// part of the archiver's step, the remote cleaner does a round when the
// remote dirty ratio (the bytes of remote segments at or above the remote
// cleaner checkpoint over all remote bytes) reaches
// min.cleanable.dirty.ratio, or the oldest dirty remote segment is older
// than max.compaction.lag.ms, at most once per RemoteCleanConfig.Interval:
//
//  1. The dirty section is the remote segments from the checkpoint on, up
//     to the first one holding a record newer than min.compaction.lag.ms.
//  2. Its .log objects are streamed (GETs, batch by batch, CRCs checked)
//     into a segment.OffsetMap (OffsetMap.MapBatch: Log.Clean's rules) until
//     the map is full; the mapped end is where it stopped. The same pass
//     notes each producer's last batch over the segments read.
//  3. The segments from the first one to the one holding the mapped end
//     are grouped (their sizes together within segment.bytes) and each
//     group is streamed again through segment.BatchCleaner into a local
//     temporary file, with an offset and a time index rebuilt for it.
//  4. The replacements are uploaded under new object ids, then one manifest
//     commit swaps them in: the same conditional put and leader-epoch
//     fencing as uploads, within half the sweep grace of the first PUT.
//     Steps 1 to 3 and the uploads run on a goroutine of their own, so the
//     archiver's uploads of new segments go on meanwhile; the commit is
//     the archiver loop's, into its current view, and only if the sources
//     are still its first segments and it still leads in the round's
//     epoch (else the replacements are left to the sweeper). The
//     replaced segments go to the dropped list, deleted after the delete
//     delay (purgeDropped), so a reader that resolved the older manifest
//     finishes reading them.
//
// Offsets never change: a replacement covers exactly the offsets of its
// group, [first BaseOffset, last NextOffset), so the manifest stays
// contiguous; a group that keeps no record at all is folded into the
// replacement before it (or after it, for the first). If every group of a
// round would be empty the round swaps nothing. A reader sees offsets only
// increase, whichever manifest each of its reads resolved, so it never
// sees a key's older value after its newer one.
//
// The remote cleaner checkpoint is kept in memory on the leader (the
// manifest format does not carry it): a new leader, or a restarted broker,
// takes the whole remote log for dirty and its first round rereads all of
// it once.

// RemoteCleanConfig configures an archiver's remote cleaner; the zero
// value takes the defaults.
type RemoteCleanConfig struct {
	// Interval is the least time between two rounds of one partition
	// (strata.remote.cleaner.interval.ms). Default 1 minute.
	Interval time.Duration
	// MapBytes is the memory of the offset map of one round
	// (strata.remote.cleaner.dedupe.buffer.size). Default 16 MiB.
	MapBytes int
	// TempDir holds the replacement files while they are written and
	// uploaded; os.TempDir() when empty.
	TempDir string
	// Limiter, if set, paces the cleaner's reads, writes and uploads of
	// replacement objects (log.cleaner.io.max.bytes.per.second). It is
	// asked for at most 64 KiB at a time, so a *rate.Limiter with a burst
	// of at least that fits.
	Limiter segment.IOLimiter
	// Disabled turns the remote cleaner off (log.cleaner.enable=false).
	Disabled bool
}

// Defaults of RemoteCleanConfig.
const (
	DefaultRemoteCleanInterval = time.Minute
	DefaultRemoteCleanMapBytes = 16 << 20
	remoteCleanReadBuffer      = 1 << 20
	throttleChunk              = 64 << 10
	defaultRemoteSegmentBytes  = 1 << 30
)

func (c RemoteCleanConfig) normalized() RemoteCleanConfig {
	if c.Interval <= 0 {
		c.Interval = DefaultRemoteCleanInterval
	}
	if c.MapBytes <= 0 {
		c.MapBytes = DefaultRemoteCleanMapBytes
	}
	if c.TempDir == "" {
		c.TempDir = os.TempDir()
	}
	return c
}

// remoteCleanIndexInterval is the index.interval.bytes of the
// replacements' offset indexes (Kafka's default; tests lower it).
var remoteCleanIndexInterval int64 = sliceIndexInterval

// RemoteCleanStats counts the remote cleaner's rounds since start.
type RemoteCleanStats struct {
	Rounds            int64 // rounds that swapped replacements in
	SegmentsReplaced  int64
	SegmentsWritten   int64
	BytesRead         int64 // of the source objects, both passes
	BytesWritten      int64
	RecordsRemoved    int64
	TombstonesRemoved int64
	LastRound         time.Time
	LastDuration      time.Duration
	LastError         error
	CheckpointOffset  int64 // the in-memory remote cleaner checkpoint
}

// RemoteCleanStats returns the remote cleaner's counters.
func (a *Archiver) RemoteCleanStats() RemoteCleanStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mu.cleanStats
}

// remoteCleanState is the remote cleaner's memory, on the loop goroutine.
type remoteCleanState struct {
	checkpoint int64         // first remote offset not cleaned remotely
	lastTry    time.Duration // on cfg.Mono; 0 before the first
	tried      bool
	running    bool                    // a round's work goroutine has not reported yet
	done       chan remoteCleanOutcome // capacity 1: the work goroutine's report
	offsetMap  *segment.OffsetMap      // the running round's while running
	// afterUpload, if set, is called (tests) once the replacement objects
	// are uploaded, before the manifest commit.
	afterUpload func() error
}

// remoteCleanWork is one round's work (passes 1 to 3 and the uploads of
// step 4), run on a goroutine of its own over the manifest m.
type remoteCleanWork struct {
	a           *Archiver
	m           *Manifest
	epoch       int32
	comp        Compaction
	plan        remoteCleanPlan
	om          *segment.OffsetMap
	checkpoint  int64
	afterUpload func() error
}

// remoteCleanOutcome is what a round's work reports to the loop: the
// uploaded replacements of the first k segments of m, or an error.
type remoteCleanOutcome struct {
	m         *Manifest
	epoch     int32
	k         int
	outs      []RemoteSegment
	mappedEnd int64
	started   time.Duration // on cfg.Mono: the first PUT
	began     time.Time
	res       remoteCleanResult
	err       error
}

// cleanRemote runs the remote cleaner's part of a step: it commits the
// swap of a finished round, or starts a round when one is due. A round's
// reads, rewriting and uploads run on a goroutine of their own
// (remoteCleanWork), so uploads of new segments never wait for it; only
// the commit is the loop's, as every manifest write is. Failures other
// than fencing are logged and recorded and wait for the next interval:
// uploads must not stop because the remote log cannot be compacted.
func (a *Archiver) cleanRemote(ctx context.Context) error {
	if a.rc.running {
		select {
		case out := <-a.rc.done:
			a.rc.running = false
			return a.finishRemoteClean(ctx, out)
		default:
			return nil
		}
	}
	comp := a.compaction()
	if !comp.Enabled || a.cfg.RemoteClean.Disabled {
		return nil
	}
	now := a.cfg.Mono()
	if a.rc.tried && now-a.rc.lastTry < a.cfg.RemoteClean.Interval {
		return nil
	}
	m, epoch, ok := a.view()
	if !ok || len(m.Segments) == 0 {
		return nil
	}
	plan, due := planRemoteClean(m, a.rc.checkpoint, comp, a.cfg.Now().UnixMilli())
	if !due {
		return nil
	}
	if a.rc.offsetMap == nil {
		om, err := segment.NewOffsetMap(a.cfg.RemoteClean.MapBytes, 0.9)
		if err != nil {
			return err
		}
		a.rc.offsetMap = om
	}
	if a.rc.done == nil {
		a.rc.done = make(chan remoteCleanOutcome, 1)
	}
	a.rc.tried, a.rc.lastTry, a.rc.running = true, now, true
	work := remoteCleanWork{a: a, m: m, epoch: epoch, comp: comp, plan: plan, om: a.rc.offsetMap,
		checkpoint: a.rc.checkpoint, afterUpload: a.rc.afterUpload}
	a.rcWG.Add(1)
	go func() {
		defer a.rcWG.Done()
		a.rc.done <- work.run(a.ctx)
		a.Notify()
	}()
	return nil
}

// finishRemoteClean commits a finished round's replacements into the
// current manifest view, if its sources are still the first segments
// there and this archiver still leads in the round's epoch (else the
// replacements are left unreferenced, for the sweeper), and records the
// outcome.
func (a *Archiver) finishRemoteClean(ctx context.Context, out remoteCleanOutcome) error {
	st := out.res
	err := out.err
	if err == nil && len(out.outs) > 0 {
		err = a.swapReplacements(ctx, out)
		st.swapped = err == nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	cs := &a.mu.cleanStats
	cs.BytesRead += st.bytesRead
	if err != nil {
		if errors.Is(err, ErrFenced) {
			return err
		}
		if ctx.Err() != nil {
			return nil // closing
		}
		cs.LastError = err
		a.log.Warn("tiering: remote cleaning failed; next try after the interval", "err", err, "interval", a.cfg.RemoteClean.Interval)
		return nil
	}
	cs.LastError = nil
	if st.swapped {
		a.rc.checkpoint = out.mappedEnd
		cs.Rounds++
		cs.SegmentsReplaced += int64(out.k)
		cs.SegmentsWritten += int64(len(out.outs))
		cs.BytesWritten += st.bytesWritten
		cs.RecordsRemoved += st.recordsRead - st.recordsKept
		cs.TombstonesRemoved += st.tombstones
		cs.LastRound, cs.LastDuration = a.cfg.Now(), time.Since(out.began)
		a.log.Info("tiering: remote cleaning committed", "replaced", out.k, "written", len(out.outs),
			"bytesRead", st.bytesRead, "bytesWritten", st.bytesWritten, "checkpoint", out.mappedEnd, "took", cs.LastDuration)
	}
	cs.CheckpointOffset = a.rc.checkpoint
	return nil
}

// swapReplacements commits the manifest with out's replacements in place
// of the first out.k segments, which go to the dropped list.
func (a *Archiver) swapReplacements(ctx context.Context, out remoteCleanOutcome) error {
	left := a.cfg.Grace/2 - (a.cfg.Mono() - out.started)
	if left <= 0 {
		return fmt.Errorf("tiering: remote cleaning of %s/%d: over half the sweep grace since its uploads began; the replacements are left to the sweeper", a.cfg.Topic, a.cfg.Partition)
	}
	cur, epoch, ok := a.view()
	if !ok || epoch != out.epoch {
		return fmt.Errorf("tiering: remote cleaning of %s/%d: leadership changed meanwhile; the replacements are left to the sweeper", a.cfg.Topic, a.cfg.Partition)
	}
	same := cur.LogStartOffset == out.m.LogStartOffset && len(cur.Segments) >= out.k
	for i := 0; same && i < out.k; i++ {
		same = cur.Segments[i].ObjectName() == out.m.Segments[i].ObjectName() && cur.Segments[i].NextOffset == out.m.Segments[i].NextOffset
	}
	if !same {
		return fmt.Errorf("tiering: remote cleaning of %s/%d: the segments it rewrote changed meanwhile; the replacements are left to the sweeper", a.cfg.Topic, a.cfg.Partition)
	}
	next := cur.Clone()
	segs := make([]RemoteSegment, 0, len(out.outs)+len(cur.Segments)-out.k)
	segs = append(segs, out.outs...)
	next.Segments = append(segs, next.Segments[out.k:]...)
	a.drop(next, cur.Segments[:out.k])
	cctx, cancel := context.WithTimeout(ctx, left)
	err := a.commit(cctx, next)
	cancel()
	if err != nil {
		return fmt.Errorf("tiering: commit manifest of %s/%d after remote cleaning: %w", a.cfg.Topic, a.cfg.Partition, err)
	}
	return nil
}

// remoteCleanPlan is the dirty section of a remote log: segments
// [first, end) of the manifest.
type remoteCleanPlan struct {
	first, end int
}

// planRemoteClean finds the dirty section of m for the checkpoint and
// says whether a round is due.
func planRemoteClean(m *Manifest, ckpt int64, c Compaction, nowMs int64) (remoteCleanPlan, bool) {
	p := remoteCleanPlan{first: len(m.Segments), end: len(m.Segments)}
	var total, dirty int64
	for i, s := range m.Segments {
		total += s.Size
		if s.NextOffset <= ckpt {
			continue
		}
		if p.first == len(m.Segments) {
			p.first = i
		}
		if c.MinCompactionLagMs > 0 && s.MaxTimestamp > nowMs-c.MinCompactionLagMs {
			p.end = i
			break
		}
		dirty += s.Size
	}
	if p.first >= p.end || dirty == 0 {
		return p, false
	}
	if float64(dirty) >= c.MinCleanableDirtyRatio*float64(total) {
		return p, true
	}
	first := m.Segments[p.first]
	return p, c.maxLagBounded() && first.MaxTimestamp >= 0 && first.MaxTimestamp <= nowMs-c.MaxCompactionLagMs
}

// remoteCleanResult counts one round.
type remoteCleanResult struct {
	swapped                  bool
	bytesRead, bytesWritten  int64
	recordsRead, recordsKept int64
	tombstones               int64
}

// replacement is one compacted object being built.
type replacement struct {
	rs        RemoteSegment
	file      *os.File
	size      int64
	index     []byte
	timeIndex []byte
	maxTs     int64
	maxTsOff  int64
	lastIdx   int64 // position of the last index entry
	lastTs    int64 // timestamp of the last time entry
	snapshot  *RemoteSegment
}

// run does the round's work (see the top of the file) and reports it.
func (w remoteCleanWork) run(ctx context.Context) remoteCleanOutcome {
	out := remoteCleanOutcome{m: w.m, epoch: w.epoch, began: time.Now()}
	out.k, out.outs, out.mappedEnd, out.started, out.err = w.a.remoteCleanRound(ctx, w, &out.res)
	return out
}

// remoteCleanRound reads, rewrites and uploads; the loop commits.
func (a *Archiver) remoteCleanRound(ctx context.Context, w remoteCleanWork, res *remoteCleanResult) (k int, uploaded []RemoteSegment, mappedEnd int64, started time.Duration, err error) {
	m, epoch, c, plan, om := w.m, w.epoch, w.comp, w.plan, w.om
	om.Clear()
	firstDirty := max(w.checkpoint, m.Segments[plan.first].BaseOffset)
	prefix := m.Prefix()

	// Pass 1: the offset map of the dirty section, and every producer's
	// last batch in the segments read.
	lastOf := map[int64]int64{}
	mappedEnd = m.Segments[plan.end-1].NextOffset
	full := false
	for i := 0; i < plan.end && !full; i++ {
		seg := &m.Segments[i]
		err := a.streamBatches(ctx, prefix, seg, &res.bytesRead, func(h segment.Header, b []byte) (bool, error) {
			if h.HasProducerID() && !h.Control() {
				lastOf[h.ProducerID] = h.LastOffset()
			}
			if i < plan.first {
				return true, nil
			}
			f, err := om.MapBatch(b, h, firstDirty, 0)
			if err != nil {
				return false, fmt.Errorf("tiering: remote clean: map %s at %d: %w", seg.ObjectName(), h.BaseOffset, err)
			}
			if f {
				if h.BaseOffset <= firstDirty {
					return false, fmt.Errorf("%w: %d keys fit, the remote batch at offset %d has %d records", segment.ErrMapTooSmall, om.Capacity(), h.BaseOffset, h.RecordCount)
				}
				full, mappedEnd = true, h.BaseOffset
				return false, nil
			}
			return true, nil
		})
		if err != nil {
			return 0, nil, 0, 0, err
		}
	}
	// The segments rewritten: from the first to the one holding the
	// mapped end.
	for k < len(m.Segments) && m.Segments[k].BaseOffset < mappedEnd {
		k++
	}
	cleaner, err := segment.NewBatchCleaner(segment.BatchCleanerConfig{
		Map: om, MappedEnd: mappedEnd, NowMs: a.cfg.Now().UnixMilli(),
		DeleteRetentionMs: c.DeleteRetentionMs, ProducerLastOffsets: lastOf,
	})
	if err != nil {
		return 0, nil, 0, 0, err
	}

	// Pass 2: rewrite the groups into temporary files.
	var outs []*replacement
	defer func() {
		for _, r := range outs {
			name := r.file.Name()
			_ = r.file.Close()
			_ = os.Remove(name)
		}
	}()
	pendingBase := int64(-1) // the base of leading groups that kept nothing
	for _, g := range groupRemote(m.Segments[:k], c.SegmentBytes) {
		base := m.Segments[g[0]].BaseOffset
		if pendingBase >= 0 {
			base = pendingBase // the offsets of the empty groups before it
		}
		r, err := a.rewriteGroup(ctx, prefix, m.Segments[g[0]:g[1]], base, cleaner, res)
		if err != nil {
			return 0, nil, 0, 0, err
		}
		last := &m.Segments[g[1]-1]
		if r == nil { // kept nothing: fold the offsets into a neighbour
			if n := len(outs); n > 0 {
				prev := outs[n-1]
				prev.rs.NextOffset = last.NextOffset
				prev.rs.LeaderEpochs = mergeEpochs(m.Segments[:g[1]], prev.rs.BaseOffset, last.NextOffset)
				prev.snapshot = snapshotOf(last)
			} else if pendingBase < 0 {
				pendingBase = m.Segments[g[0]].BaseOffset
			}
			continue
		}
		pendingBase = -1
		r.rs.LeaderEpochs = mergeEpochs(m.Segments[:g[1]], r.rs.BaseOffset, last.NextOffset)
		r.snapshot = snapshotOf(last)
		outs = append(outs, r)
	}
	st := cleaner.Stats()
	res.recordsRead, res.recordsKept, res.tombstones = st.RecordsRead, st.RecordsKept, st.TombstonesRemoved
	if len(outs) == 0 {
		a.log.Info("tiering: remote cleaning skipped: no record would remain", "segments", k)
		return 0, nil, 0, 0, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, nil, 0, 0, err
	}

	// Upload; the loop swaps them in within half the grace of the first
	// PUT (swapReplacements).
	started = a.cfg.Mono()
	for _, r := range outs {
		if err := a.putReplacement(ctx, m, r, epoch); err != nil {
			return 0, nil, 0, 0, err
		}
		res.bytesWritten += r.size
		uploaded = append(uploaded, r.rs)
	}
	if w.afterUpload != nil {
		if err := w.afterUpload(); err != nil {
			return 0, nil, 0, 0, err
		}
	}
	return k, uploaded, mappedEnd, started, nil
}

// snapshotOf returns s when it has a producer snapshot (at its
// NextOffset), else nil.
func snapshotOf(s *RemoteSegment) *RemoteSegment {
	if s.HasSnapshot {
		return s
	}
	return nil
}

// mergeEpochs returns the leader-epoch entries of segs (the remote log up
// to a group's last segment) that wrote offsets in [from, next), the first
// moved up to from, as a segment entry holds them.
func mergeEpochs(segs []RemoteSegment, from, next int64) []segment.EpochEntry {
	var all []segment.EpochEntry
	for _, s := range segs {
		for _, e := range s.LeaderEpochs {
			if n := len(all); n > 0 && (e.Epoch <= all[n-1].Epoch || e.StartOffset <= all[n-1].StartOffset) {
				continue
			}
			all = append(all, e)
		}
	}
	return clampEpochs(all, from, next)
}

// groupRemote splits segs into runs [i, j) whose sizes together stay
// within segmentBytes (one segment at least) and whose offsets span less
// than 2^31, as the local cleaner groups segments.
func groupRemote(segs []RemoteSegment, segmentBytes int64) [][2]int {
	if segmentBytes <= 0 {
		segmentBytes = defaultRemoteSegmentBytes
	}
	segmentBytes = min(segmentBytes, math.MaxInt32)
	var out [][2]int
	for i := 0; i < len(segs); {
		j, size := i+1, segs[i].Size
		for j < len(segs) && size+segs[j].Size <= segmentBytes && segs[j].NextOffset-segs[i].BaseOffset <= math.MaxInt32 {
			size += segs[j].Size
			j++
		}
		out = append(out, [2]int{i, j})
		i = j
	}
	return out
}

// rewriteGroup streams the group's batches through the cleaner into a new
// temporary file and returns the replacement, covering the offsets from
// base (the group's first base offset, or lower when groups before it
// kept nothing) to the group's end, its indexes relative to base; nil
// when nothing was kept.
func (a *Archiver) rewriteGroup(ctx context.Context, prefix string, group []RemoteSegment, base int64, cleaner *segment.BatchCleaner, res *remoteCleanResult) (*replacement, error) {
	next := group[len(group)-1].NextOffset
	if next-base > math.MaxInt32 {
		return nil, fmt.Errorf("tiering: remote clean: offsets [%d, %d) do not fit relative 32-bit offsets", base, next)
	}
	f, err := os.CreateTemp(a.cfg.RemoteClean.TempDir, "strata-remote-clean-*.log")
	if err != nil {
		return nil, fmt.Errorf("tiering: remote clean: %w", err)
	}
	r := &replacement{file: f, maxTs: -1, lastTs: -1}
	r.rs = RemoteSegment{BaseOffset: base, NextOffset: next}
	r.maxTsOff = r.rs.BaseOffset
	w := bufio.NewWriterSize(f, remoteCleanReadBuffer)
	var out []byte
	for i := range group {
		seg := &group[i]
		err := a.streamBatches(ctx, prefix, seg, &res.bytesRead, func(h segment.Header, b []byte) (bool, error) {
			out, err = cleaner.Filter(out[:0], b, h)
			if err != nil {
				return false, fmt.Errorf("tiering: remote clean %s at %d: %w", seg.ObjectName(), h.BaseOffset, err)
			}
			if len(out) == 0 {
				return true, nil
			}
			h2, err := segment.ParseHeader(out)
			if err != nil {
				return false, err
			}
			r.add(h2)
			if err := throttle(ctx, a.cfg.RemoteClean.Limiter, len(out)); err != nil {
				return false, err
			}
			if _, err := w.Write(out); err != nil {
				return false, fmt.Errorf("tiering: remote clean: write %s: %w", f.Name(), err)
			}
			r.size += int64(len(out))
			return true, nil
		})
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
			return nil, err
		}
	}
	if err := w.Flush(); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, fmt.Errorf("tiering: remote clean: write %s: %w", f.Name(), err)
	}
	if r.size == 0 {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, nil
	}
	if r.maxTs > r.lastTs {
		r.timeIndex = segment.AppendTimeIndexEntry(r.timeIndex, segment.TimeIndexEntry{Timestamp: r.maxTs, RelOffset: uint32(r.maxTsOff - r.rs.BaseOffset)})
	}
	r.rs.Size, r.rs.MaxTimestamp = r.size, r.maxTs
	return r, nil
}

// add accounts for a kept batch appended at r.size: index entries as the
// segment engine writes them (archiver_slice.go).
func (r *replacement) add(h segment.Header) {
	if h.MaxTimestamp > r.maxTs {
		r.maxTs, r.maxTsOff = h.MaxTimestamp, h.BaseOffset
	}
	if r.size > 0 && r.size-r.lastIdx >= remoteCleanIndexInterval {
		r.index = segment.AppendIndexEntry(r.index, segment.IndexEntry{RelOffset: uint32(h.BaseOffset - r.rs.BaseOffset), Position: uint32(r.size)})
		r.lastIdx = r.size
		if r.maxTs > r.lastTs {
			r.timeIndex = segment.AppendTimeIndexEntry(r.timeIndex, segment.TimeIndexEntry{Timestamp: r.maxTs, RelOffset: uint32(r.maxTsOff - r.rs.BaseOffset)})
			r.lastTs = r.maxTs
		}
	}
}

// putReplacement uploads r's objects under a fresh id as the uploader of
// epoch, copying the producer snapshot of its last source segment.
func (a *Archiver) putReplacement(ctx context.Context, m *Manifest, r *replacement, epoch int32) error {
	r.rs.Epoch, r.rs.ID = epoch, newObjectID()
	var snapshot []byte
	if r.snapshot != nil {
		rc, err := a.cfg.Store.Get(ctx, m.SegmentKey(r.snapshot, SuffixSnapshot), 0, -1)
		if err == nil {
			snapshot, err = io.ReadAll(rc)
			if cerr := rc.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return fmt.Errorf("tiering: remote clean: copy snapshot of %s: %w", r.snapshot.ObjectName(), err)
		}
	}
	r.rs.HasSnapshot = snapshot != nil
	// The aborted transactions of the source segments go with the
	// replacement.
	var txnIndex []byte
	for i := range m.Segments {
		src := &m.Segments[i]
		if !src.HasTxnIndex || src.BaseOffset < r.rs.BaseOffset || src.NextOffset > r.rs.NextOffset {
			continue
		}
		rc, err := a.cfg.Store.Get(ctx, m.SegmentKey(src, SuffixTxnIndex), 0, -1)
		var b []byte
		if err == nil {
			b, err = io.ReadAll(rc)
			if cerr := rc.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return fmt.Errorf("tiering: remote clean: copy transaction index of %s: %w", src.ObjectName(), err)
		}
		txnIndex = append(txnIndex, b...)
	}
	r.rs.HasTxnIndex = len(txnIndex) > 0
	put := func(suffix string, rd io.Reader, size int64) error {
		key := m.SegmentKey(&r.rs, suffix)
		if _, err := a.cfg.Store.Put(ctx, key, rd, size, PutCondition{}); err != nil {
			return fmt.Errorf("tiering: remote clean: upload %s: %w", key, err)
		}
		return nil
	}
	var body io.Reader = io.NewSectionReader(r.file, 0, r.size)
	if lim := a.cfg.RemoteClean.Limiter; lim != nil {
		body = &pacedReader{ctx: ctx, r: body, lim: lim}
	}
	if err := put(SuffixLog, body, r.size); err != nil {
		return err
	}
	if err := put(SuffixIndex, bytes.NewReader(r.index), int64(len(r.index))); err != nil {
		return err
	}
	if err := put(SuffixTimeIndex, bytes.NewReader(r.timeIndex), int64(len(r.timeIndex))); err != nil {
		return err
	}
	if snapshot != nil {
		if err := put(SuffixSnapshot, bytes.NewReader(snapshot), int64(len(snapshot))); err != nil {
			return err
		}
	}
	if r.rs.HasTxnIndex {
		if err := put(SuffixTxnIndex, bytes.NewReader(txnIndex), int64(len(txnIndex))); err != nil {
			return err
		}
	}
	r.rs.UploadedAt = a.cfg.Now().UTC()
	return nil
}

// streamBatches GETs seg's .log object and calls fn with every whole,
// CRC-checked batch below seg.NextOffset, in order, until fn says stop.
// *read counts the bytes read.
func (a *Archiver) streamBatches(ctx context.Context, prefix string, seg *RemoteSegment, read *int64, fn func(h segment.Header, b []byte) (bool, error)) error {
	key := prefix + seg.ObjectName() + SuffixLog
	rc, err := a.cfg.Store.Get(ctx, key, 0, seg.Size)
	if err != nil {
		return fmt.Errorf("tiering: remote clean: get %s: %w", key, err)
	}
	defer rc.Close()
	br := bufio.NewReaderSize(rc, remoteCleanReadBuffer)
	var buf []byte
	for pos := int64(0); pos < seg.Size; {
		if err := throttle(ctx, a.cfg.RemoteClean.Limiter, segment.LogOverhead); err != nil {
			return err
		}
		var lo [segment.LogOverhead]byte
		if _, err := io.ReadFull(br, lo[:]); err != nil {
			return fmt.Errorf("tiering: remote clean: %s at %d: %w", key, pos, truncated(err))
		}
		n := int64(binary.BigEndian.Uint32(lo[8:12]))
		size := segment.LogOverhead + n
		if n < segment.HeaderSize-segment.LogOverhead || pos+size > seg.Size {
			return fmt.Errorf("tiering: remote clean: %s at %d: %w: batch length %d, object size %d", key, pos, segment.ErrTruncated, n, seg.Size)
		}
		if int64(cap(buf)) < size {
			buf = make([]byte, size)
		}
		buf = buf[:size]
		copy(buf, lo[:])
		if err := throttle(ctx, a.cfg.RemoteClean.Limiter, int(n)); err != nil {
			return err
		}
		if _, err := io.ReadFull(br, buf[segment.LogOverhead:]); err != nil {
			return fmt.Errorf("tiering: remote clean: %s at %d: %w", key, pos, truncated(err))
		}
		*read += size
		pos += size
		h, err := segment.ValidateBatch(buf)
		if err != nil {
			return fmt.Errorf("tiering: remote clean: %s at %d: %w", key, pos-size, err)
		}
		if h.BaseOffset >= seg.NextOffset {
			return nil // the entry was cut there (lineage.go)
		}
		more, err := fn(h, buf)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// truncated turns an early EOF into io.ErrUnexpectedEOF.
func truncated(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// throttle waits for n bytes of the limiter, if any, asking for at most
// throttleChunk at a time.
func throttle(ctx context.Context, lim segment.IOLimiter, n int) error {
	if lim == nil {
		return nil
	}
	for n > 0 {
		k := min(n, throttleChunk)
		if err := lim.WaitN(ctx, k); err != nil {
			return fmt.Errorf("tiering: remote clean: throttle: %w", err)
		}
		n -= k
	}
	return nil
}

// pacedReader paces reads of r by the limiter: the replacements'
// uploads count as the cleaner's writes.
type pacedReader struct {
	ctx context.Context
	r   io.Reader
	lim segment.IOLimiter
}

func (t *pacedReader) Read(p []byte) (int, error) {
	p = p[:min(len(p), throttleChunk)]
	if err := throttle(t.ctx, t.lim, len(p)); err != nil {
		return 0, err
	}
	return t.r.Read(p)
}
