package broker

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stratastream/strata/broker/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Authentication of a connection, by its listener's security protocol:
//
//   - SSL and SASL_SSL connections start with a TLS handshake, bounded by
//     the idle timeout, before any request is read. On SSL the principal
//     is the client certificate's mapped name (ssl.principal.mapping.rules)
//     when one was presented and verified, else User:ANONYMOUS.
//   - SASL_PLAINTEXT and SASL_SSL connections then authenticate before
//     anything else: only ApiVersions, SaslHandshake and SaslAuthenticate
//     are read (any other request closes the connection, as in Kafka) until
//     the exchange succeeds. A SaslHandshake v0 is followed by raw SASL
//     tokens, each a 4-byte length and the bytes, rather than
//     SaslAuthenticate requests. A failed exchange answers
//     SASL_AUTHENTICATION_FAILED (v1) and closes the connection after
//     connection.failed.authentication.delay.ms.
//   - Re-authentication (KIP-368): with connections.max.reauth.ms set, a
//     SaslAuthenticate v1+ answer carries the session's lifetime, the
//     lesser of that and the credential's; the client authenticates again
//     on the same connection (SaslHandshake v1 + SaslAuthenticate, same
//     mechanism and principal) before it ends, and the first other request
//     after the end closes the connection.
//
// The reader runs the initial authentication itself, before it queues any
// request, so the processor is idle until the connection is authenticated;
// re-authentication requests go through the queue like any other.

// anonymous is the principal of an unauthenticated connection.
const anonymous = "User:ANONYMOUS"

// authSession is what a connection authenticated as.
type authSession struct {
	principal string
	// mechanism is the SASL mechanism, "" for none.
	mechanism string
	// expires is when the session ends (re-authentication), zero for
	// never.
	expires time.Time
	// token: authenticated with a delegation token (delegation_tokens.go),
	// so it may not create, renew, expire or describe tokens.
	token bool
}

// saslPending is the exchange a SaslHandshake started.
type saslPending struct {
	mechanism string
	exchange  sasl.Session
	// raw: the handshake was v0, so the tokens come as raw frames.
	raw bool
}

// session is what the connection is authenticated as, nil before it is
// (on a SASL listener, during the first exchange).
func (c *conn) session() *authSession { return c.auth.Load() }

// handshakeTLS runs the TLS handshake of a connection on an SSL or
// SASL_SSL listener and, on SSL, sets the principal from the client
// certificate. On a listener without TLS it sets the anonymous session at
// once, or leaves it unset for SASL.
func (c *conn) handshakeTLS() error {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		if !c.lis.protocol.SASL() {
			c.auth.Store(&authSession{principal: anonymous})
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.s.cfg.ConnectionsMaxIdle)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		c.s.metrics.authFailed(c.lis.name, "tls")
		return fmt.Errorf("TLS handshake: %w", err)
	}
	if c.lis.protocol.SASL() {
		return nil
	}
	p := anonymous
	if name, ok := c.lis.tls.Principal(tc.ConnectionState()); ok {
		p = name
	}
	c.auth.Store(&authSession{principal: p})
	c.s.metrics.authSucceeded(c.lis.name, "tls")
	return nil
}

// authenticateSASL runs the first SASL exchange of a connection, from the
// reader. It returns false when the connection must close.
func (c *conn) authenticateSASL(sizeBuf []byte) bool {
	for c.session() == nil {
		_ = c.nc.SetReadDeadline(time.Now().Add(c.s.cfg.ConnectionsMaxIdle))
		if c.stopping.Load() {
			return false
		}
		if p := c.pending; p != nil && p.raw {
			if !c.rawSASLToken(sizeBuf, p) {
				return false
			}
			continue
		}
		req, _, err := c.readRequest(sizeBuf)
		if err != nil {
			c.log.Debug("closing connection during authentication", "err", err)
			return false
		}
		switch req.key {
		case kmsg.ApiVersions.Int16(), kmsg.SASLHandshake.Int16(), kmsg.SASLAuthenticate.Int16():
		default:
			c.s.reqMem.release(req.reserved)
			c.s.stats.requestsRejected.Add(1)
			c.log.Info("closing connection: a request before SASL authentication", "key", req.key, "listener", c.lis.name)
			c.s.metrics.authFailed(c.lis.name, "")
			return false
		}
		req.ctx = c.ctx
		ok := c.process(req)
		c.s.reqMem.release(req.reserved)
		if !ok {
			return false
		}
	}
	return true
}

// rawSASLToken reads one raw SASL token (after a SaslHandshake v0) and
// writes the answer. A failure closes the connection after the delay, as
// the v0 exchange has no way to say why.
func (c *conn) rawSASLToken(sizeBuf []byte, p *saslPending) bool {
	size, _, err := readFrameSize(c.nc, sizeBuf, c.s.cfg.SocketRequestMaxBytes)
	if err != nil {
		return false
	}
	if !c.s.reqMem.reserve(int64(size), c.ctx.Done()) {
		return false
	}
	defer c.s.reqMem.release(int64(size))
	token, err := readFrameBody(c.nc, size)
	if err != nil {
		return false
	}
	challenge, err := c.saslStep(p, token)
	if err != nil {
		c.log.Info("SASL authentication failed", "mechanism", p.mechanism, "err", err)
		c.delayFailure()
		return false
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.ConnectionsMaxIdle))
	out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(challenge)), uint32(len(challenge)))
	if _, err := c.nc.Write(append(out, challenge...)); err != nil {
		return false
	}
	return true
}

// saslStep feeds msg to the pending exchange; once it is done, the
// connection's session is set (or replaced, on re-authentication) and
// the exchange ends.
func (c *conn) saslStep(p *saslPending, msg []byte) ([]byte, error) {
	challenge, done, err := p.exchange.Step(msg)
	if err != nil {
		c.pending = nil
		c.s.metrics.authFailed(c.lis.name, p.mechanism)
		return nil, err
	}
	if !done {
		return challenge, nil
	}
	c.pending = nil
	principal := p.exchange.Principal()
	if old := c.session(); old != nil && old.principal != principal {
		c.s.metrics.authFailed(c.lis.name, p.mechanism)
		return nil, fmt.Errorf("cannot change principals during re-authentication from %s to %s", old.principal, principal)
	}
	sess := &authSession{principal: principal, mechanism: p.mechanism}
	if ts, ok := p.exchange.(sasl.TokenSession); ok && ts.TokenAuthenticated() {
		sess.token = true
	}
	if reauth := c.lis.maxReauth; reauth > 0 {
		life := reauth
		if l := p.exchange.Lifetime(); l > 0 && l < life {
			life = l
		}
		sess.expires = c.s.nowFn().Add(life)
	}
	c.auth.Store(sess)
	c.s.metrics.authSucceeded(c.lis.name, p.mechanism)
	return challenge, nil
}

// delayFailure waits connection.failed.authentication.delay.ms before a
// connection that failed to authenticate is closed, so a client retrying
// a wrong password at once is slowed down; shutdown cuts it short.
func (c *conn) delayFailure() {
	d := c.s.cfg.FailedAuthenticationDelay
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.s.closed:
	}
}

// sessionExpired says the connection's session ended and it must
// re-authenticate before any request but the SASL ones.
func (c *conn) sessionExpired(key int16) bool {
	s := c.session()
	if s == nil || s.expires.IsZero() || !c.s.nowFn().After(s.expires) {
		return false
	}
	return key != kmsg.SASLHandshake.Int16() && key != kmsg.SASLAuthenticate.Int16()
}

// illegalSASLState is the answer to a SASL request out of turn.
var errIllegalSASLState = kerr.IllegalSaslState

func init() { register(17, 0, 1, handleSASLHandshake) }

// handleSASLHandshake starts an exchange of the mechanism asked for: on a
// SASL listener, before the connection is authenticated, or, for
// re-authentication (v1 only), with the mechanism it authenticated with.
func handleSASLHandshake(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	c := r.conn
	if c == nil || c.lis.sasl == nil {
		resp.ErrorCode = errIllegalSASLState.Code
		return reply{msg: resp}, nil
	}
	resp.SupportedMechanisms = slices.Clone(c.lis.sasl.Mechanisms())
	old := c.session()
	switch {
	case c.pending != nil, old != nil && r.version == 0:
		resp.ErrorCode = errIllegalSASLState.Code
		return reply{msg: resp, closeConn: true}, nil
	case old != nil && old.mechanism != req.Mechanism:
		c.log.Info("re-authentication with another SASL mechanism refused", "was", old.mechanism, "asked", req.Mechanism)
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return reply{msg: resp, closeConn: true}, nil
	}
	ex, err := c.lis.sasl.NewSession(req.Mechanism)
	if err != nil {
		c.log.Info("SASL mechanism refused", "mechanism", req.Mechanism, "err", err)
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return reply{msg: resp, closeConn: true}, nil
	}
	c.pending = &saslPending{mechanism: req.Mechanism, exchange: ex, raw: r.version == 0}
	return reply{msg: resp}, nil
}

func init() { register(36, 0, 2, handleSASLAuthenticate) }

// handleSASLAuthenticate takes the next message of the exchange a
// SaslHandshake started.
func handleSASLAuthenticate(s *Server, r *request) (reply, error) {
	req := r.kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	c := r.conn
	if c == nil || c.pending == nil || c.pending.raw {
		resp.ErrorCode = errIllegalSASLState.Code
		msg := "SaslAuthenticate without a SaslHandshake v1 before it"
		resp.ErrorMessage = &msg
		return reply{msg: resp, closeConn: true}, nil
	}
	p := c.pending
	challenge, err := c.saslStep(p, req.SASLAuthBytes)
	if err != nil {
		c.log.Info("SASL authentication failed", "mechanism", p.mechanism, "err", err)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := fmt.Sprintf("Authentication failed during authentication with SASL mechanism %s: %s", p.mechanism, sasl.PublicMessage(err))
		resp.ErrorMessage = &msg
		c.delayFailure()
		return reply{msg: resp, closeConn: true}, nil
	}
	resp.SASLAuthBytes = challenge
	if sess := c.session(); sess != nil && c.pending == nil && !sess.expires.IsZero() && r.version >= 1 {
		resp.SessionLifetimeMillis = max(sess.expires.Sub(s.nowFn()).Milliseconds(), 1)
	}
	return reply{msg: resp}, nil
}

// errSessionExpired closes a connection whose session ended.
var errSessionExpired = errors.New("broker: the SASL session expired; the client did not re-authenticate (connections.max.reauth.ms)")
