package s3fault

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Proxy is a fault-injecting HTTP proxy in front of one S3 endpoint. It
// listens on 127.0.0.1; point the client's endpoint at URL, with
// path-style addressing. Its methods are safe for concurrent use.
type Proxy struct {
	target    *url.URL
	ln        net.Listener
	srv       *http.Server
	transport *http.Transport
	closed    chan struct{} // closed by Close: stalls end
	closeOnce sync.Once

	mu struct {
		sync.Mutex
		rules    []*activeRule
		rng      *rand.Rand
		requests map[Op]int64
		injected map[Key]int64
	}
}

// activeRule is a rule in force, with what it has picked so far.
type activeRule struct {
	Rule
	picked  int
	limiter *limiter // Throttle only
}

// Key names a count of injected faults.
type Key struct {
	Op    Op
	Fault Fault
}

// Start starts a proxy to target (the store's endpoint URL, such as
// "http://127.0.0.1:9000") on a free 127.0.0.1 port. seed makes the
// rules' draws repeatable: the same seed and the same sequence of
// requests pick the same requests.
func Start(target string, seed uint64) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("s3fault: target %q is not an http://host:port URL", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("s3fault: %w", err)
	}
	p := &Proxy{
		target: u,
		ln:     ln,
		closed: make(chan struct{}),
		transport: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConnsPerHost:   64,
			IdleConnTimeout:       30 * time.Second,
			ResponseHeaderTimeout: 2 * time.Minute,
			DisableCompression:    true, // pass bodies as the store sends them
		},
	}
	p.mu.rng = rand.New(rand.NewPCG(seed, 0x5eed))
	p.mu.requests = map[Op]int64{}
	p.mu.injected = map[Key]int64{}
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0), // aborted handlers are the point
	}
	go func() { _ = p.srv.Serve(ln) }() // returns ErrServerClosed on Close
	return p, nil
}

// URL is the proxy's endpoint, for the client's configuration.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Close stops the proxy and drops its connections.
func (p *Proxy) Close() error {
	p.closeOnce.Do(func() { close(p.closed) })
	err := p.srv.Close()
	p.transport.CloseIdleConnections()
	return err
}

// Set replaces the rules in force; no rule forwards every request
// untouched. Requests already being faulted finish as they started.
func (p *Proxy) Set(rules ...Rule) error {
	active := make([]*activeRule, 0, len(rules))
	for i, r := range rules {
		if err := r.validate(); err != nil {
			return fmt.Errorf("s3fault: rule %d: %w", i, err)
		}
		r.Ops = append([]Op(nil), r.Ops...)
		ar := &activeRule{Rule: r}
		if r.Fault == Throttle {
			ar.limiter = &limiter{rate: r.BytesPerSecond}
		}
		active = append(active, ar)
	}
	p.mu.Lock()
	p.mu.rules = active
	p.mu.Unlock()
	return nil
}

// Clear removes every rule: the store is healthy again.
func (p *Proxy) Clear() {
	p.mu.Lock()
	p.mu.rules = nil
	p.mu.Unlock()
}

// Counts are what the proxy saw and did.
type Counts struct {
	Requests map[Op]int64  // requests received, by operation
	Injected map[Key]int64 // faults injected, by operation and fault
}

// Counts returns a copy of the counters.
func (p *Proxy) Counts() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := Counts{Requests: map[Op]int64{}, Injected: map[Key]int64{}}
	for k, v := range p.mu.requests {
		c.Requests[k] = v
	}
	for k, v := range p.mu.injected {
		c.Injected[k] = v
	}
	return c
}

// Injected is how many times fault was injected into op requests.
func (p *Proxy) Injected(op Op, fault Fault) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.injected[Key{op, fault}]
}

// InjectedTotal is how many faults of the kind were injected, any
// operation.
func (p *Proxy) InjectedTotal(fault Fault) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	var n int64
	for k, v := range p.mu.injected {
		if k.Fault == fault {
			n += v
		}
	}
	return n
}

// Requests is how many op requests the proxy received.
func (p *Proxy) Requests(op Op) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.requests[op]
}

// String is the counts on one line, for logs.
func (c Counts) String() string {
	var b strings.Builder
	b.WriteString("requests:")
	for _, op := range Ops {
		if n := c.Requests[op]; n > 0 {
			fmt.Fprintf(&b, " %s=%d", op, n)
		}
	}
	b.WriteString("; injected:")
	for _, op := range Ops {
		for _, f := range Faults {
			if n := c.Injected[Key{op, f}]; n > 0 {
				fmt.Fprintf(&b, " %s/%s=%d", op, f, n)
			}
		}
	}
	return b.String()
}

// pick counts the request and returns the rule that faults it, if any.
func (p *Proxy) pick(req Request) *activeRule {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.requests[req.Op]++
	for _, r := range p.mu.rules {
		if !r.matches(req) || (r.Limit > 0 && r.picked >= r.Limit) {
			continue
		}
		if r.Fraction > 0 && r.Fraction < 1 && p.mu.rng.Float64() >= r.Fraction {
			continue
		}
		r.picked++
		p.mu.injected[Key{req.Op, r.Fault}]++
		return r
	}
	return nil
}

// ServeHTTP handles one request of the client.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := Classify(r)
	rule := p.pick(req)
	if rule == nil {
		p.forward(w, r, nil)
		return
	}
	switch rule.Fault {
	case Refuse:
		resetConn(w, false)
	case SlowDown:
		answerError(w, r, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.", rule.RetryAfter)
	case InternalError:
		answerError(w, r, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.", 0)
	case Delay:
		t := time.NewTimer(rule.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
		p.forward(w, r, nil)
	case Reset, Stall:
		if hasBody(r) {
			// Part of the upload arrives, then the connection dies (or
			// hangs first); nothing reaches the store.
			_, _ = io.CopyN(io.Discard, r.Body, rule.After) // the cut follows whatever the read did
			if rule.Fault == Stall {
				p.hold(r.Context(), rule.Delay)
			}
			resetConn(w, false)
			return
		}
		p.forward(w, r, rule)
	default:
		p.forward(w, r, rule)
	}
}

// hasBody reports whether the request carries a body.
func hasBody(r *http.Request) bool {
	return r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
}

// hopHeaders are the hop-by-hop headers a proxy does not forward.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Expect"}

// forward sends the request to the store and its answer back, doing what
// rule (nil: nothing) says to the bodies.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, rule *activeRule) {
	ctx := r.Context()
	var lim *limiter
	if rule != nil {
		lim = rule.limiter
	}
	var body io.Reader = r.Body
	if !hasBody(r) {
		body = http.NoBody
	} else if lim != nil {
		body = &limitedReader{ctx: ctx, r: r.Body, l: lim}
	}
	// r.RequestURI is the request target exactly as the client sent (and
	// signed) it.
	out, err := http.NewRequestWithContext(ctx, r.Method, p.target.Scheme+"://"+p.target.Host+r.RequestURI, body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out.ContentLength = r.ContentLength
	if !hasBody(r) {
		out.ContentLength = 0
	}
	out.Header = r.Header.Clone()
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	out.Host = r.Host // signed by the client
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		resetConn(w, false) // the store is unreachable: so is the proxy
		return
	}
	defer resp.Body.Close()

	fault := Fault("")
	if rule != nil {
		fault = rule.Fault
	}
	if fault == DropResponse {
		_, _ = io.Copy(io.Discard, resp.Body) // the store finishes its answer; the client hears nothing
		resetConn(w, false)
		return
	}
	h := w.Header()
	for k, vs := range resp.Header {
		h[k] = vs
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
	cut := int64(-1)
	if fault == Reset || fault == Truncate || fault == ShortBody || fault == Stall {
		cut = rule.After
	}
	if fault == ShortBody && resp.ContentLength > cut {
		h.Set("Content-Length", strconv.FormatInt(cut, 10))
		if cr := h.Get("Content-Range"); cr != "" {
			h.Set("Content-Range", shortenRange(cr, cut))
		}
	}
	w.WriteHeader(resp.StatusCode)
	var src io.Reader = resp.Body
	if lim != nil {
		src = &limitedReader{ctx: ctx, r: resp.Body, l: lim}
	}
	if cut < 0 {
		_, _ = io.Copy(w, src) // a client gone away is no concern of the proxy's
		return
	}
	_, _ = io.CopyN(w, src, cut)
	switch fault {
	case Reset:
		resetConn(w, true)
	case Stall:
		_ = http.NewResponseController(w).Flush() // the stall follows whatever got out
		p.hold(ctx, rule.Delay)
		resetConn(w, true)
	case Truncate:
		// Fewer bytes than Content-Length: the server closes the
		// connection after the handler returns.
		_ = http.NewResponseController(w).Flush()
	}
}

// hold waits for d (0: for ever), until the client goes away or the
// proxy closes.
func (p *Proxy) hold(ctx context.Context, d time.Duration) {
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-timeout:
	case <-ctx.Done():
	case <-p.closed:
	}
}

// shortenRange rewrites Content-Range "bytes s-e/t" to end n bytes after s.
func shortenRange(cr string, n int64) string {
	rest, ok := strings.CutPrefix(cr, "bytes ")
	if !ok {
		return cr
	}
	span, total, ok := strings.Cut(rest, "/")
	if !ok {
		return cr
	}
	s, _, ok := strings.Cut(span, "-")
	start, err := strconv.ParseInt(s, 10, 64)
	if !ok || err != nil {
		return cr
	}
	return fmt.Sprintf("bytes %d-%d/%s", start, start+n-1, total)
}

// answerError answers with S3's XML error document, as S3 does, after
// reading the request body (so the client hears the answer, not a broken
// upload).
func answerError(w http.ResponseWriter, r *http.Request, status int, code, msg string, retryAfter time.Duration) {
	if hasBody(r) {
		_, _ = io.Copy(io.Discard, r.Body) // only to get the body out of the way
	}
	id := requestID()
	h := w.Header()
	h.Set("Content-Type", "application/xml")
	h.Set("x-amz-request-id", id)
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64((retryAfter+time.Second-1)/time.Second), 10))
		h.Set("x-amz-retry-after", strconv.FormatInt(retryAfter.Milliseconds(), 10))
	}
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	fmt.Fprintf(w, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>%s</Message><Resource>%s</Resource><RequestId>%s</RequestId><HostId>s3fault</HostId></Error>",
		code, msg, xmlEscape(r.URL.Path), id)
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&apos;").Replace(s)
}

func requestID() string {
	var b [8]byte
	_, _ = crand.Read(b[:]) // crypto/rand.Read never fails
	return strings.ToUpper(hex.EncodeToString(b[:]))
}

// resetConn resets the client's connection (RST, not FIN). flush sends
// what the handler wrote first (only when it wrote a header).
func resetConn(w http.ResponseWriter, flush bool) {
	rc := http.NewResponseController(w)
	if flush {
		_ = rc.Flush() // the cut follows whatever got out
	}
	conn, _, err := rc.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // the server drops the connection
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close sends RST
	}
	_ = conn.Close() // nothing to do about a failed close of a connection being killed
}

// limiter passes bytes at rate per second, shared by every reader of it.
type limiter struct {
	rate int64
	mu   sync.Mutex
	next time.Time // when the bytes reserved so far have passed
}

// wait reserves n bytes and sleeps until they may pass.
func (l *limiter) wait(ctx context.Context, n int) error {
	l.mu.Lock()
	now := time.Now()
	if l.next.Before(now) {
		l.next = now
	}
	l.next = l.next.Add(time.Duration(int64(n) * int64(time.Second) / l.rate))
	at := l.next
	l.mu.Unlock()
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// limitedReader reads through a limiter, in pieces of a twentieth of a
// second's worth.
type limitedReader struct {
	ctx context.Context
	r   io.Reader
	l   *limiter
}

func (lr *limitedReader) Read(b []byte) (int, error) {
	if piece := int(max(lr.l.rate/20, 512)); len(b) > piece {
		b = b[:piece]
	}
	n, err := lr.r.Read(b)
	if n > 0 {
		if werr := lr.l.wait(lr.ctx, n); werr != nil && !errors.Is(err, io.EOF) {
			return n, werr
		}
	}
	return n, err
}
