package group

// OffsetCommit: versions 1-9 (v0 is answered the same way).
//
// Behavior:
//   - Errors of the whole request go to every partition. The empty group
//     id is allowed, as in Kafka.
//   - A commit with generation -1, no member id and no instance id is a
//     "simple" commit: it creates the group if needed (Empty, no protocol
//     type) and is accepted only while the group has no members
//     (UNKNOWN_MEMBER_ID otherwise). For an unknown group any other
//     generation is ILLEGAL_GENERATION.
//   - A member commit must name a current member (UNKNOWN_MEMBER_ID,
//     FENCED_INSTANCE_ID) of the current generation (ILLEGAL_GENERATION);
//     it counts as a heartbeat. During CompletingRebalance:
//     REBALANCE_IN_PROGRESS. During PreparingRebalance commits are still
//     taken, so members can commit before they rejoin.
//   - To a consumer group (KIP-848) Generation is the member epoch: a
//     commit with epoch -1 is taken only while the group has no members;
//     a member's needs v9 (UNSUPPORTED_VERSION) and its current epoch:
//     STALE_MEMBER_EPOCH for an older one, FENCED_MEMBER_EPOCH for a
//     newer one, UNKNOWN_MEMBER_ID for an unknown member.
//   - Per partition: metadata longer than OffsetMetadataMaxBytes:
//     OFFSET_METADATA_TOO_LARGE; a partition Config.PartitionExists denies:
//     UNKNOWN_TOPIC_OR_PARTITION. Null metadata is stored as "".
//   - The committed leader epoch (v6+) is stored; v1's per-partition
//     timestamp becomes the commit time; v2-v4's retention time sets the
//     offset's expire time.
//   - The answer comes after the records are appended to the group's
//     partition of __consumer_offsets (one batch per request), and the
//     offsets become visible to OffsetFetch at the same moment. A failed
//     append: NOT_COORDINATOR, nothing committed.

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit handles an OffsetCommit request; it blocks until the
// offsets are appended to the log, or ctx is done.
func (c *Coordinator) OffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		rt.TopicID = t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	setAll := func(code int16) *kmsg.OffsetCommitResponse {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				resp.Topics[i].Partitions[j].ErrorCode = code
			}
		}
		return resp
	}

	if !validGroupID(req.Group, true) {
		return setAll(kerr.InvalidGroupID.Code)
	}
	g, code := c.lookup(req.Group, false)
	if code != 0 {
		return setAll(code)
	}
	if g == nil {
		if req.Generation >= 0 {
			return setAll(kerr.IllegalGeneration.Code)
		}
		if g, code = c.lookup(req.Group, true); code != 0 {
			return setAll(code)
		}
	}

	g.mu.Lock()
	if code := g.validateCommitLocked(req); code != 0 {
		g.mu.Unlock()
		return setAll(code)
	}
	now := c.cfg.Now().UnixMilli()
	type staged struct {
		at    [2]int // topic, partition index in the response
		tp    tp
		entry offsetEntry
	}
	var batch []staged
	var recs []kv
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			rp := &resp.Topics[i].Partitions[j]
			meta := ""
			if p.Metadata != nil {
				meta = strings.Clone(*p.Metadata)
			}
			if len(meta) > c.cfg.OffsetMetadataMaxBytes {
				rp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			if len(t.Topic) > maxStringLen || (c.cfg.PartitionExists != nil && !c.cfg.PartitionExists(t.Topic, p.Partition)) {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			e := offsetEntry{offset: p.Offset, leaderEpoch: -1, metadata: meta, commitTime: now, expireTime: -1, at: -1}
			if req.Version >= 6 {
				e.leaderEpoch = p.LeaderEpoch
			}
			if req.Version == 1 && p.Timestamp != -1 {
				e.commitTime = p.Timestamp
			}
			if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis != -1 {
				e.expireTime = now + req.RetentionTimeMillis
			}
			batch = append(batch, staged{at: [2]int{i, j}, tp: tp{strings.Clone(t.Topic), p.Partition}, entry: e})
			recs = append(recs, kv{key: offsetKey(g.id, t.Topic, p.Partition), value: offsetValue(e)})
		}
	}
	if len(batch) == 0 {
		g.mu.Unlock()
		return resp
	}
	fail := func(code int16) *kmsg.OffsetCommitResponse {
		for _, s := range batch {
			resp.Topics[s.at[0]].Partitions[s.at[1]].ErrorCode = code
		}
		return resp
	}
	data, err := buildBatch(now, recs)
	if err != nil {
		g.mu.Unlock()
		c.cfg.Logger.Error("group: encoding offset commit failed", "group", g.id, "err", err)
		return fail(kerr.UnknownServerError.Code)
	}
	for _, s := range batch {
		g.pendingCommits[s.tp]++
	}
	done := make(chan error, 1)
	err = g.part.w.enqueue(data, func(at int64, err error) {
		g.mu.Lock()
		for _, s := range batch {
			g.unpendCommitLocked(s.tp)
			if err == nil {
				s.entry.at = at
				g.commitOffsetLocked(s.tp, s.entry)
			}
		}
		g.mu.Unlock()
		done <- err
	})
	if err != nil {
		for _, s := range batch {
			g.unpendCommitLocked(s.tp)
		}
		g.mu.Unlock()
		return fail(kerr.NotCoordinator.Code)
	}
	g.mu.Unlock()

	select {
	case err := <-done:
		if err != nil {
			return fail(kerr.NotCoordinator.Code)
		}
		return resp
	case <-ctx.Done():
		// The append goes on and the offsets apply if it succeeds; the
		// client will not read this answer.
		return fail(kerr.RequestTimedOut.Code)
	}
}

// validateCommitLocked checks who commits, and the group's state.
func (g *group) validateCommitLocked(req *kmsg.OffsetCommitRequest) int16 {
	if g.state == StateDead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if g.consumer != nil {
		return g.consumer.validateCommit(req.MemberID, req.Generation, req.Version < 9)
	}
	if req.Generation >= 0 || req.MemberID != "" || req.InstanceID != nil {
		if code := g.validateMemberLocked(req.MemberID, req.InstanceID); code != 0 {
			return code
		}
		if req.Generation != g.generation {
			return kerr.IllegalGeneration.Code
		}
	} else if g.state != StateEmpty {
		// Once a group has members, only they commit.
		return kerr.UnknownMemberID.Code
	}
	switch g.state {
	case StateCompletingRebalance:
		return kerr.RebalanceInProgress.Code
	case StateStable, StatePreparingRebalance:
		if m := g.members[req.MemberID]; m != nil {
			g.heartbeatLocked(m)
		}
	}
	return 0
}

func (g *group) unpendCommitLocked(t tp) {
	if g.pendingCommits[t]--; g.pendingCommits[t] <= 0 {
		delete(g.pendingCommits, t)
	}
}

// commitOffsetLocked applies an appended commit unless the group holds a
// commit of the same partition that is newer in log order, as Kafka's
// GroupMetadata does: a transactional commit completed by its marker may
// have been appended before a plain commit applied earlier, and it must
// not replace it.
func (g *group) commitOffsetLocked(t tp, e offsetEntry) bool {
	if cur, ok := g.offsets[t.topic][t.partition]; ok && cur.at > e.at {
		return false
	}
	g.setOffsetLocked(t, e)
	return true
}

func (g *group) setOffsetLocked(t tp, e offsetEntry) {
	ps := g.offsets[t.topic]
	if ps == nil {
		ps = make(map[int32]offsetEntry)
		g.offsets[t.topic] = ps
	}
	ps[t.partition] = e
}

func (g *group) deleteOffsetLocked(t tp) {
	if ps := g.offsets[t.topic]; ps != nil {
		delete(ps, t.partition)
		if len(ps) == 0 {
			delete(g.offsets, t.topic)
		}
	}
}

func (g *group) numOffsetsLocked() int {
	n := 0
	for _, ps := range g.offsets {
		n += len(ps)
	}
	return n
}
