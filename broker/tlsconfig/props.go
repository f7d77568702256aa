package tlsconfig

import (
	"crypto/tls"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// This file reads the ssl.* settings that are not stores: protocols,
// cipher suites, client authentication, host name verification.

// props are Kafka properties, already resolved for one listener or
// client.
type props map[string]string

func (p props) get(k string) string { return strings.TrimSpace(p[k]) }

// serverKeys and clientKeys are the ssl.* settings each side reads.
var (
	storeKeys = []string{
		"ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password", "ssl.key.password",
		"ssl.keystore.certificate.chain", "ssl.keystore.key",
		"ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password", "ssl.truststore.certificates",
		"ssl.enabled.protocols", "ssl.protocol", "ssl.cipher.suites",
	}
	serverKeys = append(slices.Clone(storeKeys), "ssl.client.auth", "ssl.principal.mapping.rules", "ssl.endpoint.identification.algorithm")
	clientKeys = append(slices.Clone(storeKeys), "ssl.endpoint.identification.algorithm")
	// jvmKeys name the JVM's implementation of TLS; Go's has no such
	// choice, and they are accepted and ignored.
	jvmKeys = []string{"ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.secure.random.implementation", "ssl.provider"}
)

// checkKeys refuses ssl.* keys that are not in known.
func (p props) checkKeys(known []string) error {
	var unknown []string
	for k := range p {
		if !strings.HasPrefix(k, "ssl.") || slices.Contains(known, k) || slices.Contains(jvmKeys, k) {
			continue
		}
		unknown = append(unknown, k)
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	if slices.Contains(unknown, "ssl.engine.factory.class") {
		return fmt.Errorf("tlsconfig: ssl.engine.factory.class is a Java class, which Strata cannot load: remove it and use the ssl.keystore.* and ssl.truststore.* settings")
	}
	return fmt.Errorf("tlsconfig: unknown setting %s: the ssl.* settings are %s", strings.Join(unknown, ", "), strings.Join(known, ", "))
}

// protocolVersions maps Kafka's protocol names to TLS versions.
var protocolVersions = map[string]uint16{"TLSv1.2": tls.VersionTLS12, "TLSv1.3": tls.VersionTLS13}

// versions returns the lowest and highest TLS version of
// ssl.enabled.protocols (default TLSv1.2,TLSv1.3) after checking
// ssl.protocol.
func (p props) versions() (lo, hi uint16, err error) {
	switch proto := p.get("ssl.protocol"); proto {
	case "", "TLS", "TLSv1.2", "TLSv1.3":
		// ssl.protocol picks the JVM's SSLContext; with Go, only
		// ssl.enabled.protocols limits the versions.
	default:
		return 0, 0, fmt.Errorf("tlsconfig: ssl.protocol %q: want TLSv1.3 or TLSv1.2 (older protocols are not offered)", proto)
	}
	list := p.get("ssl.enabled.protocols")
	if list == "" {
		return tls.VersionTLS12, tls.VersionTLS13, nil
	}
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		v, ok := protocolVersions[name]
		if !ok {
			return 0, 0, fmt.Errorf("tlsconfig: ssl.enabled.protocols: %q is not offered: want TLSv1.2 and/or TLSv1.3 (TLSv1, TLSv1.1 and SSL are insecure and refused)", name)
		}
		if lo == 0 || v < lo {
			lo = v
		}
		hi = max(hi, v)
	}
	if lo == 0 {
		return 0, 0, fmt.Errorf("tlsconfig: ssl.enabled.protocols is empty: want TLSv1.2 and/or TLSv1.3")
	}
	return lo, hi, nil
}

// cipherSuites returns the suites of ssl.cipher.suites (IANA names), nil
// for Go's default. TLS 1.3's suites are accepted but change nothing:
// Go offers all of them and does not let them be chosen.
func (p props) cipherSuites() ([]uint16, error) {
	list := p.get("ssl.cipher.suites")
	if list == "" {
		return nil, nil
	}
	byName := map[string]*tls.CipherSuite{}
	var names []string
	for _, cs := range tls.CipherSuites() {
		byName[cs.Name] = cs
		names = append(names, cs.Name)
	}
	var out []uint16
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		cs, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("tlsconfig: ssl.cipher.suites: %q is not a cipher suite Strata offers; use IANA names among %s", name, strings.Join(names, ", "))
		}
		out = append(out, cs.ID)
	}
	return out, nil
}

// clientAuth reads ssl.client.auth (default none).
func (p props) clientAuth() (tls.ClientAuthType, error) {
	switch v := strings.ToLower(p.get("ssl.client.auth")); v {
	case "", "none":
		return tls.NoClientCert, nil
	case "requested":
		return tls.VerifyClientCertIfGiven, nil
	case "required":
		return tls.RequireAndVerifyClientCert, nil
	default:
		return 0, fmt.Errorf("tlsconfig: ssl.client.auth %q: want none, requested or required", v)
	}
}

// verifyHostname reads ssl.endpoint.identification.algorithm: "https"
// (the default) verifies the peer's host name, "" does not.
func (p props) verifyHostname() (bool, error) {
	v, set := p["ssl.endpoint.identification.algorithm"]
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "https":
		return true, nil
	case "":
		return !set, nil
	default:
		return false, fmt.Errorf("tlsconfig: ssl.endpoint.identification.algorithm %q: want https (verify the host name) or empty (do not)", v)
	}
}
