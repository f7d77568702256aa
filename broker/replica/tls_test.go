package replica

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stratastream/strata/broker/tlsconfig"
	"github.com/stratastream/strata/broker/tlsconfig/tlstest"
	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/proto/replpb"
	"github.com/twmb/franz-go/pkg/kerr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// startTLSService serves broker 1's Replication service over mutual TLS
// on 127.0.0.1 with serverCert, trusting ca, with brokers 2 (at
// 127.0.0.1) and 4 (at localhost) registered; it returns the address.
func startTLSService(t *testing.T, ca *tlstest.CA, serverCert *tlstest.Cert) string {
	t.Helper()
	dir := t.TempDir()
	srv, err := tlsconfig.NewServer(map[string]string{
		"ssl.keystore.location":   serverCert.WritePEMKeystore(t, filepath.Join(dir, "leader.pem"), ""),
		"ssl.truststore.location": tlstest.WritePEM(t, filepath.Join(dir, "ca.pem"), ca),
		"ssl.client.auth":         "none", // the Replication service requires certificates anyway
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	snap := &coord.Snapshot{Brokers: []coord.BrokerInfo{{ID: 1, Host: "127.0.0.1"}, {ID: 2, Host: "127.0.0.1"}, {ID: 4, Host: "localhost"}}}
	done := make(chan struct{})
	m := NewManager(Config{
		BrokerID: 1, LagTimeMax: time.Minute, FetchMaxBytes: 1 << 20, FetchBackoff: time.Second,
		HWCheckpointInterval: time.Minute, MaxPartitions: 100,
		Listener: ln, ServerTLS: srv.Config(),
		Logger: slog.New(slog.NewTextHandler(&lockedLog{}, nil)), Metrics: prometheus.NewRegistry(),
		Now: time.Now, Done: done,
	}, guardHost{snap})
	t.Cleanup(func() { close(done); m.Stop(); srv.Close() })
	return ln.Addr().String()
}

// tlsClient dials addr as a fetcher does, with ClientTLS trusting ca and
// presenting cert (none if nil).
func tlsClient(t *testing.T, addr string, ca *tlstest.CA, cert *tlstest.Cert) replpb.ReplicationClient {
	t.Helper()
	props := map[string]string{"ssl.truststore.certificates": string(ca.PEM())}
	if cert != nil {
		props["ssl.keystore.certificate.chain"] = string(cert.CertPEM())
		props["ssl.keystore.key"] = string(cert.KeyPEM(t, ""))
	}
	ccfg, err := tlsconfig.NewClient(props)
	if err != nil {
		t.Fatal(err)
	}
	fm := &Manager{cfg: Config{ClientTLS: ForHost(ccfg)}}
	cc, err := grpc.NewClient("passthrough:///"+addr, fm.dialOption(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return replpb.NewReplicationClient(cc)
}

// TestReplicationMutualTLS: over TLS a call is served only when the
// caller's certificate is valid for the host its claimed broker id
// registered; a follower refuses a leader whose certificate is not for
// the host it dials.
func TestReplicationMutualTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "cluster CA")
	leader := ca.Server(t, "127.0.0.1")
	addr := startTLSService(t, ca, leader)
	right := ca.Server(t, "127.0.0.1")
	otherHost := ca.Server(t, "broker-9.example")
	otherCA := tlstest.NewCA(t, "another CA").Server(t, "127.0.0.1")
	start := &replpb.PartitionFetch{Topic: "none", Partition: 0, Kind: replpb.PartitionFetch_START}

	for _, tc := range []struct {
		name     string
		cert     *tlstest.Cert
		id       int32
		wantCode codes.Code // codes.OK when served
		want     string
	}{
		{"right certificate", right, 2, codes.OK, ""},
		{"certificate for 127.0.0.1 claiming the broker at localhost", right, 4, codes.PermissionDenied, `not valid for "localhost"`},
		{"certificate of another host", otherHost, 2, codes.PermissionDenied, `not valid for "127.0.0.1"`},
		{"no certificate", nil, 2, codes.Unavailable, ""},
		{"certificate from another CA", otherCA, 2, codes.Unavailable, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := tlsClient(t, addr, ca, tc.cert)
			msg, err := openStream(t, client, tc.id, start)
			if tc.wantCode == codes.OK {
				if err != nil || len(msg.GetPartitions()) != 1 || int16(msg.GetPartitions()[0].GetErrorCode()) != kerr.UnknownTopicOrPartition.Code {
					t.Fatalf("got %v, %v; want UNKNOWN_TOPIC_OR_PARTITION for the unknown partition", msg, err)
				}
			} else if status.Code(err) != tc.wantCode || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, %v; want %v saying %q", msg, err, tc.wantCode, tc.want)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err = client.EpochEnds(ctx, &replpb.EpochEndsRequest{FollowerId: tc.id})
			if status.Code(err) != tc.wantCode {
				t.Fatalf("EpochEnds: %v, want %v", err, tc.wantCode)
			}
			t.Logf("refused as: %v", err)
		})
	}

	t.Run("leader certificate for another host", func(t *testing.T) {
		addr := startTLSService(t, ca, ca.Server(t, "broker-9.example"))
		client := tlsClient(t, addr, ca, right)
		_, err := openStream(t, client, 2, start)
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "127.0.0.1") {
			t.Fatalf("got %v, want Unavailable: the leader's certificate is not for 127.0.0.1", err)
		}
		t.Logf("refused as: %v", err)
	})

	t.Run("client side of a broker's tlsconfig.Server", func(t *testing.T) {
		dir := t.TempDir()
		self, err := tlsconfig.NewServer(map[string]string{
			"ssl.keystore.location":   right.WritePEMKeystore(t, filepath.Join(dir, "follower.pem"), ""),
			"ssl.truststore.location": tlstest.WritePEM(t, filepath.Join(dir, "ca.pem"), ca),
		})
		if err != nil {
			t.Fatal(err)
		}
		defer self.Close()
		fm := &Manager{cfg: Config{ClientTLS: self.ClientConfig}}
		cc, err := grpc.NewClient("passthrough:///"+addr, fm.dialOption(addr))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		msg, err := openStream(t, replpb.NewReplicationClient(cc), 2, start)
		if err != nil || len(msg.GetPartitions()) != 1 {
			t.Fatalf("got %v, %v; want the stream served", msg, err)
		}
	})

	t.Run("plaintext client", func(t *testing.T) {
		fm := &Manager{}
		cc, err := grpc.NewClient("passthrough:///"+addr, fm.dialOption(addr))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		if _, err := openStream(t, replpb.NewReplicationClient(cc), 2, start); err == nil {
			t.Fatal("a plaintext stream was served by a TLS listener")
		}
	})
}
