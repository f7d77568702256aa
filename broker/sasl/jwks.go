package sasl

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"
)

// Bounds of the JWKS validator.
const (
	jwksMaxBytes = 1 << 20
	// jwksFetchTimeout bounds one fetch of the key set.
	jwksFetchTimeout = 10 * time.Second
	// jwksUnknownKidInterval is the least time between two fetches caused
	// by a token naming an unknown kid, so tokens with made-up kids cannot
	// make the broker hammer the issuer.
	jwksUnknownKidInterval = 10 * time.Second
)

type jwk struct {
	kid, alg string
	key      crypto.PublicKey
}

// JWKSValidator checks signed JWTs (RS256/384/512, PS256/384/512,
// ES256/384/512) with the public keys of a JSON Web Key Set fetched from
// sasl.oauthbearer.jwks.endpoint.url (https:// or file://), cached and
// fetched again every refresh interval, and when a token names a kid the
// cache does not have (at most once per 10 s). Kafka's
// OAuthBearerValidatorCallbackHandler.
type JWKSValidator struct {
	Rules  ClaimRules
	now    func() time.Time
	url    *url.URL
	client *http.Client
	every  time.Duration
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once

	fetchMu sync.Mutex // one fetch at a time
	mu      struct {
		sync.Mutex
		keys         []jwk
		lastUnknown  time.Time
		lastFetchErr error
	}
}

// NewJWKSValidator fetches the key set once (an error if that fails, as
// Kafka does at startup) and starts refreshing it every refresh. client
// is used for https (nil: http.DefaultClient); now is the clock (nil:
// time.Now). Close stops the refresh.
func NewJWKSValidator(rawURL string, refresh time.Duration, rules ClaimRules, client *http.Client, now func() time.Time) (*JWKSValidator, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "file") {
		return nil, errorf("sasl.oauthbearer.jwks.endpoint.url must be an https:// or file:// URL")
	}
	if client == nil {
		client = http.DefaultClient
	}
	if now == nil {
		now = time.Now
	}
	if refresh <= 0 {
		refresh = time.Hour
	}
	v := &JWKSValidator{Rules: rules, now: now, url: u, client: client, every: refresh, stop: make(chan struct{}), done: make(chan struct{})}
	if err := v.fetch(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	go v.refreshLoop()
	return v, nil
}

// Close stops the background refresh.
func (v *JWKSValidator) Close() {
	v.once.Do(func() { close(v.stop) })
	<-v.done
}

func (v *JWKSValidator) refreshLoop() {
	defer close(v.done)
	t := time.NewTicker(v.every)
	defer t.Stop()
	for {
		select {
		case <-v.stop:
			return
		case <-t.C:
			// A failed refresh keeps the last keys; the error is kept for
			// the log line of the next token that needs a missing key.
			_ = v.fetch()
		}
	}
}

func (v *JWKSValidator) fetch() error {
	v.fetchMu.Lock()
	defer v.fetchMu.Unlock()
	b, err := v.read()
	if err == nil {
		var keys []jwk
		keys, err = parseJWKS(b)
		if err == nil {
			v.mu.Lock()
			v.mu.keys, v.mu.lastFetchErr = keys, nil
			v.mu.Unlock()
			return nil
		}
	}
	err = fmt.Errorf("sasl: JWKS from %s: %w", v.url.Redacted(), err)
	v.mu.Lock()
	v.mu.lastFetchErr = err
	v.mu.Unlock()
	return err
}

func (v *JWKSValidator) read() ([]byte, error) {
	if v.url.Scheme == "file" {
		f, err := os.Open(v.url.Path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return readBounded(f)
	}
	ctx, cancel := context.WithTimeout(context.Background(), jwksFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.url.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP status %s", resp.Status)
	}
	return readBounded(resp.Body)
}

func readBounded(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, jwksMaxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > jwksMaxBytes {
		return nil, fmt.Errorf("key set larger than %d bytes", jwksMaxBytes)
	}
	return b, nil
}

// parseJWKS reads the signature keys of a JWK Set (RFC 7517): RSA and EC
// (P-256, P-384, P-521) keys; keys for another use than "sig" and other
// key types are skipped. It fails if no usable key is left.
func parseJWKS(b []byte) ([]jwk, error) {
	var set struct {
		Keys []struct {
			Kty, Kid, Alg, Use, Crv string
			N, E, X, Y              string
		} `json:"keys"`
	}
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("not a JWK set: %w", err)
	}
	var out []jwk
	dec := base64.RawURLEncoding
	for _, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		switch k.Kty {
		case "RSA":
			n, err1 := dec.DecodeString(k.N)
			e, err2 := dec.DecodeString(k.E)
			if err1 != nil || err2 != nil || len(n) < 256 || len(e) == 0 || len(e) > 4 {
				continue // under 2048 bits, or malformed
			}
			ei := 0
			for _, c := range e {
				ei = ei<<8 | int(c)
			}
			if ei < 3 || ei%2 == 0 {
				continue
			}
			out = append(out, jwk{kid: k.Kid, alg: k.Alg, key: &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: ei}})
		case "EC":
			var c elliptic.Curve
			switch k.Crv {
			case "P-256":
				c = elliptic.P256()
			case "P-384":
				c = elliptic.P384()
			case "P-521":
				c = elliptic.P521()
			default:
				continue
			}
			size := (c.Params().BitSize + 7) / 8
			x, err1 := dec.DecodeString(k.X)
			y, err2 := dec.DecodeString(k.Y)
			if err1 != nil || err2 != nil || len(x) != size || len(y) != size {
				continue
			}
			pub, err := ecdsa.ParseUncompressedPublicKey(c, append(append([]byte{4}, x...), y...))
			if err != nil {
				continue
			}
			out = append(out, jwk{kid: k.Kid, alg: k.Alg, key: pub})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no usable signature key")
	}
	return out, nil
}

// Validate implements TokenValidator.
func (v *JWKSValidator) Validate(token string) (Token, error) {
	j, err := ParseJWS(token)
	if err != nil {
		return Token{}, err
	}
	if !supportedAlg(j.Alg) {
		return Token{}, invalidToken("unsupported alg " + quoteName(j.Alg))
	}
	keys := v.candidates(j)
	if len(keys) == 0 && j.Kid != "" {
		// A kid we do not know: the issuer may have rotated its keys.
		v.mu.Lock()
		due := v.now().Sub(v.mu.lastUnknown) >= jwksUnknownKidInterval
		if due {
			v.mu.lastUnknown = v.now()
		}
		v.mu.Unlock()
		if due {
			_ = v.fetch()
			keys = v.candidates(j)
		}
	}
	if len(keys) == 0 {
		return Token{}, invalidToken("no key for kid " + quoteName(j.Kid))
	}
	ok := false
	for _, k := range keys {
		if verifySignature(j.Alg, k.key, j.SigningInput, j.Signature) {
			ok = true
			break
		}
	}
	if !ok {
		return Token{}, invalidToken("bad signature")
	}
	return v.Rules.check(j.Claims, v.now())
}

func (v *JWKSValidator) candidates(j *JWS) []jwk {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []jwk
	for _, k := range v.mu.keys {
		if j.Kid != "" && k.kid != j.Kid {
			continue
		}
		if k.alg != "" && k.alg != j.Alg {
			continue
		}
		out = append(out, k)
	}
	return out
}

func supportedAlg(alg string) bool {
	switch alg {
	case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512":
		return true
	}
	return false
}

// verifySignature checks a JWS signature (RFC 7518 section 3) with the
// standard library.
func verifySignature(alg string, key crypto.PublicKey, input, sig []byte) bool {
	var h crypto.Hash
	switch alg[2:] {
	case "256":
		h = crypto.SHA256
	case "384":
		h = crypto.SHA384
	case "512":
		h = crypto.SHA512
	default:
		return false
	}
	var digest []byte
	switch h {
	case crypto.SHA256:
		d := sha256.Sum256(input)
		digest = d[:]
	case crypto.SHA384:
		d := sha512.Sum384(input)
		digest = d[:]
	default:
		d := sha512.Sum512(input)
		digest = d[:]
	}
	switch alg[:2] {
	case "RS":
		k, ok := key.(*rsa.PublicKey)
		return ok && rsa.VerifyPKCS1v15(k, h, digest, sig) == nil
	case "PS":
		k, ok := key.(*rsa.PublicKey)
		return ok && rsa.VerifyPSS(k, h, digest, sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash}) == nil
	case "ES":
		k, ok := key.(*ecdsa.PublicKey)
		if !ok {
			return false
		}
		want := map[string]int{"ES256": 256, "ES384": 384, "ES512": 521}[alg]
		if k.Curve.Params().BitSize != want {
			return false
		}
		size := (want + 7) / 8
		if len(sig) != 2*size {
			return false
		}
		r := new(big.Int).SetBytes(sig[:size])
		s := new(big.Int).SetBytes(sig[size:])
		return ecdsa.Verify(k, digest, r, s)
	}
	return false
}
