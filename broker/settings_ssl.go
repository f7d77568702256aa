package broker

import (
	"math"
	"time"
)

// sslSettings configure TLS on SSL and SASL_SSL listeners (broker/tlsconfig
// reads them, listener-resolved: Config.ListenerProperties) and, through
// the inter-broker listener's, mutual TLS on the replication port. Each
// may be given per listener, listener.name.<name>.<setting>. Their
// defaults are tlsconfig's, said in the unset texts.
var sslSettings = []setting{
	{name: "ssl.keystore.location", typ: typeString, unset: "none (required on a TLS listener, or the inline chain and key)", perListener: true,
		doc: "The broker's key and certificate chain: a PEM file (key and chain) or a PKCS12 file. JKS is refused: convert it with keytool -importkeystore -deststoretype PKCS12."},
	{name: "ssl.keystore.type", typ: typeString, unset: "found from the file (PEM or PKCS12)", perListener: true, enum: []string{"PEM", "PKCS12", "pem", "pkcs12"},
		doc: "The keystore's format: PEM or PKCS12."},
	{name: "ssl.keystore.password", typ: typeString, unset: "none", perListener: true, sensitive: true,
		doc: "The PKCS12 keystore's password."},
	{name: "ssl.key.password", typ: typeString, unset: "none", perListener: true, sensitive: true,
		doc: "The password of an encrypted PEM key (PKCS#8) or of the key in a PKCS12 keystore."},
	{name: "ssl.keystore.certificate.chain", typ: typeString, unset: "none", perListener: true,
		doc: "The certificate chain as inline PEM, with ssl.keystore.key, instead of ssl.keystore.location."},
	{name: "ssl.keystore.key", typ: typeString, unset: "none", perListener: true, sensitive: true,
		doc: "The private key as inline PEM (PKCS#8, encrypted with ssl.key.password or not)."},
	{name: "ssl.truststore.location", typ: typeString, unset: "none (the system's CAs)", perListener: true,
		doc: "The CAs that client certificates (and, on the replication port, other brokers' certificates) must chain to: a PEM or PKCS12 file."},
	{name: "ssl.truststore.type", typ: typeString, unset: "found from the file (PEM or PKCS12)", perListener: true, enum: []string{"PEM", "PKCS12", "pem", "pkcs12"},
		doc: "The truststore's format: PEM or PKCS12."},
	{name: "ssl.truststore.password", typ: typeString, unset: "none", perListener: true, sensitive: true,
		doc: "The PKCS12 truststore's password."},
	{name: "ssl.truststore.certificates", typ: typeString, unset: "none", perListener: true,
		doc: "The trusted CAs as inline PEM, instead of ssl.truststore.location."},
	{name: "ssl.client.auth", typ: typeString, unset: "none", perListener: true, enum: []string{"none", "requested", "required"},
		doc: "Whether clients of an SSL listener present certificates: none, requested (verified if presented) or required. A verified certificate's subject is the principal on SSL listeners. The replication port always requires one."},
	{name: "ssl.enabled.protocols", typ: typeList, unset: "TLSv1.2,TLSv1.3", perListener: true,
		doc: "The TLS versions served, of TLSv1.2 and TLSv1.3 (older ones are refused)."},
	{name: "ssl.protocol", typ: typeString, unset: "TLSv1.3", perListener: true,
		doc: "Accepted for Kafka configs: TLS, TLSv1.2 or TLSv1.3; ssl.enabled.protocols decides."},
	{name: "ssl.cipher.suites", typ: typeList, unset: "Go's secure suites", perListener: true,
		doc: "The TLS 1.2 cipher suites, by IANA name (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, ...); Go does not let TLS 1.3 suites be chosen."},
	{name: "ssl.endpoint.identification.algorithm", typ: typeString, unset: "https", perListener: true,
		doc: "https: a broker dialing another checks its certificate is for the host it dials; empty: the chain is checked, not the host."},
	{name: "ssl.principal.mapping.rules", typ: typeString, unset: "the whole subject (rule DEFAULT)", perListener: true,
		doc: "How a client certificate's subject becomes a principal: Kafka's rules, comma-separated, each RULE:pattern/replacement/[LU] or the catch-all that keeps the whole subject as RFC 2253 prints it (CN=alice,OU=eng,O=Strata). A subject no rule maps is refused."},
	{name: "ssl.allow.dn.changes", typ: typeBoolean, unset: "false", perListener: true,
		doc: "Whether a reloaded keystore may have another subject."},
	{name: "ssl.allow.san.changes", typ: typeBoolean, unset: "false", perListener: true,
		doc: "Whether a reloaded keystore may have other subject alternative names."},
	{name: "ssl.keymanager.algorithm", typ: typeString, unset: "none", perListener: true,
		doc: "Accepted for Kafka configs, not used: a Java TLS implementation's name."},
	{name: "ssl.trustmanager.algorithm", typ: typeString, unset: "none", perListener: true,
		doc: "Accepted for Kafka configs, not used: a Java TLS implementation's name."},
	{name: "ssl.secure.random.implementation", typ: typeString, unset: "none", perListener: true,
		doc: "Accepted for Kafka configs, not used: a Java random source's name."},
	{name: "ssl.provider", typ: typeString, unset: "none", perListener: true,
		doc: "Accepted for Kafka configs, not used: a Java security provider's name."},
	{name: "strata.ssl.reload.check.interval.ms", typ: typeLong, def: "10000", valid: between(0, math.MaxInt32),
		field: func(c *Config) any { return &c.SSLReloadCheckInterval }, unit: time.Millisecond,
		doc: "How often the keystore and truststore files of TLS listeners are checked for changes; changed files are loaded for new connections (a file that does not load is refused and the old certificates kept). 0: only IncrementalAlterConfigs on the broker reloads them."},
}
