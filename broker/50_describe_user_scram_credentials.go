package broker

import (
	"github.com/stratastream/strata/broker/acl"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/sasl"
)

// DescribeUserScramCredentials: v0
//
// Behavior:
// * Users null or empty: every user with a SCRAM credential, sorted by
//   name. Otherwise one result per distinct user asked, in request order.
// * Each result lists the user's mechanisms (1 SCRAM-SHA-256, 2
//   SCRAM-SHA-512) and iterations, never salt or keys.
// * An asked user without credentials is RESOURCE_NOT_FOUND, an empty name
//   RESOURCE_NOT_FOUND ("Username must not be empty"), a user asked twice
//   DUPLICATE_RESOURCE, as Kafka's ZkAdminManager.
// * Read from the coordinator's cache of /config/users.
// * Authorization (with an authorizer, as Kafka): DESCRIBE on the cluster,
//   else CLUSTER_AUTHORIZATION_FAILED at the top level and for each named
//   user.
//
// Version notes:
// * v0: flexible

func init() { register(50, 0, 0, handleDescribeUserScramCredentials) }

func handleDescribeUserScramCredentials(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !s.authorize(r, acl.OpDescribe, acl.Cluster) {
		// Kafka's error response: top level and on every named user.
		msg := "not authorized to DESCRIBE the cluster"
		resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, &msg
		for _, u := range req.Users {
			res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			res.User = u.Name
			res.ErrorCode, res.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, &msg
			res.CredentialInfos = []kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo{}
			resp.Results = append(resp.Results, res)
		}
		return reply{msg: resp}, nil
	}
	users := s.coord.ScramUsers()
	result := func(user string, creds map[string]string) kmsg.DescribeUserSCRAMCredentialsResponseResult {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = user
		res.CredentialInfos = []kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo{}
		for _, mech := range []string{sasl.MechanismScramSHA256, sasl.MechanismScramSHA512} {
			str, ok := creds[mech]
			if !ok {
				continue
			}
			c, err := sasl.ParseScramCredential(str)
			if err != nil {
				res.ErrorCode = kerr.UnknownServerError.Code
				res.ErrorMessage = kmsg.StringPtr("Error processing describe user SCRAM credential configs request")
				res.CredentialInfos = []kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo{}
				return res
			}
			ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
			ci.Mechanism, ci.Iterations = scramMechanismType(mech), int32(c.Iterations)
			res.CredentialInfos = append(res.CredentialInfos, ci)
		}
		return res
	}
	fail := func(user string, err *kerr.Error, msg string) kmsg.DescribeUserSCRAMCredentialsResponseResult {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User, res.ErrorCode, res.ErrorMessage = user, err.Code, kmsg.StringPtr(msg)
		res.CredentialInfos = []kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo{}
		return res
	}
	if len(req.Users) == 0 {
		names := make([]string, 0, len(users))
		for u := range users {
			names = append(names, u)
		}
		sort.Strings(names)
		for _, u := range names {
			resp.Results = append(resp.Results, result(u, users[u]))
		}
		return reply{msg: resp}, nil
	}
	count := map[string]int{}
	for _, u := range req.Users {
		count[u.Name]++
	}
	done := map[string]bool{}
	for _, u := range req.Users {
		name := u.Name
		if done[name] {
			continue
		}
		done[name] = true
		switch {
		case name == "":
			resp.Results = append(resp.Results, fail(name, kerr.ResourceNotFound, "Username must not be empty"))
		case count[name] > 1:
			resp.Results = append(resp.Results, fail(name, kerr.DuplicateResource, "Cannot describe SCRAM credentials for the same user twice in a single request: "+name))
		case users[name] == nil:
			resp.Results = append(resp.Results, fail(name, kerr.ResourceNotFound, "Attempt to describe a user credential that does not exist: "+name))
		default:
			resp.Results = append(resp.Results, result(name, users[name]))
		}
	}
	return reply{msg: resp}, nil
}
