package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Client quotas in strata configs (kafka-configs.sh --entity-type users /
// clients): describe is DescribeClientQuotas with a strict filter (as
// ConfigCommand: a named entity matches exactly, --entity-default the
// default, a type without a name every named entity of it), alter is
// AlterClientQuotas.

// isQuota says the entity flags name client quota entities.
func (f entityFlags) isQuota() bool {
	for _, t := range *f.types {
		if et, err := findEntityType(t); err == nil && et.quota {
			return true
		}
	}
	return false
}

// describedQuotas is describe's JSON document for client quotas.
type describedQuotas struct {
	Entities []describedQuota `json:"entities"`
}

type describedQuota struct {
	// Entity maps user and client-id to a name, null for the default.
	Entity map[string]*string `json:"entity"`
	Quotas map[string]float64 `json:"quotas"`
}

// quotaEntityLabel is an entity as kafka-configs.sh prints it.
func quotaEntityLabel(e kadm.ClientQuotaEntity) string {
	var parts []string
	for _, c := range e {
		what := c.Type
		if c.Type == "user" {
			what = "user-principal"
		}
		if c.Name == nil {
			parts = append(parts, "the default "+what)
		} else {
			parts = append(parts, fmt.Sprintf("%s '%s'", what, *c.Name))
		}
	}
	return strings.Join(parts, ", ")
}

func describeQuotas(c *clientCmd, ents []quotaEntity, asJSON bool) int {
	var comps []kadm.DescribeClientQuotaComponent
	for _, e := range ents {
		comp := kadm.DescribeClientQuotaComponent{Type: e.et.quotaType}
		switch {
		case e.def:
			comp.MatchType = 1
		case e.name != "":
			name := e.name
			comp.MatchType, comp.MatchName = 0, &name
		default:
			comp.MatchType = 2
		}
		comps = append(comps, comp)
	}
	return c.withAdmin(func(ctx context.Context, s *session) int {
		res, err := s.adm.DescribeClientQuotas(ctx, true, comps)
		if err != nil {
			return c.fail(err)
		}
		slices.SortFunc(res, func(a, b kadm.DescribedClientQuota) int {
			return strings.Compare(quotaEntityLabel(a.Entity), quotaEntityLabel(b.Entity))
		})
		if asJSON {
			doc := describedQuotas{Entities: []describedQuota{}}
			for _, q := range res {
				dq := describedQuota{Entity: map[string]*string{}, Quotas: map[string]float64{}}
				for _, e := range q.Entity {
					dq.Entity[e.Type] = e.Name
				}
				for _, v := range q.Values {
					dq.Quotas[v.Key] = v.Value
				}
				doc.Entities = append(doc.Entities, dq)
			}
			return c.printJSON(doc)
		}
		for _, q := range res {
			var kv []string
			for _, v := range q.Values {
				kv = append(kv, v.Key+"="+strconv.FormatFloat(v.Value, 'f', -1, 64))
			}
			slices.Sort(kv)
			fmt.Fprintf(c.stdout, "Quota configs for %s are %s\n", quotaEntityLabel(q.Entity), strings.Join(kv, ", "))
		}
		return 0
	})
}

func alterQuotas(c *clientCmd, ents []quotaEntity, adds, dels stringsFlag) int {
	var entity kadm.ClientQuotaEntity
	for _, e := range ents {
		comp := kadm.ClientQuotaEntityComponent{Type: e.et.quotaType}
		if !e.def {
			name := e.name
			comp.Name = &name
		}
		entity = append(entity, comp)
	}
	sets, deletes, err := parseConfigChanges(adds, dels)
	if err != nil {
		return c.usageError("%v", err)
	}
	var ops []kadm.AlterClientQuotaOp
	for _, kv := range sets {
		v, err := strconv.ParseFloat(kv[1], 64)
		if err != nil {
			return c.usageError("--add-config %s=%s: a quota is a number", kv[0], kv[1])
		}
		ops = append(ops, kadm.AlterClientQuotaOp{Key: kv[0], Value: v})
	}
	for _, k := range deletes {
		ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Remove: true})
	}
	if len(ops) == 0 {
		return c.usageError("nothing to change: give --add-config or --delete-config")
	}
	return c.withAdmin(func(ctx context.Context, s *session) int {
		res, err := s.adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: ops}})
		if err == nil && len(res) != 1 {
			err = fmt.Errorf("the broker answered %d entities for 1", len(res))
		}
		if err == nil {
			err = kafkaError(res[0].Err, res[0].ErrMessage)
		}
		if err != nil {
			return c.fail(fmt.Errorf("%s: %w", quotaEntityLabel(entity), err))
		}
		fmt.Fprintf(c.stdout, "Completed updating config for %s.\n", quotaEntityLabel(entity))
		return 0
	})
}
