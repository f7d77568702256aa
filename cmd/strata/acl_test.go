package main

import (
	"strings"
	"testing"
)

// TestACLCommands runs strata acl add, list and remove against a broker
// with the authorizer on and the CLI's (anonymous) principal a super user.
func TestACLCommands(t *testing.T) {
	_, addr := startBrokerProps(t, map[string]string{
		"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
		"super.users":           "User:ANONYMOUS",
	})
	b := []string{"--bootstrap-server", addr}
	acl := func(args ...string) result { return mustCLI(t, append(append([]string{"acl"}, args...), b...)...) }

	r := acl("add", "--allow-principal", "User:alice", "--allow-principal", "User:bob", "--operation", "Read", "--operation", "describe", "--topic", "orders")
	if n := strings.Count(r.stdout, "(principal="); n != 4 {
		t.Fatalf("add: %d ACLs printed, want 4:\n%s", n, r.stdout)
	}
	if !strings.Contains(r.stdout, "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`:\n \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n") {
		t.Errorf("add output:\n%s", r.stdout)
	}
	acl("add", "--allow-principal", "User:app", "--producer", "--idempotent", "--topic", "logs-", "--resource-pattern-type", "prefixed")
	acl("add", "--allow-principal", "User:app", "--consumer", "--topic", "orders", "--group", "billing")
	acl("add", "--deny-principal", "User:mallory", "--deny-host", "10.0.0.7", "--topic", "*")

	all := acl("list").stdout
	for _, want := range []string{
		"ResourcePattern(resourceType=TOPIC, name=logs-, patternType=PREFIXED)",
		"(principal=User:app, host=*, operation=CREATE, permissionType=ALLOW)",
		"ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)",
		"(principal=User:app, host=*, operation=IDEMPOTENT_WRITE, permissionType=ALLOW)",
		"ResourcePattern(resourceType=GROUP, name=billing, patternType=LITERAL)",
		"(principal=User:mallory, host=10.0.0.7, operation=ALL, permissionType=DENY)",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("list: no %q in:\n%s", want, all)
		}
	}
	if n := strings.Count(all, "(principal="); n != 4+3+1+2+1+1 {
		t.Errorf("list: %d ACLs, want 12:\n%s", n, all)
	}
	// match: the ACLs that apply to orders, including the * deny.
	if m := acl("list", "--topic", "orders", "--resource-pattern-type", "match").stdout; strings.Count(m, "(principal=") != 4+2+1 {
		t.Errorf("list match orders:\n%s", m)
	}
	if p := acl("list", "--principal", "User:app").stdout; strings.Count(p, "(principal=") != 3+2+1+1 || strings.Contains(p, "alice") {
		t.Errorf("list --principal User:app:\n%s", p)
	}

	// remove asks first; no answer (EOF) removes nothing.
	withStdin(t, "")
	r = cli(t, append([]string{"acl", "remove", "--allow-principal", "User:bob", "--operation", "Read", "--topic", "orders"}, b...)...)
	if r.code != 1 || !strings.Contains(r.stdout, "Are you sure") || !strings.Contains(r.stderr, "--force") {
		t.Fatalf("remove without an answer: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	withStdin(t, "y\n")
	r = acl("remove", "--allow-principal", "User:bob", "--operation", "Read", "--topic", "orders")
	if !strings.Contains(r.stdout, "Removed ACLs for resource") || strings.Count(r.stdout, "Removed") != 1 {
		t.Errorf("remove bob READ:\n%s", r.stdout)
	}
	r = acl("remove", "--topic", "orders", "--force")
	if strings.Count(r.stdout, "(principal=") != 3+2 {
		t.Errorf("remove every ACL of orders:\n%s", r.stdout)
	}
	if left := acl("list").stdout; strings.Count(left, "(principal=") != 12-6 || strings.Contains(left, "name=orders,") {
		t.Errorf("after removals:\n%s", left)
	}
}

func TestACLCommandErrors(t *testing.T) {
	_, plain := startBroker(t)
	r := cli(t, "acl", "list", "--bootstrap-server", plain)
	if r.code != 1 || !strings.Contains(r.stderr, "SECURITY_DISABLED") || !strings.Contains(r.stderr, "authorizer.class.name") {
		t.Errorf("list without an authorizer: exit %d\n%s", r.code, r.stderr)
	}
	_, secured := startBrokerProps(t, map[string]string{"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})
	r = cli(t, "acl", "add", "--allow-principal", "User:a", "--topic", "t", "--bootstrap-server", secured)
	if r.code != 1 || !strings.Contains(r.stderr, "CLUSTER_AUTHORIZATION_FAILED") || !strings.Contains(r.stderr, "super.users") {
		t.Errorf("add without ALTER: exit %d\n%s", r.code, r.stderr)
	}
	for i, args := range [][]string{
		{"add", "--topic", "t"},
		{"add", "--allow-principal", "alice", "--topic", "t"},
		{"add", "--allow-principal", "User:a"},
		{"add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"},
		{"add", "--allow-principal", "User:a", "--operation", "ClusterAction", "--topic", "t"},
		{"add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"},
		{"add", "--allow-host", "1.2.3.4", "--deny-principal", "User:a", "--topic", "t"},
		{"add", "--allow-principal", "User:a", "--consumer", "--topic", "t"},
		{"add", "--allow-principal", "User:a", "--producer", "--group", "g"},
		{"remove", "--allow-principal", "User:a"},
		{"remove", "--operation", "Read", "--topic", "t"},
		{"list", "--principal", "nobody"},
	} {
		r := cli(t, append(append([]string{"acl"}, args...), "--bootstrap-server", secured)...)
		if r.code != 2 {
			t.Errorf("#%d: %v: exit %d, want 2\n%s", i, args, r.code, r.stderr)
		}
	}
}
