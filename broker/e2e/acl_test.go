package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// TestSaramaACLs drives CreateAcls, DescribeAcls and DeleteAcls with
// sarama's ClusterAdmin (its own protocol codec) against a strata process
// with the authorizer on: at protocol 2.1 (request version 1) and 3.0
// (DescribeAcls and DeleteAcls version 2, flexible).
func TestSaramaACLs(t *testing.T) {
	b := StartBroker(t, "authorizer.class.name=kafka.security.authorizer.AclAuthorizer", "super.users=User:ANONYMOUS")
	for _, v := range []sarama.KafkaVersion{sarama.V2_1_0_0, sarama.V3_0_0_0} {
		t.Run(v.String(), func(t *testing.T) { saramaACLRound(t, b.Addr, v) })
	}
}

func saramaACLRound(t *testing.T, addr string, v sarama.KafkaVersion) {
	cfg := sarama.NewConfig()
	cfg.Version = v
	cfg.ClientID = "strata-e2e-sarama-acl"
	cfg.Net.DialTimeout = 5 * time.Second
	cfg.Admin.Timeout = 30 * time.Second
	adm, err := sarama.NewClusterAdmin([]string{addr}, cfg)
	if err != nil {
		t.Fatalf("sarama.NewClusterAdmin: %v", err)
	}
	defer adm.Close()

	topic := "orders-" + v.String()
	err = adm.CreateACLs([]*sarama.ResourceAcls{
		{Resource: sarama.Resource{ResourceType: sarama.AclResourceTopic, ResourceName: topic, ResourcePatternType: sarama.AclPatternLiteral},
			Acls: []*sarama.Acl{
				{Principal: "User:alice", Host: "*", Operation: sarama.AclOperationRead, PermissionType: sarama.AclPermissionAllow},
				{Principal: "User:bob", Host: "10.0.0.1", Operation: sarama.AclOperationWrite, PermissionType: sarama.AclPermissionDeny},
			}},
		{Resource: sarama.Resource{ResourceType: sarama.AclResourceGroup, ResourceName: "g-", ResourcePatternType: sarama.AclPatternPrefixed},
			Acls: []*sarama.Acl{{Principal: "User:alice", Host: "*", Operation: sarama.AclOperationRead, PermissionType: sarama.AclPermissionAllow}}},
	})
	if err != nil {
		t.Fatalf("CreateACLs: %v", err)
	}
	list := func(f sarama.AclFilter) []string {
		t.Helper()
		res, err := adm.ListAcls(f)
		if err != nil {
			t.Fatalf("ListAcls: %v", err)
		}
		var out []string
		for _, r := range res {
			for _, a := range r.Acls {
				out = append(out, fmt.Sprintf("%s:%s:%s:%s:%s:%s:%s", r.ResourceType.String(), r.ResourceName, r.ResourcePatternType.String(), a.Principal, a.Host, a.Operation.String(), a.PermissionType.String()))
			}
		}
		slices.Sort(out)
		return out
	}
	name := topic
	got := list(sarama.AclFilter{ResourceType: sarama.AclResourceTopic, ResourceName: &name, ResourcePatternTypeFilter: sarama.AclPatternMatch,
		Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny})
	want := []string{
		fmt.Sprintf("Topic:%s:Literal:User:alice:*:Read:Allow", topic),
		fmt.Sprintf("Topic:%s:Literal:User:bob:10.0.0.1:Write:Deny", topic),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ListAcls MATCH %s: got %v, want %v", topic, got, want)
	}
	group := "g-billing"
	if got := list(sarama.AclFilter{ResourceType: sarama.AclResourceGroup, ResourceName: &group, ResourcePatternTypeFilter: sarama.AclPatternMatch,
		Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny}); len(got) != 1 {
		t.Fatalf("ListAcls MATCH %s: got %v", group, got)
	}

	bob := "User:bob"
	deleted, err := adm.DeleteACL(sarama.AclFilter{ResourceType: sarama.AclResourceAny, ResourcePatternTypeFilter: sarama.AclPatternAny,
		Principal: &bob, Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny}, false)
	if err != nil {
		t.Fatalf("DeleteACL: %v", err)
	}
	if len(deleted) != 1 || deleted[0].ResourceName != topic || deleted[0].Principal != bob || deleted[0].Err != sarama.ErrNoError {
		t.Fatalf("DeleteACL bob: %+v", deleted)
	}
	all := sarama.AclFilter{ResourceType: sarama.AclResourceAny, ResourcePatternTypeFilter: sarama.AclPatternAny, Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny}
	if _, err := adm.DeleteACL(all, false); err != nil {
		t.Fatalf("DeleteACL all: %v", err)
	}
	if got := list(all); len(got) != 0 {
		t.Fatalf("after deleting all: %v", got)
	}
}
