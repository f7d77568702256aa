package broker

import (
	"fmt"
	"strings"

	"github.com/stratastream/strata/broker/sasl"
)

// saslSettings configure SASL on SASL_PLAINTEXT and SASL_SSL listeners
// (broker/sasl reads them, listener-resolved: Config.ListenerProperties).
// Each may be given per listener, listener.name.<name>.<setting>; the
// JAAS and callback settings also per mechanism,
// listener.name.<name>.<mechanism>.<setting>.
var saslSettings = []setting{
	{name: "sasl.enabled.mechanisms", typ: typeList, def: "SCRAM-SHA-256,SCRAM-SHA-512", perListener: true, check: checkMechanisms,
		doc: "The SASL mechanisms a SASL listener offers, of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER (GSSAPI is not served, so Kafka's GSSAPI is not ours to offer). SCRAM users are managed with strata users or AlterUserScramCredentials."},
	{name: "sasl.jaas.config", typ: typeString, unset: "none", perListener: true, perMechanism: true, sensitive: true,
		doc: "JAAS login configuration, as Kafka writes it: for PLAIN, org.apache.kafka.common.security.plain.PlainLoginModule required user_<name>=\"<password>\" ...; (listener.name.<l>.plain.sasl.jaas.config); for OAUTHBEARER's unsecured validator, OAuthBearerLoginModule with its unsecuredValidator* options. Never shown by DescribeConfigs or in errors."},
	{name: "sasl.server.callback.handler.class", typ: typeString, unset: "the mechanism's own", perListener: true, perMechanism: true,
		doc: "Given as listener.name.<l>.oauthbearer.sasl.server.callback.handler.class: org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler (JWT signed by keys from sasl.oauthbearer.jwks.endpoint.url) or org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler (unsigned tokens: development only)."},
	{name: "sasl.mechanism.inter.broker.protocol", typ: typeString, def: "GSSAPI",
		doc: "Accepted for Kafka configs; not used: brokers reach each other over the replication port (gRPC), which runs over mutual TLS when the inter-broker listener uses TLS, never SASL."},
	{name: "sasl.oauthbearer.jwks.endpoint.url", typ: typeString, unset: "none (the unsecured validator)", perListener: true,
		doc: "Where OAUTHBEARER's validator fetches the issuer's signing keys (a JWKS): https://..., or file:// for a local copy."},
	{name: "sasl.oauthbearer.jwks.endpoint.refresh.ms", typ: typeLong, def: "3600000", valid: between(1000, maxMs), perListener: true,
		doc: "How often the JWKS is fetched again; a token signed by an unknown key fetches it sooner."},
	{name: "sasl.oauthbearer.expected.audience", typ: typeList, unset: "any audience", perListener: true,
		doc: "Audiences (aud claim) an OAUTHBEARER token must name one of."},
	{name: "sasl.oauthbearer.expected.issuer", typ: typeString, unset: "any issuer", perListener: true,
		doc: "The issuer (iss claim) an OAUTHBEARER token must have."},
	{name: "sasl.oauthbearer.clock.skew.seconds", typ: typeLong, def: "30", valid: between(0, 3600), perListener: true,
		doc: "Allowed difference between the issuer's clock and the broker's in OAUTHBEARER token times."},
	{name: "sasl.oauthbearer.sub.claim.name", typ: typeString, def: "sub", perListener: true,
		doc: "The claim of an OAUTHBEARER token that names the principal."},
	{name: "sasl.oauthbearer.scope.claim.name", typ: typeString, def: "scope", perListener: true,
		doc: "The claim of an OAUTHBEARER token that holds its scopes."},
}

// checkMechanisms refuses mechanisms broker/sasl does not serve.
func checkMechanisms(v string) error {
	n := 0
	for m := range strings.SplitSeq(v, ",") {
		m = strings.TrimSpace(m)
		switch m {
		case "":
			continue
		case sasl.MechanismPlain, sasl.MechanismScramSHA256, sasl.MechanismScramSHA512, sasl.MechanismOAuthBearer:
			n++
		default:
			return fmt.Errorf("mechanism %q is not served (want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER)", m)
		}
	}
	if n == 0 {
		return fmt.Errorf("names no mechanism")
	}
	return nil
}
