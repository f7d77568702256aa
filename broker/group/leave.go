package group

// LeaveGroup: versions 0-5.
//
// Behavior:
//   - v0-2 name one member (MemberID); its result is the top-level error.
//     v3+ name a batch of members, each by member id, or by instance id
//     alone (an administrator removing a static member); each gets its own
//     error, the top level stays NONE.
//   - An empty group id: INVALID_GROUP_ID. An unknown group: every member
//     UNKNOWN_MEMBER_ID.
//   - A member id handed out with MEMBER_ID_REQUIRED and not used yet is
//     forgotten. A known member is removed (a JoinGroup of it still
//     waiting gets UNKNOWN_MEMBER_ID); from Stable or CompletingRebalance
//     that starts a rebalance, during PreparingRebalance the join phase
//     may complete without it.
//   - A static member whose instance id maps to another member id:
//     FENCED_INSTANCE_ID.
//   - v5+: each member's Reason is logged with its departure (KIP-800).
//   - A consumer group: its classic members leave as above (the group
//     epoch goes up); a member of the consumer protocol is
//     UNKNOWN_MEMBER_ID (consumer_classic.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LeaveGroup handles a LeaveGroup request. It does not block.
func (c *Coordinator) LeaveGroup(_ context.Context, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	leaving := req.Members
	if req.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	code, codes := c.leave(req.Group, leaving)
	if req.Version < 3 {
		if code == 0 {
			code = codes[0]
		}
		resp.ErrorCode = code
		return resp
	}
	resp.ErrorCode = code
	if code != 0 {
		return resp
	}
	for i, l := range leaving {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID = l.MemberID
		rm.InstanceID = l.InstanceID
		rm.ErrorCode = codes[i]
		resp.Members = append(resp.Members, rm)
	}
	return resp
}

// leave removes the members; it returns a group-level error or one error
// per member.
func (c *Coordinator) leave(groupID string, leaving []kmsg.LeaveGroupRequestMember) (int16, []int16) {
	if !validGroupID(groupID, false) {
		return kerr.InvalidGroupID.Code, nil
	}
	g, code := c.lookup(groupID, false)
	if code != 0 {
		return code, nil
	}
	codes := make([]int16, len(leaving))
	if g == nil {
		for i := range codes {
			codes[i] = kerr.UnknownMemberID.Code
		}
		return 0, codes
	}
	g.mu.Lock()
	if g.state == StateDead {
		g.mu.Unlock()
		return kerr.CoordinatorNotAvailable.Code, nil
	}
	if g.consumer != nil {
		// Classic members of a consumer group (consumer_classic.go):
		// the answer waits for the group's records.
		for i, l := range leaving {
			codes[i] = g.classicLeaveConsumerLocked(l.MemberID, l.InstanceID, l.Reason)
		}
		code, wait := g.storeConsumerLocked()
		g.mu.Unlock()
		if code == 0 {
			code = AwaitStore(nil, wait)
		}
		if code != 0 {
			return code, nil
		}
		return 0, codes
	}
	defer g.mu.Unlock()
	for i, l := range leaving {
		codes[i] = g.leaveLocked(l.MemberID, l.InstanceID, l.Reason)
	}
	return 0, codes
}

func (g *group) leaveLocked(memberID string, instanceID, reason *string) int16 {
	if memberID == "" {
		if instanceID == nil {
			return kerr.UnknownMemberID.Code
		}
		id, ok := g.static[*instanceID]
		if !ok {
			return kerr.UnknownMemberID.Code
		}
		memberID = id
	} else if _, ok := g.pending[memberID]; ok {
		g.removePendingLocked(memberID)
		g.tryCompleteJoinLocked()
		return 0
	} else if code := g.validateMemberLocked(memberID, instanceID); code != 0 {
		return code
	}
	m := g.members[memberID]
	if reason != nil {
		g.c.cfg.Logger.Info("group: member left", "group", g.id, "member", memberID, "reason", *reason)
	} else {
		g.c.cfg.Logger.Info("group: member left", "group", g.id, "member", memberID)
	}
	g.removeMemberAndUpdateLocked(m)
	return 0
}
