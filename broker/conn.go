package broker

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratastream/strata/broker/bufpool"
	"github.com/stratastream/strata/broker/group"
	"github.com/stratastream/strata/broker/replica"
)

// PanicMarker begins the message of the ERROR line a broker logs when it
// recovers from a panic in a connection (reading or handling a request),
// a panic that closed that connection only (and package replica when it
// recovers a replication call's panic). The end-to-end tests fail when
// a broker's log holds it: a recovered panic is a bug even though the
// broker served on.
const PanicMarker = replica.PanicMarker

// connHooks are functions a test of this package sets in Config.hooks to
// run at fixed points of a connection's work, to make it panic there.
type connHooks struct {
	// read runs in the reader for each request it decoded.
	read func(*request)
	// handle runs in the processor before each request's handler.
	handle func(*request)
}

// maxInFlight bounds the requests a connection has read but not yet
// answered. The reader stops reading (and TCP pushes back on the client)
// when it is reached.
const maxInFlight = 8

// maxKeptBuffer is the largest write buffer a connection keeps between
// responses.
const maxKeptBuffer = 1 << 20

// conn is one client connection: readLoop decodes requests into queue,
// processLoop handles them in order and writes the responses.
type conn struct {
	s   *Server
	nc  net.Conn
	tcp *net.TCPConn // nil if nc is not TCP
	log *slog.Logger

	queue chan *request
	done  chan struct{} // closed when processLoop has finished

	// ctx is handed to every request (with the client, group.WithClient);
	// cancel is called when readLoop returns (the client went away, the
	// connection failed or sent a frame that was refused, it was idle) and
	// by stopReading at shutdown, so a request blocked in the group
	// coordinator returns.
	ctx    context.Context
	cancel context.CancelFunc
	// lis is the listener the connection came in on.
	lis *listener
	// auth is what the connection authenticated as (authenticate.go);
	// pending is the SASL exchange in progress, owned by the reader
	// until the first authentication is done and by the processor
	// after.
	auth    atomic.Pointer[authSession]
	pending *saslPending
	// host is the peer's IP address as Kafka shows it: "/" + IP.
	host string
	// addr is the peer's IP address, as the connection quotas count it.
	addr netip.Addr

	// inflight counts requests read and not yet answered; an idle timeout
	// with requests in flight does not close the connection.
	inflight atomic.Int32
	stopping atomic.Bool
	stopOnce sync.Once

	// Owned by processLoop.
	wbuf    []byte
	copyBuf []byte
}

// startConn registers a new connection and starts its goroutines, or
// closes it at once if its address has max.connections.per.ip (or its
// override) open already.
func (s *Server) startConn(l *listener, nc net.Conn) {
	addr := remoteAddr(nc)
	if ok, limit := s.quotas.add(addr); !ok {
		s.log.Info("rejected connection: the address already has its maximum of connections open", "remote", nc.RemoteAddr().String(), "limit", limit)
		_ = nc.Close() // refused; nothing was read from it
		return
	}
	c := &conn{
		lis:   l,
		addr:  addr,
		s:     s,
		nc:    nc,
		log:   s.log.With("remote", nc.RemoteAddr().String()),
		queue: make(chan *request, maxInFlight-1),
		done:  make(chan struct{}),
	}
	if l.tls != nil {
		// Not c.tcp: sendfile would bypass TLS.
		nc = tls.Server(nc, l.tls.Config())
		c.nc = nc
	} else {
		c.tcp, _ = nc.(*net.TCPConn)
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.host = "/" + nc.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(nc.RemoteAddr().String()); err == nil {
		c.host = "/" + host
	}
	s.mu.Lock()
	if s.shuttingDown() {
		s.mu.Unlock()
		c.cancel()
		_ = nc.Close()
		s.quotas.remove(addr)
		return
	}
	s.mu.conns[c] = struct{}{}
	s.connWG.Add(1)
	s.mu.Unlock()
	s.stats.connectionsAccepted.Add(1)
	s.stats.connectionsOpen.Add(1)
	l.conns.accepted()
	go c.readLoop()
	go c.processLoop()
}

// stopReading makes the reader stop after the frame it is reading; the
// requests already read are still answered, except those waiting in the
// group coordinator for a rebalance: the connection's context is
// cancelled at once (the reader may be blocked on a full queue behind
// one of them).
func (c *conn) stopReading() {
	c.stopOnce.Do(func() {
		c.stopping.Store(true)
		c.cancel()
		_ = c.nc.SetReadDeadline(time.Now())
	})
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// readLoop reads and decodes frames until the connection fails, a frame
// is refused, or the server shuts down. Closing queue on return tells
// processLoop to finish the queued requests and close the connection;
// cancelling the connection's context makes the requests that block in the
// group coordinator (JoinGroup, SyncGroup) return at once.
//
// Before it reads a frame's body the reader reserves the frame's size of
// queued.max.request.bytes, waiting while none is left (limits.go); the
// request carries the reservation until it is answered.
func (c *conn) readLoop() {
	defer close(c.queue)
	defer c.cancel()
	var held int64 // reserved for a request read and not yet queued
	defer func() {
		c.s.reqMem.release(held)
		if r := recover(); r != nil {
			c.log.Error(PanicMarker+": panic reading request; closing connection", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	sizeBuf := make([]byte, 4)
	if err := c.handshakeTLS(); err != nil {
		c.log.Info("closing connection", "listener", c.lis.name, "err", err)
		return
	}
	if c.session() == nil && !c.authenticateSASL(sizeBuf) {
		return
	}
	idle := c.s.cfg.ConnectionsMaxIdle
	for {
		_ = c.nc.SetReadDeadline(time.Now().Add(idle))
		// Checked after arming the deadline: stopReading sets the flag
		// before its own deadline, so either we see the flag here or its
		// deadline replaces ours.
		if c.stopping.Load() {
			return
		}
		req, n, err := c.readRequest(sizeBuf)
		if err != nil {
			switch {
			case c.stopping.Load():
			case isTimeout(err) && n == 0 && c.inflight.Load() > 0:
				continue // busy, not idle
			case isTimeout(err):
				c.log.Debug("closing idle connection", "idle", idle)
			case errors.Is(err, ErrFrameTooLarge), errors.Is(err, ErrFrameMalformed),
				errors.Is(err, ErrUnknownAPIKey), errors.Is(err, ErrUnsupportedVersion):
				c.s.stats.requestsRejected.Add(1)
				c.log.Info("closing connection", "err", err)
			case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, errStopped):
			default:
				c.log.Debug("connection read failed", "err", err)
			}
			return
		}
		held = req.reserved
		cl := group.Client{Host: c.host}
		if req.clientID != nil {
			cl.ID = *req.clientID
		}
		req.ctx = group.WithClient(c.ctx, cl)
		if h := c.s.cfg.hooks.read; h != nil {
			h(req)
		}
		c.inflight.Add(1)
		select {
		case c.queue <- req:
			held = 0
		case <-c.done:
			return
		}
	}
}

// errStopped ends a reader that was waiting for queued.max.request.bytes
// when its connection stopped.
var errStopped = errors.New("broker: connection stopped")

// readRequest reads and decodes one request: the size prefix, a
// reservation of that many bytes of queued.max.request.bytes, the body
// (after re-arming the idle deadline if the reservation waited), and the
// decoding. n is how many bytes of the size prefix were read. On error
// nothing stays reserved.
func (c *conn) readRequest(sizeBuf []byte) (req *request, n int, err error) {
	size, n, err := readFrameSize(c.nc, sizeBuf, c.s.cfg.SocketRequestMaxBytes)
	if err != nil {
		return nil, n, err
	}
	mem := c.s.reqMem
	start := time.Now()
	if !mem.reserve(int64(size), c.ctx.Done()) {
		return nil, n, errStopped
	}
	if time.Since(start) > time.Millisecond {
		_ = c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.ConnectionsMaxIdle))
	}
	frame, err := readFrameBody(c.nc, size)
	if err != nil {
		mem.release(int64(size))
		return nil, n, err
	}
	req, err = parseRequest(frame)
	if err != nil {
		bufpool.Put(frame)
		mem.release(int64(size))
		return nil, n, err
	}
	req.frame = frame
	req.reserved = int64(size)
	req.conn = c
	return req, n, nil
}

// processLoop handles the queued requests in order.
func (c *conn) processLoop() {
	defer func() {
		c.cancel()
		// Counted before the close, which the client sees.
		c.s.stats.connectionsOpen.Add(-1)
		c.lis.conns.closed()
		_ = c.nc.Close()
		close(c.done)
		// The requests left unanswered give their bytes back; the
		// reader closes the queue once it sees done.
		for req := range c.queue {
			c.s.reqMem.release(req.reserved)
		}
		c.s.mu.Lock()
		delete(c.s.mu.conns, c)
		c.s.mu.Unlock()
		c.s.quotas.remove(c.addr)
		c.s.shareConnClosed(c)
		c.s.connWG.Done()
	}()
	for req := range c.queue {
		ok := c.process(req)
		if ok && req.api != nil && req.api.reusesFrame {
			bufpool.Put(req.frame)
		}
		c.s.reqMem.release(req.reserved)
		c.inflight.Add(-1)
		if !ok {
			return
		}
	}
}

// process handles one request and writes its response. It returns false
// when the connection must be closed. A panicking handler closes only this
// connection.
//
// The request is counted (Stats, the request and error metrics, the
// latency histogram) before its response is written: a client that has
// its answer sees it counted. So the latency observed is that of handling
// the request and building its response, a long-polling fetch's wait
// included, and not the time the response takes to leave (which a slow
// reader stretches). The bytes that Fetch sends from files are counted as
// they are sent (writeRaw).
func (c *conn) process(req *request) (ok bool) {
	c.s.stats.requests.Add(1)
	start := time.Now()
	req.start = start
	observed := false
	defer func() {
		if !observed { // the handler failed or panicked: no response
			c.s.metrics.observeRequest(req.key, start)
		}
		if r := recover(); r != nil {
			c.log.Error(PanicMarker+": panic handling request; closing connection", "key", req.key, "version", req.version, "panic", r, "stack", string(debug.Stack()))
			ok = false
		}
	}()
	if h := c.s.cfg.hooks.handle; h != nil {
		h(req)
	}
	if c.sessionExpired(req.key) {
		c.log.Info("closing connection", "key", req.key, "err", errSessionExpired)
		return false
	}
	var rep reply
	var err error
	if req.unsupported {
		rep = apiVersionsUnsupported(req)
	} else {
		rep, err = req.api.handle(c.s, req)
	}
	if err != nil {
		c.log.Info("closing connection", "key", req.key, "version", req.version, "err", err)
		return false
	}
	if rep.msg != nil {
		c.s.metrics.countResponseErrors(req.key, rep.msg)
	}
	c.s.addRequestThrottle(req, &rep, time.Since(start))
	c.s.metrics.observeRequest(req.key, start)
	observed = true
	before := rep.throttleMs > 0 && rep.throttleBefore()
	if rep.throttleMs > 0 {
		c.s.clientQuotas.throttle[rep.throttleType].Observe(float64(rep.throttleMs) / 1000)
	}
	if before {
		c.throttleWait(rep.throttleMs) // an old version: delay the response
	}
	if !rep.none {
		if err := c.write(req.corr, rep); err != nil {
			if !errors.Is(err, net.ErrClosed) {
				c.log.Debug("writing response failed", "key", req.key, "err", err)
			}
			return false
		}
	}
	if rep.throttleMs > 0 && !before && !rep.closeConn {
		c.throttleWait(rep.throttleMs) // KIP-219: muted after the response
	}
	return !rep.closeConn
}

// write sends one response frame.
func (c *conn) write(corr int32, rep reply) error {
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.ConnectionsMaxIdle))
	defer func() {
		if cap(c.wbuf) > maxKeptBuffer {
			c.wbuf = nil
		}
	}()
	if rep.raw == nil {
		c.wbuf = encodeResponse(c.wbuf[:0], corr, rep.msg)
		_, err := c.nc.Write(c.wbuf)
		return err
	}
	if rep.raw.release != nil {
		defer rep.raw.release()
	}
	return c.writeRaw(corr, rep.raw)
}

// writeRaw sends a response whose body holds file ranges: bytes are
// gathered and written, and each file range goes out by sendfile (or by a
// copy when zero copy is off or the connection is not TCP).
//
// FetchZeroCopyBytes and FetchCopiedBytes count the bytes each sendfile
// or copy reports sent, which are known only once it returns: the last
// range may reach the client before it is counted. The connection handles
// its next request only after this returns, so a later response on the
// same connection is written after the count.
func (c *conn) writeRaw(corr int32, body *rawBody) error {
	c.wbuf = appendResponseHeader(c.wbuf[:0], corr, body.flexible)
	size := int64(len(c.wbuf)-4) + body.size
	if size > 1<<31-1 {
		return fmt.Errorf("broker: response of %d bytes", size)
	}
	binary.BigEndian.PutUint32(c.wbuf, uint32(size))
	zeroCopy := c.s.cfg.ZeroCopy && sendfileSupported && c.tcp != nil
	if zeroCopy && len(body.pieces) > 1 {
		if err := setCork(c.tcp, true); err == nil {
			defer func() { _ = setCork(c.tcp, false) }()
		}
	}
	flush := func() error {
		if len(c.wbuf) == 0 {
			return nil
		}
		_, err := c.nc.Write(c.wbuf)
		c.wbuf = c.wbuf[:0]
		return err
	}
	for _, p := range body.pieces {
		if p.file == nil {
			c.wbuf = append(c.wbuf, p.buf...)
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		if zeroCopy {
			n, err := sendFileRange(c.tcp, p.file, p.pos, p.size)
			c.s.stats.fetchZeroCopyBytes.Add(n)
			if err != nil {
				return err
			}
			continue
		}
		n, err := c.copyRange(p.file, p.pos, p.size)
		c.s.stats.fetchCopiedBytes.Add(n)
		if err != nil {
			return err
		}
	}
	return flush()
}

// copyRange sends a file range by reading it into a buffer and writing
// it: the user-space path that zero copy is measured against.
func (c *conn) copyRange(f *os.File, pos, size int64) (int64, error) {
	if c.copyBuf == nil {
		c.copyBuf = make([]byte, 64<<10)
	}
	var done int64
	for done < size {
		b := c.copyBuf[:min(int64(len(c.copyBuf)), size-done)]
		n, err := f.ReadAt(b, pos+done)
		if n > 0 {
			if _, werr := c.nc.Write(b[:n]); werr != nil {
				return done, werr
			}
			done += int64(n)
		}
		if err != nil && done < size {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return done, err
		}
	}
	return done, nil
}
