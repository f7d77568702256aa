package coord

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
)

// EventKind says what an Event reports.
type EventKind int

// Event kinds.
const (
	// EventBrokers: the live broker set, or a broker's registration
	// (info, epoch), changed.
	EventBrokers EventKind = iota + 1
	// EventController: the controller or its epoch changed.
	EventController
	// EventTopic: Topic was created, or its assignment (partitions
	// added, a reassignment started, changed or ended) or configs
	// changed.
	EventTopic
	// EventTopicDeleted: Topic (ID TopicID) left Snapshot.Topics, because
	// its deletion is pending or done. Brokers delete its logs.
	EventTopicDeleted
	// EventPartition: the state of Topic's Partition changed.
	EventPartition
	// EventDisconnected: the coordination service became unreachable
	// (Err says why). Snapshot stays readable; writes fail with
	// ErrUnavailable.
	EventDisconnected
	// EventReconnected: the connection is back with the same session;
	// ephemeral state survived.
	EventReconnected
	// EventSessionExpired: the session had expired; a new one is
	// established, the registration renewed (new broker epoch) and any
	// Leadership ended.
	EventSessionExpired
	// EventRegistrationLost: after a session expiry the broker could not
	// register again (Err, e.g. ErrBrokerIDInUse). The broker should
	// stop.
	EventRegistrationLost
	// EventRequests: controller requests were added or removed (for the
	// controller).
	EventRequests
)

var eventNames = map[EventKind]string{
	EventBrokers: "brokers", EventController: "controller", EventTopic: "topic",
	EventTopicDeleted: "topic-deleted", EventPartition: "partition",
	EventDisconnected: "disconnected", EventReconnected: "reconnected",
	EventSessionExpired: "session-expired", EventRegistrationLost: "registration-lost",
	EventRequests: "requests",
}

func (k EventKind) String() string {
	if s, ok := eventNames[k]; ok {
		return s
	}
	return "unknown"
}

// Event is one change, with the snapshot that includes it.
type Event struct {
	Kind EventKind
	// Topic, TopicID and Partition name what changed, for topic and
	// partition events.
	Topic     string
	TopicID   TopicID
	Partition int32
	// Err is the cause, for EventDisconnected and EventRegistrationLost.
	Err error
	// Snapshot is the cluster state right after this change.
	Snapshot *Snapshot
}

// Subscription delivers events; see Coordinator.Subscribe.
type Subscription struct {
	c    chan Event
	wake chan struct{}
	done chan struct{}
	once sync.Once

	mu struct {
		sync.Mutex
		queue []Event
	}
}

func newSubscription() *Subscription {
	s := &Subscription{c: make(chan Event), wake: make(chan struct{}, 1), done: make(chan struct{})}
	go s.pump()
	return s
}

// Events is the channel of events. It is closed after Close, or when the
// coordinator is closed.
func (s *Subscription) Events() <-chan Event { return s.c }

// Close ends the subscription.
func (s *Subscription) Close() { s.once.Do(func() { close(s.done) }) }

func (s *Subscription) push(evs []Event) {
	s.mu.Lock()
	s.mu.queue = append(s.mu.queue, evs...)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// pump moves queued events to the channel, so a slow subscriber never
// blocks the publisher.
func (s *Subscription) pump() {
	defer close(s.c)
	for {
		s.mu.Lock()
		if len(s.mu.queue) == 0 {
			s.mu.Unlock()
			select {
			case <-s.wake:
				continue
			case <-s.done:
				return
			}
		}
		ev := s.mu.queue[0]
		s.mu.queue[0] = Event{}
		s.mu.queue = s.mu.queue[1:]
		s.mu.Unlock()
		select {
		case s.c <- ev:
		case <-s.done:
			return
		}
	}
}

// hub holds the current snapshot and fans changes out to subscriptions.
// Publishing is serialized by mu; readers load the snapshot without it.
type hub struct {
	cur atomic.Pointer[Snapshot]

	mu struct {
		sync.Mutex
		subs   map[*Subscription]struct{}
		closed bool
	}
}

func newHub(s *Snapshot) *hub {
	h := &hub{}
	h.cur.Store(s)
	h.mu.subs = map[*Subscription]struct{}{}
	return h
}

func (h *hub) snapshot() *Snapshot { return h.cur.Load() }

// publish makes next current (unless nothing changed and there are no
// extra events) and delivers the changes from the previous snapshot,
// then extra (session events), each carrying next. next must be a fresh
// value not yet shared.
func (h *hub) publish(next *Snapshot, extra ...Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.closed {
		return
	}
	prev := h.cur.Load()
	evs := diff(prev, next)
	evs = append(evs, extra...)
	if len(evs) == 0 && prev.Connected == next.Connected && maps.Equal(prev.PendingDeletion, next.PendingDeletion) {
		return
	}
	next.Seq = prev.Seq + 1
	h.cur.Store(next)
	for i := range evs {
		evs[i].Snapshot = next
	}
	for s := range h.mu.subs {
		select {
		case <-s.done:
			delete(h.mu.subs, s)
		default:
			s.push(evs)
		}
	}
}

func (h *hub) subscribe() (*Snapshot, *Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := newSubscription()
	if h.mu.closed {
		s.Close()
		return h.cur.Load(), s
	}
	h.mu.subs[s] = struct{}{}
	return h.cur.Load(), s
}

func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.closed = true
	for s := range h.mu.subs {
		s.Close()
	}
	h.mu.subs = nil
}

// diff lists the changes from a to b (session events excluded).
func diff(a, b *Snapshot) []Event {
	var evs []Event
	if !slices.EqualFunc(a.Brokers, b.Brokers, BrokerInfo.Equal) {
		evs = append(evs, Event{Kind: EventBrokers})
	}
	if a.Controller != b.Controller {
		evs = append(evs, Event{Kind: EventController})
	}
	for _, name := range sortedKeys(a.Topics) {
		ot := a.Topics[name]
		if nt, ok := b.Topics[name]; !ok || nt.ID != ot.ID {
			evs = append(evs, Event{Kind: EventTopicDeleted, Topic: name, TopicID: ot.ID})
		}
	}
	for _, name := range sortedKeys(b.Topics) {
		nt := b.Topics[name]
		ot, ok := a.Topics[name]
		if ok && ot == nt {
			continue
		}
		if !ok || ot.ID != nt.ID {
			evs = append(evs, Event{Kind: EventTopic, Topic: name, TopicID: nt.ID})
			continue
		}
		changed := !maps.Equal(ot.Configs, nt.Configs) || len(ot.Partitions) != len(nt.Partitions)
		for i := 0; i < len(ot.Partitions) && i < len(nt.Partitions) && !changed; i++ {
			op, np := ot.Partitions[i], nt.Partitions[i]
			changed = !slices.Equal(op.Replicas, np.Replicas) || !slices.Equal(op.Adding, np.Adding) || !slices.Equal(op.Removing, np.Removing)
		}
		if changed {
			evs = append(evs, Event{Kind: EventTopic, Topic: name, TopicID: nt.ID})
		}
		for i := range nt.Partitions {
			if i >= len(ot.Partitions) {
				continue // announced by EventTopic
			}
			op, np := ot.Partitions[i], nt.Partitions[i]
			if op.Version != np.Version || !op.State.Equal(np.State) {
				evs = append(evs, Event{Kind: EventPartition, Topic: name, TopicID: nt.ID, Partition: int32(i)})
			}
		}
	}
	return evs
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
