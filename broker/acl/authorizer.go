package acl

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// Authorizer class names accepted in authorizer.class.name. Kafka's two
// name the authorizers whose semantics this package implements; the
// Strata name is the same authorizer by its own name.
const (
	ClassAclAuthorizer      = "kafka.security.authorizer.AclAuthorizer"
	ClassStandardAuthorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
	ClassStrata             = "io.strata.acl.Authorizer"
)

// ClassNames are the accepted values of authorizer.class.name besides "".
var ClassNames = []string{ClassAclAuthorizer, ClassStandardAuthorizer, ClassStrata}

// Property names read by ConfigFromProperties (Kafka's).
const (
	PropClassName          = "authorizer.class.name"
	PropSuperUsers         = "super.users"
	PropAllowEveryoneNoACL = "allow.everyone.if.no.acl.found"
)

// Config is an Authorizer's configuration.
type Config struct {
	// SuperUsers are allowed everything ("User:admin", ...).
	SuperUsers []string
	// AllowEveryoneIfNoACL allows everyone an operation on a resource no
	// ACL applies to.
	AllowEveryoneIfNoACL bool
}

// CheckClassName validates authorizer.class.name: empty (no authorizer)
// or one of ClassNames.
func CheckClassName(v string) error {
	if v == "" || slices.Contains(ClassNames, v) {
		return nil
	}
	return fmt.Errorf("acl: authorizer.class.name %q is not supported; use one of %s (all are Strata's built-in ACL authorizer), or leave it empty for none", v, strings.Join(ClassNames, ", "))
}

// ParseSuperUsers parses super.users: principals separated by
// semicolons, each "Type:name", blanks around them ignored.
func ParseSuperUsers(v string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(v, ";") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if _, _, err := ParsePrincipal(s); err != nil {
			return nil, fmt.Errorf("acl: super.users: %w", err)
		}
		out = append(out, s)
	}
	return out, nil
}

// ConfigFromProperties reads the authorizer's settings from broker
// properties (Kafka's names, see the Prop constants). enabled is false
// when authorizer.class.name is empty or absent: no authorizer, every
// request allowed, the ACL APIs answer SECURITY_DISABLED.
func ConfigFromProperties(props map[string]string) (cfg Config, enabled bool, err error) {
	class := strings.TrimSpace(props[PropClassName])
	if err := CheckClassName(class); err != nil {
		return Config{}, false, err
	}
	if cfg.SuperUsers, err = ParseSuperUsers(props[PropSuperUsers]); err != nil {
		return Config{}, false, err
	}
	if v := strings.TrimSpace(props[PropAllowEveryoneNoACL]); v != "" {
		if cfg.AllowEveryoneIfNoACL, err = strconv.ParseBool(v); err != nil {
			return Config{}, false, fmt.Errorf("acl: %s: %q is not a boolean", PropAllowEveryoneNoACL, v)
		}
	}
	return cfg, class != "", nil
}

// Authorizer decides requests from a set of bindings, replaced whole by
// Update. Checks read an immutable index through an atomic pointer: they
// never block, and see either the old set or the new one. Safe for
// concurrent use.
type Authorizer struct {
	super         map[string]bool
	allowEveryone bool
	idx           atomic.Pointer[index]
}

// NewAuthorizer returns an authorizer with no bindings.
func NewAuthorizer(cfg Config) *Authorizer {
	a := &Authorizer{super: map[string]bool{}, allowEveryone: cfg.AllowEveryoneIfNoACL}
	for _, s := range cfg.SuperUsers {
		a.super[s] = true
	}
	a.idx.Store(buildIndex(nil))
	return a
}

// Update replaces the bindings the authorizer decides from. Invalid
// bindings (Validate) are skipped: the store refuses them on the way in.
func (a *Authorizer) Update(bindings []Binding) { a.idx.Store(buildIndex(bindings)) }

// Len is the number of bindings in use.
func (a *Authorizer) Len() int { return a.idx.Load().n }

// IsSuperUser reports whether principal is one of super.users.
func (a *Authorizer) IsSuperUser(principal string) bool { return a.super[principal] }

// index holds the bindings by resource pattern, each pattern's entries by
// principal, and per resource type the lengths of its PREFIXED names, so
// a check looks up a handful of map keys whatever the number of ACLs.
type index struct {
	n        int
	patterns map[Pattern]*entries
	// prefixLens are, per resource type, the distinct lengths of its
	// PREFIXED pattern names, ascending.
	prefixLens map[ResourceType][]int
	// byType are the patterns of each resource type, for
	// AuthorizeByResourceType.
	byType map[ResourceType][]Pattern
}

type entries struct {
	byPrincipal map[string][]Entry
}

func buildIndex(bindings []Binding) *index {
	ix := &index{patterns: map[Pattern]*entries{}, prefixLens: map[ResourceType][]int{}, byType: map[ResourceType][]Pattern{}}
	for _, b := range bindings {
		if b.Validate() != nil {
			continue
		}
		es := ix.patterns[b.Pattern]
		if es == nil {
			es = &entries{byPrincipal: map[string][]Entry{}}
			ix.patterns[b.Pattern] = es
			ix.byType[b.Pattern.Type] = append(ix.byType[b.Pattern.Type], b.Pattern)
			if b.Pattern.Pattern == PatternPrefixed {
				l := ix.prefixLens[b.Pattern.Type]
				if i, found := slices.BinarySearch(l, len(b.Pattern.Name)); !found {
					ix.prefixLens[b.Pattern.Type] = slices.Insert(l, i, len(b.Pattern.Name))
				}
			}
		}
		if !slices.Contains(es.byPrincipal[b.Entry.Principal], b.Entry) {
			es.byPrincipal[b.Entry.Principal] = append(es.byPrincipal[b.Entry.Principal], b.Entry)
			ix.n++
		}
	}
	return ix
}

// matching returns the entries of the patterns that apply to res: its
// LITERAL pattern, the LITERAL wildcard, and the PREFIXED patterns whose
// name is a prefix of res's name. It appends to buf.
func (ix *index) matching(res Resource, buf []*entries) []*entries {
	if es := ix.patterns[Pattern{res.Type, res.Name, PatternLiteral}]; es != nil {
		buf = append(buf, es)
	}
	if res.Name != Wildcard {
		if es := ix.patterns[Pattern{res.Type, Wildcard, PatternLiteral}]; es != nil {
			buf = append(buf, es)
		}
	}
	for _, l := range ix.prefixLens[res.Type] {
		if l > len(res.Name) {
			break
		}
		if es := ix.patterns[Pattern{res.Type, res.Name[:l], PatternPrefixed}]; es != nil {
			buf = append(buf, es)
		}
	}
	return buf
}

// has reports whether an entry of es for principal (or the wildcard
// principal) and host (or "*") has permission perm for one of ops or ALL.
func (es *entries) has(principal, host string, perm PermissionType, ops []Operation) bool {
	for _, p := range [2]string{principal, WildcardPrincipal} {
		for _, e := range es.byPrincipal[p] {
			if e.Permission == perm && (e.Host == host || e.Host == Wildcard) &&
				(e.Operation == OpAll || slices.Contains(ops, e.Operation)) {
				return true
			}
		}
		if principal == WildcardPrincipal {
			break
		}
	}
	return false
}

// Authorize reports whether principal ("User:alice"), connected from host
// (an IP address, without Kafka's leading "/"), may perform op on res, by
// Kafka's rules (see the package doc). An op or resource type that is ANY
// or UNKNOWN is denied.
func (a *Authorizer) Authorize(principal, host string, op Operation, res Resource) bool {
	if a.super[principal] {
		return true
	}
	if !op.known() || !res.Type.known() {
		return false
	}
	ix := a.idx.Load()
	var buf [8]*entries
	matched := ix.matching(res, buf[:0])
	if len(matched) == 0 {
		return a.allowEveryone
	}
	deny := [1]Operation{op}
	for _, es := range matched {
		if es.has(principal, host, PermissionDeny, deny[:]) {
			return false
		}
	}
	allow := impliedBy(op)
	for _, es := range matched {
		if es.has(principal, host, PermissionAllow, allow) {
			return true
		}
	}
	return false
}

// AuthorizedOperations is the authorized-operations bit field Kafka puts
// in Metadata and DescribeGroups/DescribeCluster answers: bit i is set
// when operation code i is allowed on res, over the operations the
// resource type supports (SupportedOperations).
func (a *Authorizer) AuthorizedOperations(principal, host string, res Resource) int32 {
	var bits int32
	for _, op := range SupportedOperations(res.Type) {
		if a.Authorize(principal, host, op, res) {
			bits |= 1 << op
		}
	}
	return bits
}

// AllOperations is the bit field of every operation res's type supports:
// what Kafka reports when no authorizer is configured.
func AllOperations(t ResourceType) int32 {
	var bits int32
	for _, op := range SupportedOperations(t) {
		bits |= 1 << op
	}
	return bits
}

// AuthorizeByResourceType reports whether principal may perform op on at
// least one resource of type t (KIP-679; Kafka uses it to let a producer
// with WRITE on some topic be idempotent). It follows AclAuthorizer:
// super users are allowed; a DENY of the LITERAL wildcard denies; with
// allow.everyone.if.no.acl.found it allows; otherwise some ALLOW
// (LITERAL or PREFIXED, for op exactly or ALL) must exist whose resource
// no DENY covers (a DENY of the same literal, or of a PREFIXED name that
// is a prefix of it). op and t must be concrete, or it denies.
func (a *Authorizer) AuthorizeByResourceType(principal, host string, op Operation, t ResourceType) bool {
	if a.super[principal] {
		return true
	}
	if !op.known() || !t.known() {
		return false
	}
	ix := a.idx.Load()
	ops := [1]Operation{op}
	var allowLit, allowPre []string
	denyLit, denyPre := map[string]bool{}, map[string]bool{}
	for _, p := range ix.byType[t] {
		es := ix.patterns[p]
		if es.has(principal, host, PermissionDeny, ops[:]) {
			if p.Pattern == PatternLiteral {
				if p.Name == Wildcard {
					return false
				}
				denyLit[p.Name] = true
			} else {
				denyPre[p.Name] = true
			}
		}
		if es.has(principal, host, PermissionAllow, ops[:]) {
			if p.Pattern == PatternLiteral {
				allowLit = append(allowLit, p.Name)
			} else {
				allowPre = append(allowPre, p.Name)
			}
		}
	}
	if a.allowEveryone {
		return true
	}
	dominantDeny := func(name string) bool {
		for i := 1; i <= len(name); i++ {
			if denyPre[name[:i]] {
				return true
			}
		}
		return false
	}
	for _, n := range allowPre {
		if !dominantDeny(n) {
			return true
		}
	}
	for _, n := range allowLit {
		if n == Wildcard || (!denyLit[n] && !dominantDeny(n)) {
			return true
		}
	}
	return false
}
