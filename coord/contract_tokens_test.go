package coord

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/segment/poll"
)

// testDelegationTokens: a token created, renewed and deleted by one
// session is seen by another, kept across a restart; malformed tokens are
// refused and change nothing; deleting a missing token is no error.
func testDelegationTokens(t *testing.T, e env) {
	a, b := e.open(t), e.open(t)
	ctx := ctxT(t, waitTimeout)
	now := time.Now().UnixMilli()
	tok := DelegationToken{TokenID: "AbC-d_9", Owner: "User:alice b/é", Requester: "User:admin", Renewers: []string{"User:bob", "User:carol*"},
		IssueTimestamp: now, MaxTimestamp: now + 7*86400000, ExpiryTimestamp: now + 86400000}
	if err := a.PutDelegationToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if got, ok := a.DelegationToken(tok.TokenID); !ok || !reflect.DeepEqual(got, tok) {
		t.Fatalf("writer's read: %+v %v", got, ok)
	}
	waitToken(t, b, tok.TokenID, func(got DelegationToken, ok bool) bool { return ok && reflect.DeepEqual(got, tok) })

	renewed := tok
	renewed.ExpiryTimestamp = now + 2*86400000
	if err := b.PutDelegationToken(ctx, renewed); err != nil {
		t.Fatal(err)
	}
	waitToken(t, a, tok.TokenID, func(got DelegationToken, ok bool) bool { return ok && got.ExpiryTimestamp == renewed.ExpiryTimestamp })

	for i, bad := range []DelegationToken{
		{TokenID: "", Owner: "User:a", Requester: "User:a", IssueTimestamp: now, MaxTimestamp: now, ExpiryTimestamp: now},
		{TokenID: "a/b", Owner: "User:a", Requester: "User:a", IssueTimestamp: now, MaxTimestamp: now, ExpiryTimestamp: now},
		{TokenID: "x", Owner: "alice", Requester: "User:a", IssueTimestamp: now, MaxTimestamp: now, ExpiryTimestamp: now},
		{TokenID: "x", Owner: "User:a", Requester: "User:a", Renewers: []string{"bob"}, IssueTimestamp: now, MaxTimestamp: now, ExpiryTimestamp: now},
		{TokenID: "x", Owner: "User:a", Requester: "User:a", IssueTimestamp: now, MaxTimestamp: now, ExpiryTimestamp: now + 1},
	} {
		if err := a.PutDelegationToken(ctx, bad); err == nil {
			t.Fatalf("#%d: accepted %+v", i, bad)
		}
	}
	if err := a.DeleteDelegationToken(ctx, "../x"); err == nil {
		t.Fatal("deletion of a malformed ID accepted")
	}
	if got := a.DelegationTokens(); len(got) != 1 || got[0].TokenID != tok.TokenID {
		t.Fatalf("tokens after refused writes: %+v", got)
	}

	// A second token; both kept across a restart of every session.
	other := DelegationToken{TokenID: "zz", Owner: "User:bob", Requester: "User:bob", IssueTimestamp: now, MaxTimestamp: now + 1000, ExpiryTimestamp: now + 1000}
	if err := a.PutDelegationToken(ctx, other); err != nil {
		t.Fatal(err)
	}
	e.restart(t)
	c, d := e.open(t), e.open(t)
	if got := c.DelegationTokens(); len(got) != 2 || !reflect.DeepEqual(got[0], renewed) || !reflect.DeepEqual(got[1], other) {
		t.Fatalf("after restart: %+v", got)
	}

	if err := c.DeleteDelegationToken(ctx, tok.TokenID); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.DelegationToken(tok.TokenID); ok {
		t.Fatal("writer still has the deleted token")
	}
	waitToken(t, d, tok.TokenID, func(_ DelegationToken, ok bool) bool { return !ok })
	if err := c.DeleteDelegationToken(ctx, tok.TokenID); err != nil {
		t.Fatalf("deleting a missing token: %v", err)
	}
	if got := d.DelegationTokens(); len(got) != 1 || got[0].TokenID != "zz" {
		t.Fatalf("tokens left: %+v", got)
	}
}

// waitToken polls c until cond holds for the token and logs how long it
// took.
func waitToken(t *testing.T, c Coordinator, id string, cond func(DelegationToken, bool) bool) {
	t.Helper()
	start := time.Now()
	if !poll.For(waitTimeout, func() bool { return cond(c.DelegationToken(id)) }) {
		got, ok := c.DelegationToken(id)
		t.Fatalf("token %s not as expected by another session in %v: %+v %v", id, waitTimeout, got, ok)
	}
	t.Logf("token change seen by another session after %v", time.Since(start))
}

// TestZKTokensKafkaLayout: the znodes are Kafka 3.9's both ways: what
// PutDelegationToken writes is DelegationTokenManagerZk's JSON with a
// token_change_ notification holding the ID, and a token written as a
// Kafka broker writes it (a version 2 znode without tokenRequester among
// them) reaches the cache of a watching session.
func TestZKTokensKafkaLayout(t *testing.T) {
	srv := zktest.Start(t)
	e := newZKEnvOn(srv)(t).(*zkEnv)
	z := e.open(t).(*ZK)
	raw := rawZK(t, srv.Addr())
	ctx := ctxT(t, waitTimeout)
	tok := DelegationToken{TokenID: "tok1", Owner: "User:alice", Requester: "User:admin", Renewers: []string{"User:bob"},
		IssueTimestamp: 1000, MaxTimestamp: 3000, ExpiryTimestamp: 2000}
	if err := z.PutDelegationToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	data, _, err := raw.Get(e.chroot + "/delegation_token/tokens/tok1")
	if err != nil {
		t.Fatal(err)
	}
	var got, want map[string]any
	_ = json.Unmarshal(data, &got)
	_ = json.Unmarshal([]byte(`{"version":3,"owner":"User%3Aalice","tokenRequester":"User%3Aadmin","renewers":["User%3Abob"],"issueTimestamp":1000,"maxTimestamp":3000,"expiryTimestamp":2000,"tokenId":"tok1"}`), &want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("token znode: %s", data)
	}
	changes, _, err := raw.Children(e.chroot + "/delegation_token/token_changes")
	if err != nil || len(changes) != 1 || !strings.HasPrefix(changes[0], "token_change_") {
		t.Fatalf("notifications: %v %v", changes, err)
	}
	if note, _, _ := raw.Get(e.chroot + "/delegation_token/token_changes/" + changes[0]); string(note) != "tok1" {
		t.Fatalf("notification: %q", note)
	}

	// As a Kafka 2.x broker writes a token (version 2, no requester).
	old := `{"version":2,"owner":"User%3Acarol","renewers":[],"issueTimestamp":10,"maxTimestamp":30,"expiryTimestamp":20,"tokenId":"old2"}`
	if _, err := raw.Create(e.chroot+"/delegation_token/tokens/old2", []byte(old), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create(e.chroot+"/delegation_token/token_changes/token_change_", []byte("old2"), zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	waitToken(t, z, "old2", func(got DelegationToken, ok bool) bool {
		return ok && got.Owner == "User:carol" && got.Requester == "User:carol" && got.ExpiryTimestamp == 20 && len(got.Renewers) == 0
	})
	// A znode that does not parse is skipped, the others kept.
	if _, err := raw.Create(e.chroot+"/delegation_token/tokens/bad", []byte("{"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if err := z.DeleteDelegationToken(ctx, "tok1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := raw.Get(e.chroot + "/delegation_token/tokens/tok1"); err == nil {
		t.Fatal("token znode still there after delete")
	}
	waitToken(t, z, "old2", func(_ DelegationToken, ok bool) bool { return ok })
	if got := z.DelegationTokens(); len(got) != 1 || got[0].TokenID != "old2" {
		t.Fatalf("tokens: %+v", got)
	}
}
