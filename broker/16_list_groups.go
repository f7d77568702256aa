package broker

import (
	"strings"

	"github.com/stratastream/strata/broker/acl"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups: v0-5
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
// * v5: TypesFilter, GroupType (classic, consumer, share)

func init() { registerGroupAPI(16, handleListGroups) }

func handleListGroups(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.ListGroupsRequest)
	resp := s.groups.ListGroups(groupCtx(r), req)
	resp.Groups = append(resp.Groups, s.listShareGroups(req)...)
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

// listShareGroups lists the share groups this broker coordinates, as
// Kafka does: protocol type and group type "share", state Stable (an
// empty share group is forgotten here: package share's doc), after the
// states and types filters.
func (s *Server) listShareGroups(req *kmsg.ListGroupsRequest) []kmsg.ListGroupsResponseGroup {
	if s.shares == nil || !filterAdmits(req.StatesFilter, "Stable") || !filterAdmits(req.TypesFilter, "share") {
		return nil
	}
	var out []kmsg.ListGroupsResponseGroup
	for _, id := range s.shares.Groups.IDs() {
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = id, "share", "Stable", "share"
		out = append(out, lg)
	}
	return out
}

// filterAdmits reports whether a ListGroups filter (empty: all) holds v,
// case-insensitively.
func filterAdmits(filter []string, v string) bool {
	if len(filter) == 0 {
		return true
	}
	for _, f := range filter {
		if strings.EqualFold(f, v) {
			return true
		}
	}
	return false
}
