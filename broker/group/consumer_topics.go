package group

import (
	"context"
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

// TopicAuthorizer says which topics the sender of a ConsumerGroupHeartbeat
// may describe. The broker attaches it to the request's context with
// WithTopicAuthorizer; the topics a member's regular expression matches
// are filtered by it, as Kafka's consumerGroupHeartbeat filters a
// resolved regex by the member's DESCRIBE authorization, so a member is
// never assigned a topic its principal may not describe.
type TopicAuthorizer struct {
	// Principal names whose authorization this is (principal and host):
	// a member whose heartbeats come with another one resolves its
	// regex again.
	Principal string
	// MayDescribe reports whether the topic may be described; nil allows
	// every topic (no authorizer). It is called with a group's lock
	// held, and later again (when the topics change) after the request
	// ended: it must not call back into the Coordinator.
	MayDescribe func(topic string) bool
}

type topicAuthorizerKey struct{}

// WithTopicAuthorizer returns ctx carrying the request's topic
// authorization. A heartbeat whose ctx has none may see every topic.
func WithTopicAuthorizer(ctx context.Context, a TopicAuthorizer) context.Context {
	return context.WithValue(ctx, topicAuthorizerKey{}, a)
}

func topicAuthorizerFrom(ctx context.Context) TopicAuthorizer {
	a, _ := ctx.Value(topicAuthorizerKey{}).(TopicAuthorizer)
	return a
}

// setAuth records the authorization of the member's heartbeat and
// reports whether it differs from the one its regex was resolved with.
func (m *consumerMember) setAuth(a TopicAuthorizer) bool {
	changed := m.auth == nil || m.auth.Principal != a.Principal
	m.auth = &a
	return changed && m.regexRE != nil
}

// mayDescribe reports whether the member's regex may resolve to topic:
// by its principal's authorization, or, for a member restored by Load
// whose authorization is not known yet, if the log had it resolved so.
func (m *consumerMember) mayDescribe(topic string) bool {
	if m.auth == nil {
		_, ok := m.regexTopics[topic]
		return ok
	}
	return m.auth.MayDescribe == nil || m.auth.MayDescribe(topic)
}

// refreshSubscriptions resolves the members' subscriptions against the
// cluster's topics (a regex to the matching topics its member may
// describe) and, when the subscribed topics, their ids or partition
// counts, or what a member's regex resolves to changed (a topic was
// created, deleted, recreated or grew; the member's principal changed),
// bumps the group epoch so that a new target assignment follows (unless
// one is due already). It does nothing when neither the snapshot nor a
// subscription changed since the last call.
func (cg *consumerGroup) refreshSubscriptions(snap *TopicSnapshot) {
	if snap == cg.topicsSeen && !cg.subsChanged {
		return
	}
	cg.topicsSeen, cg.subsChanged = snap, false
	resolved := make(map[string]TopicMeta)
	regexChanged := false
	for _, m := range cg.members {
		for _, name := range m.topics {
			if t, ok := snap.byName[name]; ok {
				resolved[name] = t
			}
		}
		var matched map[string]struct{}
		if m.regexRE != nil {
			matched = make(map[string]struct{})
			for _, name := range snap.names {
				if m.regexRE.MatchString(name) && m.mayDescribe(name) {
					resolved[name] = snap.byName[name]
					matched[name] = struct{}{}
				}
			}
		}
		if !maps.Equal(matched, m.regexTopics) {
			regexChanged = true
		}
		m.regexTopics = matched
	}
	if !maps.Equal(resolved, cg.subscribedTopics) || regexChanged {
		cg.subscribedTopics = resolved
		if cg.epoch == cg.assignmentEpoch {
			cg.epoch++
		}
	}
}
