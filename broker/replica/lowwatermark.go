package replica

import (
	"context"
	"time"
)

// This file is the low watermark (Kafka's Partition.lowWatermarkIfLeader)
// and the wait of DeleteRecords for it (Kafka's DelayedDeleteRecords).

// LowWatermark is the smallest log start offset over the replicas: the
// leader's (leaderStart, which for a tiered partition is the remote log
// start) and that of every follower whose broker is live, as the
// followers report it on their streams; a live follower that has not
// reported counts as -1. ok is false when this broker does not lead the
// partition at epoch.
func (m *Manager) LowWatermark(p *Partition, epoch int32, leaderStart int64) (low int64, ok bool) {
	snap := m.host.Snapshot()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.leading || p.epoch != epoch {
		return -1, false
	}
	low = leaderStart
	for id, f := range p.followers {
		if snap.Live(id) {
			low = min(low, f.logStart)
		}
	}
	return low, true
}

// NotifyLogStart wakes the leader's replication streams of p (they then
// send the followers the new log start) and the waits of
// AwaitLowWatermark, after the leader moved its log start.
func (p *Partition) NotifyLogStart() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.notifyLocked()
}

// AwaitLowWatermark parks a DeleteRecords until the low watermark of p
// (LowWatermark, with the leader's start from leaderStart) reaches
// target, the deadline passes, the leadership moves from epoch, the
// broker shuts down or ctx ends. It wakes on the partition's replication
// changes (a follower's report of a new log start among them) and
// returns the low watermark it saw last. recheck, when above zero, also
// wakes it that often: a tiered partition's remote log start moves when
// its archiver commits, which no replication change announces.
func (m *Manager) AwaitLowWatermark(ctx context.Context, p *Partition, epoch int32, target int64, deadline time.Time, leaderStart func() int64, recheck time.Duration) (res WaitResult, low int64) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		p.mu.Lock()
		ch := p.changed
		p.mu.Unlock()
		low, ok := m.LowWatermark(p, epoch, leaderStart())
		if !ok {
			return LeadershipMoved, -1
		}
		if low >= target {
			return Replicated, low
		}
		left := time.Until(deadline)
		if left <= 0 {
			return DeadlinePassed, low
		}
		if recheck > 0 {
			left = min(left, recheck)
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
			return ShuttingDown, low
		case <-ctx.Done():
			return Cancelled, low
		}
	}
}
