package txn

import (
	"time"
)

// timers runs AbortTimedOut every AbortInterval and RemoveExpired every
// ExpireInterval until Close.
func (c *Coordinator) timers() {
	defer c.wg.Done()
	abort := time.NewTicker(c.cfg.AbortInterval)
	defer abort.Stop()
	expire := time.NewTicker(c.cfg.ExpireInterval)
	defer expire.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-abort.C:
			c.AbortTimedOut()
		case <-expire.C:
			c.RemoveExpired()
		}
	}
}

// AbortTimedOut aborts every ongoing transaction older than its timeout
// (Kafka's abortTimedOutTransactions): the producer epoch is bumped, so the
// producer that began it is fenced, PrepareAbort is written and the
// markers go out. It returns how many aborts it began.
func (c *Coordinator) AbortTimedOut() int {
	now := c.nowMs()
	type job struct {
		e    *entry
		next Metadata
	}
	var jobs []job
	c.mu.Lock()
	for _, e := range c.mu.txns {
		if e.p.loading || e.pending != noPending || e.md.State != Ongoing || e.md.StartMs+int64(e.md.TimeoutMs) >= now {
			continue
		}
		jobs = append(jobs, job{e, c.fenceLocked(e)})
	}
	c.mu.Unlock()
	n := 0
	for _, j := range jobs {
		c.cfg.Logger.Info("txn: aborting a transaction that passed its timeout", "transactional_id", j.next.TransactionalID,
			"producer_id", j.next.ProducerID, "epoch", j.next.ProducerEpoch, "timeout_ms", j.next.TimeoutMs, "started_ms", j.next.StartMs)
		if ke := c.commit(j.e, j.next); ke != nil {
			c.cfg.Logger.Warn("txn: timed-out transaction not aborted; retried at the next check", "transactional_id", j.next.TransactionalID, "err", ke)
			continue
		}
		c.completeAsync(j.e, j.next)
		n++
	}
	return n
}

// RemoveExpired removes the transactional ids with no open transaction
// that were last updated more than IDExpiration ago (Kafka's
// removeExpiredTransactionalIds): a tombstone is written to
// __transaction_state and the id forgotten. It returns how many it removed.
func (c *Coordinator) RemoveExpired() int {
	cutoff := c.nowMs() - c.cfg.IDExpiration.Milliseconds()
	var dead []*entry
	c.mu.Lock()
	for _, e := range c.mu.txns {
		if e.p.loading || e.pending != noPending || !e.md.State.ended() || e.md.LastUpdateMs > cutoff {
			continue
		}
		e.pending = Dead
		dead = append(dead, e)
	}
	c.mu.Unlock()
	n := 0
	for _, e := range dead {
		id := e.md.TransactionalID
		ke := c.write(e.p, id, nil)
		c.mu.Lock()
		e.pending = noPending
		if ke == nil && c.currentLocked(e) {
			delete(c.mu.txns, id)
			n++
		}
		c.mu.Unlock()
		if ke != nil {
			c.cfg.Logger.Warn("txn: expired transactional id not removed; retried at the next check", "transactional_id", id, "err", ke)
		} else {
			c.cfg.Logger.Info("txn: transactional id expired", "transactional_id", id)
		}
	}
	return n
}
