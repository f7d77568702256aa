package broker

import (
	"context"
	"errors"
	"github.com/stratastream/strata/broker/acl"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/sasl"
	"github.com/stratastream/strata/coord"
)

// AlterUserScramCredentials: v0
//
// Behavior (Kafka's ZkAdminManager.alterUserScramCredentials):
// * Upsertions carry the salt and the salted password (the client salts,
//   the password never travels); the broker derives StoredKey and
//   ServerKey and stores Kafka's credential string in the coordinator
//   (ZooKeeper /config/users/<user> plus a change notification, which
//   every broker's cache follows).
// * One result per user. A user fails as a whole when any of its entries
//   is illegal: empty name (UNACCEPTABLE_CREDENTIAL "Username must not be
//   empty"), unknown mechanism (UNSUPPORTED_SASL_MECHANISM), iterations
//   outside [4096, 16384] or an empty salt or salted password
//   (UNACCEPTABLE_CREDENTIAL), the same user and mechanism twice
//   (DUPLICATE_RESOURCE), deletion of a credential it does not have
//   (RESOURCE_NOT_FOUND). Otherwise all of the user's changes are written
//   in one atomic write.
// * Nothing secret is logged or answered.
// * Authorization (with an authorizer, as Kafka): ALTER on the cluster,
//   else CLUSTER_AUTHORIZATION_FAILED for every named user.
//
// Version notes:
// * v0: flexible

func init() { register(51, 0, 0, handleAlterUserScramCredentials) }

// alterUser is what a request asks for one user.
type alterUser struct {
	upsert  map[string]string
	deletes []string
	pairs   map[string]int // mechanism -> entries naming it
	err     *kerr.Error
	msg     string
}

func handleAlterUserScramCredentials(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	if !s.authorize(r, acl.OpAlter, acl.Cluster) {
		// Kafka's error response: every named user, sorted, once.
		msg := "not authorized to ALTER the cluster"
		var names []string
		for _, d := range req.Deletions {
			names = append(names, d.Name)
		}
		for _, u := range req.Upsertions {
			names = append(names, u.Name)
		}
		slices.Sort(names)
		for _, n := range slices.Compact(names) {
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User = n
			res.ErrorCode, res.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, &msg
			resp.Results = append(resp.Results, res)
		}
		return reply{msg: resp}, nil
	}

	var order []string
	users := map[string]*alterUser{}
	get := func(name string) *alterUser {
		u := users[name]
		if u == nil {
			u = &alterUser{upsert: map[string]string{}, pairs: map[string]int{}}
			users[name] = u
			order = append(order, name)
		}
		return u
	}
	// Illegal entries first: they decide a user's result over duplicates.
	setErr := func(u *alterUser, err *kerr.Error, msg string) {
		if u.err == nil || u.err == kerr.DuplicateResource {
			u.err, u.msg = err, msg
		}
	}
	for _, d := range req.Deletions {
		u := get(d.Name)
		mech, ok := scramMechanismName(d.Mechanism)
		switch {
		case d.Name == "":
			setErr(u, kerr.UnacceptableCredential, "Username must not be empty")
		case !ok:
			setErr(u, kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
		default:
			u.pairs[mech]++
			u.deletes = append(u.deletes, mech)
		}
	}
	for _, up := range req.Upsertions {
		u := get(up.Name)
		mech, ok := scramMechanismName(up.Mechanism)
		switch {
		case up.Name == "":
			setErr(u, kerr.UnacceptableCredential, "Username must not be empty")
		case !ok:
			setErr(u, kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
		case up.Iterations < sasl.ScramMinIterations:
			setErr(u, kerr.UnacceptableCredential, "Too few iterations")
		case up.Iterations > sasl.ScramMaxIterations:
			setErr(u, kerr.UnacceptableCredential, "Too many iterations")
		case len(up.Salt) == 0 || len(up.SaltedPassword) == 0:
			setErr(u, kerr.UnacceptableCredential, "Salt and salted password must not be empty")
		default:
			u.pairs[mech]++
			if u.pairs[mech] > 1 {
				continue
			}
			c, err := sasl.ScramCredentialFromSaltedPassword(mech, up.Salt, up.SaltedPassword, int(up.Iterations))
			if err != nil {
				setErr(u, kerr.UnacceptableCredential, "Unacceptable credential")
				continue
			}
			u.upsert[mech] = sasl.FormatScramCredential(c)
		}
	}
	for _, name := range order {
		u := users[name]
		if u.err == nil {
			for _, n := range u.pairs {
				if n > 1 {
					u.err, u.msg = kerr.DuplicateResource, "A user credential cannot be altered twice in the same request"
				}
			}
		}
		if u.err == nil {
			current := s.coord.ScramUsers()[name]
			for _, m := range u.deletes {
				if _, ok := current[m]; !ok {
					u.err, u.msg = kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist"
				}
			}
		}
		if u.err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
			err := s.coord.AlterScramCredentials(ctx, name, coord.ScramAlteration{Upsert: u.upsert, Delete: u.deletes})
			cancel()
			switch {
			case err == nil:
			case errors.Is(err, coord.ErrUnknownCredential):
				// Deleted by another broker since the check above.
				u.err, u.msg = kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist"
			default:
				s.log.Warn("altering SCRAM credentials failed", "user", name, "err", err)
				u.err, u.msg = kerr.UnknownServerError, "The server experienced an unexpected error when processing the request."
			}
		}
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = name
		if u.err != nil {
			res.ErrorCode, res.ErrorMessage = u.err.Code, kmsg.StringPtr(u.msg)
		}
		resp.Results = append(resp.Results, res)
	}
	return reply{msg: resp}, nil
}
