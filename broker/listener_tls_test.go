package broker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/stratastream/strata/broker/tlsconfig/tlstest"
	"github.com/stratastream/strata/segment/poll"
)

// tlsFixture is a CA, a broker keystore for 127.0.0.1, and the files.
type tlsFixture struct {
	ca         *tlstest.CA
	dir        string
	keystore   string
	truststore string
}

func newTLSFixture(t *testing.T) *tlsFixture {
	t.Helper()
	f := &tlsFixture{ca: tlstest.NewCA(t, "Strata Test CA"), dir: t.TempDir()}
	f.keystore = f.ca.Server(t, "127.0.0.1", "localhost").WritePEMKeystore(t, filepath.Join(f.dir, "broker.pem"), "")
	f.truststore = tlstest.WritePEM(t, filepath.Join(f.dir, "ca.pem"), f.ca)
	return f
}

// clientTLS trusts the fixture's CA and presents cert if not nil.
func (f *tlsFixture) clientTLS(cert *tlstest.Cert) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(f.ca.Cert)
	c := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	if cert != nil {
		chain := make([][]byte, len(cert.Chain))
		for i, x := range cert.Chain {
			chain[i] = x.Raw
		}
		c.Certificates = []tls.Certificate{{Certificate: chain, PrivateKey: cert.Key, Leaf: cert.Cert}}
	}
	return c
}

// tlsProps are a broker with an admin PLAINTEXT listener, an SSL one
// (client certificates as clientAuth says) and a SASL_SSL one with SCRAM.
func (f *tlsFixture) props(clientAuth string) map[string]string {
	return map[string]string{
		"listeners":                                      "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
		"inter.broker.listener.name":                     "PLAINTEXT",
		"ssl.keystore.location":                          f.keystore,
		"ssl.truststore.location":                        f.truststore,
		"listener.name.ssl.ssl.client.auth":              clientAuth,
		"listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
		"strata.ssl.reload.check.interval.ms":            "50",
		"connection.failed.authentication.delay.ms":      "10",
	}
}

func tlsClient(t *testing.T, addr net.Addr, cfg *tls.Config, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return listenerClient(t, addr, append([]kgo.Opt{kgo.DialTLSConfig(cfg)}, opts...)...)
}

func pingErr(cl *kgo.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cl.Ping(ctx)
}

// TestTLSListeners produces and consumes over SSL (with a client
// certificate, whose subject is the principal) and SASL_SSL (SCRAM), and
// checks that fetches over TLS are copied, not sent by sendfile (which
// would bypass TLS), and that bad clients fail alone.
func TestTLSListeners(t *testing.T) {
	f := newTLSFixture(t)
	s := startServer(t, f.props("required"))
	addScramUser(t, s, "bob", "bob-secret")
	createTopic(t, newClient(t, s), "tls", 1, nil)
	alice := f.ca.Client(t, pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"Strata"}})

	ssl := tlsClient(t, s.ListenerAddr("SSL"), f.clientTLS(alice), kgo.DefaultProduceTopic("tls"), kgo.ConsumeTopics("tls"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	saslSSL := tlsClient(t, s.ListenerAddr("SASL_SSL"), f.clientTLS(nil), kgo.DefaultProduceTopic("tls"),
		kgo.SASL(scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism()))
	ctx := testCtx(t)
	for i, cl := range []*kgo.Client{ssl, saslSSL} {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(strings.Repeat("x", 100+i))).FirstErr(); err != nil {
			t.Fatalf("produce over TLS client %d: %v", i, err)
		}
	}
	zeroCopyBefore := s.Stats().FetchZeroCopyBytes
	got := 0
	poll.Until(t, 30*time.Second, "both records fetched over SSL", func() bool {
		fs := ssl.PollRecords(ctx, 10)
		if err := fs.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("fetch over SSL: %v", err)
		}
		got += fs.NumRecords()
		return got >= 2
	})
	if st := s.Stats(); st.FetchZeroCopyBytes != zeroCopyBefore || st.FetchCopiedBytes == 0 {
		t.Errorf("fetch over TLS: zero-copy bytes %d -> %d, copied %d; want copied only", zeroCopyBefore, st.FetchZeroCopyBytes, st.FetchCopiedBytes)
	}
	if n := authCount(t, s, "SSL", "tls", "success"); n < 1 {
		t.Errorf("SSL authentications %v", n)
	}

	// Each of these fails alone, and the good clients go on.
	other := tlstest.NewCA(t, "Other CA")
	for name, tc := range map[string]struct {
		addr net.Addr
		cfg  *tls.Config
		opts []kgo.Opt
	}{
		"no client certificate":              {s.ListenerAddr("SSL"), f.clientTLS(nil), nil},
		"client certificate from another CA": {s.ListenerAddr("SSL"), f.clientTLS(other.Client(t, pkix.Name{CommonName: "eve"})), nil},
		"expired client certificate":         {s.ListenerAddr("SSL"), f.clientTLS(f.ca.Expired(t, pkix.Name{CommonName: "old"})), nil},
		"wrong SCRAM password": {s.ListenerAddr("SASL_SSL"), f.clientTLS(nil),
			[]kgo.Opt{kgo.SASL(scram.Auth{User: "bob", Pass: "nope"}.AsSha512Mechanism())}},
		"client not trusting the broker": {s.ListenerAddr("SSL"), &tls.Config{ServerName: "127.0.0.1", RootCAs: x509.NewCertPool()}, nil},
	} {
		if err := pingErr(tlsClient(t, tc.addr, tc.cfg, tc.opts...)); err == nil {
			t.Errorf("%s: connected", name)
		} else if name == "wrong SCRAM password" && !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("%s: %v, want SASL_AUTHENTICATION_FAILED", name, err)
		}
	}
	// Plaintext to the TLS port: the handshake fails, the connection
	// closes, nothing else is hurt.
	plainToTLS, err := kgo.NewClient(kgo.SeedBrokers(s.ListenerAddr("SSL").String()))
	if err != nil {
		t.Fatal(err)
	}
	defer plainToTLS.Close()
	if err := pingErr(plainToTLS); err == nil {
		t.Error("plaintext client on the SSL listener connected")
	}
	if err := ssl.ProduceSync(ctx, kgo.StringRecord("after")).FirstErr(); err != nil {
		t.Errorf("the good SSL client after the bad ones: %v", err)
	}
	if err := saslSSL.ProduceSync(ctx, kgo.StringRecord("after")).FirstErr(); err != nil {
		t.Errorf("the good SASL_SSL client after the bad ones: %v", err)
	}
}

// TestTLSCertificateReload replaces the keystore file of a running
// broker: new connections get the new certificate, without a restart.
func TestTLSCertificateReload(t *testing.T) {
	f := newTLSFixture(t)
	s := startServer(t, f.props("none"))
	served := func() *x509.Certificate {
		c, err := tls.Dial("tcp", s.ListenerAddr("SSL").String(), f.clientTLS(nil))
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0]
	}
	first := served()
	next := f.ca.Server(t, "127.0.0.1", "localhost")
	tmp := next.WritePEMKeystore(t, filepath.Join(f.dir, "next.pem"), "")
	if err := os.Rename(tmp, f.keystore); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, "the new certificate is served", func() bool {
		return served().SerialNumber.Cmp(next.Cert.SerialNumber) == 0
	})
	if first.SerialNumber.Cmp(next.Cert.SerialNumber) == 0 {
		t.Fatal("the first certificate was already the new one")
	}
	// A file that does not load is refused; the last good one stays.
	if err := os.WriteFile(f.keystore, []byte("not a keystore"), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if got := served(); got.SerialNumber.Cmp(next.Cert.SerialNumber) != 0 {
			t.Fatalf("after a bad file: serial %v, want the last good %v", got.SerialNumber, next.Cert.SerialNumber)
		}
	}
}

// TestTLSReloadByAdminCall reloads the certificates of a broker that does
// not watch its files, by IncrementalAlterConfigs setting the keystore
// location to its current value, as Kafka's dynamic SSL update; other
// changes are refused, and so is a keystore that does not load.
func TestTLSReloadByAdminCall(t *testing.T) {
	f := newTLSFixture(t)
	props := f.props("none")
	props["strata.ssl.reload.check.interval.ms"] = "0"
	props["listener.name.ssl.ssl.keystore.password"] = ""
	s := startServer(t, props)
	adm := kadm.NewClient(newClient(t, s))
	served := func() *big.Int {
		c, err := tls.Dial("tcp", s.ListenerAddr("SSL").String(), f.clientTLS(nil))
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber
	}
	alter := func(key, value string) error {
		resp, err := adm.AlterBrokerConfigs(testCtx(t), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: key, Value: &value}}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return resp[0].Err
	}
	first := served()
	next := f.ca.Server(t, "127.0.0.1", "localhost")
	if err := os.Rename(next.WritePEMKeystore(t, filepath.Join(f.dir, "next.pem"), ""), f.keystore); err != nil {
		t.Fatal(err)
	}
	if got := served(); got.Cmp(first) != 0 {
		t.Fatalf("the certificate changed without a reload (no watch): %v", got)
	}
	if err := alter("listener.name.ssl.ssl.keystore.location", f.keystore); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if got := served(); got.Cmp(next.Cert.SerialNumber) != 0 {
		t.Fatalf("after the reload: serial %v, want %v", got, next.Cert.SerialNumber)
	}
	for _, tc := range []struct {
		key, value string
		want       error
	}{
		{"listener.name.ssl.ssl.keystore.location", "/elsewhere.pem", kerr.InvalidConfig},
		{"num.partitions", "3", kerr.InvalidRequest},
		{"listener.name.plaintext.ssl.keystore.location", f.keystore, kerr.InvalidConfig},
	} {
		if err := alter(tc.key, tc.value); !errors.Is(err, tc.want) {
			t.Errorf("set %s=%s: %v, want %v", tc.key, tc.value, err, tc.want)
		}
	}
	if err := os.WriteFile(f.keystore, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := alter("listener.name.ssl.ssl.keystore.location", f.keystore); !errors.Is(err, kerr.InvalidConfig) {
		t.Errorf("reload of a bad keystore: %v, want INVALID_CONFIG", err)
	}
	if got := served(); got.Cmp(next.Cert.SerialNumber) != 0 {
		t.Fatalf("after a refused reload: serial %v, want the last good %v", got, next.Cert.SerialNumber)
	}
	// Passwords are described as null, marked sensitive.
	rcs, err := adm.DescribeBrokerConfigs(testCtx(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Key == "listener.name.ssl.ssl.keystore.password" {
				found = true
				if !c.Sensitive || c.Value != nil {
					t.Errorf("%s: sensitive %v value %v", c.Key, c.Sensitive, c.Value)
				}
			}
		}
	}
	if !found {
		t.Error("listener.name.ssl.ssl.keystore.password not described")
	}
}
