package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/acl"
)

// CreateAcls: v0-3
//
// Behavior:
// * Needs ALTER on the cluster, else every result is
//   CLUSTER_AUTHORIZATION_FAILED; without an authorizer every result is
//   SECURITY_DISABLED.
// * Each creation is validated as Kafka does (acl.Binding.Validate:
//   concrete types, LITERAL or PREFIXED, a non-empty name without "/",
//   the cluster named "kafka-cluster", a "Type:name" principal); a
//   refused one is INVALID_REQUEST and the others are still created.
// * Valid creations are stored through the coordinator (ZooKeeper:
//   Kafka's znodes, every broker notified) before the answer; creating an
//   existing binding succeeds. A store failure is UNKNOWN_SERVER_ERROR.
//
// Version notes:
// * v1: pattern type (v0 is LITERAL only)
// * v2: flexible versions
// * v3: USER resource type

func init() { register(30, 0, 3, handleCreateACLs) }

func handleCreateACLs(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
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
	var valid []acl.Binding
	var at []int
	for i, c := range req.Creations {
		b := acl.Binding{
			Pattern: acl.Pattern{Type: acl.ResourceType(c.ResourceType), Name: c.ResourceName, Pattern: acl.PatternType(c.ResourcePatternType)},
			Entry:   acl.Entry{Principal: c.Principal, Host: c.Host, Operation: acl.Operation(c.Operation), Permission: acl.PermissionType(c.PermissionType)},
		}
		if err := b.Validate(); err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = aclErrorCode(err)
			continue
		}
		valid = append(valid, b)
		at = append(at, i)
	}
	if len(valid) == 0 {
		return reply{msg: resp}, nil
	}
	for j, err := range s.coord.CreateACLs(r.ctx, valid) {
		if err != nil {
			s.log.Warn("CreateAcls failed", "acl", valid[j].String(), "err", err)
			resp.Results[at[j]].ErrorCode, resp.Results[at[j]].ErrorMessage = aclErrorCode(err)
		}
	}
	return reply{msg: resp}, nil
}
