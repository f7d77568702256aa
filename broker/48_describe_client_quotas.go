package broker

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/coord"
)

// DescribeClientQuotas: v0–v1
//
// Behavior (Kafka's ZkAdminManager.describeClientQuotas):
// * The filter's components name the entity types user and client-id,
//   each at most once (else INVALID_REQUEST "Duplicate user filter
//   component entity type"), matching an exact name (match type 0), the
//   default entity (1) or any named entity (2). An empty type is
//   INVALID_REQUEST, another type UNSUPPORTED_VERSION ("Custom entity type
//   'x' not supported"); ip with user or client-id is INVALID_REQUEST.
// * Entities: user (/config/users/<user>), client-id
//   (/config/clients/<id>) and both (/config/users/<user>/clients/<id>),
//   defaults as a null name. An entity is listed when it has a quota key
//   (producer_byte_rate, consumer_byte_rate, request_percentage,
//   controller_mutation_rate) and every component matches it; without
//   strict, an entity may have parts no component names (user alice
//   matches alice and alice with every client id), with strict it may
//   not.
// * ip components: Strata keeps no IP quotas; the answer has no entries.
// * Read from the coordinator's cache of the entity configs.
// * Authorization (with an authorizer, as Kafka): DESCRIBE_CONFIGS on the
//   cluster, else CLUSTER_AUTHORIZATION_FAILED.
//
// Version notes:
// * v1: flexible

func init() { register(48, 0, 1, handleDescribeClientQuotas) }

// Kafka's ClientQuotaEntity types.
const (
	quotaEntityUser     = "user"
	quotaEntityClientID = "client-id"
	quotaEntityIP       = "ip"
)

// quotaFilter is one component: exact (name, or def for the default) or
// any named entity.
type quotaFilter struct {
	any  bool
	def  bool
	name string
}

// quotaName is an entity's user or client id part: absent, the default
// or a name.
type quotaName struct {
	set, def bool
	name     string
}

func (f *quotaFilter) matches(n quotaName) bool {
	if f.any {
		return n.set
	}
	return n.set && n.def == f.def && (f.def || n.name == f.name)
}

func fromZName(z string) quotaName {
	if z == coord.DefaultEntity {
		return quotaName{set: true, def: true}
	}
	name, err := coord.DesanitizeUser(z)
	if err != nil {
		name = z
	}
	return quotaName{set: true, name: name}
}

func zName(f *quotaFilter) string {
	if f.def {
		return coord.DefaultEntity
	}
	return coord.SanitizeUser(f.name)
}

// isQuotaConfig is Kafka's QuotaConfigs.isClientOrUserQuotaConfig.
func isQuotaConfig(k string) bool {
	return k == quotaKeyProducer || k == quotaKeyConsumer || k == quotaKeyRequest || k == quotaKeyController
}

func handleDescribeClientQuotas(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	fail := func(e *kerr.Error, msg string) (reply, error) {
		resp.ErrorCode, resp.ErrorMessage, resp.Entries = e.Code, &msg, nil
		return reply{msg: resp}, nil
	}
	if !s.authorize(r, acl.OpDescribeConfigs, acl.Cluster) {
		return fail(kerr.ClusterAuthorizationFailed, "not authorized to DESCRIBE_CONFIGS the cluster")
	}
	var user, client *quotaFilter
	ip := false
	for _, c := range req.Components {
		var f quotaFilter
		switch c.MatchType {
		case 0:
			if c.Match == nil {
				return fail(kerr.InvalidRequest, "an exact match needs a name")
			}
			f.name = *c.Match
		case 1:
			f.def = true
		case 2:
			f.any = true
		default:
			return fail(kerr.InvalidRequest, "Unexpected match type: "+strconv.Itoa(int(c.MatchType)))
		}
		switch c.EntityType {
		case quotaEntityUser:
			if user != nil {
				return fail(kerr.InvalidRequest, "Duplicate user filter component entity type")
			}
			user = &f
		case quotaEntityClientID:
			if client != nil {
				return fail(kerr.InvalidRequest, "Duplicate client filter component entity type")
			}
			client = &f
		case quotaEntityIP:
			if ip {
				return fail(kerr.InvalidRequest, "Duplicate ip filter component entity type")
			}
			ip = true
		case "":
			return fail(kerr.InvalidRequest, "Unexpected empty filter component entity type")
		default:
			return fail(kerr.UnsupportedVersion, "Custom entity type '"+c.EntityType+"' not supported")
		}
	}
	if ip && (user != nil || client != nil) {
		return fail(kerr.InvalidRequest, "Invalid entity filter component combination, IP filter component should not be used with user or clientId filter component.")
	}
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	if ip {
		return reply{msg: resp}, nil
	}
	entries, err := describeClientQuotas(s.coord, user, client, req.Strict)
	if err != nil {
		return fail(kerr.UnknownServerError, err.Error())
	}
	resp.Entries = entries
	return reply{msg: resp}, nil
}

// describeClientQuotas is ZkAdminManager.handleDescribeClientQuotas.
func describeClientQuotas(store coord.EntityConfigStore, user, client *quotaFilter, strict bool) ([]kmsg.DescribeClientQuotasResponseEntry, error) {
	exact := func(f *quotaFilter) bool { return f != nil && !f.any }
	excluded := func(f *quotaFilter) bool { return strict && f == nil }
	type found struct {
		u, c quotaName
		cfg  map[string]string
	}
	var all []found
	if exact(user) && excluded(client) {
		all = append(all, found{u: quotaName{set: true, def: user.def, name: user.name}, cfg: store.EntityConfigs(coord.EntityUsers)[zName(user)]})
	} else if !excluded(user) && !exact(client) {
		for n, cfg := range store.EntityConfigs(coord.EntityUsers) {
			all = append(all, found{u: fromZName(n), cfg: cfg})
		}
	}
	if excluded(user) && exact(client) {
		all = append(all, found{c: quotaName{set: true, def: client.def, name: client.name}, cfg: store.EntityConfigs(coord.EntityClients)[zName(client)]})
	} else if !exact(user) && !excluded(client) {
		for n, cfg := range store.EntityConfigs(coord.EntityClients) {
			all = append(all, found{c: fromZName(n), cfg: cfg})
		}
	}
	if exact(user) && exact(client) {
		all = append(all, found{u: quotaName{set: true, def: user.def, name: user.name}, c: quotaName{set: true, def: client.def, name: client.name},
			cfg: store.EntityConfigs(coord.EntityUserClients)[coord.UserClientEntity(zName(user), zName(client))]})
	} else if !excluded(user) && !excluded(client) {
		for n, cfg := range store.EntityConfigs(coord.EntityUserClients) {
			u, c, _ := strings.Cut(n, "/")
			all = append(all, found{u: fromZName(u), c: fromZName(c), cfg: cfg})
		}
	}
	matches := func(f *quotaFilter, n quotaName) bool {
		if f != nil {
			return f.matches(n)
		}
		return !n.set || !strict
	}
	var out []kmsg.DescribeClientQuotasResponseEntry
	for _, e := range all {
		if !matches(user, e.u) || !matches(client, e.c) {
			continue
		}
		entry := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, part := range []struct {
			typ string
			n   quotaName
		}{{quotaEntityUser, e.u}, {quotaEntityClientID, e.c}} {
			if !part.n.set {
				continue
			}
			ent := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ent.Type = part.typ
			if !part.n.def {
				ent.Name = kmsg.StringPtr(part.n.name)
			}
			entry.Entity = append(entry.Entity, ent)
		}
		for k, v := range e.cfg {
			if !isQuotaConfig(k) {
				continue
			}
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return nil, err
			}
			val := kmsg.NewDescribeClientQuotasResponseEntryValue()
			val.Key, val.Value = k, f
			entry.Values = append(entry.Values, val)
		}
		if len(entry.Values) == 0 {
			continue
		}
		slices.SortFunc(entry.Values, func(a, b kmsg.DescribeClientQuotasResponseEntryValue) int { return cmp.Compare(a.Key, b.Key) })
		out = append(out, entry)
	}
	key := func(e kmsg.DescribeClientQuotasResponseEntry) string {
		var b strings.Builder
		for _, x := range e.Entity {
			b.WriteString(x.Type + "=")
			if x.Name == nil {
				b.WriteString("\x00")
			} else {
				b.WriteString(*x.Name)
			}
			b.WriteString("\x01")
		}
		return b.String()
	}
	slices.SortFunc(out, func(a, b kmsg.DescribeClientQuotasResponseEntry) int { return cmp.Compare(key(a), key(b)) })
	if out == nil {
		out = []kmsg.DescribeClientQuotasResponseEntry{}
	}
	return out, nil
}
