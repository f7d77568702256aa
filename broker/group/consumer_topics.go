package group

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"sort"
)

// TopicMeta is what the consumer group coordinator needs to know of a
// topic: its id (the 848 protocol names topics by id) and its partition
// count.
type TopicMeta struct {
	Name       string
	ID         [16]byte
	Partitions int32
}

// TopicSnapshot is the cluster's topics at one moment, as the broker's
// metadata has them. It is immutable once built: the coordinator keeps a
// pointer to the one it last resolved subscriptions against and resolves
// again only when it gets another.
type TopicSnapshot struct {
	byName map[string]TopicMeta
	byID   map[[16]byte]TopicMeta
	names  []string // sorted
}

// NewTopicSnapshot returns a snapshot of the topics.
func NewTopicSnapshot(topics []TopicMeta) *TopicSnapshot {
	s := &TopicSnapshot{
		byName: make(map[string]TopicMeta, len(topics)),
		byID:   make(map[[16]byte]TopicMeta, len(topics)),
		names:  make([]string, 0, len(topics)),
	}
	for _, t := range topics {
		s.byName[t.Name] = t
		s.byID[t.ID] = t
		s.names = append(s.names, t.Name)
	}
	sort.Strings(s.names)
	return s
}

// Topic returns the named topic.
func (s *TopicSnapshot) Topic(name string) (TopicMeta, bool) {
	t, ok := s.byName[name]
	return t, ok
}

// TopicByID returns the topic with the id.
func (s *TopicSnapshot) TopicByID(id [16]byte) (TopicMeta, bool) {
	t, ok := s.byID[id]
	return t, ok
}

var emptyTopicSnapshot = NewTopicSnapshot(nil)

// ErrBadRegex is a SubscribedTopicRegex that does not compile.
var ErrBadRegex = errors.New("group: invalid subscribed topic regex")

// compileSubscriptionRegex compiles a SubscribedTopicRegex. Kafka compiles
// it with RE2/J and matches it against whole topic names; Go's regexp is
// RE2 too, so the pattern is anchored at both ends to match whole names.
func compileSubscriptionRegex(pattern string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(`^(?:` + pattern + `)$`)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", ErrBadRegex, pattern, err)
	}
	return re, nil
}

// topics returns the cluster's topics from Config.Topics.
func (c *Coordinator) topics() *TopicSnapshot {
	if c.cfg.Topics == nil {
		return emptyTopicSnapshot
	}
	if s := c.cfg.Topics(); s != nil {
		return s
	}
	return emptyTopicSnapshot
}

// refreshSubscriptions resolves the members' subscriptions against the
// cluster's topics and, when the subscribed topics, their ids or
// partition counts changed (a topic was created, deleted, recreated or
// grew), bumps the group epoch so that a new target assignment follows
// (unless one is due already). It does nothing when neither the
// snapshot nor a subscription changed since the last call.
func (cg *consumerGroup) refreshSubscriptions(snap *TopicSnapshot) {
	if snap == cg.topicsSeen && !cg.subsChanged {
		return
	}
	cg.topicsSeen, cg.subsChanged = snap, false
	resolved := make(map[string]TopicMeta)
	for _, m := range cg.members {
		for _, name := range m.topics {
			if t, ok := snap.byName[name]; ok {
				resolved[name] = t
			}
		}
		if m.regexRE != nil {
			for _, name := range snap.names {
				if m.regexRE.MatchString(name) {
					resolved[name] = snap.byName[name]
				}
			}
		}
	}
	if !maps.Equal(resolved, cg.subscribedTopics) {
		cg.subscribedTopics = resolved
		if cg.epoch == cg.assignmentEpoch {
			cg.epoch++
		}
	}
}
