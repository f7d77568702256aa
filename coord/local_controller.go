package coord

import (
	"context"
	"fmt"
	"slices"
	"sort"
)

// localLeadership is a LocalSession's controller role.
type localLeadership struct {
	term
	ss *LocalSession
}

var _ Leadership = (*localLeadership)(nil)

// checkLocked fails unless l is still the store's controller.
func (l *localLeadership) checkLocked() error {
	s := l.ss.store
	if err := l.ss.checkLocked(); err != nil {
		return err
	}
	if s.mu.controller != l.ss || s.mu.file.ControllerEpoch != l.epoch || l.ss.mu.lead != l {
		l.end()
		return fmt.Errorf("%w: epoch %d is over (current %d)", ErrNotController, l.epoch, s.mu.file.ControllerEpoch)
	}
	return nil
}

// UpdatePartitionStates implements Leadership.
func (l *localLeadership) UpdatePartitionStates(ctx context.Context, updates []StateUpdate) ([]StateResult, error) {
	s := l.ss.store
	s.mu.Lock()
	defer s.mu.Unlock()
	res := make([]StateResult, len(updates))
	for i, u := range updates {
		if err := l.checkLocked(); err != nil {
			for j := i; j < len(updates); j++ {
				res[j].Err = err
			}
			return res, err
		}
		res[i].Version, res[i].Err = s.casStateLocked(u.Topic, u.Partition, u.State, u.Version)
	}
	return res, nil
}

// PendingRequests implements Leadership.
func (l *localLeadership) PendingRequests(ctx context.Context) ([]ControllerRequest, error) {
	s := l.ss.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := l.checkLocked(); err != nil {
		return nil, err
	}
	out := make([]ControllerRequest, 0, len(s.mu.requests))
	for id, r := range s.mu.requests {
		out = append(out, ControllerRequest{
			ID: id, Kind: r.wire.Kind, BrokerID: r.wire.BrokerID,
			Partitions: slices.Clone(r.wire.Partitions), Answered: r.wire.Answer != nil,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Answer implements Leadership.
func (l *localLeadership) Answer(ctx context.Context, req ControllerRequest, ans RequestAnswer) error {
	s := l.ss.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := l.checkLocked(); err != nil {
		return err
	}
	r, ok := s.mu.requests[req.ID]
	if !ok {
		return nil // the requester is gone
	}
	r.wire.Answer = answerToWire(l.epoch, ans)
	s.publishLocked(Event{Kind: EventRequests})
	return nil
}

// FinishTopicDeletion implements Leadership.
func (l *localLeadership) FinishTopicDeletion(ctx context.Context, topic string) error {
	s := l.ss.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := l.checkLocked(); err != nil {
		return err
	}
	return s.finishDeletionLocked(topic)
}

// Resign implements Leadership.
func (l *localLeadership) Resign(ctx context.Context) error {
	s := l.ss.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := l.checkLocked(); err != nil {
		return err
	}
	s.mu.controller = nil
	l.ss.mu.lead = nil
	l.end()
	s.publishLocked()
	return nil
}
