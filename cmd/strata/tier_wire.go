package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/strataapi"
)

// strataConn is one connection to a broker for Strata's own APIs, which
// franz-go will not send (they are not in ApiVersions): dialed with the
// client's TLS settings and authenticated with its SASL mechanism, then
// one request at a time.
type strataConn struct {
	conn net.Conn
	corr int32
}

// dialStrata connects to addr and authenticates as sec says.
func dialStrata(ctx context.Context, addr string, sec *clientSecurity) (*strataConn, error) {
	d := net.Dialer{Timeout: dialTimeout}
	var conn net.Conn
	var err error
	if sec.tls != nil {
		cfg := sec.tls.Clone()
		if cfg.ServerName == "" {
			host, _, _ := net.SplitHostPort(addr) // addr came from metadata as host:port
			cfg.ServerName = host
		}
		conn, err = (&tls.Dialer{NetDialer: &d, Config: cfg}).DialContext(ctx, "tcp", addr)
	} else {
		conn, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	c := &strataConn{conn: conn}
	if dl, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(dl); err != nil {
			conn.Close() // the deadline error is the one to report
			return nil, err
		}
	}
	if sec.sasl != nil {
		if err := c.authenticate(ctx, addr, sec); err != nil {
			conn.Close() // the authentication error is the one to report
			return nil, fmt.Errorf("SASL %s: %w", sec.sasl.Name(), err)
		}
	}
	return c, nil
}

func (c *strataConn) close() { c.conn.Close() } // read-only requests: nothing to lose

// authenticate runs SaslHandshake v1 and SaslAuthenticate v2 rounds, as
// franz-go does on its own connections.
func (c *strataConn) authenticate(ctx context.Context, addr string, sec *clientSecurity) error {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, sec.sasl.Name()
	hsResp := hs.ResponseKind().(*kmsg.SASLHandshakeResponse)
	if err := c.roundTrip(hs, hsResp); err != nil {
		return err
	}
	if err := kerr.ErrorForCode(hsResp.ErrorCode); err != nil {
		return err
	}
	session, clientWrite, err := sec.sasl.Authenticate(ctx, addr)
	if err != nil {
		return err
	}
	for done, rounds := false, 0; !done || len(clientWrite) > 0; rounds++ {
		if rounds > 16 {
			return errors.New("more than 16 rounds")
		}
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 2, clientWrite
		resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		if err := c.roundTrip(req, resp); err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			if resp.ErrorMessage != nil {
				return fmt.Errorf("%w: %s", err, *resp.ErrorMessage)
			}
			return err
		}
		clientWrite = nil
		if !done {
			if done, clientWrite, err = session.Challenge(resp.SASLAuthBytes); err != nil {
				return err
			}
		}
	}
	return nil
}

// roundTrip sends req and decodes its answer into resp.
func (c *strataConn) roundTrip(req kmsg.Request, resp kmsg.Response) error {
	c.corr++
	return strataapi.RoundTrip(c.conn, "strata-cli", c.corr, req, resp)
}

// describeTieredStorage asks the broker at addr for topics (nil: every
// tiered partition it leads).
func describeTieredStorage(ctx context.Context, addr string, sec *clientSecurity, topics []strataapi.DescribeTieredStorageRequestTopic) (*strataapi.DescribeTieredStorageResponse, error) {
	c, err := dialStrata(ctx, addr, sec)
	if err != nil {
		return nil, fmt.Errorf("broker %s: %w", addr, err)
	}
	defer c.close()
	req := &strataapi.DescribeTieredStorageRequest{Topics: topics}
	resp := req.ResponseKind().(*strataapi.DescribeTieredStorageResponse)
	if err := c.roundTrip(req, resp); err != nil {
		return nil, fmt.Errorf("broker %s: DescribeTieredStorage: %w", addr, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("broker %s: DescribeTieredStorage: %w", addr, err)
	}
	return resp, nil
}

func brokerAddr(host string, port int32) string {
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}

// msTime is a Unix millisecond time in UTC.
func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
