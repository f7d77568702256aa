package replica

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"

	"github.com/stratastream/strata/broker/bufpool"
)

// This file lets the broker's other inter-broker services (registered
// through Config.Services) share the replication listener's guard and
// dial other brokers' replication listeners the way the fetchers do.

// ErrNoReplicationAddr is returned by Dial for a broker that is not
// registered or has no replication listener.
var ErrNoReplicationAddr = errors.New("replica: broker has no replication address")

// CheckBroker refuses a call (whose context is ctx) that claims to come
// from broker id unless id is another broker registered in the cluster
// and, over TLS, the caller's certificate is valid for the host that
// broker registered: the Replication service's rule (guard.go). The error
// is a gRPC status (codes.PermissionDenied).
func (m *Manager) CheckBroker(ctx context.Context, id int32) error {
	if err := m.checkFollower(ctx, id); err != nil {
		return m.refused("inter-broker call", err)
	}
	return nil
}

// clientOptions are the options of every connection to broker addr's
// replication listener: its transport (tls.go), keepalives, the limit on
// a received message, the replication codec and unzeroed buffers
// (codec.go).
func (m *Manager) clientOptions(addr string) []grpc.DialOption {
	return []grpc.DialOption{
		m.dialOption(addr),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 5 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxReplicationMessage), grpc.ForceCodecV2(replicationCodec{})),
		experimental.WithBufferPool(bufpool.GRPC{}),
	}
}

// Dial returns a client connection to broker id's replication listener,
// over TLS when the fetchers use it, and the address dialed. The caller
// closes it.
func (m *Manager) Dial(id int32) (*grpc.ClientConn, string, error) {
	addr, ok := m.replicationAddr(id)
	if !ok {
		return nil, "", ErrNoReplicationAddr
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, m.clientOptions(addr)...)
	if err != nil {
		return nil, "", err
	}
	return cc, addr, nil
}
