package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/broker/group"
	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/segment/poll"
)

// anyACLs is the kadm filter that matches every ACL.
func anyACLs() *kadm.ACLBuilder {
	return kadm.NewACLs().AnyResource().Allow().AllowHosts().Deny().DenyHosts().Operations().ResourcePatternType(kadm.ACLPatternAny)
}

// aclAdmin is a kadm client of s.
func aclAdmin(t *testing.T, s *Server) *kadm.Client {
	t.Helper()
	return kadm.NewClient(newClient(t, s))
}

// authorizerProps turns the authorizer on, with the test client
// (anonymous) a super user unless super is "".
func authorizerProps(super string) map[string]string {
	p := map[string]string{"authorizer.class.name": acl.ClassAclAuthorizer}
	if super != "" {
		p["super.users"] = super
	}
	return p
}

func TestACLsSecurityDisabled(t *testing.T) {
	s := startServer(t, nil)
	adm := aclAdmin(t, s)
	ctx := testCtx(t)
	res, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics("t").Allow("User:alice").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || !errors.Is(res[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("CreateACLs without an authorizer: %+v", res)
	}
	desc, err := adm.DescribeACLs(ctx, anyACLs())
	if err != nil || len(desc) != 1 || !errors.Is(desc[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("DescribeACLs without an authorizer: %+v %v", desc, err)
	}
	del, err := adm.DeleteACLs(ctx, anyACLs())
	if err != nil || len(del) == 0 || !errors.Is(del[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("DeleteACLs without an authorizer: %+v %v", del, err)
	}
}

func TestACLSettingsRefused(t *testing.T) {
	for _, props := range []map[string]string{
		{"authorizer.class.name": "com.example.CustomAuthorizer"},
		{"authorizer.class.name": acl.ClassStandardAuthorizer, "super.users": "admin"},
		{"allow.everyone.if.no.acl.found": "sometimes"},
	} {
		if _, err := ConfigFromProperties(props); err == nil {
			t.Errorf("%v accepted", props)
		} else {
			t.Logf("%v: %v", props, err)
		}
	}
}

// TestACLAdminAPIs runs kadm's CreateACLs, DescribeACLs and DeleteACLs
// against a broker whose client is a super user, and checks the ACLs
// survive a restart of the broker (embedded coordinator).
func TestACLAdminAPIs(t *testing.T) {
	cfg := testConfig(t, authorizerProps(anonymous))
	s := startServerConfig(t, cfg)
	adm := aclAdmin(t, s)
	ctx := testCtx(t)

	created, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics("orders", "payments").Groups("billing").
		Allow("User:alice", "User:bob").AllowHosts("10.0.0.1").Operations(kadm.OpRead, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral))
	mustCreate(t, created, err, 2*3*2)
	created, err = adm.CreateACLs(ctx, kadm.NewACLs().Topics("logs-").Deny("User:mallory").Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternPrefixed))
	mustCreate(t, created, err, 1)

	// A cluster ACL not named kafka-cluster is INVALID_REQUEST (kadm
	// always names it right, so send the request raw).
	req := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeCluster, "my-cluster", kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:alice", "*", kmsg.ACLOperationAlter, kmsg.ACLPermissionTypeAllow
	ok := c
	ok.ResourceName = acl.ClusterName
	req.Creations = append(req.Creations, c, ok)
	resp, err := req.RequestWith(ctx, newClient(t, s))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Results[0].ErrorCode != kerr.InvalidRequest.Code || resp.Results[1].ErrorCode != 0 {
		t.Fatalf("cluster ACL results: %+v", resp.Results)
	}

	described, err := adm.DescribeACLs(ctx, kadm.NewACLs().Topics("orders").Allow().AllowHosts().Deny().DenyHosts().Operations().ResourcePatternType(kadm.ACLPatternMatch))
	if err != nil || described[0].Err != nil {
		t.Fatal(err, described)
	}
	if n := len(described[0].Described); n != 4 { // alice and bob, READ and DESCRIBE
		t.Fatalf("DescribeACLs MATCH orders: %d bindings: %+v", n, described[0].Described)
	}
	described, err = adm.DescribeACLs(ctx, kadm.NewACLs().Topics("logs-app").Allow().AllowHosts().Deny().DenyHosts().Operations().ResourcePatternType(kadm.ACLPatternMatch))
	if err != nil || described[0].Err != nil || len(described[0].Described) != 1 || described[0].Described[0].Pattern != kadm.ACLPatternPrefixed {
		t.Fatalf("DescribeACLs MATCH logs-app: %+v %v", described, err)
	}

	deleted, err := adm.DeleteACLs(ctx, kadm.NewACLs().AnyResource().Allow("User:bob").AllowHosts().Operations().ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	if len(deleted) != 1 || deleted[0].Err != nil || len(deleted[0].Deleted) != 6 {
		t.Fatalf("DeleteACLs bob: %+v", deleted)
	}
	if n := countACLs(t, adm); n != 6+1+1 {
		t.Fatalf("after delete: %d bindings, want 8", n)
	}

	// The embedded coordinator keeps them across a restart.
	shutdown(t, s)
	s2 := startServerConfig(t, cfg)
	if n := countACLs(t, aclAdmin(t, s2)); n != 8 {
		t.Fatalf("after restart: %d bindings, want 8", n)
	}
}

func mustCreate(t *testing.T, res kadm.CreateACLsResults, err error, n int) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != n {
		t.Fatalf("%d results, want %d", len(res), n)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create %+v: %v (%s)", r, r.Err, r.ErrMessage)
		}
	}
}

func countACLs(t *testing.T, adm *kadm.Client) int {
	t.Helper()
	d, err := adm.DescribeACLs(testCtx(t), anyACLs())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range d {
		if r.Err != nil {
			t.Fatalf("DescribeACLs: %v (%s)", r.Err, r.ErrMessage)
		}
		n += len(r.Described)
	}
	return n
}

func shutdown(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestACLClusterAuthorization: the ACL APIs need ALTER (create, delete)
// and DESCRIBE (describe) on the cluster, and an ACL change is enforced
// by the running broker.
func TestACLClusterAuthorization(t *testing.T) {
	s := startServer(t, authorizerProps(""))
	adm := aclAdmin(t, s)
	ctx := testCtx(t)
	res, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics("t").Allow("User:alice").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("CreateACLs without ALTER: %+v %v", res, err)
	}
	if d, err := adm.DescribeACLs(ctx, anyACLs()); err != nil || !errors.Is(d[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("DescribeACLs without DESCRIBE: %+v %v", d, err)
	}

	// Grant ALTER on the cluster through the coordinator (as another
	// broker or an operator would); the broker enforces it once its
	// authorizer has the change.
	grant := acl.Binding{Pattern: acl.Pattern{Type: acl.ResourceCluster, Name: acl.ClusterName, Pattern: acl.PatternLiteral},
		Entry: acl.Entry{Principal: anonymous, Host: "*", Operation: acl.OpAlter, Permission: acl.PermissionAllow}}
	if err := s.coord.CreateACLs(ctx, []acl.Binding{grant})[0]; err != nil {
		t.Fatal(err)
	}
	waitAuthorized(t, s, anonymous, acl.OpAlter, acl.Cluster, true)
	res, err = adm.CreateACLs(ctx, kadm.NewACLs().Topics("t").Allow("User:alice").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))
	mustCreate(t, res, err, 1)
	// ALTER implies DESCRIBE.
	if n := countACLs(t, adm); n != 2 {
		t.Fatalf("%d bindings, want 2", n)
	}
	if got := s.authz.AuthorizedOperations(anonymous, "127.0.0.1", acl.Cluster); got != 1<<acl.OpAlter|1<<acl.OpDescribe {
		t.Fatalf("authorized operations on the cluster: %b", got)
	}
}

// waitAuthorized polls s's authorizer until it decides want, logging how
// long that took.
func waitAuthorized(t *testing.T, s *Server, principal string, op acl.Operation, res acl.Resource, want bool) {
	t.Helper()
	start := time.Now()
	if !poll.For(30*time.Second, func() bool { return s.authz.Authorize(principal, "127.0.0.1", op, res) == want }) {
		t.Fatalf("%s %s on %v: not %v after 30s", principal, op, res, want)
	}
	t.Logf("%s %s on %v is %v after %v", principal, op, res, want, time.Since(start))
}

// TestACLsAcrossZooKeeperCluster: two brokers on one ZooKeeper; an ACL
// created through one broker's Kafka API is enforced by the other's
// authorizer, and so is its deletion.
func TestACLsAcrossZooKeeperCluster(t *testing.T) {
	zks := zktest.Start(t)
	connect := zks.ConnectString(fmt.Sprintf("/strata-acl-%d", time.Now().UnixNano()))
	start := func(id int) *Server {
		p := authorizerProps(anonymous)
		p["broker.id"] = fmt.Sprint(id)
		p["zookeeper.connect"] = connect
		p["offsets.topic.replication.factor"] = "1"
		return startServer(t, p)
	}
	a, b := start(1), start(2)
	ctx := testCtx(t)
	res, err := aclAdmin(t, a).CreateACLs(ctx, kadm.NewACLs().Topics("orders-").Allow("User:alice").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternPrefixed))
	mustCreate(t, res, err, 1)
	waitAuthorized(t, b, "User:alice", acl.OpWrite, acl.Topic("orders-eu"), true)
	if b.authz.Authorize("User:alice", "127.0.0.1", acl.OpRead, acl.Topic("orders-eu")) {
		t.Fatal("WRITE allows READ")
	}
	if n := countACLs(t, aclAdmin(t, b)); n != 1 {
		t.Fatalf("broker 2 describes %d bindings, want 1", n)
	}
	del, err := aclAdmin(t, b).DeleteACLs(ctx, kadm.NewACLs().AnyResource().Allow("User:alice").AllowHosts().Operations().ResourcePatternType(kadm.ACLPatternAny))
	if err != nil || len(del) != 1 || len(del[0].Deleted) != 1 {
		t.Fatalf("delete through broker 2: %+v %v", del, err)
	}
	waitAuthorized(t, a, "User:alice", acl.OpWrite, acl.Topic("orders-eu"), false)
}

// TestAuthorizeHelpers checks the helpers the request handlers call: the
// principal and host they take from the request, and their answers with
// and without an authorizer.
func TestAuthorizeHelpers(t *testing.T) {
	r := &request{ctx: group.WithClient(context.Background(), group.Client{Host: "/10.1.2.3"})}
	if p, h := r.peer(); p != anonymous || h != "10.1.2.3" {
		t.Fatalf("peer: got %q %q", p, h)
	}
	open := &Server{}
	if !open.authorize(r, acl.OpDelete, acl.Topic("t")) || !open.authorizeByResourceType(r, acl.OpWrite, acl.ResourceTopic) ||
		open.authorizedOperations(r, acl.Topic("t")) != acl.AllOperations(acl.ResourceTopic) {
		t.Fatal("without an authorizer everything is allowed")
	}
	s := &Server{authz: acl.NewAuthorizer(acl.Config{})}
	s.authz.Update([]acl.Binding{
		{Pattern: acl.Pattern{Type: acl.ResourceTopic, Name: "t", Pattern: acl.PatternLiteral},
			Entry: acl.Entry{Principal: anonymous, Host: "10.1.2.3", Operation: acl.OpWrite, Permission: acl.PermissionAllow}},
		{Pattern: acl.Pattern{Type: acl.ResourceTopic, Name: "u", Pattern: acl.PatternLiteral},
			Entry: acl.Entry{Principal: anonymous, Host: "10.9.9.9", Operation: acl.OpRead, Permission: acl.PermissionAllow}},
	})
	cases := []struct {
		got, want bool
	}{
		{s.authorize(r, acl.OpWrite, acl.Topic("t")), true},
		{s.authorize(r, acl.OpDescribe, acl.Topic("t")), true},
		{s.authorize(r, acl.OpRead, acl.Topic("t")), false},
		{s.authorize(r, acl.OpRead, acl.Topic("u")), false}, // another host
		{s.authorizeByResourceType(r, acl.OpWrite, acl.ResourceTopic), true},
		{s.authorizeByResourceType(r, acl.OpRead, acl.ResourceTopic), false},
	}
	for i, c := range cases {
		if c.got != c.want {
			t.Errorf("#%d: got %v, want %v", i, c.got, c.want)
		}
	}
	if got := s.authorizedOperations(r, acl.Topic("t")); got != 1<<acl.OpWrite|1<<acl.OpDescribe {
		t.Errorf("authorizedOperations: %b", got)
	}
}
