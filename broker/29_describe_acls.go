package broker

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/acl"
)

// DescribeAcls: v0-3
//
// Behavior:
// * Needs DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
// * Without an authorizer (authorizer.class.name empty) the answer is
//   SECURITY_DISABLED, as Kafka's.
// * The filter matches as Kafka's AclBindingFilter: ANY and null match
//   everything, MATCH the bindings that apply to the named resource
//   (its literal, the literal "*", prefixes of it). A filter with an
//   UNKNOWN element is INVALID_REQUEST.
// * The bindings come from the coordinator's cache on this broker, grouped
//   by resource pattern.
//
// Version notes:
// * v1: pattern type (v0 is LITERAL only)
// * v2: flexible versions
// * v3: USER resource type

func init() { register(29, 0, 3, handleDescribeACLs) }

func handleDescribeACLs(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	fail := func(err *kerr.Error, msg string) (reply, error) {
		resp.ErrorCode, resp.ErrorMessage = err.Code, &msg
		return reply{msg: resp}, nil
	}
	if !s.authorize(r, acl.OpDescribe, acl.Cluster) {
		return fail(kerr.ClusterAuthorizationFailed, "not authorized to DESCRIBE the cluster's ACLs")
	}
	if s.authz == nil {
		return fail(kerr.SecurityDisabled, "No Authorizer is configured on the broker")
	}
	f := acl.Filter{
		Type: acl.ResourceType(req.ResourceType), Name: req.ResourceName, Pattern: acl.PatternType(req.ResourcePatternType),
		Principal: req.Principal, Host: req.Host, Operation: acl.Operation(req.Operation), Permission: acl.PermissionType(req.PermissionType),
	}
	if err := f.Validate(); err != nil {
		return fail(kerr.InvalidRequest, err.Error())
	}
	bindings, _ := s.coord.ACLs()
	byPattern := map[acl.Pattern]int{} // index in resp.Resources
	for _, b := range bindings {
		if !f.Matches(b) {
			continue
		}
		i, ok := byPattern[b.Pattern]
		if !ok {
			rr := kmsg.NewDescribeACLsResponseResource()
			rr.ResourceType, rr.ResourceName = kmsg.ACLResourceType(b.Pattern.Type), b.Pattern.Name
			rr.ResourcePatternType = kmsg.ACLResourcePatternType(b.Pattern.Pattern)
			i = len(resp.Resources)
			byPattern[b.Pattern] = i
			resp.Resources = append(resp.Resources, rr)
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host = b.Entry.Principal, b.Entry.Host
		e.Operation, e.PermissionType = kmsg.ACLOperation(b.Entry.Operation), kmsg.ACLPermissionType(b.Entry.Permission)
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, e)
	}
	return reply{msg: resp}, nil
}

// aclErrorCode maps an ACL store or validation error to a Kafka code and
// message: INVALID_REQUEST for a refused binding, UNKNOWN_SERVER_ERROR
// otherwise (the store could not be written; Kafka answers the same for
// a ZooKeeper failure).
func aclErrorCode(err error) (int16, *string) {
	msg := err.Error()
	if errors.Is(err, acl.ErrInvalid) {
		return kerr.InvalidRequest.Code, &msg
	}
	return kerr.UnknownServerError.Code, &msg
}
