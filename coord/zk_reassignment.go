package coord

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/go-zookeeper/zk"
)

// maxTopicCASRetries bounds the compare-and-set retries of a topic znode
// write that keeps losing to concurrent writers.
const maxTopicCASRetries = 16

// AlterPartitionReassignments implements Coordinator: per topic, read
// topics/<name>, apply the changes, write it back at the version read.
func (z *ZK) AlterPartitionReassignments(ctx context.Context, changes []ReassignmentChange) []error {
	errs := make([]error, len(changes))
	order, byTopic := changesByTopic(changes)
	for _, topic := range order {
		idx := byTopic[topic]
		err := z.alterTopicReassignments(ctx, topic, changes, idx, errs)
		if err != nil {
			for _, i := range idx {
				if errs[i] == nil {
					errs[i] = err
				}
			}
		}
	}
	return errs
}

// alterTopicReassignments applies changes[idx] (all of topic) and sets
// errs[i] for the changes refused; a returned error applies to the rest.
func (z *ZK) alterTopicReassignments(ctx context.Context, topic string, changes []ReassignmentChange, idx []int, errs []error) error {
	for range maxTopicCASRetries {
		d, asg, stat, err := z.readTopic(ctx, topic)
		if err != nil {
			return err
		}
		if z.pendingDeletion(ctx, topic) {
			return fmt.Errorf("%w: %s", ErrUnknownTopic, topic)
		}
		parts := d.partitionInfos(asg)
		snap := z.Snapshot()
		live := snap.Live
		for i := range parts {
			// The state is in its own znode; the cached one is what the
			// ISR check needs (as Kafka's controller uses its own view).
			if cur, ok := snap.Partition(TopicPartition{topic, int32(i)}); ok {
				parts[i].State = cur.State
			}
		}
		applied := 0
		for _, i := range idx {
			errs[i] = nil
			ch := changes[i]
			if ch.Partition < 0 || int(ch.Partition) >= len(parts) {
				errs[i] = fmt.Errorf("%w: %s", ErrUnknownPartition, ch.TopicPartition)
				continue
			}
			if errs[i] = applyReassignment(&parts[ch.Partition], ch, live); errs[i] == nil {
				applied++
			}
		}
		if applied == 0 {
			return nil
		}
		nasg := make([][]int32, len(parts))
		for i, p := range parts {
			nasg[i] = p.Replicas
		}
		nd := topicData(d.ID, nasg, d.Configs).withReassignments(parts)
		p := z.path(zTopic(topic))
		err = z.call(ctx, "set", p, func() error {
			_, err := z.conn.Set(p, encodeZ(nd), stat.Version)
			return err
		})
		if errors.Is(err, zk.ErrBadVersion) {
			continue
		}
		if errors.Is(err, zk.ErrNoNode) {
			return fmt.Errorf("%w: %s", ErrUnknownTopic, topic)
		}
		if err != nil {
			return err
		}
		return z.inLoop(ctx, func(c *zkCache) error { return c.loadTopic(topic, false) })
	}
	return fmt.Errorf("%w: topic %s kept changing", ErrUnavailable, topic)
}

// CompleteReassignment implements Leadership: topics/<name> rewritten at
// the version read, and the state at its version, in one transaction
// behind the epoch check.
func (l *zkLeadership) CompleteReassignment(ctx context.Context, tp TopicPartition, replicas, target []int32, state *StateUpdate) (int32, error) {
	if err := l.check(); err != nil {
		return 0, err
	}
	z := l.z
	for range maxTopicCASRetries {
		d, asg, stat, err := z.readTopic(ctx, tp.Topic)
		if err != nil {
			return 0, err
		}
		parts := d.partitionInfos(asg)
		if tp.Partition < 0 || int(tp.Partition) >= len(parts) {
			return 0, fmt.Errorf("%w: %s", ErrUnknownPartition, tp)
		}
		p := &parts[tp.Partition]
		if !p.Reassigning() || !slices.Equal(p.Replicas, replicas) || !slices.Equal(p.TargetReplicas(), target) {
			return 0, fmt.Errorf("%w: %s: its reassignment changed", ErrVersionConflict, tp)
		}
		p.Replicas, p.Adding, p.Removing = slices.Clone(target), nil, nil
		nasg := make([][]int32, len(parts))
		for i, p := range parts {
			nasg[i] = p.Replicas
		}
		nd := topicData(d.ID, nasg, d.Configs).withReassignments(parts)
		path := z.path(zTopic(tp.Topic))
		ops := []any{&zk.SetDataRequest{Path: path, Data: encodeZ(nd), Version: stat.Version}}
		if state != nil {
			sp := z.path(zState(tp.Topic, tp.Partition))
			ops = append(ops, &zk.SetDataRequest{Path: sp, Data: encodeZ(zStateData{Version: znodeVersion, PartitionState: state.State}), Version: state.Version})
		}
		res, failed, err := l.fenced(ctx, path, ops...)
		switch {
		case failed == 0 && errors.Is(err, zk.ErrBadVersion):
			continue
		case failed == 0 && errors.Is(err, zk.ErrNoNode):
			return 0, fmt.Errorf("%w: %s", ErrUnknownTopic, tp.Topic)
		case failed == 1:
			return 0, z.stateErr(ctx, tp, err)
		case err != nil:
			return 0, err
		}
		var version int32
		if state != nil {
			version = res[1].Stat.Version
		}
		return version, z.inLoop(ctx, func(c *zkCache) error {
			if err := c.loadTopic(tp.Topic, false); err != nil {
				return err
			}
			return c.loadState(tp.Topic, tp.Partition)
		})
	}
	return 0, fmt.Errorf("%w: topic %s kept changing", ErrUnavailable, tp.Topic)
}
