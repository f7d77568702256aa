package sasl

import (
	"strings"
	"time"
)

// oauthMaxMessage bounds an OAUTHBEARER client message (a JWT is a few KB).
const oauthMaxMessage = 64 << 10

// OAuthBearerMessage is a parsed OAUTHBEARER client initial response (RFC
// 7628 section 3.1): "n,[a=authzid],\x01auth=Bearer <token>\x01[key=value\x01]...\x01".
type OAuthBearerMessage struct {
	Authzid string
	Token   string
	// Extensions are the key=value pairs besides auth (Kafka's SASL
	// extensions); they are accepted and not used.
	Extensions map[string]string
}

// ParseOAuthBearer parses a client initial response as Kafka's
// OAuthBearerClientInitialResponse: gs2 header "n," (channel binding is
// refused), keys of letters, values of printable ASCII, space, tab, CR
// and LF, scheme Bearer (any case) and a token of base64url characters and
// dots.
func ParseOAuthBearer(msg []byte) (OAuthBearerMessage, error) {
	var m OAuthBearerMessage
	bad := func(why string) (OAuthBearerMessage, error) {
		return OAuthBearerMessage{}, failed("Invalid OAUTHBEARER client first message", why)
	}
	if len(msg) > oauthMaxMessage {
		return bad("too long")
	}
	s := string(msg)
	rest, ok := strings.CutPrefix(s, "n,")
	if !ok {
		return bad("gs2 header")
	}
	i := strings.IndexByte(rest, ',')
	if i < 0 {
		return bad("gs2 header")
	}
	if az := rest[:i]; az != "" {
		v, ok := strings.CutPrefix(az, "a=")
		if !ok {
			return bad("authzid")
		}
		name, err := decodeSaslName(v)
		if err != nil || name == "" {
			return bad("authzid")
		}
		m.Authzid = name
	}
	rest = rest[i+1:]
	// \x01 kvpair\x01 ... \x01
	if !strings.HasPrefix(rest, "\x01") || !strings.HasSuffix(rest, "\x01\x01") || len(rest) < 3 {
		return bad("separators")
	}
	body := rest[1 : len(rest)-1] // each pair ends with \x01
	auth := ""
	for _, kv := range strings.SplitAfter(body, "\x01") {
		if kv == "" {
			continue
		}
		kv = strings.TrimSuffix(kv, "\x01")
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !validExtensionName(k) || !validOAuthValue(v) {
			return bad("key/value pair")
		}
		if k == "auth" {
			if auth != "" {
				return bad("auth twice")
			}
			auth = v
			continue
		}
		if m.Extensions == nil {
			m.Extensions = map[string]string{}
		}
		if _, dup := m.Extensions[k]; dup {
			return bad("extension twice")
		}
		m.Extensions[k] = v
	}
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return bad("Invalid scheme in OAUTHBEARER client first message")
	}
	token = strings.TrimLeft(token, " ")
	if !validTokenChars(token) {
		return bad("token")
	}
	m.Token = token
	return m, nil
}

func validOAuthValue(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 0x21 && c <= 0x7e || c == ' ' || c == '\t' || c == '\r' || c == '\n') {
			return false
		}
	}
	return true
}

func validTokenChars(t string) bool {
	if t == "" {
		return false
	}
	end := strings.TrimRight(t, "=")
	for i := 0; i < len(end); i++ {
		c := end[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_~+/.", c) >= 0) {
			return false
		}
	}
	return true
}

// Token is a validated bearer token.
type Token struct {
	// Principal is the token's principal claim (sub, or the configured
	// claim name).
	Principal string
	Scope     []string
	// Expiry is the token's exp.
	Expiry time.Time
}

// TokenValidator checks a bearer token: the unsecured validator (alg none,
// development only) or the JWKS validator. A failure is a *TokenError.
type TokenValidator interface {
	Validate(token string) (Token, error)
}

// TokenError is a token validation failure: Status is RFC 7628's error
// status sent to the client ("invalid_token", "insufficient_scope"),
// Scope the required scope for insufficient_scope.
type TokenError struct {
	Status string
	Scope  string
	Reason string
}

func (e *TokenError) Error() string { return "sasl: token rejected (" + e.Status + "): " + e.Reason }

func invalidToken(reason string) error { return &TokenError{Status: "invalid_token", Reason: reason} }

type oauthSession struct {
	v         TokenValidator
	now       func() time.Time
	state     int // 0 first, 1 error sent, 2 done, 3 failed
	errMsg    string
	principal string
	lifetime  time.Duration
}

// NewOAuthBearerSession starts an OAUTHBEARER exchange checking tokens
// with v. now is the clock (time.Now if nil).
func NewOAuthBearerSession(v TokenValidator, now func() time.Time) Session {
	if now == nil {
		now = time.Now
	}
	return &oauthSession{v: v, now: now}
}

func (s *oauthSession) Mechanism() string       { return MechanismOAuthBearer }
func (s *oauthSession) Principal() string       { return s.principal }
func (s *oauthSession) Lifetime() time.Duration { return s.lifetime }

func (s *oauthSession) Step(msg []byte) ([]byte, bool, error) {
	switch s.state {
	case 0:
	case 1:
		// RFC 7628 3.2.2: after an error the client sends a lone \x01
		// and the server fails the exchange.
		s.state = 3
		return nil, true, failed("Authentication failed: "+s.errMsg, "client acknowledged the token error")
	default:
		return nil, true, illegalState(MechanismOAuthBearer)
	}
	m, err := ParseOAuthBearer(msg)
	if err != nil {
		s.state = 3
		return nil, true, err
	}
	tok, err := s.v.Validate(m.Token)
	if err != nil {
		te, ok := err.(*TokenError)
		if !ok {
			te = &TokenError{Status: "invalid_token", Reason: err.Error()}
		}
		j := `{"status":"` + te.Status + `"`
		if te.Scope != "" {
			j += `, "scope":"` + jsonEscape(te.Scope) + `"`
		}
		j += "}"
		s.errMsg = j
		s.state = 1
		// The reason stays in the server: the client learns the status.
		return []byte(j), false, nil
	}
	if m.Authzid != "" && m.Authzid != tok.Principal {
		s.state = 3
		return nil, true, failed("Authentication failed: Client requested an authorization id that is different from the token's principal name", "")
	}
	s.state = 2
	s.principal = principal(tok.Principal)
	if life := tok.Expiry.Sub(s.now()); life > 0 {
		s.lifetime = life
	} else {
		s.lifetime = time.Millisecond // expired between validation and now: reauthenticate at once
	}
	return []byte{}, true, nil
}

func jsonEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&15])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
