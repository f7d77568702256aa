package group

// The rebalance machinery: the timers of sessions, of the join phase and of
// the sync phase, and the transitions they drive (see doc.go).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// awaitPhase is the answer to a JoinGroup or SyncGroup: r at once when
// wait is nil, else what the join or sync phase sends on wait, or, once
// ctx is done first, abandon's (which takes the member out of the phase).
func awaitPhase[R any](ctx context.Context, wait <-chan R, r R, abandon func() R) R {
	if wait == nil {
		return r
	}
	select {
	case r := <-wait:
		return r
	case <-ctx.Done():
		return abandon()
	}
}

func (g *group) addPendingLocked(id string, session time.Duration) {
	pj := &pendingJoin{}
	pj.timer = g.c.cfg.timers.afterFunc(session, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.pending[id] != pj {
			return
		}
		delete(g.pending, id)
		g.tryCompleteJoinLocked()
	})
	g.pending[id] = pj
}

func (g *group) removePendingLocked(id string) {
	if pj := g.pending[id]; pj != nil {
		pj.timer.Stop()
		delete(g.pending, id)
	}
}

// heartbeatLocked pushes the member's session deadline out by its session
// timeout.
func (g *group) heartbeatLocked(m *member) {
	m.deadline = g.c.cfg.timers.now().Add(m.sessionTimeout)
	if m.timer == nil {
		m.timer = g.c.cfg.timers.afterFunc(m.sessionTimeout, func() { g.onSessionTimer(m) })
		return
	}
	m.timer.Reset(m.sessionTimeout)
}

func (g *group) onSessionTimer(m *member) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == StateDead || g.members[m.id] != m {
		return
	}
	if m.joinWait != nil || m.syncWait != nil {
		// A member waiting in JoinGroup or SyncGroup is alive.
		m.timer.Reset(m.sessionTimeout)
		return
	}
	if left := m.deadline.Sub(g.c.cfg.timers.now()); left > 0 {
		m.timer.Reset(left)
		return
	}
	g.c.cfg.Logger.Info("group: member session expired", "group", g.id, "member", m.id, "generation", g.generation)
	g.removeMemberAndUpdateLocked(m)
}

// rebalanceTimeoutLocked is the longest rebalance timeout of the members.
func (g *group) rebalanceTimeoutLocked() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// maybePrepareRebalanceLocked starts a rebalance unless one is being
// prepared (or the group is Dead).
func (g *group) maybePrepareRebalanceLocked() {
	switch g.state {
	case StateStable, StateCompletingRebalance, StateEmpty:
		g.prepareRebalanceLocked()
	}
}

// prepareRebalanceLocked moves the group to PreparingRebalance: members
// waiting in SyncGroup are told REBALANCE_IN_PROGRESS, and the join phase
// ends when every member has rejoined or the rebalance timeout passes
// (from Empty: after the initial delay, extended while members keep
// coming, up to the rebalance timeout).
func (g *group) prepareRebalanceLocked() {
	if g.state == StateCompletingRebalance {
		g.resetAssignmentsLocked(kerr.RebalanceInProgress.Code)
	}
	g.stopSyncTimerLocked()
	wasEmpty := g.state == StateEmpty
	g.transitionLocked(StatePreparingRebalance)
	g.rebalanceSeq++
	timeout := g.rebalanceTimeoutLocked()
	g.newMemberAdded = false
	if wasEmpty {
		delay := g.c.cfg.InitialRebalanceDelay
		g.initialDelay = true
		g.delayRemaining = max(timeout-delay, 0)
		g.armRebalanceLocked(delay)
		return
	}
	g.initialDelay = false
	g.armRebalanceLocked(timeout)
}

func (g *group) armRebalanceLocked(d time.Duration) {
	if g.rebalanceTimer != nil {
		g.rebalanceTimer.Stop()
	}
	seq := g.rebalanceSeq
	g.rebalanceTimer = g.c.cfg.timers.afterFunc(d, func() { g.onRebalanceTimer(seq) })
}

func (g *group) onRebalanceTimer(seq uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state != StatePreparingRebalance || seq != g.rebalanceSeq {
		return
	}
	if g.initialDelay {
		if g.newMemberAdded && g.delayRemaining > 0 {
			g.newMemberAdded = false
			d := min(g.c.cfg.InitialRebalanceDelay, g.delayRemaining)
			g.delayRemaining -= d
			g.armRebalanceLocked(d)
			return
		}
		g.initialDelay = false
	}
	g.completeJoinLocked()
}

// tryCompleteJoinLocked ends the join phase early once every member has
// rejoined and no member id handed out with MEMBER_ID_REQUIRED is still
// expected back.
func (g *group) tryCompleteJoinLocked() {
	if g.state == StatePreparingRebalance && !g.initialDelay &&
		g.awaitingJoin == len(g.members) && len(g.pending) == 0 {
		g.completeJoinLocked()
	}
}

// completeJoinLocked ends the join phase: dynamic members that did not
// rejoin are dropped, the generation goes up, a protocol is selected and
// every waiting member gets its JoinGroup answer (the leader with the
// member list). A group left without members becomes Empty.
func (g *group) completeJoinLocked() {
	if g.rebalanceTimer != nil {
		g.rebalanceTimer.Stop()
		g.rebalanceTimer = nil
	}
	for _, m := range g.sortedMembersLocked() {
		if m.joinWait == nil && m.instanceID == nil {
			g.c.cfg.Logger.Info("group: member did not rejoin in time", "group", g.id, "member", m.id)
			g.removeMemberLocked(m, kerr.UnknownMemberID.Code)
		}
	}
	if len(g.members) > 0 && !g.electJoinedLeaderLocked() {
		// Only static members that have not rejoined are left: wait
		// another rebalance timeout for them or their session expiry.
		g.armRebalanceLocked(g.rebalanceTimeoutLocked())
		return
	}
	g.generation++
	g.pendingSync = nil
	if len(g.members) == 0 {
		g.protocol, g.leader, g.subscribed = "", "", nil
		g.transitionLocked(StateEmpty)
		gen := g.generation
		err := g.storeLocked(nil, func(err error) {
			if err != nil {
				g.c.cfg.Logger.Warn("group: writing empty group failed", "group", g.id, "generation", gen, "err", err)
			}
		})
		if err != nil {
			g.c.cfg.Logger.Warn("group: writing empty group failed", "group", g.id, "generation", gen, "err", err)
		}
		return
	}
	g.protocol = g.selectProtocolLocked()
	g.subscribed = g.subscribedTopicsLocked()
	g.transitionLocked(StateCompletingRebalance)
	g.pendingSync = make(map[string]struct{}, len(g.members))
	members := g.sortedMembersLocked()
	// Every session deadline moves before any answer leaves (see
	// storeAssignmentLocked).
	for _, m := range members {
		m.isNew = false
		g.heartbeatLocked(m)
		g.pendingSync[m.id] = struct{}{}
	}
	for _, m := range members {
		if m.joinWait != nil {
			g.deliverJoinLocked(m, g.joinResultLocked(m.id))
		}
	}
	g.armSyncTimerLocked(g.rebalanceTimeoutLocked())
	g.c.cfg.Logger.Debug("group: join phase complete", "group", g.id, "generation", g.generation,
		"protocol", g.protocol, "leader", g.leader, "members", len(g.members))
}

// electJoinedLeaderLocked keeps the leader if it rejoined, else makes the
// earliest rejoined member leader. It reports false when nobody rejoined.
func (g *group) electJoinedLeaderLocked() bool {
	if l := g.members[g.leader]; l != nil && l.joinWait != nil {
		return true
	}
	for _, m := range g.sortedMembersLocked() {
		if m.joinWait != nil {
			g.leader = m.id
			return true
		}
	}
	return false
}

// selectProtocolLocked picks, among the protocols every member supports,
// the one most members list first among those; ties go to the leader's
// preference.
func (g *group) selectProtocolLocked() string {
	n := len(g.members)
	counts := make(map[string]int)
	for _, m := range g.members {
		for _, p := range m.protocols {
			if g.votes[p.Name] == n {
				counts[p.Name]++
				break
			}
		}
	}
	ref := g.members[g.leader]
	if ref == nil {
		ref = g.sortedMembersLocked()[0]
	}
	best, bestVotes := "", 0
	for _, p := range ref.protocols {
		if g.votes[p.Name] == n && (best == "" || counts[p.Name] > bestVotes) {
			best, bestVotes = p.Name, counts[p.Name]
		}
	}
	if best == "" && len(ref.protocols) > 0 {
		// Joins are checked so that a common protocol always exists;
		// this keeps the group going if that ever fails.
		best = ref.protocols[0].Name
	}
	return best
}

// subscribedTopicsLocked reads the topics of a "consumer" group's
// subscriptions; nil when not a consumer group or a subscription does not
// parse (then every topic counts as subscribed).
func (g *group) subscribedTopicsLocked() map[string]struct{} {
	if g.protocolType != consumerProtocolType || g.protocol == "" {
		return nil
	}
	topics := make(map[string]struct{})
	for _, m := range g.members {
		var md kmsg.ConsumerMemberMetadata
		if err := md.ReadFrom(m.metadataFor(g.protocol)); err != nil {
			return nil
		}
		for _, t := range md.Topics {
			topics[t] = struct{}{}
		}
	}
	return topics
}

func (g *group) joinResultLocked(memberID string) joinResult {
	r := joinResult{
		memberID:     memberID,
		generation:   g.generation,
		protocolType: g.protocolType,
		protocol:     g.protocol,
		leader:       g.leader,
	}
	if memberID == g.leader {
		ms := g.sortedMembersLocked()
		r.members = make([]kmsg.JoinGroupResponseMember, 0, len(ms))
		for _, m := range ms {
			r.members = append(r.members, kmsg.JoinGroupResponseMember{
				MemberID:         m.id,
				InstanceID:       m.instanceID,
				ProtocolMetadata: m.metadataFor(g.protocol),
			})
		}
	}
	return r
}

func (g *group) armSyncTimerLocked(d time.Duration) {
	if g.syncTimer != nil {
		g.syncTimer.Stop()
	}
	gen := g.generation
	g.syncTimer = g.c.cfg.timers.afterFunc(d, func() { g.onSyncTimer(gen) })
}

func (g *group) stopSyncTimerLocked() {
	if g.syncTimer != nil {
		g.syncTimer.Stop()
		g.syncTimer = nil
	}
	g.pendingSync = nil
}

// onSyncTimer drops the members that never sent SyncGroup for generation
// gen and starts another rebalance.
func (g *group) onSyncTimer(gen int32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if gen != g.generation || len(g.pendingSync) == 0 ||
		(g.state != StateCompletingRebalance && g.state != StateStable) {
		return
	}
	for _, m := range g.sortedMembersLocked() {
		if _, ok := g.pendingSync[m.id]; ok {
			g.c.cfg.Logger.Info("group: member did not sync in time", "group", g.id, "member", m.id, "generation", gen)
			g.removeMemberLocked(m, kerr.UnknownMemberID.Code)
		}
	}
	g.pendingSync = nil
	g.prepareRebalanceLocked()
}

// resetAssignmentsLocked forgets the assignments and answers the members
// waiting in SyncGroup with code.
func (g *group) resetAssignmentsLocked(code int16) {
	for _, m := range g.members {
		m.assignment = nil
		g.deliverSyncLocked(m, syncResult{code: code})
	}
}
