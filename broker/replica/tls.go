package replica

import (
	"context"
	"crypto/tls"
	"net"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// This file runs the Replication service and the fetchers over mutual
// TLS when Config.ServerTLS and Config.ClientTLS are set.
//
//   - The server requires a client certificate that verifies against
//     its ClientCAs, whatever ClientAuth the given configuration has.
//   - A call is accepted only if the peer's verified certificate is
//     valid (x509 VerifyHostname) for the host that the broker id it
//     claims registered in the coordinator: a broker's certificate
//     proves its identity, where its address does not (guard.go).
//   - A fetcher verifies the leader's certificate against the host the
//     leader registered (the host it dials).
//
// gRPC needs ALPN "h2" on both sides; the server configuration's
// GetConfigForClient (tlsconfig.Server's, which swaps certificates on
// reload) is wrapped to add it to each configuration it returns.

// serverCredentials returns the Replication server's TLS credentials.
func serverCredentials(cfg *tls.Config) credentials.TransportCredentials {
	c := cfg.Clone()
	forGRPC(c)
	if get := c.GetConfigForClient; get != nil {
		c.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			inner, err := get(hello)
			if err != nil || inner == nil {
				return inner, err
			}
			inner = inner.Clone()
			forGRPC(inner)
			return inner, nil
		}
	}
	return credentials.NewTLS(c)
}

// forGRPC makes c require verified client certificates and offer h2.
func forGRPC(c *tls.Config) {
	c.ClientAuth = tls.RequireAndVerifyClientCert
	if !slices.Contains(c.NextProtos, "h2") {
		c.NextProtos = append(slices.Clone(c.NextProtos), "h2")
	}
}

// dialOption is the transport of a fetcher's connection to the leader
// at addr: TLS verifying the leader's certificate for the host in addr
// (which the leader registered), or plaintext.
func (m *Manager) dialOption(addr string) grpc.DialOption {
	if m.cfg.ClientTLS == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials())
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(m.cfg.ClientTLS(host)))
}

// ForHost adapts a fixed client configuration (tlsconfig.NewClient's) to
// Config.ClientTLS: a copy with ServerName set to the host dialed, whose
// certificate crypto/tls then verifies for it.
func ForHost(cfg *tls.Config) func(host string) *tls.Config {
	return func(host string) *tls.Config {
		c := cfg.Clone()
		c.ServerName = host
		return c
	}
}

// checkPeerCertificate refuses a call over TLS unless the peer's
// verified certificate is valid for host, the host broker id
// registered. Without TLS it accepts every call.
func (m *Manager) checkPeerCertificate(ctx context.Context, id int32, host string) error {
	if m.cfg.ServerTLS == nil {
		return nil
	}
	p, ok := peer.FromContext(ctx)
	if !ok {
		return status.Errorf(codes.PermissionDenied, "replication: broker %d: no peer information", id)
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return status.Errorf(codes.PermissionDenied, "replication: broker %d presented no verified certificate", id)
	}
	leaf := info.State.VerifiedChains[0][0]
	if err := leaf.VerifyHostname(host); err != nil {
		return status.Errorf(codes.PermissionDenied, "replication: the certificate of the caller claiming broker %d (subject %q) is not valid for %q, the host broker %d registered: %v", id, leaf.Subject.String(), host, id, err)
	}
	return nil
}
