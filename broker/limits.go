package broker

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// This file holds the limits that keep clients from exhausting the
// broker, with Kafka's settings and semantics (SocketServer's
// ConnectionQuotas and memory pool):
//
//   - max.connections (KIP-402): at the limit, the accept loop stops
//     accepting until a connection closes; the connections wait in the
//     kernel's listen backlog. Kafka closes the least recently used
//     connection of another listener only when a connection on the
//     inter-broker listener goes over the limit, or the limit is lowered
//     at run time; Strata's brokers talk to each other over the
//     replication listener (gRPC) and read the limit at start only, so
//     neither happens here.
//   - max.connections.per.ip and max.connections.per.ip.overrides: a new
//     connection from an address at its limit is closed at once.
//   - queued.max.request.bytes (KIP-72): the bytes of request frames read
//     and not yet answered, over all connections. A reader that has read
//     a frame's size prefix reserves that many bytes before it reads the
//     body, waiting while none are left (waiting readers are served in
//     the order they came). As in Kafka's non-strict pool, a
//     reservation succeeds while any byte is free, so at most limit +
//     socket.request.max.bytes - 1 are reserved, and a frame as large as
//     socket.request.max.bytes always gets in eventually. Kafka frees the
//     bytes of most requests once they are parsed (of Produce once
//     handled); Strata's decoded requests alias their frame, so the bytes
//     are freed when the response is written (or the request dropped).

// connQuotas counts the open connections, in total and per IP address,
// against max.connections and max.connections.per.ip (with its
// overrides). Only the accept loop adds connections; each connection
// removes itself when it closes.
type connQuotas struct {
	maxTotal  int
	maxPerIP  int
	overrides map[netip.Addr]int

	refused      atomic.Int64 // connections closed at once: their address was at its limit
	blockedNanos atomic.Int64 // time the accept loop waited at max.connections
	waiting      atomic.Bool  // the accept loop waits at max.connections now

	mu struct {
		sync.Mutex
		total int
		perIP map[netip.Addr]int
		// freed is closed (and replaced) when a connection is
		// removed, waking the accept loop.
		freed chan struct{}
	}
}

// overrideResolveTimeout bounds the resolution of the hostnames of
// max.connections.per.ip.overrides at start.
const overrideResolveTimeout = 10 * time.Second

// newConnQuotas builds the quotas from the configuration, resolving the
// hostnames among the per-IP overrides (as Kafka does when it starts): an
// override applies to every address its hostname resolves to.
func newConnQuotas(cfg *Config) (*connQuotas, error) {
	q := &connQuotas{maxTotal: int(cfg.MaxConnections), maxPerIP: int(cfg.MaxConnectionsPerIP), overrides: map[netip.Addr]int{}}
	q.mu.perIP = map[netip.Addr]int{}
	q.mu.freed = make(chan struct{})
	for host, n := range cfg.MaxConnectionsPerIPOverrides {
		if a, err := netip.ParseAddr(host); err == nil {
			q.overrides[a.Unmap()] = n
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), overrideResolveTimeout)
		addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("broker: max.connections.per.ip.overrides: resolving %q: %w", host, err)
		}
		for _, a := range addrs {
			q.overrides[a.Unmap()] = n
		}
	}
	return q, nil
}

// limitFor is the connection limit of an address.
func (q *connQuotas) limitFor(a netip.Addr) int {
	if n, ok := q.overrides[a]; ok {
		return n
	}
	return q.maxPerIP
}

// waitSlot waits while max.connections connections are open. It returns
// false if stop is closed first.
func (q *connQuotas) waitSlot(stop <-chan struct{}) bool {
	var start time.Time
	defer func() {
		if !start.IsZero() {
			q.blockedNanos.Add(int64(time.Since(start)))
		}
	}()
	for {
		q.mu.Lock()
		if q.mu.total < q.maxTotal {
			q.mu.Unlock()
			return true
		}
		freed := q.mu.freed
		q.mu.Unlock()
		if start.IsZero() {
			start = time.Now()
			q.waiting.Store(true)
			defer q.waiting.Store(false)
		}
		select {
		case <-freed:
		case <-stop:
			return false
		}
	}
}

// add counts a new connection from a. It returns false, counting
// nothing, when a already has as many connections as its limit.
func (q *connQuotas) add(a netip.Addr) (ok bool, limit int) {
	limit = q.limitFor(a)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.mu.perIP[a] >= limit {
		q.refused.Add(1)
		return false, limit
	}
	q.mu.perIP[a]++
	q.mu.total++
	return true, limit
}

// remove uncounts a closed connection from a.
func (q *connQuotas) remove(a netip.Addr) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if n := q.mu.perIP[a]; n > 1 {
		q.mu.perIP[a] = n - 1
	} else {
		delete(q.mu.perIP, a)
	}
	q.mu.total--
	close(q.mu.freed)
	q.mu.freed = make(chan struct{})
}

// remoteAddr is a connection's peer address, IPv4-mapped addresses as
// IPv4; the zero Addr for a connection that is not TCP.
func remoteAddr(nc net.Conn) netip.Addr {
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		return ta.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// requestMemory is queued.max.request.bytes: the bytes of request frames
// read and not yet answered, over all connections (Kafka's non-strict
// memory pool). With no bound it only counts them. Readers that wait are
// served in the order they came, so a steady client is not starved by
// others that keep the pool full.
type requestMemory struct {
	limit int64 // at most 0: no bound

	waitNanos atomic.Int64 // time readers waited for a reservation
	waiting   atomic.Int64 // readers waiting now
	// used is the bytes reserved. Without a bound it is only counted
	// (no lock on the request path); with one it changes under mu.
	used atomic.Int64

	mu struct {
		sync.Mutex
		waiters []*memWaiter // in arrival order
	}
}

// memWaiter is a reader waiting for n bytes; ready is closed once they
// are reserved for it.
type memWaiter struct {
	n     int64
	ready chan struct{}
}

func newRequestMemory(limit int64) *requestMemory { return &requestMemory{limit: limit} }

// reserve takes n bytes, waiting (behind the readers that came first)
// while none are free. It returns false, reserving nothing, if stop is
// closed first.
func (m *requestMemory) reserve(n int64, stop <-chan struct{}) bool {
	if m.limit <= 0 {
		m.used.Add(n)
		return true
	}
	m.mu.Lock()
	if len(m.mu.waiters) == 0 && m.used.Load() < m.limit {
		m.used.Add(n)
		m.mu.Unlock()
		return true
	}
	w := &memWaiter{n: n, ready: make(chan struct{})}
	m.mu.waiters = append(m.mu.waiters, w)
	m.mu.Unlock()
	m.waiting.Add(1)
	start := time.Now()
	defer func() {
		m.waiting.Add(-1)
		m.waitNanos.Add(int64(time.Since(start)))
	}()
	select {
	case <-w.ready:
		return true
	case <-stop:
	}
	m.mu.Lock()
	select {
	case <-w.ready: // granted meanwhile: give it back
		m.mu.Unlock()
		m.release(n)
		return false
	default:
	}
	for i, x := range m.mu.waiters {
		if x == w {
			m.mu.waiters = append(m.mu.waiters[:i], m.mu.waiters[i+1:]...)
			break
		}
	}
	m.mu.Unlock()
	return false
}

// release returns n reserved bytes and grants the waiting readers, in
// order, while any byte is free.
func (m *requestMemory) release(n int64) {
	if n == 0 {
		return
	}
	if m.limit <= 0 {
		m.used.Add(-n)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.used.Add(-n)
	for len(m.mu.waiters) > 0 && m.used.Load() < m.limit {
		w := m.mu.waiters[0]
		m.mu.waiters = m.mu.waiters[1:]
		m.used.Add(w.n)
		close(w.ready)
	}
}

// reserved is the bytes reserved now.
func (m *requestMemory) reserved() int64 { return m.used.Load() }

// limitsCollector exports the connection and request-memory limits'
// state at scrape time.
type limitsCollector struct{ s *Server }

var (
	descConnections = prometheus.NewDesc("strata_broker_connections",
		"Client connections open now.", nil, nil)
	descConnRefused = prometheus.NewDesc("strata_broker_connections_refused_total",
		"New connections closed at once because their address had max.connections.per.ip (or its override) open.", nil, nil)
	descAcceptBlocked = prometheus.NewDesc("strata_broker_accept_blocked_seconds_total",
		"Time the listener stopped accepting because max.connections were open.", nil, nil)
	descQueuedBytes = prometheus.NewDesc("strata_broker_queued_request_bytes",
		"Bytes of request frames read and not yet answered (what queued.max.request.bytes bounds).", nil, nil)
	descReadsBlocked = prometheus.NewDesc("strata_broker_request_reads_blocked_seconds_total",
		"Time connection readers waited for queued.max.request.bytes to free room, summed over connections.", nil, nil)
)

func (c limitsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descConnections, descConnRefused, descAcceptBlocked, descQueuedBytes, descReadsBlocked} {
		ch <- d
	}
}

func (c limitsCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	ch <- prometheus.MustNewConstMetric(descConnections, prometheus.GaugeValue, float64(s.stats.connectionsOpen.Load()))
	ch <- prometheus.MustNewConstMetric(descQueuedBytes, prometheus.GaugeValue, float64(s.reqMem.reserved()))
	ch <- prometheus.MustNewConstMetric(descReadsBlocked, prometheus.CounterValue, time.Duration(s.reqMem.waitNanos.Load()).Seconds())
	if q := s.quotas; q != nil {
		ch <- prometheus.MustNewConstMetric(descConnRefused, prometheus.CounterValue, float64(q.refused.Load()))
		ch <- prometheus.MustNewConstMetric(descAcceptBlocked, prometheus.CounterValue, time.Duration(q.blockedNanos.Load()).Seconds())
	}
}
