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
//   (case-insensitive). Share groups are listed with protocol type and
//   group type "share", state Stable with members and Empty without (a
//   share group outlives its members until DeleteGroups deletes it).
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
// Kafka does: protocol type and group type "share", state Stable or
// Empty, after the states and types filters.
func (s *Server) listShareGroups(req *kmsg.ListGroupsRequest) []kmsg.ListGroupsResponseGroup {
	if s.shares == nil || !filterAdmits(req.TypesFilter, "share") {
		return nil
	}
	var out []kmsg.ListGroupsResponseGroup
	for _, g := range s.shares.Groups.List() {
		if !filterAdmits(req.StatesFilter, g.State) {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.ID, "share", g.State, "share"
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
