package replica

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"runtime/debug"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
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
//     message of a stream, the request of EpochEnds), coming from an
//     address its registered host resolves to; else codes.PermissionDenied.
//     A loopback peer matches a host that resolves to a loopback address:
//     both are this machine. This keeps a stray or misconfigured process
//     from fetching (and moving a partition's high watermark and ISR)
//     under another broker's id; it does not stop a process on a
//     registered broker's host from claiming that broker's id. The
//     peer's identity is proven only when the replication listener runs
//     mutual TLS with certificates matching the registrations, which
//     comes with the security work (DESIGN.md, "Listeners and security").

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

// peerCheckTimeout bounds the resolution of a registered host when a
// call is checked.
const peerCheckTimeout = 5 * time.Second

// serverOptions are the Replication server's limits and interceptors.
func (m *Manager) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxFollowerMessage(m.cfg.MaxPartitions)),
		grpc.MaxSendMsgSize(maxReplicationMessage),
		grpc.ChainUnaryInterceptor(m.recoverUnary),
		grpc.ChainStreamInterceptor(m.recoverStream),
	}
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

// checkFollower refuses a call that claims to come from broker id unless
// id is another broker registered in the cluster and the call comes from
// an address of its registered host.
func (m *Manager) checkFollower(ctx context.Context, id int32) error {
	if id < 0 || id == m.cfg.BrokerID {
		return status.Errorf(codes.PermissionDenied, "replication: a call from broker %d refused by broker %d", id, m.cfg.BrokerID)
	}
	b, ok := m.host.Snapshot().Broker(id)
	if !ok {
		return status.Errorf(codes.PermissionDenied, "replication: broker %d is not registered in the cluster", id)
	}
	p, ok := peer.FromContext(ctx)
	var from netip.Addr
	if ok {
		if ta, isTCP := p.Addr.(*net.TCPAddr); isTCP {
			from = ta.AddrPort().Addr().Unmap()
		}
	}
	if !from.IsValid() {
		return status.Errorf(codes.PermissionDenied, "replication: call claiming broker %d has no TCP peer address", id)
	}
	match, err := hostHasAddr(ctx, b.Host, from)
	if err != nil {
		return status.Errorf(codes.PermissionDenied, "replication: broker %d is registered at %q, which does not resolve: %v", id, b.Host, err)
	}
	if !match {
		return status.Errorf(codes.PermissionDenied, "replication: call claiming broker %d comes from %s, not from its registered host %q", id, from, b.Host)
	}
	return nil
}

// hostHasAddr reports whether host (an IP address or a name) is addr, a
// loopback addr matching any loopback address of host.
func hostHasAddr(ctx context.Context, host string, addr netip.Addr) (bool, error) {
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		ctx, cancel := context.WithTimeout(ctx, peerCheckTimeout)
		defer cancel()
		if addrs, err = net.DefaultResolver.LookupNetIP(ctx, "ip", host); err != nil {
			return false, err
		}
	}
	for _, a := range addrs {
		a = a.Unmap()
		if a == addr || a.IsLoopback() && addr.IsLoopback() {
			return true, nil
		}
	}
	return false, nil
}

// refused logs a refused call; the caller returns err.
func (m *Manager) refused(what string, err error) error {
	m.log.Warn("replication call refused", "call", what, "err", fmt.Sprint(status.Convert(err).Message()))
	return err
}
