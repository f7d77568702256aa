package group

// Heartbeat: versions 0-4.
//
// Behavior:
//   - An empty group id: INVALID_GROUP_ID. While the group's partition
//     loads the heartbeat is answered with no error, as Kafka does.
//   - Unknown group or member: UNKNOWN_MEMBER_ID; a static member whose
//     instance id maps to another member id: FENCED_INSTANCE_ID; another
//     generation: ILLEGAL_GENERATION.
//   - Stable and CompletingRebalance: the session deadline moves on.
//     PreparingRebalance: it moves on too, and the answer is
//     REBALANCE_IN_PROGRESS so the member rejoins. Empty: UNKNOWN_MEMBER_ID.
//   - A classic member of a consumer group: its generation is its member
//     epoch; REBALANCE_IN_PROGRESS when it must rejoin to reconcile
//     (consumer_classic.go).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat handles a Heartbeat request. It does not block.
func (c *Coordinator) Heartbeat(_ context.Context, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = c.heartbeat(req)
	return resp
}

func (c *Coordinator) heartbeat(req *kmsg.HeartbeatRequest) int16 {
	if !validGroupID(req.Group, false) {
		return kerr.InvalidGroupID.Code
	}
	g, code := c.memberGroup(req.Group, false)
	switch {
	case code == kerr.CoordinatorLoadInProgress.Code:
		return 0
	case code != 0:
		return code
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == StateDead {
		return kerr.CoordinatorNotAvailable.Code
	}
	if g.consumer != nil {
		return g.classicHeartbeatConsumerLocked(req) // consumer_classic.go
	}
	if code := g.validateMemberLocked(req.MemberID, req.InstanceID); code != 0 {
		return code
	}
	if req.Generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	m := g.members[req.MemberID]
	switch g.state {
	case StateCompletingRebalance, StateStable:
		g.heartbeatLocked(m)
		return 0
	case StatePreparingRebalance:
		g.heartbeatLocked(m)
		return kerr.RebalanceInProgress.Code
	}
	return kerr.UnknownMemberID.Code
}
