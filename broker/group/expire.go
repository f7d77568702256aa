package group

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// sweepLoop runs the offset expiry pass every OffsetsRetentionCheckInterval
// until Close.
func (c *Coordinator) sweepLoop() {
	defer close(c.sweepDone)
	if c.cfg.OffsetsRetentionCheckInterval == 0 {
		<-c.stopSweep
		return
	}
	t := time.NewTicker(c.cfg.OffsetsRetentionCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stopSweep:
			return
		case <-t.C:
			c.expireOffsets()
		}
	}
}

// expireOffsets deletes expired offsets (KIP-211) and the Empty groups left
// without offsets, appending tombstones for both:
//   - a group with a protocol type, while Empty: every offset once the
//     group has been Empty for OffsetsRetention;
//   - a "consumer" group while Stable: offsets of topics no member
//     subscribes to, OffsetsRetention after their commit;
//   - a group without a protocol type (it only commits): each offset
//     OffsetsRetention after its commit.
//
// An offset committed with an explicit retention (OffsetCommit v2-v4)
// expires at its own expire time instead. Offsets with a commit in flight
// are kept.
func (c *Coordinator) expireOffsets() {
	now := c.cfg.Now()
	for _, g := range c.groupsSorted() {
		g.mu.Lock()
		g.expireLocked(now)
		g.mu.Unlock()
	}
}

func (g *group) expireLocked(now time.Time) {
	if g.state == StateDead {
		return
	}
	nowMs, retention := now.UnixMilli(), g.c.cfg.OffsetsRetention.Milliseconds()
	var base func(e offsetEntry) int64
	var keep map[string]struct{}
	switch {
	case g.consumer != nil:
		// Kafka's ConsumerGroup: an offset of a topic no member
		// subscribes to expires from its commit, whether or not the
		// group has members.
		base = func(e offsetEntry) int64 { return e.commitTime }
		keep = g.subscribed
	case g.protocolType != "" && g.state == StateEmpty:
		emptySince := g.stateSince.UnixMilli()
		base = func(offsetEntry) int64 { return emptySince }
	case g.protocolType == consumerProtocolType && g.state == StateStable && g.subscribed != nil:
		base = func(e offsetEntry) int64 { return e.commitTime }
		keep = g.subscribed
	case g.protocolType == "":
		base = func(e offsetEntry) int64 { return e.commitTime }
	}
	var expired []tp
	if base != nil {
		for _, t := range g.allOffsetsLocked() {
			if _, ok := keep[t.topic]; ok || g.pendingCommits[t] > 0 {
				continue
			}
			e := g.offsets[t.topic][t.partition]
			if (e.expireTime >= 0 && nowMs >= e.expireTime) || (e.expireTime < 0 && nowMs-base(e) >= retention) {
				expired = append(expired, t)
			}
		}
	}
	recs := g.offsetTombstonesLocked(expired)
	deleteGroup := g.state == StateEmpty && len(expired) == g.numOffsetsLocked() &&
		len(g.pendingCommits) == 0 && len(g.pending) == 0 && len(g.txnOffsets) == 0
	if deleteGroup {
		recs = append(recs, kv{key: groupKey(g.id)})
		if g.consumer != nil {
			recs = append(recs, g.consumerTombstonesLocked()...)
		}
		g.killLocked(kerr.GroupIDNotFound.Code)
		g.c.forget(g)
	}
	if len(recs) == 0 {
		return
	}
	g.c.cfg.Logger.Info("group: offsets expired", "group", g.id, "offsets", len(expired), "group_deleted", deleteGroup)
	if code, _ := g.appendLocked(recs, func() {
		for _, t := range expired {
			g.deleteOffsetLocked(t)
		}
	}); code != 0 {
		g.c.cfg.Logger.Warn("group: writing expired offsets failed", "group", g.id, "code", code)
	}
}
