package acl

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Names with a meaning of their own.
const (
	// Wildcard as a LITERAL resource name matches every resource of the
	// type; as a host, every host.
	Wildcard = "*"
	// WildcardPrincipal matches every principal.
	WildcardPrincipal = "User:*"
	// ClusterName is the only name of the CLUSTER resource.
	ClusterName = "kafka-cluster"
)

// ErrInvalid is wrapped by the validation errors: Kafka's INVALID_REQUEST.
var ErrInvalid = errors.New("acl: invalid binding")

// Resource is a concrete resource an operation is performed on: a topic,
// group, the cluster ("kafka-cluster"), a transactional id.
type Resource struct {
	Type ResourceType
	Name string
}

// Topic, Group, Cluster and TransactionalID build the resources the
// broker's checks name.
func Topic(name string) Resource           { return Resource{ResourceTopic, name} }
func Group(name string) Resource           { return Resource{ResourceGroup, name} }
func TransactionalID(name string) Resource { return Resource{ResourceTransactionalID, name} }

// Cluster is the cluster resource.
var Cluster = Resource{ResourceCluster, ClusterName}

// Pattern is a resource pattern: which resources an ACL is about.
type Pattern struct {
	Type    ResourceType
	Name    string
	Pattern PatternType // LITERAL or PREFIXED in a binding
}

// Entry is an access control entry: who may (or may not) do what from where.
type Entry struct {
	Principal  string // "Type:name", e.g. "User:alice"; "User:*" for all
	Host       string // an IP address, or "*"
	Operation  Operation
	Permission PermissionType
}

// Binding is one ACL: an entry bound to a resource pattern.
type Binding struct {
	Pattern Pattern
	Entry   Entry
}

func (b Binding) String() string {
	return fmt.Sprintf("(%s %s %q) %s %s %s from %q", b.Pattern.Type, b.Pattern.Pattern, b.Pattern.Name,
		b.Entry.Principal, b.Entry.Permission, b.Entry.Operation, b.Entry.Host)
}

// ParsePrincipal splits "Type:name" at the first colon, as Kafka's
// SecurityUtils.parseKafkaPrincipal: both parts must be there (the name
// may be empty in Kafka; the type may not be).
func ParsePrincipal(s string) (typ, name string, err error) {
	typ, name, ok := strings.Cut(s, ":")
	if !ok || typ == "" {
		return "", "", fmt.Errorf("%w: expected a principal in format principalType:principalName but got %q", ErrInvalid, s)
	}
	return typ, name, nil
}

// Validate checks a binding as Kafka's CreateAcls does: concrete resource
// type, pattern type, operation and permission (no ANY, MATCH or
// UNKNOWN); a non-empty resource name without "/" (it is a ZooKeeper node
// name); the CLUSTER resource named "kafka-cluster"; a principal
// "Type:name"; a non-empty host; UTF-8 strings (they are stored as
// JSON). Errors wrap ErrInvalid.
func (b Binding) Validate() error {
	p, e := b.Pattern, b.Entry
	switch {
	case !p.Type.known():
		return fmt.Errorf("%w: invalid resource type %s", ErrInvalid, p.Type)
	case !p.Pattern.known():
		return fmt.Errorf("%w: invalid pattern type %s", ErrInvalid, p.Pattern)
	case p.Name == "":
		return fmt.Errorf("%w: invalid empty resource name", ErrInvalid)
	case strings.Contains(p.Name, "/"):
		return fmt.Errorf("%w: resource name %q contains '/'", ErrInvalid, p.Name)
	case !utf8.ValidString(p.Name) || !utf8.ValidString(e.Principal) || !utf8.ValidString(e.Host):
		return fmt.Errorf("%w: resource name, principal and host must be UTF-8", ErrInvalid)
	case p.Type == ResourceCluster && p.Name != ClusterName:
		return fmt.Errorf("%w: the only valid name for the CLUSTER resource is %s", ErrInvalid, ClusterName)
	}
	return e.validate()
}

// Filter matches bindings, for DescribeAcls and DeleteAcls. ANY in a
// field matches every value; a nil string matches every string.
// PatternMatch matches the bindings that apply to the named resource: its
// LITERAL binding, the LITERAL wildcard, and the PREFIXED bindings whose
// name is a prefix of it.
type Filter struct {
	Type       ResourceType
	Name       *string
	Pattern    PatternType
	Principal  *string
	Host       *string
	Operation  Operation
	Permission PermissionType
}

// MatchAll is the filter that matches every binding.
var MatchAll = Filter{Type: ResourceAny, Pattern: PatternAny, Operation: OpAny, Permission: PermissionAny}

// Validate checks a filter as Kafka's DescribeAcls and DeleteAcls
// requests do: no UNKNOWN element. Errors wrap ErrInvalid.
func (f Filter) Validate() error {
	if f.Type == ResourceUnknown || f.Pattern == PatternUnknown || f.Operation == OpUnknown || f.Permission == PermissionUnknown ||
		!(f.Type == ResourceAny || f.Type.known()) || !(f.Pattern == PatternAny || f.Pattern == PatternMatch || f.Pattern.known()) ||
		!(f.Operation == OpAny || f.Operation.known()) || !(f.Permission == PermissionAny || f.Permission.known()) {
		return fmt.Errorf("%w: filter contains UNKNOWN elements", ErrInvalid)
	}
	return nil
}

// MatchesPattern is Kafka's ResourcePatternFilter.matches.
func (f Filter) MatchesPattern(p Pattern) bool {
	if f.Type != ResourceAny && f.Type != p.Type {
		return false
	}
	if f.Pattern != PatternAny && f.Pattern != PatternMatch && f.Pattern != p.Pattern {
		return false
	}
	if f.Name == nil {
		return true
	}
	if f.Pattern == PatternAny || f.Pattern == p.Pattern {
		return *f.Name == p.Name
	}
	switch p.Pattern {
	case PatternLiteral:
		return *f.Name == p.Name || p.Name == Wildcard
	case PatternPrefixed:
		return strings.HasPrefix(*f.Name, p.Name)
	}
	return false
}

// MatchesEntry is Kafka's AccessControlEntryFilter.matches.
func (f Filter) MatchesEntry(e Entry) bool {
	return (f.Principal == nil || *f.Principal == e.Principal) &&
		(f.Host == nil || *f.Host == e.Host) &&
		(f.Operation == OpAny || f.Operation == e.Operation) &&
		(f.Permission == PermissionAny || f.Permission == e.Permission)
}

// Matches reports whether the filter matches the binding.
func (f Filter) Matches(b Binding) bool {
	return f.MatchesPattern(b.Pattern) && f.MatchesEntry(b.Entry)
}
