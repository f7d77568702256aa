package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stratastream/strata/coord"
)

// This file writes the ISR changes a leader decides (a follower lagged,
// or caught up: partition.go) to the coordinator, with compare-and-set
// on the partition state's znode version.

// errISRNotLeader means the ISR write was dropped: this broker no longer
// leads the partition at the epoch the write was for. Its text keeps the
// "broker:" prefix because it appears in the "ISR change not written"
// log line, which operators search for.
var errISRNotLeader = errors.New("broker: no longer the partition's leader")

// writeISR writes the proposed ISR to c with compare-and-set on the
// version the leader last saw, and applies it on success. On a version
// conflict it takes the coordinator's current state (so the next check
// decides again). The proposal is cleared either way.
func (p *Partition) writeISR(ctx context.Context, c Coordinator, isr []int32) error {
	p.mu.Lock()
	if !p.leading || !slices.Equal(p.proposed, isr) {
		p.mu.Unlock()
		return errISRNotLeader
	}
	st := coord.PartitionState{Leader: p.self, LeaderEpoch: p.epoch, ISR: isr, ControllerEpoch: p.controllerEpoch}
	version, epoch := p.isrVersion, p.epoch
	p.mu.Unlock()

	newVersion, err := c.UpdatePartitionState(ctx, p.topic, p.index, st, version)
	if errors.Is(err, coord.ErrVersionConflict) {
		cur, v, rerr := c.PartitionState(ctx, p.topic, p.index)
		p.mu.Lock()
		if rerr == nil && p.leading && p.epoch == epoch && cur.Leader == p.self && cur.LeaderEpoch == epoch && v > p.isrVersion {
			p.isr, p.isrVersion, p.controllerEpoch = slices.Clone(cur.ISR), v, cur.ControllerEpoch
		}
		p.proposed = nil
		p.notifyLocked()
		p.mu.Unlock()
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.proposed = nil
	if err != nil {
		p.notifyLocked()
		return err
	}
	if p.leading && p.epoch == epoch && newVersion > p.isrVersion {
		p.isr, p.isrVersion = slices.Clone(isr), newVersion
	}
	p.advanceHighWatermarkLocked()
	p.notifyLocked()
	return nil
}

// changeISR writes a proposed ISR in the background and logs the outcome.
func (m *Manager) changeISR(p *Partition, isr []int32, reason string) {
	old, _ := p.isrSnapshot()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.writeISR(ctx, m.host, isr); err != nil {
			m.log.Info("ISR change not written; it is decided again", "topic", p.topic, "partition", p.index,
				"from", fmt.Sprint(old), "to", fmt.Sprint(isr), "err", err)
			return
		}
		what := "ISR expanded"
		if len(isr) < len(old) {
			what = "ISR shrunk"
			m.shrinks.Inc()
		} else {
			m.expands.Inc()
		}
		m.log.Info(what, "topic", p.topic, "partition", p.index, "from", fmt.Sprint(old), "to", fmt.Sprint(isr), "reason", reason)
	}()
}
