package tlsconfig_test

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/broker/tlsconfig"
	"github.com/stratastream/strata/broker/tlsconfig/tlstest"
)

// serve accepts TLS connections on 127.0.0.1 with srv's Config until the
// test ends; each accepted connection's handshake result goes to the
// returned channel.
type accepted struct {
	state tls.ConnectionState
	err   error
}

func serve(t *testing.T, cfg *tls.Config) (string, <-chan accepted) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	out := make(chan accepted, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tc := tls.Server(c, cfg)
				_ = tc.SetDeadline(time.Now().Add(30 * time.Second)) // a stuck test client ends
				err := tc.Handshake()
				if err == nil {
					_, err = tc.Write([]byte("ok"))
				}
				select {
				case out <- accepted{tc.ConnectionState(), err}:
				default:
				}
			}()
		}
	}()
	return ln.Addr().String(), out
}

// dial handshakes with addr and reads the server's "ok" (which, in TLS
// 1.3, is where a refused client certificate shows); it returns the
// server's leaf certificate serial.
func dial(t *testing.T, addr string, cfg *tls.Config) (string, error) {
	t.Helper()
	d := &net.Dialer{Timeout: 10 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 2)
	if _, err := io.ReadFull(c, buf); err != nil {
		return "", err
	}
	return c.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

// pki is a CA, a server certificate for 127.0.0.1 and the stores of
// both in dir.
type pki struct {
	dir        string
	ca         *tlstest.CA
	server     *tlstest.Cert
	keystore   string
	truststore string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir(), ca: tlstest.NewCA(t, "test CA")}
	p.server = p.ca.Server(t, "127.0.0.1", "localhost")
	p.keystore = p.server.WritePEMKeystore(t, filepath.Join(p.dir, "server.pem"), "")
	p.truststore = tlstest.WritePEM(t, filepath.Join(p.dir, "ca.pem"), p.ca)
	return p
}

func (p *pki) serverProps(clientAuth string) map[string]string {
	return map[string]string{
		"ssl.keystore.location":   p.keystore,
		"ssl.keystore.type":       "PEM",
		"ssl.truststore.location": p.truststore,
		"ssl.truststore.type":     "PEM",
		"ssl.client.auth":         clientAuth,
	}
}

// clientConfig is a client trusting p's CA, presenting cert if not nil.
func (p *pki) clientConfig(t *testing.T, cert *tlstest.Cert) *tls.Config {
	t.Helper()
	props := map[string]string{"ssl.truststore.certificates": string(p.ca.PEM())}
	if cert != nil {
		props["ssl.keystore.certificate.chain"] = string(cert.CertPEM())
		props["ssl.keystore.key"] = string(cert.KeyPEM(t, ""))
	}
	cfg, err := tlsconfig.NewClient(props)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ServerName = "127.0.0.1"
	return cfg
}

func newServer(t *testing.T, props map[string]string) *tlsconfig.Server {
	t.Helper()
	s, err := tlsconfig.NewServer(props)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestClientAuthModes(t *testing.T) {
	p := newPKI(t)
	alice := p.ca.Client(t, pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"Strata"}})
	for i, tc := range []struct {
		mode          string
		withCert      bool
		wantOK        bool
		wantPrincipal string // "" for none
	}{
		{"none", false, true, ""},
		{"none", true, true, ""}, // not asked for: not sent
		{"requested", false, true, ""},
		{"requested", true, true, "User:CN=alice,OU=eng,O=Strata"},
		{"required", false, false, ""},
		{"required", true, true, "User:CN=alice,OU=eng,O=Strata"},
	} {
		srv := newServer(t, p.serverProps(tc.mode))
		addr, acc := serve(t, srv.Config())
		var cert *tlstest.Cert
		if tc.withCert {
			cert = alice
		}
		_, err := dial(t, addr, p.clientConfig(t, cert))
		if (err == nil) != tc.wantOK {
			t.Fatalf("#%d %s cert=%v: dial error %v, want ok=%v", i, tc.mode, tc.withCert, err, tc.wantOK)
		}
		a := <-acc
		if !tc.wantOK {
			if a.err == nil {
				t.Fatalf("#%d: the server accepted a client without a certificate", i)
			}
			continue
		}
		got, ok := srv.Principal(a.state)
		if ok != (tc.wantPrincipal != "") || got != tc.wantPrincipal {
			t.Errorf("#%d %s cert=%v: principal %q %v, want %q", i, tc.mode, tc.withCert, got, ok, tc.wantPrincipal)
		}
	}
}

func TestRefusedCertificates(t *testing.T) {
	p := newPKI(t)
	other := tlstest.NewCA(t, "another CA")
	subject := pkix.Name{CommonName: "mallory"}

	t.Run("server from another CA", func(t *testing.T) {
		dir := t.TempDir()
		props := p.serverProps("none")
		props["ssl.keystore.location"] = other.Server(t, "127.0.0.1").WritePEMKeystore(t, filepath.Join(dir, "s.pem"), "")
		addr, _ := serve(t, newServer(t, props).Config())
		_, err := dial(t, addr, p.clientConfig(t, nil))
		if _, ok := errors.AsType[*tls.CertificateVerificationError](err); !ok || !strings.Contains(err.Error(), "unknown authority") {
			t.Fatalf("dial: %v, want a certificate signed by unknown authority", err)
		}
	})
	t.Run("expired server", func(t *testing.T) {
		dir := t.TempDir()
		props := p.serverProps("none")
		props["ssl.keystore.location"] = p.ca.Expired(t, subject, "127.0.0.1").WritePEMKeystore(t, filepath.Join(dir, "s.pem"), "")
		addr, _ := serve(t, newServer(t, props).Config())
		if _, err := dial(t, addr, p.clientConfig(t, nil)); err == nil || !strings.Contains(err.Error(), "expired") {
			t.Fatalf("dial: %v, want an expired certificate", err)
		}
	})
	for _, tc := range []struct {
		name string
		cert *tlstest.Cert
	}{
		{"client from another CA", other.Client(t, subject)},
		{"expired client", p.ca.Expired(t, subject)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, p.serverProps("required"))
			addr, acc := serve(t, srv.Config())
			if _, err := dial(t, addr, p.clientConfig(t, tc.cert)); err == nil {
				t.Fatal("the handshake succeeded")
			}
			if a := <-acc; a.err == nil {
				t.Fatalf("the server accepted the client certificate")
			} else {
				t.Logf("server: %v", a.err)
			}
		})
	}
}

func TestEndpointIdentification(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	props := p.serverProps("none")
	props["ssl.keystore.location"] = p.ca.Server(t, "broker-9.example").WritePEMKeystore(t, filepath.Join(dir, "s.pem"), "")
	addr, _ := serve(t, newServer(t, props).Config())
	for i, tc := range []struct {
		algorithm *string
		ca        *tlstest.CA
		wantErr   string
	}{
		{nil, p.ca, "IP SANs"},
		{ptr("https"), p.ca, "IP SANs"},
		{ptr(""), p.ca, ""},
		{ptr(""), tlstest.NewCA(t, "another"), "unknown authority"},
	} {
		cp := map[string]string{"ssl.truststore.certificates": string(tc.ca.PEM())}
		if tc.algorithm != nil {
			cp["ssl.endpoint.identification.algorithm"] = *tc.algorithm
		}
		cfg, err := tlsconfig.NewClient(cp)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ServerName = "127.0.0.1"
		_, err = dial(t, addr, cfg)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("#%d: dial error %v, want %q", i, err, tc.wantErr)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestNoMappingRuleRefusesClient: a verified client certificate whose
// subject no ssl.principal.mapping.rules rule maps is refused in the
// handshake, as Kafka refuses the connection; one that maps gets the
// mapped name.
func TestNoMappingRuleRefusesClient(t *testing.T) {
	p := newPKI(t)
	props := p.serverProps("required")
	props["ssl.principal.mapping.rules"] = "RULE:^CN=([^,]+),OU=ops$/$1/U"
	srv := newServer(t, props)
	addr, acc := serve(t, srv.Config())
	if _, err := dial(t, addr, p.clientConfig(t, p.ca.Client(t, pkix.Name{CommonName: "carol", OrganizationalUnit: []string{"ops"}}))); err != nil {
		t.Fatal(err)
	}
	if got, ok := srv.Principal((<-acc).state); !ok || got != "User:CAROL" {
		t.Fatalf("principal %q %v, want User:CAROL", got, ok)
	}
	if _, err := dial(t, addr, p.clientConfig(t, p.ca.Client(t, pkix.Name{CommonName: "dave", OrganizationalUnit: []string{"eng"}}))); err == nil {
		t.Fatal("a client no rule maps was accepted")
	}
	if a := <-acc; a.err == nil || !strings.Contains(a.err.Error(), "no rule") {
		t.Fatalf("server: %v, want no rule applies", a.err)
	}
}
