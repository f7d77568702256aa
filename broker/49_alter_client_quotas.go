package broker

import (
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/coord"
)

// AlterClientQuotas: v0–v1
//
// Behavior (Kafka's ZkAdminManager.alterClientQuotas):
// * Each entry is one entity: user, client-id, or both (a null name is
//   the default, <default> in ZooKeeper), changed by its ops: a remove
//   drops the key, a set stores it (producer_byte_rate and
//   consumer_byte_rate as Kafka's LONG: a value that is not an integer is
//   INVALID_REQUEST "Configuration producer_byte_rate must be a LONG
//   value"; request_percentage as Kafka's DOUBLE). The entity's other
//   keys (a user's SCRAM credentials) are kept. Each entry succeeds or
//   fails alone; with ValidateOnly nothing is written.
// * INVALID_REQUEST, with Kafka's messages: an empty entity ("Invalid
//   empty client quota entity"), an unknown entity type ("Unhandled
//   client quota entity type: x"), an empty name ("Empty user not
//   supported"), an unknown key ("Invalid configuration key x").
// * controller_mutation_rate is refused as an unknown key: Strata does
//   not enforce it (Kafka 3.9 does, on topic creations and deletions);
//   a SCRAM key is refused likewise (credentials go through
//   AlterUserScramCredentials). ip entities are refused: Strata keeps
//   no IP quotas.
// * Written to the coordinator (/config/users/<user>,
//   /config/clients/<id>, /config/users/<user>/clients/<id>, with a
//   change notification), read by every broker's watch.
// * Authorization (with an authorizer, as Kafka): ALTER_CONFIGS on the
//   cluster, else CLUSTER_AUTHORIZATION_FAILED on every entry.
//
// Version notes:
// * v1: flexible

func init() { register(49, 0, 1, handleAlterClientQuotas) }

func handleAlterClientQuotas(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	allowed := s.authorize(r, acl.OpAlterConfigs, acl.Cluster)
	for _, e := range req.Entries {
		res := kmsg.NewAlterClientQuotasResponseEntry()
		for _, ent := range e.Entity {
			re := kmsg.NewAlterClientQuotasResponseEntryEntity()
			re.Type, re.Name = ent.Type, ent.Name
			res.Entity = append(res.Entity, re)
		}
		var err error
		if !allowed {
			err = newKafkaError(kerr.ClusterAuthorizationFailed, "not authorized to ALTER_CONFIGS the cluster")
		} else {
			err = s.alterClientQuota(e, req.ValidateOnly)
		}
		if err != nil {
			code, msg := errorCode(err)
			res.ErrorCode, res.ErrorMessage = code, &msg
		}
		resp.Entries = append(resp.Entries, res)
	}
	return reply{msg: resp}, nil
}

// quotaEntityOf is the coordinator entity of a quota entity
// (ZkAdminManager.parseAndSanitizeQuotaEntity and its match).
func quotaEntityOf(entity []kmsg.AlterClientQuotasRequestEntryEntity) (typ, name string, err error) {
	if len(entity) == 0 {
		return "", "", newKafkaError(kerr.InvalidRequest, "Invalid empty client quota entity")
	}
	var user, client *string
	var hasUser, hasClient, hasIP bool
	for _, e := range entity {
		z := coord.DefaultEntity
		if e.Name != nil {
			z = coord.SanitizeUser(*e.Name)
		}
		switch e.Type {
		case quotaEntityUser:
			user, hasUser = &z, true
		case quotaEntityClientID:
			client, hasClient = &z, true
		case quotaEntityIP:
			hasIP = true
		default:
			return "", "", newKafkaError(kerr.InvalidRequest, "Unhandled client quota entity type: %s", e.Type)
		}
		if e.Name != nil && *e.Name == "" {
			return "", "", newKafkaError(kerr.InvalidRequest, "Empty %s not supported", e.Type)
		}
	}
	switch {
	case hasIP && (hasUser || hasClient):
		return "", "", newKafkaError(kerr.InvalidRequest, "Invalid quota entity combination, IP entity should not be used with user/client ID entity.")
	case hasIP:
		return "", "", newKafkaError(kerr.InvalidRequest, "IP quotas are not served by Strata (connection creation rates are not limited)")
	case hasUser && hasClient:
		return coord.EntityUserClients, coord.UserClientEntity(*user, *client), nil
	case hasUser:
		return coord.EntityUsers, *user, nil
	default:
		return coord.EntityClients, *client, nil
	}
}

// javaDouble renders v as Java's Double.toString (how Kafka stores a
// DOUBLE quota): 50.0, 0.5, 1.0E7.
func javaDouble(v float64) string {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	a := math.Abs(v)
	if a == 0 || (a >= 1e-3 && a < 1e7) {
		s := strconv.FormatFloat(v, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(v, 'E', -1, 64) // 1E+07
	mant, exp, _ := strings.Cut(s, "E")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	exp = strings.TrimPrefix(exp, "+")
	if strings.HasPrefix(exp, "-") {
		exp = "-" + strings.TrimLeft(exp[1:], "0")
	} else {
		exp = strings.TrimLeft(exp, "0")
	}
	return mant + "E" + exp
}

// quotaValue checks a quota op's value and renders it as Kafka stores it.
func quotaValue(key string, v float64) (string, error) {
	switch key {
	case quotaKeyProducer, quotaKeyConsumer: // LONG
		const epsilon = 1e-6
		if math.IsNaN(v) || v+epsilon >= math.MaxInt64 || v+epsilon < math.MinInt64 {
			return "", newKafkaError(kerr.InvalidRequest, "Configuration %s must be a LONG value", key)
		}
		n := int64(v + epsilon)
		if math.Abs(float64(n)-v) > epsilon {
			return "", newKafkaError(kerr.InvalidRequest, "Configuration %s must be a LONG value", key)
		}
		return strconv.FormatInt(n, 10), nil
	case quotaKeyRequest: // DOUBLE
		if math.IsNaN(v) {
			return "", newKafkaError(kerr.InvalidRequest, "Configuration %s must be a DOUBLE value", key)
		}
		return javaDouble(v), nil
	}
	return "", newKafkaError(kerr.InvalidRequest, "Invalid configuration key %s", key)
}

// alterClientQuota applies one entry.
func (s *Server) alterClientQuota(e kmsg.AlterClientQuotasRequestEntry, validateOnly bool) error {
	typ, name, err := quotaEntityOf(e.Entity)
	if err != nil {
		return err
	}
	next := func(cur map[string]string) (map[string]string, error) {
		out := map[string]string{}
		for k, v := range cur {
			out[k] = v
		}
		for _, op := range e.Ops {
			if op.Remove {
				if slices.Contains(coord.ScramMechanisms, op.Key) {
					continue // never a credential through the quota API
				}
				delete(out, op.Key)
				continue
			}
			v, err := quotaValue(op.Key, op.Value)
			if err != nil {
				return nil, err
			}
			out[op.Key] = v
		}
		if len(out) == 0 {
			return nil, nil
		}
		return out, nil
	}
	if validateOnly {
		_, err := next(s.coord.EntityConfigs(typ)[name])
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	err = s.coord.AlterEntityConfig(ctx, typ, name, next)
	var ke *kafkaError
	if errors.As(err, &ke) {
		return err
	}
	if err != nil {
		return coordError(err, "write the client quotas")
	}
	s.log.Info("client quotas written", "entity", typ+"/"+name, "ops", len(e.Ops))
	s.loadClientQuotas() // read-your-writes; the watch brings the same
	return nil
}
