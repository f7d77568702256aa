package acl

import (
	"fmt"
	"testing"
)

// bind builds a binding for the tables below.
func bind(rt ResourceType, name string, pt PatternType, principal, host string, op Operation, perm PermissionType) Binding {
	return Binding{Pattern: Pattern{rt, name, pt}, Entry: Entry{principal, host, op, perm}}
}

func lit(name, principal, host string, op Operation, perm PermissionType) Binding {
	return bind(ResourceTopic, name, PatternLiteral, principal, host, op, perm)
}

type check struct {
	principal, host string
	op              Operation
	res             Resource
	want            bool
}

func runChecks(t *testing.T, a *Authorizer, checks []check) {
	t.Helper()
	for i, c := range checks {
		if got := a.Authorize(c.principal, c.host, c.op, c.res); got != c.want {
			t.Errorf("#%d: Authorize(%s, %s, %s, %v): got %v, want %v", i, c.principal, c.host, c.op, c.res, got, c.want)
		}
	}
}

const (
	alice  = "User:alice"
	rob    = "User:rob"
	batman = "User:batman"
	host1  = "192.168.1.1"
	host2  = "192.168.1.2"
)

var topicT = Topic("t")

// TestTopicACL is Kafka's AuthorizerTest.testTopicAcl.
func TestTopicACL(t *testing.T) {
	a := NewAuthorizer(Config{})
	a.Update([]Binding{
		lit("t", alice, host1, OpRead, PermissionAllow),
		lit("t", alice, host2, OpRead, PermissionAllow),
		lit("t", alice, host1, OpRead, PermissionDeny),
		lit("t", alice, host1, OpWrite, PermissionAllow),
		lit("t", alice, Wildcard, OpDescribe, PermissionAllow),
		lit("t", rob, Wildcard, OpRead, PermissionAllow),
		lit("t", batman, Wildcard, OpWrite, PermissionAllow),
	})
	runChecks(t, a, []check{
		{alice, host2, OpRead, topicT, true},
		{alice, host1, OpRead, topicT, false}, // deny on host1
		{alice, host1, OpWrite, topicT, true},
		{alice, host2, OpWrite, topicT, false},
		{alice, host1, OpDescribe, topicT, true},
		{alice, host2, OpDescribe, topicT, true},
		{alice, host1, OpAlter, topicT, false},
		{alice, host2, OpAlter, topicT, false},
		{rob, host1, OpDescribe, topicT, true}, // READ implies DESCRIBE
		{batman, host1, OpDescribe, topicT, true},
		{rob, host1, OpRead, topicT, true},
		{batman, host1, OpWrite, topicT, true},
		{rob, host1, OpWrite, topicT, false},
		{alice, host1, OpRead, Topic("other"), false}, // no ACL, fail closed
	})
}

func TestDenyTakesPrecedenceAndWildcards(t *testing.T) {
	a := NewAuthorizer(Config{SuperUsers: []string{"User:superuser1", "User:superuser2"}})
	a.Update([]Binding{
		lit("t", WildcardPrincipal, Wildcard, OpAll, PermissionAllow),
		lit("t", alice, host1, OpAll, PermissionDeny),
		lit("u", WildcardPrincipal, Wildcard, OpAll, PermissionDeny),
	})
	runChecks(t, a, []check{
		{alice, host1, OpRead, topicT, false},
		{alice, host2, OpRead, topicT, true},
		{"User:random", "192.0.4.4", OpRead, topicT, true},
		{"User:superuser1", "192.0.4.4", OpRead, Topic("u"), true},
		{"User:superuser2", "192.0.4.4", OpWrite, Topic("u"), true},
		{"User:random", "192.0.4.4", OpRead, Topic("u"), false},
		// "Group:*" is not the wildcard principal.
		{"Group:x", host1, OpRead, Topic("u"), false},
	})
}

// TestWildcardResource is Kafka's testWildCardAcls.
func TestWildcardResource(t *testing.T) {
	a := NewAuthorizer(Config{})
	acls := []Binding{lit(Wildcard, alice, host1, OpRead, PermissionAllow)}
	a.Update(acls)
	runChecks(t, a, []check{{alice, host1, OpRead, topicT, true}, {alice, host1, OpWrite, topicT, false}})
	acls = append(acls, lit("t", alice, host1, OpWrite, PermissionAllow))
	a.Update(acls)
	runChecks(t, a, []check{{alice, host1, OpWrite, topicT, true}})
	acls = append(acls, lit(Wildcard, alice, host1, OpWrite, PermissionDeny))
	a.Update(acls)
	runChecks(t, a, []check{{alice, host1, OpWrite, topicT, false}, {alice, host1, OpRead, topicT, true}})
}

func TestNoACLFound(t *testing.T) {
	closed := NewAuthorizer(Config{})
	open := NewAuthorizer(Config{AllowEveryoneIfNoACL: true})
	for _, a := range []*Authorizer{closed, open} {
		a.Update([]Binding{lit("guarded", rob, Wildcard, OpRead, PermissionAllow)})
	}
	runChecks(t, closed, []check{{alice, host1, OpRead, topicT, false}, {alice, host1, OpRead, Topic("guarded"), false}})
	// An ACL on the resource, even for another principal, ends the "no ACL" case.
	runChecks(t, open, []check{{alice, host1, OpRead, topicT, true}, {alice, host1, OpRead, Topic("guarded"), false}, {rob, host1, OpRead, Topic("guarded"), true}})
}

// TestInheritance is Kafka's testAclInheritance: which ALLOWs imply which
// operations, and that DENY implies nothing but itself (and ALL all).
func TestInheritance(t *testing.T) {
	allOps := []Operation{OpRead, OpWrite, OpCreate, OpDelete, OpAlter, OpDescribe, OpClusterAction, OpDescribeConfigs, OpAlterConfigs, OpIdempotentWrite, OpCreateTokens, OpDescribeTokens}
	allow := map[Operation][]Operation{
		OpAll: allOps, OpRead: {OpDescribe}, OpWrite: {OpDescribe}, OpDelete: {OpDescribe}, OpAlter: {OpDescribe}, OpAlterConfigs: {OpDescribeConfigs},
	}
	in := func(ops []Operation, op Operation) bool {
		for _, o := range ops {
			if o == op {
				return true
			}
		}
		return false
	}
	for parent, implied := range allow {
		a := NewAuthorizer(Config{})
		a.Update([]Binding{bind(ResourceCluster, ClusterName, PatternLiteral, alice, Wildcard, parent, PermissionAllow)})
		for _, op := range append(allOps, OpAll) {
			want := op == parent || in(implied, op)
			if got := a.Authorize(alice, host1, op, Cluster); got != want {
				t.Errorf("ALLOW %s: Authorize %s: got %v, want %v", parent, op, got, want)
			}
		}
	}
	deny := map[Operation][]Operation{OpAll: allOps, OpDescribe: nil, OpDescribeConfigs: nil, OpRead: nil}
	for parent, implied := range deny {
		a := NewAuthorizer(Config{})
		a.Update([]Binding{
			bind(ResourceCluster, ClusterName, PatternLiteral, alice, Wildcard, parent, PermissionDeny),
			bind(ResourceCluster, ClusterName, PatternLiteral, alice, Wildcard, OpAll, PermissionAllow),
		})
		for _, op := range allOps {
			want := !(op == parent || in(implied, op))
			if got := a.Authorize(alice, host1, op, Cluster); got != want {
				t.Errorf("DENY %s: Authorize %s: got %v, want %v", parent, op, got, want)
			}
		}
	}
}

// TestPrefixed is Kafka's testAuthorizeWithPrefixedResource and
// testSingleCharacterResourceAcls.
func TestPrefixed(t *testing.T) {
	a := NewAuthorizer(Config{})
	var acls []Binding
	for _, n := range []string{"a_other", "foo-1234", "foo-5678-zzz", "fooo-1", "fo-1", "fop-1", "fon-", "z_other"} {
		acls = append(acls, bind(ResourceTopic, n, PatternPrefixed, alice, Wildcard, OpRead, PermissionDeny))
	}
	acls = append(acls, lit("a_other", alice, Wildcard, OpRead, PermissionDeny), lit("z_other", alice, Wildcard, OpRead, PermissionDeny))
	acls = append(acls, bind(ResourceTopic, "foo", PatternPrefixed, alice, Wildcard, OpRead, PermissionAllow))
	a.Update(acls)
	runChecks(t, a, []check{
		{alice, host1, OpRead, Topic("foo-bar"), true},
		{alice, host1, OpRead, Topic("foo-1234-x"), false}, // a longer deny prefix
		{alice, host1, OpRead, Topic("fo"), false},         // "foo" is not a prefix of "fo"
	})

	b := NewAuthorizer(Config{})
	b.Update([]Binding{lit("f", alice, Wildcard, OpRead, PermissionAllow), bind(ResourceTopic, "_", PatternPrefixed, alice, Wildcard, OpRead, PermissionAllow)})
	runChecks(t, b, []check{
		{alice, host1, OpRead, Topic("f"), true},
		{alice, host1, OpRead, Topic("foo"), false},
		{alice, host1, OpRead, Topic("_foo"), true},
		{alice, host1, OpRead, Topic("_"), true},
		{alice, host1, OpRead, Topic("foo_"), false},
		{alice, host1, OpRead, Group("_foo"), false}, // another resource type
	})

	// "*" is the wildcard only as a LITERAL name: PREFIXED "*" is the
	// prefix "*".
	c := NewAuthorizer(Config{})
	c.Update([]Binding{bind(ResourceTopic, Wildcard, PatternPrefixed, alice, Wildcard, OpRead, PermissionAllow)})
	runChecks(t, c, []check{{alice, host1, OpRead, Topic("orders"), false}, {alice, host1, OpRead, Topic("*x"), true}})
}

func TestAuthorizedOperations(t *testing.T) {
	a := NewAuthorizer(Config{})
	a.Update([]Binding{lit("t", alice, Wildcard, OpWrite, PermissionAllow), lit("t", alice, Wildcard, OpAlterConfigs, PermissionAllow)})
	got := a.AuthorizedOperations(alice, host1, topicT)
	want := int32(1<<OpWrite | 1<<OpDescribe | 1<<OpAlterConfigs | 1<<OpDescribeConfigs)
	if got != want {
		t.Errorf("AuthorizedOperations: got %b, want %b", got, want)
	}
	if got := AllOperations(ResourceGroup); got != 1<<OpRead|1<<OpDelete|1<<OpDescribe|1<<OpDescribeConfigs|1<<OpAlterConfigs {
		t.Errorf("AllOperations(GROUP): got %b", got)
	}
}

// TestAuthorizeByResourceType follows Kafka's AuthorizerTest cases for
// authorizeByResourceType (KIP-679).
func TestAuthorizeByResourceType(t *testing.T) {
	cases := []struct {
		acls          []Binding
		allowEveryone bool
		want          bool
	}{
		{nil, false, false},
		{nil, true, true},
		{[]Binding{lit("t1", alice, Wildcard, OpWrite, PermissionAllow)}, false, true},
		{[]Binding{lit("t1", alice, Wildcard, OpAll, PermissionAllow)}, false, true},
		{[]Binding{lit("t1", WildcardPrincipal, Wildcard, OpWrite, PermissionAllow)}, false, true},
		{[]Binding{lit("t1", alice, host2, OpWrite, PermissionAllow)}, false, false},       // other host
		{[]Binding{lit("t1", alice, Wildcard, OpRead, PermissionAllow)}, false, false},     // other op
		{[]Binding{lit("t1", alice, Wildcard, OpDescribe, PermissionAllow)}, false, false}, // no implication
		{[]Binding{lit("t1", alice, Wildcard, OpWrite, PermissionAllow), lit("t1", alice, Wildcard, OpWrite, PermissionDeny)}, false, false},
		{[]Binding{lit("t1", alice, Wildcard, OpWrite, PermissionAllow), lit("t2", alice, Wildcard, OpWrite, PermissionDeny)}, false, true},
		{[]Binding{lit("t1", alice, Wildcard, OpWrite, PermissionAllow), lit(Wildcard, alice, Wildcard, OpWrite, PermissionDeny)}, false, false},
		{[]Binding{lit(Wildcard, alice, Wildcard, OpWrite, PermissionDeny)}, true, false},
		{[]Binding{lit("t2", alice, Wildcard, OpWrite, PermissionDeny)}, true, true},
		{[]Binding{lit("abc", alice, Wildcard, OpWrite, PermissionAllow), bind(ResourceTopic, "a", PatternPrefixed, alice, Wildcard, OpWrite, PermissionDeny)}, false, false},
		{[]Binding{bind(ResourceTopic, "abc", PatternPrefixed, alice, Wildcard, OpWrite, PermissionAllow), bind(ResourceTopic, "ab", PatternPrefixed, alice, Wildcard, OpWrite, PermissionDeny)}, false, false},
		{[]Binding{bind(ResourceTopic, "ab", PatternPrefixed, alice, Wildcard, OpWrite, PermissionAllow), bind(ResourceTopic, "abc", PatternPrefixed, alice, Wildcard, OpWrite, PermissionDeny)}, false, true},
		{[]Binding{lit(Wildcard, alice, Wildcard, OpWrite, PermissionAllow), lit("t1", alice, Wildcard, OpWrite, PermissionDeny)}, false, true},
		{[]Binding{bind(ResourceGroup, "g", PatternLiteral, alice, Wildcard, OpWrite, PermissionAllow)}, false, false}, // other type
	}
	for i, c := range cases {
		a := NewAuthorizer(Config{AllowEveryoneIfNoACL: c.allowEveryone})
		a.Update(c.acls)
		if got := a.AuthorizeByResourceType(alice, host1, OpWrite, ResourceTopic); got != c.want {
			t.Errorf("#%d: got %v, want %v (%v)", i, got, c.want, c.acls)
		}
	}
	a := NewAuthorizer(Config{SuperUsers: []string{"User:admin"}})
	if !a.AuthorizeByResourceType("User:admin", host1, OpWrite, ResourceTopic) {
		t.Error("super user refused")
	}
	if a.AuthorizeByResourceType(alice, host1, OpAny, ResourceTopic) || a.AuthorizeByResourceType(alice, host1, OpWrite, ResourceAny) {
		t.Error("ANY allowed")
	}
}

func TestConfigFromProperties(t *testing.T) {
	cfg, on, err := ConfigFromProperties(map[string]string{PropClassName: ClassAclAuthorizer, PropSuperUsers: " User:a ; User:b;", PropAllowEveryoneNoACL: "true"})
	if err != nil || !on || len(cfg.SuperUsers) != 2 || cfg.SuperUsers[1] != "User:b" || !cfg.AllowEveryoneIfNoACL {
		t.Errorf("got %+v %v %v", cfg, on, err)
	}
	if _, on, err := ConfigFromProperties(nil); on || err != nil {
		t.Errorf("empty: got %v %v", on, err)
	}
	for i, bad := range []map[string]string{
		{PropClassName: "com.example.MyAuthorizer"},
		{PropSuperUsers: "alice"},
		{PropAllowEveryoneNoACL: "yes please"},
	} {
		if _, _, err := ConfigFromProperties(bad); err == nil {
			t.Errorf("#%d: %v accepted", i, bad)
		}
	}
}

// BenchmarkAuthorize checks against n ACLs: one literal ACL per topic for
// n/2 topics and n/2 prefixed ones, the checked topic matched by one of
// each and by a wildcard.
func BenchmarkAuthorize(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("acls=%d", n), func(b *testing.B) {
			var acls []Binding
			for i := 0; i < n/2; i++ {
				acls = append(acls, lit(fmt.Sprintf("topic-%d", i), fmt.Sprintf("User:u%d", i%100), Wildcard, OpRead, PermissionAllow))
				acls = append(acls, bind(ResourceTopic, fmt.Sprintf("p%d-", i), PatternPrefixed, fmt.Sprintf("User:u%d", i%100), Wildcard, OpWrite, PermissionAllow))
			}
			acls = append(acls, lit(Wildcard, "User:u7", "10.0.0.1", OpRead, PermissionDeny))
			a := NewAuthorizer(Config{})
			a.Update(acls)
			res := Topic(fmt.Sprintf("topic-%d", 7+100*((n/2-1)/100))) // a topic of User:u7
			if !a.Authorize("User:u7", host1, OpDescribe, res) {
				b.Fatal("denied")
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				a.Authorize("User:u7", host1, OpDescribe, res)
			}
		})
	}
}
