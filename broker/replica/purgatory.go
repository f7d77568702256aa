package replica

import (
	"context"
	"time"
)

// This file is the produce purgatory: acks=all produces and group commits
// parked until the ISR has their records.

// WaitResult is how a wait of Await ended.
type WaitResult int

const (
	// Replicated: the high watermark reached the target.
	Replicated WaitResult = iota
	// LeadershipMoved: this broker no longer leads the partition at the
	// epoch the records were appended at.
	LeadershipMoved
	// DeadlinePassed: the deadline passed first.
	DeadlinePassed
	// ShuttingDown: the broker began shutting down (Config.Done).
	ShuttingDown
	// Cancelled: ctx ended (the client went away).
	Cancelled
)

// Await parks an acks=all produce (or a group commit) that appended up
// to target at leader epoch epoch, until the high watermark of p reaches
// target, the deadline passes, the leadership moves, the broker shuts
// down or ctx ends. It never polls: it wakes on the partition's
// replication changes. isr is the size of the committed ISR when it
// returned, for the caller's min.insync.replicas check. While it waits,
// the request counts in strata_broker_produce_purgatory_size.
func (m *Manager) Await(ctx context.Context, p *Partition, epoch int32, target int64, deadline time.Time) (res WaitResult, isr int) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	m.purgatory.Inc()
	defer m.purgatory.Dec()
	for {
		p.mu.Lock()
		leading, curEpoch, ch := p.leading, p.epoch, p.changed
		isr = len(p.isr)
		p.mu.Unlock()
		if !leading || curEpoch != epoch {
			return LeadershipMoved, isr
		}
		if p.log.HighWatermark() >= target {
			return Replicated, isr
		}
		left := time.Until(deadline)
		if left <= 0 {
			return DeadlinePassed, isr
		}
		if timer == nil {
			timer = time.NewTimer(left)
		} else {
			timer.Reset(left)
		}
		select {
		case <-ch:
		case <-timer.C:
		case <-m.done:
			return ShuttingDown, isr
		case <-ctx.Done():
			return Cancelled, isr
		}
	}
}
