package broker

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stratastream/strata/broker/sasl"
	"github.com/stratastream/strata/broker/tlsconfig"
	"github.com/stratastream/strata/coord"
)

// The broker's listeners, Kafka's way: listeners names each one with the
// address it binds (INTERNAL://0.0.0.0:19092,EXTERNAL://0.0.0.0:9092);
// listener.security.protocol.map gives each name its security protocol;
// advertised.listeners says what each is called from outside; and
// inter.broker.listener.name (or security.inter.broker.protocol, naming
// the listener of that name) is the one other brokers use. Every
// connection knows the listener it came in on (conn.lis): Metadata,
// FindCoordinator and DescribeCluster answer with the brokers' addresses
// on that listener.

// SecurityProtocol is a listener's security protocol, as Kafka names it.
type SecurityProtocol string

// The security protocols.
const (
	ProtocolPlaintext     SecurityProtocol = "PLAINTEXT"
	ProtocolSSL           SecurityProtocol = "SSL"
	ProtocolSASLPlaintext SecurityProtocol = "SASL_PLAINTEXT"
	ProtocolSASLSSL       SecurityProtocol = "SASL_SSL"
)

// securityProtocols are the protocols in Kafka's order, each also the
// name of a listener that listener.security.protocol.map maps by default.
var securityProtocols = []SecurityProtocol{ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL}

// TLS says whether the protocol runs over TLS.
func (p SecurityProtocol) TLS() bool { return p == ProtocolSSL || p == ProtocolSASLSSL }

// SASL says whether the protocol authenticates with SASL.
func (p SecurityProtocol) SASL() bool { return p == ProtocolSASLPlaintext || p == ProtocolSASLSSL }

// ListenerAddr is one named listener's address: where it binds
// (listeners) or what clients are told (advertised.listeners).
type ListenerAddr struct {
	// Name is the listener name, upper-cased as Kafka normalises it.
	Name string
	// Host is the host name or IP; in listeners, "" or 0.0.0.0 binds
	// every interface.
	Host string
	// Port 0 in listeners picks a free port; in advertised.listeners it
	// means the bound port.
	Port int32
}

// HostPort is the address as host:port.
func (a ListenerAddr) HostPort() string {
	return net.JoinHostPort(a.Host, strconv.Itoa(int(a.Port)))
}

func (a ListenerAddr) String() string { return a.Name + "://" + a.HostPort() }

// parseListenerList parses a listeners or advertised.listeners value:
// NAME://host:port, comma-separated, names and non-zero ports unique.
func parseListenerList(v string) ([]ListenerAddr, error) {
	var out []ListenerAddr
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, hp, ok := strings.Cut(item, "://")
		if !ok || name == "" {
			return nil, fmt.Errorf("%q: want NAME://host:port, such as PLAINTEXT://0.0.0.0:9092", item)
		}
		name = strings.ToUpper(name)
		if strings.ContainsAny(name, ".:/ ") {
			return nil, fmt.Errorf("%q: a listener name may not contain '.', ':', '/' or spaces", name)
		}
		host, port, err := net.SplitHostPort(hp)
		if err != nil {
			return nil, fmt.Errorf("%q: want NAME://host:port: %v", item, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 0 || p > 65535 {
			return nil, fmt.Errorf("%q: bad port %q", item, port)
		}
		for _, o := range out {
			if o.Name == name {
				return nil, fmt.Errorf("listener name %s is given twice", name)
			}
			if p != 0 && int(o.Port) == p && (o.Host == host || o.Host == "" || host == "") {
				return nil, fmt.Errorf("listeners %s and %s use the same port %d", o.Name, name, p)
			}
		}
		out = append(out, ListenerAddr{Name: name, Host: host, Port: int32(p)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no listener given; want NAME://host:port, such as PLAINTEXT://0.0.0.0:9092")
	}
	return out, nil
}

// FormatListeners renders listeners as the listeners setting writes them.
func FormatListeners(ls []ListenerAddr) string { return formatListenerList(ls) }

func formatListenerList(ls []ListenerAddr) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.String()
	}
	return strings.Join(parts, ",")
}

// setListeners reads listeners.
func setListeners(c *Config, v string) error {
	ls, err := parseListenerList(v)
	if err != nil {
		return err
	}
	c.Listeners = ls
	return nil
}

// setAdvertisedListeners reads advertised.listeners: hosts clients can
// reach (no wildcard address).
func setAdvertisedListeners(c *Config, v string) error {
	ls, err := parseListenerList(v)
	if err != nil {
		return err
	}
	for _, l := range ls {
		if l.Host == "" || l.Host == "0.0.0.0" || l.Host == "::" {
			return fmt.Errorf("listener %s must name a host clients can reach, not %q", l.Name, l.Host)
		}
	}
	c.AdvertisedListeners = ls
	return nil
}

// setProtocolMap reads listener.security.protocol.map: NAME:PROTOCOL,...
func setProtocolMap(c *Config, v string) error {
	m := map[string]SecurityProtocol{}
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, proto, ok := strings.Cut(item, ":")
		if !ok || name == "" {
			return fmt.Errorf("%q: want NAME:PROTOCOL, such as EXTERNAL:SASL_SSL", item)
		}
		p := SecurityProtocol(strings.ToUpper(strings.TrimSpace(proto)))
		if !slices.Contains(securityProtocols, p) {
			return fmt.Errorf("%q: unknown security protocol %q (want one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)", item, proto)
		}
		name = strings.ToUpper(strings.TrimSpace(name))
		if _, dup := m[name]; dup {
			return fmt.Errorf("listener %s is mapped twice", name)
		}
		m[name] = p
	}
	c.ListenerProtocols = m
	return nil
}

func protocolMapValue(c *Config) string {
	// The protocols' own names first, in Kafka's order, then the others
	// sorted.
	names := make([]string, 0, len(c.ListenerProtocols))
	for n := range c.ListenerProtocols {
		names = append(names, n)
	}
	rank := func(n string) int {
		if i := slices.Index(securityProtocols, SecurityProtocol(n)); i >= 0 {
			return i
		}
		return len(securityProtocols)
	}
	slices.SortFunc(names, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + ":" + string(c.ListenerProtocols[n])
	}
	return strings.Join(parts, ",")
}

func setInterBrokerListener(c *Config, v string) error {
	if v == "" || strings.ContainsAny(v, ".:/ ,") {
		return fmt.Errorf("want a listener name, such as INTERNAL")
	}
	c.InterBrokerListener = strings.ToUpper(v)
	return nil
}

// checkListeners checks the listener settings against each other (from
// checkAcrossSettings) and settles the inter-broker listener.
func checkListeners(c *Config) *ConfigError {
	for _, l := range c.Listeners {
		if _, ok := c.ListenerProtocols[l.Name]; !ok {
			k := "listener.security.protocol.map"
			return &ConfigError{Key: k, Value: c.Properties[k], Reason: fmt.Sprintf("listener %s (in listeners) has no security protocol; add %s:PLAINTEXT (or SSL, SASL_PLAINTEXT, SASL_SSL)", l.Name, l.Name)}
		}
	}
	for name := range c.ListenerOverrides {
		if !slices.ContainsFunc(c.Listeners, func(l ListenerAddr) bool { return l.Name == name }) {
			for k, v := range c.Properties {
				if n, _, _, ok := perListenerSetting(k); ok && n == name {
					return &ConfigError{Key: k, Value: v, Reason: fmt.Sprintf("there is no listener %s in listeners (%s)", name, formatListenerList(c.Listeners))}
				}
			}
		}
	}
	for _, a := range c.AdvertisedListeners {
		if !slices.ContainsFunc(c.Listeners, func(l ListenerAddr) bool { return l.Name == a.Name }) {
			k := "advertised.listeners"
			return &ConfigError{Key: k, Value: c.Properties[k], Reason: fmt.Sprintf("listener %s is not in listeners (%s)", a.Name, formatListenerList(c.Listeners))}
		}
	}
	_, byName := c.Properties["inter.broker.listener.name"]
	_, byProto := c.Properties["security.inter.broker.protocol"]
	switch {
	case byName && byProto:
		k := "security.inter.broker.protocol"
		return &ConfigError{Key: k, Value: c.Properties[k], Reason: "give inter.broker.listener.name or security.inter.broker.protocol, not both"}
	case !byName && !byProto && len(c.Listeners) == 1:
		// One listener: brokers talk to each other on it, whatever its
		// name (Kafka would want it named PLAINTEXT or named by
		// inter.broker.listener.name).
		c.InterBrokerListener = c.Listeners[0].Name
	case !byName:
		c.InterBrokerListener = string(c.InterBrokerProtocol)
	}
	if !slices.ContainsFunc(c.Listeners, func(l ListenerAddr) bool { return l.Name == c.InterBrokerListener }) {
		k := "inter.broker.listener.name"
		if !byName {
			k = "security.inter.broker.protocol"
		}
		return &ConfigError{Key: k, Value: c.Properties[k], Reason: fmt.Sprintf("the inter-broker listener %s is not among the listeners (%s); set inter.broker.listener.name to one of them",
			c.InterBrokerListener, formatListenerList(c.Listeners))}
	}
	return nil
}

// advertisedListener is name's entry in advertised.listeners.
func (c *Config) advertisedListener(name string) (ListenerAddr, bool) {
	i := slices.IndexFunc(c.AdvertisedListeners, func(l ListenerAddr) bool { return l.Name == name })
	if i < 0 {
		return ListenerAddr{}, false
	}
	return c.AdvertisedListeners[i], true
}

// listenerPrefix starts a per-listener setting:
// listener.name.<lower-case name>.<setting>.
const listenerPrefix = "listener.name."

// perListenerSetting resolves the key of a per-listener setting: the
// listener it is for and the setting it overrides. key is a whole
// listener.name.<name>.<setting> key; ok is false if it is not one.
// A mechanism-prefixed setting (listener.name.sasl_ssl.scram-sha-256.
// sasl.jaas.config) keeps its mechanism in rest.
func perListenerSetting(key string) (listener, rest string, s *setting, ok bool) {
	tail, found := strings.CutPrefix(key, listenerPrefix)
	if !found {
		return "", "", nil, false
	}
	name, rest, found := strings.Cut(tail, ".")
	if !found || name == "" {
		return "", "", nil, false
	}
	base := rest
	if s := brokerSettingByName[base]; s != nil && s.perListener {
		return strings.ToUpper(name), rest, s, true
	}
	// <mechanism>.<setting>, for settings given per SASL mechanism.
	if _, b, cut := strings.Cut(rest, "."); cut {
		if s := brokerSettingByName[b]; s != nil && s.perMechanism {
			return strings.ToUpper(name), rest, s, true
		}
	}
	return "", "", nil, false
}

// ListenerProperties are the settings that apply to listener name, by
// their unprefixed names: each per-listener setting's
// listener.name.<name>.<setting> value if given, else its broker-wide
// value if given; mechanism-prefixed ones, given per listener only
// (listener.name.<name>.scram-sha-256.sasl.jaas.config), keep their
// mechanism prefix (scram-sha-256.sasl.jaas.config). Only given settings
// appear.
func (c *Config) ListenerProperties(name string) map[string]string {
	out := map[string]string{}
	for k, v := range c.Properties {
		if s := brokerSettingByName[k]; s != nil && (s.perListener || s.perMechanism) {
			out[k] = v
		}
	}
	for k, v := range c.ListenerOverrides[strings.ToUpper(name)] {
		out[k] = v
	}
	for i := range settings {
		if st := &settings[i]; st.perListener && st.hasDefault() && st.name != "" {
			if _, ok := out[st.name]; !ok {
				if v, ok := st.current(c); ok {
					out[st.name] = v
				}
			}
		}
	}
	return out
}

// bindAddr is the address to bind listener l to.
func bindAddr(l ListenerAddr) string { return l.HostPort() }

// advertisedAddr is what Metadata tells clients about listener name,
// bound at bound: its advertised.listeners entry (its port 0 meaning the
// bound port), else the bound host (the machine's host name for a
// wildcard) and port. A listener left out of advertised.listeners is
// advertised at its bound address, so every listener serves Metadata.
func (c *Config) advertisedAddr(name string, bound net.Addr) ListenerAddr {
	a, ok := c.advertisedListener(name)
	if !ok {
		i := slices.IndexFunc(c.Listeners, func(l ListenerAddr) bool { return l.Name == name })
		a = c.Listeners[i]
	}
	if a.Host == "" || a.Host == "0.0.0.0" || a.Host == "::" {
		if h, err := os.Hostname(); err == nil {
			a.Host = h
		} else {
			a.Host = "localhost"
		}
	}
	if a.Port == 0 {
		if ta, ok := bound.(*net.TCPAddr); ok {
			a.Port = int32(ta.Port)
		}
	}
	return a
}

// endpointFor returns b's address on listener name, as registered; a
// registration without listener names (made before there were several)
// has its one address on every listener, and so has every registration
// for name "" (a request not from a connection).
func endpointFor(b coord.BrokerInfo, name string) (host string, port int32, ok bool) {
	if len(b.Endpoints) == 0 || name == "" {
		return b.Host, b.Port, true
	}
	for _, e := range b.Endpoints {
		if e.Listener == name {
			return e.Host, e.Port, true
		}
	}
	return "", 0, false
}

// listener is one bound listener of a running server.
type listener struct {
	name     string
	protocol SecurityProtocol
	// conns counts the listener's connections (metrics.go).
	conns listenerConns
	ln    net.Listener
	// adv is the address clients are told (advertised.listeners, or the
	// bound one).
	adv ListenerAddr
	// tls is the TLS of an SSL or SASL_SSL listener (its certificates
	// reload in place), nil for others.
	tls *tlsconfig.Server
	// sasl starts SASL exchanges on a SASL_PLAINTEXT or SASL_SSL
	// listener, nil for others; maxReauth is its
	// connections.max.reauth.ms, 0 for sessions without an end.
	sasl      *sasl.Config
	maxReauth time.Duration
}

// bindListeners binds every listener in cfg.Listeners and fills s.self
// with their advertised addresses: the inter-broker listener's is the
// broker's registered Host and Port.
func (s *Server) bindListeners() error {
	s.self = coord.BrokerInfo{ID: s.cfg.BrokerID, ReplicationPort: s.cfg.ReplicationPort, Rack: s.cfg.Rack}
	for _, la := range s.cfg.Listeners {
		proto := s.cfg.ListenerProtocols[la.Name]
		l := &listener{name: la.Name, protocol: proto}
		if err := s.setupListenerSecurity(l); err != nil {
			return err
		}
		ln, err := net.Listen("tcp", bindAddr(la))
		if err != nil {
			l.close()
			return fmt.Errorf("broker: listener %s on %s: %w", la.Name, bindAddr(la), err)
		}
		l.ln, l.adv = ln, s.cfg.advertisedAddr(la.Name, ln.Addr())
		s.lns = append(s.lns, l)
		s.self.Endpoints = append(s.self.Endpoints, coord.Endpoint{Listener: l.name, Host: l.adv.Host, Port: l.adv.Port, SecurityProtocol: string(proto)})
		if l.name == s.cfg.InterBrokerListener {
			s.self.Host, s.self.Port = l.adv.Host, l.adv.Port
		}
	}
	return nil
}

// listener is the bound listener named name, nil if none.
func (s *Server) listener(name string) *listener {
	for _, l := range s.lns {
		if l.name == name {
			return l
		}
	}
	return nil
}

// interBrokerBind is the bound host of the inter-broker listener, where
// the replication port binds too.
func (s *Server) interBrokerBind() string {
	for _, la := range s.cfg.Listeners {
		if la.Name == s.cfg.InterBrokerListener {
			return la.Host
		}
	}
	return ""
}

// closeListeners stops accepting on every listener and stops their
// background work (JWKS refreshes).
func (s *Server) closeListeners() {
	for _, l := range s.lns {
		_ = l.ln.Close()
		l.close()
	}
}

// setupListenerSecurity builds l's TLS and SASL from its settings
// (Config.ListenerProperties).
func (s *Server) setupListenerSecurity(l *listener) error {
	props := s.cfg.ListenerProperties(l.name)
	if l.protocol.TLS() {
		srv, err := tlsconfig.NewServer(props)
		if err != nil {
			return fmt.Errorf("broker: listener %s (%s): %w", l.name, l.protocol, err)
		}
		l.tls = srv
		if iv := s.cfg.SSLReloadCheckInterval; iv > 0 {
			name := l.name
			if err := srv.Watch(iv, func(err error) {
				if err != nil {
					s.log.Error("TLS certificates changed on disk but were refused; the old ones stay in use", "listener", name, "err", err)
					return
				}
				s.log.Info("TLS certificates reloaded", "listener", name, "files", strings.Join(srv.Files(), ","))
			}); err != nil {
				return fmt.Errorf("broker: listener %s: %w", l.name, err)
			}
		}
	}
	if l.protocol.SASL() {
		sc, err := sasl.NewConfig(props, s.ScramCredentialStore(), sasl.Options{Now: s.nowFn, Tokens: tokenCredentialStore{s}})
		if err != nil {
			return fmt.Errorf("broker: listener %s: %w", l.name, err)
		}
		l.sasl = sc
		if v := props["connections.max.reauth.ms"]; v != "" {
			ms, err := strconv.ParseInt(v, 10, 64)
			if err != nil || ms < 0 {
				return fmt.Errorf("broker: listener %s: connections.max.reauth.ms=%q is not a number of milliseconds", l.name, v)
			}
			l.maxReauth = time.Duration(ms) * time.Millisecond
		}
	}
	return nil
}

// close releases what setupListenerSecurity started.
func (l *listener) close() {
	if l.sasl != nil {
		l.sasl.Close()
	}
	if l.tls != nil {
		_ = l.tls.Close()
	}
}

// hasEndpoint says b has an address on listener name.
func hasEndpoint(b coord.BrokerInfo, name string) bool {
	_, _, ok := endpointFor(b, name)
	return ok
}

// listenerName is the listener the request came in on; "" for a request
// built without a connection (tests), answered with registered addresses.
func (r *request) listenerName() string {
	if r.conn == nil || r.conn.lis == nil {
		return ""
	}
	return r.conn.lis.name
}

// BoundListener describes one listener of a running server.
type BoundListener struct {
	Name     string
	Protocol SecurityProtocol
	// Addr is where it is bound; Advertised what clients are told.
	Addr       net.Addr
	Advertised ListenerAddr
}

// Listeners describes the server's listeners, in the order of the
// listeners setting.
func (s *Server) Listeners() []BoundListener {
	out := make([]BoundListener, len(s.lns))
	for i, l := range s.lns {
		out[i] = BoundListener{Name: l.name, Protocol: l.protocol, Addr: l.ln.Addr(), Advertised: l.adv}
	}
	return out
}
