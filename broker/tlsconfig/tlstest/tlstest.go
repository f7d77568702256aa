// Package tlstest makes certificates for tests at test time, with
// crypto/x509: a CA, server and client certificates signed by it, and
// writers for the keystore and truststore files that tlsconfig reads
// (PEM and PKCS12). No private key is ever committed: each test run
// makes its own. Keys are ECDSA P-256, which is quick to generate.
package tlstest

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"software.sslmate.com/src/go-pkcs12"
)

// CA is a certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// Cert is a certificate issued by a CA, with its key.
type Cert struct {
	Cert  *x509.Certificate
	Key   crypto.Signer
	Chain []*x509.Certificate // the certificate, then the CA's
}

var serial atomic.Int64

func init() { serial.Store(time.Now().UnixNano()) }

// nextSerial returns a serial number no other certificate of this
// process has.
func nextSerial() *big.Int { return big.NewInt(serial.Add(1)) }

func newKey(t testing.TB) crypto.Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// NewCA makes a self-signed CA named cn, valid from an hour ago for a day.
func NewCA(t testing.TB, cn string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"Strata tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: c, Key: key}
}

// Options describe a certificate to issue.
type Options struct {
	// Subject is the certificate's subject.
	Subject pkix.Name
	// Hosts are its subject alternative names: IP addresses and DNS
	// names.
	Hosts []string
	// NotBefore and NotAfter default to an hour ago and a day from now.
	NotBefore, NotAfter time.Time
}

// Issue makes a certificate for both server and client authentication
// (a broker uses one certificate both ways).
func (ca *CA) Issue(t testing.TB, o Options) *Cert {
	t.Helper()
	key := newKey(t)
	if o.NotBefore.IsZero() {
		o.NotBefore = time.Now().Add(-time.Hour)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = time.Now().Add(24 * time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(),
		Subject:      o.Subject,
		NotBefore:    o.NotBefore,
		NotAfter:     o.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &Cert{Cert: c, Key: key, Chain: []*x509.Certificate{c, ca.Cert}}
}

// Server issues a server certificate for hosts (IPs or DNS names), with
// the first host as its common name.
func (ca *CA) Server(t testing.TB, hosts ...string) *Cert {
	t.Helper()
	cn := "server"
	if len(hosts) > 0 {
		cn = hosts[0]
	}
	return ca.Issue(t, Options{Subject: pkix.Name{CommonName: cn, Organization: []string{"Strata"}}, Hosts: hosts})
}

// Client issues a client certificate with subject.
func (ca *CA) Client(t testing.TB, subject pkix.Name) *Cert {
	t.Helper()
	return ca.Issue(t, Options{Subject: subject})
}

// Expired issues a certificate for hosts that expired an hour ago.
func (ca *CA) Expired(t testing.TB, subject pkix.Name, hosts ...string) *Cert {
	t.Helper()
	return ca.Issue(t, Options{Subject: subject, Hosts: hosts, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
}

// CertPEM is the certificate chain in PEM, the certificate first.
func (c *Cert) CertPEM() []byte {
	var out []byte
	for _, x := range c.Chain {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: x.Raw})...)
	}
	return out
}

// KeyPEM is the private key in PKCS#8 PEM; encrypted with password
// (PBES2, PBKDF2-HMAC-SHA256, AES-256-CBC) unless password is "".
func (c *Cert) KeyPEM(t testing.TB, password string) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(c.Key)
	if err != nil {
		t.Fatal(err)
	}
	if password == "" {
		return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	}
	return pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: EncryptPKCS8(t, der, password)})
}

// PEM is the CA's certificate in PEM.
func (ca *CA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// WritePEMKeystore writes a PEM keystore (key, then chain) to path: the
// file ssl.keystore.type=PEM reads, with ssl.key.password = password.
func (c *Cert) WritePEMKeystore(t testing.TB, path, password string) string {
	t.Helper()
	writeFile(t, path, append(c.KeyPEM(t, password), c.CertPEM()...))
	return path
}

// WritePKCS12 writes a PKCS12 keystore to path, protected by password.
func (c *Cert) WritePKCS12(t testing.TB, path, password string) string {
	t.Helper()
	data, err := pkcs12.Modern.Encode(c.Key, c.Chain[0], c.Chain[1:], password)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, data)
	return path
}

// WritePEM writes the CA certificates in PEM to path: a truststore for
// ssl.truststore.type=PEM.
func WritePEM(t testing.TB, path string, cas ...*CA) string {
	t.Helper()
	var data []byte
	for _, ca := range cas {
		data = append(data, ca.PEM()...)
	}
	writeFile(t, path, data)
	return path
}

// WritePKCS12Truststore writes the CA certificates to path as a PKCS12
// truststore (each marked as a trust anchor, as keytool does).
func WritePKCS12Truststore(t testing.TB, path, password string, cas ...*CA) string {
	t.Helper()
	var certs []*x509.Certificate
	for _, ca := range cas {
		certs = append(certs, ca.Cert)
	}
	data, err := pkcs12.Modern.EncodeTrustStore(certs, password)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, data)
	return path
}

// writeFile writes data to path atomically (a temp file renamed over
// it), as an operator's rotation would, so a watcher never reads half.
func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

type algorithmIdentifier struct {
	Algorithm  asn1.ObjectIdentifier
	Parameters asn1.RawValue `asn1:"optional"`
}

// EncryptPKCS8 encrypts a PKCS#8 private key as openssl pkcs8 -topk8
// -v2 aes-256-cbc does: PBES2 with PBKDF2-HMAC-SHA256 and AES-256-CBC.
func EncryptPKCS8(t testing.TB, der []byte, password string) []byte {
	t.Helper()
	salt, iv := make([]byte, 16), make([]byte, aes.BlockSize)
	if _, err := rand.Read(salt); err != nil {
		t.Fatal(err)
	}
	if _, err := rand.Read(iv); err != nil {
		t.Fatal(err)
	}
	const rounds = 2048
	key, err := pbkdf2.Key(sha256.New, password, salt, rounds, 32)
	if err != nil {
		t.Fatal(err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	pad := aes.BlockSize - len(der)%aes.BlockSize
	plain := append(append([]byte{}, der...), make([]byte, pad)...)
	for i := len(der); i < len(plain); i++ {
		plain[i] = byte(pad)
	}
	enc := make([]byte, len(plain))
	cipher.NewCBCEncrypter(block, iv).CryptBlocks(enc, plain)
	raw := func(v any) asn1.RawValue {
		b, err := asn1.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return asn1.RawValue{FullBytes: b}
	}
	kdfParams := struct {
		Salt   []byte
		Rounds int
		PRF    algorithmIdentifier
	}{salt, rounds, algorithmIdentifier{Algorithm: asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}, Parameters: asn1.NullRawValue}}
	pbes2 := struct {
		KDF    algorithmIdentifier
		Scheme algorithmIdentifier
	}{
		algorithmIdentifier{asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}, raw(kdfParams)},
		algorithmIdentifier{asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}, raw(iv)},
	}
	out, err := asn1.Marshal(struct {
		Algorithm algorithmIdentifier
		Data      []byte
	}{algorithmIdentifier{asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}, raw(pbes2)}, enc})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
