package sasl

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl/scram"
)

type memStore map[string]ScramCredential // user + "/" + mechanism

func (m memStore) ScramCredential(user, mech string) (ScramCredential, bool) {
	c, ok := m[user+"/"+mech]
	return c, ok
}

func mustCred(t *testing.T, mech, pass string, iter int) ScramCredential {
	t.Helper()
	c, err := NewScramCredential(mech, []byte(pass), iter)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// RFC 7677 section 3: user "user", password "pencil".
func TestScramRFC7677Vector(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	salted, err := ScramSaltedPassword(MechanismScramSHA256, []byte("pencil"), salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	cred, err := ScramCredentialFromSaltedPassword(MechanismScramSHA256, salt, salted, 4096)
	if err != nil {
		t.Fatal(err)
	}
	sess, _ := NewScramSession(MechanismScramSHA256, memStore{"user/SCRAM-SHA-256": cred}, []byte("k"))
	sess.(*scramSession).serverNonce = func() (string, error) { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", nil }
	out, done, err := sess.Step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if err != nil || done {
		t.Fatalf("client-first: done %v err %v", done, err)
	}
	if want := "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"; string(out) != want {
		t.Fatalf("server-first: got %q, want %q", out, want)
	}
	out, done, err = sess.Step([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if err != nil || !done {
		t.Fatalf("client-final: done %v err %v", done, err)
	}
	if want := "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="; string(out) != want {
		t.Fatalf("server-final: got %q, want %q", out, want)
	}
	if sess.Principal() != "User:user" || sess.Lifetime() != 0 {
		t.Fatalf("principal %q lifetime %v", sess.Principal(), sess.Lifetime())
	}
	if _, _, err := sess.Step([]byte("x")); !errors.Is(err, ErrIllegalState) {
		t.Fatalf("step after done: got %v, want ErrIllegalState", err)
	}
}

// saslSession is franz-go's sasl.Session.
type saslSession interface {
	Challenge([]byte) (bool, []byte, error)
}

func drive(t *testing.T, authenticate func() (saslSession, []byte, error), sess Session) error {
	t.Helper()
	cs, msg, err := authenticate()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		out, done, err := sess.Step(msg)
		if err != nil {
			return err
		}
		cdone, next, cerr := cs.Challenge(out)
		if cerr != nil {
			t.Fatalf("client refused the server's message %q: %v", out, cerr)
		}
		if done {
			if !cdone {
				t.Fatalf("server done, client not")
			}
			return nil
		}
		msg = next
	}
	t.Fatal("exchange did not end in 10 steps")
	return nil
}

func TestScramFranzRoundTrip(t *testing.T) {
	store := memStore{
		"alice/SCRAM-SHA-256": mustCred(t, MechanismScramSHA256, "alice-secret", 4096),
		"alice/SCRAM-SHA-512": mustCred(t, MechanismScramSHA512, "alice-secret", 8192),
		"a,b=c/SCRAM-SHA-256": mustCred(t, MechanismScramSHA256, "p", 4096),
	}
	cfg, err := NewConfig(map[string]string{PropEnabledMechanisms: "SCRAM-SHA-256,SCRAM-SHA-512"}, store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		mech, user, pass string
		ok               bool
	}{
		{MechanismScramSHA256, "alice", "alice-secret", true},
		{MechanismScramSHA512, "alice", "alice-secret", true},
		{MechanismScramSHA256, "a,b=c", "p", true},
		{MechanismScramSHA256, "alice", "wrong", false},
		{MechanismScramSHA512, "alice", "wrong", false},
		{MechanismScramSHA256, "bob", "alice-secret", false},
	} {
		sess, err := cfg.NewSession(tc.mech)
		if err != nil {
			t.Fatal(err)
		}
		a := scram.Auth{User: tc.user, Pass: tc.pass}
		m := a.AsSha256Mechanism()
		if tc.mech == MechanismScramSHA512 {
			m = a.AsSha512Mechanism()
		}
		err = drive(t, func() (saslSession, []byte, error) { return m.Authenticate(context.Background(), "127.0.0.1:9092") }, sess)
		if tc.ok != (err == nil) {
			t.Fatalf("#%d: got err %v, want ok %v", i, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrAuthenticationFailed) {
			t.Fatalf("#%d: got %v, want ErrAuthenticationFailed", i, err)
		}
		if tc.ok && sess.Principal() != "User:"+tc.user {
			t.Fatalf("#%d: principal %q", i, sess.Principal())
		}
		if strings.Contains(err2s(err), tc.pass) {
			t.Fatalf("#%d: error %q holds the password", i, err)
		}
	}
}

func err2s(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// An unknown user and a wrong password look the same until the proof.
func TestScramUnknownUserLikeWrongPassword(t *testing.T) {
	store := memStore{"alice/SCRAM-SHA-256": mustCred(t, MechanismScramSHA256, "pw", 4096)}
	run := func(user string) (first string, final string, err error) {
		sess, _ := NewScramSession(MechanismScramSHA256, store, []byte("key"))
		out, done, err := sess.Step([]byte("n,,n=" + user + ",r=abc"))
		if err != nil || done {
			t.Fatalf("user %s: client-first: done %v err %v", user, done, err)
		}
		first = string(out)
		nonce := strings.Split(strings.Split(first, ",")[0], "=")[1]
		proof := base64.StdEncoding.EncodeToString(make([]byte, 32))
		out, done, err = sess.Step([]byte("c=biws,r=" + nonce + ",p=" + proof))
		if !done {
			t.Fatalf("user %s: not done after client-final", user)
		}
		return first, string(out), err
	}
	f1, e1, err1 := run("alice")
	f2, e2, err2 := run("nobody")
	f3, _, _ := run("nobody")
	if e1 != "e=invalid-proof" || e2 != "e=invalid-proof" {
		t.Fatalf("server-final: got %q and %q, want e=invalid-proof", e1, e2)
	}
	if PublicMessage(err1) != PublicMessage(err2) {
		t.Fatalf("public messages differ: %q vs %q", PublicMessage(err1), PublicMessage(err2))
	}
	salt := func(s string) string { return strings.Split(s, ",")[1] }
	if salt(f2) != salt(f3) {
		t.Fatalf("fake salt not stable per name: %q vs %q", f2, f3)
	}
	if len(salt(f1)) != len(salt(f2)) {
		t.Fatalf("fake salt length differs: %q vs %q", f1, f2)
	}
}

func TestScramClientFirstRules(t *testing.T) {
	store := memStore{"u/SCRAM-SHA-256": mustCred(t, MechanismScramSHA256, "p", 4096)}
	for i, tc := range []struct {
		msg string
		ok  bool
	}{
		{"n,,n=u,r=x", true},
		{"y,,n=u,r=x", true},
		{"n,a=u,n=u,r=x", true},
		{"n,a=v,n=u,r=x", false},            // authzid differs
		{"p=tls-unique,,n=u,r=x", false},    // channel binding
		{"n,,m=x,n=u,r=x", false},           // mandatory extension
		{"n,,n=u,r=x,tokenauth=true", true}, // no token store: fails at the proof (TestScramToken)
		{"n,,n=u,r=x,other=1", true},        // unknown extensions are ignored
		{"n,,n=u=2,r=x", false},
		{"n,,n=,r=x", false},
		{"n,,n=u,r=", false},
		{"n,,n=u", false},
		{"x,,n=u,r=x", false},
	} {
		sess, _ := NewScramSession(MechanismScramSHA256, store, []byte("k"))
		_, _, err := sess.Step([]byte(tc.msg))
		if (err == nil) != tc.ok {
			t.Errorf("#%d %q: got err %v, want ok %v", i, tc.msg, err, tc.ok)
		}
	}
}

func TestScramClientFinalChecks(t *testing.T) {
	pass := "pw"
	cred := mustCred(t, MechanismScramSHA256, pass, 4096)
	store := memStore{"u/SCRAM-SHA-256": cred}
	start := func(first string) (Session, string) {
		sess, _ := NewScramSession(MechanismScramSHA256, store, []byte("k"))
		out, _, err := sess.Step([]byte(first))
		if err != nil {
			t.Fatal(err)
		}
		return sess, strings.TrimPrefix(strings.Split(string(out), ",")[0], "r=")
	}
	// A y gs2 header must come back as its own base64 ("eSws").
	sess, nonce := start("y,,n=u,r=abc")
	out, _, err := sess.Step([]byte("c=biws,r=" + nonce + ",p=AAAA"))
	if err == nil || string(out) != "e=channel-bindings-dont-match" {
		t.Fatalf("biws after y: got %q %v", out, err)
	}
	sess, _ = start("n,,n=u,r=abc")
	out, _, err = sess.Step([]byte("c=biws,r=abcWRONG,p=AAAA"))
	if err == nil || string(out) != "e=other-error" {
		t.Fatalf("wrong nonce: got %q %v", out, err)
	}
	sess, _ = start("n,,n=u,r=abc")
	out, _, err = sess.Step([]byte("c=biws,r=abc"))
	if err == nil || string(out) != "e=invalid-encoding" {
		t.Fatalf("no proof: got %q %v", out, err)
	}
}

func TestScramCredentialFormat(t *testing.T) {
	c := mustCred(t, MechanismScramSHA512, "pw", 4096)
	s := FormatScramCredential(c)
	if !strings.HasPrefix(s, "salt=") || !strings.HasSuffix(s, ",iterations=4096") || !strings.Contains(s, ",stored_key=") || !strings.Contains(s, ",server_key=") {
		t.Fatalf("format: %q", s)
	}
	back, err := ParseScramCredential(s)
	if err != nil {
		t.Fatal(err)
	}
	if FormatScramCredential(back) != s {
		t.Fatalf("round trip: got %q, want %q", FormatScramCredential(back), s)
	}
	if strings.Contains(c.String(), base64.StdEncoding.EncodeToString(c.StoredKey)) {
		t.Fatal("String shows the stored key")
	}
	for i, bad := range []string{"", "salt=AA==", "salt=AA==,stored_key=AA==,server_key=AA==,iterations=x",
		"salt=AA==,stored_key=AA==,server_key=AA==,iterations=4096,x=1", "salt=AA==,salt=AA==,server_key=AA==,iterations=4096",
		"salt=!!,stored_key=AA==,server_key=AA==,iterations=4096"} {
		if _, err := ParseScramCredential(bad); err == nil {
			t.Errorf("#%d %q: parsed", i, bad)
		}
	}
	if _, err := NewScramCredential(MechanismScramSHA256, []byte("p"), 4095); err == nil {
		t.Error("4095 iterations accepted")
	}
	if _, err := NewScramCredential(MechanismScramSHA256, []byte("p"), 16385); err == nil {
		t.Error("16385 iterations accepted")
	}
}

// TestScramLibrdkafkaNonce checks the client-final nonce librdkafka sends
// (its nonce, then the whole combined nonce again), which Kafka accepts:
// the nonce need only end with the combined one.
func TestScramLibrdkafkaNonce(t *testing.T) {
	store := memStore{"u/SCRAM-SHA-256": mustCred(t, MechanismScramSHA256, "pw", 4096)}
	sess, _ := NewScramSession(MechanismScramSHA256, store, []byte("k"))
	if err := scramClientNonce(t, sess, "n,,", "u", "pw", func(n string) string { return "clientnonce" + n }); err != nil {
		t.Fatalf("librdkafka's nonce: %v", err)
	}
	sess, _ = NewScramSession(MechanismScramSHA256, store, []byte("k"))
	if err := scramClientNonce(t, sess, "n,,", "u", "pw", func(n string) string { return n[:len(n)-1] }); err == nil {
		t.Fatal("a nonce missing the server's last character was accepted")
	}
}

// scramClient is a minimal RFC 5802 client for headers franz-go does not
// send (y, a=).
func scramClient(t *testing.T, sess Session, gs2, user, pass string) error {
	t.Helper()
	return scramClientNonce(t, sess, gs2, user, pass, func(n string) string { return n })
}

// scramClientNonce is scramClient sending final(nonce) as its final nonce.
func scramClientNonce(t *testing.T, sess Session, gs2, user, pass string, final func(string) string) error {
	t.Helper()
	bare := "n=" + EncodeSaslName(user) + ",r=clientnonce"
	out, _, err := sess.Step([]byte(gs2 + bare))
	if err != nil {
		return err
	}
	serverFirst := string(out)
	var nonce, salt64 string
	iter := 0
	for _, kv := range strings.Split(serverFirst, ",") {
		switch {
		case strings.HasPrefix(kv, "r="):
			nonce = kv[2:]
		case strings.HasPrefix(kv, "s="):
			salt64 = kv[2:]
		case strings.HasPrefix(kv, "i="):
			for _, c := range kv[2:] {
				iter = iter*10 + int(c-'0')
			}
		}
	}
	salt, _ := base64.StdEncoding.DecodeString(salt64)
	salted, err := ScramSaltedPassword(MechanismScramSHA256, []byte(pass), salt, iter)
	if err != nil {
		t.Fatal(err)
	}
	h := scramHash(MechanismScramSHA256)
	clientKey := hmacSum(h, salted, []byte("Client Key"))
	sk := h()
	sk.Write(clientKey)
	withoutProof := "c=" + base64.StdEncoding.EncodeToString([]byte(gs2)) + ",r=" + final(nonce)
	sig := hmacSum(h, sk.Sum(nil), []byte(bare+","+serverFirst+","+withoutProof))
	proof := make([]byte, len(sig))
	for i := range sig {
		proof[i] = sig[i] ^ clientKey[i]
	}
	out, done, err := sess.Step([]byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)))
	if err == nil && (!done || !strings.HasPrefix(string(out), "v=")) {
		t.Fatalf("server-final %q done %v", out, done)
	}
	return err
}

func TestScramGS2Headers(t *testing.T) {
	store := memStore{"u,1/SCRAM-SHA-256": mustCred(t, MechanismScramSHA256, "pw", 4096)}
	for i, tc := range []struct {
		gs2, pass string
		ok        bool
	}{
		{"n,,", "pw", true},
		{"y,,", "pw", true},
		{"n,a=u=2C1,", "pw", true},
		{"y,a=u=2C1,", "pw", true},
		{"y,,", "bad", false},
	} {
		sess, _ := NewScramSession(MechanismScramSHA256, store, []byte("k"))
		err := scramClient(t, sess, tc.gs2, "u,1", tc.pass)
		if (err == nil) != tc.ok {
			t.Errorf("#%d %q: got %v, want ok %v", i, tc.gs2, err, tc.ok)
		}
		if tc.ok && sess.Principal() != "User:u,1" {
			t.Errorf("#%d: principal %q", i, sess.Principal())
		}
	}
}
