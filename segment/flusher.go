package segment

import (
	"math"
	"time"
)

// Flushing. Each Log has one flusher goroutine. It runs a flush round when
// someone waits for one (an Append that reached flush.messages, Sync, a
// roll) or when unflushed data is older than flush.ms. A round captures the
// log end offset and the segments holding unflushed data under mu, releases
// mu, fsyncs them (the .log; for sealed segments also .index and
// .timeindex) and the directory when files were created, then advances the
// recovery point to the captured log end and wakes every waiter whose data
// it covered: one fsync for many appenders (group commit). Appends continue
// during the fsync.
//
// A failed fsync poisons the log (ErrPoisoned): the kernel may have dropped
// the dirty pages, so nothing written after them can be trusted to reach the
// disk. Waiters get the error; appends fail until the log is reopened.
//
// The recovery point promises that everything below it is on disk and that
// every sealed segment wholly below it has durable indexes. It is
// checkpointed at most once per checkpoint interval by the flusher, and
// always on Close and when truncation lowers it.

// flushItem is a segment captured by a flush round.
type flushItem struct {
	s      *segment
	sealed bool // sealed when captured: its indexes are final and synced too
}

// poke wakes the flusher without blocking.
func (l *Log) poke() {
	select {
	case l.flushReq <- struct{}{}:
	default:
	}
}

// flushLoop is the flusher goroutine.
func (l *Log) flushLoop() {
	defer close(l.flusherDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		l.mu.Lock()
		want := l.mu.flushWanted
		dirty := l.mu.logEnd > l.mu.recoveryPoint
		flushMs := l.mu.cfg.FlushMs
		since := time.Since(l.mu.lastFlush)
		poisoned := l.mu.poison != nil
		l.mu.Unlock()

		var timerC <-chan time.Time
		switch {
		case want:
			l.flushRound()
			continue
		case dirty && !poisoned && flushMs < math.MaxInt64/int64(time.Millisecond):
			d := time.Duration(flushMs)*time.Millisecond - since
			if d <= 0 {
				l.flushRound()
				continue
			}
			timer.Reset(d)
			timerC = timer.C
		}
		select {
		case <-l.flushReq:
		case <-timerC:
		case <-l.quit:
			timer.Stop()
			return
		}
		timer.Stop()
	}
}

// flushRound runs one flush round and writes the checkpoints if due. Errors
// poison the log and reach the waiters; the flusher itself goes on.
func (l *Log) flushRound() {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	if err := l.flushLocked(); err != nil {
		return
	}
	_ = l.writeCheckpointsLocked(false) // failure poisons the log and is logged
}

// flushLocked fsyncs everything appended so far and advances the recovery
// point. Caller holds flushMu (and not mu).
func (l *Log) flushLocked() error {
	l.mu.Lock()
	l.mu.flushWanted = false
	if l.mu.poison != nil {
		l.wakeFlushWaitersLocked()
		err := l.mu.poison
		l.mu.Unlock()
		return err
	}
	target := l.mu.logEnd
	rp := l.mu.recoveryPoint
	items := l.flushSegs[:0]
	for _, s := range l.mu.segs {
		if s.next > rp || (s.sealed && !s.indexSynced) {
			items = append(items, flushItem{s: s, sealed: s.sealed})
		}
	}
	dirDirty := l.mu.dirDirty
	l.mu.dirDirty = false
	l.mu.Unlock()

	var err error
	synced := false
	for {
		for _, it := range items {
			synced = true
			if err = it.s.syncFiles(it.sealed); err != nil {
				break
			}
		}
		if err == nil && dirDirty {
			synced = true
			err = syncDir(l.dir)
			dirDirty = false
		}
		l.mu.Lock()
		if err != nil {
			break // with mu held
		}
		for _, it := range items {
			if it.sealed {
				it.s.indexSynced = true
			}
		}
		// Segments sealed while we were syncing hold data below target:
		// their indexes must be durable before the recovery point passes
		// them.
		items = items[:0]
		for _, s := range l.mu.segs {
			if s.sealed && !s.indexSynced && s.base < target {
				items = append(items, flushItem{s: s, sealed: true})
			}
		}
		if len(items) == 0 {
			break // with mu held
		}
		l.mu.Unlock()
	}
	clear(items[:cap(items)])
	l.flushSegs = items[:0]
	if err != nil {
		err = l.poisonLocked(err)
		l.mu.Unlock()
		return err
	}
	rp = max(target, l.mu.recoveryPoint)
	if synced && l.opts.syncHook != nil {
		// Before any waiter is released, so a test can check that an
		// Append never returns ahead of its fsync.
		l.mu.Unlock()
		l.opts.syncHook(rp)
		l.mu.Lock()
	}
	l.mu.recoveryPoint = max(rp, l.mu.recoveryPoint)
	l.mu.lastFlush = time.Now()
	l.wakeFlushWaitersLocked()
	l.mu.Unlock()
	return nil
}

// wakeFlushWaitersLocked wakes everyone waiting for a flush round.
func (l *Log) wakeFlushWaitersLocked() {
	if l.mu.flushed != nil {
		close(l.mu.flushed)
		l.mu.flushed = nil
	}
}

// waitFlushed blocks until everything below target is fsynced, the log end
// moved backwards past it (truncation), or the log is poisoned or closed.
func (l *Log) waitFlushed(target int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	gen := l.mu.truncGen
	for {
		switch {
		case l.mu.poison != nil:
			return l.mu.poison
		case l.mu.recoveryPoint >= target || l.mu.truncGen != gen:
			return nil
		case l.mu.closed:
			return ErrClosed
		}
		l.mu.flushWanted = true
		if l.mu.flushed == nil {
			l.mu.flushed = make(chan struct{})
		}
		ch := l.mu.flushed
		l.mu.Unlock()
		l.poke()
		<-ch
		l.mu.Lock()
	}
}

// Sync fsyncs everything appended so far and advances the recovery point.
// Errors: ErrClosed, ErrPoisoned.
func (l *Log) Sync() error {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	target := l.mu.logEnd
	l.mu.Unlock()
	return l.waitFlushed(target)
}

// writeCheckpointsLocked writes the recovery-point checkpoint (and the high
// watermark's, once set) when they changed and the checkpoint interval has
// passed, or always with force. A failure poisons the log. Caller holds
// flushMu.
func (l *Log) writeCheckpointsLocked(force bool) error {
	now := time.Now()
	if !force && now.Sub(l.ckpt.at) < l.opts.ckptInterval {
		return nil
	}
	l.mu.Lock()
	rp, hw, hwSet := l.mu.recoveryPoint, l.mu.hw, l.mu.hwSet
	l.mu.Unlock()
	if force || rp != l.ckpt.rp {
		if err := writeOffsetCheckpoint(l.dir, recoveryPointFile, rp); err != nil {
			return l.poison(err)
		}
		l.ckpt.rp = rp
	}
	if hwSet && (force || hw != l.ckpt.hw || !l.ckpt.hwExists) {
		if err := writeOffsetCheckpoint(l.dir, highWatermarkFile, hw); err != nil {
			return l.poison(err)
		}
		l.ckpt.hw, l.ckpt.hwExists = hw, true
	}
	l.ckpt.at = now
	return nil
}
