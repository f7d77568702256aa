package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/stratastream/strata/broker"
	"github.com/stratastream/strata/broker/sasl"
)

// loginWorks reports whether user authenticates with pass for mech
// against the broker's stored credentials (franz-go's SCRAM client
// driving the broker's SASL server).
func loginWorks(t *testing.T, s *broker.Server, mech, user, pass string) bool {
	t.Helper()
	cfg, err := sasl.NewConfig(map[string]string{sasl.PropEnabledMechanisms: mech}, s.ScramCredentialStore(), sasl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := cfg.NewSession(mech)
	if err != nil {
		t.Fatal(err)
	}
	a := scram.Auth{User: user, Pass: pass}
	m := a.AsSha512Mechanism()
	if mech == sasl.MechanismScramSHA256 {
		m = a.AsSha256Mechanism()
	}
	cs, msg, err := m.Authenticate(context.Background(), "b")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		out, done, err := sess.Step(msg)
		if err != nil {
			return false
		}
		if _, msg, err = cs.Challenge(out); err != nil {
			t.Fatalf("client refused the server: %v", err)
		}
		if done {
			return true
		}
	}
	return false
}

func TestUsersCreateListDelete(t *testing.T) {
	s, addr := startBroker(t)
	b := []string{"--bootstrap-server", addr}

	// Password from a file, for both mechanisms.
	pw := filepath.Join(t.TempDir(), "alice.pw")
	if err := os.WriteFile(pw, []byte("alice-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := mustCLI(t, append([]string{"users", "create", "--user", "alice", "--mechanism", "SCRAM-SHA-256", "--mechanism", "scram-sha-512", "--iterations", "8192", "--password-file", pw}, b...)...)
	if strings.Contains(r.stdout+r.stderr, "alice-secret") {
		t.Fatalf("password printed: %q %q", r.stdout, r.stderr)
	}
	// From stdin, and from STRATA_PASSWORD.
	old := usersPassword
	usersPassword = strings.NewReader("bob-secret\n")
	mustCLI(t, append([]string{"users", "create", "--user", "bob"}, b...)...)
	usersPassword = old
	t.Setenv("STRATA_PASSWORD", "carol-secret")
	mustCLI(t, append([]string{"users", "create", "--user", "carol", "--mechanism", "SCRAM-SHA-256"}, b...)...)
	t.Setenv("STRATA_PASSWORD", "")

	for _, tc := range []struct {
		mech, user, pass string
		ok               bool
	}{
		{sasl.MechanismScramSHA256, "alice", "alice-secret", true},
		{sasl.MechanismScramSHA512, "alice", "alice-secret", true},
		{sasl.MechanismScramSHA512, "bob", "bob-secret", true},
		{sasl.MechanismScramSHA256, "carol", "carol-secret", true},
		{sasl.MechanismScramSHA256, "bob", "bob-secret", false}, // bob has SHA-512 only
		{sasl.MechanismScramSHA512, "alice", "bob-secret", false},
	} {
		if got := loginWorks(t, s, tc.mech, tc.user, tc.pass); got != tc.ok {
			t.Errorf("%s %s: login %v, want %v", tc.mech, tc.user, got, tc.ok)
		}
	}

	r = mustCLI(t, append([]string{"users", "list"}, b...)...)
	want := [][]string{{"USER", "MECHANISM", "ITERATIONS"}, {"alice", "SCRAM-SHA-256", "8192"}, {"alice", "SCRAM-SHA-512", "8192"}, {"bob", "SCRAM-SHA-512", "4096"}, {"carol", "SCRAM-SHA-256", "4096"}}
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("list:\n%s", r.stdout)
	}
	for i, l := range lines {
		if strings.Join(strings.Fields(l), " ") != strings.Join(want[i], " ") {
			t.Errorf("list line %d: got %q, want %v", i, l, want[i])
		}
	}

	mustCLI(t, append([]string{"users", "delete", "--user", "alice", "--mechanism", "SCRAM-SHA-256"}, b...)...)
	mustCLI(t, append([]string{"users", "delete", "--user", "bob"}, b...)...)
	r = mustCLI(t, append([]string{"users", "list", "--user", "alice"}, b...)...)
	if f := strings.Fields(r.stdout); len(f) != 6 || f[4] != "SCRAM-SHA-512" {
		t.Fatalf("list alice after delete:\n%s", r.stdout)
	}
	if loginWorks(t, s, sasl.MechanismScramSHA256, "alice", "alice-secret") {
		t.Error("deleted credential still works")
	}

	// Errors: each fails clearly, with its exit status.
	for i, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"users", "list", "--user", "bob"}, 1, `user "bob" has no SCRAM credentials`},
		{[]string{"users", "delete", "--user", "carol", "--mechanism", "SCRAM-SHA-512"}, 1, "does not exist"},
		{[]string{"users", "create", "--user", "x", "--iterations", "100"}, 2, "between 4096 and 16384"},
		{[]string{"users", "create", "--user", "x", "--mechanism", "PLAIN"}, 2, "unknown mechanism"},
		{[]string{"users", "create", "--mechanism", "SCRAM-SHA-256"}, 2, "no user given"},
		{[]string{"users", "create", "--user", "x", "--password-file", filepath.Join(t.TempDir(), "none")}, 1, "--password-file"},
	} {
		r := cli(t, append(tc.args, b...)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.msg) {
			t.Errorf("#%d %v: exit %d, stderr %q; want exit %d with %q", i, tc.args, r.code, r.stderr, tc.code, tc.msg)
		}
	}
	usersPassword = strings.NewReader("")
	t.Cleanup(func() { usersPassword = old })
	if r := cli(t, append([]string{"users", "create", "--user", "x"}, b...)...); r.code != 1 || !strings.Contains(r.stderr, "the password is empty") {
		t.Errorf("empty password: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := mustCLI(t, "users", "create", "--help"); !strings.Contains(r.stdout, "--password-file") || !strings.Contains(r.stdout, "STRATA_PASSWORD") {
		t.Errorf("help:\n%s", r.stdout)
	}
}
