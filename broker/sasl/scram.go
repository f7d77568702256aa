package sasl

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"hash"
	"strconv"
	"strings"
	"time"
)

// CredentialStore gives the SCRAM credential of a user for a mechanism
// (the coordinator's cache, kept current by its watches). ok is false for
// a user without one.
type CredentialStore interface {
	ScramCredential(user, mechanism string) (cred ScramCredential, ok bool)
}

// CredentialStoreFunc adapts a function to CredentialStore.
type CredentialStoreFunc func(user, mechanism string) (ScramCredential, bool)

// ScramCredential implements CredentialStore.
func (f CredentialStoreFunc) ScramCredential(user, mechanism string) (ScramCredential, bool) {
	return f(user, mechanism)
}

// TokenStore gives the SCRAM credential of a delegation token (KIP-48) for
// a mechanism: the credential of the token's HMAC (base64) as password,
// the token owner's user name and when the token expires. ok is false for
// a token that is unknown or expired.
type TokenStore interface {
	TokenCredential(tokenID, mechanism string) (cred ScramCredential, owner string, expires time.Time, ok bool)
}

// TokenAuthExtension is the SCRAM extension of a client authenticating
// with a delegation token (Kafka's ScramLoginModule tokenauth=true).
const TokenAuthExtension = "tokenauth"

// TokenAuthenticated reports whether a client-first-message's extensions
// ask for delegation token authentication: tokenauth=true, any case, as
// Kafka's ScramExtensions.tokenAuthenticated.
func (m ScramClientFirst) TokenAuthenticated() bool {
	return strings.EqualFold(m.Extensions[TokenAuthExtension], "true")
}

// TokenSession is implemented by a Session that can authenticate with a
// delegation token: TokenAuthenticated reports whether the exchange did.
type TokenSession interface {
	TokenAuthenticated() bool
}

// scramMaxMessage bounds a SCRAM client message.
const scramMaxMessage = 16 << 10

// ScramClientFirst is a parsed client-first-message (RFC 5802 section 7).
type ScramClientFirst struct {
	// GS2Header is "n,," / "y,," or with "a=<authzid>" inside, as sent:
	// the client-final's channel binding must be its base64.
	GS2Header string
	// Authzid is the decoded authorization identity, "" if none.
	Authzid string
	// User is the decoded saslname.
	User  string
	Nonce string
	// Extensions are the attr=value pairs after the nonce (Kafka's SCRAM
	// extensions, e.g. tokenauth=true).
	Extensions map[string]string
	// Bare is client-first-message-bare as sent, part of AuthMessage.
	Bare string
}

// ParseScramClientFirst parses a client-first-message. Channel binding
// ("p=") and the reserved "m=" are refused: no -PLUS mechanism is offered.
func ParseScramClientFirst(msg []byte) (ScramClientFirst, error) {
	var m ScramClientFirst
	if len(msg) > scramMaxMessage {
		return m, failed("Invalid SCRAM client first message: too long", "")
	}
	s := string(msg)
	bad := func(why string) (ScramClientFirst, error) {
		return ScramClientFirst{}, failed("Invalid SCRAM client first message format", why)
	}
	switch {
	case strings.HasPrefix(s, "n,"), strings.HasPrefix(s, "y,"):
	case strings.HasPrefix(s, "p="):
		return ScramClientFirst{}, failed("Authentication failed: channel binding is not supported", "client asked for channel binding")
	default:
		return bad("gs2-cbind-flag")
	}
	rest := s[2:]
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
	m.GS2Header = s[:2+i+1]
	m.Bare = rest[i+1:]
	attrs := strings.Split(m.Bare, ",")
	if len(attrs) < 2 {
		return bad("missing n= or r=")
	}
	if strings.HasPrefix(attrs[0], "m=") {
		return bad("mandatory extension")
	}
	user, ok := strings.CutPrefix(attrs[0], "n=")
	if !ok {
		return bad("n=")
	}
	name, err := decodeSaslName(user)
	if err != nil || name == "" {
		return bad("saslname")
	}
	m.User = name
	nonce, ok := strings.CutPrefix(attrs[1], "r=")
	if !ok || !validNonce(nonce) {
		return bad("nonce")
	}
	m.Nonce = nonce
	for _, kv := range attrs[2:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !validExtensionName(k) || m.Extensions[k] != "" {
			return bad("extension")
		}
		if m.Extensions == nil {
			m.Extensions = map[string]string{}
		}
		m.Extensions[k] = v
	}
	return m, nil
}

// ScramClientFinal is a parsed client-final-message.
type ScramClientFinal struct {
	ChannelBinding []byte
	Nonce          string
	Proof          []byte
	// WithoutProof is client-final-message-without-proof as sent.
	WithoutProof string
}

// ParseScramClientFinal parses a client-final-message: c=, r=, optional
// extensions, and p= last.
func ParseScramClientFinal(msg []byte) (ScramClientFinal, error) {
	var m ScramClientFinal
	if len(msg) > scramMaxMessage {
		return m, failed("Invalid SCRAM client final message: too long", "")
	}
	s := string(msg)
	bad := func(why string) (ScramClientFinal, error) {
		return ScramClientFinal{}, failed("Invalid SCRAM client final message format", why)
	}
	i := strings.LastIndex(s, ",p=")
	if i < 0 {
		return bad("p=")
	}
	m.WithoutProof = s[:i]
	proof, err := base64.StdEncoding.Strict().DecodeString(s[i+3:])
	if err != nil || len(proof) == 0 {
		return bad("proof")
	}
	m.Proof = proof
	attrs := strings.Split(m.WithoutProof, ",")
	if len(attrs) < 2 {
		return bad("missing c= or r=")
	}
	cb, ok := strings.CutPrefix(attrs[0], "c=")
	if !ok {
		return bad("c=")
	}
	if m.ChannelBinding, err = base64.StdEncoding.Strict().DecodeString(cb); err != nil {
		return bad("channel binding")
	}
	nonce, ok := strings.CutPrefix(attrs[1], "r=")
	if !ok || !validNonce(nonce) {
		return bad("nonce")
	}
	m.Nonce = nonce
	for _, kv := range attrs[2:] {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || !validExtensionName(k) {
			return bad("extension")
		}
	}
	return m, nil
}

// decodeSaslName undoes RFC 5802's saslname escaping: "=2C" is ',' and
// "=3D" is '='; any other '=' or a ',' is an error.
func decodeSaslName(s string) (string, error) {
	if !strings.ContainsAny(s, "=,") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ',':
			return "", errSaslName
		case '=':
			switch {
			case strings.HasPrefix(s[i:], "=2C"):
				b.WriteByte(',')
			case strings.HasPrefix(s[i:], "=3D"):
				b.WriteByte('=')
			default:
				return "", errSaslName
			}
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// EncodeSaslName escapes a user name as a saslname.
func EncodeSaslName(s string) string {
	return strings.NewReplacer("=", "=3D", ",", "=2C").Replace(s)
}

var errSaslName = failed("Invalid SCRAM saslname", "")

// validNonce: printable ASCII except ',' (RFC 5802 "printable").
func validNonce(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e || c == ',' {
			return false
		}
	}
	return true
}

func validExtensionName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// scramSession is the server side of RFC 5802's exchange:
//
//	client-first  n,[a=authzid],n=user,r=cnonce[,ext]
//	server-first  r=cnonce+snonce,s=salt,i=iterations
//	client-final  c=base64(gs2-header),r=cnonce+snonce,p=proof
//	server-final  v=server-signature
type scramSession struct {
	mech    string
	h       func() hash.Hash
	store   CredentialStore
	tokens  TokenStore
	fakeKey []byte
	// serverNonce makes the server's part of the nonce (tests fix it).
	serverNonce func() (string, error)
	state       int // 0 first, 1 final, 2 done, 3 failed
	first       ScramClientFirst
	cred        ScramCredential
	known       bool
	serverMsg   string
	nonce       string
	principal   string
	// token: the client authenticates with a delegation token; owner is
	// its owner's user name, expires when it ends.
	token    bool
	owner    string
	expires  time.Time
	lifetime time.Duration
	now      func() time.Time
}

// NewScramSession starts a SCRAM exchange of mechanism (SCRAM-SHA-256 or
// SCRAM-SHA-512) against store. fakeKey keys the fake salt answered for
// unknown users (see Config).
func NewScramSession(mechanism string, store CredentialStore, fakeKey []byte) (Session, error) {
	return NewScramTokenSession(mechanism, store, nil, fakeKey, nil)
}

// NewScramTokenSession is NewScramSession that also takes delegation
// tokens (the tokenauth=true extension) from tokens (nil: none known, so
// a token client fails as a wrong password does). now is the clock of the
// token's remaining lifetime (nil: time.Now).
func NewScramTokenSession(mechanism string, store CredentialStore, tokens TokenStore, fakeKey []byte, now func() time.Time) (Session, error) {
	h := scramHash(mechanism)
	if h == nil {
		return nil, ErrUnsupportedMechanism
	}
	if now == nil {
		now = time.Now
	}
	return &scramSession{mech: mechanism, h: h, store: store, tokens: tokens, fakeKey: fakeKey, serverNonce: randomNonce, now: now}, nil
}

func randomNonce() (string, error) {
	var rnd [24]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(rnd[:]), nil
}

func (s *scramSession) Mechanism() string       { return s.mech }
func (s *scramSession) Principal() string       { return s.principal }
func (s *scramSession) Lifetime() time.Duration { return s.lifetime }

// TokenAuthenticated implements TokenSession.
func (s *scramSession) TokenAuthenticated() bool { return s.state == 2 && s.token }

func (s *scramSession) fail(serverMsg string, err error) ([]byte, bool, error) {
	s.state = 3
	s.cred = ScramCredential{}
	var out []byte
	if serverMsg != "" {
		out = []byte(serverMsg)
	}
	return out, true, err
}

func (s *scramSession) Step(msg []byte) ([]byte, bool, error) {
	switch s.state {
	case 0:
		return s.clientFirst(msg)
	case 1:
		return s.clientFinal(msg)
	default:
		return nil, true, illegalState(s.mech)
	}
}

func (s *scramSession) clientFirst(msg []byte) ([]byte, bool, error) {
	first, err := ParseScramClientFirst(msg)
	if err != nil {
		return s.fail("e=invalid-encoding", err)
	}
	if first.Authzid != "" && first.Authzid != first.User {
		return s.fail("e=invalid-username-encoding", failed("Authentication failed: Client requested an authorization id that is different from username", ""))
	}
	s.first = first
	s.token = first.TokenAuthenticated()
	switch {
	case s.token && s.tokens != nil:
		// An unknown or expired token goes on with a fake credential
		// and fails at the proof, as a wrong password does.
		s.cred, s.owner, s.expires, s.known = s.tokens.TokenCredential(first.User, s.mech)
	case !s.token && s.store != nil:
		s.cred, s.known = s.store.ScramCredential(first.User, s.mech)
	}
	if s.known && s.cred.Iterations < ScramMinIterations {
		return s.fail("e=other-error", failed("Authentication failed: Invalid user credentials", "stored iterations below the minimum for user "+quoteName(first.User)))
	}
	if !s.known {
		// An unknown user goes through the whole exchange with a salt
		// that is stable per name, and fails at the proof like a wrong
		// password: the answers do not tell which.
		s.cred = ScramCredential{
			Salt:       hmacSum(s.h, s.fakeKey, []byte(s.mech+"\x00salt\x00"+first.User))[:32],
			StoredKey:  hmacSum(s.h, s.fakeKey, []byte(s.mech+"\x00stored\x00"+first.User)),
			ServerKey:  hmacSum(s.h, s.fakeKey, []byte(s.mech+"\x00server\x00"+first.User)),
			Iterations: ScramMinIterations,
		}
	}
	sn, err := s.serverNonce()
	if err != nil {
		return s.fail("e=other-error", failed("Authentication failed", "random nonce: "+err.Error()))
	}
	s.nonce = first.Nonce + sn
	s.serverMsg = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(s.cred.Salt) + ",i=" + strconv.Itoa(s.cred.Iterations)
	s.state = 1
	return []byte(s.serverMsg), false, nil
}

func (s *scramSession) clientFinal(msg []byte) ([]byte, bool, error) {
	fin, err := ParseScramClientFinal(msg)
	if err != nil {
		return s.fail("e=invalid-encoding", err)
	}
	if subtle.ConstantTimeCompare(fin.ChannelBinding, []byte(s.first.GS2Header)) != 1 {
		return s.fail("e=channel-bindings-dont-match", failed("Authentication failed: channel bindings do not match", ""))
	}
	// Kafka's ScramSaslServer checks that the client's nonce ends with
	// the combined nonce, not that it equals it: librdkafka (through
	// 2.x) sends its own nonce again in front of the combined one
	// (r=cnonce+cnonce+snonce). The proof covers the message as sent, so
	// the check stays as strong: a different prefix changes AuthMessage.
	if !strings.HasSuffix(fin.Nonce, s.nonce) {
		return s.fail("e=other-error", failed("Invalid client nonce in the final client message.", ""))
	}
	authMsg := []byte(s.first.Bare + "," + s.serverMsg + "," + fin.WithoutProof)
	ok := false
	if len(fin.Proof) == len(s.cred.StoredKey) {
		sig := hmacSum(s.h, s.cred.StoredKey, authMsg)
		clientKey := make([]byte, len(sig))
		subtle.XORBytes(clientKey, fin.Proof, sig)
		h := s.h()
		h.Write(clientKey)
		ok = hmac.Equal(h.Sum(nil), s.cred.StoredKey) && s.known
	}
	if ok && s.token && !s.expires.IsZero() {
		// The token may have expired during the exchange.
		if left := s.expires.Sub(s.now()); left > 0 {
			s.lifetime = left
		} else {
			ok = false
		}
	}
	if !ok {
		who := "SCRAM user " + quoteName(s.first.User)
		if s.token {
			who = "delegation token " + quoteName(s.first.User)
		}
		return s.fail("e=invalid-proof", failed("Authentication failed during authentication due to invalid credentials with SASL mechanism "+s.mech, who))
	}
	v := "v=" + base64.StdEncoding.EncodeToString(hmacSum(s.h, s.cred.ServerKey, authMsg))
	s.state = 2
	s.cred = ScramCredential{}
	s.principal = principal(s.first.User)
	if s.token {
		s.principal = principal(s.owner)
	}
	return []byte(v), true, nil
}
