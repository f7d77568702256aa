package share

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/group"
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
	assignedIDs              map[[16]byte][]int32 // assignment by topic id, as stored
	lastSeen                 time.Time
}

// shareGroup is one share group's membership.
type shareGroup struct {
	id              string
	epoch           int32 // group epoch: bumped by member and metadata changes
	assignmentEpoch int32
	members         map[string]*member
	metadata        string // the subscribed topics' partition counts the assignment was made for
	// written is what __consumer_offsets holds of the group (Config.Store):
	// a store appends the difference to the group's state now. unsaved:
	// the last store was refused, so memory is ahead of written.
	written *group.ShareGroupState
	unsaved bool
}

// Groups is the membership of the share groups this broker coordinates
// (the group coordinator's half of KIP-932). It lives in memory and is
// kept durable in __consumer_offsets through Config.Store, with Kafka's
// ShareGroup* records; Restore brings it back when the coordinator loads
// a partition. A group outlives its members (state Empty) until
// DeleteGroups deletes it.
type Groups struct {
	cfg Config
	mu  struct {
		sync.Mutex
		groups map[string]*shareGroup
	}
}

func newGroups(cfg Config) *Groups {
	g := &Groups{cfg: cfg}
	g.mu.groups = map[string]*shareGroup{}
	return g
}

// Share group states, Kafka's ShareGroup.ShareGroupState names. Kafka's
// third, Dead, is a deleted group: here it is gone (GROUP_ID_NOT_FOUND).
const (
	StateEmpty  = "Empty"
	StateStable = "Stable"
)

// Exists reports whether a share group of that id exists here, with
// members or without.
func (gs *Groups) Exists(id string) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return gs.mu.groups[id] != nil
}

// HasMembers reports whether the share group of that id has members.
func (gs *Groups) HasMembers(id string) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	g := gs.mu.groups[id]
	return g != nil && len(g.members) > 0
}

// Listing is one share group as ListGroups shows it.
type Listing struct{ ID, State string }

// List returns the share groups this broker coordinates, by id: Stable
// with members, Empty without.
func (gs *Groups) List() []Listing {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	out := make([]Listing, 0, len(gs.mu.groups))
	for _, id := range slices.Sorted(maps.Keys(gs.mu.groups)) {
		out = append(out, Listing{ID: id, State: gs.mu.groups[id].stateLocked()})
	}
	return out
}

func (g *shareGroup) stateLocked() string {
	if len(g.members) == 0 {
		return StateEmpty
	}
	return StateStable
}

// Heartbeat serves ShareGroupHeartbeat for the group coordinator: join
// (member epoch 0), heartbeat, leave (-1). The caller checked that this
// broker coordinates the group and the request's authorization. A change
// of the group's state is appended to __consumer_offsets before the
// answer: NOT_COORDINATOR when the append failed, REQUEST_TIMED_OUT when
// ctx ended first (the change stays in memory and in the write queue,
// as a consumer group's does).
func (gs *Groups) Heartbeat(ctx context.Context, req *kmsg.ShareGroupHeartbeatRequest, clientID, clientHost string, topics Topics) *kmsg.ShareGroupHeartbeatResponse {
	resp, wait := gs.heartbeat(req, clientID, clientHost, topics)
	if code := group.AwaitStore(ctx.Done(), wait); code != 0 {
		out := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
		out.HeartbeatIntervalMillis, out.ErrorCode = resp.HeartbeatIntervalMillis, code
		return out
	}
	return resp
}

// heartbeat is Heartbeat up to the append it waits for.
func (gs *Groups) heartbeat(req *kmsg.ShareGroupHeartbeatRequest, clientID, clientHost string, topics Topics) (*kmsg.ShareGroupHeartbeatResponse, <-chan error) {
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	cfg := gs.cfg.GroupConfig(req.GroupID)
	resp.HeartbeatIntervalMillis = int32(cfg.HeartbeatInterval.Milliseconds())
	fail := func(err *kerr.Error, msg string) (*kmsg.ShareGroupHeartbeatResponse, <-chan error) {
		resp.ErrorCode, resp.ErrorMessage = err.Code, &msg
		return resp, nil
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
		g = &shareGroup{id: req.GroupID, members: map[string]*member{}}
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
		wait := gs.remove(g.id, m.id)
		id := req.MemberID
		resp.MemberID, resp.MemberEpoch = &id, -1
		return resp, wait
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
	// A heartbeat that changes nothing durable appends nothing.
	same := !changed && !g.unsaved && g.written != nil && m.clientID == clientID && m.clientHost == clientHost &&
		(req.RackID == nil || m.rack != nil && *m.rack == *req.RackID)
	epochs := [2]int32{g.epoch, g.assignmentEpoch}
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
	if same && m.epoch == before && epochs == [2]int32{g.epoch, g.assignmentEpoch} {
		return resp, nil
	}
	return resp, gs.storeLocked(g)
}

// assignLocked moves the group epoch on and assigns the group's
// partitions again when its members or subscriptions changed or the
// subscribed topics' partition counts did.
func (gs *Groups) assignLocked(g *shareGroup, topics Topics, changed bool) {
	subs := map[string][]string{}
	var all []string
	for id, m := range g.members {
		subs[id] = m.topics
		all = append(all, m.topics...)
	}
	if md := metadataOf(all, topics); md != g.metadata {
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
		m.assignedIDs = map[[16]byte][]int32{}
		for t, ps := range m.assignment {
			if tid, _, ok := topics.Topic(t); ok {
				m.assignedIDs[tid] = slices.Clone(ps)
			}
		}
	}
	g.assignmentEpoch = g.epoch
}

// metadataOf describes the partition counts of topics (names, any order)
// for assignLocked to tell when they changed.
func metadataOf(topicNames []string, topics Topics) string {
	all := slices.Clone(topicNames)
	slices.Sort(all)
	all = slices.Compact(all)
	md := ""
	for _, t := range all {
		_, n, _ := topics.Topic(t)
		md += t + "\x00" + strconv.Itoa(int(n)) + "\x00"
	}
	return md
}

// durableLocked is what __consumer_offsets is to hold of g.
func (g *shareGroup) durableLocked() *group.ShareGroupState {
	st := &group.ShareGroupState{ID: g.id, Epoch: g.epoch, AssignmentEpoch: g.assignmentEpoch, Members: map[string]group.ShareMemberState{}}
	if g.written != nil {
		st.StatePartitions = g.written.StatePartitions
	}
	for id, m := range g.members {
		st.Members[id] = group.ShareMemberState{
			RackID: m.rack, ClientID: m.clientID, ClientHost: m.clientHost,
			Topics: slices.Clone(m.topics),
			Target: m.assignedIDs, Assigned: m.assignedIDs,
			Epoch: m.epoch, PreviousEpoch: m.prevEpoch,
		}
	}
	return st
}

// storeLocked appends what changed of g to __consumer_offsets (nothing
// without a Config.Store) and returns the append's result channel, nil
// when nothing changed. A store refused by the coordinator (it no longer
// owns the partition) gives a channel with that error: the change is
// kept in memory and goes with the next store that succeeds.
func (gs *Groups) storeLocked(g *shareGroup) <-chan error {
	if gs.cfg.Store == nil {
		return nil
	}
	next := g.durableLocked()
	code, wait := gs.cfg.Store.StoreShareGroup(g.written, next)
	if code != 0 {
		g.unsaved = true
		ch := make(chan error, 1)
		ch <- kerr.ErrorForCode(code)
		return ch
	}
	g.written, g.unsaved = next, false
	return wait
}

// storeAsyncLocked is storeLocked for a change no request waits for (a
// session timeout): a failed append is logged.
func (gs *Groups) storeAsyncLocked(g *shareGroup) {
	wait := gs.storeLocked(g)
	if wait == nil {
		return
	}
	id := g.id
	go func() {
		if err := <-wait; err != nil {
			gs.cfg.Logger.Warn("share: writing share group state to __consumer_offsets failed", "group", id, "err", err)
		}
	}()
}

// remove removes a member that left, stores the change and tells
// MemberGone; the channel gets the store's result. The group stays,
// Empty when this was its last member.
func (gs *Groups) remove(groupID, memberID string) <-chan error {
	var wait <-chan error
	gs.mu.Lock()
	if g := gs.mu.groups[groupID]; g != nil && g.members[memberID] != nil {
		delete(g.members, memberID)
		g.epoch++
		wait = gs.storeLocked(g)
	}
	gs.mu.Unlock()
	if gs.cfg.MemberGone != nil {
		gs.cfg.MemberGone(groupID, memberID)
	}
	return wait
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
		removed := false
		for id, m := range g.members {
			if now.Sub(m.lastSeen) >= timeout {
				delete(g.members, id)
				g.epoch++
				removed = true
				out = append(out, gone{g.id, id})
			}
		}
		if removed {
			gs.storeAsyncLocked(g)
		}
	}
	return out
}

// Unload forgets the groups drop selects (this broker stopped
// coordinating them); the new coordinator restores them from
// __consumer_offsets (Restore), and their members heartbeat on there.
func (gs *Groups) Unload(drop func(group string) bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	for id := range gs.mu.groups {
		if drop(id) {
			delete(gs.mu.groups, id)
		}
	}
}

// Delete deletes the share group id, which must have no members: its
// records in __consumer_offsets get tombstones, and it is gone from
// memory once they are queued. GROUP_ID_NOT_FOUND for no such group,
// NON_EMPTY_GROUP for one with members; NOT_COORDINATOR when the
// tombstones could not be appended, REQUEST_TIMED_OUT when ctx ended
// first (they may still be appended).
func (gs *Groups) Delete(ctx context.Context, id string) int16 {
	gs.mu.Lock()
	g := gs.mu.groups[id]
	switch {
	case g == nil:
		gs.mu.Unlock()
		return kerr.GroupIDNotFound.Code
	case len(g.members) > 0:
		gs.mu.Unlock()
		return kerr.NonEmptyGroup.Code
	}
	var wait <-chan error
	if gs.cfg.Store != nil && g.written != nil {
		code, w := gs.cfg.Store.StoreShareGroup(g.written, nil)
		if code != 0 {
			gs.mu.Unlock()
			return code
		}
		wait = w
	}
	delete(gs.mu.groups, id)
	gs.mu.Unlock()
	return group.AwaitStore(ctx.Done(), wait)
}

// Restore makes the share groups a loaded partition of __consumer_offsets
// holds (group.LoadReport.ShareGroups) this broker's, as Kafka's
// coordinator does on load: each with its epochs, and its members with
// their subscriptions and assignments, their sessions started now (a
// member that is gone expires after share.session.timeout.ms; the others
// heartbeat on without joining again). A group already here is replaced.
func (gs *Groups) Restore(states []group.ShareGroupState, topics Topics) {
	now := gs.cfg.Now()
	gs.mu.Lock()
	defer gs.mu.Unlock()
	for _, st := range states {
		g := &shareGroup{id: st.ID, epoch: st.Epoch, assignmentEpoch: st.AssignmentEpoch, members: map[string]*member{}}
		var subscribed []string
		for id, sm := range st.Members {
			m := &member{
				id: id, clientID: sm.ClientID, clientHost: sm.ClientHost, rack: sm.RackID,
				epoch: sm.Epoch, prevEpoch: sm.PreviousEpoch,
				topics:     slices.Sorted(slices.Values(sm.Topics)),
				assignment: map[string][]int32{}, assignedIDs: map[[16]byte][]int32{},
				lastSeen: now,
			}
			m.topics = slices.Compact(m.topics)
			// The records name topics by id; the member's subscription
			// gives the names (a topic deleted since drops out).
			for _, t := range m.topics {
				if tid, _, ok := topics.Topic(t); ok {
					if ps, ok := sm.Target[tid]; ok {
						m.assignment[t] = slices.Clone(ps)
						m.assignedIDs[tid] = slices.Clone(ps)
					}
				}
			}
			subscribed = append(subscribed, m.topics...)
			g.members[id] = m
		}
		g.metadata = metadataOf(subscribed, topics)
		// What was read is what the log holds.
		written := st
		g.written = &written
		gs.mu.groups[st.ID] = g
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
	rg.GroupState = g.stateLocked()
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
