package coord

import (
	"context"
	"fmt"
	"slices"
)

// AlterPartitionReassignments implements Coordinator: per topic, one
// file write with every change of that topic that was accepted.
func (ss *LocalSession) AlterPartitionReassignments(ctx context.Context, changes []ReassignmentChange) []error {
	errs := make([]error, len(changes))
	order, byTopic := changesByTopic(changes)
	for _, topic := range order {
		idx := byTopic[topic]
		err := ss.changeTopic(topic, func(_ *localFile, t *TopicInfo) error {
			applied := 0
			for _, i := range idx {
				ch := changes[i]
				if ch.Partition < 0 || int(ch.Partition) >= len(t.Partitions) {
					errs[i] = fmt.Errorf("%w: %s", ErrUnknownPartition, ch.TopicPartition)
					continue
				}
				if errs[i] = applyReassignment(&t.Partitions[ch.Partition], ch, ss.store.liveLocked); errs[i] == nil {
					applied++
				}
			}
			if applied == 0 {
				return errNothingToWrite
			}
			return nil
		})
		if err != nil && err != errNothingToWrite {
			for _, i := range idx {
				if errs[i] == nil {
					errs[i] = err
				}
			}
		}
	}
	return errs
}

// errNothingToWrite makes changeTopic write nothing; never returned.
var errNothingToWrite = fmt.Errorf("coord: nothing to write")

// CompleteReassignment implements Leadership.
func (l *localLeadership) CompleteReassignment(ctx context.Context, tp TopicPartition, replicas, target []int32, state *StateUpdate) (int32, error) {
	s := l.ss.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := l.checkLocked(); err != nil {
		return 0, err
	}
	var version int32
	err := s.mutateLocked(func(f *localFile, topics map[string]*TopicInfo) error {
		t, err := s.partitionLocked(tp.Topic, tp.Partition)
		if err != nil {
			return err
		}
		p := t.Partitions[tp.Partition]
		if !p.Reassigning() || !slices.Equal(p.Replicas, replicas) || !slices.Equal(p.TargetReplicas(), target) {
			return fmt.Errorf("%w: %s: its reassignment changed", ErrVersionConflict, tp)
		}
		nt := t.Clone()
		np := &nt.Partitions[tp.Partition]
		np.Replicas, np.Adding, np.Removing = slices.Clone(target), nil, nil
		if state != nil {
			if p.Version != state.Version {
				return fmt.Errorf("%w: %s is at version %d, not %d", ErrVersionConflict, tp, p.Version, state.Version)
			}
			np.State, np.Version = state.State.Clone(), p.Version+1
			version = np.Version
		}
		topics[tp.Topic] = nt
		return nil
	})
	return version, err
}
