package main

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestTokensCLI: strata tokens create, describe, renew and expire over a
// SASL listener as SCRAM user alice; the printed ID and HMAC authenticate
// a franz-go token client until the token is expired; over PLAINTEXT the
// broker's refusal comes with the next step.
func TestTokensCLI(t *testing.T) {
	s, plainAddr := startBrokerProps(t, map[string]string{
		"listeners":                   "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms":     "SCRAM-SHA-512",
		"delegation.token.secret.key": "cli-secret",
	})
	saslAddr := s.ListenerAddr("SASL_PLAINTEXT").String()
	t.Setenv("STRATA_PASSWORD", "alice-secret")
	mustCLI(t, "users", "create", "--user", "alice", "--bootstrap-server", plainAddr)
	t.Setenv("STRATA_SASL_PASSWORD", "alice-secret")
	as := []string{"--bootstrap-server", saslAddr, "--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "alice"}

	r := mustCLI(t, append([]string{"tokens", "create", "--renewer-principal", "User:bob", "--max-life-time-period", "3600000"}, as...)...)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "TOKENID") {
		t.Fatalf("create printed %q", r.stdout)
	}
	f := strings.Fields(lines[1])
	if len(f) != 8 || f[2] != "User:alice" || f[3] != "User:alice" || f[4] != "[User:bob]" {
		t.Fatalf("create row %q", lines[1])
	}
	id, hmac := f[0], f[1]
	if mac, err := base64.StdEncoding.DecodeString(hmac); err != nil || len(mac) != 64 {
		t.Fatalf("HMAC %q: %v", hmac, err)
	}

	tokenPing := func() error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(saslAddr), kgo.SASL(scram.Auth{User: id, Pass: hmac, IsToken: true}.AsSha512Mechanism()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return cl.Ping(ctx)
	}
	if err := tokenPing(); err != nil {
		t.Fatalf("token client: %v", err)
	}

	r = mustCLI(t, append([]string{"tokens", "describe", "--owner-principal", "User:alice"}, as...)...)
	if !strings.Contains(r.stdout, id) || !strings.Contains(r.stdout, hmac) {
		t.Fatalf("describe: %q", r.stdout)
	}
	r = mustCLI(t, append([]string{"tokens", "describe", "--owner-principal", "User:nobody"}, as...)...)
	if strings.Contains(r.stdout, id) {
		t.Fatalf("describe of another owner shows the token: %q", r.stdout)
	}
	r = mustCLI(t, append([]string{"tokens", "renew", "--hmac", hmac, "--renew-time-period", "60000"}, as...)...)
	if !strings.HasPrefix(r.stdout, "Completed renew operation. New expiry date: ") {
		t.Fatalf("renew: %q", r.stdout)
	}
	mustCLI(t, append([]string{"tokens", "expire", "--hmac", hmac}, as...)...)
	if err := tokenPing(); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("token client after expire: %v, want SASL_AUTHENTICATION_FAILED", err)
	}

	// Refusals name the problem and the next step.
	r = cli(t, "tokens", "create", "--bootstrap-server", plainAddr)
	if r.code == 0 || !strings.Contains(r.stderr, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED") || !strings.Contains(r.stderr, "SASL") {
		t.Fatalf("create over PLAINTEXT: %d %q", r.code, r.stderr)
	}
	for _, args := range [][]string{
		{"tokens", "renew"},
		{"tokens", "renew", "--hmac", "not base64!"},
		{"tokens", "create", "--renewer-principal", "bob"},
		{"tokens", "describe", "--owner-principal", "User:"},
	} {
		if r := cli(t, append(args, as...)...); r.code != 2 {
			t.Fatalf("%v: exit %d, want a usage error: %q", args, r.code, r.stderr)
		}
	}
}
