package main

import (
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratastream/strata/broker/tlsconfig"
	"github.com/stratastream/strata/broker/tlsconfig/tlstest"
	"github.com/twmb/franz-go/pkg/kfake"
)

// tlsCluster is a kfake cluster listening TLS on 127.0.0.1 with the
// certificates of a test CA, and the client files to reach it.
type tlsCluster struct {
	addr       string
	dir        string
	ca         *tlstest.CA
	truststore string // the CA's PEM
	keystore   string // a client certificate and key, PEM
}

// startTLSCluster starts kfake behind TLS (ssl.client.auth clientAuth)
// with extra options (SASL users).
func startTLSCluster(t *testing.T, clientAuth string, opts ...kfake.Opt) *tlsCluster {
	t.Helper()
	c := &tlsCluster{dir: t.TempDir(), ca: tlstest.NewCA(t, "cli test CA")}
	c.truststore = tlstest.WritePEM(t, filepath.Join(c.dir, "ca.pem"), c.ca)
	c.keystore = c.ca.Client(t, pkix.Name{CommonName: "cli"}).WritePEMKeystore(t, filepath.Join(c.dir, "client.pem"), "")
	srv, err := tlsconfig.NewServer(map[string]string{
		"ssl.keystore.location":   c.ca.Server(t, "127.0.0.1").WritePEMKeystore(t, filepath.Join(c.dir, "broker.pem"), ""),
		"ssl.truststore.location": c.truststore,
		"ssl.client.auth":         clientAuth,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	kc, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.TLS(srv.Config()), kfake.AllowAutoTopicCreation()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kc.Close)
	c.addr = kc.ListenAddrs()[0]
	return c
}

// writeConfig writes a --command-config file of lines.
func (c *tlsCluster) writeConfig(t *testing.T, name string, lines ...string) string {
	t.Helper()
	path := filepath.Join(c.dir, name)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCLIOverTLSAndSASL runs topic, produce and consume over SASL_SSL
// with SCRAM-SHA-512 from --command-config, and over mutual TLS with
// flags; each wrong setting fails alone, naming what failed.
func TestCLIOverTLSAndSASL(t *testing.T) {
	c := startTLSCluster(t, "requested", kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "alice", "s3cret"))
	good := c.writeConfig(t, "good.properties",
		"security.protocol=SASL_SSL",
		"ssl.truststore.location="+c.truststore,
		"sasl.mechanism=SCRAM-SHA-512",
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="s3cret";`,
	)
	mustCLI(t, "topic", "create", "--bootstrap-server", c.addr, "--command-config", good, "--topic", "secure", "--partitions", "1")
	withStdin(t, "one\ntwo\n")
	mustCLI(t, "produce", "--bootstrap-server", c.addr, "--command-config", good, "secure")
	r := mustCLI(t, "consume", "--bootstrap-server", c.addr, "--command-config", good, "--from-beginning", "--max-messages", "2", "secure")
	if r.stdout != "one\ntwo\n" {
		t.Fatalf("consumed %q, want one, two", r.stdout)
	}
	mustCLI(t, "cluster", "--bootstrap-server", c.addr, "--command-config", good)

	// The password from the environment, the user from a flag, the
	// truststore from a flag.
	t.Setenv(saslPasswordEnv, "s3cret")
	mustCLI(t, "topic", "list", "--bootstrap-server", c.addr, "--security-protocol", "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-512",
		"--sasl-username", "alice", "--ssl-truststore-location", c.truststore)

	for _, tc := range []struct {
		name string
		args []string
		want []string // in stderr
	}{
		{"no truststore", []string{"--security-protocol", "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "alice"},
			[]string{"TLS handshake with " + c.addr + " failed", "unknown authority", "set ssl.truststore.location"}},
		{"wrong password", []string{"--command-config", good, "--sasl-password", "wrong"},
			[]string{`SASL SCRAM-SHA-512 authentication as "alice" with ` + c.addr + " failed", "Check the user name and password"}},
		{"plaintext to the TLS port", []string{},
			[]string{"security.protocol"}},
		{"SASL over TLS without SASL", []string{"--security-protocol", "SSL", "--ssl-truststore-location", c.truststore},
			[]string{"SASL is required", "security.protocol"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cli(t, append([]string{"topic", "list", "--bootstrap-server", c.addr}, tc.args...)...)
			if r.code == 0 {
				t.Fatalf("exit 0, want a failure\n%s", r.stdout)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
			t.Logf("stderr:\n%s", r.stderr)
		})
	}
}

// TestCLIMutualTLS reaches a listener that requires client certificates
// with --ssl-keystore-location, and fails clearly without one.
func TestCLIMutualTLS(t *testing.T) {
	c := startTLSCluster(t, "required")
	base := []string{"--bootstrap-server", c.addr, "--security-protocol", "SSL", "--ssl-truststore-location", c.truststore}
	mustCLI(t, append([]string{"topic", "create", "--topic", "mtls"}, append(base, "--ssl-keystore-location", c.keystore)...)...)
	r := cli(t, append([]string{"topic", "list"}, base...)...)
	if r.code == 0 || !strings.Contains(r.stderr, "TLS handshake") || !strings.Contains(r.stderr, "ssl.keystore.location") {
		t.Fatalf("without a client certificate: exit %d\n%s", r.code, r.stderr)
	}
	t.Logf("stderr:\n%s", r.stderr)
	other := tlstest.NewCA(t, "other CA").Client(t, pkix.Name{CommonName: "stranger"}).WritePEMKeystore(t, filepath.Join(c.dir, "stranger.pem"), "")
	r = cli(t, append([]string{"topic", "list"}, append(base, "--ssl-keystore-location", other)...)...)
	if r.code == 0 || !strings.Contains(r.stderr, "TLS handshake") || !strings.Contains(r.stderr, "not signed by one of them") {
		t.Fatalf("with a certificate of another CA: exit %d\n%s", r.code, r.stderr)
	}
	t.Logf("stderr:\n%s", r.stderr)
}

// TestCLITLSToPlaintextListener: SSL against a broker's PLAINTEXT
// listener says the broker did not speak TLS.
func TestCLITLSToPlaintextListener(t *testing.T) {
	_, addr := startBroker(t)
	dir := t.TempDir()
	ca := tlstest.WritePEM(t, filepath.Join(dir, "ca.pem"), tlstest.NewCA(t, "ca"))
	r := cli(t, "topic", "list", "--bootstrap-server", addr, "--security-protocol", "SSL", "--ssl-truststore-location", ca)
	if r.code == 0 || !strings.Contains(r.stderr, "TLS handshake with "+addr+" failed") || !strings.Contains(r.stderr, "did not speak TLS") {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	t.Logf("stderr:\n%s", r.stderr)
}
