package share

import (
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topics resolves topic names and ids against the broker's metadata.
type Topics interface {
	// Topic returns a topic's id and partition count.
	Topic(name string) (id [16]byte, partitions int32, ok bool)
}

// member is one member of a share group.
type member struct {
	id, clientID, clientHost string
	rack                     *string
	epoch, prevEpoch         int32
	topics                   []string // subscribed, sorted
	assignment               map[string][]int32
	lastSeen                 time.Time
}

// group is one share group's membership.
type group struct {
	id              string
	epoch           int32 // group epoch: bumped by member and metadata changes
	assignmentEpoch int32
	members         map[string]*member
	metadata        string // the subscribed topics' partition counts the assignment was made for
}

// Groups is the membership of the share groups this broker coordinates
// (the group coordinator's half of KIP-932). It is kept in memory only.
type Groups struct {
	cfg Config
	mu  struct {
		sync.Mutex
		groups map[string]*group
	}
}

func newGroups(cfg Config) *Groups {
	g := &Groups{cfg: cfg}
	g.mu.groups = map[string]*group{}
	return g
}

// Exists reports whether a share group of that id exists here.
func (gs *Groups) Exists(id string) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.mu.groups[id] != nil
}

// IDs returns the ids of the share groups this broker coordinates, sorted
// (each has members: an empty share group is forgotten).
func (gs *Groups) IDs() []string {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return slices.Sorted(maps.Keys(gs.mu.groups))
}

// Heartbeat serves ShareGroupHeartbeat for the group coordinator: join
// (member epoch 0), heartbeat, leave (-1). The caller checked that this
// broker coordinates the group and the request's authorization.
func (gs *Groups) Heartbeat(req *kmsg.ShareGroupHeartbeatRequest, clientID, clientHost string, topics Topics) *kmsg.ShareGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	cfg := gs.cfg.GroupConfig(req.GroupID)
	resp.HeartbeatIntervalMillis = int32(cfg.HeartbeatInterval.Milliseconds())
	fail := func(err *kerr.Error, msg string) *kmsg.ShareGroupHeartbeatResponse {
		resp.ErrorCode, resp.ErrorMessage = err.Code, &msg
		return resp
	}
	switch {
	case req.GroupID == "":
		return fail(kerr.InvalidRequest, "GroupId can't be empty.")
	case req.MemberID == "" || len(req.MemberID) > 36:
		return fail(kerr.InvalidRequest, "MemberId must be a non-empty string of at most 36 characters.")
	case req.MemberEpoch < -1:
		return fail(kerr.InvalidRequest, "MemberEpoch is invalid.")
	case req.MemberEpoch == 0 && len(req.SubscribedTopicNames) == 0:
		return fail(kerr.InvalidRequest, "SubscribedTopicNames must be set in first request.")
	}
	gs.mu.Lock()
	g := gs.mu.groups[req.GroupID]
	if g == nil {
		if req.MemberEpoch != 0 {
			gs.mu.Unlock()
			if req.MemberEpoch == -1 {
				return fail(kerr.UnknownMemberID, "unknown member")
			}
			return fail(kerr.GroupIDNotFound, "share group not found")
		}
		if len(gs.mu.groups) >= gs.cfg.MaxGroups {
			gs.mu.Unlock()
			return fail(kerr.GroupMaxSizeReached, "the share group limit (group.share.max.groups) is reached")
		}
		g = &group{id: req.GroupID, members: map[string]*member{}}
		gs.mu.groups[req.GroupID] = g
	}
	now := gs.cfg.Now()
	m := g.members[req.MemberID]
	changed := false
	switch {
	case req.MemberEpoch == -1:
		gs.mu.Unlock()
		if m == nil {
			return fail(kerr.UnknownMemberID, "unknown member")
		}
		gs.remove(g.id, m.id)
		id := req.MemberID
		resp.MemberID, resp.MemberEpoch = &id, -1
		return resp
	case m == nil && req.MemberEpoch != 0:
		gs.mu.Unlock()
		return fail(kerr.UnknownMemberID, "unknown member")
	case m == nil:
		if len(g.members) >= gs.cfg.MaxGroupSize {
			gs.mu.Unlock()
			return fail(kerr.GroupMaxSizeReached, "the group is full (group.share.max.size)")
		}
		m = &member{id: req.MemberID}
		g.members[m.id] = m
		changed = true
	case req.MemberEpoch != 0 && req.MemberEpoch != m.epoch && req.MemberEpoch != m.prevEpoch:
		gs.mu.Unlock()
		return fail(kerr.FencedMemberEpoch, "the member epoch is fenced")
	}
	defer gs.mu.Unlock()
	m.clientID, m.clientHost, m.lastSeen = clientID, clientHost, now
	if req.RackID != nil {
		m.rack = req.RackID
	}
	if req.SubscribedTopicNames != nil {
		ts := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(ts)
		ts = slices.Compact(ts)
		if !slices.Equal(ts, m.topics) {
			m.topics = ts
			changed = true
		}
	}
	gs.assignLocked(g, topics, changed)
	before := m.epoch
	if m.epoch != g.assignmentEpoch {
		m.prevEpoch, m.epoch = m.epoch, g.assignmentEpoch
	}
	id := m.id
	resp.MemberID, resp.MemberEpoch = &id, m.epoch
	if req.MemberEpoch == 0 || req.SubscribedTopicNames != nil || m.epoch != before {
		a := &kmsg.ShareGroupHeartbeatResponseAssignment{}
		for _, t := range sortedKeys(m.assignment) {
			tid, _, ok := topics.Topic(t)
			if !ok {
				continue
			}
			tp := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			tp.TopicID, tp.Partitions = tid, slices.Clone(m.assignment[t])
			a.TopicPartitions = append(a.TopicPartitions, tp)
		}
		resp.Assignment = a
	}
	return resp
}

// assignLocked moves the group epoch on and assigns the group's
// partitions again when its members or subscriptions changed or the
// subscribed topics' partition counts did.
func (gs *Groups) assignLocked(g *group, topics Topics, changed bool) {
	subs := map[string][]string{}
	var all []string
	for id, m := range g.members {
		subs[id] = m.topics
		all = append(all, m.topics...)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	md := ""
	for _, t := range all {
		_, n, _ := topics.Topic(t)
		md += t + "\x00" + strconv.Itoa(int(n)) + "\x00"
	}
	if md != g.metadata {
		g.metadata = md
		changed = true
	}
	if changed {
		g.epoch++
	}
	if g.assignmentEpoch == g.epoch {
		return
	}
	a := assign(subs, func(t string) int32 {
		_, n, ok := topics.Topic(t)
		if !ok {
			return 0
		}
		return n
	})
	for id, m := range g.members {
		m.assignment = a[id]
	}
	g.assignmentEpoch = g.epoch
}

// remove removes a member (it left or its session timed out) and tells
// MemberGone.
func (gs *Groups) remove(groupID, memberID string) {
	gs.mu.Lock()
	if g := gs.mu.groups[groupID]; g != nil && g.members[memberID] != nil {
		delete(g.members, memberID)
		g.epoch++
		if len(g.members) == 0 {
			delete(gs.mu.groups, groupID)
		}
	}
	gs.mu.Unlock()
	if gs.cfg.MemberGone != nil {
		gs.cfg.MemberGone(groupID, memberID)
	}
}

// gone names a member removed by expire.
type gone struct{ group, member string }

// expire removes the members whose session timed out by now.
func (gs *Groups) expire(now time.Time) []gone {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	var out []gone
	for _, g := range gs.mu.groups {
		timeout := gs.cfg.GroupConfig(g.id).SessionTimeout
		for id, m := range g.members {
			if now.Sub(m.lastSeen) >= timeout {
				delete(g.members, id)
				g.epoch++
				out = append(out, gone{g.id, id})
			}
		}
		if len(g.members) == 0 {
			delete(gs.mu.groups, g.id)
		}
	}
	return out
}

// Unload forgets the groups drop selects (this broker stopped
// coordinating them); their members get UNKNOWN_MEMBER_ID from the new
// coordinator and join again.
func (gs *Groups) Unload(drop func(group string) bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	for id := range gs.mu.groups {
		if drop(id) {
			delete(gs.mu.groups, id)
		}
	}
}

// Describe fills ShareGroupDescribe's answer for one group id:
// GROUP_ID_NOT_FOUND when there is no such share group here.
func (gs *Groups) Describe(id string, topics Topics) kmsg.ShareGroupDescribeResponseGroup {
	rg := kmsg.NewShareGroupDescribeResponseGroup()
	rg.GroupID = id
	rg.AuthorizedOperations = -2147483648
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.mu.groups[id]
	if g == nil {
		rg.ErrorCode = kerr.GroupIDNotFound.Code
		msg := "Group " + id + " not found."
		rg.ErrorMessage = &msg
		return rg
	}
	rg.GroupState = "Stable"
	rg.GroupEpoch, rg.AssignmentEpoch, rg.Assignor = g.epoch, g.assignmentEpoch, AssignorName
	for _, mid := range sortedKeys(g.members) {
		m := g.members[mid]
		rm := kmsg.NewShareGroupDescribeResponseGroupMember()
		rm.MemberID, rm.RackID, rm.MemberEpoch, rm.ClientID, rm.ClientHost = m.id, m.rack, m.epoch, m.clientID, m.clientHost
		rm.SubscribedTopicNames = slices.Clone(m.topics)
		for _, t := range sortedKeys(m.assignment) {
			tp := kmsg.NewShareGroupDescribeResponseGroupMemberAssignmentTopicPartition()
			tp.TopicID, _, _ = topics.Topic(t)
			tp.Topic, tp.Partitions = t, slices.Clone(m.assignment[t])
			rm.Assignment.TopicPartitions = append(rm.Assignment.TopicPartitions, tp)
		}
		rg.Members = append(rg.Members, rm)
	}
	return rg
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
