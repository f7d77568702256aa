package broker

import (
	"context"
	"maps"
	"slices"

	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups: v0-2
//
// Behavior (group/delete.go has the details of classic and consumer
// groups; share_group_offsets.go of where a share group's state is):
// * Deletes each Empty group and its committed offsets: tombstones are
//   appended to __consumer_offsets before the answer. A group with
//   members: NON_EMPTY_GROUP; an unknown one: GROUP_ID_NOT_FOUND.
// * A share group, as Kafka 4.x: NON_EMPTY_GROUP while it has members;
//   without members, the state of every share partition it has in the
//   share coordinator is deleted (DeleteShareGroupState, as
//   DeleteShareGroupOffsets does for one topic) and this broker's loaded
//   copies are marked to be read again, so a member that comes later
//   starts by share.auto.offset.reset; then the group's records in
//   __consumer_offsets get tombstones before the answer. The first
//   partition's error, if any, is the group's (and the group stays). A
//   share group id with neither a group nor state is unknown:
//   GROUP_ID_NOT_FOUND.
// * Like OffsetCommit, the appends and state deletions finish even when
//   the client disconnects.
// * Authorization (with an authorizer): DELETE on each group, else that
//   group alone is GROUP_AUTHORIZATION_FAILED.
//
// Version notes:
// * v2: flexible versions

func init() { registerGroupAPI(42, handleDeleteGroups) }

func handleDeleteGroups(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.DeleteGroupsRequest)
	ctx := context.WithoutCancel(groupCtx(r))
	// Kafka: each group needs DELETE, else GROUP_AUTHORIZATION_FAILED
	// for it alone.
	allowed := *req
	allowed.Groups = nil
	denied := map[string]int16{}
	for _, id := range req.Groups {
		switch {
		case !s.authorize(r, acl.OpDelete, acl.Group(id)):
			denied[id] = kerr.GroupAuthorizationFailed.Code
		default:
			if code, share := s.deleteShareGroup(ctx, r, id); share {
				denied[id] = code
			} else {
				allowed.Groups = append(allowed.Groups, id)
			}
		}
	}
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	if len(allowed.Groups) > 0 {
		resp = s.groups.DeleteGroups(ctx, &allowed)
	}
	for _, id := range slices.Sorted(maps.Keys(denied)) {
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group = id
		g.ErrorCode = denied[id]
		resp.Groups = append(resp.Groups, g)
	}
	return reply{msg: resp}, nil
}

// deleteShareGroup deletes group as a share group when it is one here
// (share true) and returns the group's code; share false leaves the id
// to the classic group coordinator: this broker does not coordinate it,
// a classic or consumer group has the id, or no share group has it.
func (s *Server) deleteShareGroup(ctx context.Context, r *request, group string) (code int16, share bool) {
	switch {
	case s.shares == nil || group == "" || s.shareCoordinatorCode(group) != 0:
		return 0, false
	case s.shares.Groups.HasMembers(group):
		return kerr.NonEmptyGroup.Code, true
	case !s.shares.Groups.Exists(group) && s.classicGroupExists(r, group):
		return 0, false
	}
	sums, err := s.groupShareParts(ctx, group)
	if err != nil {
		s.log.Warn("share group not deleted: its state could not be read", "group", group, "err", err)
		return kerr.CoordinatorNotAvailable.Code, true
	}
	if len(sums) == 0 {
		if !s.shares.Groups.Exists(group) {
			return 0, false
		}
		return s.shares.Groups.Delete(ctx, group), true
	}
	var names []string
	for k := range sums {
		names = append(names, k.topic)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	codes := map[string]int16{}
	if err := s.deleteShareOffsets(ctx, group, names, sums, codes); err != nil {
		s.log.Warn("share group not deleted", "group", group, "err", err)
		return kerr.CoordinatorNotAvailable.Code, true
	}
	for _, name := range names {
		if codes[name] != 0 {
			return codes[name], true
		}
	}
	if code := s.shares.Groups.Delete(ctx, group); code != kerr.GroupIDNotFound.Code {
		return code, true // GROUP_ID_NOT_FOUND: a share group of state alone, no records; deleting its state deleted it
	}
	return 0, true
}
