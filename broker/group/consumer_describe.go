package group

// ConsumerGroupDescribe: versions 0-1 (KIP-848).
//
// Behavior:
//   - Each group is answered on its own: an empty id INVALID_GROUP_ID,
//     the coordinator's NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS, a
//     group that does not exist or is a classic group GROUP_ID_NOT_FOUND.
//   - A consumer group shows its state (Empty, Assigning, Reconciling,
//     Stable), group epoch, target assignment epoch, assignor, and per
//     member its ids, epoch, client, subscription, current and target
//     assignment; v1 adds the member type (1: consumer protocol).
//   - AuthorizedOperations is every group operation when asked for (the
//     broker's handler replaces it with the principal's), else
//     Kafka's "not asked" value (MinInt32).
//   - DescribeGroups (describe.go) shows a consumer group as Kafka 4 does:
//     protocol type "consumer", the assignor as protocol, and each
//     member's subscription and assignment in the classic consumer
//     protocol's encoding.

import (
	"context"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupDescribe handles a ConsumerGroupDescribe request. It does
// not block.
func (c *Coordinator) ConsumerGroupDescribe(_ context.Context, req *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, id := range req.Groups {
		rg := kmsg.NewConsumerGroupDescribeResponseGroup()
		rg.Group = id
		rg.AuthorizedOperations = math.MinInt32
		if req.IncludeAuthorizedOperations {
			rg.AuthorizedOperations = allGroupOperations
		}
		c.consumerDescribe(&rg, req.Version)
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

func (c *Coordinator) consumerDescribe(rg *kmsg.ConsumerGroupDescribeResponseGroup, version int16) {
	if !validGroupID(rg.Group, false) {
		rg.ErrorCode = kerr.InvalidGroupID.Code
		return
	}
	g, code := c.lookup(rg.Group, false)
	if code != 0 {
		rg.ErrorCode = code
		return
	}
	if g == nil {
		rg.ErrorCode = kerr.GroupIDNotFound.Code
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	cg := g.consumer
	if g.state == StateDead || cg == nil {
		rg.ErrorCode = kerr.GroupIDNotFound.Code
		rg.ErrorMessage = kmsg.StringPtr("Group " + g.id + " is not a consumer group.")
		return
	}
	rg.State = cg.state()
	rg.Epoch = cg.epoch
	rg.AssignmentEpoch = cg.assignmentEpoch
	rg.AssignorName = cg.assignor
	if rg.AssignorName == "" {
		rg.AssignorName = preferredAssignor(nil, c.cfg.Consumer.Assignors)
	}
	for _, m := range cg.sortedMembers() {
		rm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
		rm.MemberID = m.id
		rm.InstanceID = m.instanceID
		rm.RackID = m.rackID
		rm.MemberEpoch = m.epoch
		rm.ClientID = m.clientID
		rm.ClientHost = m.clientHost
		rm.SubscribedTopics = slices.Clone(m.topics)
		if rm.SubscribedTopics == nil {
			rm.SubscribedTopics = []string{}
		}
		if m.regex != "" {
			rm.SubscribedTopicRegex = kmsg.StringPtr(m.regex)
		}
		rm.Assignment = m.assigned.describeAssignment()
		rm.TargetAssignment = cg.target[m.id].describeAssignment()
		if version >= 1 {
			rm.MemberType = 1 // the consumer protocol
			if m.classic != nil {
				rm.MemberType = 0 // the classic protocol
			}
		}
		rg.Members = append(rg.Members, rm)
	}
}

// describeConsumerLocked fills a DescribeGroups answer for a consumer
// group, as Kafka 4's ConsumerGroup.asDescribedGroup.
func (g *group) describeConsumerLocked(rg *kmsg.DescribeGroupsResponseGroup) {
	cg := g.consumer
	rg.State = cg.state()
	rg.ProtocolType = consumerProtocolType
	rg.Protocol = cg.assignor
	if rg.Protocol == "" {
		rg.Protocol = preferredAssignor(nil, g.c.cfg.Consumer.Assignors)
	}
	snap := g.c.topics()
	for _, m := range cg.sortedMembers() {
		rm := kmsg.NewDescribeGroupsResponseGroupMember()
		rm.MemberID = m.id
		rm.InstanceID = m.instanceID
		rm.ClientID = m.clientID
		rm.ClientHost = m.clientHost
		meta := kmsg.NewConsumerMemberMetadata()
		meta.Version = 3
		meta.Topics = slices.Clone(m.topics)
		if len(m.regexTopics) > 0 {
			for name := range m.regexTopics {
				meta.Topics = append(meta.Topics, name)
			}
			slices.Sort(meta.Topics)
			meta.Topics = slices.Compact(meta.Topics)
		}
		meta.Rack = m.rackID
		meta.Generation = m.epoch
		rm.ProtocolMetadata = meta.AppendTo(nil)
		asg := kmsg.NewConsumerMemberAssignment()
		asg.Version = 3
		m.assigned.byTopic(func(id [16]byte, parts []int32) {
			t, ok := snap.byID[id]
			if !ok {
				return
			}
			at := kmsg.NewConsumerMemberAssignmentTopic()
			at.Topic, at.Partitions = t.Name, parts
			asg.Topics = append(asg.Topics, at)
		})
		rm.MemberAssignment = asg.AppendTo(nil)
		rg.Members = append(rg.Members, rm)
	}
}
