package sasl

import (
	"context"
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl/scram"
)

type memTokens struct {
	now   time.Time
	toks  map[string]memToken
	creds map[string]ScramCredential // id + "/" + mechanism
}

type memToken struct {
	owner   string
	expires time.Time
}

func (m *memTokens) TokenCredential(id, mech string) (ScramCredential, string, time.Time, bool) {
	tok, ok := m.toks[id]
	if !ok || !m.now.Before(tok.expires) {
		return ScramCredential{}, "", time.Time{}, false
	}
	c, ok := m.creds[id+"/"+mech]
	return c, tok.owner, tok.expires, ok
}

// TestScramToken: a franz-go client with IsToken (the tokenauth=true
// extension) authenticates as the token's owner with the HMAC as password,
// the session marked token-authenticated and its lifetime the token's;
// a wrong HMAC, an unknown or expired token, a token ID used as a user
// name, and a user name used as a token fail as a wrong password does.
func TestScramToken(t *testing.T) {
	hmac := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	now := time.Unix(1_700_000_000, 0)
	tokens := &memTokens{now: now, toks: map[string]memToken{
		"tok1": {owner: "alice", expires: now.Add(time.Hour)},
		"old":  {owner: "alice", expires: now.Add(-time.Second)},
	}, creds: map[string]ScramCredential{
		"tok1/SCRAM-SHA-256": mustCred(t, MechanismScramSHA256, hmac, ScramMinIterations),
		"tok1/SCRAM-SHA-512": mustCred(t, MechanismScramSHA512, hmac, ScramMinIterations),
		"old/SCRAM-SHA-256":  mustCred(t, MechanismScramSHA256, hmac, ScramMinIterations),
	}}
	users := memStore{"bob/SCRAM-SHA-256": mustCred(t, MechanismScramSHA256, "bob-pw", 4096)}
	cfg, err := NewConfig(map[string]string{PropEnabledMechanisms: "SCRAM-SHA-256,SCRAM-SHA-512"}, users,
		Options{Tokens: tokens, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		mech, user, pass string
		token, ok        bool
	}{
		{MechanismScramSHA256, "tok1", hmac, true, true},
		{MechanismScramSHA512, "tok1", hmac, true, true},
		{MechanismScramSHA256, "tok1", hmac + "x", true, false},
		{MechanismScramSHA256, "nope", hmac, true, false},
		{MechanismScramSHA256, "old", hmac, true, false},
		{MechanismScramSHA256, "tok1", hmac, false, false}, // a token ID is no user
		{MechanismScramSHA256, "bob", "bob-pw", true, false},
		{MechanismScramSHA256, "bob", "bob-pw", false, true},
	} {
		sess, err := cfg.NewSession(tc.mech)
		if err != nil {
			t.Fatal(err)
		}
		a := scram.Auth{User: tc.user, Pass: tc.pass, IsToken: tc.token}
		m := a.AsSha256Mechanism()
		if tc.mech == MechanismScramSHA512 {
			m = a.AsSha512Mechanism()
		}
		err = drive(t, func() (saslSession, []byte, error) { return m.Authenticate(context.Background(), "127.0.0.1:9092") }, sess)
		if tc.ok != (err == nil) {
			t.Fatalf("#%d: got err %v, want ok %v", i, err, tc.ok)
		}
		if err != nil {
			if !errors.Is(err, ErrAuthenticationFailed) || PublicMessage(err) != "Authentication failed during authentication due to invalid credentials with SASL mechanism "+tc.mech {
				t.Fatalf("#%d: got %v (%q), want the wrong-password failure", i, err, PublicMessage(err))
			}
			continue
		}
		ts := sess.(TokenSession)
		switch {
		case tc.token && (sess.Principal() != "User:alice" || !ts.TokenAuthenticated() || sess.Lifetime() != time.Hour):
			t.Fatalf("#%d: principal %q token %v lifetime %v", i, sess.Principal(), ts.TokenAuthenticated(), sess.Lifetime())
		case !tc.token && (sess.Principal() != "User:"+tc.user || ts.TokenAuthenticated() || sess.Lifetime() != 0):
			t.Fatalf("#%d: principal %q token %v lifetime %v", i, sess.Principal(), ts.TokenAuthenticated(), sess.Lifetime())
		}
	}
}

// TestScramTokenExtension: tokenauth is recognised as Kafka does (true in
// any case); other values and other extensions are plain SCRAM.
func TestScramTokenExtension(t *testing.T) {
	for _, tc := range []struct {
		msg   string
		token bool
	}{
		{"n,,n=u,r=x,tokenauth=true", true},
		{"n,,n=u,r=x,tokenauth=TRUE", true},
		{"n,,n=u,r=x,other=1,tokenauth=True", true},
		{"n,,n=u,r=x,tokenauth=false", false},
		{"n,,n=u,r=x,tokenauth=", false},
		{"n,,n=u,r=x", false},
	} {
		m, err := ParseScramClientFirst([]byte(tc.msg))
		if err != nil {
			t.Fatalf("%q: %v", tc.msg, err)
		}
		if m.TokenAuthenticated() != tc.token {
			t.Fatalf("%q: token %v, want %v", tc.msg, m.TokenAuthenticated(), tc.token)
		}
	}
	if _, err := ParseScramClientFirst([]byte("n,,n=u,r=x,tokenauth=true,tokenauth=true")); err == nil {
		t.Fatal("a repeated extension was accepted")
	}
}

// FuzzScramTokenClientFirst: the extension parsing never panics, a
// message is token-authenticated only with tokenauth=true, and a token
// session's first step never panics either.
func FuzzScramTokenClientFirst(f *testing.F) {
	f.Add([]byte("n,,n=tok1,r=abc,tokenauth=true"))
	f.Add([]byte("n,,n=tok1,r=abc,a=b,tokenauth=TRUE"))
	f.Add([]byte("n,,n=tok1,r=abc,tokenauth=false,x=y"))
	tokens := &memTokens{now: time.Unix(1, 0), toks: map[string]memToken{"tok1": {owner: "alice", expires: time.Unix(100, 0)}}, creds: map[string]ScramCredential{}}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseScramClientFirst(b)
		if err == nil {
			v, has := m.Extensions[TokenAuthExtension]
			if m.TokenAuthenticated() != (has && (v == "true" || len(v) == 4 && (v[0]|0x20) == 't' && (v[1]|0x20) == 'r' && (v[2]|0x20) == 'u' && (v[3]|0x20) == 'e')) {
				t.Fatalf("%q: token %v with extensions %v", b, m.TokenAuthenticated(), m.Extensions)
			}
			for k := range m.Extensions {
				if !validExtensionName(k) {
					t.Fatalf("%q: extension name %q accepted", b, k)
				}
			}
		}
		sess, _ := NewScramTokenSession(MechanismScramSHA256, memStore{}, tokens, []byte("k"), nil)
		_, _, _ = sess.Step(b)
	})
}
