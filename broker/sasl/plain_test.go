package sasl

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl/plain"
)

const plainJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required
    username="admin" password="admin-secret"
    user_admin="admin-secret"
    user_alice="alice \"quoted\" secret";`

func TestPlainFranzRoundTrip(t *testing.T) {
	cfg, err := NewConfig(map[string]string{PropEnabledMechanisms: "PLAIN", "plain.sasl.jaas.config": plainJAAS}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		zid, user, pass string
		ok              bool
	}{
		{"", "alice", `alice "quoted" secret`, true},
		{"admin", "admin", "admin-secret", true},
		{"", "alice", "admin-secret", false},
		{"", "nobody", "x", false},
		{"admin", "alice", `alice "quoted" secret`, false}, // authzid differs
	} {
		sess, err := cfg.NewSession(MechanismPlain)
		if err != nil {
			t.Fatal(err)
		}
		m := plain.Auth{Zid: tc.zid, User: tc.user, Pass: tc.pass}.AsMechanism()
		err = drive(t, func() (saslSession, []byte, error) { return m.Authenticate(context.Background(), "h") }, sess)
		if (err == nil) != tc.ok {
			t.Fatalf("#%d: got %v, want ok %v", i, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrAuthenticationFailed) {
			t.Fatalf("#%d: got %v, want ErrAuthenticationFailed", i, err)
		}
		if tc.ok && sess.Principal() != "User:"+tc.user {
			t.Fatalf("#%d: principal %q", i, sess.Principal())
		}
	}
}

func TestParsePlain(t *testing.T) {
	for i, tc := range []struct {
		msg string
		ok  bool
	}{
		{"\x00u\x00p", true},
		{"z\x00u\x00p", true},
		{"\x00\x00p", false},
		{"\x00u\x00", false},
		{"u\x00p", false},
		{"\x00u\x00p\x00", false},
		{"\x00\xff\x00p", false},
	} {
		if _, _, _, err := ParsePlain([]byte(tc.msg)); (err == nil) != tc.ok {
			t.Errorf("#%d %q: got %v, want ok %v", i, tc.msg, err, tc.ok)
		}
	}
}

func TestParseJAAS(t *testing.T) {
	es, err := ParseJAAS(`// comment
	org.apache.kafka.common.security.plain.PlainLoginModule Required /* c */ a=b c="d e" f='g\nh' oct="\101\0619";
	x.Y sufficient;`)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].Flag != "REQUIRED" || es[1].LoginModule != "x.Y" || es[1].Flag != "SUFFICIENT" {
		t.Fatalf("entries: %+v", es)
	}
	want := map[string]string{"a": "b", "c": "d e", "f": "g\nh", "oct": "A19"}
	for k, v := range want {
		if es[0].Options[k] != v {
			t.Errorf("option %s: got %q, want %q", k, es[0].Options[k], v)
		}
	}
	for i, bad := range []string{"", "  ", "m required a=b", "m", "m bogus;", "m required a;", `m required a="x;`, "m required a=;", "m required /* x"} {
		if _, err := ParseJAAS(bad); err == nil {
			t.Errorf("#%d %q: parsed", i, bad)
		}
	}
	_, err = ParseJAAS(`m required password="hunter2" broken`)
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error %v (must fail and not quote values)", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for i, props := range []map[string]string{
		{},
		{PropEnabledMechanisms: "GSSAPI"},
		{PropEnabledMechanisms: "PLAIN"},
		{PropEnabledMechanisms: "PLAIN", PropJAASConfig: "x.Y required;"},
		{PropEnabledMechanisms: "SCRAM-SHA-256"}, // no store
		{PropEnabledMechanisms: "OAUTHBEARER", "oauthbearer.sasl.server.callback.handler.class": OAuthValidatorHandler},
		{PropEnabledMechanisms: "OAUTHBEARER", PropOAuthJWKSURL: "http://example.com/jwks"},
	} {
		if _, err := NewConfig(props, nil, Options{}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("#%d %v: got %v, want ErrInvalidConfig", i, props, err)
		}
	}
	cfg, err := NewConfig(map[string]string{PropEnabledMechanisms: "PLAIN", PropJAASConfig: plainJAAS}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.NewSession(MechanismScramSHA256); !errors.Is(err, ErrUnsupportedMechanism) {
		t.Fatalf("disabled mechanism: got %v", err)
	}
}
