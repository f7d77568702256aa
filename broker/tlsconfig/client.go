package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"maps"
)

// NewClient builds the TLS configuration of a client (the CLI, a broker
// dialing another) from Kafka's client ssl.* settings: the truststore
// that verifies the server (the system's CAs without one), a keystore
// for mutual TLS (optional), ssl.enabled.protocols, ssl.cipher.suites
// and ssl.endpoint.identification.algorithm: "https" (the default)
// verifies that the server's certificate is for the host dialed; ""
// verifies its chain but not its host name. The caller (or franz-go's
// dialer, or gRPC's) sets ServerName to the host dialed.
func NewClient(properties map[string]string) (*tls.Config, error) {
	p := props(maps.Clone(properties))
	if err := p.checkKeys(clientKeys); err != nil {
		return nil, err
	}
	lo, hi, err := p.versions()
	if err != nil {
		return nil, err
	}
	suites, err := p.cipherSuites()
	if err != nil {
		return nil, err
	}
	verifyHost, err := p.verifyHostname()
	if err != nil {
		return nil, err
	}
	cert, _, err := loadKeystore(p)
	if err != nil {
		return nil, err
	}
	roots, _, err := loadTruststore(p)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{RootCAs: roots, MinVersion: lo, MaxVersion: hi, CipherSuites: suites}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	if !verifyHost {
		if roots == nil {
			if roots, err = x509.SystemCertPool(); err != nil {
				return nil, fmt.Errorf("tlsconfig: the system's CAs: %w; set ssl.truststore.location", err)
			}
		}
		cfg.InsecureSkipVerify = true // the chain is verified below, without the host name
		cfg.VerifyConnection = func(cs tls.ConnectionState) error { return verifyChain(cs, roots, "") }
	}
	return cfg, nil
}

// verifyChain verifies the server's chain against roots, and for host
// unless it is "", as crypto/tls does.
func verifyChain(cs tls.ConnectionState, roots *x509.CertPool, host string) error {
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("tlsconfig: the server sent no certificate")
	}
	opts := x509.VerifyOptions{Roots: roots, DNSName: host, Intermediates: x509.NewCertPool()}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(opts)
	return err
}
