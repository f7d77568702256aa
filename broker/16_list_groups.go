package broker

import "github.com/twmb/franz-go/pkg/kmsg"

// ListGroups: v0-4
//
// Behavior (group/describe.go has the details):
// * Every group this broker coordinates, except Dead ones, by id, with its
//   protocol type; v4 also with its state, filtered by StatesFilter
//   (case-insensitive).
//
// Version notes:
// * v1: ThrottleMillis
// * v3: flexible versions
// * v4: StatesFilter, GroupState

func init() { registerGroupAPI(16, handleListGroups) }

func handleListGroups(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.ListGroupsRequest)
	return reply{msg: s.groups.ListGroups(groupCtx(r), req)}, nil
}
