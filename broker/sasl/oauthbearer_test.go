package sasl

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sasl/oauth"
)

var b64 = base64.RawURLEncoding

func unsignedJWT(t *testing.T, claims map[string]any) string {
	t.Helper()
	c, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	return b64.EncodeToString([]byte(`{"alg":"none"}`)) + "." + b64.EncodeToString(c) + "."
}

func oauthDrive(t *testing.T, cfg *Config, token, zid string) (Session, []byte, error) {
	t.Helper()
	sess, err := cfg.NewSession(MechanismOAuthBearer)
	if err != nil {
		t.Fatal(err)
	}
	m := oauth.Auth{Zid: zid, Token: token, Extensions: map[string]string{"traceId": "x1"}}.AsMechanism()
	cs, msg, err := m.Authenticate(context.Background(), "h")
	if err != nil {
		t.Fatal(err)
	}
	out, done, err := sess.Step(msg)
	if err != nil {
		return sess, out, err
	}
	if done {
		if cdone, _, cerr := cs.Challenge(out); !cdone || cerr != nil {
			t.Fatalf("client after success: done %v err %v", cdone, cerr)
		}
		return sess, out, nil
	}
	// The error challenge: franz-go's client answers it with an error; a
	// Kafka client sends ^A, which the server fails.
	challenge := out
	_, done, err = sess.Step([]byte{1})
	if !done || err == nil {
		t.Fatalf("after ^A: done %v err %v", done, err)
	}
	return sess, challenge, err
}

func TestOAuthUnsecured(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	jaas := `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required
		unsecuredValidatorRequiredScope="kafka" unsecuredValidatorAllowableClockSkewMs="5000";`
	cfg, err := NewConfig(map[string]string{PropEnabledMechanisms: "OAUTHBEARER", "oauthbearer.sasl.jaas.config": jaas}, nil, Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	good := map[string]any{"sub": "alice", "exp": now.Unix() + 600, "iat": now.Unix() - 1, "scope": "kafka other"}
	sess, _, err := oauthDrive(t, cfg, unsignedJWT(t, good), "")
	if err != nil {
		t.Fatal(err)
	}
	if sess.Principal() != "User:alice" || sess.Lifetime() != 600*time.Second {
		t.Fatalf("principal %q lifetime %v", sess.Principal(), sess.Lifetime())
	}
	if _, _, err := oauthDrive(t, cfg, unsignedJWT(t, good), "bob"); err == nil {
		t.Fatal("authzid different from sub accepted")
	}
	for i, tc := range []struct {
		claims map[string]any
		status string
	}{
		{map[string]any{"sub": "a", "exp": now.Unix() - 10, "scope": "kafka"}, "invalid_token"},
		{map[string]any{"sub": "a", "exp": now.Unix() - 2, "scope": "kafka"}, ""}, // within skew
		{map[string]any{"sub": "a", "scope": "kafka"}, "invalid_token"},
		{map[string]any{"exp": now.Unix() + 60, "scope": "kafka"}, "invalid_token"},
		{map[string]any{"sub": "a", "exp": now.Unix() + 60, "scope": "other"}, "insufficient_scope"},
		{map[string]any{"sub": "a", "exp": now.Unix() + 60, "scope": []string{"kafka"}}, ""},
		{map[string]any{"sub": "a", "exp": now.Unix() + 60, "iat": now.Unix() + 60, "scope": "kafka"}, "invalid_token"},
	} {
		_, challenge, err := oauthDrive(t, cfg, unsignedJWT(t, tc.claims), "")
		if tc.status == "" {
			if err != nil {
				t.Errorf("#%d: got %v, want success", i, err)
			}
			continue
		}
		var j map[string]string
		if e := json.Unmarshal(challenge, &j); e != nil || j["status"] != tc.status || !errors.Is(err, ErrAuthenticationFailed) {
			t.Errorf("#%d: challenge %q err %v, want status %s", i, challenge, err, tc.status)
		}
	}
	// A signed token is not accepted by the unsecured validator.
	if _, _, err := oauthDrive(t, cfg, b64.EncodeToString([]byte(`{"alg":"RS256"}`))+"."+b64.EncodeToString([]byte(`{}`))+".AAAA", ""); err == nil {
		t.Fatal("RS256 token accepted by the unsecured validator")
	}
}

type testKey struct {
	kid, alg string
	priv     crypto.Signer
}

func (k testKey) jwk() map[string]any {
	switch p := k.priv.Public().(type) {
	case *rsa.PublicKey:
		return map[string]any{"kty": "RSA", "kid": k.kid, "use": "sig", "n": b64.EncodeToString(p.N.Bytes()), "e": b64.EncodeToString(big.NewInt(int64(p.E)).Bytes())}
	case *ecdsa.PublicKey:
		b, _ := p.Bytes()
		size := (p.Curve.Params().BitSize + 7) / 8
		return map[string]any{"kty": "EC", "kid": k.kid, "crv": p.Curve.Params().Name, "x": b64.EncodeToString(b[1 : 1+size]), "y": b64.EncodeToString(b[1+size:])}
	}
	return nil
}

func (k testKey) sign(t *testing.T, claims map[string]any) string {
	t.Helper()
	h, _ := json.Marshal(map[string]any{"alg": k.alg, "kid": k.kid, "typ": "JWT"})
	c, _ := json.Marshal(claims)
	input := b64.EncodeToString(h) + "." + b64.EncodeToString(c)
	var hash crypto.Hash
	var digest []byte
	switch k.alg[2:] {
	case "256":
		d := sha256.Sum256([]byte(input))
		hash, digest = crypto.SHA256, d[:]
	case "384":
		d := sha512.Sum384([]byte(input))
		hash, digest = crypto.SHA384, d[:]
	default:
		d := sha512.Sum512([]byte(input))
		hash, digest = crypto.SHA512, d[:]
	}
	var sig []byte
	var err error
	switch p := k.priv.(type) {
	case *rsa.PrivateKey:
		if k.alg[0] == 'P' {
			sig, err = rsa.SignPSS(rand.Reader, p, hash, digest, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
		} else {
			sig, err = rsa.SignPKCS1v15(rand.Reader, p, hash, digest)
		}
	case *ecdsa.PrivateKey:
		var r, s *big.Int
		r, s, err = ecdsa.Sign(rand.Reader, p, digest)
		size := (p.Curve.Params().BitSize + 7) / 8
		sig = make([]byte, 2*size)
		r.FillBytes(sig[:size])
		s.FillBytes(sig[size:])
	}
	if err != nil {
		t.Fatal(err)
	}
	return input + "." + b64.EncodeToString(sig)
}

type jwksServer struct {
	mu      sync.Mutex
	keys    []testKey
	fetches atomic.Int32
}

func (s *jwksServer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s.fetches.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	var set []map[string]any
	for _, k := range s.keys {
		set = append(set, k.jwk())
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"keys": set})
}

func TestOAuthJWKS(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ec256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ec384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	keys := []testKey{{"r1", "RS256", rsaKey}, {"r1", "RS384", rsaKey}, {"r1", "RS512", rsaKey}, {"r1", "PS256", rsaKey}, {"e1", "ES256", ec256}, {"e2", "ES384", ec384}}
	js := &jwksServer{keys: []testKey{keys[0], keys[4], keys[5]}}
	srv := httptest.NewTLSServer(js)
	t.Cleanup(srv.Close)
	now := time.Unix(1_800_000_000, 0)
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	nowFn := func() time.Time { return time.Unix(0, clock.Load()) }
	cfg, err := NewConfig(map[string]string{
		PropEnabledMechanisms: "OAUTHBEARER", PropOAuthJWKSURL: srv.URL + "/jwks",
		PropOAuthAudience: "kafka,other", PropOAuthIssuer: "https://issuer", PropOAuthClockSkewSec: "30",
	}, nil, Options{HTTPClient: srv.Client(), Now: nowFn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cfg.Close)
	claims := func(mod map[string]any) map[string]any {
		c := map[string]any{"sub": "svc", "exp": now.Unix() + 300, "iat": now.Unix(), "aud": []string{"kafka"}, "iss": "https://issuer"}
		for k, v := range mod {
			if v == nil {
				delete(c, k)
			} else {
				c[k] = v
			}
		}
		return c
	}
	for i, k := range keys {
		sess, _, err := oauthDrive(t, cfg, k.sign(t, claims(nil)), "")
		if err != nil {
			t.Fatalf("#%d %s: %v", i, k.alg, err)
		}
		if sess.Principal() != "User:svc" || sess.Lifetime() != 300*time.Second {
			t.Fatalf("#%d: principal %q lifetime %v", i, sess.Principal(), sess.Lifetime())
		}
	}
	for i, mod := range []map[string]any{
		{"aud": "nope"}, {"aud": nil}, {"iss": "https://evil"}, {"exp": now.Unix() - 31}, {"sub": nil},
	} {
		if _, _, err := oauthDrive(t, cfg, keys[0].sign(t, claims(mod)), ""); err == nil {
			t.Errorf("#%d %v: accepted", i, mod)
		}
	}
	// Tampered claims, and a key that signs as another kid.
	tok := keys[0].sign(t, claims(nil))
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	forged := testKey{"r1", "RS256", other}.sign(t, claims(nil))
	for i, bad := range []string{tok[:len(tok)-4] + "AAAA", forged} {
		if _, _, err := oauthDrive(t, cfg, bad, ""); err == nil {
			t.Errorf("bad signature #%d accepted", i)
		}
	}
	// Rotation: a new kid is fetched on first sight, at most once per
	// interval.
	rotated := testKey{"r2", "RS256", other}
	js.mu.Lock()
	js.keys = append(js.keys, rotated)
	js.mu.Unlock()
	before := js.fetches.Load()
	if _, _, err := oauthDrive(t, cfg, rotated.sign(t, claims(nil)), ""); err != nil {
		t.Fatalf("rotated key: %v", err)
	}
	unknown := testKey{"r3", "RS256", other}
	for range 5 {
		if _, _, err := oauthDrive(t, cfg, unknown.sign(t, claims(nil)), ""); err == nil {
			t.Fatal("unknown kid accepted")
		}
	}
	if n := js.fetches.Load() - before; n != 1 {
		t.Fatalf("fetches for unknown kids: got %d, want 1 (bounded)", n)
	}
	clock.Add(int64(jwksUnknownKidInterval))
	if _, _, err := oauthDrive(t, cfg, unknown.sign(t, claims(map[string]any{"exp": now.Unix() + 600})), ""); err == nil {
		t.Fatal("unknown kid accepted")
	}
	if n := js.fetches.Load() - before; n != 2 {
		t.Fatalf("fetches after the interval: got %d, want 2", n)
	}
}

func TestOAuthJWKSFile(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	k := testKey{"f1", "ES256", ec}
	b, _ := json.Marshal(map[string]any{"keys": []any{k.jwk()}})
	p := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := NewConfig(map[string]string{PropEnabledMechanisms: "OAUTHBEARER", PropOAuthJWKSURL: "file://" + p}, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cfg.Close)
	sess, _, err := oauthDrive(t, cfg, k.sign(t, map[string]any{"sub": "f", "exp": time.Now().Unix() + 100}), "")
	if err != nil || sess.Principal() != "User:f" {
		t.Fatalf("file JWKS: %v %q", err, sess.Principal())
	}
	if _, err := NewConfig(map[string]string{PropEnabledMechanisms: "OAUTHBEARER", PropOAuthJWKSURL: "file:///nonexistent/jwks"}, nil, Options{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestParseOAuthBearer(t *testing.T) {
	for i, tc := range []struct {
		msg string
		ok  bool
	}{
		{"n,,\x01auth=Bearer abc.def.\x01\x01", true},
		{"n,a=u,\x01auth=bearer abc\x01k=v v\x01\x01", true},
		{"n,,\x01auth=Basic abc\x01\x01", false},
		{"n,,\x01auth=Bearer abc\x01", false},
		{"p=x,,\x01auth=Bearer abc\x01\x01", false},
		{"n,,\x01k=v\x01\x01", false},
		{"n,,\x01auth=Bearer a\x01auth=Bearer b\x01\x01", false},
		{"n,,\x01auth=Bearer a b\x01\x01", false},
		{"n,,\x01k1=v\x01auth=Bearer a\x01\x01", false},
	} {
		if _, err := ParseOAuthBearer([]byte(tc.msg)); (err == nil) != tc.ok {
			t.Errorf("#%d %q: got %v, want ok %v", i, tc.msg, err, tc.ok)
		}
	}
}
