package replica

import (
	"context"
	"fmt"
	"runtime/debug"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/status"

	"github.com/stratastream/strata/broker/bufpool"
)

// This file guards the Replication service: what it accepts from the
// network before any partition is looked at.
//
//   - A panic in a call (a stream or an EpochEnds) is recovered by the
//     server's interceptors: logged at ERROR with PanicMarker, the call
//     ends with codes.Internal, the other calls and the broker go on.
//   - Message sizes are bounded: what a follower sends (partition names
//     and offsets) by maxFollowerMessage, what a leader sends by
//     maxReplicationMessage.
//   - A call is accepted only from a broker registered in the cluster
//     (the coordinator's snapshot) under the id it claims (the first
//     message of a stream, the request of EpochEnds), other than this
//     broker; else codes.PermissionDenied. This keeps a stray or
//     misconfigured process (an old broker of another cluster, a tool)
//     from fetching, and so from moving a partition's high watermark and
//     ISR, under an id no live broker has. The peer's address is not
//     matched against the registration: a broker may call from another
//     address than the one it advertises (several interfaces, NAT, a
//     proxy in front of it; the network fault tests run that way), and
//     an address proves nothing anyway. The peer's identity is proven
//     when the replication listener runs mutual TLS (Config.ServerTLS):
//     the caller's certificate must then be valid for the host its
//     broker id registered (tls.go).

// PanicMarker begins the message of the ERROR line logged when a
// replication call panics and is recovered; it is broker.PanicMarker,
// which the end-to-end tests look for in a broker's log.
const PanicMarker = "STRATA_PANIC"

// maxFollowerMessage bounds a message a follower sends: one entry per
// partition it fetches from this leader (a topic name of at most 249
// bytes and a few numbers, under 300 bytes), for as many partitions as
// maxPartitions allows a broker to host, plus 1 MiB.
func maxFollowerMessage(maxPartitions int) int {
	const perPartition = 300
	return 1<<20 + max(maxPartitions, 0)*perPartition
}

// serverOptions are the Replication server's limits and interceptors.
func (m *Manager) serverOptions() []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxFollowerMessage(m.cfg.MaxPartitions)),
		grpc.MaxSendMsgSize(maxReplicationMessage),
		grpc.ChainUnaryInterceptor(m.recoverUnary),
		grpc.ChainStreamInterceptor(m.recoverStream),
		grpc.ForceServerCodecV2(replicationCodec{}),
		experimental.BufferPool(bufpool.GRPC{}),
	}
	if m.cfg.ServerTLS != nil {
		opts = append(opts, grpc.Creds(serverCredentials(m.cfg.ServerTLS)))
	}
	return opts
}

func (m *Manager) recoverUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer m.recoverCall(info.FullMethod, &err)
	return handler(ctx, req)
}

func (m *Manager) recoverStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	defer m.recoverCall(info.FullMethod, &err)
	return handler(srv, ss)
}

// recoverCall, deferred, turns a panic of the call into codes.Internal.
func (m *Manager) recoverCall(method string, err *error) {
	if r := recover(); r != nil {
		m.log.Error(PanicMarker+": panic in replication call; ending the call", "method", method, "panic", r, "stack", string(debug.Stack()))
		*err = status.Error(codes.Internal, "replication: internal error")
	}
}

// checkFollower refuses a call (whose context is ctx) that claims to
// come from broker id unless id is another broker registered in the
// cluster and, over TLS, the caller's certificate is valid for the host
// that broker registered (tls.go).
func (m *Manager) checkFollower(ctx context.Context, id int32) error {
	if id < 0 || id == m.cfg.BrokerID {
		return status.Errorf(codes.PermissionDenied, "replication: a call from broker %d refused by broker %d", id, m.cfg.BrokerID)
	}
	b, ok := m.host.Snapshot().Broker(id)
	if !ok {
		return status.Errorf(codes.PermissionDenied, "replication: broker %d is not registered in the cluster", id)
	}
	return m.checkPeerCertificate(ctx, id, b.Host)
}

// refused logs a refused call; the caller returns err.
func (m *Manager) refused(what string, err error) error {
	m.log.Warn("replication call refused", "call", what, "err", fmt.Sprint(status.Convert(err).Message()))
	return err
}
