package sasl

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"strings"
	"time"
)

// jwtMaxLen bounds a token.
const jwtMaxLen = 32 << 10

// JWS is a parsed compact JWS (RFC 7515): base64url(header) "."
// base64url(claims) "." base64url(signature). Nothing in it is checked
// yet but its form.
type JWS struct {
	Alg, Kid     string
	Header       map[string]any
	Claims       map[string]any
	SigningInput []byte // header "." claims, as sent
	Signature    []byte
}

// ParseJWS splits and decodes a compact JWS; its header must name alg and
// both parts must be JSON objects.
func ParseJWS(token string) (*JWS, error) {
	if len(token) > jwtMaxLen {
		return nil, invalidToken("token too long")
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, invalidToken("not a compact JWS of three parts")
	}
	dec := base64.RawURLEncoding.Strict()
	hb, err := dec.DecodeString(parts[0])
	if err != nil {
		return nil, invalidToken("header is not base64url")
	}
	cb, err := dec.DecodeString(parts[1])
	if err != nil {
		return nil, invalidToken("claims are not base64url")
	}
	sig, err := dec.DecodeString(parts[2])
	if err != nil {
		return nil, invalidToken("signature is not base64url")
	}
	j := &JWS{SigningInput: []byte(parts[0] + "." + parts[1]), Signature: sig}
	if err := decodeJSONObject(hb, &j.Header); err != nil {
		return nil, invalidToken("header: " + err.Error())
	}
	if err := decodeJSONObject(cb, &j.Claims); err != nil {
		return nil, invalidToken("claims: " + err.Error())
	}
	alg, ok := j.Header["alg"].(string)
	if !ok || alg == "" {
		return nil, invalidToken("header has no alg")
	}
	j.Alg = alg
	if kid, ok := j.Header["kid"]; ok {
		if j.Kid, ok = kid.(string); !ok {
			return nil, invalidToken("kid is not a string")
		}
	}
	return j, nil
}

func decodeJSONObject(b []byte, v *map[string]any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if *v == nil {
		return errNotObject
	}
	if d.More() {
		return errNotObject
	}
	return nil
}

var errNotObject = &TokenError{Status: "invalid_token", Reason: "not a single JSON object"}

// ClaimRules are the checks of a token's claims shared by both validators.
type ClaimRules struct {
	// PrincipalClaim names the principal's claim; default "sub".
	PrincipalClaim string
	// ScopeClaim names the scope claim (a space-separated string or an
	// array); default "scope".
	ScopeClaim string
	// RequiredScope must all be in the token's scope.
	RequiredScope []string
	// ClockSkew is allowed on exp, iat and nbf.
	ClockSkew time.Duration
	// Audience, if not empty: the token's aud must hold one of them.
	Audience []string
	// Issuer, if not empty, must equal the token's iss.
	Issuer string
	// IssuedAtRequired refuses a token without iat.
	IssuedAtRequired bool
}

func (r ClaimRules) check(claims map[string]any, now time.Time) (Token, error) {
	var t Token
	pc := r.PrincipalClaim
	if pc == "" {
		pc = "sub"
	}
	sc := r.ScopeClaim
	if sc == "" {
		sc = "scope"
	}
	exp, ok, err := numericDate(claims, "exp")
	if err != nil {
		return t, err
	}
	if !ok {
		return t, invalidToken("no exp claim")
	}
	if !now.Add(-r.ClockSkew).Before(exp) {
		return t, invalidToken("the token has expired")
	}
	iat, ok, err := numericDate(claims, "iat")
	if err != nil {
		return t, err
	}
	if !ok && r.IssuedAtRequired {
		return t, invalidToken("no iat claim")
	}
	if ok {
		if iat.After(now.Add(r.ClockSkew)) {
			return t, invalidToken("the token was issued in the future")
		}
		if !exp.After(iat) {
			return t, invalidToken("exp is not after iat")
		}
	}
	if nbf, ok, err := numericDate(claims, "nbf"); err != nil {
		return t, err
	} else if ok && nbf.After(now.Add(r.ClockSkew)) {
		return t, invalidToken("the token is not valid yet (nbf)")
	}
	sub, _ := claims[pc].(string)
	if strings.TrimSpace(sub) == "" {
		return t, invalidToken("no principal claim " + pc)
	}
	t.Principal, t.Expiry = sub, exp
	switch v := claims[sc].(type) {
	case nil:
	case string:
		t.Scope = strings.Fields(v)
	case []any:
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return Token{}, invalidToken("scope claim holds a non-string")
			}
			t.Scope = append(t.Scope, s)
		}
	default:
		return Token{}, invalidToken("scope claim is neither a string nor an array")
	}
	for _, need := range r.RequiredScope {
		found := false
		for _, have := range t.Scope {
			if have == need {
				found = true
				break
			}
		}
		if !found {
			return Token{}, &TokenError{Status: "insufficient_scope", Scope: strings.Join(r.RequiredScope, " "), Reason: "missing scope " + need}
		}
	}
	if r.Issuer != "" {
		if iss, _ := claims["iss"].(string); iss != r.Issuer {
			return Token{}, invalidToken("unexpected issuer")
		}
	}
	if len(r.Audience) > 0 {
		var auds []string
		switch v := claims["aud"].(type) {
		case string:
			auds = []string{v}
		case []any:
			for _, e := range v {
				if s, ok := e.(string); ok {
					auds = append(auds, s)
				}
			}
		}
		match := false
		for _, a := range auds {
			for _, want := range r.Audience {
				if a == want {
					match = true
				}
			}
		}
		if !match {
			return Token{}, invalidToken("unexpected audience")
		}
	}
	return t, nil
}

// numericDate reads a NumericDate claim (seconds since the epoch, maybe
// with a fraction).
func numericDate(claims map[string]any, name string) (time.Time, bool, error) {
	v, ok := claims[name]
	if !ok {
		return time.Time{}, false, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return time.Time{}, false, invalidToken(name + " is not a number")
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || f < 0 || f > 1e11 {
		return time.Time{}, false, invalidToken(name + " is out of range")
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true, nil
}

// UnsecuredValidator is Kafka's OAuthBearerUnsecuredValidatorCallbackHandler:
// it accepts unsigned tokens (alg "none", empty signature), for
// development only. Its rules come from the OAuthBearerLoginModule's
// options unsecuredValidatorPrincipalClaimName, ...ScopeClaimName,
// ...RequiredScope and ...AllowableClockSkewMs.
type UnsecuredValidator struct {
	Rules ClaimRules
	Now   func() time.Time
}

// Validate implements TokenValidator.
func (v *UnsecuredValidator) Validate(token string) (Token, error) {
	j, err := ParseJWS(token)
	if err != nil {
		return Token{}, err
	}
	if j.Alg != "none" {
		return Token{}, invalidToken("unsecured validator: alg must be none")
	}
	if len(j.Signature) != 0 {
		return Token{}, invalidToken("unsecured validator: a token with alg none has no signature")
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	return v.Rules.check(j.Claims, now())
}
