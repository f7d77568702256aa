package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetDelete: v0
//
// Behavior (group/delete.go has the details):
// * Deletes committed offsets of a group (KIP-496), tombstones appended
//   before the answer: any offset of an Empty group; in a "consumer"
//   group with members only those of topics no member subscribes to
//   (GROUP_SUBSCRIBED_TO_TOPIC otherwise). An unknown group:
//   GROUP_ID_NOT_FOUND.
// * Like OffsetCommit, the appends finish even when the client
//   disconnects.

func init() { registerGroupAPI(47, handleOffsetDelete) }

func handleOffsetDelete(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.OffsetDeleteRequest)
	return reply{msg: s.groups.OffsetDelete(context.WithoutCancel(groupCtx(r)), req)}, nil
}
