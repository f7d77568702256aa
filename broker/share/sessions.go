package share

import (
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TopicPartition names a partition by topic id.
type TopicPartition struct {
	TopicID   [16]byte
	Partition int32
}

// SessionKey names a share session: a member of a group, on this broker.
type SessionKey struct {
	Group, Member string
}

// session is one share session: the partitions a member fetches from
// this broker, and the epoch its next request must carry.
type session struct {
	epoch int32
	parts map[TopicPartition]struct{}
	owner any // the connection that opened it
}

// Sessions is a broker's share session cache (Kafka's
// ShareSessionCache): epoch 0 opens a session, each request after
// carries the next epoch, -1 closes it.
type Sessions struct {
	max int
	mu  struct {
		sync.Mutex
		m map[SessionKey]*session
	}
}

func newSessions(max int) *Sessions {
	s := &Sessions{max: max}
	s.mu.m = map[SessionKey]*session{}
	return s
}

// Open opens a session for k with parts, replacing one k had (whose
// partitions are returned in old, for their records to be released).
// SHARE_SESSION_LIMIT_REACHED when the cache is full.
func (s *Sessions) Open(k SessionKey, parts []TopicPartition, owner any) (old []TopicPartition, code int16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev := s.mu.m[k]; prev != nil {
		old = sortedParts(prev.parts)
		delete(s.mu.m, k)
	}
	if len(s.mu.m) >= s.max {
		return old, kerr.ShareSessionLimitReached.Code
	}
	ns := &session{epoch: 1, parts: map[TopicPartition]struct{}{}, owner: owner}
	for _, tp := range parts {
		ns.parts[tp] = struct{}{}
	}
	s.mu.m[k] = ns
	return old, 0
}

// Update checks epoch against k's session, adds and forgets partitions,
// and moves the session to the next epoch. It returns the session's
// partitions. SHARE_SESSION_NOT_FOUND without a session,
// INVALID_SHARE_SESSION_EPOCH when epoch is not the one expected.
func (s *Sessions) Update(k SessionKey, epoch int32, add, forget []TopicPartition) ([]TopicPartition, int16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.mu.m[k]
	if ss == nil {
		return nil, kerr.ShareSessionNotFound.Code
	}
	if epoch != ss.epoch {
		return nil, kerr.InvalidShareSessionEpoch.Code
	}
	for _, tp := range add {
		ss.parts[tp] = struct{}{}
	}
	for _, tp := range forget {
		delete(ss.parts, tp)
	}
	ss.epoch++
	if ss.epoch < 1 {
		ss.epoch = 1
	}
	return sortedParts(ss.parts), 0
}

// Parts returns the partitions of k's session, nil without one.
func (s *Sessions) Parts(k SessionKey) []TopicPartition {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.mu.m[k]; ss != nil {
		return sortedParts(ss.parts)
	}
	return nil
}

// Close removes k's session and returns its partitions.
// SHARE_SESSION_NOT_FOUND without one.
func (s *Sessions) Close(k SessionKey) ([]TopicPartition, int16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.mu.m[k]
	if ss == nil {
		return nil, kerr.ShareSessionNotFound.Code
	}
	delete(s.mu.m, k)
	return sortedParts(ss.parts), 0
}

// CloseOwned removes the sessions owner opened (its connection closed)
// and returns them with their partitions.
func (s *Sessions) CloseOwned(owner any) map[SessionKey][]TopicPartition {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[SessionKey][]TopicPartition{}
	for k, ss := range s.mu.m {
		if ss.owner == owner {
			out[k] = sortedParts(ss.parts)
			delete(s.mu.m, k)
		}
	}
	return out
}

// CloseMember removes the sessions of a member that left its group.
func (s *Sessions) CloseMember(group, member string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.m, SessionKey{Group: group, Member: member})
}

// HasGroup reports whether a member of group has a session open here.
func (s *Sessions) HasGroup(group string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.mu.m {
		if k.Group == group {
			return true
		}
	}
	return false
}

// Len returns the number of open sessions.
func (s *Sessions) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.m)
}

func sortedParts(m map[TopicPartition]struct{}) []TopicPartition {
	out := make([]TopicPartition, 0, len(m))
	for tp := range m {
		out = append(out, tp)
	}
	slices.SortFunc(out, func(a, b TopicPartition) int {
		if c := slices.Compare(a.TopicID[:], b.TopicID[:]); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return out
}
