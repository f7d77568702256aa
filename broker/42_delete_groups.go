package broker

import (
	"context"

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
//
// Version notes:
// * v2: flexible versions

func init() { registerGroupAPI(42, handleDeleteGroups) }

func handleDeleteGroups(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.DeleteGroupsRequest)
	return reply{msg: s.groups.DeleteGroups(context.WithoutCancel(groupCtx(r)), req)}, nil
}
