package netlab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Faults are what a Proxy does to the traffic of one source host. The
// zero value forwards unchanged.
type Faults struct {
	// Latency delays every chunk of bytes by this much, in each
	// direction (a round trip gains twice as much).
	Latency time.Duration
	// Jitter adds a uniform random delay in [-Jitter, +Jitter] to each
	// chunk (never below zero in total). Bytes keep their order: a chunk
	// never leaves before the one read before it.
	Jitter time.Duration
	// Loss is the probability (0 to 1) that a chunk is lost once and
	// sent again: it is held back LossDelay more, as a TCP
	// retransmission would be (the proxy cannot drop bytes of a stream).
	Loss float64
	// LossDelay is the retransmission delay of a lost chunk; 0 means
	// 200 ms, Linux's minimum retransmission timeout.
	LossDelay time.Duration
	// Reset is the probability (0 to 1), per chunk forwarded, that the
	// connection is reset (RST to both ends) instead.
	Reset float64
}

// defaultLossDelay is the retransmission delay of a lost chunk.
const defaultLossDelay = 200 * time.Millisecond

func (f Faults) validate() error {
	switch {
	case f.Latency < 0 || f.Jitter < 0 || f.LossDelay < 0:
		return fmt.Errorf("negative delay in %+v", f)
	case f.Latency > time.Minute || f.Jitter > time.Minute || f.LossDelay > time.Minute:
		return fmt.Errorf("delay over a minute in %+v", f)
	case !(f.Loss >= 0 && f.Loss <= 1) || !(f.Reset >= 0 && f.Reset <= 1):
		return fmt.Errorf("probability outside [0, 1] in %+v", f)
	}
	return nil
}

// proxyChunk is the most a pipe reads at once.
const proxyChunk = 32 << 10

// proxyQueue is how many chunks a pipe holds back at most (per
// direction of a connection): with Latency L it carries at most
// proxyQueue*proxyChunk/L bytes a second, like a TCP window.
const proxyQueue = 256

// Proxy is a TCP proxy in front of one host: it listens on an address of
// its own, inside the target's namespace, on each of the ports given to
// Lab.Proxy, and forwards each connection to the target's address on the
// same port. Faults apply per source host.
type Proxy struct {
	lab    *Lab
	target *Host
	ip     string
	lns    []net.Listener
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		faults map[*Host]Faults
		conns  map[net.Conn]struct{}
		stats  map[statKey]*ProxyStats
		closed bool
		rng    *rand.Rand
	}
}

type statKey struct {
	from string
	port int
}

// ProxyStats counts what a proxy forwarded from one source host to one
// port.
type ProxyStats struct {
	From        string // the source host's name ("?" if not a lab host)
	Port        int
	Connections int
	BytesIn     int64 // from the source to the target
	BytesOut    int64 // from the target to the source
	Resets      int
}

// Proxy starts a proxy in front of target on the given ports, on a new
// address of target (so that cuts toward target cover it too). It is
// closed when the lab is.
func (l *Lab) Proxy(target *Host, ports ...int) *Proxy {
	l.t.Helper()
	if len(ports) == 0 {
		l.t.Fatalf("netlab: Proxy: no ports")
	}
	p := &Proxy{lab: l, target: target}
	p.mu.faults = map[*Host]Faults{}
	p.mu.conns = map[net.Conn]struct{}{}
	p.mu.stats = map[statKey]*ProxyStats{}
	p.mu.rng = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(l.n)))
	p.ip = l.addAddress(target)
	for _, port := range ports {
		if port <= 0 || port > 65535 {
			p.Close()
			l.t.Fatalf("netlab: Proxy: bad port %d", port)
		}
		ln, err := target.Listen("tcp", net.JoinHostPort(p.ip, strconv.Itoa(port)))
		if err != nil {
			p.Close()
			l.t.Fatalf("netlab: proxy for %s: %v", target.name, err)
		}
		p.lns = append(p.lns, ln)
	}
	l.mu.Lock()
	l.mu.proxies = append(l.mu.proxies, p)
	l.mu.Unlock()
	for i, ln := range p.lns {
		p.wg.Add(1)
		go p.accept(ln, ports[i])
	}
	return p
}

// IP is the proxy's address.
func (p *Proxy) IP() string { return p.ip }

// Addr is the proxy's IP:port.
func (p *Proxy) Addr(port int) string { return net.JoinHostPort(p.ip, strconv.Itoa(port)) }

// Target is the host the proxy forwards to.
func (p *Proxy) Target() *Host { return p.target }

// Set makes the proxy apply f to the connections from host from, those
// open and those to come (a change applies from the next chunk on).
func (p *Proxy) Set(from *Host, f Faults) {
	p.lab.t.Helper()
	if err := f.validate(); err != nil {
		p.lab.t.Fatalf("netlab: proxy faults: %v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.faults[from] = f
}

// Clear removes every source's faults.
func (p *Proxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.faults = map[*Host]Faults{}
}

// Stats lists what the proxy forwarded, by source host and port.
func (p *Proxy) Stats() []ProxyStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []ProxyStats
	for _, s := range p.mu.stats {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].From != out[j].From {
			return out[i].From < out[j].From
		}
		return out[i].Port < out[j].Port
	})
	return out
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return
	}
	p.mu.closed = true
	for c := range p.mu.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	for _, ln := range p.lns {
		_ = ln.Close()
	}
	p.wg.Wait()
}

func (p *Proxy) accept(ln net.Listener, port int) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.forward(c, port)
	}
}

// track adds or removes a connection; false if the proxy is closed.
func (p *Proxy) track(c net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !add {
		delete(p.mu.conns, c)
		return true
	}
	if p.mu.closed {
		return false
	}
	p.mu.conns[c] = struct{}{}
	return true
}

func (p *Proxy) forward(client net.Conn, port int) {
	defer p.wg.Done()
	from := p.lab.HostOf(hostOf(client.RemoteAddr()))
	name := "?"
	if from != nil {
		name = from.name
	}
	st := p.stat(name, port)
	if !p.track(client, true) {
		_ = client.Close()
		return
	}
	defer p.track(client, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	server, err := p.target.DialContext(ctx, "tcp", p.target.Addr(port))
	cancel()
	if err != nil {
		_ = client.Close()
		return
	}
	if !p.track(server, true) {
		_ = client.Close()
		_ = server.Close()
		return
	}
	defer p.track(server, false)
	p.mu.Lock()
	st.Connections++
	p.mu.Unlock()
	var once sync.Once
	reset := func() {
		once.Do(func() {
			for _, c := range []net.Conn{client, server} {
				if tc, ok := c.(*net.TCPConn); ok {
					_ = tc.SetLinger(0) // close with RST
				}
				_ = c.Close()
			}
			p.mu.Lock()
			st.Resets++
			p.mu.Unlock()
		})
	}
	done := make(chan struct{}, 2)
	go func() { p.pipe(server, client, from, &st.BytesIn, reset); done <- struct{}{} }()
	go func() { p.pipe(client, server, from, &st.BytesOut, reset); done <- struct{}{} }()
	<-done
	<-done
	_ = client.Close()
	_ = server.Close()
}

func (p *Proxy) stat(from string, port int) *ProxyStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := statKey{from, port}
	s := p.mu.stats[k]
	if s == nil {
		s = &ProxyStats{From: from, Port: port}
		p.mu.stats[k] = s
	}
	return s
}

// delay draws the delay of the next chunk from host from, or reports that
// the connection is to be reset.
func (p *Proxy) delay(from *Host) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, ok := p.mu.faults[from]
	if !ok || from == nil {
		return 0, false
	}
	if f.Reset > 0 && p.mu.rng.Float64() < f.Reset {
		return 0, true
	}
	d := f.Latency
	if f.Jitter > 0 {
		d += time.Duration(p.mu.rng.Int64N(int64(2*f.Jitter)+1)) - f.Jitter
	}
	if f.Loss > 0 && p.mu.rng.Float64() < f.Loss {
		ld := f.LossDelay
		if ld == 0 {
			ld = defaultLossDelay
		}
		d += ld
	}
	return max(d, 0), false
}

type chunk struct {
	b  []byte
	at time.Time
}

// pipe copies src to dst, each chunk delayed as the faults of host from
// say, until src ends (then dst's write side is closed) or either fails.
func (p *Proxy) pipe(dst, src net.Conn, from *Host, count *int64, reset func()) {
	q := make(chan chunk, proxyQueue)
	wdone := make(chan struct{})
	go func() {
		defer close(wdone)
		failed := false
		for c := range q {
			if failed {
				continue // drain
			}
			if d := time.Until(c.at); d > 0 {
				time.Sleep(d)
			}
			if _, err := dst.Write(c.b); err != nil {
				failed = true
				_ = src.Close() // stops the reader
			}
		}
		if !failed {
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
		}
	}()
	var last time.Time
	buf := make([]byte, proxyChunk)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			d, rst := p.delay(from)
			if rst {
				reset()
				break
			}
			at := time.Now().Add(d)
			if at.Before(last) {
				at = last
			}
			last = at
			p.mu.Lock()
			*count += int64(n)
			p.mu.Unlock()
			q <- chunk{b: append([]byte(nil), buf[:n]...), at: at}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				_ = dst.Close()
			}
			break
		}
	}
	close(q)
	<-wdone
}

// hostOf is the IP of a TCP address.
func hostOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	h, _, _ := net.SplitHostPort(a.String())
	return h
}
