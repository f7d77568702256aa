package coord

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// LocalSession is one session with a LocalStore; it implements
// Coordinator.
type LocalSession struct {
	store     *LocalStore
	hub       *hub
	ownsStore bool // opened by Open: Close closes the store

	// mu fields are guarded by store.mu.
	mu struct {
		reg         *BrokerInfo // registered info, renewed after expiry
		lead        *localLeadership
		partitioned bool // test hook: the session cannot reach the store
		closed      bool
	}
}

var _ Coordinator = (*LocalSession)(nil)

// checkLocked returns the error for a session that cannot act.
func (ss *LocalSession) checkLocked() error {
	switch {
	case ss.mu.closed || ss.store.mu.closed:
		return ErrClosed
	case ss.mu.partitioned:
		return fmt.Errorf("%w: embedded session partitioned", ErrUnavailable)
	}
	return nil
}

// ClusterID implements Coordinator.
func (ss *LocalSession) ClusterID() string { return ss.hub.snapshot().ClusterID }

// Snapshot implements Coordinator.
func (ss *LocalSession) Snapshot() *Snapshot { return ss.hub.snapshot() }

// Subscribe implements Coordinator.
func (ss *LocalSession) Subscribe() (*Snapshot, *Subscription) { return ss.hub.subscribe() }

// Register implements Coordinator. A Local store has no dead sessions
// to wait for: an id held by another session is refused at once.
func (ss *LocalSession) Register(ctx context.Context, b BrokerInfo) (int64, error) {
	s := ss.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ss.checkLocked(); err != nil {
		return 0, err
	}
	if ss.mu.reg != nil && ss.mu.reg.ID != b.ID {
		if r, ok := s.mu.brokers[ss.mu.reg.ID]; ok && r.owner == ss {
			delete(s.mu.brokers, ss.mu.reg.ID)
		}
	}
	return ss.registerLocked(b)
}

func (ss *LocalSession) registerLocked(b BrokerInfo) (int64, error) {
	s := ss.store
	if r, ok := s.mu.brokers[b.ID]; ok && r.owner != ss {
		return 0, fmt.Errorf("%w: broker id %d is registered by another live broker at %s:%d", ErrBrokerIDInUse, b.ID, r.info.Host, r.info.Port)
	}
	f := s.mu.file
	f.BrokerEpoch++
	if err := s.persistLocked(&f, s.mu.topics); err != nil {
		return 0, err
	}
	s.mu.file = f
	b.Epoch = f.BrokerEpoch
	s.mu.brokers[b.ID] = &localReg{info: b, owner: ss}
	reg := b
	ss.mu.reg = &reg
	s.publishLocked()
	return b.Epoch, nil
}

// Deregister implements Coordinator.
func (ss *LocalSession) Deregister(ctx context.Context) error {
	s := ss.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ss.checkLocked(); err != nil {
		return err
	}
	if ss.mu.reg == nil {
		return nil
	}
	if r, ok := s.mu.brokers[ss.mu.reg.ID]; ok && r.owner == ss {
		delete(s.mu.brokers, ss.mu.reg.ID)
		s.publishLocked()
	}
	ss.mu.reg = nil
	return nil
}

// Campaign implements Coordinator.
func (ss *LocalSession) Campaign(ctx context.Context, brokerID int32) (Leadership, error) {
	s := ss.store
	for {
		s.mu.Lock()
		if ss.mu.closed || s.mu.closed {
			s.mu.Unlock()
			return nil, ErrClosed
		}
		if !ss.mu.partitioned && s.mu.controller == nil {
			f := s.mu.file
			f.ControllerEpoch++
			if err := s.persistLocked(&f, s.mu.topics); err != nil {
				s.mu.Unlock()
				return nil, err
			}
			s.mu.file = f
			s.mu.controller, s.mu.ctrlID = ss, brokerID
			l := &localLeadership{term: term{epoch: f.ControllerEpoch, done: make(chan struct{})}, ss: ss}
			ss.mu.lead = l
			s.publishLocked()
			s.mu.Unlock()
			return l, nil
		}
		changed := s.mu.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// CreateTopic implements Coordinator.
func (ss *LocalSession) CreateTopic(ctx context.Context, spec TopicSpec) (TopicInfo, error) {
	if err := spec.prepare(); err != nil {
		return TopicInfo{}, err
	}
	s := ss.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ss.checkLocked(); err != nil {
		return TopicInfo{}, err
	}
	var created *TopicInfo
	err := s.mutateLocked(func(f *localFile, topics map[string]*TopicInfo) error {
		if _, ok := f.PendingDeletion[spec.Name]; ok {
			return fmt.Errorf("%w: %s: %w", ErrTopicExists, spec.Name, ErrTopicDeletionPending)
		}
		if _, ok := topics[spec.Name]; ok {
			return fmt.Errorf("%w: %s", ErrTopicExists, spec.Name)
		}
		t := &TopicInfo{Name: spec.Name, ID: spec.ID, Configs: maps.Clone(spec.Configs)}
		if t.Configs == nil {
			t.Configs = map[string]string{}
		}
		for i, st := range initialStates(spec.Assignment, s.liveLocked, f.ControllerEpoch) {
			t.Partitions = append(t.Partitions, PartitionInfo{Replicas: slices.Clone(spec.Assignment[i]), State: st})
		}
		topics[spec.Name] = t
		created = t
		return nil
	})
	if err != nil {
		return TopicInfo{}, err
	}
	return *created.Clone(), nil
}

// AddPartitions implements Coordinator.
func (ss *LocalSession) AddPartitions(ctx context.Context, topic string, first int32, assignment [][]int32) error {
	if err := validateAssignment(assignment); err != nil {
		return err
	}
	return ss.changeTopic(topic, func(f *localFile, t *TopicInfo) error {
		if int(first) != len(t.Partitions) {
			return fmt.Errorf("%w: %s has %d partitions, not %d", ErrInvalidPartitions, topic, len(t.Partitions), first)
		}
		for i, st := range initialStates(assignment, ss.store.liveLocked, f.ControllerEpoch) {
			t.Partitions = append(t.Partitions, PartitionInfo{Replicas: slices.Clone(assignment[i]), State: st})
		}
		return nil
	})
}

// SetTopicConfig implements Coordinator.
func (ss *LocalSession) SetTopicConfig(ctx context.Context, topic string, configs map[string]string) error {
	return ss.changeTopic(topic, func(_ *localFile, t *TopicInfo) error {
		t.Configs = maps.Clone(configs)
		if t.Configs == nil {
			t.Configs = map[string]string{}
		}
		return nil
	})
}

// changeTopic runs change on a copy of the topic, under the store's lock,
// and stores the copy, as mutateLocked does, if change returns nil.
// ErrUnknownTopic if there is no such topic.
func (ss *LocalSession) changeTopic(topic string, change func(f *localFile, t *TopicInfo) error) error {
	s := ss.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ss.checkLocked(); err != nil {
		return err
	}
	return s.mutateLocked(func(f *localFile, topics map[string]*TopicInfo) error {
		t, ok := topics[topic]
		if !ok {
			return fmt.Errorf("%w: %s", ErrUnknownTopic, topic)
		}
		nt := t.Clone()
		if err := change(f, nt); err != nil {
			return err
		}
		topics[topic] = nt
		return nil
	})
}

// DeleteTopic implements Coordinator.
func (ss *LocalSession) DeleteTopic(ctx context.Context, topic string) error {
	s := ss.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ss.checkLocked(); err != nil {
		return err
	}
	err := s.mutateLocked(func(f *localFile, topics map[string]*TopicInfo) error {
		t, ok := topics[topic]
		if !ok {
			if _, pending := f.PendingDeletion[topic]; pending {
				return nil // finish it below
			}
			return fmt.Errorf("%w: %s", ErrUnknownTopic, topic)
		}
		f.PendingDeletion[topic] = t.ID
		delete(topics, topic) // out of Topics from the marker on; the file keeps it until finished
		return nil
	})
	if err != nil {
		return err
	}
	if s.hookAfterMarker != nil {
		if err := s.hookAfterMarker(); err != nil {
			return err
		}
	}
	return s.finishDeletionLocked(topic)
}

// finishDeletionLocked removes topic's marker (the topic itself already
// left the state when the marker was written).
func (s *LocalStore) finishDeletionLocked(topic string) error {
	if _, ok := s.mu.file.PendingDeletion[topic]; !ok {
		return nil
	}
	return s.mutateLocked(func(f *localFile, topics map[string]*TopicInfo) error {
		delete(f.PendingDeletion, topic)
		return nil
	})
}

// partitionLocked returns a partition of a topic in the store.
func (s *LocalStore) partitionLocked(topic string, partition int32) (*TopicInfo, error) {
	t, ok := s.mu.topics[topic]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, topic)
	}
	if partition < 0 || int(partition) >= len(t.Partitions) {
		return nil, fmt.Errorf("%w: %s-%d", ErrUnknownPartition, topic, partition)
	}
	return t, nil
}

// PartitionState implements Coordinator.
func (ss *LocalSession) PartitionState(ctx context.Context, topic string, partition int32) (PartitionState, int32, error) {
	s := ss.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ss.checkLocked(); err != nil {
		return PartitionState{}, 0, err
	}
	t, err := s.partitionLocked(topic, partition)
	if err != nil {
		return PartitionState{}, 0, err
	}
	p := t.Partitions[partition]
	return p.State.Clone(), p.Version, nil
}

// UpdatePartitionState implements Coordinator.
func (ss *LocalSession) UpdatePartitionState(ctx context.Context, topic string, partition int32, st PartitionState, version int32) (int32, error) {
	s := ss.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ss.checkLocked(); err != nil {
		return 0, err
	}
	return s.casStateLocked(topic, partition, st, version)
}

func (s *LocalStore) casStateLocked(topic string, partition int32, st PartitionState, version int32) (int32, error) {
	var nv int32
	err := s.mutateLocked(func(f *localFile, topics map[string]*TopicInfo) error {
		t, err := s.partitionLocked(topic, partition)
		if err != nil {
			return err
		}
		if cur := t.Partitions[partition].Version; cur != version {
			return fmt.Errorf("%w: %s-%d is at version %d, not %d", ErrVersionConflict, topic, partition, cur, version)
		}
		nt := t.Clone()
		nv = version + 1
		nt.Partitions[partition].State = st.Clone()
		nt.Partitions[partition].Version = nv
		topics[topic] = nt
		return nil
	})
	return nv, err
}

// ControlledShutdown implements Coordinator.
func (ss *LocalSession) ControlledShutdown(ctx context.Context, brokerID int32) ([]TopicPartition, error) {
	ss.store.mu.Lock()
	if ss.mu.reg == nil || ss.mu.reg.ID != brokerID {
		ss.store.mu.Unlock()
		return nil, fmt.Errorf("%w: broker %d", ErrNotRegistered, brokerID)
	}
	ss.store.mu.Unlock()
	ans, err := ss.request(ctx, wireRequest{Version: 1, Kind: RequestControlledShutdown, BrokerID: brokerID}, false)
	if err != nil {
		return nil, err
	}
	return ans.Remaining, nil
}

// ReportOfflineReplicas implements Coordinator.
func (ss *LocalSession) ReportOfflineReplicas(ctx context.Context, brokerID int32, partitions []TopicPartition) ([]TopicPartition, error) {
	ss.store.mu.Lock()
	if ss.mu.reg == nil || ss.mu.reg.ID != brokerID {
		ss.store.mu.Unlock()
		return nil, fmt.Errorf("%w: broker %d", ErrNotRegistered, brokerID)
	}
	ss.store.mu.Unlock()
	ans, err := ss.request(ctx, wireRequest{Version: 1, Kind: RequestOfflineReplicas, BrokerID: brokerID, Partitions: slices.Clone(partitions)}, false)
	if err != nil {
		return nil, err
	}
	return ans.Remaining, nil
}

// ElectPreferredLeaders implements Coordinator.
func (ss *LocalSession) ElectPreferredLeaders(ctx context.Context, partitions []TopicPartition) ([]ElectionResult, error) {
	ans, err := ss.request(ctx, wireRequest{Version: 1, Kind: RequestPreferredElection, Partitions: slices.Clone(partitions)}, true)
	if err != nil {
		return nil, err
	}
	return ans.Results, nil
}

// request files a controller request and waits for its answer; remove
// deletes it once answered (else it lives as long as the session).
func (ss *LocalSession) request(ctx context.Context, w wireRequest, remove bool) (RequestAnswer, error) {
	s := ss.store
	s.mu.Lock()
	if err := ss.checkLocked(); err != nil {
		s.mu.Unlock()
		return RequestAnswer{}, err
	}
	s.mu.nextReq++
	id := "req-" + strconv.Itoa(s.mu.nextReq)
	s.mu.requests[id] = &localRequest{id: id, owner: ss, wire: w}
	s.publishLocked(Event{Kind: EventRequests})
	s.mu.Unlock()
	defer func() {
		if remove {
			s.mu.Lock()
			if _, ok := s.mu.requests[id]; ok {
				delete(s.mu.requests, id)
				s.publishLocked(Event{Kind: EventRequests})
			}
			s.mu.Unlock()
		}
	}()
	for {
		s.mu.Lock()
		r, ok := s.mu.requests[id]
		if err := ss.checkLocked(); err != nil || !ok {
			s.mu.Unlock()
			if err == nil {
				err = fmt.Errorf("%w: request %s vanished", ErrUnavailable, id)
			}
			return RequestAnswer{}, err
		}
		if r.wire.Answer != nil {
			a := r.wire.Answer.answer()
			s.mu.Unlock()
			return a, nil
		}
		changed := s.mu.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return RequestAnswer{}, fmt.Errorf("coord: waiting for the controller: %w", ctx.Err())
		}
	}
}

// Close implements Coordinator.
func (ss *LocalSession) Close() error {
	s := ss.store
	s.mu.Lock()
	if ss.mu.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	ss.mu.closed = true
	delete(s.mu.sessions, ss)
	if s.dropEphemeralsLocked(ss) && !s.mu.closed {
		s.publishLocked(Event{Kind: EventRequests})
	}
	s.mu.Unlock()
	ss.hub.close()
	if ss.ownsStore {
		return s.Close()
	}
	return nil
}

// partition cuts the session off the store, as a network partition
// longer than the session timeout would: its snapshot freezes
// (Connected false), its calls fail with ErrUnavailable, and the store
// expires the session (its ephemeral state goes). Test hook.
func (ss *LocalSession) partition() {
	s := ss.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss.mu.partitioned || ss.mu.closed {
		return
	}
	ss.mu.partitioned = true
	cur := ss.hub.snapshot().shallow()
	cur.Connected = false
	ss.hub.publish(cur, Event{Kind: EventDisconnected, Err: fmt.Errorf("%w: embedded session partitioned", ErrUnavailable)})
	if s.dropEphemeralsLocked(ss) {
		s.publishLocked(Event{Kind: EventRequests})
	}
}

// heal ends a partition: the session gets a new session, registers again
// and catches up. Test hook.
func (ss *LocalSession) heal() {
	s := ss.store
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ss.mu.partitioned || ss.mu.closed {
		return
	}
	ss.mu.partitioned = false
	var regErr error
	if ss.mu.reg != nil {
		_, regErr = ss.registerLocked(*ss.mu.reg)
	}
	ss.hub.publish(s.snapshotLocked(true), Event{Kind: EventSessionExpired})
	if regErr != nil {
		ss.mu.reg = nil
		ss.hub.publish(s.snapshotLocked(true), Event{Kind: EventRegistrationLost, Err: regErr})
	}
}
