package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// OffsetFetch: v1-8
//
// Behavior (group/fetch.go has the details):
// * The group's committed offsets with their leader epoch and metadata
//   (never null). A partition without a commit, or a group without any,
//   answers offset -1 and no error. Null topics (v2+) ask for every
//   committed offset of the group.
// * Errors of the group (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS):
//   v2+ in the top-level error code, v1 on every partition.
// * v8 asks for several groups, each answered on its own.
// * RequireStable (v7+) needs no waiting: there are no transactions.
//
// Version notes:
// * v2: top-level ErrorCode, null topics for all
// * v3: ThrottleMillis
// * v5: committed leader epoch
// * v6: flexible versions
// * v7: RequireStable
// * v8: several groups

func init() { registerGroupAPI(9, handleOffsetFetch) }

func handleOffsetFetch(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.OffsetFetchRequest)
	return reply{msg: s.groups.OffsetFetch(groupCtx(r), req)}, nil
}
