package group

// DescribeGroups: versions 0-5. ListGroups: versions 0-5.
//
// Behavior:
//   - DescribeGroups answers each group on its own (a consumer group of
//     KIP-848 as consumer_describe.go says): its state, protocol
//     type and members (member id, instance id, client id and host). Only
//     a Stable group shows its protocol and each member's metadata and
//     assignment, as in Kafka. An unknown group is described as "Dead"
//     with no error (GROUP_ID_NOT_FOUND is v6+). With
//     IncludeAuthorizedOperations (v3+) every group operation is reported
//     as allowed: the broker's handler, which checks ACLs, replaces them
//     with the principal's.
//   - ListGroups lists every group of the loaded partitions except Dead
//     ones, ordered by id; v4 filters by state names, v5 by group type
//     ("classic", "consumer"), both case-insensitive. A consumer group
//     lists with its own states (Empty, Assigning, Reconciling, Stable).
//     While a partition loads it answers COORDINATOR_LOAD_IN_PROGRESS with
//     the groups it has; after Close, COORDINATOR_NOT_AVAILABLE.

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// allGroupOperations is the authorized-operations bit set of a group with
// no authorizer: READ(3), DELETE(6), DESCRIBE(8), DESCRIBE_CONFIGS(10),
// ALTER_CONFIGS(11).
const allGroupOperations = 1<<3 | 1<<6 | 1<<8 | 1<<10 | 1<<11

// DescribeGroups handles a DescribeGroups request. It does not block.
func (c *Coordinator) DescribeGroups(_ context.Context, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group = id
		if req.IncludeAuthorizedOperations {
			rg.AuthorizedOperations = allGroupOperations
		}
		c.describe(&rg)
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

func (c *Coordinator) describe(rg *kmsg.DescribeGroupsResponseGroup) {
	if !validGroupID(rg.Group, true) {
		rg.ErrorCode = kerr.InvalidGroupID.Code
		return
	}
	g, code := c.lookup(rg.Group, false)
	if code != 0 {
		rg.ErrorCode = code
		return
	}
	rg.State = StateDead.String()
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.consumer != nil && g.state != StateDead {
		g.describeConsumerLocked(rg)
		return
	}
	rg.State = g.state.String()
	rg.ProtocolType = g.protocolType
	if g.state == StateDead {
		return
	}
	stable := g.state == StateStable
	if stable {
		rg.Protocol = g.protocol
	}
	for _, m := range g.sortedMembersLocked() {
		rm := kmsg.NewDescribeGroupsResponseGroupMember()
		rm.MemberID = m.id
		rm.InstanceID = m.instanceID
		rm.ClientID = m.clientID
		rm.ClientHost = m.clientHost
		if stable {
			rm.ProtocolMetadata = m.metadataFor(g.protocol)
			rm.MemberAssignment = m.assignment
		}
		rg.Members = append(rg.Members, rm)
	}
}

// ListGroups handles a ListGroups request. It does not block.
func (c *Coordinator) ListGroups(_ context.Context, req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	c.mu.Lock()
	switch {
	case c.mu.closed:
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
	default:
		for _, p := range c.mu.partitions {
			if p.loading {
				resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
			}
		}
	}
	c.mu.Unlock()

	states := make(map[string]bool, len(req.StatesFilter))
	for _, s := range req.StatesFilter {
		states[strings.ToLower(s)] = true
	}
	types := make(map[string]bool, len(req.TypesFilter))
	for _, t := range req.TypesFilter {
		types[strings.ToLower(t)] = true
	}
	for _, g := range c.groupsSorted() {
		g.mu.Lock()
		dead, ptype := g.state == StateDead, g.protocolType
		state, gtype := g.state.String(), "classic"
		if g.consumer != nil {
			state, gtype = g.consumer.state(), "consumer"
		}
		g.mu.Unlock()
		if dead || (len(states) > 0 && !states[strings.ToLower(state)]) || (len(types) > 0 && !types[gtype]) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group = g.id
		lg.ProtocolType = ptype
		lg.GroupState = state
		lg.GroupType = gtype
		resp.Groups = append(resp.Groups, lg)
	}
	return resp
}
