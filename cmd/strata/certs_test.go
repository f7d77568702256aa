package main

import (
	"bytes"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/broker/tlsconfig"
)

func runCerts(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	rc := dispatch(append([]string{"certs"}, args...), &out, &errOut)
	return rc, out.String(), errOut.String()
}

// handshake runs one TLS handshake between server and client over a
// real 127.0.0.1 connection and returns the principal the server maps
// the client to ("" when the client showed no certificate), or the
// client's handshake error.
func handshake(t *testing.T, srv *tlsconfig.Server, client *tls.Config) (string, error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	type result struct {
		principal string
		err       error
	}
	done := make(chan result, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		tc := tls.Server(c, srv.Config())
		err = tc.Handshake()
		if err == nil {
			// TLS 1.3: the client's certificate is checked after the
			// client's handshake returns; a read shows the verdict.
			_, err = tc.Read(make([]byte, 1))
		}
		p, _ := srv.Principal(tc.ConnectionState())
		done <- result{p, err}
	}()
	c, err := net.DialTimeout("tcp", l.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	cfg := client.Clone()
	cfg.ServerName = "127.0.0.1"
	tc := tls.Client(c, cfg)
	cerr := tc.Handshake()
	if cerr == nil {
		_, cerr = tc.Write([]byte{1})
		if cerr == nil {
			// A refused client certificate arrives as an alert on read.
			tc.SetReadDeadline(time.Now().Add(2 * time.Second))
			_, rerr := tc.Read(make([]byte, 1))
			if rerr != nil && !isTimeout(rerr) && !strings.Contains(rerr.Error(), "EOF") {
				cerr = rerr
			}
		}
	}
	r := <-done
	if cerr != nil {
		return "", cerr
	}
	return r.principal, r.err
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestCertsCreate makes a CA, per-broker and client certificates with
// strata certs create, loads them with broker/tlsconfig as a broker
// (ssl.client.auth=required) and a client do, and handshakes: the client
// certificate maps to User:CN=NAME, a client from another CA is refused,
// keys are 0600, files are not overwritten without --force, and a second
// run signs with the same CA.
func TestCertsCreate(t *testing.T) {
	dir := t.TempDir()
	rc, out, errOut := runCerts(t, "create", "--dir", dir, "--hosts", "127.0.0.1,broker-{id}.test", "--broker-id", "1,2", "--client", "admin")
	if rc != 0 {
		t.Fatalf("certs create: %d\n%s%s", rc, out, errOut)
	}
	for name, mode := range map[string]os.FileMode{
		"ca.pem": 0o644, "ca.key": 0o600, "truststore.pem": 0o644,
		"broker-1.pem": 0o600, "broker-2.pem": 0o600, "client-admin.pem": 0o600,
	} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v", name, fi.Mode().Perm(), mode)
		}
	}
	srv, err := tlsconfig.NewServer(map[string]string{
		"ssl.keystore.location":   filepath.Join(dir, "broker-2.pem"),
		"ssl.truststore.location": filepath.Join(dir, "truststore.pem"),
		"ssl.client.auth":         "required",
	})
	if err != nil {
		t.Fatalf("broker keystore: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	if sans := srv.Certificate().Leaf.DNSNames; len(sans) != 1 || sans[0] != "broker-2.test" {
		t.Errorf("broker-2 DNS SANs %v, want [broker-2.test]", sans)
	}
	admin, err := tlsconfig.NewClient(map[string]string{
		"ssl.keystore.location":   filepath.Join(dir, "client-admin.pem"),
		"ssl.truststore.location": filepath.Join(dir, "truststore.pem"),
	})
	if err != nil {
		t.Fatalf("client keystore: %v", err)
	}
	p, err := handshake(t, srv, admin)
	if err != nil || p != "User:CN=admin" {
		t.Fatalf("admin handshake: principal %q, %v; want User:CN=admin", p, err)
	}
	noCert, err := tlsconfig.NewClient(map[string]string{"ssl.truststore.location": filepath.Join(dir, "truststore.pem")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := handshake(t, srv, noCert); err == nil {
		t.Error("a client without a certificate got through ssl.client.auth=required")
	}

	// Without --force nothing is overwritten; a new client is signed by
	// the same CA.
	before, _ := os.ReadFile(filepath.Join(dir, "broker-1.pem"))
	if rc, _, errOut := runCerts(t, "create", "--dir", dir, "--hosts", "127.0.0.1", "--broker-id", "1", "--client", "bob"); rc != 1 || !strings.Contains(errOut, "without --force") {
		t.Fatalf("second create without --force: %d %q, want 1 and a refusal", rc, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "client-bob.pem")); err == nil {
		t.Error("a refused create wrote client-bob.pem")
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "broker-1.pem")); !bytes.Equal(before, after) {
		t.Error("a refused create changed broker-1.pem")
	}
	if rc, out, errOut := runCerts(t, "create", "--dir", dir, "--client", "bob"); rc != 0 || !strings.Contains(out, "signed with the CA") {
		t.Fatalf("create --client bob: %d\n%s%s", rc, out, errOut)
	}
	bob, err := tlsconfig.NewClient(map[string]string{
		"ssl.keystore.location":   filepath.Join(dir, "client-bob.pem"),
		"ssl.truststore.location": filepath.Join(dir, "truststore.pem"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := handshake(t, srv, bob); err != nil || p != "User:CN=bob" {
		t.Fatalf("bob handshake: principal %q, %v", p, err)
	}
	if rc, _, errOut := runCerts(t, "create", "--dir", dir, "--hosts", "127.0.0.1", "--broker-id", "1", "--force"); rc != 0 {
		t.Fatalf("create --force: %d %s", rc, errOut)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "broker-1.pem")); bytes.Equal(before, after) {
		t.Error("--force did not rewrite broker-1.pem")
	}

	// A client of another CA is refused, and does not trust the broker.
	other := t.TempDir()
	if rc, _, errOut := runCerts(t, "create", "--dir", other, "--client", "mallory"); rc != 0 {
		t.Fatalf("other CA: %s", errOut)
	}
	mallory, err := tlsconfig.NewClient(map[string]string{
		"ssl.keystore.location":   filepath.Join(other, "client-mallory.pem"),
		"ssl.truststore.location": filepath.Join(dir, "truststore.pem"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := handshake(t, srv, mallory); err == nil {
		t.Error("a client certificate of another CA was accepted")
	}
	distrust, err := tlsconfig.NewClient(map[string]string{"ssl.truststore.location": filepath.Join(other, "truststore.pem")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := handshake(t, srv, distrust); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("client trusting another CA: %v, want unknown authority", err)
	}

	// A shared broker keystore without --broker-id.
	shared := t.TempDir()
	if rc, _, errOut := runCerts(t, "create", "--dir", shared, "--hosts", "127.0.0.1,localhost"); rc != 0 {
		t.Fatalf("shared: %s", errOut)
	}
	if _, err := tlsconfig.NewServer(map[string]string{"ssl.keystore.location": filepath.Join(shared, "broker.pem")}); err != nil {
		t.Fatalf("shared broker.pem: %v", err)
	}
}

// TestCertsCreateUsage checks that bad input is refused with status 2
// and writes nothing.
func TestCertsCreateUsage(t *testing.T) {
	for _, args := range [][]string{
		{"create"},
		{"create", "--dir", "D", "--broker-id", "1"},
		{"create", "--dir", "D", "--broker-id", "x", "--hosts", "h"},
		{"create", "--dir", "D", "--client", "../evil"},
		{"create", "--dir", "D", "--days", "0"},
		{"create", "--dir", "D", "--hosts", "h/1"},
		{"create", "--dir", "D", "--hosts", "b-{id}"},
		{"create", "--dir", "D", "extra"},
	} {
		dir := t.TempDir()
		for i, a := range args {
			if a == "D" {
				args[i] = filepath.Join(dir, "certs")
			}
		}
		rc, _, errOut := runCerts(t, args...)
		if rc != 2 {
			t.Errorf("%v: status %d, want 2 (%s)", args, rc, errOut)
		}
		if ents, _ := os.ReadDir(filepath.Join(dir, "certs")); len(ents) > 0 {
			t.Errorf("%v: wrote %d files", args, len(ents))
		}
	}
	rc, out, _ := runCerts(t, "create", "--help")
	if rc != 0 || !strings.Contains(out, "client-NAME.pem") || !strings.Contains(out, "Example:") {
		t.Errorf("--help: %d\n%s", rc, out)
	}
}
