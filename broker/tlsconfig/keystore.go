package tlsconfig

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"software.sslmate.com/src/go-pkcs12"
)

// This file reads keystores (this side's certificate chain and private
// key) and truststores (the CAs that verify the peer) from Kafka's
// ssl.keystore.* and ssl.truststore.* settings: a file of type PEM or
// PKCS12, or inline PEM. JKS (and JCEKS) stores are refused with the
// keytool command that converts them.

// Store types, as ssl.keystore.type and ssl.truststore.type name them.
const (
	TypePEM    = "PEM"
	TypePKCS12 = "PKCS12"
	TypeJKS    = "JKS"
)

// maxStoreBytes bounds a keystore or truststore file.
const maxStoreBytes = 16 << 20

// storeKind names the two stores in errors: "keystore", "truststore".
type storeKind string

// readStoreFile reads a store file and settles its type: typ as given,
// or found from the content when typ is "" (PEM text, else PKCS12).
func readStoreFile(kind storeKind, path, typ string) ([]byte, string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, "", fmt.Errorf("tlsconfig: ssl.%s.location: %w", kind, err)
	}
	if fi.Size() > maxStoreBytes {
		return nil, "", fmt.Errorf("tlsconfig: ssl.%s.location %s: %d bytes, more than a store has (%d)", kind, path, fi.Size(), maxStoreBytes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("tlsconfig: ssl.%s.location: %w", kind, err)
	}
	if isJKS(data) {
		return nil, "", jksError(kind, path)
	}
	switch strings.ToUpper(typ) {
	case "":
		if bytes.Contains(data, []byte("-----BEGIN ")) {
			return data, TypePEM, nil
		}
		return data, TypePKCS12, nil
	case TypePEM, TypePKCS12:
		return data, strings.ToUpper(typ), nil
	case TypeJKS, "JCEKS":
		return nil, "", jksError(kind, path)
	default:
		return nil, "", fmt.Errorf("tlsconfig: ssl.%s.type %q: want PEM or PKCS12", kind, typ)
	}
}

// isJKS reports whether data begins with the magic number of a Java
// KeyStore (JKS 0xFEEDFEED, JCEKS 0xCECECECE).
func isJKS(data []byte) bool {
	return len(data) >= 4 && (bytes.Equal(data[:4], []byte{0xfe, 0xed, 0xfe, 0xed}) || bytes.Equal(data[:4], []byte{0xce, 0xce, 0xce, 0xce}))
}

func jksError(kind storeKind, path string) error {
	return fmt.Errorf("tlsconfig: ssl.%s.location %s is a Java KeyStore (JKS), which Strata does not read: convert it with 'keytool -importkeystore -srckeystore %s -destkeystore %s.p12 -deststoretype PKCS12' and set ssl.%s.type=PKCS12 (or use PEM)", kind, path, path, path, kind)
}

// loadKeystore returns the certificate chain and key that props give,
// nil if they name no keystore, and the files read.
func loadKeystore(p props) (*tls.Certificate, []string, error) {
	loc := p.get("ssl.keystore.location")
	chain, key := p.get("ssl.keystore.certificate.chain"), p.get("ssl.keystore.key")
	typ := p.get("ssl.keystore.type")
	switch {
	case loc != "" && (chain != "" || key != ""):
		return nil, nil, errors.New("tlsconfig: set either ssl.keystore.location or ssl.keystore.certificate.chain and ssl.keystore.key, not both")
	case loc == "" && chain == "" && key == "":
		return nil, nil, nil
	case loc == "":
		if chain == "" || key == "" {
			return nil, nil, errors.New("tlsconfig: ssl.keystore.certificate.chain and ssl.keystore.key go together: set both")
		}
		if typ != "" && !strings.EqualFold(typ, TypePEM) {
			return nil, nil, fmt.Errorf("tlsconfig: inline ssl.keystore.certificate.chain and ssl.keystore.key need ssl.keystore.type=PEM, not %q", typ)
		}
		c, err := pemKeyPair([]byte(chain), []byte(key), p.get("ssl.key.password"), "ssl.keystore.certificate.chain", "ssl.keystore.key")
		return c, nil, err
	}
	data, typ, err := readStoreFile("keystore", loc, typ)
	if err != nil {
		return nil, nil, err
	}
	var c *tls.Certificate
	if typ == TypePEM {
		c, err = pemKeyPair(data, data, p.get("ssl.key.password"), loc, loc)
	} else {
		c, err = pkcs12KeyPair(data, p.get("ssl.keystore.password"), p.get("ssl.key.password"), loc)
	}
	return c, []string{loc}, err
}

// pemKeyPair reads a certificate chain (leaf first) from chainPEM and a
// private key from keyPEM; the names are for errors.
func pemKeyPair(chainPEM, keyPEM []byte, keyPassword, chainName, keyName string) (*tls.Certificate, error) {
	var certs [][]byte
	for rest := chainPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			certs = append(certs, b.Bytes)
		}
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("tlsconfig: %s: no PEM CERTIFICATE block", chainName)
	}
	var priv crypto.PrivateKey
	for rest := keyPEM; priv == nil; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, fmt.Errorf("tlsconfig: %s: no PEM private key block (PRIVATE KEY, ENCRYPTED PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)", keyName)
		}
		var err error
		switch b.Type {
		case "ENCRYPTED PRIVATE KEY":
			if keyPassword == "" {
				return nil, fmt.Errorf("tlsconfig: %s: the private key is encrypted: set ssl.key.password", keyName)
			}
			priv, err = decryptPKCS8(b.Bytes, keyPassword)
		case "PRIVATE KEY":
			priv, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			if _, enc := b.Headers["Proc-Type"]; enc {
				return nil, fmt.Errorf("tlsconfig: %s: a legacy encrypted PEM key (Proc-Type header) is not supported: convert it with 'openssl pkcs8 -topk8 -v2 aes-256-cbc'", keyName)
			}
			priv, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			if _, enc := b.Headers["Proc-Type"]; enc {
				return nil, fmt.Errorf("tlsconfig: %s: a legacy encrypted PEM key (Proc-Type header) is not supported: convert it with 'openssl pkcs8 -topk8 -v2 aes-256-cbc'", keyName)
			}
			priv, err = x509.ParseECPrivateKey(b.Bytes)
		default:
			continue
		}
		if err != nil {
			if errors.Is(err, ErrKeyPassword) {
				return nil, fmt.Errorf("%w (%s)", err, keyName)
			}
			return nil, fmt.Errorf("tlsconfig: %s: private key: %w", keyName, err)
		}
	}
	return keyPair(certs, priv, chainName)
}

// pkcs12KeyPair reads a PKCS12 keystore. Its key must be encrypted with
// the store's password (keytool writes PKCS12 stores so); a different
// ssl.key.password is tried when the store's does not open the key.
func pkcs12KeyPair(data []byte, storePassword, keyPassword, name string) (*tls.Certificate, error) {
	priv, leaf, cas, err := pkcs12.DecodeChain(data, storePassword)
	if err != nil && keyPassword != "" && keyPassword != storePassword {
		priv, leaf, cas, err = pkcs12.DecodeChain(data, keyPassword)
	}
	if err != nil {
		if errors.Is(err, pkcs12.ErrIncorrectPassword) {
			return nil, fmt.Errorf("tlsconfig: PKCS12 keystore %s: wrong ssl.keystore.password", name)
		}
		return nil, fmt.Errorf("tlsconfig: PKCS12 keystore %s: %w (a keystore holds one private key and its certificate chain)", name, err)
	}
	certs := [][]byte{leaf.Raw}
	for _, c := range cas {
		// keytool keeps the CA both in the chain and as a trusted
		// entry: send it once.
		if !slices.ContainsFunc(certs, func(b []byte) bool { return bytes.Equal(b, c.Raw) }) {
			certs = append(certs, c.Raw)
		}
	}
	return keyPair(certs, priv, name)
}

// keyPair checks that the leaf certificate certs[0] is for priv.
func keyPair(certs [][]byte, priv crypto.PrivateKey, name string) (*tls.Certificate, error) {
	leaf, err := x509.ParseCertificate(certs[0])
	if err != nil {
		return nil, fmt.Errorf("tlsconfig: %s: certificate: %w", name, err)
	}
	signer, ok := priv.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("tlsconfig: %s: private key of type %T cannot sign", name, priv)
	}
	pub, ok := leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(signer.Public()) {
		return nil, fmt.Errorf("tlsconfig: %s: the private key does not belong to the first certificate (%s)", name, leaf.Subject)
	}
	for i, der := range certs[1:] {
		if _, err := x509.ParseCertificate(der); err != nil {
			return nil, fmt.Errorf("tlsconfig: %s: certificate %d of the chain: %w", name, i+2, err)
		}
	}
	return &tls.Certificate{Certificate: certs, PrivateKey: priv, Leaf: leaf}, nil
}

// loadTruststore returns the CAs that props give, nil if they name no
// truststore, and the files read.
func loadTruststore(p props) (*x509.CertPool, []string, error) {
	loc, inline := p.get("ssl.truststore.location"), p.get("ssl.truststore.certificates")
	typ := p.get("ssl.truststore.type")
	var certs []*x509.Certificate
	var files []string
	switch {
	case loc != "" && inline != "":
		return nil, nil, errors.New("tlsconfig: set either ssl.truststore.location or ssl.truststore.certificates, not both")
	case loc == "" && inline == "":
		return nil, nil, nil
	case inline != "":
		if typ != "" && !strings.EqualFold(typ, TypePEM) {
			return nil, nil, fmt.Errorf("tlsconfig: inline ssl.truststore.certificates need ssl.truststore.type=PEM, not %q", typ)
		}
		var err error
		if certs, err = pemCertificates([]byte(inline), "ssl.truststore.certificates"); err != nil {
			return nil, nil, err
		}
	default:
		data, typ, err := readStoreFile("truststore", loc, typ)
		if err != nil {
			return nil, nil, err
		}
		files = []string{loc}
		if typ == TypePEM {
			certs, err = pemCertificates(data, loc)
		} else {
			certs, err = pkcs12Certificates(data, p.get("ssl.truststore.password"), loc)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, files, nil
}

func pemCertificates(data []byte, name string) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("tlsconfig: %s: certificate %d: %w", name, len(out)+1, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("tlsconfig: truststore %s: no PEM CERTIFICATE block", name)
	}
	return out, nil
}

// pkcs12Certificates reads the certificates of a PKCS12 truststore. As
// in Java, only certificates marked as trust anchors count: keytool
// marks them (and openssl 3.2 on with -jdktrust anyExtendedKeyUsage);
// a store of unmarked certificates is refused with what to do.
func pkcs12Certificates(data []byte, password, name string) ([]*x509.Certificate, error) {
	certs, err := pkcs12.DecodeTrustStore(data, password)
	switch {
	case errors.Is(err, pkcs12.ErrIncorrectPassword):
		return nil, fmt.Errorf("tlsconfig: PKCS12 truststore %s: wrong or missing ssl.truststore.password", name)
	case err != nil && strings.Contains(err.Error(), "not marked as trusted"):
		return nil, fmt.Errorf("tlsconfig: PKCS12 truststore %s holds certificates not marked as trusted (as openssl before 3.2 writes them): make it with 'keytool -importcert -alias ca -file ca.pem -keystore %s -storetype PKCS12', or use the CA's PEM file with ssl.truststore.type=PEM", name, name)
	case err != nil:
		return nil, fmt.Errorf("tlsconfig: PKCS12 truststore %s: %w", name, err)
	case len(certs) == 0:
		return nil, fmt.Errorf("tlsconfig: PKCS12 truststore %s holds no certificate", name)
	}
	return certs, nil
}
