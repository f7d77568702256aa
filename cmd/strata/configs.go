package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(&command{
		name:    "configs",
		summary: "describe and alter topic, broker and group configs and client quotas (kafka-configs.sh)",
		actions: configsActions,
		help:    configsHelp,
		// runConfigs takes Kafka's --describe / --alter spellings too.
		run: runConfigs,
	})
}

// configsActions are configs' actions; runConfigs dispatches to them.
var configsActions = map[string]func(args []string, stdout, stderr io.Writer) int{
	"describe": runConfigsDescribe,
	"alter":    runConfigsAlter,
}

const configsHelp = `Usage: strata configs <action> --entity-type TYPE [flags]
       strata configs --describe|--alter --entity-type TYPE [flags]

<action> is describe or alter.

Describes and changes configs over the Kafka protocol (DescribeConfigs,
IncrementalAlterConfigs), like kafka-configs.sh --bootstrap-server. The
action is a word or, as Kafka spells it, --describe or --alter.

Entity types:
  topics   a topic's configs (--entity-name TOPIC; describe: every topic
           when none is named)
  brokers  dynamic broker configs, stored in ZooKeeper (or the embedded
           coordinator) as Kafka's /config/brokers: --entity-name ID for
           one broker (any id, live or not, for alter), --entity-default
           for the cluster-wide default; describe: every live broker when
           neither is given
  groups   a consumer, share or streams group's configs (--entity-name
           GROUP; any group id, existing or not; describe: every group
           ListGroups shows when none is named): share.auto.offset.reset,
           share.isolation.level, share.record.lock.duration.ms, the
           session timeouts and heartbeat intervals, ...
  users    client quotas of a user (--entity-name USER, --entity-default:
           every user without its own); describe: every user when
           neither is given
  clients  client quotas of a client id, likewise; --entity-type users and
           --entity-type clients together: a user's quotas for one client
           id (the i-th --entity-name or --entity-default names the i-th
           type, as kafka-configs.sh); quota keys: producer_byte_rate,
           consumer_byte_rate, request_percentage (docs/quotas.md)

Actions:
  describe  print the dynamic configs (--all: every config, with its source
            and synonyms)
  alter     --add-config k=v,k2=[a,b] sets configs (a value in brackets is a
            list), --delete-config k,k2 removes them (back to the default,
            the properties file's or Kafka's)

Run 'strata configs describe --help' or 'strata configs alter --help' for
the flags.

Example:
  strata configs describe --entity-type brokers --entity-name 1 --all
  strata configs alter --entity-type brokers --entity-default --add-config log.retention.ms=3600000
  strata configs --alter --entity-type topics --entity-name orders --add-config cleanup.policy=[compact,delete]
  strata configs alter --entity-type groups --entity-name jobs --add-config share.auto.offset.reset=earliest
`

// configEntityType is one --entity-type: how its entities are named,
// listed, described and altered. clients and users (quotas) are more
// entries of configEntityTypes.
type configEntityType struct {
	name    string   // as Kafka names it: "topics"
	aliases []string // accepted too: "topic"
	// what names an entity in messages: "topic", "broker".
	what string
	// hasDefault says --entity-default is an entity of this type.
	hasDefault bool
	// list names every entity, for a describe without a name.
	list func(ctx context.Context, s *session) ([]string, error)
	// describe answers one entity's configs ("" with def: the default).
	describe func(ctx context.Context, s *session, name string) (kadm.ResourceConfig, error)
	// alter applies one entity's changes.
	alter func(ctx context.Context, s *session, name string, changes []kadm.AlterConfig) error
	// quota: the entity's configs are client quotas (configs_quotas.go:
	// DescribeClientQuotas, AlterClientQuotas), quotaType its Kafka
	// entity type.
	quota     bool
	quotaType string
}

var configEntityTypes = []configEntityType{
	{
		name: "topics", aliases: []string{"topic"}, what: "topic",
		list: func(ctx context.Context, s *session) ([]string, error) {
			td, err := s.adm.ListTopics(ctx)
			if err != nil {
				return nil, err
			}
			return td.Names(), nil
		},
		describe: func(ctx context.Context, s *session, name string) (kadm.ResourceConfig, error) {
			rc, err := s.adm.DescribeTopicConfigs(ctx, name)
			if err != nil {
				return kadm.ResourceConfig{}, err
			}
			return rc[0], nil
		},
		alter: func(ctx context.Context, s *session, name string, changes []kadm.AlterConfig) error {
			res, err := s.adm.AlterTopicConfigs(ctx, changes, name)
			if err != nil {
				return err
			}
			return kafkaError(res[0].Err, res[0].ErrMessage)
		},
	},
	{
		name: "brokers", aliases: []string{"broker"}, what: "broker", hasDefault: true,
		list: func(ctx context.Context, s *session) ([]string, error) {
			m, err := s.adm.BrokerMetadata(ctx)
			if err != nil {
				return nil, err
			}
			var out []string
			for _, id := range m.Brokers.NodeIDs() {
				out = append(out, strconv.Itoa(int(id)))
			}
			return out, nil
		},
		describe: func(ctx context.Context, s *session, name string) (kadm.ResourceConfig, error) {
			var ids []int32
			if name != "" {
				id, _ := strconv.ParseInt(name, 10, 32) // checked by parseEntity
				ids = append(ids, int32(id))
			}
			rc, err := s.adm.DescribeBrokerConfigs(ctx, ids...)
			if err != nil {
				return kadm.ResourceConfig{}, err
			}
			return rc[0], nil
		},
		alter: alterBrokerConfigs,
	},
	{
		name: "groups", aliases: []string{"group"}, what: "group",
		list: func(ctx context.Context, s *session) ([]string, error) {
			lg, err := s.adm.ListGroups(ctx)
			if err != nil {
				return nil, err
			}
			return lg.Groups(), nil
		},
		describe: describeGroupConfigs,
		alter: func(ctx context.Context, s *session, name string, changes []kadm.AlterConfig) error {
			resp, err := incrementalAlterRequest(kmsg.ConfigResourceTypeGroupConfig, name, changes).RequestWith(ctx, s.cl)
			if err != nil {
				return err
			}
			return incrementalAlterError(resp)
		},
	},
	{name: "users", aliases: []string{"user"}, what: "user-principal", hasDefault: true, quota: true, quotaType: "user"},
	{name: "clients", aliases: []string{"client", "client-id"}, what: "client-id", hasDefault: true, quota: true, quotaType: "client-id"},
}

// alterBrokerConfigs sends one broker resource's IncrementalAlterConfigs:
// to that broker when it is live, else (the default, a broker not live:
// any broker stores it in the coordinator) to any broker.
func alterBrokerConfigs(ctx context.Context, s *session, name string, changes []kadm.AlterConfig) error {
	req := incrementalAlterRequest(kmsg.ConfigResourceTypeBroker, name, changes)
	m, err := s.adm.BrokerMetadata(ctx)
	if err != nil {
		return err
	}
	ids := m.Brokers.NodeIDs()
	if len(ids) == 0 {
		return fmt.Errorf("no live broker")
	}
	target := ids[0]
	if id, err := strconv.ParseInt(name, 10, 32); err == nil && slices.Contains(ids, int32(id)) {
		target = int32(id)
	}
	resp, err := req.RequestWith(ctx, s.cl.Broker(int(target)))
	if err != nil {
		return err
	}
	return incrementalAlterError(resp)
}

// incrementalAlterRequest is one resource's IncrementalAlterConfigs.
func incrementalAlterRequest(typ kmsg.ConfigResourceType, name string, changes []kadm.AlterConfig) *kmsg.IncrementalAlterConfigsRequest {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = typ, name
	for _, c := range changes {
		rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		rc.Name, rc.Value, rc.Op = c.Name, c.Value, kmsg.IncrementalAlterConfigOp(c.Op)
		rr.Configs = append(rr.Configs, rc)
	}
	req.Resources = append(req.Resources, rr)
	return req
}

// incrementalAlterError is the error of a one-resource
// IncrementalAlterConfigs answer.
func incrementalAlterError(resp *kmsg.IncrementalAlterConfigsResponse) error {
	if len(resp.Resources) != 1 {
		return fmt.Errorf("the broker answered %d resources for 1", len(resp.Resources))
	}
	r := resp.Resources[0]
	var msg string
	if r.ErrorMessage != nil {
		msg = *r.ErrorMessage
	}
	return kafkaError(kerr.ErrorForCode(r.ErrorCode), msg)
}

// describeGroupConfigs describes a GROUP config resource (kadm has no
// call for it).
func describeGroupConfigs(ctx context.Context, s *session, name string) (kadm.ResourceConfig, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, name
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return kadm.ResourceConfig{}, err
	}
	if len(resp.Resources) != 1 {
		return kadm.ResourceConfig{}, fmt.Errorf("the broker answered %d resources for 1", len(resp.Resources))
	}
	r := resp.Resources[0]
	rc := kadm.ResourceConfig{Name: r.ResourceName, Err: kerr.ErrorForCode(r.ErrorCode)}
	if r.ErrorMessage != nil {
		rc.ErrMessage = *r.ErrorMessage
	}
	for _, c := range r.Configs {
		cfg := kadm.Config{Key: c.Name, Value: c.Value, Sensitive: c.IsSensitive, Source: c.Source}
		for _, syn := range c.ConfigSynonyms {
			cfg.Synonyms = append(cfg.Synonyms, kadm.ConfigSynonym{Key: syn.Name, Value: syn.Value, Source: syn.Source})
		}
		rc.Configs = append(rc.Configs, cfg)
	}
	return rc, nil
}

// findEntityType is the entry of an --entity-type.
func findEntityType(name string) (*configEntityType, error) {
	var names []string
	for i := range configEntityTypes {
		et := &configEntityTypes[i]
		if et.name == name || slices.Contains(et.aliases, name) {
			return et, nil
		}
		names = append(names, et.name)
	}
	return nil, fmt.Errorf("unknown --entity-type %q: want one of %s", name, strings.Join(names, ", "))
}

// runConfigs dispatches the action: a first word, or Kafka's --describe
// / --alter anywhere.
func runConfigs(args []string, stdout, stderr io.Writer) int {
	// Kafka's --describe / --alter become the action word, wherever
	// they stand; the rest is every command's action dispatch.
	action := ""
	var rest []string
	for _, a := range args {
		switch a {
		case "--describe", "-describe", "--alter", "-alter":
			word := strings.TrimLeft(a, "-")
			if action != "" && action != word {
				fmt.Fprintf(stderr, "strata configs: both --%s and --%s given: give one action\n", action, word)
				return 2
			}
			action = word
		default:
			rest = append(rest, a)
		}
	}
	if action != "" {
		if len(rest) > 0 && (rest[0] == "describe" || rest[0] == "alter") {
			if rest[0] != action {
				fmt.Fprintf(stderr, "strata configs: both %s and --%s given: give one action\n", rest[0], action)
				return 2
			}
			rest = rest[1:]
		}
		rest = append([]string{action}, rest...)
	}
	return runActions("configs", configsHelp, configsActions, rest, stdout, stderr)
}

// entityFlags are the flags that name the entity: as kafka-configs.sh,
// --entity-type may be given twice (users and clients: a user's quotas
// for one client id), the i-th --entity-name or --entity-default
// naming the i-th type.
type entityFlags struct {
	types *stringsFlag
	names *entityNames
}

// entityNames records --entity-name and --entity-default in order.
type entityNames struct {
	list []entityName
}

type entityName struct {
	name string
	def  bool
}

type nameFlag struct{ n *entityNames }

func (f nameFlag) String() string { return "" }
func (f nameFlag) Set(v string) error {
	f.n.list = append(f.n.list, entityName{name: strings.TrimSpace(v)})
	return nil
}

type defaultFlag struct{ n *entityNames }

func (f defaultFlag) String() string   { return "" }
func (f defaultFlag) IsBoolFlag() bool { return true }
func (f defaultFlag) Set(v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return err
	}
	if b {
		f.n.list = append(f.n.list, entityName{def: true})
	}
	return nil
}

func addEntityFlags(c *clientCmd) entityFlags {
	f := entityFlags{types: &stringsFlag{}, names: &entityNames{}}
	c.fs.Var(f.types, "entity-type", "`TYPE` of the entity: topics, brokers, groups, users or clients (users and clients both: a user's quotas for a client id)")
	c.fs.Var(nameFlag{f.names}, "entity-name", "the entity's `NAME`: a topic, a broker id, a group id, a user, a client id")
	c.fs.Var(defaultFlag{f.names}, "entity-default", "the cluster-wide default entity (brokers, users, clients)")
	return f
}

// quotaEntity is a client quota entity part: a user or client id,
// named or the default, or every one of the type (describe).
type quotaEntity struct {
	et   *configEntityType
	name string
	def  bool
}

// parseQuota checks entity flags naming client quota entities: users,
// clients, or both (users first or not).
func (f entityFlags) parseQuota(needOne bool) ([]quotaEntity, error) {
	types := *f.types
	if len(f.names.list) > len(types) {
		return nil, fmt.Errorf("more --entity-name/--entity-default than --entity-type")
	}
	var out []quotaEntity
	for i, typ := range types {
		et, err := findEntityType(typ)
		if err != nil {
			return nil, err
		}
		if !et.quota {
			return nil, fmt.Errorf("--entity-type %s cannot be combined with another --entity-type (only users with clients)", et.name)
		}
		e := quotaEntity{et: et}
		if i < len(f.names.list) {
			e.name, e.def = f.names.list[i].name, f.names.list[i].def
			if !e.def && e.name == "" {
				return nil, fmt.Errorf("--entity-name: empty %s", et.what)
			}
		} else if needOne {
			return nil, fmt.Errorf("--entity-name or --entity-default is required for --entity-type %s", et.name)
		}
		for _, o := range out {
			if o.et == et {
				return nil, fmt.Errorf("--entity-type %s given twice", et.name)
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// parseEntity checks the entity flags: the type, and the name ("" for
// every entity, or, with isDefault, the default).
func (f entityFlags) parse(needOne bool) (et *configEntityType, name string, isDefault bool, err error) {
	types := *f.types
	if len(types) == 0 {
		return nil, "", false, fmt.Errorf("--entity-type is required")
	}
	if len(types) > 1 {
		return nil, "", false, fmt.Errorf("--entity-type given %d times: only users and clients combine", len(types))
	}
	if et, err = findEntityType(types[0]); err != nil {
		return nil, "", false, err
	}
	switch len(f.names.list) {
	case 0:
	case 1:
		name, isDefault = f.names.list[0].name, f.names.list[0].def
	default:
		return nil, "", false, fmt.Errorf("--entity-name and --entity-default are exclusive, and name one entity")
	}
	switch {
	case isDefault && name != "":
		return nil, "", false, fmt.Errorf("--entity-name and --entity-default are exclusive")
	case isDefault && !et.hasDefault:
		return nil, "", false, fmt.Errorf("--entity-default does not apply to %s", et.name)
	case needOne && name == "" && !isDefault:
		if et.hasDefault {
			return nil, "", false, fmt.Errorf("--entity-name or --entity-default is required")
		}
		return nil, "", false, fmt.Errorf("--entity-name is required")
	}
	if et.name == "brokers" && name != "" {
		if id, err := strconv.ParseInt(name, 10, 32); err != nil || id < 0 || strconv.FormatInt(id, 10) != name {
			return nil, "", false, fmt.Errorf("--entity-name %q: a broker id is a non-negative integer", name)
		}
	}
	return et, name, isDefault, nil
}

// describedConfig is one config as describe prints it.
type describedConfig struct {
	Name      string          `json:"name"`
	Value     *string         `json:"value"`
	Source    string          `json:"source"`
	Sensitive bool            `json:"sensitive"`
	Synonyms  []describedSyno `json:"synonyms"`
}

type describedSyno struct {
	Name   string  `json:"name"`
	Value  *string `json:"value"`
	Source string  `json:"source"`
}

// describedEntities is describe's JSON document.
type describedEntities struct {
	Entities []describedEntity `json:"entities"`
}

type describedEntity struct {
	EntityType string            `json:"entity_type"`
	EntityName string            `json:"entity_name"`
	Default    bool              `json:"default"`
	Configs    []describedConfig `json:"configs"`
}

// dynamicSource says a config's source is a dynamic one (what describe
// prints without --all, as kafka-configs.sh).
func dynamicSource(s kmsg.ConfigSource) bool {
	switch s {
	case kmsg.ConfigSourceDynamicTopicConfig, kmsg.ConfigSourceDynamicBrokerConfig, kmsg.ConfigSourceDynamicDefaultBrokerConfig, kmsg.ConfigSourceDynamicBrokerLoggerConfig,
		kmsg.ConfigSourceGroupConfig:
		return true
	}
	return false
}

func runConfigsDescribe(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("configs describe", `Usage: strata configs describe --entity-type TYPE [--entity-name N | --entity-default] [--all] [flags]

Prints an entity's dynamic configs as kafka-configs.sh --describe does:
name=value, sensitive, and the synonyms with their sources, strongest first
(DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
GROUP_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG). --all prints every
config. Without a name: every topic, every live broker, or every group.

For users and clients: the client quotas (DescribeClientQuotas), one line
"Quota configs for user-principal 'alice', client-id 'app' are k=v" per
entity that matches exactly (a type without a name: every named entity of
that type).
`, `
Example:
  strata configs describe --entity-type brokers --entity-default
  strata configs describe --entity-type users --entity-name alice --entity-type clients --entity-name app
  strata configs describe --entity-type topics --entity-name orders --all --format json
`, stdout, stderr)
	ef := addEntityFlags(c)
	all := c.fs.Bool("all", false, "every config, not only the dynamic ones")
	format := c.formatFlag()
	pos, status, ok := c.parse(args)
	if !ok {
		return status
	}
	if len(pos) > 0 {
		return c.usageError("unexpected argument %q", pos[0])
	}
	if ef.isQuota() {
		if *all {
			return c.usageError("--all does not apply to client quotas")
		}
		ents, err := ef.parseQuota(false)
		if err != nil {
			return c.usageError("%v", err)
		}
		return describeQuotas(c, ents, format.json())
	}
	et, name, isDefault, err := ef.parse(false)
	if err != nil {
		return c.usageError("%v", err)
	}
	return c.withAdmin(func(ctx context.Context, s *session) int {
		names := []string{name}
		if name == "" && !isDefault {
			if names, err = et.list(ctx, s); err != nil {
				return c.fail(err)
			}
			sort.Strings(names)
		}
		var out []describedEntity
		for _, n := range names {
			rc, err := et.describe(ctx, s, n)
			if err == nil {
				err = kafkaError(rc.Err, rc.ErrMessage)
			}
			if err != nil {
				return c.fail(fmt.Errorf("%s %s: %w", et.what, entityLabel(n), err))
			}
			de := describedEntity{EntityType: et.name, EntityName: n, Default: isDefault, Configs: []describedConfig{}}
			for _, cfg := range rc.Configs {
				if !*all && !dynamicSource(cfg.Source) {
					continue
				}
				dc := describedConfig{Name: cfg.Key, Value: cfg.Value, Source: cfg.Source.String(), Sensitive: cfg.Sensitive, Synonyms: []describedSyno{}}
				for _, syn := range cfg.Synonyms {
					dc.Synonyms = append(dc.Synonyms, describedSyno{Name: syn.Key, Value: syn.Value, Source: syn.Source.String()})
				}
				de.Configs = append(de.Configs, dc)
			}
			slices.SortFunc(de.Configs, func(a, b describedConfig) int { return strings.Compare(a.Name, b.Name) })
			out = append(out, de)
		}
		if format.json() {
			return c.printJSON(describedEntities{Entities: out})
		}
		for _, de := range out {
			kind := "Dynamic configs"
			if *all {
				kind = "All configs"
			}
			if de.Default {
				fmt.Fprintf(stdout, "Default configs for %s in the cluster are:\n", et.name)
			} else {
				fmt.Fprintf(stdout, "%s for %s %s are:\n", kind, et.what, de.EntityName)
			}
			for _, dc := range de.Configs {
				var syns []string
				for _, s := range dc.Synonyms {
					syns = append(syns, fmt.Sprintf("%s:%s=%s", s.Source, s.Name, shown(s.Value, dc.Sensitive)))
				}
				fmt.Fprintf(stdout, "  %s=%s sensitive=%t synonyms={%s}\n", dc.Name, shown(dc.Value, dc.Sensitive), dc.Sensitive, strings.Join(syns, ", "))
			}
		}
		return 0
	})
}

// shown is a value as kafka-configs.sh prints it (null when there is
// none, or it is sensitive).
func shown(v *string, sensitive bool) string {
	if v == nil || sensitive {
		return "null"
	}
	return *v
}

func entityLabel(name string) string {
	if name == "" {
		return "<default>"
	}
	return name
}

func runConfigsAlter(args []string, stdout, stderr io.Writer) int {
	c := newClientCmd("configs alter", `Usage: strata configs alter --entity-type TYPE (--entity-name N | --entity-default) [--add-config k=v,...] [--delete-config k,...] [flags]

Changes an entity's configs with IncrementalAlterConfigs: each --add-config
pair is a SET, each --delete-config key a DELETE, all in one request, all
or nothing. A value with commas goes in brackets: cleanup.policy=[compact,delete].
A broker's configs are dynamic broker configs: a setting that cannot change
at run time is refused by the broker (INVALID_REQUEST). For users and
clients the configs are client quotas (AlterClientQuotas): producer_byte_rate,
consumer_byte_rate (bytes/s), request_percentage.
`, `
Example:
  strata configs alter --entity-type brokers --entity-name 2 --add-config leader.replication.throttled.rate=10485760
  strata configs alter --entity-type topics --entity-name orders --delete-config retention.ms
  strata configs alter --entity-type clients --entity-name app --add-config producer_byte_rate=1048576
  strata configs alter --entity-type users --entity-default --entity-type clients --entity-default --add-config consumer_byte_rate=2097152
`, stdout, stderr)
	ef := addEntityFlags(c)
	var adds, dels stringsFlag
	c.fs.Var(&adds, "add-config", "configs to set, `k=v,k2=[a,b]`; repeatable")
	c.fs.Var(&dels, "delete-config", "configs to remove, `k,k2`; repeatable")
	pos, status, ok := c.parse(args)
	if !ok {
		return status
	}
	if len(pos) > 0 {
		return c.usageError("unexpected argument %q", pos[0])
	}
	if ef.isQuota() {
		ents, err := ef.parseQuota(true)
		if err != nil {
			return c.usageError("%v", err)
		}
		return alterQuotas(c, ents, adds, dels)
	}
	et, name, isDefault, err := ef.parse(true)
	if err != nil {
		return c.usageError("%v", err)
	}
	sets, deletes, err := parseConfigChanges(adds, dels)
	if err != nil {
		return c.usageError("%v", err)
	}
	var changes []kadm.AlterConfig
	for _, kv := range sets {
		v := kv[1]
		changes = append(changes, kadm.AlterConfig{Op: kadm.SetConfig, Name: kv[0], Value: &v})
	}
	for _, k := range deletes {
		changes = append(changes, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	if len(changes) == 0 {
		return c.usageError("nothing to change: give --add-config or --delete-config")
	}
	return c.withAdmin(func(ctx context.Context, s *session) int {
		if err := et.alter(ctx, s, name, changes); err != nil {
			return c.fail(fmt.Errorf("%s %s: %w", et.what, entityLabel(name), err))
		}
		if isDefault {
			fmt.Fprintf(stdout, "Completed updating default config for %s in the cluster.\n", et.name)
		} else {
			fmt.Fprintf(stdout, "Completed updating config for %s %s.\n", et.what, name)
		}
		return 0
	})
}

// parseAddConfig reads kafka-configs.sh's --add-config: k=v pairs
// separated by commas, a value in brackets holding commas of its own
// ([a,b] is the list a,b).
// parseConfigChanges reads alter's --add-config and --delete-config values:
// the key=value pairs to set and the keys to delete, a key at most once
// among them all.
func parseConfigChanges(adds, dels stringsFlag) (sets [][2]string, deletes []string, err error) {
	seen := map[string]bool{}
	for _, a := range adds {
		kvs, err := parseAddConfig(a)
		if err != nil {
			return nil, nil, fmt.Errorf("--add-config: %w", err)
		}
		for _, kv := range kvs {
			if seen[kv[0]] {
				return nil, nil, fmt.Errorf("config %s given twice", kv[0])
			}
			seen[kv[0]] = true
			sets = append(sets, kv)
		}
	}
	for _, d := range dels {
		for k := range strings.SplitSeq(d, ",") {
			if k = strings.TrimSpace(k); k == "" {
				continue
			}
			if seen[k] {
				return nil, nil, fmt.Errorf("config %s given twice", k)
			}
			seen[k] = true
			deletes = append(deletes, k)
		}
	}
	return sets, deletes, nil
}

func parseAddConfig(s string) ([][2]string, error) {
	var out [][2]string
	for len(strings.TrimSpace(s)) > 0 {
		s = strings.TrimLeft(s, " ,")
		if s == "" {
			break
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return nil, fmt.Errorf("%q: want k=v", s)
		}
		key := strings.TrimSpace(s[:eq])
		if strings.ContainsAny(key, ",[]") {
			return nil, fmt.Errorf("%q: want k=v", s[:eq])
		}
		s = s[eq+1:]
		var val string
		if strings.HasPrefix(s, "[") {
			end := strings.IndexByte(s, ']')
			if end < 0 {
				return nil, fmt.Errorf("config %s: unterminated [", key)
			}
			val, s = s[1:end], s[end+1:]
			if s != "" && s[0] != ',' {
				return nil, fmt.Errorf("config %s: unexpected %q after ]", key, s)
			}
		} else {
			end := strings.IndexByte(s, ',')
			if end < 0 {
				end = len(s)
			}
			val, s = s[:end], s[end:]
			if strings.ContainsAny(val, "[]") {
				return nil, fmt.Errorf("config %s: a list value goes in brackets: k=[a,b]", key)
			}
		}
		out = append(out, [2]string{key, strings.TrimSpace(val)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no k=v given")
	}
	return out, nil
}
