package acl

import (
	"fmt"
	"strings"
)

// ResourceType is Kafka's resource type (org.apache.kafka.common.resource.ResourceType).
type ResourceType int8

// Resource types with their wire codes. Never renumber.
const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
)

// PatternType is Kafka's resource pattern type (org.apache.kafka.common.resource.PatternType).
type PatternType int8

// Pattern types with their wire codes. Never renumber.
const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1
	PatternMatch    PatternType = 2
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

// Operation is Kafka's ACL operation (org.apache.kafka.common.acl.AclOperation).
type Operation int8

// Operations with their wire codes (also their bit in authorized-operations
// fields). Never renumber.
const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
)

// PermissionType is Kafka's ACL permission type (org.apache.kafka.common.acl.AclPermissionType).
type PermissionType int8

// Permission types with their wire codes. Never renumber.
const (
	PermissionUnknown PermissionType = 0
	PermissionAny     PermissionType = 1
	PermissionDeny    PermissionType = 2
	PermissionAllow   PermissionType = 3
)

// Kafka's enum names (upper case, as Java's Enum.name), indexed by code.
var (
	resourceTypeNames   = []string{"UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"}
	patternTypeNames    = []string{"UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"}
	operationNames      = []string{"UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS"}
	permissionTypeNames = []string{"UNKNOWN", "ANY", "DENY", "ALLOW"}
)

func enumName(names []string, code int8) string {
	if code >= 0 && int(code) < len(names) {
		return names[code]
	}
	return fmt.Sprintf("UNKNOWN(%d)", code)
}

// pascal is Kafka's SecurityUtils.toPascalCase: "TRANSACTIONAL_ID" gives
// "TransactionalId".
func pascal(name string) string {
	var b strings.Builder
	up := true
	for _, c := range name {
		switch {
		case c == '_':
			up = true
		case up:
			b.WriteString(strings.ToUpper(string(c)))
			up = false
		default:
			b.WriteString(strings.ToLower(string(c)))
		}
	}
	return b.String()
}

// parseEnum finds name among names as Kafka's SecurityUtils does: the
// PascalCase form, or its upper case ("TransactionalId",
// "TRANSACTIONALID"); also the Java enum name ("TRANSACTIONAL_ID") and,
// case-insensitively, either. It returns 0 (UNKNOWN) when none matches.
func parseEnum(names []string, name string) int8 {
	for code, n := range names {
		p := pascal(n)
		if name == p || strings.EqualFold(name, p) || strings.EqualFold(name, n) {
			return int8(code)
		}
	}
	return 0
}

// String is Kafka's enum name ("TRANSACTIONAL_ID").
func (t ResourceType) String() string { return enumName(resourceTypeNames, int8(t)) }

// Name is the PascalCase name Kafka stores in ZooKeeper paths ("TransactionalId").
func (t ResourceType) Name() string { return pascal(t.String()) }

// ParseResourceType parses a name in any of Kafka's spellings; ResourceUnknown if none.
func ParseResourceType(s string) ResourceType {
	return ResourceType(parseEnum(resourceTypeNames, s))
}

// String is Kafka's enum name ("PREFIXED").
func (p PatternType) String() string { return enumName(patternTypeNames, int8(p)) }

// ParsePatternType parses a name case-insensitively; PatternUnknown if none.
func ParsePatternType(s string) PatternType { return PatternType(parseEnum(patternTypeNames, s)) }

// String is Kafka's enum name ("DESCRIBE_CONFIGS").
func (o Operation) String() string { return enumName(operationNames, int8(o)) }

// Name is the PascalCase name Kafka stores in ZooKeeper ("DescribeConfigs").
func (o Operation) Name() string { return pascal(o.String()) }

// ParseOperation parses a name in any of Kafka's spellings; OpUnknown if none.
func ParseOperation(s string) Operation { return Operation(parseEnum(operationNames, s)) }

// String is Kafka's enum name ("ALLOW").
func (p PermissionType) String() string { return enumName(permissionTypeNames, int8(p)) }

// Name is the PascalCase name Kafka stores in ZooKeeper ("Allow").
func (p PermissionType) Name() string { return pascal(p.String()) }

// ParsePermissionType parses a name in any of Kafka's spellings; PermissionUnknown if none.
func ParsePermissionType(s string) PermissionType {
	return PermissionType(parseEnum(permissionTypeNames, s))
}

// known reports whether code is a defined value of the enum.
func (t ResourceType) known() bool   { return t > ResourceAny && t <= ResourceUser }
func (p PatternType) known() bool    { return p == PatternLiteral || p == PatternPrefixed }
func (o Operation) known() bool      { return o > OpAny && o <= OpDescribeTokens }
func (p PermissionType) known() bool { return p == PermissionDeny || p == PermissionAllow }

// SupportedOperations are the operations an ACL of the resource type can
// meaningfully grant, as Kafka's AclEntry.supportedOperations lists them
// (ALL is valid for every type besides). kafka-acls refuses other
// operations; the broker stores them (as Kafka does). It is also the set
// whose bits AuthorizedOperations fills. Nil for ANY and UNKNOWN.
func SupportedOperations(t ResourceType) []Operation {
	switch t {
	case ResourceTopic:
		return []Operation{OpRead, OpWrite, OpCreate, OpDelete, OpAlter, OpDescribe, OpDescribeConfigs, OpAlterConfigs}
	case ResourceGroup:
		return []Operation{OpRead, OpDelete, OpDescribe, OpDescribeConfigs, OpAlterConfigs}
	case ResourceCluster:
		return []Operation{OpCreate, OpAlter, OpDescribe, OpClusterAction, OpDescribeConfigs, OpAlterConfigs, OpIdempotentWrite}
	case ResourceTransactionalID:
		return []Operation{OpWrite, OpDescribe}
	case ResourceDelegationToken:
		return []Operation{OpDescribe}
	case ResourceUser:
		return []Operation{OpCreateTokens, OpDescribeTokens}
	}
	return nil
}

// impliedBy lists the operations whose ALLOW allows op (op itself first).
// ALL is handled apart.
func impliedBy(op Operation) []Operation {
	switch op {
	case OpDescribe:
		return []Operation{OpDescribe, OpRead, OpWrite, OpDelete, OpAlter}
	case OpDescribeConfigs:
		return []Operation{OpDescribeConfigs, OpAlterConfigs}
	}
	return []Operation{op}
}
