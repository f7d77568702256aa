package tlsconfig_test

import (
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratastream/strata/broker/tlsconfig"
	"github.com/stratastream/strata/broker/tlsconfig/tlstest"
)

// TestStoreFormats loads the same server certificate from each kind of
// keystore and truststore and handshakes through it with a client
// certificate.
func TestStoreFormats(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	s := p.server
	client := p.ca.Client(t, pkix.Name{CommonName: "bob"})
	for _, tc := range []struct {
		name  string
		props map[string]string
	}{
		{"PEM files, type found from content", map[string]string{
			"ssl.keystore.location":   s.WritePEMKeystore(t, filepath.Join(dir, "a.pem"), ""),
			"ssl.truststore.location": tlstest.WritePEM(t, filepath.Join(dir, "a-ca.pem"), p.ca),
		}},
		{"PEM with an encrypted PKCS#8 key", map[string]string{
			"ssl.keystore.location": s.WritePEMKeystore(t, filepath.Join(dir, "b.pem"), "k3y pass"),
			"ssl.keystore.type":     "PEM", "ssl.key.password": "k3y pass",
			"ssl.truststore.location": p.truststore, "ssl.truststore.type": "PEM",
		}},
		{"inline PEM", map[string]string{
			"ssl.keystore.certificate.chain": string(s.CertPEM()),
			"ssl.keystore.key":               string(s.KeyPEM(t, "pw")),
			"ssl.key.password":               "pw",
			"ssl.keystore.type":              "PEM",
			"ssl.truststore.certificates":    string(p.ca.PEM()),
		}},
		{"PKCS12", map[string]string{
			"ssl.keystore.location": s.WritePKCS12(t, filepath.Join(dir, "c.p12"), "storepw"),
			"ssl.keystore.type":     "PKCS12", "ssl.keystore.password": "storepw",
			"ssl.truststore.location": tlstest.WritePKCS12Truststore(t, filepath.Join(dir, "c-ca.p12"), "trustpw", p.ca),
			"ssl.truststore.type":     "PKCS12", "ssl.truststore.password": "trustpw",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.props["ssl.client.auth"] = "required"
			srv := newServer(t, tc.props)
			if got := srv.Certificate().Leaf.SerialNumber; got.Cmp(s.Cert.SerialNumber) != 0 {
				t.Fatalf("loaded serial %v, want %v", got, s.Cert.SerialNumber)
			}
			addr, acc := serve(t, srv.Config())
			if _, err := dial(t, addr, p.clientConfig(t, client)); err != nil {
				t.Fatal(err)
			}
			if got, _ := srv.Principal((<-acc).state); got != "User:CN=bob" {
				t.Fatalf("principal %q, want User:CN=bob", got)
			}
		})
	}
}

// TestBadSettings checks that each wrong setting is refused with a
// message naming what to do.
func TestBadSettings(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	jks := filepath.Join(dir, "server.jks")
	if err := os.WriteFile(jks, []byte{0xfe, 0xed, 0xfe, 0xed, 0, 0, 0, 2}, 0o600); err != nil {
		t.Fatal(err)
	}
	other := tlstest.NewCA(t, "other").Server(t, "127.0.0.1")
	mismatched := filepath.Join(dir, "mismatch.pem")
	if err := os.WriteFile(mismatched, append(other.KeyPEM(t, ""), p.server.CertPEM()...), 0o600); err != nil {
		t.Fatal(err)
	}
	p12 := p.server.WritePKCS12(t, filepath.Join(dir, "s.p12"), "right")
	base := func(kv ...string) map[string]string {
		m := map[string]string{"ssl.keystore.location": p.keystore}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for i, tc := range []struct {
		props map[string]string
		want  string
	}{
		{map[string]string{}, "needs a keystore"},
		{base("ssl.keystore.location", jks, "ssl.keystore.type", "JKS"), "keytool -importkeystore"},
		{base("ssl.keystore.location", jks), "keytool -importkeystore"},
		{base("ssl.keystore.type", "BKS"), "want PEM or PKCS12"},
		{base("ssl.keystore.location", mismatched), "does not belong"},
		{base("ssl.keystore.location", p.server.WritePEMKeystore(t, filepath.Join(dir, "enc.pem"), "secret")), "set ssl.key.password"},
		{base("ssl.keystore.location", filepath.Join(dir, "enc.pem"), "ssl.key.password", "wrong"), "wrong password"},
		{base("ssl.keystore.location", p12, "ssl.keystore.type", "PKCS12", "ssl.keystore.password", "wrong"), "wrong ssl.keystore.password"},
		{base("ssl.keystore.certificate.chain", "x"), "not both"},
		{map[string]string{"ssl.keystore.key": "x"}, "set both"},
		{base("ssl.client.auth", "required"), "truststore"},
		{base("ssl.client.auth", "maybe"), "want none, requested or required"},
		{base("ssl.enabled.protocols", "TLSv1.2,TLSv1.1"), "TLSv1.1"},
		{base("ssl.protocol", "TLSv1"), "want TLSv1.3 or TLSv1.2"},
		{base("ssl.cipher.suites", "TLS_RSA_WITH_RC4_128_SHA"), "IANA names"},
		{base("ssl.principal.mapping.rules", "RULE:^CN=(.*)$/$1"), "RULE:pattern/replacement"},
		{base("ssl.keystore.passwd", "x"), "unknown setting ssl.keystore.passwd"},
		{base("ssl.engine.factory.class", "x"), "Java class"},
		{base("ssl.truststore.location", filepath.Join(dir, "missing.pem")), "no such file"},
	} {
		_, err := tlsconfig.NewServer(tc.props)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("#%d: NewServer error %v, want one containing %q", i, err, tc.want)
		}
	}
	if _, err := tlsconfig.NewClient(map[string]string{"ssl.endpoint.identification.algorithm": "http"}); err == nil || !strings.Contains(err.Error(), "want https") {
		t.Errorf("NewClient: error %v, want a refused ssl.endpoint.identification.algorithm", err)
	}
}

func TestProtocolsAndSuites(t *testing.T) {
	p := newPKI(t)
	props := p.serverProps("none")
	props["ssl.enabled.protocols"] = "TLSv1.2"
	props["ssl.cipher.suites"] = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
	addr, acc := serve(t, newServer(t, props).Config())
	if _, err := dial(t, addr, p.clientConfig(t, nil)); err != nil {
		t.Fatal(err)
	}
	st := (<-acc).state
	if st.Version != 0x0303 || st.CipherSuite != 0xc02b {
		t.Fatalf("version %#x suite %#x, want TLS 1.2 with TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", st.Version, st.CipherSuite)
	}
	cfg := p.clientConfig(t, nil)
	cfg.MinVersion = 0x0304 // TLS 1.3 only
	if _, err := dial(t, addr, cfg); err == nil {
		t.Fatal("a TLS 1.3-only client connected to a TLS 1.2-only server")
	}
}
