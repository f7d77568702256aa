package group

// Offsets of deleted topics.
//
// Behavior (Kafka's GroupMetadataManager.cleanupGroupMetadata, called on
// partitions deleted):
//   - DeleteTopicOffsets removes, from every group this coordinator holds,
//     the committed offsets of the topics named, with a tombstone in
//     __consumer_offsets for each: the offsets do not come back when a
//     partition is loaded again (a coordinator move, a restart), do not
//     outlive compaction, and a topic created again under the same name
//     starts without them.
//   - A commit of such a partition still in flight gets a tombstone too;
//     it is appended after the commit, so the log and memory end without
//     the offset.
//   - An Empty group left without offsets is deleted with a group
//     tombstone, as the expiry pass does.
//   - Memory changes once the tombstones are appended (the package's
//     rule: memory never shows what the log does not hold).

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// DeleteTopicOffsets deletes the committed offsets of the topics named
// from every group this coordinator holds, appending their tombstones; it
// returns how many offsets it deleted once the appends are done, or when
// ctx is done (the appends go on). An error names the first group whose
// append failed (NOT_COORDINATOR: its partition moved away; the new
// coordinator loads the offsets back, as in Kafka).
func (c *Coordinator) DeleteTopicOffsets(ctx context.Context, topics []string) (int, error) {
	if len(topics) == 0 {
		return 0, nil
	}
	gone := make(map[string]bool, len(topics))
	for _, t := range topics {
		gone[t] = true
	}
	type wait struct {
		g    string
		n    int
		done chan error
	}
	var waits []wait
	var errs []error
	for _, g := range c.groupsSorted() {
		g.mu.Lock()
		n, code, done := g.deleteTopicOffsetsLocked(gone)
		g.mu.Unlock()
		switch {
		case code != 0:
			errs = append(errs, fmt.Errorf("group: deleting offsets of deleted topics of group %q: %w", g.id, kerr.ErrorForCode(code)))
		case done != nil:
			waits = append(waits, wait{g.id, n, done})
		}
	}
	deleted := 0
	for _, w := range waits {
		select {
		case err := <-w.done:
			if err != nil {
				errs = append(errs, fmt.Errorf("group: deleting offsets of deleted topics of group %q: %w", w.g, err))
				continue
			}
			deleted += w.n
		case <-ctx.Done():
			return deleted, errors.Join(append(errs, ctx.Err())...)
		}
	}
	return deleted, errors.Join(errs...)
}

// deleteTopicOffsetsLocked queues the tombstones of g's offsets (and
// commits in flight) of the topics in gone; n counts them.
func (g *group) deleteTopicOffsetsLocked(gone map[string]bool) (n int, code int16, done chan error) {
	if g.state == StateDead {
		return 0, 0, nil
	}
	var tps []tp
	present := 0
	for _, t := range g.allOffsetsLocked() {
		if gone[t.topic] {
			tps = append(tps, t)
			present++
		}
	}
	pendingGone := false
	for t := range g.pendingCommits {
		if !gone[t.topic] {
			continue
		}
		pendingGone = true
		if _, ok := g.offsets[t.topic][t.partition]; !ok {
			tps = append(tps, t)
		}
	}
	if len(tps) == 0 {
		return 0, 0, nil
	}
	recs := g.offsetTombstonesLocked(tps)
	deleteGroup := g.state == StateEmpty && present == g.numOffsetsLocked() && !pendingGone &&
		len(g.pendingCommits) == 0 && len(g.pending) == 0
	if deleteGroup {
		recs = append(recs, kv{key: groupKey(g.id)})
		g.killLocked(kerr.GroupIDNotFound.Code)
		g.c.forget(g)
	}
	g.c.cfg.Logger.Info("group: offsets of deleted topics removed", "group", g.id, "offsets", len(tps), "group_deleted", deleteGroup)
	code, done = g.appendLocked(recs, func() {
		for _, t := range tps {
			g.deleteOffsetLocked(t)
		}
	})
	return len(tps), code, done
}
