// Package tlsconfig builds crypto/tls configurations from Kafka's ssl.*
// settings, for the broker's SSL and SASL_SSL listeners (NewServer), for
// its connections to other brokers (Server.ClientConfig), and for
// clients such as the strata CLI (NewClient). It reads the settings as a
// plain map of Kafka property names already resolved for one listener
// (listener.name.<name>.ssl.* applied by the caller).
//
// What it reads:
//
//	setting                                 values
//	ssl.keystore.location / .type           a PEM (key and chain) or PKCS12 file;
//	                                        JKS refused with the keytool command
//	ssl.keystore.password, ssl.key.password PKCS12 password; PEM key encryption
//	                                        (PKCS#8 PBES2: PBKDF2, AES-CBC, 3DES)
//	ssl.keystore.certificate.chain / .key   inline PEM instead of a file
//	ssl.truststore.location / .type         PEM or PKCS12 CAs
//	ssl.truststore.password / .certificates PKCS12 password; inline PEM
//	ssl.client.auth                         none, requested, required
//	ssl.enabled.protocols, ssl.protocol     TLSv1.2, TLSv1.3 (older refused)
//	ssl.cipher.suites                       IANA names of Go's secure suites;
//	                                        TLS 1.3 suites cannot be chosen in Go
//	ssl.endpoint.identification.algorithm   https (verify the host) or empty
//	ssl.principal.mapping.rules             DEFAULT, RULE:pattern/replacement/[LU]
//	ssl.allow.dn.changes, .san.changes      what a reload may change
//
// A Server swaps its certificates on Reload or when its files change
// (Watch): each new handshake takes the configuration loaded last
// through GetConfigForClient, so connections already open are not
// touched, and a new store that does not load or fails the checks is
// refused with the old one kept. Principal maps a verified client
// certificate's subject, printed as Kafka prints it (RFC 2253), to
// "User:<name>".
package tlsconfig

// Settings lists every ssl.* setting NewServer reads; ClientSettings
// those NewClient reads. Sensitive reports the ones whose values are
// secrets, which a DescribeConfigs answer or a log line must not show.
var (
	Settings       = append(append([]string{}, serverKeys...), "ssl.allow.dn.changes", "ssl.allow.san.changes")
	ClientSettings = append([]string{}, clientKeys...)
)

// Sensitive reports whether setting k holds a secret: a password or an
// inline private key.
func Sensitive(k string) bool {
	switch k {
	case "ssl.keystore.password", "ssl.key.password", "ssl.truststore.password", "ssl.keystore.key":
		return true
	}
	return false
}
