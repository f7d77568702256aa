package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups: v0-4
//
// Behavior (group/describe.go has the details):
// * Every group this broker coordinates, except Dead ones, by id, with its
//   protocol type; v4 also with its state, filtered by StatesFilter
//   (case-insensitive).
// * Authorization (with an authorizer, as Kafka): DESCRIBE on the cluster
//   lists every group; otherwise only the groups the principal may
//   DESCRIBE are listed.
//
// Version notes:
// * v1: ThrottleMillis
// * v3: flexible versions
// * v4: StatesFilter, GroupState
// * v5: TypesFilter, GroupType (classic, consumer)

func init() { registerGroupAPI(16, handleListGroups) }

func handleListGroups(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.ListGroupsRequest)
	resp := s.groups.ListGroups(groupCtx(r), req)
	if s.authorize(r, acl.OpDescribe, acl.Cluster) {
		return reply{msg: resp}, nil // Kafka: DESCRIBE on the cluster lists them all
	}
	kept := resp.Groups[:0]
	for _, g := range resp.Groups {
		if s.authorize(r, acl.OpDescribe, acl.Group(g.Group)) {
			kept = append(kept, g)
		}
	}
	resp.Groups = kept
	return reply{msg: resp}, nil
}
