package share

import (
	"context"
	"time"
)

// This file is the share partition's side of dead-letter topics
// (KIP-1191): the Archiving records waiting for their copy, and the loop
// that has the broker write the copies (Config.DeadLetter) and then
// archives the records.
//
// Order, for each record: Archiving (in memory, and persisted with the
// next write of the window: before the answer for a REJECT, best effort
// for a lock expiry or release at the delivery limit), then the copy is
// written to the dead-letter topic with acks=all, then Archived, then the
// window is persisted. A leader that dies between the copy and the last
// write leaves the record Archiving (or, when the expiry's write was
// lost, available at the delivery limit, which archives it on the next
// acquisition): the next leader writes the copy again. So a copy is
// written at least once, and more than once only across a failover.

// DeadLetter is one Archiving record of a share partition, to be copied
// to its group's dead-letter topic.
type DeadLetter struct {
	Offset        int64
	DeliveryCount int16
	// Rejected says a member rejected it; else it reached the delivery
	// limit. A record read back Archiving from the Persister does not
	// say which: it counts as rejected below the delivery limit.
	Rejected bool
}

// DeadLetterFunc writes the dead-letter copies of letters (in offset
// order) of share partition k and returns the offsets that are settled:
// copied, or given up (no dead-letter topic, or one that cannot take
// them: the broker logs and counts those). An error means try again
// later; the offsets not returned stay Archiving.
type DeadLetterFunc func(ctx context.Context, k Key, letters []DeadLetter) (settled []int64, err error)

// maxDeadLettersPerCall bounds the letters of one DeadLetterFunc call.
const maxDeadLettersPerCall = 500

// DeadLetters returns the partition's Archiving records, in offset
// order, at most max of them.
func (p *Partition) DeadLetters(max int, l Limits) []DeadLetter {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []DeadLetter
	for o := p.mu.start; o < p.mu.end && len(out) < max; o++ {
		if r := p.mu.inflight[o]; r.state == Archiving {
			out = append(out, DeadLetter{Offset: o, DeliveryCount: r.deliveries, Rejected: r.rejected || r.deliveries < l.DeliveryCountLimit})
		}
	}
	return out
}

// finishDeadLettersLocked archives the Archiving records at offsets and
// reports whether any changed.
func (p *Partition) finishDeadLettersLocked(offsets []int64) bool {
	changed := false
	for _, o := range offsets {
		if r := p.mu.inflight[o]; r != nil && o >= p.mu.start && r.state == Archiving {
			r.state, r.rejected = Archived, false
			changed = true
		}
	}
	if changed {
		p.advanceLocked()
	}
	return changed
}

// Dead-letter retries back off from deadLetterBackoff to
// deadLetterMaxBackoff per share partition.
const (
	deadLetterBackoff    = 100 * time.Millisecond
	deadLetterMaxBackoff = 5 * time.Second
)

// kickDeadLetters wakes the dead-letter loop.
func (m *Manager) kickDeadLetters() {
	select {
	case m.dlqKick <- struct{}{}:
	default:
	}
}

// deadLetterLoop writes the dead-letter copies of the Archiving records,
// one share partition at a time (so the broker's writer needs no locks
// of its own), retrying a partition whose write failed with backoff.
func (m *Manager) deadLetterLoop(ctx context.Context) {
	defer close(m.dlqDone)
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	type retry struct {
		at      time.Time
		backoff time.Duration
	}
	retries := map[Key]retry{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.dlqKick:
		}
		now := time.Now()
		for k, p := range m.partitions(func(Key) bool { return true }) {
			if r, ok := retries[k]; ok && now.Before(r.at) {
				continue
			}
			err := m.writeDeadLetters(ctx, k, p)
			if err == nil {
				delete(retries, k)
				continue
			}
			if ctx.Err() != nil {
				return
			}
			r := retries[k]
			r.backoff = min(max(2*r.backoff, deadLetterBackoff), deadLetterMaxBackoff)
			r.at = time.Now().Add(r.backoff)
			retries[k] = r
			m.cfg.Logger.Warn("share: dead-letter copies not written; will retry", "group", k.Group, "partition", k.Partition, "retry_in", r.backoff, "err", err)
		}
	}
}

// writeDeadLetters has the broker copy share partition k's Archiving
// records, archives those settled and persists the window. Without a
// writer every Archiving record is archived uncopied.
func (m *Manager) writeDeadLetters(ctx context.Context, k Key, p *Partition) error {
	letters := p.DeadLetters(maxDeadLettersPerCall, m.Limits(k.Group))
	if len(letters) == 0 {
		return nil
	}
	var settled []int64
	if m.cfg.DeadLetter == nil {
		for _, d := range letters {
			settled = append(settled, d.Offset)
		}
	} else {
		var err error
		if settled, err = m.cfg.DeadLetter(ctx, k, letters); err != nil && len(settled) == 0 {
			return err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.finishDeadLettersLocked(settled) || !p.mu.loaded {
		return nil
	}
	if err := m.writeLocked(ctx, k, p); err != nil {
		// The copies are written; a new leader reading the records
		// as Archiving writes them again (at least once).
		// The sweeper writes the window again (Manager.persist).
		m.cfg.Logger.Warn("share: archived dead letters not persisted", "group", k.Group, "partition", k.Partition, "err", err)
		p.mu.unsaved, p.mu.retryAt = true, m.cfg.Now().Add(persistRetry)
	}
	return nil
}
