package sasl

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Fuzz targets of every parser of client input and configuration. Each
// must never panic; what it accepts must keep the stated invariants.

func FuzzParsePlain(f *testing.F) {
	f.Add([]byte("\x00user\x00pass"))
	f.Add([]byte("zid\x00user\x00pass"))
	f.Fuzz(func(t *testing.T, b []byte) {
		z, u, p, err := ParsePlain(b)
		if err != nil {
			return
		}
		if u == "" || p == "" || strings.ContainsRune(z+u+p, 0) || !utf8.ValidString(z+u+p) {
			t.Fatalf("accepted bad fields %q %q %q", z, u, p)
		}
		if z+"\x00"+u+"\x00"+p != string(b) {
			t.Fatal("fields do not rebuild the message")
		}
		// The session never panics on it either.
		_, _, _ = NewPlainSession(PlainUsers{u: p}).Step(b)
	})
}

func FuzzScramClientFirst(f *testing.F) {
	f.Add([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	f.Add([]byte("y,a=u=2Cx,n=u=2Cx,r=abc,tokenauth=true"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseScramClientFirst(b)
		if err == nil {
			if m.User == "" || !validNonce(m.Nonce) || m.GS2Header+m.Bare != string(b) {
				t.Fatalf("accepted %q as %+v", b, m)
			}
			if back, err := decodeSaslName(EncodeSaslName(m.User)); err != nil || back != m.User {
				t.Fatalf("saslname %q does not round trip", m.User)
			}
		}
		sess, _ := NewScramSession(MechanismScramSHA256, memStore{}, []byte("k"))
		_, _, _ = sess.Step(b)
	})
}

func FuzzScramClientFinal(f *testing.F) {
	f.Add([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseScramClientFinal(b)
		if err == nil && (len(m.Proof) == 0 || !validNonce(m.Nonce) || !strings.HasPrefix(string(b), m.WithoutProof+",p=")) {
			t.Fatalf("accepted %q as %+v", b, m)
		}
		sess, _ := NewScramSession(MechanismScramSHA512, memStore{}, []byte("k"))
		sess.(*scramSession).serverNonce = func() (string, error) { return "S", nil }
		if _, _, err := sess.Step([]byte("n,,n=u,r=C")); err != nil {
			t.Fatal(err)
		}
		// The user is unknown: nothing may authenticate.
		if _, _, err := sess.Step(b); err == nil {
			t.Fatalf("unknown user authenticated with %q", b)
		}
	})
}

func FuzzParseOAuthBearer(f *testing.F) {
	f.Add([]byte("n,,\x01auth=Bearer abc.def.\x01\x01"))
	f.Add([]byte("n,a=u,\x01auth=Bearer abc\x01k=v\x01\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseOAuthBearer(b)
		if err == nil && (m.Token == "" || !validTokenChars(m.Token)) {
			t.Fatalf("accepted %q as %+v", b, m)
		}
		sess := NewOAuthBearerSession(&UnsecuredValidator{}, nil)
		if _, done, _ := sess.Step(b); !done {
			if _, _, err := sess.Step([]byte{1}); err == nil {
				t.Fatal("^A after an error challenge succeeded")
			}
		}
	})
}

func FuzzParseJWS(f *testing.F) {
	f.Add("eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIiwiZXhwIjoxfQ.")
	f.Add("eyJhbGciOiJSUzI1NiIsImtpZCI6ImsifQ.e30.AAAA")
	f.Fuzz(func(t *testing.T, s string) {
		j, err := ParseJWS(s)
		if err == nil && (j.Alg == "" || j.Claims == nil || j.Header == nil) {
			t.Fatalf("accepted %q as %+v", s, j)
		}
		_, _ = (&UnsecuredValidator{}).Validate(s)
		// Signature checks must fail on garbage and never panic.
		if err == nil && supportedAlg(j.Alg) {
			for _, k := range fuzzKeys {
				if verifySignature(j.Alg, k, j.SigningInput, j.Signature) {
					t.Fatalf("random signature verified: %q", s)
				}
			}
		}
	})
}

func FuzzParseJAAS(f *testing.F) {
	f.Add(plainJAAS)
	f.Add(`a.B optional k='v\101' /* c */ ; c.D requisite; // x`)
	f.Fuzz(func(t *testing.T, s string) {
		es, err := ParseJAAS(s)
		if err != nil {
			return
		}
		if len(es) == 0 {
			t.Fatal("no entry and no error")
		}
		for _, e := range es {
			switch e.Flag {
			case "REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL":
			default:
				t.Fatalf("flag %q", e.Flag)
			}
			if e.LoginModule == "" {
				t.Fatal("empty login module")
			}
		}
	})
}

func FuzzParseScramCredential(f *testing.F) {
	f.Add("salt=AAAA,stored_key=AAAA,server_key=AAAA,iterations=4096")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseScramCredential(s)
		if err != nil {
			return
		}
		back, err := ParseScramCredential(FormatScramCredential(c))
		if err != nil || FormatScramCredential(back) != FormatScramCredential(c) {
			t.Fatalf("%q does not re-parse identically: %v", s, err)
		}
	})
}

func FuzzParseJWKS(f *testing.F) {
	f.Add([]byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		keys, err := parseJWKS(b)
		if err == nil && len(keys) == 0 {
			t.Fatal("no key and no error")
		}
	})
}
