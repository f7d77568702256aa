package broker

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	franzsasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xdgscram "github.com/xdg-go/scram"

	"github.com/stratastream/strata/segment/poll"
)

// saslProps are a broker with an admin PLAINTEXT listener and a
// SASL_PLAINTEXT one offering every mechanism: PLAIN user alice from
// JAAS, SCRAM users made by the test, OAUTHBEARER with unsecured tokens.
func saslProps(extra map[string]string) map[string]string {
	p := map[string]string{
		"listeners":                                                 "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"inter.broker.listener.name":                                "PLAINTEXT",
		"sasl.enabled.mechanisms":                                   "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
		"connection.failed.authentication.delay.ms":                 "10",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config":       `org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";`,
		"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;`,
	}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

// addScramUser creates user with password for both SCRAM mechanisms
// through the admin listener.
func addScramUser(t *testing.T, s *Server, user, pass string) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, s))
	res, err := adm.AlterUserSCRAMs(testCtx(t), nil, []kadm.UpsertSCRAM{
		{User: user, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: pass},
		{User: user, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: pass},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Error(); err != nil {
		t.Fatal(err)
	}
}

func unsecuredToken(sub string, exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(fmt.Sprintf(`{"sub":%q,"iat":%d,"exp":%d}`, sub, time.Now().Unix(), exp.Unix()))) + "."
}

// saslClient is a franz-go client of the SASL listener.
func saslClient(t *testing.T, s *Server, m franzsasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return listenerClient(t, s.ListenerAddr("SASL_PLAINTEXT"), append([]kgo.Opt{kgo.SASL(m)}, opts...)...)
}

// listenerClient is a franz-go client seeded with one listener's
// address, closed at the end of the test.
func listenerClient(t *testing.T, addr net.Addr, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(addr.String()),
		kgo.RetryTimeout(5 * time.Second),
		kgo.DisableIdempotentWrite(),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestSASLMechanismsFranz authenticates with franz-go on every mechanism
// and produces and reads back a record; wrong credentials fail with
// SASL_AUTHENTICATION_FAILED.
func TestSASLMechanismsFranz(t *testing.T) {
	s := startServer(t, saslProps(nil))
	addScramUser(t, s, "bob", "bob-secret")
	createTopic(t, newClient(t, s), "sasl", 1, nil)
	good := map[string]franzsasl.Mechanism{
		"PLAIN":         plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(),
		"SCRAM-SHA-256": scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism(),
		"SCRAM-SHA-512": scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism(),
		"OAUTHBEARER":   oauth.Auth{Token: unsecuredToken("carol", time.Now().Add(time.Hour))}.AsMechanism(),
	}
	for name, m := range good {
		cl := saslClient(t, s, m, kgo.DefaultProduceTopic("sasl"))
		ctx := testCtx(t)
		if err := cl.ProduceSync(ctx, kgo.StringRecord(name)).FirstErr(); err != nil {
			t.Fatalf("%s: produce: %v", name, err)
		}
	}
	bad := map[string]franzsasl.Mechanism{
		"PLAIN":         plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism(),
		"PLAIN unknown": plain.Auth{User: "mallory", Pass: "x"}.AsMechanism(),
		"SCRAM-SHA-256": scram.Auth{User: "bob", Pass: "wrong"}.AsSha256Mechanism(),
		"SCRAM unknown": scram.Auth{User: "nobody", Pass: "x"}.AsSha512Mechanism(),
		"OAUTHBEARER":   oauth.Auth{Token: unsecuredToken("carol", time.Now().Add(-time.Hour))}.AsMechanism(),
	}
	for name, m := range bad {
		cl := saslClient(t, s, m)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := cl.Ping(ctx)
		cancel()
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Errorf("%s: ping got %v, want SASL_AUTHENTICATION_FAILED", name, err)
		}
	}
	n := authCount(t, s, "SASL_PLAINTEXT", "", "failure")
	if n < float64(len(bad)) {
		t.Errorf("failed authentications counted %v, want at least %d", n, len(bad))
	}
}

// TestSASLRequestBeforeAuthentication: on a SASL listener, a request
// other than ApiVersions and the SASL ones before authenticating closes
// the connection; on a PLAINTEXT listener SaslHandshake is
// ILLEGAL_SASL_STATE.
func TestSASLRequestBeforeAuthentication(t *testing.T) {
	s := startServer(t, saslProps(nil))
	nc, err := net.Dial("tcp", s.ListenerAddr("SASL_PLAINTEXT").String())
	if err != nil {
		t.Fatal(err)
	}
	rc := &rawConn{t: t, c: nc}
	t.Cleanup(func() { _ = nc.Close() })
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName, av.ClientSoftwareVersion = "test", "1"
	rc.send(1, av)
	if _, _, err := rc.readFrame(); err != nil {
		t.Fatalf("ApiVersions before authenticating: %v", err)
	}
	rc.send(2, kmsg.NewPtrMetadataRequest())
	rc.expectClosed()

	plainConn := dialRaw(t, s)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	resp := plainConn.request(3, hs).(*kmsg.SASLHandshakeResponse)
	if resp.ErrorCode != kerr.IllegalSaslState.Code {
		t.Errorf("SaslHandshake on PLAINTEXT: error %d, want ILLEGAL_SASL_STATE", resp.ErrorCode)
	}
	// An unknown mechanism: UNSUPPORTED_SASL_MECHANISM with the list.
	nc2, err := net.Dial("tcp", s.ListenerAddr("SASL_PLAINTEXT").String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc2.Close() })
	rc2 := &rawConn{t: t, c: nc2}
	hs.Mechanism = "GSSAPI"
	r2 := rc2.request(4, hs).(*kmsg.SASLHandshakeResponse)
	if r2.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(r2.SupportedMechanisms, ",") != "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER" {
		t.Errorf("GSSAPI: %+v", r2)
	}
}

// TestSASLReauthentication (KIP-368): with connections.max.reauth.ms the
// session has a lifetime, franz-go re-authenticates on the same
// connection before it ends, and requests keep working across several
// lifetimes; a client that does not re-authenticate is cut off.
func TestSASLReauthentication(t *testing.T) {
	s := startServer(t, saslProps(map[string]string{"listener.name.sasl_plaintext.connections.max.reauth.ms": "1500"}))
	addScramUser(t, s, "bob", "bob-secret")
	createTopic(t, newClient(t, s), "reauth", 1, nil)
	cl := saslClient(t, s, scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism(), kgo.DefaultProduceTopic("reauth"))
	ctx := testCtx(t)
	successes := func() float64 {
		return authCount(t, s, "SASL_PLAINTEXT", "SCRAM-SHA-256", "success")
	}
	if err := cl.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	// Produce until the client has authenticated three more times than
	// it opened connections: it re-authenticated on them.
	auth0, conns0 := successes(), s.Stats().ConnectionsAccepted
	poll.Until(t, 60*time.Second, "franz-go re-authenticated on its connections", func() bool {
		if err := cl.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr(); err != nil {
			t.Fatalf("produce across re-authentication: %v", err)
		}
		return successes()-auth0-float64(s.Stats().ConnectionsAccepted-conns0) >= 3
	})

	// A raw client that authenticates once and never again.
	nc, err := net.Dial("tcp", s.ListenerAddr("SASL_PLAINTEXT").String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	rc := &rawConn{t: t, c: nc}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, "PLAIN"
	if r := rc.request(1, hs).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		t.Fatalf("handshake: %+v", r)
	}
	au := kmsg.NewPtrSASLAuthenticateRequest()
	au.Version = 2
	au.SASLAuthBytes = []byte("\x00alice\x00alice-secret")
	ar := rc.request(2, au).(*kmsg.SASLAuthenticateResponse)
	if ar.ErrorCode != 0 || ar.SessionLifetimeMillis <= 0 || ar.SessionLifetimeMillis > 1500 {
		t.Fatalf("authenticate: %+v", ar)
	}
	corr := int32(3)
	poll.Until(t, 30*time.Second, "the connection is closed once its session ended", func() bool {
		rc.send(corr, kmsg.NewPtrMetadataRequest())
		corr++
		_, _, err := rc.readFrame()
		return err != nil
	})
}

// TestSASLSarama authenticates with sarama: PLAIN over a v0 handshake
// (raw tokens) and v1, and SCRAM-SHA-512 with the xdg-go client.
func TestSASLSarama(t *testing.T) {
	s := startServer(t, saslProps(nil))
	addScramUser(t, s, "bob", "bob-secret")
	createTopic(t, newClient(t, s), "sarama", 1, nil)
	for _, tc := range []struct {
		name      string
		mechanism sarama.SASLMechanism
		version   int16
		user      string
		pass      string
		ok        bool
	}{
		{"plain v0", sarama.SASLTypePlaintext, sarama.SASLHandshakeV0, "alice", "alice-secret", true},
		{"plain v1", sarama.SASLTypePlaintext, sarama.SASLHandshakeV1, "alice", "alice-secret", true},
		{"scram-sha-512", sarama.SASLTypeSCRAMSHA512, sarama.SASLHandshakeV1, "bob", "bob-secret", true},
		{"scram-sha-256", sarama.SASLTypeSCRAMSHA256, sarama.SASLHandshakeV1, "bob", "bob-secret", true},
		{"plain v0 wrong", sarama.SASLTypePlaintext, sarama.SASLHandshakeV0, "alice", "nope", false},
		{"scram wrong", sarama.SASLTypeSCRAMSHA512, sarama.SASLHandshakeV1, "bob", "nope", false},
	} {
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V2_8_0_0
		cfg.Net.DialTimeout = 10 * time.Second
		cfg.Net.ReadTimeout = 10 * time.Second
		cfg.Metadata.Retry.Max = 0
		cfg.Producer.Return.Successes = true
		cfg.Producer.Retry.Max = 0
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Mechanism = tc.mechanism
		cfg.Net.SASL.Version = tc.version
		cfg.ApiVersionsRequest = tc.version != sarama.SASLHandshakeV0
		cfg.Net.SASL.User, cfg.Net.SASL.Password = tc.user, tc.pass
		switch tc.mechanism {
		case sarama.SASLTypeSCRAMSHA512:
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgSCRAM{hash: xdgscram.SHA512} }
		case sarama.SASLTypeSCRAMSHA256:
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgSCRAM{hash: xdgscram.SHA256} }
		}
		p, err := sarama.NewSyncProducer([]string{s.ListenerAddr("SASL_PLAINTEXT").String()}, cfg)
		if !tc.ok {
			if err == nil {
				_ = p.Close()
				t.Errorf("%s: connected with a wrong password", tc.name)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "sarama", Value: sarama.StringEncoder(tc.name)}); err != nil {
			t.Errorf("%s: produce: %v", tc.name, err)
		}
		_ = p.Close()
	}
}

// xdgSCRAM is sarama's SCRAM client, from xdg-go/scram (as sarama's own
// example does).
type xdgSCRAM struct {
	hash xdgscram.HashGeneratorFcn
	conv *xdgscram.ClientConversation
}

func (x *xdgSCRAM) Begin(user, pass, authzID string) error {
	c, err := x.hash.NewClient(user, pass, authzID)
	if err != nil {
		return err
	}
	x.conv = c.NewConversation()
	return nil
}

func (x *xdgSCRAM) Step(challenge string) (string, error) { return x.conv.Step(challenge) }
func (x *xdgSCRAM) Done() bool                            { return x.conv.Done() }

// authCount sums strata_broker_authentications_total over the metrics
// with the given listener, mechanism ("" for any) and result.
func authCount(t *testing.T, s *Server, listener, mechanism, result string) float64 {
	t.Helper()
	fams, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range fams {
		if f.GetName() != "strata_broker_authentications_total" {
			continue
		}
		for _, m := range f.Metric {
			l := map[string]string{}
			for _, lp := range m.Label {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["listener"] == listener && l["result"] == result && (mechanism == "" || l["mechanism"] == mechanism) {
				n += m.Counter.GetValue()
			}
		}
	}
	return n
}
