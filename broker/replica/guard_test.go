package replica

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/proto/replpb"
	"github.com/twmb/franz-go/pkg/kerr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// guardHost is a Host with a fixed set of registered brokers and no
// partitions; asking for topic "panic" panics.
type guardHost struct{ snap *coord.Snapshot }

func (h guardHost) Snapshot() *coord.Snapshot { return h.snap }
func (h guardHost) Partitions() []*Partition  { return nil }
func (h guardHost) Partition(topic string, index int32) (*Partition, bool) {
	if topic == "panic" {
		panic("test: partition lookup panics")
	}
	return nil, false
}
func (h guardHost) PartitionState(context.Context, string, int32) (coord.PartitionState, int32, error) {
	return coord.PartitionState{}, 0, coord.ErrUnavailable
}
func (h guardHost) UpdatePartitionState(context.Context, string, int32, coord.PartitionState, int32) (int32, error) {
	return 0, coord.ErrUnavailable
}

// lockedLog keeps what a manager logs.
type lockedLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// startGuardedService serves the Replication service of broker 1 on
// 127.0.0.1 with brokers 2 (at 127.0.0.1), 3 (at an address that is not
// this machine's: a broker behind NAT or a proxy) and 4 (at localhost)
// registered, and returns a client.
func startGuardedService(t *testing.T, maxPartitions int) (replpb.ReplicationClient, *lockedLog) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	snap := &coord.Snapshot{Brokers: []coord.BrokerInfo{
		{ID: 1, Host: "127.0.0.1"}, {ID: 2, Host: "127.0.0.1"}, {ID: 3, Host: "192.0.2.7"}, {ID: 4, Host: "localhost"},
	}}
	logs := &lockedLog{}
	done := make(chan struct{})
	m := NewManager(Config{
		BrokerID: 1, LagTimeMax: time.Minute, FetchMaxBytes: 1 << 20, FetchBackoff: time.Second,
		HWCheckpointInterval: time.Minute, MaxPartitions: maxPartitions,
		Listener: ln, Logger: slog.New(slog.NewTextHandler(logs, nil)), Metrics: prometheus.NewRegistry(),
		Now: time.Now, Done: done,
	}, guardHost{snap})
	t.Cleanup(func() { close(done); m.Stop() })
	cc, err := grpc.NewClient("passthrough:///"+ln.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return replpb.NewReplicationClient(cc), logs
}

// openStream opens a stream as broker id, sends msg as its first message
// and returns the first answer or the error that ended the stream.
func openStream(t *testing.T, client replpb.ReplicationClient, id int32, parts ...*replpb.PartitionFetch) (*replpb.LeaderMessage, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	stream, err := client.Replicate(ctx)
	if err != nil {
		return nil, err
	}
	if err := stream.Send(&replpb.FollowerMessage{FollowerId: id, Partitions: parts}); err != nil {
		return nil, err
	}
	return stream.Recv()
}

// TestReplicationServiceAcceptsOnlyRegisteredPeers opens streams and
// EpochEnds calls claiming registered and unregistered broker ids: only
// a registered broker other than the leader is served, whatever address
// it calls from; the others get PermissionDenied naming the reason.
func TestReplicationServiceAcceptsOnlyRegisteredPeers(t *testing.T) {
	client, logs := startGuardedService(t, 100)
	start := &replpb.PartitionFetch{Topic: "none", Partition: 0, Kind: replpb.PartitionFetch_START}
	for _, tc := range []struct {
		id   int32
		want string // "" when served
	}{
		{2, ""},
		{3, ""}, // registered at another address: addresses are not identities
		{4, ""},
		{9, "not registered"},
		{1, "refused by broker 1"},
		{-1, "refused by broker 1"},
	} {
		msg, err := openStream(t, client, tc.id, start)
		if tc.want == "" {
			if err != nil || len(msg.GetPartitions()) != 1 || int16(msg.GetPartitions()[0].GetErrorCode()) != kerr.UnknownTopicOrPartition.Code {
				t.Fatalf("broker %d: got %v, %v; want UNKNOWN_TOPIC_OR_PARTITION for the unknown partition", tc.id, msg, err)
			}
		} else if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("broker %d: got %v, %v; want PermissionDenied saying %q", tc.id, msg, err, tc.want)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err = client.EpochEnds(ctx, &replpb.EpochEndsRequest{FollowerId: tc.id})
		cancel()
		if (tc.want == "") != (err == nil) || tc.want != "" && status.Code(err) != codes.PermissionDenied {
			t.Fatalf("EpochEnds as broker %d: %v", tc.id, err)
		}
	}
	if !strings.Contains(logs.String(), "replication call refused") {
		t.Fatalf("refusals not logged:\n%s", logs)
	}
}

// TestReplicationServiceRecoversPanicsAndBoundsMessages makes a stream's
// handling panic and sends a follower message over the size bound: each
// call alone ends (Internal, ResourceExhausted), the panic is logged
// with PanicMarker, and the service serves the next stream.
func TestReplicationServiceRecoversPanicsAndBoundsMessages(t *testing.T) {
	client, logs := startGuardedService(t, 10)
	ok := func() {
		t.Helper()
		msg, err := openStream(t, client, 2, &replpb.PartitionFetch{Topic: "none", Kind: replpb.PartitionFetch_START})
		if err != nil || len(msg.GetPartitions()) != 1 {
			t.Fatalf("stream after the failure: %v, %v", msg, err)
		}
	}
	_, err := openStream(t, client, 2, &replpb.PartitionFetch{Topic: "panic", Kind: replpb.PartitionFetch_START})
	if status.Code(err) != codes.Internal {
		t.Fatalf("panicking stream: %v, want Internal", err)
	}
	if !strings.Contains(logs.String(), PanicMarker+": panic in replication call") {
		t.Fatalf("panic not logged with %s:\n%s", PanicMarker, logs)
	}
	ok()
	huge := &replpb.PartitionFetch{Topic: strings.Repeat("x", maxFollowerMessage(10)), Kind: replpb.PartitionFetch_START}
	if _, err := openStream(t, client, 2, huge); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("message over the bound: %v, want ResourceExhausted", err)
	}
	ok()
}
