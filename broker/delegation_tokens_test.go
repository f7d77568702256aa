package broker

import (
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	franzsasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/segment/poll"
)

// tokenProps are saslProps with the authorizer on (the PLAINTEXT admin
// client, User:ANONYMOUS, a super user), delegation tokens enabled and a
// quick expiry check.
func tokenProps(extra map[string]string) map[string]string {
	p := saslProps(map[string]string{
		"authorizer.class.name":                     "kafka.security.authorizer.AclAuthorizer",
		"super.users":                               "User:ANONYMOUS",
		"delegation.token.secret.key":               "the-cluster-secret",
		"delegation.token.expiry.check.interval.ms": "200",
	})
	for k, v := range extra {
		p[k] = v
	}
	return p
}

// allowACL creates one literal ALLOW ACL through s's admin listener.
func allowACL(t *testing.T, s *Server, typ kmsg.ACLResourceType, name, principal string, op kmsg.ACLOperation) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = typ, name, kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = principal, "*", op, kmsg.ACLPermissionTypeAllow
	req.Creations = append(req.Creations, c)
	resp, err := req.RequestWith(testCtx(t), newClient(t, s))
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Results[0].ErrorCode); err != nil {
		t.Fatalf("ACL %v %s %s %v: %v", typ, name, principal, op, err)
	}
}

func tokenMech(tok kadm.DelegationToken, sha512 bool) franzsasl.Mechanism {
	a := scram.Auth{User: tok.TokenID, Pass: base64.StdEncoding.EncodeToString(tok.HMAC), IsToken: true}
	if sha512 {
		return a.AsSha512Mechanism()
	}
	return a.AsSha256Mechanism()
}

// tokenPingErr is the error of a new client's first request.
func tokenPingErr(t *testing.T, s *Server, m franzsasl.Mechanism) error {
	t.Helper()
	cl := saslClient(t, s, m)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.Ping(ctx)
}

// TestDelegationTokens runs KIP-48 on two brokers of one real ZooKeeper:
// a SCRAM user creates a token; a client authenticated with it produces
// and reads as the owner (only the owner has ACLs on the topic), on the
// broker that made it and on the other, which learns it through
// ZooKeeper; token APIs are refused on the token's connection and on
// PLAINTEXT; renewers renew, others get OWNER_MISMATCH; Describe shows
// what the caller owns, renews or may describe; KIP-373 tokens for
// another owner need CREATE_TOKENS on that user; an expired token, by
// request or by time, no longer authenticates, and the controller's
// expiry check removes it.
func TestDelegationTokens(t *testing.T) {
	zk := zktest.Start(t)
	connect := zk.ConnectString("/strata-tokens")
	s1 := startServer(t, tokenProps(map[string]string{"broker.id": "1", "zookeeper.connect": connect}))
	s2 := startServer(t, tokenProps(map[string]string{"broker.id": "2", "zookeeper.connect": connect}))
	ctx := testCtx(t)
	for _, u := range []string{"alice", "bob", "carol"} {
		addScramUser(t, s1, u, u+"-secret")
	}
	createTopic(t, newClient(t, s1), "tok", 1, nil)
	// The secret is described as null, marked sensitive.
	rcs, err := kadm.NewClient(newClient(t, s1)).DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Key == "delegation.token.secret.key" {
				found = true
				if !c.Sensitive || c.Value != nil {
					t.Errorf("%s: sensitive %v value %v", c.Key, c.Sensitive, c.Value)
				}
			}
		}
	}
	if !found {
		t.Error("delegation.token.secret.key not described")
	}
	allowACL(t, s1, kmsg.ACLResourceTypeTopic, "tok", "User:alice", kmsg.ACLOperationAll)
	alice := kadm.NewClient(saslClient(t, s1, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()))
	bob := kadm.NewClient(saslClient(t, s2, scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism()))
	carol := kadm.NewClient(saslClient(t, s1, scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha256Mechanism()))

	before := time.Now()
	tok, err := alice.CreateDelegationToken(ctx, kadm.CreateDelegationToken{Renewers: []kadm.Principal{{Type: "User", Name: "bob"}}})
	if err != nil {
		t.Fatal(err)
	}
	if tok.Owner.Name != "alice" || tok.TokenRequesterPrincipal.Name != "alice" || len(tok.HMAC) != 64 || tok.TokenID == "" {
		t.Fatalf("token: %+v", tok)
	}
	if d := tok.ExpiryTimestamp.Sub(tok.IssueTimestamp); d != 24*time.Hour {
		t.Fatalf("expiry %v after issue, want delegation.token.expiry.time.ms (1 day)", d)
	}
	if d := tok.MaxTimestamp.Sub(tok.IssueTimestamp); d != 7*24*time.Hour {
		t.Fatalf("max %v after issue, want delegation.token.max.lifetime.ms (7 days)", d)
	}

	// The token authenticates on the broker that made it at once.
	if err := tokenPingErr(t, s1, tokenMech(tok, false)); err != nil {
		t.Fatalf("the token on broker 1: %v", err)
	}
	// Broker 2 learns the token through ZooKeeper. Waited for before the
	// token client produces: the partition's leader may be broker 2.
	start := time.Now()
	if !poll.For(30*time.Second, func() bool { return tokenPingErr(t, s2, tokenMech(tok, true)) == nil }) {
		t.Fatal("broker 2 never accepted the token")
	}
	t.Logf("token created on broker 1 authenticated on broker 2 after %v", time.Since(start))

	// The token client is alice: her ACLs let it produce and read.
	tc := saslClient(t, s1, tokenMech(tok, false), kgo.DefaultProduceTopic("tok"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"tok": {0: kgo.NewOffset().AtStart()}}))
	if err := tc.ProduceSync(ctx, kgo.StringRecord("by token")).FirstErr(); err != nil {
		t.Fatalf("produce with the token: %v", err)
	}
	fetches := tc.PollRecords(ctx, 1)
	if err := fetches.Err(); err != nil || fetches.NumRecords() != 1 || string(fetches.Records()[0].Value) != "by token" {
		t.Fatalf("consume with the token: %v %d", err, fetches.NumRecords())
	}
	// Without the token's owner's ACLs (carol's own login) it fails.
	cc := saslClient(t, s1, scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha256Mechanism(), kgo.DefaultProduceTopic("tok"))
	if err := cc.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("carol's produce: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	tc2 := saslClient(t, s2, tokenMech(tok, true), kgo.DefaultProduceTopic("tok"))
	if err := tc2.ProduceSync(ctx, kgo.StringRecord("by token on 2")).FirstErr(); err != nil {
		t.Fatalf("produce with the token through broker 2: %v", err)
	}

	// Token APIs are refused on a token connection and on PLAINTEXT.
	for name, adm := range map[string]*kadm.Client{"token": kadm.NewClient(tc), "plaintext": kadm.NewClient(newClient(t, s1))} {
		if _, err := adm.CreateDelegationToken(ctx, kadm.CreateDelegationToken{}); !errors.Is(err, kerr.DelegationTokenRequestNotAllowed) {
			t.Fatalf("%s: create: %v, want DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", name, err)
		}
		if _, err := adm.RenewDelegationToken(ctx, tok.HMAC, time.Hour); !errors.Is(err, kerr.DelegationTokenRequestNotAllowed) {
			t.Fatalf("%s: renew: %v", name, err)
		}
		if _, err := adm.DescribeDelegationTokens(ctx); !errors.Is(err, kerr.DelegationTokenRequestNotAllowed) {
			t.Fatalf("%s: describe: %v", name, err)
		}
	}
	if _, err := alice.CreateDelegationToken(ctx, kadm.CreateDelegationToken{Renewers: []kadm.Principal{{Type: "Group", Name: "g"}}}); !errors.Is(err, kerr.InvalidPrincipalType) {
		t.Fatalf("group renewer: %v, want INVALID_PRINCIPAL_TYPE", err)
	}

	// Renewals: the renewer may, capped at the max timestamp; others not.
	exp, err := bob.RenewDelegationToken(ctx, tok.HMAC, 30*24*time.Hour)
	if err != nil || !exp.Equal(tok.MaxTimestamp) {
		t.Fatalf("bob's renewal past the max: %v %v, want %v", exp, err, tok.MaxTimestamp)
	}
	exp, err = alice.RenewDelegationToken(ctx, tok.HMAC, time.Hour)
	if err != nil || exp.Before(before.Add(time.Hour)) || exp.After(time.Now().Add(time.Hour)) {
		t.Fatalf("alice's renewal by an hour: %v %v", exp, err)
	}
	if _, err := carol.RenewDelegationToken(ctx, tok.HMAC, time.Hour); !errors.Is(err, kerr.DelegationTokenOwnerMismatch) {
		t.Fatalf("carol's renewal: %v, want DELEGATION_TOKEN_OWNER_MISMATCH", err)
	}
	if _, err := carol.ExpireDelegationToken(ctx, tok.HMAC, -1); !errors.Is(err, kerr.DelegationTokenOwnerMismatch) {
		t.Fatalf("carol's expiry: %v, want DELEGATION_TOKEN_OWNER_MISMATCH", err)
	}
	if _, err := alice.RenewDelegationToken(ctx, make([]byte, 64), time.Hour); !errors.Is(err, kerr.DelegationTokenNotFound) {
		t.Fatalf("renewal of an unknown HMAC: %v, want DELEGATION_TOKEN_NOT_FOUND", err)
	}

	// Describe: owner and renewer see it, carol not until she may.
	ids := func(adm *kadm.Client, owners ...kadm.Principal) []string {
		t.Helper()
		ts, err := adm.DescribeDelegationTokens(ctx, owners...)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, x := range ts {
			out = append(out, x.TokenID)
		}
		return out
	}
	if got := ids(alice); !slices.Equal(got, []string{tok.TokenID}) {
		t.Fatalf("alice describes %v", got)
	}
	if got := ids(bob, kadm.Principal{Type: "User", Name: "bob"}); !slices.Equal(got, []string{tok.TokenID}) {
		t.Fatalf("bob describes (owner filter bob) %v", got)
	}
	if got := ids(alice, kadm.Principal{Type: "User", Name: "carol"}); len(got) != 0 {
		t.Fatalf("owner filter carol shows %v", got)
	}
	if got := ids(carol); len(got) != 0 {
		t.Fatalf("carol describes %v", got)
	}
	allowACL(t, s1, kmsg.ACLResourceTypeUser, "User:alice", "User:carol", kmsg.ACLOperationDescribeTokens)
	if !poll.For(30*time.Second, func() bool { return len(ids(carol)) == 1 }) {
		t.Fatal("carol never saw alice's token with DESCRIBE_TOKENS on User:alice")
	}

	// KIP-373: carol creates a token for alice once she may.
	_, err = carol.CreateDelegationToken(ctx, kadm.CreateDelegationToken{Owner: &kadm.Principal{Type: "User", Name: "alice"}})
	if !errors.Is(err, kerr.DelegationTokenAuthorizationFailed) {
		t.Fatalf("carol's token for alice without CREATE_TOKENS: %v", err)
	}
	allowACL(t, s1, kmsg.ACLResourceTypeUser, "User:alice", "User:carol", kmsg.ACLOperationCreateTokens)
	var forAlice kadm.DelegationToken
	if !poll.For(30*time.Second, func() bool {
		forAlice, err = carol.CreateDelegationToken(ctx, kadm.CreateDelegationToken{Owner: &kadm.Principal{Type: "User", Name: "alice"}, MaxLifetime: 3 * time.Second})
		return err == nil
	}) {
		t.Fatalf("carol's token for alice with CREATE_TOKENS: %v", err)
	}
	if forAlice.Owner.Name != "alice" || forAlice.TokenRequesterPrincipal.Name != "carol" || forAlice.MaxTimestamp.Sub(forAlice.IssueTimestamp) != 3*time.Second {
		t.Fatalf("token for alice: %+v", forAlice)
	}
	if err := tokenPingErr(t, s1, tokenMech(forAlice, false)); err != nil {
		t.Fatalf("carol's token for alice does not authenticate: %v", err)
	}

	// Expire with a period of 0 (kadm's -1 rounds down to 0 ms): the
	// expiry is now, so neither broker accepts it from then on, and it
	// cannot be renewed (EXPIRED until the expiry check removes it).
	if _, err := bob.ExpireDelegationToken(ctx, tok.HMAC, 0); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	for _, s := range []*Server{s1, s2} {
		if !poll.For(30*time.Second, func() bool {
			return errors.Is(tokenPingErr(t, s, tokenMech(tok, false)), kerr.SaslAuthenticationFailed)
		}) {
			t.Fatal("an expired token still authenticates")
		}
	}
	t.Logf("expired token refused by both brokers after %v", time.Since(start))
	if _, err := alice.RenewDelegationToken(ctx, tok.HMAC, time.Hour); !errors.Is(err, kerr.DelegationTokenExpired) && !errors.Is(err, kerr.DelegationTokenNotFound) {
		t.Fatalf("renewal of an expired token: %v, want DELEGATION_TOKEN_EXPIRED (or NOT_FOUND once removed)", err)
	}

	// Expire with a negative period: removed at once.
	third, err := alice.CreateDelegationToken(ctx, kadm.CreateDelegationToken{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.ExpireDelegationToken(ctx, third.HMAC, -time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// The broker that removed it answers at once; the other applies the
	// removal from ZooKeeper a moment later, and either may answer.
	var got []string
	if !poll.For(30*time.Second, func() bool { got = ids(alice); return !slices.Contains(got, third.TokenID) }) {
		t.Fatalf("token expired with a negative period still described: %v", got)
	}
	if _, err := alice.RenewDelegationToken(ctx, third.HMAC, time.Hour); !errors.Is(err, kerr.DelegationTokenNotFound) {
		t.Fatalf("renewal of a removed token: %v, want DELEGATION_TOKEN_NOT_FOUND", err)
	}
	if !poll.For(30*time.Second, func() bool {
		return errors.Is(tokenPingErr(t, s2, tokenMech(third, true)), kerr.SaslAuthenticationFailed)
	}) {
		t.Fatal("a removed token still authenticates on broker 2")
	}

	// The 3 s token expires by time: authentication fails, then the
	// controller's expiry check removes it.
	start = time.Now()
	if !poll.For(60*time.Second, func() bool {
		return errors.Is(tokenPingErr(t, s2, tokenMech(forAlice, true)), kerr.SaslAuthenticationFailed)
	}) {
		t.Fatal("a token past its max lifetime still authenticates")
	}
	if !poll.For(60*time.Second, func() bool {
		return !slices.Contains(ids(alice), forAlice.TokenID) && !slices.Contains(ids(alice), tok.TokenID)
	}) {
		t.Fatalf("expired token never removed: %v", ids(alice))
	}
	t.Logf("token past its lifetime refused and removed after %v", time.Since(start))
}

// TestDelegationTokensDisabled: without delegation.token.secret.key every
// token API answers DELEGATION_TOKEN_AUTH_DISABLED, and a token client
// fails to authenticate as a wrong password does.
func TestDelegationTokensDisabled(t *testing.T) {
	s := startServer(t, saslProps(nil))
	addScramUser(t, s, "alice", "alice-secret")
	adm := kadm.NewClient(saslClient(t, s, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()))
	ctx := testCtx(t)
	if _, err := adm.CreateDelegationToken(ctx, kadm.CreateDelegationToken{}); !errors.Is(err, kerr.DelegationTokenAuthDisabled) {
		t.Fatalf("create: %v, want DELEGATION_TOKEN_AUTH_DISABLED", err)
	}
	if _, err := adm.RenewDelegationToken(ctx, make([]byte, 64), time.Hour); !errors.Is(err, kerr.DelegationTokenAuthDisabled) {
		t.Fatalf("renew: %v", err)
	}
	if _, err := adm.ExpireDelegationToken(ctx, make([]byte, 64), -1); !errors.Is(err, kerr.DelegationTokenAuthDisabled) {
		t.Fatalf("expire: %v", err)
	}
	if _, err := adm.DescribeDelegationTokens(ctx); !errors.Is(err, kerr.DelegationTokenAuthDisabled) {
		t.Fatalf("describe: %v", err)
	}
	fake := kadm.DelegationToken{TokenID: "abc", HMAC: make([]byte, 64)}
	if err := tokenPingErr(t, s, tokenMech(fake, false)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("token client: %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}

// TestDelegationTokenSecretAlias: Kafka's deprecated
// delegation.token.master.key enables tokens when
// delegation.token.secret.key is not set, and loses to it when both are;
// the HMAC is HmacSHA512(secret, token ID) (the value computed by Python's
// hmac module, as Kafka's DelegationTokenManager.createHmac computes it).
func TestDelegationTokenSecretAlias(t *testing.T) {
	for _, tc := range []struct {
		props map[string]string
		on    bool
	}{
		{map[string]string{}, false},
		{map[string]string{"delegation.token.master.key": "the-cluster-secret"}, true},
		{map[string]string{"delegation.token.secret.key": "the-cluster-secret", "delegation.token.master.key": "other"}, true},
	} {
		cfg := testConfig(t, tc.props)
		tm := newTokenManager(&Server{cfg: cfg})
		if tm.enabled() != tc.on {
			t.Fatalf("%v: enabled %v", tc.props, tm.enabled())
		}
		if !tc.on {
			continue
		}
		const want = "P1mzS2XDrZp2G5LZcjslfLsGvFsfWCbTdEGm+RiAdmnWMchojcHNpAXvMuXXpiV0K5vZlQGfC+nR/8QS4YQQnQ=="
		if got := base64.StdEncoding.EncodeToString(tm.hmac("CktTzBZLTKW6Oj9jYbC1-A")); got != want {
			t.Fatalf("%v: HMAC %s, want %s", tc.props, got, want)
		}
	}
}
