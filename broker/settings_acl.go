package broker

import (
	"strings"

	"github.com/stratastream/strata/broker/acl"
)

// aclSettings are the authorizer's settings (package acl; authorize.go).
// They are only checked here: the authorizer reads them from
// Config.Properties with acl.ConfigFromProperties.
var aclSettings = []setting{
	{name: acl.PropClassName, typ: typeString, unset: "no authorizer", check: acl.CheckClassName,
		doc: "Turns authorization on: " + strings.Join(acl.ClassNames, ", ") + " (Kafka's class names are accepted for Strata's built-in ACL authorizer, which follows their semantics). Empty: no authorizer, every request is allowed and the ACL APIs answer SECURITY_DISABLED."},
	{name: acl.PropSuperUsers, typ: typeString, unset: "none", check: func(v string) error { _, err := acl.ParseSuperUsers(v); return err },
		doc: `Principals allowed everything whatever the ACLs, separated by semicolons ("User:admin;User:broker").`},
	{name: acl.PropAllowEveryoneNoACL, typ: typeBoolean, def: "false",
		doc: "With an authorizer, allow every principal an operation on a resource that no ACL applies to. False denies it."},
}
