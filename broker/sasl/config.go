package sasl

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Property names Config reads, as Kafka spells them once the listener
// prefix (listener.name.<listener>.) is resolved away.
const (
	PropEnabledMechanisms    = "sasl.enabled.mechanisms"
	PropJAASConfig           = "sasl.jaas.config"
	PropOAuthJWKSURL         = "sasl.oauthbearer.jwks.endpoint.url"
	PropOAuthJWKSRefreshMs   = "sasl.oauthbearer.jwks.endpoint.refresh.ms"
	PropOAuthAudience        = "sasl.oauthbearer.expected.audience"
	PropOAuthIssuer          = "sasl.oauthbearer.expected.issuer"
	PropOAuthClockSkewSec    = "sasl.oauthbearer.clock.skew.seconds"
	PropOAuthSubClaimName    = "sasl.oauthbearer.sub.claim.name"
	PropOAuthScopeClaimName  = "sasl.oauthbearer.scope.claim.name"
	PropServerCallbackSuffix = "sasl.server.callback.handler.class"
)

// Kafka's server callback handlers of OAUTHBEARER.
const (
	OAuthValidatorHandler          = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
	OAuthUnsecuredValidatorHandler = "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"
)

// Options are what a Config needs besides properties.
type Options struct {
	// HTTPClient fetches an https JWKS (nil: http.DefaultClient).
	HTTPClient *http.Client
	// Now is the clock of token checks (nil: time.Now).
	Now func() time.Time
	// Tokens are the delegation tokens SCRAM clients may authenticate
	// with (tokenauth=true); nil: none.
	Tokens TokenStore
}

// Config is the SASL setup of one listener: its enabled mechanisms and
// what each checks against. It is safe for concurrent use; each
// connection's exchange is a Session from NewSession.
type Config struct {
	mechanisms []string
	plain      PlainUsers
	store      CredentialStore
	tokens     TokenStore
	fakeKey    []byte
	oauth      TokenValidator
	jwks       *JWKSValidator
	now        func() time.Time
}

// NewConfig builds a listener's SASL setup from its effective properties:
//
//   - sasl.enabled.mechanisms: a comma-separated list of PLAIN,
//     SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (GSSAPI is not served).
//   - PLAIN: users from <"plain">.sasl.jaas.config (else sasl.jaas.config),
//     a PlainLoginModule entry with user_<name>="<password>" options.
//   - SCRAM-*: credentials from store (required).
//   - OAUTHBEARER: the JWKS validator when sasl.oauthbearer.jwks.endpoint.url
//     is set (or oauthbearer.sasl.server.callback.handler.class names
//     Kafka's OAuthBearerValidatorCallbackHandler), else the unsecured one
//     with the OAuthBearerLoginModule's unsecuredValidator* options.
//
// Errors wrap ErrInvalidConfig and never quote a JAAS value.
func NewConfig(props map[string]string, store CredentialStore, opts Options) (*Config, error) {
	c := &Config{store: store, tokens: opts.Tokens, now: opts.Now, fakeKey: make([]byte, 32)}
	if c.now == nil {
		c.now = time.Now
	}
	if _, err := rand.Read(c.fakeKey); err != nil {
		return nil, fmt.Errorf("sasl: random key: %w", err)
	}
	seen := map[string]bool{}
	for _, m := range strings.Split(props[PropEnabledMechanisms], ",") {
		m = strings.TrimSpace(m)
		if m == "" || seen[m] {
			continue
		}
		seen[m] = true
		switch m {
		case MechanismPlain, MechanismScramSHA256, MechanismScramSHA512, MechanismOAuthBearer:
			c.mechanisms = append(c.mechanisms, m)
		default:
			return nil, errorf("%s: mechanism %q is not supported (supported: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER)", PropEnabledMechanisms, m)
		}
	}
	if len(c.mechanisms) == 0 {
		return nil, errorf("%s names no mechanism", PropEnabledMechanisms)
	}
	for _, m := range c.mechanisms {
		var err error
		switch m {
		case MechanismPlain:
			jaas := jaasFor(props, m)
			if jaas == "" {
				return nil, errorf("PLAIN needs %s.%s (or %s) with a %s entry", strings.ToLower(m), PropJAASConfig, PropJAASConfig, PlainLoginModule)
			}
			if c.plain, err = plainUsersFromJAAS(jaas); err != nil {
				return nil, fmt.Errorf("%w (PLAIN)", err)
			}
		case MechanismScramSHA256, MechanismScramSHA512:
			if store == nil {
				return nil, errorf("%s needs a credential store", m)
			}
		case MechanismOAuthBearer:
			if err := c.setupOAuth(props, opts); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

// jaasFor is the JAAS config of a mechanism: the mechanism-prefixed
// property, else the plain one.
func jaasFor(props map[string]string, mech string) string {
	if v := props[strings.ToLower(mech)+"."+PropJAASConfig]; v != "" {
		return v
	}
	return props[PropJAASConfig]
}

func (c *Config) setupOAuth(props map[string]string, opts Options) error {
	handler := props[strings.ToLower(MechanismOAuthBearer)+"."+PropServerCallbackSuffix]
	url := props[PropOAuthJWKSURL]
	switch handler {
	case "":
		if url != "" {
			handler = OAuthValidatorHandler
		} else {
			handler = OAuthUnsecuredValidatorHandler
		}
	case OAuthValidatorHandler, OAuthUnsecuredValidatorHandler:
	default:
		return errorf("oauthbearer.%s: unsupported class %q", PropServerCallbackSuffix, handler)
	}
	if handler == OAuthUnsecuredValidatorHandler {
		var opt map[string]string
		if jaas := jaasFor(props, MechanismOAuthBearer); jaas != "" {
			entries, err := ParseJAAS(jaas)
			if err != nil {
				return fmt.Errorf("%w (OAUTHBEARER)", err)
			}
			if e, ok := jaasEntryFor(entries, OAuthBearerLoginModule); ok {
				opt = e.Options
			}
		}
		skew, err := nonNegative(opt["unsecuredValidatorAllowableClockSkewMs"], "unsecuredValidatorAllowableClockSkewMs", 0)
		if err != nil {
			return err
		}
		c.oauth = &UnsecuredValidator{Now: c.now, Rules: ClaimRules{
			PrincipalClaim: opt["unsecuredValidatorPrincipalClaimName"],
			ScopeClaim:     opt["unsecuredValidatorScopeClaimName"],
			RequiredScope:  strings.Fields(opt["unsecuredValidatorRequiredScope"]),
			ClockSkew:      time.Duration(skew) * time.Millisecond,
		}}
		return nil
	}
	if url == "" {
		return errorf("%s requires %s", OAuthValidatorHandler, PropOAuthJWKSURL)
	}
	skew, err := nonNegative(props[PropOAuthClockSkewSec], PropOAuthClockSkewSec, 30)
	if err != nil {
		return err
	}
	refresh, err := nonNegative(props[PropOAuthJWKSRefreshMs], PropOAuthJWKSRefreshMs, 3600000)
	if err != nil {
		return err
	}
	if refresh < 1000 {
		return errorf("%s must be at least 1000", PropOAuthJWKSRefreshMs)
	}
	rules := ClaimRules{
		PrincipalClaim: props[PropOAuthSubClaimName],
		ScopeClaim:     props[PropOAuthScopeClaimName],
		ClockSkew:      time.Duration(skew) * time.Second,
		Issuer:         props[PropOAuthIssuer],
	}
	for _, a := range strings.Split(props[PropOAuthAudience], ",") {
		if a = strings.TrimSpace(a); a != "" {
			rules.Audience = append(rules.Audience, a)
		}
	}
	v, err := NewJWKSValidator(url, time.Duration(refresh)*time.Millisecond, rules, opts.HTTPClient, c.now)
	if err != nil {
		return err
	}
	c.oauth, c.jwks = v, v
	return nil
}

func nonNegative(s, name string, def int64) (int64, error) {
	if strings.TrimSpace(s) == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return 0, errorf("%s: %q is not a non-negative integer", name, s)
	}
	return n, nil
}

// Mechanisms lists the enabled mechanisms in configuration order
// (SaslHandshake's answer).
func (c *Config) Mechanisms() []string { return append([]string(nil), c.mechanisms...) }

// Enabled reports whether mechanism is enabled.
func (c *Config) Enabled(mechanism string) bool {
	for _, m := range c.mechanisms {
		if m == mechanism {
			return true
		}
	}
	return false
}

// NewSession starts a connection's exchange of mechanism; an error wraps
// ErrUnsupportedMechanism if it is not enabled.
func (c *Config) NewSession(mechanism string) (Session, error) {
	if !c.Enabled(mechanism) {
		return nil, fmt.Errorf("%w: %q (enabled: %s)", ErrUnsupportedMechanism, mechanism, strings.Join(c.mechanisms, ", "))
	}
	switch mechanism {
	case MechanismPlain:
		return NewPlainSession(c.plain), nil
	case MechanismOAuthBearer:
		return NewOAuthBearerSession(c.oauth, c.now), nil
	default:
		return NewScramTokenSession(mechanism, c.store, c.tokens, c.fakeKey, c.now)
	}
}

// Close stops the JWKS refresh, if any.
func (c *Config) Close() {
	if c.jwks != nil {
		c.jwks.Close()
	}
}
