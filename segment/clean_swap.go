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
)

// Swapping cleaned segments in, crash-safely. A group of source segments
// S1..Sn (bases b1 < ... < bn) becomes one segment named b1:
//
//  1. The cleaner writes b1.log.cleaned, b1.index.cleaned and
//     b1.timeindex.cleaned and fsyncs them. A crash now leaves .cleaned
//     files that recovery deletes: the sources are untouched.
//  2. It writes the swap marker b1.swap atomically (temp, fsync, rename,
//     fsync directory): the commit point. It lists the new cleaner
//     checkpoint and b1..bn, in the checkpoint layout:
//
//	0               version
//	<n+1>           entry count
//	<checkpoint>    cleaner checkpoint once this swap is done
//	<b1>            the sources, ascending
//	...
//	<bn>
//
//  3. It completes the swap (completeSwap), each step idempotent: remove
//     the files of S2..Sn; rename each b1.*.cleaned over b1.*; raise the
//     cleaner checkpoint (its atomic write fsyncs the directory, so the
//     renames are durable); remove the marker; fsync the directory.
//
// Recovery (recoverSwaps, before segments are loaded) completes every
// marker it finds with the same steps, then deletes any .cleaned file
// left: one without a marker belongs to a swap that never committed.
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
// Close wait for it, appends do not) and mu only to replace the sources by
// the new segment in the segment list. The sources' descriptors close
// after file.delete.delay.ms, as for retention: a read that snapshotted a
// source before the swap keeps reading its (unlinked or renamed-over) file.

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

// sync fsyncs the three files at once, so that the file system can commit
// them together rather than one after another.
func (c *cleanedFiles) sync() error {
	var errs [3]error
	var wg sync.WaitGroup
	for i := range c.w {
		wg.Go(func() {
			if err := c.w[i].Sync(); err != nil {
				errs[i] = fmt.Errorf("segment: clean: fsync %s: %w", c.paths[i], err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs[:]...)
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

// cleanGroup rewrites one group of sources into a cleaned segment and swaps
// it in. ckpt is the cleaner checkpoint once it is swapped.
func (l *Log) cleanGroup(ctx context.Context, cc CleanConfig, f *batchFilter, g []cleanSource, cfg Config, ckpt int64, res *CleanResult) (err error) {
	base := g[0].snap.base
	cf, err := createCleaned(l.dir, base, l.opts.wrapFile)
	if err != nil {
		return err
	}
	owned := false // the files became the new segment's
	defer func() {
		var herr hookError
		switch {
		case owned:
		case errors.As(err, &herr):
			err = errors.Join(err, cf.close())
		default:
			err = errors.Join(err, cf.discard())
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
					return nil
				}
				return err
			}
			if !ok {
				break
			}
			n0 := len(out)
			if out, err = f.filter(out, b, h); err != nil {
				return fmt.Errorf("segment: clean %s: %w", src.snap.path, err)
			}
			if len(out)-n0 != len(b) || f.rewrote {
				unchanged = false
			}
			if len(out) > n0 {
				h2, err := ParseHeader(out[n0:])
				if err != nil {
					return fmt.Errorf("segment: clean: rewritten batch: %w", err)
				}
				st.add(tgt, h2.BaseOffset, h2.NextOffset(), h2.MaxTimestamp, int64(h2.RecordCount), int64(h2.Size()), cfg.IndexIntervalBytes)
			}
			if len(out) >= cc.IOBufferBytes {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		res.BytesRead += sc.read
		f.readBuf = sc.buf
	}
	if err := flush(); err != nil {
		return err
	}
	st.sealEntry(tgt)
	res.SegmentsRead += len(g)
	if len(g) == 1 && unchanged {
		res.GroupsSkipped++
		return nil
	}
	for i, entries := range [][]byte{nil, st.index, st.timeIndex} {
		if i > 0 && len(entries) > 0 {
			if _, err := cf.w[i].WriteAt(entries, 0); err != nil {
				return fmt.Errorf("segment: clean: write %s: %w", cf.paths[i], err)
			}
		}
	}
	if err := l.hookCrash("written"); err != nil {
		return err
	}
	if err := cf.sync(); err != nil {
		return err
	}
	// Keep the last source's modification time, which retention.ms falls
	// back to for segments without timestamps (Kafka does the same).
	if fi, err := g[len(g)-1].snap.f.Stat(); err == nil {
		if err := os.Chtimes(cf.paths[0], fi.ModTime(), fi.ModTime()); err != nil {
			return fmt.Errorf("segment: clean: %w", err)
		}
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
	swapped, err := l.swapCleaned(g, ns, ckpt)
	if err != nil {
		var herr hookError
		if !errors.As(err, &herr) && errors.Is(err, ErrPoisoned) {
			// Committed or unknown: recovery owns the files now.
			return hookError{err}
		}
		return err
	}
	if !swapped {
		res.GroupsSkipped++
		return nil
	}
	owned = true
	res.SegmentsWritten++
	res.BytesWritten += written
	return nil
}

// swapCleaned swaps ns in for the group's sources if they are still the
// log's, sealed and unchanged; swapped is false (nothing done) otherwise.
// An error after the commit point poisons the log.
func (l *Log) swapCleaned(g []cleanSource, ns *segment, ckpt int64) (swapped bool, err error) {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	j := -1
	if !l.mu.closed && l.mu.poison == nil {
		j = slices.Index(l.mu.segs, g[0].s)
	}
	valid := j >= 0 && j+len(g) < len(l.mu.segs)
	for k := 0; valid && k < len(g); k++ {
		s := l.mu.segs[j+k]
		valid = s == g[k].s && s.sealed && s.size == g[k].snap.size && s.next == g[k].snap.next
	}
	ckpt = max(ckpt, l.mu.cleanerCkpt)
	l.mu.Unlock()
	if !valid {
		return false, nil
	}
	if err := l.hookCrash("before-marker"); err != nil {
		return false, err
	}
	bases := make([]int64, len(g))
	for i, src := range g {
		bases[i] = src.snap.base
	}
	if err := writeFileAtomic(l.dir, swapMarkerName(ns.base), encodeSwapMarker(ckpt, bases)); err != nil {
		return false, l.poison(err)
	}
	if err := completeSwap(l.dir, bases, ckpt, l.hookCrash); err != nil {
		return false, l.poison(err)
	}
	l.mu.Lock()
	segs := slices.Clone(l.mu.segs[:j])
	segs = append(segs, ns)
	segs = append(segs, l.mu.segs[j+len(g):]...)
	l.mu.segs = segs
	l.mu.cleanerCkpt = ckpt
	l.mu.Unlock()
	old := make([]*segment, len(g))
	for i, src := range g {
		old[i] = src.s
	}
	l.closeLater(old)
	return true, nil
}

// completeSwap carries out step 3 of a committed swap; every step may be
// repeated after a crash. hook, if set, is called between steps (tests
// crash there).
func completeSwap(dir string, bases []int64, ckpt int64, hook func(string) error) error {
	step := func(point string) error {
		if hook == nil {
			return nil
		}
		return hook(point)
	}
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
	// The checkpoint's atomic write fsyncs the directory, which makes the
	// renames above durable too, before the marker goes.
	if err := writeOffsetCheckpoint(dir, cleanerOffsetFile, ckpt); err != nil {
		return err
	}
	if err := step("checkpointed"); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(dir, swapMarkerName(bases[0]))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("segment: swap: %w", err)
	}
	return syncDir(dir)
}

func swapMarkerName(base int64) string { return segmentName(base) + SwapSuffix }

func encodeSwapMarker(ckpt int64, bases []int64) []byte {
	b := fmt.Appendf(nil, "%d\n%d\n%d\n", checkpointVersion, len(bases)+1, ckpt)
	for _, base := range bases {
		b = fmt.Appendf(b, "%d\n", base)
	}
	return b
}

// readSwapMarker parses a swap marker. The marker is written atomically, so
// one that does not parse means damage: ErrBadCheckpoint.
func readSwapMarker(dir, name string, base int64) (ckpt int64, bases []int64, err error) {
	lines, _, err := readCheckpointLines(dir, name)
	if err != nil {
		return 0, nil, err
	}
	if len(lines) < 2 {
		return 0, nil, fmt.Errorf("%w: %s: %d entries", ErrBadCheckpoint, name, len(lines))
	}
	vals := make([]int64, len(lines))
	for i, s := range lines {
		if vals[i], err = strconv.ParseInt(s, 10, 64); err != nil || vals[i] < 0 {
			return 0, nil, fmt.Errorf("%w: %s: %q", ErrBadCheckpoint, name, s)
		}
	}
	bases = vals[1:]
	for i, b := range bases {
		if (i == 0 && b != base) || (i > 0 && b <= bases[i-1]) {
			return 0, nil, fmt.Errorf("%w: %s: sources %v", ErrBadCheckpoint, name, bases)
		}
	}
	return vals[0], bases, nil
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
		mck, bases, err := readSwapMarker(l.dir, swapMarkerName(base), base)
		if err != nil {
			return 0, 0, false, fmt.Errorf("segment: recover: %w", err)
		}
		ckpt = max(ckpt, mck)
		if err := completeSwap(l.dir, bases, ckpt, nil); err != nil {
			return 0, 0, false, err
		}
		l.recovery.CompletedSwaps = append(l.recovery.CompletedSwaps, base)
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
