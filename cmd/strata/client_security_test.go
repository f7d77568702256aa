package main

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestSecurityProperties(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	const scramJAAS = `org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="s3cr\"et";`
	for i, tc := range []struct {
		props          map[string]string
		user, password string // flags
		wantProto      string
		wantTLS        bool
		wantMech       string
		wantUser       string
		wantErr        string
	}{
		{props: nil, wantProto: "PLAINTEXT"},
		{props: map[string]string{"security.protocol": "ssl"}, wantProto: "SSL", wantTLS: true},
		{props: map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": scramJAAS},
			wantProto: "SASL_SSL", wantTLS: true, wantMech: "SCRAM-SHA-512", wantUser: "alice"},
		{props: map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": scramJAAS},
			user: "bob", wantProto: "SASL_PLAINTEXT", wantMech: "SCRAM-SHA-256", wantUser: "bob"},
		{props: map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, user: "carol", password: "pw",
			wantProto: "SASL_PLAINTEXT", wantMech: "PLAIN", wantUser: "carol"},
		{props: map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
			"sasl.jaas.config": `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="svc";`},
			wantProto: "SASL_SSL", wantTLS: true, wantMech: "OAUTHBEARER", wantUser: "svc"},

		{props: map[string]string{"security.protocol": "TLS"}, wantErr: "want PLAINTEXT, SSL"},
		{props: map[string]string{"bootstrap.servers": "x"}, wantErr: "unknown client setting bootstrap.servers"},
		{props: map[string]string{"ssl.truststore.location": "/x"}, wantErr: "set security.protocol"},
		{props: map[string]string{"sasl.mechanism": "PLAIN"}, wantErr: "SASL_PLAINTEXT or SASL_SSL"},
		{props: map[string]string{"security.protocol": "SSL", "ssl.truststore.location": "/does/not/exist"}, wantErr: "no such file"},
		{props: map[string]string{"security.protocol": "SSL", "ssl.keystore.type": "JKS", "ssl.keystore.location": "/x.jks"}, wantErr: "ssl.keystore.location"},
		{props: map[string]string{"security.protocol": "SASL_SSL"}, wantErr: "needs sasl.mechanism"},
		{props: map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, wantErr: "Kerberos"},
		{props: map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": scramJAAS}, wantErr: "needs org.apache.kafka.common.security.plain.PlainLoginModule"},
		{props: map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, wantErr: "needs a user name and a password"},
		{props: map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="a" password="b" tokenauth="true";`}, wantErr: `option "tokenauth"`},
		{props: map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;`}, wantErr: "unsecuredLoginStringClaim_sub"},
	} {
		props := map[string]string{}
		for k, v := range tc.props {
			props[k] = v
		}
		s, err := securityFromProperties(props, tc.user, tc.password, now)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("#%d: error %v, want one containing %q", i, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("#%d: %v", i, err)
			continue
		}
		if s.protocol != tc.wantProto || (s.tls != nil) != tc.wantTLS || s.mechanism != tc.wantMech || s.user != tc.wantUser || (s.sasl != nil) != (tc.wantMech != "") {
			t.Errorf("#%d: got protocol %s tls %v mechanism %q user %q, want %s %v %q %q", i, s.protocol, s.tls != nil, s.mechanism, s.user, tc.wantProto, tc.wantTLS, tc.wantMech, tc.wantUser)
		}
	}
}

func TestParseJAAS(t *testing.T) {
	for i, tc := range []struct {
		text    string
		want    map[string]string
		wantErr string
	}{
		{`org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="a b;c";`, map[string]string{"username": "alice", "password": "a b;c"}, ""},
		{"x.Mod  optional\n  user=bare   pw = \"q\\\"uote\" ;", map[string]string{"user": "bare", "pw": `q"uote`}, ""},
		{`x.Mod required;`, map[string]string{}, ""},
		{`x.Mod required username="a"`, nil, "semicolon"},
		{`x.Mod maybe username="a";`, nil, "flag"},
		{`x.Mod required username="a;`, nil, "not closed"},
		{`x.Mod required username;`, nil, "option=value"},
		{`x.Mod required a="1" a="2";`, nil, "twice"},
		{`x.Mod required a="1"; y.Mod required b="2";`, nil, "one login module"},
	} {
		m, err := parseJAAS(tc.text)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("#%d: error %v, want %q", i, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("#%d: %v", i, err)
			continue
		}
		if len(m.options) != len(tc.want) {
			t.Errorf("#%d: options %v, want %v", i, m.options, tc.want)
		}
		for k, v := range tc.want {
			if m.options[k] != v {
				t.Errorf("#%d: option %s = %q, want %q", i, k, m.options[k], v)
			}
		}
	}
}

// TestUnsecuredJWT checks the token is what Kafka's unsecured login
// handler makes: {"alg":"none"}, sub/iat/exp claims, empty signature.
func TestUnsecuredJWT(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := &clientSecurity{protocol: protoSASLSSL}
	m, err := parseJAAS(`org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="svc" unsecuredLoginLifetimeSeconds="60" unsecuredLoginStringClaim_scope="read";`)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.setOAuth(m, "", now); err != nil {
		t.Fatal(err)
	}
	token, err := unsecuredJWT(map[string]any{"sub": "svc", "iat": now.Unix(), "exp": now.Unix() + 60, "scope": "read"})
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[2] != "" {
		t.Fatalf("token %q: want header.claims. with an empty signature", token)
	}
	header, _ := base64.RawURLEncoding.DecodeString(parts[0])
	body, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var claims map[string]any
	if err := json.Unmarshal(body, &claims); err != nil {
		t.Fatal(err)
	}
	if string(header) != `{"alg":"none"}` || claims["sub"] != "svc" || claims["exp"].(float64) != float64(now.Unix()+60) || claims["iat"].(float64) != float64(now.Unix()) {
		t.Fatalf("header %s claims %v", header, claims)
	}
	if s.user != "svc" || s.sasl == nil || s.sasl.Name() != "OAUTHBEARER" {
		t.Fatalf("mechanism %v user %q", s.sasl, s.user)
	}
}

// FuzzParseJAAS: any text parses or is refused without panicking; an
// accepted one has a class, a flag and options with non-empty names.
func FuzzParseJAAS(f *testing.F) {
	f.Add(`org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="x\"y";`)
	f.Add(`a b c=d;`)
	f.Add(`"`)
	f.Fuzz(func(t *testing.T, text string) {
		m, err := parseJAAS(text)
		if err != nil {
			return
		}
		if m.class == "" || m.flag == "" {
			t.Fatalf("accepted %q as %+v", text, m)
		}
		for k := range m.options {
			if k == "" {
				t.Fatalf("accepted %q with an empty option name", text)
			}
		}
	})
}
