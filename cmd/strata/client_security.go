package main

// The client subcommands' security settings: Kafka's client properties
// (security.protocol, ssl.*, sasl.*) from --command-config FILE, and the
// few flags with the same meaning, mapped to franz-go's TLS dialer and
// SASL mechanisms. Errors name the setting to change.

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/stratastream/strata/broker"
	"github.com/stratastream/strata/broker/tlsconfig"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// saslPasswordEnv is read for the SASL password when --sasl-password is
// not given, so that the password is not in the process list.
const saslPasswordEnv = "STRATA_SASL_PASSWORD"

// Security protocols (security.protocol).
const (
	protoPlaintext     = "PLAINTEXT"
	protoSSL           = "SSL"
	protoSASLPlaintext = "SASL_PLAINTEXT"
	protoSASLSSL       = "SASL_SSL"
)

// JAAS login modules Kafka's clients use in sasl.jaas.config.
const (
	plainModule = "org.apache.kafka.common.security.plain.PlainLoginModule"
	scramModule = "org.apache.kafka.common.security.scram.ScramLoginModule"
	oauthModule = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
)

// securityFlags are the flags every client subcommand has.
type securityFlags struct {
	commandConfig *string
	protocol      *string
	mechanism     *string
	username      *string
	password      *string
	truststore    *string
	keystore      *string
}

func addSecurityFlags(fs *flag.FlagSet) *securityFlags {
	return &securityFlags{
		commandConfig: fs.String("command-config", "", "Kafka client properties `FILE`: security.protocol, ssl.*, sasl.mechanism, sasl.jaas.config (see docs/security.md); the flags below override it"),
		protocol:      fs.String("security-protocol", "", "`PROTOCOL`: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (security.protocol; default PLAINTEXT)"),
		mechanism:     fs.String("sasl-mechanism", "", "`MECHANISM`: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (sasl.mechanism)"),
		username:      fs.String("sasl-username", "", "SASL user `name` (the username of sasl.jaas.config; for OAUTHBEARER, the unsecured token's subject)"),
		password:      fs.String("sasl-password", "", "SASL `password`; better in the environment variable "+saslPasswordEnv+", which ps does not show"),
		truststore:    fs.String("ssl-truststore-location", "", "`FILE` of the CAs that verify the brokers, PEM or PKCS12 (ssl.truststore.location)"),
		keystore:      fs.String("ssl-keystore-location", "", "`FILE` with this client's certificate and key for mutual TLS, PEM or PKCS12 (ssl.keystore.location)"),
	}
}

// clientSecurity is what the settings resolve to.
type clientSecurity struct {
	protocol  string
	tls       *tls.Config // nil without TLS
	mechanism string      // "" without SASL
	user      string      // SASL user, or the OAUTHBEARER subject
	sasl      sasl.Mechanism
}

// opts are the franz-go options of s.
func (s *clientSecurity) opts() []kgo.Opt {
	var out []kgo.Opt
	if s.tls != nil {
		out = append(out, kgo.DialTLSConfig(s.tls))
	}
	if s.sasl != nil {
		out = append(out, kgo.SASL(s.sasl))
	}
	return out
}

// resolve reads --command-config and applies the flags over it.
func (f *securityFlags) resolve(getenv func(string) string) (*clientSecurity, error) {
	props := map[string]string{}
	if path := *f.commandConfig; path != "" {
		p, err := broker.ReadPropertiesFile(path)
		if err != nil {
			return nil, fmt.Errorf("--command-config: %w", err)
		}
		props = p
	}
	set := func(k, v string) {
		if v != "" {
			props[k] = v
		}
	}
	set("security.protocol", *f.protocol)
	set("sasl.mechanism", *f.mechanism)
	set("ssl.truststore.location", *f.truststore)
	set("ssl.keystore.location", *f.keystore)
	password := *f.password
	if password == "" {
		password = getenv(saslPasswordEnv)
	}
	return securityFromProperties(props, *f.username, password, time.Now())
}

// clientPropertyKeys are the keys --command-config accepts besides ssl.*.
var clientPropertyKeys = []string{"security.protocol", "sasl.mechanism", "sasl.jaas.config"}

// securityFromProperties resolves Kafka client properties; user and
// password, when not "", override those of sasl.jaas.config.
func securityFromProperties(props map[string]string, user, password string, now time.Time) (*clientSecurity, error) {
	var unknown []string
	sslProps := map[string]string{}
	for k, v := range props {
		switch {
		case strings.HasPrefix(k, "ssl."):
			sslProps[k] = v
		case !slices.Contains(clientPropertyKeys, k):
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("unknown client setting %s: the settings are %s and ssl.* (see docs/security.md)", strings.Join(unknown, ", "), strings.Join(clientPropertyKeys, ", "))
	}
	s := &clientSecurity{protocol: strings.ToUpper(strings.TrimSpace(props["security.protocol"]))}
	if s.protocol == "" {
		s.protocol = protoPlaintext
	}
	var useTLS, useSASL bool
	switch s.protocol {
	case protoPlaintext:
	case protoSSL:
		useTLS = true
	case protoSASLPlaintext:
		useSASL = true
	case protoSASLSSL:
		useTLS, useSASL = true, true
	default:
		return nil, fmt.Errorf("security.protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", props["security.protocol"])
	}
	if !useTLS && len(sslProps) > 0 {
		keys := slices.Sorted(mapKeys(sslProps))
		return nil, fmt.Errorf("%s given, but security.protocol is %s: set security.protocol (--security-protocol) to SSL or SASL_SSL to use TLS", strings.Join(keys, ", "), s.protocol)
	}
	if useTLS {
		cfg, err := tlsconfig.NewClient(sslProps)
		if err != nil {
			return nil, err
		}
		s.tls = cfg
	}
	mech := strings.ToUpper(strings.TrimSpace(props["sasl.mechanism"]))
	jaas := strings.TrimSpace(props["sasl.jaas.config"])
	if !useSASL {
		if mech != "" || jaas != "" || user != "" {
			return nil, fmt.Errorf("SASL settings given, but security.protocol is %s: set security.protocol (--security-protocol) to SASL_PLAINTEXT or SASL_SSL", s.protocol)
		}
		return s, nil
	}
	if err := s.setSASL(mech, jaas, user, password, now); err != nil {
		return nil, err
	}
	return s, nil
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// setSASL builds the SASL mechanism.
func (s *clientSecurity) setSASL(mech, jaasText, user, password string, now time.Time) error {
	var module jaasModule
	if jaasText != "" {
		var err error
		if module, err = parseJAAS(jaasText); err != nil {
			return err
		}
	}
	if mech == "" {
		return fmt.Errorf("security.protocol %s needs sasl.mechanism (--sasl-mechanism): PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", s.protocol)
	}
	s.mechanism = mech
	wantModule := map[string]string{"PLAIN": plainModule, "SCRAM-SHA-256": scramModule, "SCRAM-SHA-512": scramModule, "OAUTHBEARER": oauthModule}[mech]
	switch {
	case mech == "GSSAPI":
		return errors.New("sasl.mechanism GSSAPI (Kerberos) is not supported: use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER")
	case wantModule == "":
		return fmt.Errorf("sasl.mechanism %q: want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", mech)
	case module.class != "" && module.class != wantModule:
		return fmt.Errorf("sasl.jaas.config uses %s, but sasl.mechanism %s needs %s", module.class, mech, wantModule)
	}
	if mech == "OAUTHBEARER" {
		return s.setOAuth(module, user, now)
	}
	for k := range module.options {
		if k != "username" && k != "password" {
			return fmt.Errorf("sasl.jaas.config: option %q of %s is not supported: give username and password", k, module.class)
		}
	}
	if user == "" {
		user = module.options["username"]
	}
	if password == "" {
		password = module.options["password"]
	}
	if user == "" || password == "" {
		return fmt.Errorf("SASL %s needs a user name and a password: set sasl.jaas.config=%s required username=\"...\" password=\"...\"; (or --sasl-username and %s)", mech, wantModule, saslPasswordEnv)
	}
	s.user = user
	switch mech {
	case "PLAIN":
		s.sasl = plain.Auth{User: user, Pass: password}.AsMechanism()
	case "SCRAM-SHA-256":
		s.sasl = scram.Auth{User: user, Pass: password}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		s.sasl = scram.Auth{User: user, Pass: password}.AsSha512Mechanism()
	}
	return nil
}

// setOAuth builds an unsecured JWT as Kafka's client does with
// OAuthBearerLoginModule's unsecuredLogin* options (its
// OAuthBearerUnsecuredLoginCallbackHandler): header {"alg":"none"},
// claims sub, iat, exp (iat + unsecuredLoginLifetimeSeconds, default
// 3600) and any unsecuredLoginStringClaim_<name>, and no signature.
func (s *clientSecurity) setOAuth(module jaasModule, subject string, now time.Time) error {
	claims := map[string]any{}
	lifetime := int64(3600)
	principalClaim := "sub"
	for k, v := range module.options {
		switch {
		case strings.HasPrefix(k, "unsecuredLoginStringClaim_") && len(k) > len("unsecuredLoginStringClaim_"):
			claims[strings.TrimPrefix(k, "unsecuredLoginStringClaim_")] = v
		case k == "unsecuredLoginLifetimeSeconds":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 || n > 1<<31 {
				return fmt.Errorf("sasl.jaas.config: unsecuredLoginLifetimeSeconds %q: want a positive number of seconds", v)
			}
			lifetime = n
		case k == "unsecuredLoginPrincipalClaimName":
			principalClaim = v
		default:
			return fmt.Errorf("sasl.jaas.config: option %q of %s is not supported: the CLI builds an unsecured token from unsecuredLoginStringClaim_sub (and other unsecuredLoginStringClaim_<name>, unsecuredLoginLifetimeSeconds); a token from an OAuth server is not supported", k, oauthModule)
		}
	}
	if subject != "" {
		claims[principalClaim] = subject
	}
	sub, _ := claims[principalClaim].(string)
	if sub == "" {
		return fmt.Errorf("OAUTHBEARER needs the token's subject: set sasl.jaas.config=%s required unsecuredLoginStringClaim_sub=\"NAME\"; (or --sasl-username)", oauthModule)
	}
	for _, reserved := range []string{"iat", "exp"} {
		if _, ok := claims[reserved]; ok {
			return fmt.Errorf("sasl.jaas.config: the %s claim is set from the time: use unsecuredLoginLifetimeSeconds", reserved)
		}
	}
	claims["iat"] = now.Unix()
	claims["exp"] = now.Unix() + lifetime
	token, err := unsecuredJWT(claims)
	if err != nil {
		return err
	}
	s.user = sub
	s.sasl = oauth.Auth{Token: token}.AsMechanism()
	return nil
}

// unsecuredJWT is the compact serialization of an unsigned JWT (RFC 7519
// section 6): base64url(header) "." base64url(claims) ".".
func unsecuredJWT(claims map[string]any) (string, error) {
	body, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"none"}`)) + "." + enc.EncodeToString(body) + ".", nil
}

// jaasModule is the one login module of a client's sasl.jaas.config.
type jaasModule struct {
	class   string
	flag    string
	options map[string]string
}

// parseJAAS parses a JAAS configuration entry as Kafka's clients accept
// it in sasl.jaas.config: exactly one
//
//	LoginModuleClass flag option=value ... ;
//
// where flag is required, requisite, sufficient or optional, and a value
// is a bare word or a double-quoted string (backslash escapes the next
// character).
func parseJAAS(text string) (jaasModule, error) {
	toks, err := jaasTokens(text)
	if err != nil {
		return jaasModule{}, err
	}
	if len(toks) < 3 || toks[len(toks)-1] != (jaasToken{text: ";"}) {
		return jaasModule{}, fmt.Errorf("sasl.jaas.config: want LoginModuleClass required option=\"value\" ... ; (ending with a semicolon)")
	}
	m := jaasModule{class: toks[0].text, flag: toks[1].text, options: map[string]string{}}
	if toks[0].quoted || toks[1].quoted {
		return jaasModule{}, errors.New("sasl.jaas.config: the login module class and its flag are not quoted")
	}
	switch m.flag {
	case "required", "requisite", "sufficient", "optional":
	default:
		return jaasModule{}, fmt.Errorf("sasl.jaas.config: login module flag %q: want required, requisite, sufficient or optional", m.flag)
	}
	rest := toks[2 : len(toks)-1]
	for len(rest) > 0 {
		if len(rest) < 3 || rest[0].quoted || rest[1] != (jaasToken{text: "="}) || rest[2].text == ";" && !rest[2].quoted || rest[2].text == "=" && !rest[2].quoted {
			if len(rest) > 0 && rest[0] == (jaasToken{text: ";"}) {
				return jaasModule{}, errors.New("sasl.jaas.config: one login module only (Kafka's clients take one)")
			}
			return jaasModule{}, fmt.Errorf("sasl.jaas.config: want option=value at %q", rest[0].text)
		}
		k := rest[0].text
		if _, dup := m.options[k]; dup {
			return jaasModule{}, fmt.Errorf("sasl.jaas.config: option %q given twice", k)
		}
		m.options[k] = rest[2].text
		rest = rest[3:]
	}
	return m, nil
}

type jaasToken struct {
	text   string
	quoted bool
}

// jaasTokens splits text into words, quoted strings, "=" and ";".
func jaasTokens(text string) ([]jaasToken, error) {
	var out []jaasToken
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '=' || c == ';':
			out = append(out, jaasToken{text: string(c)})
			i++
		case c == '"':
			var b strings.Builder
			i++
			for {
				if i >= len(text) {
					return nil, errors.New("sasl.jaas.config: a quoted value is not closed")
				}
				if text[i] == '\\' && i+1 < len(text) {
					b.WriteByte(text[i+1])
					i += 2
					continue
				}
				if text[i] == '"' {
					i++
					break
				}
				b.WriteByte(text[i])
				i++
			}
			out = append(out, jaasToken{text: b.String(), quoted: true})
		default:
			j := i
			for j < len(text) && !strings.ContainsRune(" \t\n\r=;\"", rune(text[j])) {
				j++
			}
			out = append(out, jaasToken{text: text[i:j]})
			i = j
		}
	}
	return out, nil
}

// securityError is a TLS handshake or a SASL authentication that failed,
// with the setting to look at.
type securityError struct {
	what string // "TLS handshake", "SASL SCRAM-SHA-512 authentication as alice"
	addr string
	err  error
	hint string
}

func (e *securityError) Error() string {
	if e.addr == "" {
		return fmt.Sprintf("%s failed: %v", e.what, e.err)
	}
	return fmt.Sprintf("%s with %s failed: %v", e.what, e.addr, e.err)
}

func (e *securityError) Unwrap() error { return e.err }

// isTLSError reports whether err comes from a TLS handshake or a TLS
// alert from the peer.
func isTLSError(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		header   tls.RecordHeaderError
		alert    tls.AlertError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	return errors.As(err, &verify) || errors.As(err, &header) || errors.As(err, &alert) ||
		errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		strings.Contains(err.Error(), "tls: ")
}

// explainTLS wraps a TLS failure with addr with its next step, given the
// client's security s.
func explainTLS(addr string, err error, s *clientSecurity) *securityError {
	if u := errors.Unwrap(err); u != nil && strings.HasPrefix(err.Error(), "unable to dial: ") {
		err = u // franz-go's wrapping says nothing more
	}
	e := &securityError{what: "TLS handshake", addr: addr, err: err}
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		header   tls.RecordHeaderError
	)
	msg := err.Error()
	switch {
	case errors.As(err, &unknown):
		e.hint = "The broker's certificate is signed by a CA this client does not trust: set ssl.truststore.location (or --ssl-truststore-location) to the file of the CA that signed it."
	case errors.As(err, &hostname):
		e.hint = "The broker's certificate is not for the host dialed: connect with a name or address it holds, or set ssl.endpoint.identification.algorithm= (empty) in --command-config to verify the certificate without its host name."
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		e.hint = "The broker's certificate has expired or is not valid yet: renew it (docs/security.md), or check this machine's clock."
	case errors.As(err, &header), errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		e.hint = "The broker did not speak TLS: this may be a PLAINTEXT or SASL_PLAINTEXT listener. Set security.protocol to match the listener, or connect to its SSL port."
	case strings.Contains(msg, "certificate required") && s.tls != nil && len(s.tls.Certificates) > 0:
		e.hint = "The broker requires a client certificate signed by a CA of its truststore; this client's (ssl.keystore.location) is not signed by one of them, so it was not sent. Use a certificate from the broker's CA."
	case strings.Contains(msg, "certificate required"):
		e.hint = "The broker requires a client certificate (ssl.client.auth=required): set ssl.keystore.location (or --ssl-keystore-location) to this client's certificate and key."
	case strings.Contains(msg, "bad certificate"), strings.Contains(msg, "unknown certificate authority"), strings.Contains(msg, "expired certificate"), strings.Contains(msg, "certificate unknown"):
		e.hint = "The broker refused this client's certificate: it must be signed by a CA in the broker's truststore and be valid now (set ssl.keystore.location)."
	default:
		e.hint = "Check the ssl.* settings of --command-config against the listener's (docs/security.md)."
	}
	return e
}

// explainSecurity turns err from the first exchange with the cluster
// into a *securityError when it is a TLS or SASL failure, else nil.
func explainSecurity(err error, tlsAddr string, tlsErr error, seeds []string, s *clientSecurity) error {
	if tlsErr != nil {
		return withHintOf(explainTLS(tlsAddr, tlsErr, s))
	}
	if err == nil {
		return nil
	}
	addr := strings.Join(seeds, ",")
	if s.tls != nil && isTLSError(err) {
		return withHintOf(explainTLS(addr, err, s))
	}
	_, closed := errors.AsType[*kgo.ErrFirstReadEOF](err)
	closed = closed || errors.Is(err, io.EOF) || strings.Contains(err.Error(), "invalid large response size")
	if s.sasl == nil {
		switch {
		case closed && s.tls == nil:
			return withHint(err, "The broker closed the connection at once: if this is an SSL or SASL listener, set security.protocol (--security-protocol or --command-config) to match it, with its ssl.* and sasl.* settings (docs/security.md).")
		case closed, errors.Is(err, kerr.IllegalSaslState), errors.Is(err, kerr.SaslAuthenticationFailed):
			return withHint(err, "The listener may require SASL: set security.protocol=SASL_SSL (or SASL_PLAINTEXT), sasl.mechanism and sasl.jaas.config in --command-config (docs/security.md).")
		}
		return nil
	}
	what := fmt.Sprintf("SASL %s authentication as %q", s.mechanism, s.user)
	switch {
	case closed:
		return withHintOf(&securityError{what: what, addr: addr, err: fmt.Errorf("the broker closed the connection: %w", err),
			hint: "Check the user name and password (sasl.jaas.config, --sasl-username, " + saslPasswordEnv + "), that the user exists for " + s.mechanism + ", and that the listener's security.protocol is " + s.protocol + "."})
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return withHintOf(&securityError{what: what, addr: addr, err: err, hint: "Check the user name and password (sasl.jaas.config, --sasl-username, " + saslPasswordEnv + "), and that the user exists for this mechanism ('strata users list')."})
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		return withHintOf(&securityError{what: what, addr: addr, err: err, hint: "The listener does not enable " + s.mechanism + ": set sasl.mechanism to one of its sasl.enabled.mechanisms."})
	case errors.Is(err, kerr.IllegalSaslState), strings.Contains(err.Error(), "sasl"), strings.Contains(err.Error(), "SASL"):
		return withHintOf(&securityError{what: what, addr: addr, err: err, hint: "Check that the listener's security.protocol is " + s.protocol + " and that it enables " + s.mechanism + "."})
	}
	return nil
}

// withHintOf makes a securityError an error with its hint.
func withHintOf(e *securityError) error { return withHint(e, e.hint) }

// envOrEmpty is os.Getenv; a variable so tests can replace it.
var envOrEmpty = os.Getenv
