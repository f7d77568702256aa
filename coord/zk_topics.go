package coord

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/go-zookeeper/zk"
)

var worldACL = zk.WorldACL(zk.PermAll)

// CreateTopic implements Coordinator: one transaction creates the topic,
// its partitions and their states, after checking (by creating and
// deleting it) that no deletion marker of the name exists.
func (z *ZK) CreateTopic(ctx context.Context, spec TopicSpec) (TopicInfo, error) {
	if err := spec.prepare(); err != nil {
		return TopicInfo{}, err
	}
	snap := z.Snapshot()
	states := initialStates(spec.Assignment, snap.Live, snap.Controller.Epoch)
	marker := z.path(zDeleteMarker(spec.Name))
	ops := []any{
		&zk.CreateRequest{Path: marker, Acl: worldACL},
		&zk.DeleteRequest{Path: marker, Version: -1},
		&zk.CreateRequest{Path: z.path(zTopic(spec.Name)), Data: encodeZ(topicData(spec.ID, spec.Assignment, spec.Configs)), Acl: worldACL},
		&zk.CreateRequest{Path: z.path(zPartitions(spec.Name)), Acl: worldACL},
	}
	ops = append(ops, z.partitionOps(spec.Name, 0, states)...)
	_, failed, err := z.multi(ctx, "create topic "+spec.Name, ops...)
	switch {
	case err == nil:
	case failed == 0 && errors.Is(err, zk.ErrNodeExists):
		return TopicInfo{}, fmt.Errorf("%w: %s: %w", ErrTopicExists, spec.Name, ErrTopicDeletionPending)
	case failed == 2 && errors.Is(err, zk.ErrNodeExists):
		return TopicInfo{}, fmt.Errorf("%w: %s", ErrTopicExists, spec.Name)
	default:
		return TopicInfo{}, err
	}
	t := TopicInfo{Name: spec.Name, ID: spec.ID, Configs: spec.Configs}
	for i, st := range states {
		t.Partitions = append(t.Partitions, PartitionInfo{Replicas: slices.Clone(spec.Assignment[i]), State: st, Version: 0})
	}
	z.refresh(ctx, "create topic "+spec.Name, func(c *zkCache) error { return c.loadTopic(spec.Name, true) })
	return *t.Clone(), nil
}

// partitionOps creates partitions/<n> and partitions/<n>/state for
// partitions first, first+1, ...
func (z *ZK) partitionOps(topic string, first int32, states []PartitionState) []any {
	var ops []any
	for i, st := range states {
		n := first + int32(i)
		ops = append(ops,
			&zk.CreateRequest{Path: z.path(zPartition(topic, n)), Acl: worldACL},
			&zk.CreateRequest{Path: z.path(zState(topic, n)), Data: encodeZ(zStateData{Version: znodeVersion, PartitionState: st}), Acl: worldACL})
	}
	return ops
}

// readTopic reads a topic znode.
func (z *ZK) readTopic(ctx context.Context, topic string) (zTopicData, [][]int32, *zk.Stat, error) {
	p := z.path(zTopic(topic))
	var data []byte
	var stat *zk.Stat
	err := z.call(ctx, "get", p, func() (err error) {
		data, stat, err = z.conn.Get(p)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return zTopicData{}, nil, nil, fmt.Errorf("%w: %s", ErrUnknownTopic, topic)
	}
	if err != nil {
		return zTopicData{}, nil, nil, err
	}
	var d zTopicData
	if err := decodeZ(p, data, &d); err != nil {
		return d, nil, nil, err
	}
	asg, err := d.assignment(p)
	return d, asg, stat, err
}

// AddPartitions implements Coordinator: the topic znode is rewritten with
// compare-and-set in the transaction that creates the new partitions.
func (z *ZK) AddPartitions(ctx context.Context, topic string, first int32, assignment [][]int32) error {
	if err := validateAssignment(assignment); err != nil {
		return err
	}
	for {
		d, asg, stat, err := z.readTopic(ctx, topic)
		if err != nil {
			return err
		}
		if z.pendingDeletion(ctx, topic) {
			return fmt.Errorf("%w: %s", ErrUnknownTopic, topic)
		}
		if int(first) != len(asg) {
			return fmt.Errorf("%w: %s has %d partitions, not %d", ErrInvalidPartitions, topic, len(asg), first)
		}
		snap := z.Snapshot()
		states := initialStates(assignment, snap.Live, snap.Controller.Epoch)
		nd := topicData(d.ID, append(asg, assignment...), d.Configs)
		nd.AddingReplicas, nd.RemovingReplicas = d.AddingReplicas, d.RemovingReplicas
		ops := append([]any{&zk.SetDataRequest{Path: z.path(zTopic(topic)), Data: encodeZ(nd), Version: stat.Version}},
			z.partitionOps(topic, first, states)...)
		_, failed, err := z.multi(ctx, "add partitions "+topic, ops...)
		if failed == 0 && errors.Is(err, zk.ErrBadVersion) {
			continue // changed meanwhile (configs?): look again
		}
		if err != nil {
			return err
		}
		return z.inLoop(ctx, func(c *zkCache) error { return c.loadTopic(topic, false) })
	}
}

func (z *ZK) pendingDeletion(ctx context.Context, topic string) bool {
	p := z.path(zDeleteMarker(topic))
	var ok bool
	err := z.call(ctx, "exists", p, func() (err error) {
		ok, _, err = z.conn.Exists(p)
		return err
	})
	return err == nil && ok
}

// SetTopicConfig implements Coordinator (read, then compare-and-set).
func (z *ZK) SetTopicConfig(ctx context.Context, topic string, configs map[string]string) error {
	for {
		d, asg, stat, err := z.readTopic(ctx, topic)
		if err != nil {
			return err
		}
		p := z.path(zTopic(topic))
		nd := topicData(d.ID, asg, configs)
		nd.AddingReplicas, nd.RemovingReplicas = d.AddingReplicas, d.RemovingReplicas
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
}

// DeleteTopic implements Coordinator.
func (z *ZK) DeleteTopic(ctx context.Context, topic string) error {
	marker := z.path(zDeleteMarker(topic))
	d, _, _, err := z.readTopic(ctx, topic)
	switch {
	case errors.Is(err, ErrUnknownTopic):
		if !z.pendingDeletion(ctx, topic) {
			return err
		}
	case err != nil:
		return err
	default:
		err = z.call(ctx, "create", marker, func() error {
			_, err := z.conn.Create(marker, encodeZ(zDeleteMarkerData{Version: znodeVersion, TopicID: d.ID}), zk.FlagPersistent, worldACL)
			return err
		})
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
		z.refresh(ctx, "create deletion marker of topic "+topic, func(c *zkCache) error { return c.loadPending() })
	}
	if z.hookAfterMarker != nil {
		if err := z.hookAfterMarker(); err != nil {
			return err
		}
	}
	if err := z.deleteTopicTree(ctx, topic); err != nil {
		return err
	}
	err = z.call(ctx, "delete", marker, func() error { return z.conn.Delete(marker, -1) })
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	return z.inLoop(ctx, func(c *zkCache) error {
		if err := c.loadTopics(); err != nil {
			return err
		}
		return c.loadPending()
	})
}

// deleteTopicTree deletes topics/<name> and everything under it, deepest
// first, in transactions of up to 256 deletions; already deleted znodes are
// skipped. It runs only while the deletion marker exists, so the name
// cannot have been reused.
func (z *ZK) deleteTopicTree(ctx context.Context, topic string) error {
	parts := z.path(zPartitions(topic))
	var kids []string
	err := z.call(ctx, "children", parts, func() (err error) {
		kids, _, err = z.conn.Children(parts)
		return err
	})
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	var paths []string
	for _, k := range kids {
		kp := parts + "/" + k
		var sub []string
		err := z.call(ctx, "children", kp, func() (err error) {
			sub, _, err = z.conn.Children(kp)
			return err
		})
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		for _, s := range sub {
			paths = append(paths, kp+"/"+s)
		}
		paths = append(paths, kp)
	}
	paths = append(paths, parts, z.path(zTopic(topic)))
	for len(paths) > 0 {
		n := min(len(paths), 256)
		batch := paths[:n]
		ops := make([]any, len(batch))
		for i, p := range batch {
			ops[i] = &zk.DeleteRequest{Path: p, Version: -1}
		}
		_, _, err := z.multi(ctx, "delete topic "+topic, ops...)
		if err != nil && (errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrNotEmpty)) {
			// Partly deleted before (a crash half-way), or a child we did
			// not list: go one by one.
			for _, p := range batch {
				err := z.call(ctx, "delete", p, func() error { return z.conn.Delete(p, -1) })
				if err != nil && !errors.Is(err, zk.ErrNoNode) {
					return err
				}
			}
		} else if err != nil {
			return err
		}
		paths = paths[n:]
	}
	return nil
}

// stateErr maps a failed state write to ErrVersionConflict, or to
// ErrUnknownTopic / ErrUnknownPartition.
func (z *ZK) stateErr(ctx context.Context, tp TopicPartition, err error) error {
	switch {
	case errors.Is(err, zk.ErrBadVersion):
		return fmt.Errorf("%w: %s", ErrVersionConflict, tp)
	case errors.Is(err, zk.ErrNoNode):
		if _, _, _, terr := z.readTopic(ctx, tp.Topic); errors.Is(terr, ErrUnknownTopic) {
			return terr
		}
		return fmt.Errorf("%w: %s", ErrUnknownPartition, tp)
	}
	return err
}

// PartitionState implements Coordinator.
func (z *ZK) PartitionState(ctx context.Context, topic string, partition int32) (PartitionState, int32, error) {
	p := z.path(zState(topic, partition))
	var data []byte
	var stat *zk.Stat
	err := z.call(ctx, "get", p, func() (err error) {
		data, stat, err = z.conn.Get(p)
		return err
	})
	if err != nil {
		return PartitionState{}, 0, z.stateErr(ctx, TopicPartition{topic, partition}, err)
	}
	var d zStateData
	if err := decodeZ(p, data, &d); err != nil {
		return PartitionState{}, 0, err
	}
	return d.PartitionState, stat.Version, nil
}

// UpdatePartitionState implements Coordinator.
func (z *ZK) UpdatePartitionState(ctx context.Context, topic string, partition int32, st PartitionState, version int32) (int32, error) {
	p := z.path(zState(topic, partition))
	var stat *zk.Stat
	err := z.call(ctx, "set", p, func() (err error) {
		stat, err = z.conn.Set(p, encodeZ(zStateData{Version: znodeVersion, PartitionState: st}), version)
		return err
	})
	if err != nil {
		return 0, z.stateErr(ctx, TopicPartition{topic, partition}, err)
	}
	z.refresh(ctx, "update partition state "+TopicPartition{topic, partition}.String(), func(c *zkCache) error { return c.loadState(topic, partition) })
	return stat.Version, nil
}
