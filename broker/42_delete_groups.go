package broker

import (
	"context"
	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups: v0-2
//
// Behavior (group/delete.go has the details):
// * Deletes each Empty group and its committed offsets: tombstones are
//   appended to __consumer_offsets before the answer. A group with
//   members: NON_EMPTY_GROUP; an unknown one: GROUP_ID_NOT_FOUND.
// * Like OffsetCommit, the appends finish even when the client
//   disconnects.
// * Authorization (with an authorizer): DELETE on each group, else that
//   group alone is GROUP_AUTHORIZATION_FAILED.
//
// Version notes:
// * v2: flexible versions

func init() { registerGroupAPI(42, handleDeleteGroups) }

func handleDeleteGroups(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.DeleteGroupsRequest)
	// Kafka: each group needs DELETE, else GROUP_AUTHORIZATION_FAILED
	// for it alone.
	allowed := *req
	allowed.Groups = nil
	var denied []string
	for _, id := range req.Groups {
		if s.authorize(r, acl.OpDelete, acl.Group(id)) {
			allowed.Groups = append(allowed.Groups, id)
		} else {
			denied = append(denied, id)
		}
	}
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	if len(allowed.Groups) > 0 {
		resp = s.groups.DeleteGroups(context.WithoutCancel(groupCtx(r)), &allowed)
	}
	for _, id := range denied {
		g := kmsg.NewDeleteGroupsResponseGroup()
		g.Group = id
		g.ErrorCode = kerr.GroupAuthorizationFailed.Code
		resp.Groups = append(resp.Groups, g)
	}
	return reply{msg: resp}, nil
}
