package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/acl"
)

func init() {
	register(&command{
		name:    "acl",
		summary: "add, remove, list ACLs (authorization)",
		actions: aclActions,
		help:    aclHelp,
	})
}

var aclActions = map[string]func(args []string, stdout, stderr io.Writer) int{
	"add":    func(args []string, stdout, stderr io.Writer) int { return runACL(aclAdd, args, stdout, stderr) },
	"remove": func(args []string, stdout, stderr io.Writer) int { return runACL(aclRemove, args, stdout, stderr) },
	"list":   func(args []string, stdout, stderr io.Writer) int { return runACL(aclList, args, stdout, stderr) },
}

const aclHelp = `Usage: strata acl <action> [flags]

Manages the cluster's ACLs through the Kafka ACL APIs (CreateAcls,
DeleteAcls, DescribeAcls), like kafka-acls.sh. The brokers must run with
authorizer.class.name set (see docs/security.md); the client needs ALTER
on the cluster to add or remove ACLs and DESCRIBE to list them (a
super.users principal has both).

Actions:
  add     add ACLs: principals x hosts x operations, on each resource
  remove  remove the ACLs matching the flags (asks first unless --force)
  list    print the ACLs, by resource

Run 'strata acl <action> --help' for its flags and an example.

Example:
  strata acl add --allow-principal User:alice --operation Read --topic orders
  strata acl add --allow-principal User:app --producer --topic orders- --resource-pattern-type prefixed
  strata acl list --topic orders --resource-pattern-type match
  strata acl remove --allow-principal User:alice --operation Read --topic orders --force
`

type aclAction int8

const (
	aclAdd aclAction = iota
	aclRemove
	aclList
)

var aclActionNames = [...]string{"add", "remove", "list"}

var aclActionUsage = [...]string{
	`Usage: strata acl add --allow-principal P|--deny-principal P <resource>... [flags]

Adds an ACL for every combination of principal, host and operation on every
resource given. Principals are "Type:name" (User:alice; User:* for all).
Hosts default to * (every host) for the principals given; --operation
defaults to All. The pattern type is literal (the exact name; * for every
resource of the type) or prefixed (every name starting with it).

--producer adds WRITE, DESCRIBE and CREATE on the topics (and WRITE,
DESCRIBE on the transactional ids given; with --idempotent, IDEMPOTENT_WRITE
on the cluster); --consumer adds READ and DESCRIBE on the topics and READ on
the groups (--group is required). Operations a resource type does not have
are refused, as kafka-acls.sh does.
`,
	`Usage: strata acl remove <resource>... [flags]

Removes the ACLs of the resources given that match the principals, hosts
and operations given, as kafka-acls.sh --remove: without any principal,
every ACL of those resources; with principals, those with the hosts given
(default *) and the operations given (default All, so name the operations
of the ACLs to remove). The pattern type may also be match (the ACLs that
apply to the name: literal, * and prefixes) or any. It lists what is to be
removed and asks for confirmation unless --force.
`,
	`Usage: strata acl list [<resource>...] [flags]

Prints the ACLs, grouped by resource pattern, in kafka-acls.sh's format:
all of them, or those of the resources given (pattern type literal unless
--resource-pattern-type says otherwise: match lists those that apply to the
name), optionally only those of the principals given with --principal.
`,
}

var aclActionExample = [...]string{`
Example:
  strata acl add --allow-principal User:alice --allow-principal User:bob --operation Read --operation Describe --topic orders
  strata acl add --deny-principal User:mallory --deny-host 10.0.0.7 --operation All --topic '*'
  strata acl add --allow-principal User:app --consumer --topic orders --group billing
  strata acl add --allow-principal User:admin --operation Alter --cluster
`, `
Example:
  strata acl remove --allow-principal User:alice --operation Read --topic orders
  strata acl remove --topic orders --force
`, `
Example:
  strata acl list
  strata acl list --topic orders --resource-pattern-type match
  strata acl list --principal User:alice
`}

// aclFlags are the flags of the acl actions (kafka-acls.sh's).
type aclFlags struct {
	c                                  *clientCmd
	allowPrincipals, denyPrincipals    stringsFlag
	allowHosts, denyHosts              stringsFlag
	operations, principals             stringsFlag
	topics, groups, transactionalIDs   stringsFlag
	cluster, producer, consumer, idemp *bool
	patternType                        *string
	force                              *bool
}

func runACL(action aclAction, args []string, stdout, stderr io.Writer) int {
	name := aclActionNames[action]
	c := newClientCmd("acl "+name, aclActionUsage[action], aclActionExample[action], stdout, stderr)
	f := &aclFlags{c: c}
	fs := c.fs
	fs.Var(&f.topics, "topic", "a topic `NAME` (repeatable; * for every topic)")
	fs.Var(&f.groups, "group", "a consumer group `NAME` (repeatable; * for every group)")
	fs.Var(&f.transactionalIDs, "transactional-id", "a transactional `ID` (repeatable; * for every one)")
	f.cluster = fs.Bool("cluster", false, "the cluster resource")
	defPattern := "literal"
	patterns := "literal or prefixed"
	if action != aclAdd {
		patterns = "literal, prefixed, match or any"
	}
	if action == aclList {
		defPattern = "literal, or any without a resource"
	}
	f.patternType = fs.String("resource-pattern-type", "", "how resource names match: `TYPE` "+patterns+" (default "+defPattern+")")
	if action == aclList {
		fs.Var(&f.principals, "principal", "only the ACLs of this `PRINCIPAL` (repeatable)")
	} else {
		fs.Var(&f.allowPrincipals, "allow-principal", "a `PRINCIPAL` (Type:name) the ACLs allow (repeatable)")
		fs.Var(&f.denyPrincipals, "deny-principal", "a `PRINCIPAL` (Type:name) the ACLs deny (repeatable)")
		fs.Var(&f.allowHosts, "allow-host", "a `HOST` (IP address, or *) for the allow principals (repeatable; default *)")
		fs.Var(&f.denyHosts, "deny-host", "a `HOST` (IP address, or *) for the deny principals (repeatable; default *)")
		fs.Var(&f.operations, "operation", "an `OPERATION`: All, Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens (repeatable; default All)")
		f.producer = fs.Bool("producer", false, "a producer's ACLs: WRITE, DESCRIBE, CREATE on the topics (and the transactional ids' WRITE, DESCRIBE)")
		f.consumer = fs.Bool("consumer", false, "a consumer's ACLs: READ, DESCRIBE on the topics, READ on the groups")
		f.idemp = fs.Bool("idempotent", false, "with --producer: IDEMPOTENT_WRITE on the cluster")
	}
	if action == aclRemove {
		f.force = fs.Bool("force", false, "remove without asking")
	}
	var format *formatFlag
	if action == aclList {
		format = c.formatFlag()
	}
	if status, ok := c.parseFlagsOnly(args, ""); !ok {
		return status
	}
	switch action {
	case aclAdd:
		bindings, err := f.addBindings()
		if err != nil {
			return c.usageError("%v", err)
		}
		return c.withAdmin(func(ctx context.Context, s *session) int { return f.add(ctx, s, bindings) })
	case aclRemove:
		filters, err := f.removeFilters()
		if err != nil {
			return c.usageError("%v", err)
		}
		return c.withAdmin(func(ctx context.Context, s *session) int { return f.remove(ctx, s, filters) })
	}
	filters, err := f.listFilters()
	if err != nil {
		return c.usageError("%v", err)
	}
	return c.withAdmin(func(ctx context.Context, s *session) int {
		bindings, err := describeACLs(ctx, s, filters)
		if err != nil {
			return c.fail(err)
		}
		if format.json() {
			return c.printJSON(aclsJSON(bindings))
		}
		printACLs(c.stdout, "Current ACLs for resource", bindings)
		return 0
	})
}

// pattern parses --resource-pattern-type.
func (f *aclFlags) pattern(def acl.PatternType, allowed ...acl.PatternType) (acl.PatternType, error) {
	if *f.patternType == "" {
		return def, nil
	}
	p := acl.ParsePatternType(*f.patternType)
	if !slices.Contains(allowed, p) {
		var names []string
		for _, a := range allowed {
			names = append(names, strings.ToLower(a.String()))
		}
		return 0, fmt.Errorf("--resource-pattern-type %q: want %s", *f.patternType, strings.Join(names, ", "))
	}
	return p, nil
}

// resources are the resources named by the flags, with the operations
// --producer and --consumer give each (nil: the --operation flags).
type aclResource struct {
	typ  acl.ResourceType
	name string
	ops  []acl.Operation
}

func (f *aclFlags) resources() []aclResource {
	var out []aclResource
	for _, t := range f.topics {
		out = append(out, aclResource{typ: acl.ResourceTopic, name: t})
	}
	for _, g := range f.groups {
		out = append(out, aclResource{typ: acl.ResourceGroup, name: g})
	}
	for _, x := range f.transactionalIDs {
		out = append(out, aclResource{typ: acl.ResourceTransactionalID, name: x})
	}
	if *f.cluster {
		out = append(out, aclResource{typ: acl.ResourceCluster, name: acl.ClusterName})
	}
	return out
}

func (f *aclFlags) operationList() ([]acl.Operation, error) {
	if len(f.operations) == 0 {
		return []acl.Operation{acl.OpAll}, nil
	}
	var ops []acl.Operation
	for _, s := range f.operations {
		op := acl.ParseOperation(s)
		if op == acl.OpUnknown || op == acl.OpAny {
			return nil, fmt.Errorf("--operation %q: want one of All, Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens", s)
		}
		if !slices.Contains(ops, op) {
			ops = append(ops, op)
		}
	}
	return ops, nil
}

// entries are the principal x host x operation combinations of the
// allow and deny flags.
func (f *aclFlags) entries(ops []acl.Operation) ([]acl.Entry, error) {
	var out []acl.Entry
	for _, side := range []struct {
		flag       string
		principals []string
		hosts      []string
		perm       acl.PermissionType
	}{{"allow", f.allowPrincipals, f.allowHosts, acl.PermissionAllow}, {"deny", f.denyPrincipals, f.denyHosts, acl.PermissionDeny}} {
		if len(side.hosts) > 0 && len(side.principals) == 0 {
			return nil, fmt.Errorf("--%s-host needs --%s-principal", side.flag, side.flag)
		}
		hosts := side.hosts
		if len(hosts) == 0 {
			hosts = []string{acl.Wildcard}
		}
		for _, p := range side.principals {
			if _, _, err := acl.ParsePrincipal(p); err != nil {
				return nil, fmt.Errorf("--%s-principal %q: want Type:name, such as User:alice", side.flag, p)
			}
			for _, h := range hosts {
				for _, op := range ops {
					out = append(out, acl.Entry{Principal: p, Host: h, Operation: op, Permission: side.perm})
				}
			}
		}
	}
	return out, nil
}

// addBindings builds and validates the bindings of acl add.
func (f *aclFlags) addBindings() ([]acl.Binding, error) {
	pt, err := f.pattern(acl.PatternLiteral, acl.PatternLiteral, acl.PatternPrefixed)
	if err != nil {
		return nil, err
	}
	if len(f.allowPrincipals)+len(f.denyPrincipals) == 0 {
		return nil, errors.New("give at least one --allow-principal or --deny-principal")
	}
	res := f.resources()
	if *f.producer && *f.consumer {
		return nil, errors.New("--producer and --consumer: give one at a time")
	}
	if *f.idemp && !*f.producer {
		return nil, errors.New("--idempotent goes with --producer")
	}
	if *f.producer || *f.consumer {
		if len(f.operations) > 0 || *f.cluster {
			return nil, errors.New("--producer and --consumer set the operations and resources themselves: drop --operation and --cluster")
		}
		if len(f.topics) == 0 {
			return nil, errors.New("--producer and --consumer need --topic")
		}
		if *f.consumer && len(f.groups) == 0 {
			return nil, errors.New("--consumer needs --group")
		}
		if *f.consumer && len(f.transactionalIDs) > 0 {
			return nil, errors.New("--transactional-id goes with --producer")
		}
		if *f.producer && len(f.groups) > 0 {
			return nil, errors.New("--group goes with --consumer")
		}
		for i := range res {
			switch {
			case res[i].typ == acl.ResourceTopic && *f.producer:
				res[i].ops = []acl.Operation{acl.OpWrite, acl.OpDescribe, acl.OpCreate}
			case res[i].typ == acl.ResourceTopic:
				res[i].ops = []acl.Operation{acl.OpRead, acl.OpDescribe}
			case res[i].typ == acl.ResourceGroup:
				res[i].ops = []acl.Operation{acl.OpRead}
			case res[i].typ == acl.ResourceTransactionalID:
				res[i].ops = []acl.Operation{acl.OpWrite, acl.OpDescribe}
			}
		}
		if *f.idemp {
			res = append(res, aclResource{typ: acl.ResourceCluster, name: acl.ClusterName, ops: []acl.Operation{acl.OpIdempotentWrite}})
		}
	}
	if len(res) == 0 {
		return nil, errors.New("give a resource: --topic, --group, --transactional-id or --cluster")
	}
	ops, err := f.operationList()
	if err != nil {
		return nil, err
	}
	var out []acl.Binding
	for _, r := range res {
		rops := ops
		if r.ops != nil {
			rops = r.ops
		}
		for _, op := range rops {
			if op != acl.OpAll && !slices.Contains(acl.SupportedOperations(r.typ), op) {
				return nil, fmt.Errorf("operation %s is not one of %s's: %s, All", op.Name(), r.typ.Name(), opNames(acl.SupportedOperations(r.typ)))
			}
		}
		p := pt
		if r.typ == acl.ResourceCluster {
			p = acl.PatternLiteral
		}
		es, err := f.entries(rops)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			b := acl.Binding{Pattern: acl.Pattern{Type: r.typ, Name: r.name, Pattern: p}, Entry: e}
			if err := b.Validate(); err != nil {
				return nil, err
			}
			out = append(out, b)
		}
	}
	return out, nil
}

func opNames(ops []acl.Operation) string {
	var s []string
	for _, o := range ops {
		s = append(s, o.Name())
	}
	return strings.Join(s, ", ")
}

func strp(s string) *string { return &s }

// removeFilters builds the filters of acl remove.
func (f *aclFlags) removeFilters() ([]acl.Filter, error) {
	pt, err := f.pattern(acl.PatternLiteral, acl.PatternLiteral, acl.PatternPrefixed, acl.PatternMatch, acl.PatternAny)
	if err != nil {
		return nil, err
	}
	if *f.producer || *f.consumer || *f.idemp {
		return nil, errors.New("--producer, --consumer and --idempotent are for add; remove names the operations with --operation")
	}
	res := f.resources()
	if len(res) == 0 {
		return nil, errors.New("give a resource: --topic, --group, --transactional-id or --cluster")
	}
	var filters []acl.Filter
	for _, r := range res {
		p := pt
		if r.typ == acl.ResourceCluster {
			p = acl.PatternLiteral
		}
		base := acl.Filter{Type: r.typ, Name: strp(r.name), Pattern: p, Operation: acl.OpAny, Permission: acl.PermissionAny}
		if len(f.allowPrincipals)+len(f.denyPrincipals) == 0 {
			if len(f.allowHosts)+len(f.denyHosts)+len(f.operations) > 0 {
				return nil, errors.New("--operation and hosts select among a principal's ACLs: give --allow-principal or --deny-principal too (without any, every ACL of the resource is removed)")
			}
			filters = append(filters, base)
			continue
		}
		ops, err := f.operationList()
		if err != nil {
			return nil, err
		}
		es, err := f.entries(ops)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			fl := base
			fl.Principal, fl.Host, fl.Operation, fl.Permission = strp(e.Principal), strp(e.Host), e.Operation, e.Permission
			filters = append(filters, fl)
		}
	}
	return filters, nil
}

// listFilters builds the filters of acl list.
func (f *aclFlags) listFilters() ([]acl.Filter, error) {
	res := f.resources()
	def := acl.PatternLiteral
	if len(res) == 0 {
		def = acl.PatternAny
	}
	pt, err := f.pattern(def, acl.PatternLiteral, acl.PatternPrefixed, acl.PatternMatch, acl.PatternAny)
	if err != nil {
		return nil, err
	}
	principals := []*string{nil}
	if len(f.principals) > 0 {
		principals = nil
		for _, p := range f.principals {
			if _, _, err := acl.ParsePrincipal(p); err != nil {
				return nil, fmt.Errorf("--principal %q: want Type:name, such as User:alice", p)
			}
			principals = append(principals, strp(p))
		}
	}
	var filters []acl.Filter
	for _, p := range principals {
		if len(res) == 0 {
			filters = append(filters, acl.Filter{Type: acl.ResourceAny, Pattern: pt, Principal: p, Operation: acl.OpAny, Permission: acl.PermissionAny})
		}
		for _, r := range res {
			filters = append(filters, acl.Filter{Type: r.typ, Name: strp(r.name), Pattern: pt, Principal: p, Operation: acl.OpAny, Permission: acl.PermissionAny})
		}
	}
	return filters, nil
}

func (f *aclFlags) add(ctx context.Context, s *session, bindings []acl.Binding) int {
	req := kmsg.NewPtrCreateACLsRequest()
	for _, b := range bindings {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceType(b.Pattern.Type), b.Pattern.Name, kmsg.ACLResourcePatternType(b.Pattern.Pattern)
		c.Principal, c.Host = b.Entry.Principal, b.Entry.Host
		c.Operation, c.PermissionType = kmsg.ACLOperation(b.Entry.Operation), kmsg.ACLPermissionType(b.Entry.Permission)
		req.Creations = append(req.Creations, c)
	}
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return f.c.fail(err)
	}
	if len(resp.Results) != len(bindings) {
		return f.c.fail(fmt.Errorf("the broker answered %d results for %d ACLs", len(resp.Results), len(bindings)))
	}
	var failed error
	var added []acl.Binding
	for i, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			if failed == nil {
				failed = aclError(fmt.Errorf("adding %s: %w%s", bindingText(bindings[i]), err, errMessage(r.ErrorMessage)))
			}
			continue
		}
		added = append(added, bindings[i])
	}
	printACLs(f.c.stdout, "Adding ACLs for resource", added)
	if failed != nil {
		return f.c.fail(failed)
	}
	return 0
}

func (f *aclFlags) remove(ctx context.Context, s *session, filters []acl.Filter) int {
	matched, err := describeACLs(ctx, s, filters)
	if err != nil {
		return f.c.fail(err)
	}
	if len(matched) == 0 {
		fmt.Fprintln(f.c.stdout, "No ACLs match; nothing removed.")
		return 0
	}
	if !*f.force {
		printACLs(f.c.stdout, "ACLs to remove for resource", matched)
		fmt.Fprintf(f.c.stdout, "Are you sure you want to remove these %d ACLs? (y/n) ", len(matched))
		line, _ := bufio.NewReader(stdin).ReadString('\n') // EOF: no answer, not a yes
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			fmt.Fprintln(f.c.stdout)
			return f.c.failf("Answer y to remove them, or pass --force.", "not removed")
		}
	}
	req := kmsg.NewPtrDeleteACLsRequest()
	for _, fl := range filters {
		d := kmsg.NewDeleteACLsRequestFilter()
		d.ResourceType, d.ResourceName, d.ResourcePatternType = kmsg.ACLResourceType(fl.Type), fl.Name, kmsg.ACLResourcePatternType(fl.Pattern)
		d.Principal, d.Host = fl.Principal, fl.Host
		d.Operation, d.PermissionType = kmsg.ACLOperation(fl.Operation), kmsg.ACLPermissionType(fl.Permission)
		req.Filters = append(req.Filters, d)
	}
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return f.c.fail(err)
	}
	var removed []acl.Binding
	var failed error
	for _, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			if failed == nil {
				failed = aclError(fmt.Errorf("%w%s", err, errMessage(r.ErrorMessage)))
			}
			continue
		}
		for _, m := range r.MatchingACLs {
			b := acl.Binding{Pattern: acl.Pattern{Type: acl.ResourceType(m.ResourceType), Name: m.ResourceName, Pattern: acl.PatternType(m.ResourcePatternType)},
				Entry: acl.Entry{Principal: m.Principal, Host: m.Host, Operation: acl.Operation(m.Operation), Permission: acl.PermissionType(m.PermissionType)}}
			if !slices.Contains(removed, b) {
				removed = append(removed, b)
			}
		}
	}
	printACLs(f.c.stdout, "Removed ACLs for resource", removed)
	if failed != nil {
		return f.c.fail(failed)
	}
	return 0
}

// describeACLs sends one DescribeAcls per filter and returns the union of
// the bindings, without duplicates.
func describeACLs(ctx context.Context, s *session, filters []acl.Filter) ([]acl.Binding, error) {
	var out []acl.Binding
	for _, fl := range filters {
		req := kmsg.NewPtrDescribeACLsRequest()
		req.ResourceType, req.ResourceName, req.ResourcePatternType = kmsg.ACLResourceType(fl.Type), fl.Name, kmsg.ACLResourcePatternType(fl.Pattern)
		req.Principal, req.Host = fl.Principal, fl.Host
		req.Operation, req.PermissionType = kmsg.ACLOperation(fl.Operation), kmsg.ACLPermissionType(fl.Permission)
		resp, err := req.RequestWith(ctx, s.cl)
		if err != nil {
			return nil, err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return nil, aclError(fmt.Errorf("listing ACLs: %w%s", err, errMessage(resp.ErrorMessage)))
		}
		for _, r := range resp.Resources {
			for _, e := range r.ACLs {
				b := acl.Binding{Pattern: acl.Pattern{Type: acl.ResourceType(r.ResourceType), Name: r.ResourceName, Pattern: acl.PatternType(r.ResourcePatternType)},
					Entry: acl.Entry{Principal: e.Principal, Host: e.Host, Operation: acl.Operation(e.Operation), Permission: acl.PermissionType(e.PermissionType)}}
				if !slices.Contains(out, b) {
					out = append(out, b)
				}
			}
		}
	}
	return out, nil
}

func errMessage(m *string) string {
	if m == nil || *m == "" {
		return ""
	}
	return ": " + *m
}

// aclError adds the next step to the errors the ACL APIs answer.
func aclError(err error) error {
	switch {
	case errors.Is(err, kerr.SecurityDisabled):
		return withHint(err, "The broker runs without an authorizer: set authorizer.class.name (and super.users) in its properties and restart it; see docs/security.md.")
	case errors.Is(err, kerr.ClusterAuthorizationFailed):
		return withHint(err, "This client's principal needs ALTER on the cluster to add or remove ACLs, DESCRIBE to list them: use a principal in the brokers' super.users, or have one grant it with 'strata acl add --allow-principal P --operation Alter --cluster'.")
	}
	return err
}

func bindingText(b acl.Binding) string {
	return fmt.Sprintf("%s on %s", entryText(b.Entry), patternText(b.Pattern))
}

func patternText(p acl.Pattern) string {
	return fmt.Sprintf("ResourcePattern(resourceType=%s, name=%s, patternType=%s)", p.Type, p.Name, p.Pattern)
}

func entryText(e acl.Entry) string {
	return fmt.Sprintf("(principal=%s, host=%s, operation=%s, permissionType=%s)", e.Principal, e.Host, e.Operation, e.Permission)
}

// printACLs prints bindings grouped by resource pattern as kafka-acls.sh
// does, the patterns in order of first appearance.
func printACLs(w io.Writer, title string, bindings []acl.Binding) {
	var order []acl.Pattern
	by := map[acl.Pattern][]acl.Entry{}
	for _, b := range bindings {
		if _, ok := by[b.Pattern]; !ok {
			order = append(order, b.Pattern)
		}
		by[b.Pattern] = append(by[b.Pattern], b.Entry)
	}
	for _, p := range order {
		fmt.Fprintf(w, "%s `%s`:\n", title, patternText(p))
		for _, e := range by[p] {
			fmt.Fprintf(w, " \t%s\n", entryText(e))
		}
		fmt.Fprintln(w)
	}
}
