package segment

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/stratastream/strata/segment/atomicfile"
)

// Swapping cleaned segments in, crash-safely. A cleaning rewrites groups
// of source segments; a group S1..Sn (bases b1 < ... < bn) becomes one
// segment named b1. The groups of a cleaning are swapped in together, a
// batch of up to maxSwapGroups groups or maxSwapBytes of cleaned data at a
// time, with one marker and one checkpoint write for the whole batch:
//
//  1. The cleaner writes each group's b1.log.cleaned, b1.index.cleaned and
//     b1.timeindex.cleaned and starts their fsync in the background (the
//     disk writes them while the next group is rewritten); the swap waits
//     for the fsyncs of the whole batch. A crash until the commit point
//     below leaves .cleaned files that recovery deletes: the sources are
//     untouched.
//  2. Under flushMu it drops (and deletes the files of) every group whose
//     sources retention or truncation changed meanwhile, then writes the
//     swap marker, named after the first kept group (<b1>.swap), and the
//     new cleaner checkpoint as temporary files, fsyncs the two together,
//     renames the marker into place and fsyncs the directory: the commit
//     point, for every group of the batch at once. The marker lists the
//     checkpoint and each group's sources (its layout is in doc.go). Both
//     are written only under flushMu: the checkpoint's temporary file is
//     the one every writer of the checkpoint uses.
//  3. It completes the swap (completeSwap), each step idempotent: for each
//     group, remove the files of S2..Sn and rename each b1.*.cleaned over
//     b1.*; then rename the checkpoint into place and fsync the directory
//     (which makes the renames durable too); remove the marker; fsync the
//     directory.
//
// Recovery (recoverSwaps, before segments are loaded) completes every
// marker it finds, of either layout (an older build wrote one marker per
// group), with the same steps, writing the checkpoint afresh, then deletes
// any .cleaned file left: one no marker names belongs to a swap that never
// committed.
//
// A cleaned segment has gaps: batches that were removed leave holes in the
// offsets, inside the segment and before the next one. Recovery accepts
// gaps in segments whose base is below the cleaner checkpoint (everything
// there may have been cleaned), and nowhere else, so that a segment that
// lost its tail is still told apart from a cleaned one. The checkpoint is
// raised in step 3 before the marker goes, so it covers every cleaned
// segment on disk.
//
// In memory the swap holds flushMu (so retention, truncation, flushes and
// Close wait for it, appends do not) from step 2 on, and mu only to check
// the sources and to replace them by the new segments in the segment list.
// The sources' descriptors close after file.delete.delay.ms, as for
// retention: a read that snapshotted a source before the swap keeps reading
// its (unlinked or renamed-over) file.

// A batch of cleaned segments is swapped in once it holds maxSwapGroups
// groups or maxSwapBytes of cleaned data. The bounds limit the files held
// open (three a group), the data waiting for the batch's fsync, and the
// work a crash or a cancellation throws away.
const (
	maxSwapGroups = 32
	maxSwapBytes  = 1 << 30
)

// cleanedFiles are the open files of a cleaned segment being written.
type cleanedFiles struct {
	paths [3]string // .log, .index, .timeindex with CleanedSuffix
	f     [3]*os.File
	w     [3]File
}

var segmentSuffixes = [3]string{LogSuffix, IndexSuffix, TimeIndexSuffix}

func createCleaned(dir string, base int64, wrap func(string, *os.File) File) (*cleanedFiles, error) {
	c := &cleanedFiles{}
	name := filepath.Join(dir, segmentName(base))
	for i, suf := range segmentSuffixes {
		c.paths[i] = name + suf + CleanedSuffix
		f, err := os.OpenFile(c.paths[i], os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("segment: clean: %w", err), c.discard())
		}
		c.f[i], c.w[i] = f, wrap(c.paths[i], f)
	}
	return c, nil
}

// sync fsyncs the three files at once.
func (c *cleanedFiles) sync() error {
	syncs := make([]func() error, len(c.w))
	for i, w := range c.w {
		syncs[i] = func() error {
			if err := w.Sync(); err != nil {
				return fmt.Errorf("segment: clean: fsync %s: %w", c.paths[i], err)
			}
			return nil
		}
	}
	return syncTogether(syncs)
}

// close closes the files.
func (c *cleanedFiles) close() error {
	var errs []error
	for _, w := range c.w {
		if w != nil {
			if err := w.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
				errs = append(errs, fmt.Errorf("segment: clean: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// discard closes and removes the files.
func (c *cleanedFiles) discard() error {
	errs := []error{c.close()}
	for _, p := range c.paths {
		if p == "" {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("segment: clean: %w", err))
		}
	}
	return errors.Join(errs...)
}

// syncTogether runs the fsyncs at once, so that the file system can commit
// them together rather than one after another.
func syncTogether(syncs []func() error) error {
	errs := make([]error, len(syncs))
	var wg sync.WaitGroup
	for i, fn := range syncs {
		wg.Go(func() { errs[i] = fn() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// hookError marks an error that must leave the cleaned files where they
// are: from the test hook (as a crash would leave them), or after the swap
// committed (recovery owns them then).
type hookError struct{ err error }

func (e hookError) Error() string { return e.err.Error() }
func (e hookError) Unwrap() error { return e.err }

func (l *Log) hookCrash(point string) error {
	if err := l.hook(point); err != nil {
		return hookError{err}
	}
	return nil
}

// cleanedSegment is a group's cleaned segment, written and waiting for its
// swap.
type cleanedSegment struct {
	srcs    []cleanSource
	files   *cleanedFiles
	seg     *segment // the new segment, on files
	ckpt    int64    // the cleaner checkpoint once it is swapped in
	written int64    // bytes of its .log

	synced  chan struct{} // closed once the fsync of files is done (nil: not started)
	syncErr error
}

// startSync fsyncs the files in the background, so that the disk writes
// them while the next group is rewritten; waitSync waits for the result.
func (cs *cleanedSegment) startSync() {
	cs.synced = make(chan struct{})
	go func() {
		defer close(cs.synced)
		cs.syncErr = cs.files.sync()
	}()
}

func (cs *cleanedSegment) waitSync() error {
	if cs.synced == nil {
		return nil
	}
	<-cs.synced
	return cs.syncErr
}

// swapBatch gathers cleaned segments to swap in together.
type swapBatch struct {
	segs  []*cleanedSegment
	bytes int64
}

func (b *swapBatch) add(cs *cleanedSegment) {
	b.segs = append(b.segs, cs)
	b.bytes += cs.written
}

func (b *swapBatch) full() bool { return len(b.segs) >= maxSwapGroups || b.bytes >= maxSwapBytes }

// take empties the batch and returns what it held.
func (b *swapBatch) take() []*cleanedSegment {
	segs := b.segs
	*b = swapBatch{}
	return segs
}

// releaseCleaned lets go of cleaned segments that were not swapped in
// because of err, and returns err with any error of doing so. Their files
// are removed, unless err is a hookError (a crash injected by the test
// hook, or a failure from the commit point on): then they are only closed
// and left for recovery, as a crash would leave them.
func releaseCleaned(segs []*cleanedSegment, err error) error {
	var herr hookError
	keep := errors.As(err, &herr)
	for _, cs := range segs {
		// Before the files close; an fsync error no longer matters for
		// files let go (recovery removes uncommitted ones).
		_ = cs.waitSync()
		if keep {
			err = errors.Join(err, cs.files.close())
		} else {
			err = errors.Join(err, cs.files.discard())
		}
	}
	return err
}

// cleanGroups rewrites the groups into cleaned segments and swaps them in,
// a batch at a time. end is the mapped end: the last batch's swap writes
// it as the cleaner checkpoint, so that groups after the last rewritten
// one (unchanged, or abandoned) need no checkpoint write of their own.
func (l *Log) cleanGroups(ctx context.Context, cc CleanConfig, f *batchFilter, groups [][]cleanSource, p cleanPlan, end int64, res *CleanResult) (err error) {
	var batch swapBatch
	defer func() {
		if segs := batch.take(); len(segs) > 0 {
			err = releaseCleaned(segs, err)
		}
	}()
	for _, g := range groups {
		if err := ctx.Err(); err != nil {
			return err
		}
		ckpt := max(p.firstDirty, min(g[len(g)-1].snap.next, end))
		cs, err := l.cleanGroup(ctx, cc, f, g, p.cfg, ckpt, res)
		if err != nil {
			return err
		}
		if cs == nil {
			continue
		}
		batch.add(cs)
		if batch.full() {
			if err := l.swapCleaned(batch.take(), 0 /* final */, res); err != nil {
				return err
			}
		}
	}
	return l.swapCleaned(batch.take(), end, res)
}

// cleanGroup rewrites one group of sources into a cleaned segment, or
// returns nil when there is nothing to swap: the group is one segment that
// came out unchanged, or retention or truncation changed a source while it
// was read (both count in res.GroupsSkipped). ckpt is the cleaner
// checkpoint once it is swapped in.
func (l *Log) cleanGroup(ctx context.Context, cc CleanConfig, f *batchFilter, g []cleanSource, cfg Config, ckpt int64, res *CleanResult) (_ *cleanedSegment, err error) {
	base := g[0].snap.base
	cf, err := createCleaned(l.dir, base, l.opts.wrapFile)
	if err != nil {
		return nil, err
	}
	owned := false // the files went to the returned cleanedSegment
	defer func() {
		if !owned {
			err = releaseCleaned([]*cleanedSegment{{files: cf}}, err)
		}
	}()

	tgt := &segment{base: base, next: base, maxTs: -1, maxTsOffset: base, lastTimeTs: -1}
	var st batchEntries
	st.start(tgt)
	if f.outBuf == nil {
		f.outBuf = make([]byte, 0, cc.IOBufferBytes+HeaderSize)
	}
	out := f.outBuf[:0]
	defer func() { f.outBuf = out[:0] }() // for the next group (it may have grown)
	var written int64
	flush := func() error {
		if len(out) == 0 {
			return nil
		}
		if err := throttle(ctx, cc.Limiter, len(out), cc.IOBufferBytes); err != nil {
			return err
		}
		if _, err := cf.w[0].WriteAt(out, written); err != nil {
			return fmt.Errorf("segment: clean: write %s: %w", cf.paths[0], err)
		}
		written += int64(len(out))
		out = out[:0]
		return nil
	}
	unchanged := true
	for _, src := range g {
		sc := newBatchScanner(ctx, src.snap, cc, f.readBuf)
		for {
			h, b, ok, err := sc.next()
			if err != nil {
				if l.sourceChanged(src) && ctx.Err() == nil {
					res.GroupsSkipped++ // retention or truncation got there first
					f.txn.lost = true   // its transactions' batches were not all read
					return nil, nil
				}
				return nil, err
			}
			if !ok {
				break
			}
			n0 := len(out)
			if out, err = f.filter(out, b, h); err != nil {
				return nil, fmt.Errorf("segment: clean %s: %w", src.snap.path, err)
			}
			if len(out)-n0 != len(b) || f.rewrote {
				unchanged = false
			}
			if len(out) > n0 {
				h2, err := ParseHeader(out[n0:])
				if err != nil {
					return nil, fmt.Errorf("segment: clean: rewritten batch: %w", err)
				}
				st.add(tgt, h2.BaseOffset, h2.NextOffset(), h2.MaxTimestamp, int64(h2.RecordCount), int64(h2.Size()), cfg.IndexIntervalBytes)
			}
			if len(out) >= cc.IOBufferBytes {
				if err := flush(); err != nil {
					return nil, err
				}
			}
		}
		res.BytesRead += sc.read
		f.readBuf = sc.buf
	}
	if err := flush(); err != nil {
		return nil, err
	}
	st.sealEntry(tgt)
	res.SegmentsRead += len(g)
	if len(g) == 1 && unchanged {
		res.GroupsSkipped++
		return nil, nil
	}
	for i, entries := range [][]byte{nil, st.index, st.timeIndex} {
		if i > 0 && len(entries) > 0 {
			if _, err := cf.w[i].WriteAt(entries, 0); err != nil {
				return nil, fmt.Errorf("segment: clean: write %s: %w", cf.paths[i], err)
			}
		}
	}
	// Keep the last source's modification time, which retention.ms falls
	// back to for segments without timestamps (Kafka does the same). Set
	// before the fsync, which makes it durable with the data.
	if fi, err := g[len(g)-1].snap.f.Stat(); err == nil {
		if err := os.Chtimes(cf.paths[0], fi.ModTime(), fi.ModTime()); err != nil {
			return nil, fmt.Errorf("segment: clean: %w", err)
		}
	}
	if err := l.hookCrash("written"); err != nil {
		return nil, err
	}

	name := filepath.Join(l.dir, segmentName(base))
	ns := &segment{
		base: base, logPath: name + LogSuffix, f: cf.f[0], w: cf.w[0],
		index:     entryFile{path: name + IndexSuffix, f: cf.f[1], w: cf.w[1], entrySize: IndexEntrySize},
		timeIndex: entryFile{path: name + TimeIndexSuffix, f: cf.f[2], w: cf.w[2], entrySize: TimeIndexEntrySize},
		created:   l.opts.now(), sealed: true, indexSynced: true,
	}
	st.publish(ns)
	ns.index.mem, ns.timeIndex.mem = nil, nil // sealed: searched in the file
	ns.index.written, ns.timeIndex.written = ns.index.n, ns.timeIndex.n
	owned = true
	cs := &cleanedSegment{srcs: g, files: cf, seg: ns, ckpt: ckpt, written: written}
	cs.startSync()
	return cs, nil
}

// swapCleaned waits for the fsync of the cleaned segments and swaps in
// those whose sources are still the log's, sealed and unchanged (the others count in
// res.GroupsSkipped and their files are removed). final, when not 0, is
// the checkpoint the cleaning ends at (its mapped end; this is its last
// batch): the swap writes it instead of its own segments' checkpoint, as
// raiseCleanerCheckpoint would right after, unless the log end is below it.
// An error from the commit point on poisons the log.
func (l *Log) swapCleaned(segs []*cleanedSegment, final int64, res *CleanResult) error {
	if len(segs) == 0 {
		return nil
	}
	var errs []error
	for _, cs := range segs {
		errs = append(errs, cs.waitSync())
	}
	if err := errors.Join(errs...); err != nil {
		return releaseCleaned(segs, err)
	}

	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	keep, drop, ckpt := l.checkSourcesLocked(segs, final)
	res.GroupsSkipped += len(drop)
	if err := releaseCleaned(drop, nil); err != nil {
		return releaseCleaned(keep, err)
	}
	if len(keep) == 0 {
		return nil
	}
	if err := l.hookCrash("before-marker"); err != nil {
		return releaseCleaned(keep, err)
	}
	m := swapMarker{ckpt: ckpt}
	for _, cs := range keep {
		bases := make([]int64, len(cs.srcs))
		for i, src := range cs.srcs {
			bases[i] = src.snap.base
		}
		m.groups = append(m.groups, bases)
	}
	if err := commitSwap(l.dir, m, l.hookCrash); err != nil {
		// Committed or unknown: recovery owns the files now.
		return releaseCleaned(keep, hookError{l.poison(err)})
	}

	first := make(map[*segment]*cleanedSegment, len(keep))
	var old []*segment
	for _, cs := range keep {
		first[cs.srcs[0].s] = cs
		for _, src := range cs.srcs {
			old = append(old, src.s)
		}
		res.SegmentsWritten++
		res.BytesWritten += cs.written
	}
	l.mu.Lock()
	updated := make([]*segment, 0, len(l.mu.segs))
	for i := 0; i < len(l.mu.segs); {
		s := l.mu.segs[i]
		if cs, ok := first[s]; ok {
			updated = append(updated, cs.seg)
			i += len(cs.srcs)
			continue
		}
		updated = append(updated, s)
		i++
	}
	l.mu.segs = updated
	l.mu.cleanerCkpt = ckpt
	l.mu.Unlock()
	l.closeLater(old)
	return nil
}

// checkSourcesLocked splits segs into those whose sources are still the
// log's, consecutive, sealed and as they were read (keep), and the others
// (drop), and returns the cleaner checkpoint once keep is swapped in:
// final if keep is not empty and final is at or below the log end (see
// swapCleaned). Caller holds flushMu.
func (l *Log) checkSourcesLocked(segs []*cleanedSegment, final int64) (keep, drop []*cleanedSegment, ckpt int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ckpt = l.mu.cleanerCkpt
	for _, cs := range segs {
		g := cs.srcs
		j := -1
		if !l.mu.closed && l.mu.poison == nil {
			j = slices.Index(l.mu.segs, g[0].s)
		}
		valid := j >= 0 && j+len(g) < len(l.mu.segs)
		for k := 0; valid && k < len(g); k++ {
			s := l.mu.segs[j+k]
			valid = s == g[k].s && s.sealed && s.size == g[k].snap.size && s.next == g[k].snap.next
		}
		if valid {
			keep = append(keep, cs)
			ckpt = max(ckpt, cs.ckpt)
		} else {
			drop = append(drop, cs)
		}
	}
	if len(keep) > 0 && final > ckpt && final <= l.mu.logEnd {
		ckpt = final
	}
	return keep, drop, ckpt
}

// commitSwap carries out steps 2 (from the marker on) and 3 of a swap.
// hook, if set, is called at the points of the swap (tests crash there).
func commitSwap(dir string, m swapMarker, hook func(string) error) (err error) {
	marker, err := atomicfile.Create(filepath.Join(dir, swapMarkerName(m.groups[0][0])), 0o644)
	if err != nil {
		return fmt.Errorf("segment: swap: %w", err)
	}
	defer func() { err = errors.Join(err, marker.Abort()) }()
	ckpt, err := atomicfile.Create(filepath.Join(dir, cleanerOffsetFile), 0o644)
	if err != nil {
		return fmt.Errorf("segment: swap: %w", err)
	}
	defer func() { err = errors.Join(err, ckpt.Abort()) }()
	if _, err := marker.Write(m.encode()); err != nil {
		return fmt.Errorf("segment: swap: %w", err)
	}
	if _, err := ckpt.Write(offsetCheckpointData(m.ckpt)); err != nil {
		return fmt.Errorf("segment: swap: %w", err)
	}
	if err := syncTogether([]func() error{marker.Sync, ckpt.Sync}); err != nil {
		return fmt.Errorf("segment: swap: %w", err)
	}
	if err := marker.Commit(); err != nil {
		return fmt.Errorf("segment: swap: %w", err)
	}
	if hook != nil {
		if err := hook("committed"); err != nil {
			return err
		}
	}
	return completeSwap(dir, m, func() error {
		if err := ckpt.Commit(); err != nil {
			return fmt.Errorf("segment: swap: %w", err)
		}
		return nil
	}, hook)
}

// completeSwap carries out step 3 of a committed swap; every step may be
// repeated after a crash. commitCkpt puts the new cleaner checkpoint in
// place and fsyncs the directory; nil writes m.ckpt afresh. hook, if set,
// is called between steps (tests crash there).
func completeSwap(dir string, m swapMarker, commitCkpt func() error, hook func(string) error) error {
	step := func(point string) error {
		if hook == nil {
			return nil
		}
		return hook(point)
	}
	for _, bases := range m.groups {
		for _, b := range bases[1:] {
			if err := removeSegmentFiles(dir, b); err != nil {
				return err
			}
		}
		if err := step("sources-removed"); err != nil {
			return err
		}
		name := filepath.Join(dir, segmentName(bases[0]))
		for _, suf := range segmentSuffixes {
			err := os.Rename(name+suf+CleanedSuffix, name+suf)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("segment: swap: %w", err)
			}
			if err := step("renamed" + suf); err != nil {
				return err
			}
		}
	}
	// The checkpoint's commit fsyncs the directory, which makes the
	// renames above durable too, before the marker goes.
	if commitCkpt == nil {
		commitCkpt = func() error { return writeOffsetCheckpoint(dir, cleanerOffsetFile, m.ckpt) }
	}
	if err := commitCkpt(); err != nil {
		return err
	}
	if err := step("checkpointed"); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(dir, swapMarkerName(m.groups[0][0]))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("segment: swap: %w", err)
	}
	return syncDir(dir)
}

func swapMarkerName(base int64) string { return segmentName(base) + SwapSuffix }

// swapMarker is what a .swap marker holds (its layout is in doc.go): the
// cleaner checkpoint once the swap is done and, for each cleaned segment,
// the bases of its sources, the first being its own.
type swapMarker struct {
	ckpt   int64
	groups [][]int64
}

// Versions of the swap marker's layout (doc.go). Never change them.
const (
	swapMarkerOneGroup = 0 // one group, a source a line (older builds)
	swapMarkerGroups   = 1 // a group a line
)

func (m swapMarker) encode() []byte {
	b := fmt.Appendf(nil, "%d\n%d\n%d\n", swapMarkerGroups, len(m.groups)+1, m.ckpt)
	for _, g := range m.groups {
		for i, base := range g {
			if i > 0 {
				b = append(b, ' ')
			}
			b = strconv.AppendInt(b, base, 10)
		}
		b = append(b, '\n')
	}
	return b
}

// readSwapMarker reads the swap marker name, which must name the segment
// base. The marker is written atomically, so one that does not parse
// means damage: ErrBadCheckpoint.
func readSwapMarker(dir, name string, base int64) (swapMarker, error) {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return swapMarker{}, fmt.Errorf("segment: swap marker: %w", err)
	}
	return decodeSwapMarker(name, data, base)
}

// decodeSwapMarker parses the contents of the swap marker name (of either
// layout), which must name the segment base: every offset is a
// non-negative decimal, there is at least one group, the groups' bases
// all ascend, and the first is base.
func decodeSwapMarker(name string, data []byte, base int64) (swapMarker, error) {
	version, lines, err := parseVersionedLines(name, data, swapMarkerOneGroup, swapMarkerGroups)
	if err != nil {
		return swapMarker{}, err
	}
	if len(lines) < 2 {
		return swapMarker{}, fmt.Errorf("%w: %s: %d entries", ErrBadCheckpoint, name, len(lines))
	}
	parse := func(s string) (int64, error) {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("%w: %s: %q", ErrBadCheckpoint, name, s)
		}
		return v, nil
	}
	var m swapMarker
	if m.ckpt, err = parse(lines[0]); err != nil {
		return swapMarker{}, err
	}
	rows := [][]string{lines[1:]} // one group, a base a line
	if version == swapMarkerGroups {
		rows = rows[:0]
		for _, line := range lines[1:] {
			rows = append(rows, strings.Fields(line))
		}
	}
	prev := int64(-1)
	for _, row := range rows {
		if len(row) == 0 {
			return swapMarker{}, fmt.Errorf("%w: %s: empty group", ErrBadCheckpoint, name)
		}
		g := make([]int64, len(row))
		for i, s := range row {
			if g[i], err = parse(s); err != nil {
				return swapMarker{}, err
			}
			if (prev < 0 && g[i] != base) || g[i] <= prev {
				return swapMarker{}, fmt.Errorf("%w: %s: sources %v", ErrBadCheckpoint, name, lines[1:])
			}
			prev = g[i]
		}
		m.groups = append(m.groups, g)
	}
	return m, nil
}

// raiseCleanerCheckpoint moves the cleaner checkpoint up to off.
func (l *Log) raiseCleanerCheckpoint(off int64) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	cur, closed, end := l.mu.cleanerCkpt, l.mu.closed, l.mu.logEnd
	l.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if off <= cur || off > end {
		return nil
	}
	return l.storeCleanerCheckpointLocked(off)
}

// storeCleanerCheckpointLocked writes the cleaner checkpoint off, then makes
// it the log's. Caller holds flushMu.
func (l *Log) storeCleanerCheckpointLocked(off int64) error {
	if err := writeOffsetCheckpoint(l.dir, cleanerOffsetFile, off); err != nil {
		return l.poison(err)
	}
	l.mu.Lock()
	l.mu.cleanerCkpt = off
	l.mu.Unlock()
	return nil
}

// lowerCleanerCheckpointLocked brings the cleaner checkpoint down to off
// when the log end moved below it. Caller holds flushMu.
func (l *Log) lowerCleanerCheckpointLocked(off int64) error {
	l.mu.Lock()
	cur := l.mu.cleanerCkpt
	l.mu.Unlock()
	if cur <= off {
		return nil
	}
	return l.storeCleanerCheckpointLocked(off)
}

// recoverSwaps completes committed swaps and removes the files of
// uncommitted ones, then loads the cleaner checkpoint. gapsBelow is the
// offset below which segments may have gaps: the checkpoint, or every
// offset when the checkpoint does not parse (then it is rebuilt as the log
// end once the log is loaded: compaction of what was dirty is given up
// rather than risk cutting cleaned segments).
func (l *Log) recoverSwaps() (ckpt, gapsBelow int64, rebuild bool, err error) {
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return 0, 0, false, fmt.Errorf("segment: recover: %w", err)
	}
	ckpt, _, err = l.readRebuildable(cleanerOffsetFile)
	if err != nil {
		return 0, 0, false, err
	}
	rebuild = slices.Contains(l.recovery.RebuiltCheckpoints, cleanerOffsetFile)
	var markers []int64
	var cleaned []string
	for _, e := range ents {
		name := e.Name()
		if stem, ok := strings.CutSuffix(name, SwapSuffix); ok {
			if base, err := parseOffsetStem(stem); err == nil {
				markers = append(markers, base)
			}
		} else if strings.HasSuffix(name, CleanedSuffix) {
			cleaned = append(cleaned, name)
		}
	}
	slices.Sort(markers)
	for _, base := range markers {
		m, err := readSwapMarker(l.dir, swapMarkerName(base), base)
		if err != nil {
			return 0, 0, false, fmt.Errorf("segment: recover: %w", err)
		}
		ckpt = max(ckpt, m.ckpt)
		m.ckpt = ckpt
		if err := completeSwap(l.dir, m, nil, nil); err != nil {
			return 0, 0, false, err
		}
		for _, g := range m.groups {
			l.recovery.CompletedSwaps = append(l.recovery.CompletedSwaps, g[0])
		}
	}
	for _, name := range cleaned {
		if _, err := os.Stat(filepath.Join(l.dir, name)); errors.Is(err, fs.ErrNotExist) {
			continue // renamed by a swap just completed
		}
		if err := l.removeLeftover(name); err != nil {
			return 0, 0, false, err
		}
	}
	gapsBelow = ckpt
	if rebuild {
		gapsBelow = int64(^uint64(0) >> 1)
	}
	return ckpt, gapsBelow, rebuild, nil
}
