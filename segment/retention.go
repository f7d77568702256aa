package segment

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"time"
)

// EnforceRetention rolls the active segment when it is older than segment.ms
// (so idle partitions roll too), then deletes whole sealed segments, oldest
// first, while one of these holds for the oldest: its largest timestamp (or,
// without timestamps, its file's modification time) is older than
// retention.ms; the log is larger than retention.bytes by at least the
// segment's size; or it lies wholly below the log start offset. Only
// segments below the high watermark are deleted, never the active one, and
// the WithDeleteVeto function is asked first (except for segments below the
// log start offset): a veto keeps that segment and all newer ones. It returns
// the deleted segments.
func (l *Log) EnforceRetention() (deleted []SegmentInfo, err error) {
	if err := l.maybeRollByTime(); err != nil {
		return nil, err
	}
	cfg := l.config()
	nowMs := l.opts.now().UnixMilli()

	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return nil, ErrClosed
	}
	segs := slices.Clone(l.mu.segs)
	infos := make([]SegmentInfo, len(segs))
	var total int64
	for i, s := range segs {
		infos[i] = s.info()
		total += s.size
	}
	hw, logStart := l.highWatermarkLocked(), l.mu.logStart
	l.mu.Unlock()

	var epochs []EpochEntry
	if l.opts.veto != nil {
		epochs = l.epochs.Entries()
	}
	diff := total - cfg.RetentionBytes
	var doomed []*segment
	for i, info := range infos[:len(infos)-1] {
		if info.NextOffset > hw {
			break
		}
		// Wholly below the log start when the next segment begins at or
		// below it (Kafka's deleteLogStartOffsetBreachedSegments): a
		// segment the cleaner emptied ends where it begins, and still
		// holds the offsets up to the next segment.
		belowStart := infos[i+1].BaseOffset <= logStart
		bySize := cfg.RetentionBytes >= 0 && diff-info.Size >= 0
		byTime := false
		if cfg.RetentionMs >= 0 {
			ts, err := retentionTimestamp(info)
			if err != nil {
				return nil, err
			}
			byTime = ts < nowMs-cfg.RetentionMs
		}
		if !belowStart && !bySize && !byTime {
			break
		}
		if !belowStart && l.opts.veto != nil && !l.opts.veto(info.withEpochs(epochs)) {
			break
		}
		diff -= info.Size
		doomed = append(doomed, segs[i])
	}
	if len(doomed) == 0 {
		return nil, nil
	}
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	return l.deleteOldestLocked(doomed)
}

// retentionTimestamp is the time retention.ms is measured from: the
// segment's largest timestamp, or its file's modification time when its
// batches carry none.
func retentionTimestamp(info SegmentInfo) (int64, error) {
	if info.MaxTimestamp >= 0 {
		return info.MaxTimestamp, nil
	}
	fi, err := os.Stat(info.LogPath)
	if err != nil {
		return 0, fmt.Errorf("segment: retention: %w", err)
	}
	return fi.ModTime().UnixMilli(), nil
}

// maybeRollByTime rolls a non-empty active segment older than segment.ms.
func (l *Log) maybeRollByTime() error {
	l.appendMu.Lock()
	if err := l.writable(); err != nil {
		l.appendMu.Unlock()
		return err
	}
	cfg, now, s := l.config(), l.opts.now(), l.active
	var sealed *SegmentInfo
	if s.size > 0 && now.Sub(s.created).Milliseconds() > cfg.SegmentMs {
		info, err := l.rollLocked(cfg, now)
		if err != nil {
			l.appendMu.Unlock()
			return err
		}
		sealed = &info
	}
	l.appendMu.Unlock()
	l.fireOnSeal(sealed)
	return nil
}

// SetLogStartOffset moves the log start forward to offset (DeleteRecords,
// or remote retention deleting what the store held below it) and
// checkpoints it before returning. Sealed segments wholly below it are
// deleted, and the leader epochs below it cut: the records are gone from
// the log, wherever they were kept. Moving it backwards is a no-op;
// beyond the log end is ErrOffsetOutOfRange.
func (l *Log) SetLogStartOffset(offset int64) error {
	return l.setLogStart(offset, true)
}

// SetLocalLogStartOffset moves the log start forward to offset as local
// retention moves it: a follower following its leader's local log start.
// Unlike SetLogStartOffset it keeps the leader epochs below offset when
// the log keeps those of deleted segments (WithKeepEpochs: a tiered log,
// whose records below the local start are still the log's, in the
// store), and cuts them otherwise.
func (l *Log) SetLocalLogStartOffset(offset int64) error {
	return l.setLogStart(offset, !l.opts.keepsEpochs())
}

func (l *Log) setLogStart(offset int64, cutEpochs bool) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	switch {
	case l.mu.closed:
		l.mu.Unlock()
		return ErrClosed
	case offset <= l.mu.logStart:
		l.mu.Unlock()
		return nil
	case offset > l.mu.logEnd:
		err := fmt.Errorf("%w: log start %d beyond log end %d", ErrOffsetOutOfRange, offset, l.mu.logEnd)
		l.mu.Unlock()
		return err
	}
	l.mu.logStart = offset
	var doomed []*segment
	for i, s := range l.mu.segs[:len(l.mu.segs)-1] {
		if l.mu.segs[i+1].base > offset { // as in recovery: an emptied segment holds offsets up to the next base
			break
		}
		doomed = append(doomed, s)
	}
	l.mu.Unlock()
	if err := writeOffsetCheckpoint(l.dir, logStartOffsetFile, offset); err != nil {
		return l.poison(err)
	}
	if cutEpochs {
		if err := l.epochs.truncateFromStart(offset); err != nil {
			return err
		}
	}
	_, err := l.deleteOldestLocked(doomed)
	return err
}

// deleteOldestLocked removes doomed from the front of the segment list (as
// many as are still its oldest, non-active segments), moves the log start
// up, unlinks their files and schedules their descriptors to close after
// file.delete.delay.ms. Caller holds flushMu.
func (l *Log) deleteOldestLocked(doomed []*segment) ([]SegmentInfo, error) {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return nil, ErrClosed
	}
	n := 0
	for n < len(doomed) && n < len(l.mu.segs)-1 && l.mu.segs[n] == doomed[n] {
		n++
	}
	doomed = doomed[:n]
	if n == 0 {
		l.mu.Unlock()
		return nil, nil
	}
	l.mu.segs = slices.Clone(l.mu.segs[n:])
	oldStart := l.mu.logStart
	l.mu.logStart = max(l.mu.logStart, l.mu.segs[0].base)
	newStart := l.mu.logStart
	infos := make([]SegmentInfo, n)
	for i, s := range doomed {
		infos[i] = s.info()
	}
	l.mu.Unlock()

	var errs []error
	for _, s := range doomed {
		errs = append(errs, s.remove())
	}
	l.closeLater(doomed)
	if newStart != oldStart {
		if err := writeOffsetCheckpoint(l.dir, logStartOffsetFile, newStart); err != nil {
			errs = append(errs, l.poison(err))
		}
		if !l.opts.keepsEpochs() {
			errs = append(errs, l.epochs.truncateFromStart(newStart))
		}
	}
	l.opts.logger.Info("segment: deleted segments", "dir", l.dir, "count", n, "logStartOffset", newStart)
	return infos, errors.Join(errs...)
}

// closeLater closes the files of deleted segments after
// file.delete.delay.ms, so that zero-copy reads already handed out finish.
// Close closes them at once.
func (l *Log) closeLater(segs []*segment) {
	l.closeAfter(segs, l.config().FileDeleteDelayMs)
}

// closeAfter closes the files of segs after delayMs milliseconds (at once
// for 0), or at Close.
func (l *Log) closeAfter(segs []*segment, delayMs int64) {
	if delayMs == 0 {
		for _, s := range segs {
			if err := s.close(); err != nil {
				l.opts.logger.Warn("segment: closing deleted segment", "path", s.logPath, "err", err)
			}
		}
		return
	}
	delay := time.Duration(min(delayMs, int64(time.Duration(1<<62)/time.Millisecond))) * time.Millisecond
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range segs {
		l.mu.closing[s] = l.opts.afterFunc(delay, func() {
			l.mu.Lock()
			_, ok := l.mu.closing[s]
			delete(l.mu.closing, s)
			l.mu.Unlock()
			if !ok {
				return // closed by shutdown
			}
			if err := s.close(); err != nil {
				l.opts.logger.Warn("segment: closing deleted segment", "path", s.logPath, "err", err)
			}
		})
	}
}
