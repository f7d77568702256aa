package zktest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections from its own address on 127.0.0.1 to a
// target (a ZooKeeper server). Block cuts every connection and refuses new
// ones, which a client sees as the server becoming unreachable: kept
// blocked past the session timeout, the server expires the client's
// session while other clients, connected directly, carry on. Unblock lets
// the client reconnect.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		blocked bool
		closed  bool
		conns   map[net.Conn]struct{}
	}
}

// NewProxy starts a proxy to target and registers its Close as cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("zktest: proxy: %v", err)
	}
	p := &Proxy{target: target, ln: ln}
	p.mu.conns = map[net.Conn]struct{}{}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's address, 127.0.0.1:PORT.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// ConnectString is a zookeeper.connect value through the proxy.
func (p *Proxy) ConnectString(chroot string) string { return p.Addr() + chroot }

// Block closes every forwarded connection and makes the proxy close new
// ones at once, until Unblock.
func (p *Proxy) Block() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.blocked = true
	for c := range p.mu.conns {
		_ = c.Close()
	}
}

// Unblock lets connections through again.
func (p *Proxy) Unblock() {
	p.mu.Lock()
	p.mu.blocked = false
	p.mu.Unlock()
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
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.mu.blocked || p.mu.closed {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.mu.Unlock()
		p.wg.Add(1)
		go p.forward(c)
	}
}

func (p *Proxy) forward(client net.Conn) {
	defer p.wg.Done()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	p.mu.Lock()
	if p.mu.blocked || p.mu.closed {
		p.mu.Unlock()
		_ = client.Close()
		_ = server.Close()
		return
	}
	p.mu.conns[client] = struct{}{}
	p.mu.conns[server] = struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	<-done
	<-done
	p.mu.Lock()
	delete(p.mu.conns, client)
	delete(p.mu.conns, server)
	p.mu.Unlock()
}
