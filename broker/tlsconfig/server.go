package tlsconfig

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Server is the TLS side of an SSL (or SASL_SSL) listener. Its Config
// picks, for each new connection, the certificates and CAs last loaded;
// Reload, or the file watch, loads them again without a restart, as
// Kafka's dynamic SSL update does: a new keystore or truststore that
// does not load, or fails the checks of Reload, is refused and the old
// one kept. Connections already open keep the certificates they
// started with.
type Server struct {
	props      props
	minV, maxV uint16
	suites     []uint16
	clientAuth tls.ClientAuthType
	mapper     *PrincipalMapper
	allowDN    bool // ssl.allow.dn.changes
	allowSAN   bool // ssl.allow.san.changes
	verifyHost bool // ssl.endpoint.identification.algorithm, for ClientConfig
	config     *tls.Config

	cur atomic.Pointer[generation]

	mu struct {
		sync.Mutex // serializes loads
		// tried is the hash of the files at the last attempt, so the
		// watch tries a bad file once, not at every poll.
		tried [32]byte
	}
	watch struct {
		once      sync.Once
		closeOnce sync.Once
		stop      chan struct{}
		done      chan struct{}
	}
}

// generation is what one load read.
type generation struct {
	config *tls.Config
	cert   *tls.Certificate
	roots  *x509.CertPool // nil without a truststore
	files  []string
	hash   [32]byte
}

// NewServer reads the keystore (required), the truststore (required
// when ssl.client.auth is requested or required) and the other ssl.*
// settings of props, which are Kafka property names already resolved
// for one listener (keys that do not start with "ssl." are ignored).
// Unknown ssl.* keys and bad values are refused with an error that says
// what to set.
func NewServer(properties map[string]string) (*Server, error) {
	p := props(maps.Clone(properties))
	if err := p.checkKeys(Settings); err != nil {
		return nil, err
	}
	s := &Server{props: p}
	var err error
	if s.minV, s.maxV, err = p.versions(); err != nil {
		return nil, err
	}
	if s.suites, err = p.cipherSuites(); err != nil {
		return nil, err
	}
	if s.clientAuth, err = p.clientAuth(); err != nil {
		return nil, err
	}
	if s.mapper, err = ParsePrincipalRules(p.get("ssl.principal.mapping.rules")); err != nil {
		return nil, err
	}
	if s.allowDN, err = p.boolean("ssl.allow.dn.changes"); err != nil {
		return nil, err
	}
	if s.allowSAN, err = p.boolean("ssl.allow.san.changes"); err != nil {
		return nil, err
	}
	if s.verifyHost, err = p.verifyHostname(); err != nil {
		return nil, err
	}
	g, err := s.load()
	if err != nil {
		return nil, err
	}
	s.cur.Store(g)
	s.mu.tried = g.hash
	s.config = &tls.Config{
		MinVersion: s.minV,
		MaxVersion: s.maxV,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.cur.Load().config, nil
		},
	}
	return s, nil
}

func (p props) boolean(k string) (bool, error) {
	switch v := strings.ToLower(p.get(k)); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, fmt.Errorf("tlsconfig: %s %q: want true or false", k, v)
	}
}

// Config is the listener's TLS configuration: give it to tls.NewListener
// or tls.Server. Each handshake uses the certificates loaded last.
func (s *Server) Config() *tls.Config { return s.config }

// ClientConfig is the configuration of a connection this side makes as
// a client to serverName (a broker dialing another's inter-broker
// listener or replication port, serverName being the host it dials): it
// presents the keystore's certificate and verifies the peer against the
// truststore (the system's CAs without one), both as loaded last, so a
// reload applies to new connections. The peer's certificate must be
// valid for serverName, unless ssl.endpoint.identification.algorithm
// is empty.
func (s *Server) ClientConfig(serverName string) *tls.Config {
	host := ""
	if s.verifyHost {
		host = serverName
	}
	return &tls.Config{
		ServerName:   serverName,
		MinVersion:   s.minV,
		MaxVersion:   s.maxV,
		CipherSuites: s.suites,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return s.cur.Load().cert, nil
		},
		InsecureSkipVerify: true, // verified below against the truststore loaded last
		VerifyConnection: func(cs tls.ConnectionState) error {
			roots := s.cur.Load().roots
			if roots == nil {
				var err error
				if roots, err = x509.SystemCertPool(); err != nil {
					return fmt.Errorf("tlsconfig: the system's CAs: %w; set ssl.truststore.location", err)
				}
			}
			return verifyChain(cs, roots, host)
		},
	}
}

// Certificate is the keystore's certificate chain and key loaded last.
func (s *Server) Certificate() *tls.Certificate { return s.cur.Load().cert }

// Files are the keystore and truststore files that Reload reads (none
// for inline PEM).
func (s *Server) Files() []string { return slices.Clone(s.cur.Load().files) }

// load reads the stores and builds a generation.
func (s *Server) load() (*generation, error) {
	cert, kfiles, err := loadKeystore(s.props)
	if err != nil {
		return nil, err
	}
	if cert == nil {
		return nil, errors.New("tlsconfig: an SSL listener needs a keystore: set ssl.keystore.location (PEM or PKCS12), or ssl.keystore.certificate.chain and ssl.keystore.key")
	}
	roots, tfiles, err := loadTruststore(s.props)
	if err != nil {
		return nil, err
	}
	if roots == nil && s.clientAuth != tls.NoClientCert {
		return nil, errors.New("tlsconfig: ssl.client.auth requested or required verifies client certificates against a truststore: set ssl.truststore.location or ssl.truststore.certificates")
	}
	files := append(kfiles, tfiles...)
	hash, err := hashFiles(files)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{*cert},
		ClientAuth:   s.clientAuth,
		ClientCAs:    roots,
		MinVersion:   s.minV,
		MaxVersion:   s.maxV,
		CipherSuites: s.suites,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.VerifiedChains) == 0 {
				return nil
			}
			_, err := s.principalName(cs.PeerCertificates[0])
			return err
		},
	}
	return &generation{config: cfg, cert: cert, roots: roots, files: files, hash: hash}, nil
}

// hashFiles hashes the contents of files, in order.
func hashFiles(files []string) ([32]byte, error) {
	h := sha256.New()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return [32]byte{}, fmt.Errorf("tlsconfig: %w", err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", f, len(data))
		h.Write(data)
	}
	var out [32]byte
	h.Sum(out[:0])
	return out, nil
}

// Reload reads the keystore and truststore files again and uses them for
// new connections. A new keystore is refused, and the old one kept, when
// it does not load, when its certificate is expired or not yet valid, or
// when its subject or its subject alternative names differ from the old
// one's (unless ssl.allow.dn.changes / ssl.allow.san.changes are true),
// as Kafka refuses a dynamic keystore update.
func (s *Server) Reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reloadLocked()
}

func (s *Server) reloadLocked() error {
	g, err := s.load()
	if err != nil {
		if len(s.cur.Load().files) > 0 {
			if h, herr := hashFiles(s.cur.Load().files); herr == nil {
				s.mu.tried = h
			}
		}
		return fmt.Errorf("tlsconfig: reload refused, keeping the certificates loaded before: %w", err)
	}
	s.mu.tried = g.hash
	if err := s.compatible(s.cur.Load().cert.Leaf, g.cert.Leaf, time.Now()); err != nil {
		return fmt.Errorf("tlsconfig: reload refused, keeping the certificates loaded before: %w", err)
	}
	s.cur.Store(g)
	return nil
}

// compatible checks a new keystore certificate against the old.
func (s *Server) compatible(old, cur *x509.Certificate, now time.Time) error {
	if now.Before(cur.NotBefore) || now.After(cur.NotAfter) {
		return fmt.Errorf("the new keystore certificate is valid from %s to %s, not now", cur.NotBefore.UTC().Format(time.RFC3339), cur.NotAfter.UTC().Format(time.RFC3339))
	}
	if !s.allowDN && !bytes.Equal(old.RawSubject, cur.RawSubject) {
		return fmt.Errorf("the new keystore certificate's subject %q differs from the old one's %q (set ssl.allow.dn.changes=true to allow it)", cur.Subject, old.Subject)
	}
	if !s.allowSAN && !sameSANs(old, cur) {
		return fmt.Errorf("the new keystore certificate's subject alternative names differ from the old one's (set ssl.allow.san.changes=true to allow it)")
	}
	return nil
}

func sameSANs(a, b *x509.Certificate) bool {
	ips := func(c *x509.Certificate) []string {
		var out []string
		for _, ip := range c.IPAddresses {
			out = append(out, ip.String())
		}
		slices.Sort(out)
		return out
	}
	sorted := func(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }
	uris := func(c *x509.Certificate) []string {
		var out []string
		for _, u := range c.URIs {
			out = append(out, u.String())
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(sorted(a.DNSNames), sorted(b.DNSNames)) &&
		slices.Equal(sorted(a.EmailAddresses), sorted(b.EmailAddresses)) &&
		slices.Equal(ips(a), ips(b)) && slices.Equal(uris(a), uris(b))
}

// Watch polls the keystore and truststore files every interval and
// reloads when their contents change; report, if not nil, is called with
// the result of each reload (nil when the new certificates are in use).
// A change that fails to load is tried again only when the files change
// again. Close stops the watch. Watch may be called once.
func (s *Server) Watch(interval time.Duration, report func(error)) error {
	if interval <= 0 {
		return fmt.Errorf("tlsconfig: watch interval %v: want > 0", interval)
	}
	started := false
	s.watch.once.Do(func() {
		started = true
		s.watch.stop = make(chan struct{})
		s.watch.done = make(chan struct{})
		go s.poll(interval, report)
	})
	if !started {
		return errors.New("tlsconfig: Watch called twice, or after Close")
	}
	return nil
}

func (s *Server) poll(interval time.Duration, report func(error)) {
	defer close(s.watch.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.watch.stop:
			return
		case <-t.C:
		}
		files := s.cur.Load().files
		if len(files) == 0 {
			continue
		}
		h, err := hashFiles(files)
		s.mu.Lock()
		if err != nil || h == s.mu.tried {
			s.mu.Unlock()
			continue // a file being replaced is looked at again next time
		}
		err = s.reloadLocked()
		s.mu.Unlock()
		if report != nil {
			report(err)
		}
	}
}

// Close stops the watch and waits for it.
func (s *Server) Close() error {
	s.watch.once.Do(func() {}) // no watch after Close
	s.watch.closeOnce.Do(func() {
		if s.watch.stop != nil {
			close(s.watch.stop)
			<-s.watch.done
		}
	})
	return nil
}

// Principal returns the principal of a connection, "User:" and the
// client certificate's mapped distinguished name, when the client
// presented a certificate that verified; ok is false otherwise (the
// connection is then "User:ANONYMOUS", as in Kafka).
func (s *Server) Principal(cs tls.ConnectionState) (string, bool) {
	if len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return "", false
	}
	name, err := s.principalName(cs.PeerCertificates[0])
	if err != nil {
		return "", false
	}
	return "User:" + name, true
}

// principalName maps cert's subject by ssl.principal.mapping.rules.
func (s *Server) principalName(cert *x509.Certificate) (string, error) {
	dn, err := DistinguishedName(cert)
	if err != nil {
		return "", err
	}
	return s.mapper.Map(dn)
}
