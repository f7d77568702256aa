package group

// DeleteGroups: versions 0-2. OffsetDelete: version 0.
//
// Behavior:
//   - DeleteGroups deletes each Empty group: it becomes Dead at once, and
//     a tombstone for its metadata and each of its offsets is appended to
//     __consumer_offsets before the answer. A group with members:
//     NON_EMPTY_GROUP; an unknown one: GROUP_ID_NOT_FOUND.
//   - OffsetDelete deletes committed offsets of a group (tombstones
//     appended before the answer). In an Empty group any; in a "consumer"
//     group with members only those of topics no member subscribes to,
//     others get GROUP_SUBSCRIBED_TO_TOPIC; in any other group with
//     members: NON_EMPTY_GROUP. Partitions without an offset answer no
//     error. An unknown group: GROUP_ID_NOT_FOUND.
//   - A failed append: NOT_COORDINATOR.

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups handles a DeleteGroups request; it blocks until the
// tombstones are appended, or ctx is done.
func (c *Coordinator) DeleteGroups(ctx context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	waits := make([]chan error, len(req.Groups))
	for i, id := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = id
		rg.ErrorCode, waits[i] = c.deleteGroup(id)
		resp.Groups = append(resp.Groups, rg)
	}
	for i, w := range waits {
		if w == nil {
			continue
		}
		select {
		case err := <-w:
			if err != nil {
				resp.Groups[i].ErrorCode = kerr.NotCoordinator.Code
			}
		case <-ctx.Done():
			resp.Groups[i].ErrorCode = kerr.RequestTimedOut.Code
		}
	}
	return resp
}

func (c *Coordinator) deleteGroup(id string) (int16, chan error) {
	if !validGroupID(id, true) {
		return kerr.InvalidGroupID.Code, nil
	}
	g, code := c.lookup(id, false)
	switch {
	case code != 0:
		return code, nil
	case g == nil:
		return kerr.GroupIDNotFound.Code, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch g.state {
	case StateDead:
		return kerr.GroupIDNotFound.Code, nil
	case StateEmpty:
	default:
		return kerr.NonEmptyGroup.Code, nil
	}
	recs := append(g.offsetTombstonesLocked(g.allOffsetsLocked()), kv{key: groupKey(g.id)})
	if g.consumer != nil {
		recs = append(recs, g.consumerTombstonesLocked()...)
	}
	g.killLocked(kerr.GroupIDNotFound.Code)
	g.c.forget(g)
	g.c.cfg.Logger.Info("group: deleted", "group", g.id)
	return g.appendLocked(recs, nil)
}

// appendLocked queues records for the log; the returned channel gets the
// append's result after apply (if set) ran under the group's lock.
func (g *group) appendLocked(recs []kv, apply func()) (int16, chan error) {
	batch, err := buildBatch(g.c.cfg.Now().UnixMilli(), recs)
	if err != nil {
		g.c.cfg.Logger.Error("group: encoding records failed", "group", g.id, "err", err)
		return kerr.UnknownServerError.Code, nil
	}
	done := make(chan error, 1)
	err = g.part.w.enqueue(batch, func(_ int64, err error) {
		if err == nil && apply != nil {
			g.mu.Lock()
			apply()
			g.mu.Unlock()
		}
		done <- err
	})
	if err != nil {
		return kerr.NotCoordinator.Code, nil
	}
	return 0, done
}

// allOffsetsLocked lists the group's committed partitions, sorted.
func (g *group) allOffsetsLocked() []tp {
	var tps []tp
	for t, ps := range g.offsets {
		for p := range ps {
			tps = append(tps, tp{t, p})
		}
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].topic != tps[j].topic {
			return tps[i].topic < tps[j].topic
		}
		return tps[i].partition < tps[j].partition
	})
	return tps
}

func (g *group) offsetTombstonesLocked(tps []tp) []kv {
	recs := make([]kv, 0, len(tps)+1)
	for _, t := range tps {
		recs = append(recs, kv{key: offsetKey(g.id, t.topic, t.partition)})
	}
	return recs
}

// OffsetDelete handles an OffsetDelete request; it blocks until the
// tombstones are appended, or ctx is done.
func (c *Coordinator) OffsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	code, codes, wait := c.offsetDelete(req)
	resp.ErrorCode = code
	if code != 0 {
		return resp
	}
	if wait != nil {
		select {
		case err := <-wait:
			if err != nil {
				resp.ErrorCode = kerr.NotCoordinator.Code
				return resp
			}
		case <-ctx.Done():
			resp.ErrorCode = kerr.RequestTimedOut.Code
			return resp
		}
	}
	for i, t := range req.Topics {
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for j, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = codes[i][j]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func (c *Coordinator) offsetDelete(req *kmsg.OffsetDeleteRequest) (int16, [][]int16, chan error) {
	if !validGroupID(req.Group, false) {
		return kerr.InvalidGroupID.Code, nil, nil
	}
	g, code := c.lookup(req.Group, false)
	switch {
	case code != 0:
		return code, nil, nil
	case g == nil:
		return kerr.GroupIDNotFound.Code, nil, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch g.state {
	case StateDead:
		return kerr.GroupIDNotFound.Code, nil, nil
	case StateEmpty:
	default:
		if g.protocolType != consumerProtocolType {
			return kerr.NonEmptyGroup.Code, nil, nil
		}
	}
	codes := make([][]int16, len(req.Topics))
	var tps []tp
	for i, t := range req.Topics {
		codes[i] = make([]int16, len(t.Partitions))
		subscribed := false
		if g.state != StateEmpty {
			_, subscribed = g.subscribed[t.Topic]
			subscribed = subscribed || g.subscribed == nil
		}
		for j, p := range t.Partitions {
			if subscribed {
				codes[i][j] = kerr.GroupSubscribedToTopic.Code
				continue
			}
			if _, ok := g.offsets[t.Topic][p.Partition]; ok {
				tps = append(tps, tp{t.Topic, p.Partition})
			}
		}
	}
	if len(tps) == 0 {
		return 0, codes, nil
	}
	code, wait := g.appendLocked(g.offsetTombstonesLocked(tps), func() {
		for _, t := range tps {
			g.deleteOffsetLocked(t)
		}
	})
	return code, codes, wait
}
