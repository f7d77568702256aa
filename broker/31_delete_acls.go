package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/acl"
)

// DeleteAcls: v0-3
//
// Behavior:
// * Needs ALTER on the cluster, else every filter result is
//   CLUSTER_AUTHORIZATION_FAILED; without an authorizer every filter
//   result is SECURITY_DISABLED.
// * Each filter matches as in DescribeAcls; one with an UNKNOWN element is
//   INVALID_REQUEST. The filters are matched against the ACLs as they are
//   before this request, and everything they match is deleted through the
//   coordinator before the answer; each filter's result lists what it
//   matched (a binding two filters match is in both).
// * A store failure is UNKNOWN_SERVER_ERROR for the filters whose matches
//   it concerns.
//
// Version notes:
// * v1: pattern type (v0 is LITERAL only)
// * v2: flexible versions
// * v3: USER resource type

func init() { register(31, 0, 3, handleDeleteACLs) }

func handleDeleteACLs(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
	}
	failAll := func(err *kerr.Error, msg string) (reply, error) {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = err.Code, &msg
		}
		return reply{msg: resp}, nil
	}
	if !s.authorize(r, acl.OpAlter, acl.Cluster) {
		return failAll(kerr.ClusterAuthorizationFailed, "not authorized to ALTER the cluster's ACLs")
	}
	if s.authz == nil {
		return failAll(kerr.SecurityDisabled, "No Authorizer is configured.")
	}
	var valid []acl.Filter
	var at []int
	for i, f := range req.Filters {
		af := acl.Filter{
			Type: acl.ResourceType(f.ResourceType), Name: f.ResourceName, Pattern: acl.PatternType(f.ResourcePatternType),
			Principal: f.Principal, Host: f.Host, Operation: acl.Operation(f.Operation), Permission: acl.PermissionType(f.PermissionType),
		}
		if err := af.Validate(); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = aclErrorCode(err)
			continue
		}
		valid = append(valid, af)
		at = append(at, i)
	}
	if len(valid) == 0 {
		return reply{msg: resp}, nil
	}
	for j, res := range s.coord.DeleteACLs(r.ctx, valid) {
		out := &resp.Results[at[j]]
		if res.Err != nil {
			s.log.Warn("DeleteAcls failed", "err", res.Err)
			out.ErrorCode, out.ErrorMessage = aclErrorCode(res.Err)
			continue
		}
		for _, b := range res.Deleted {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName = kmsg.ACLResourceType(b.Pattern.Type), b.Pattern.Name
			m.ResourcePatternType = kmsg.ACLResourcePatternType(b.Pattern.Pattern)
			m.Principal, m.Host = b.Entry.Principal, b.Entry.Host
			m.Operation, m.PermissionType = kmsg.ACLOperation(b.Entry.Operation), kmsg.ACLPermissionType(b.Entry.Permission)
			out.MatchingACLs = append(out.MatchingACLs, m)
		}
	}
	return reply{msg: resp}, nil
}
