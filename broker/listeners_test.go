package broker

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/segment/poll"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestListenerSettings(t *testing.T) {
	c, err := ConfigFromProperties(map[string]string{
		"listeners":                      "internal://0.0.0.0:19092,EXTERNAL://:9092",
		"advertised.listeners":           "INTERNAL://b1.internal:19092,EXTERNAL://kafka.example.com:9092",
		"listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL",
		"inter.broker.listener.name":     "internal",
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := formatListenerList(c.Listeners); got != "INTERNAL://0.0.0.0:19092,EXTERNAL://:9092" {
		t.Errorf("listeners: %s", got)
	}
	if c.InterBrokerListener != "INTERNAL" || c.ListenerProtocols["EXTERNAL"] != ProtocolSASLSSL || !c.ListenerProtocols["EXTERNAL"].TLS() || !c.ListenerProtocols["EXTERNAL"].SASL() {
		t.Errorf("inter-broker %q, protocols %v", c.InterBrokerListener, c.ListenerProtocols)
	}
	// security.inter.broker.protocol names the listener of that name.
	c, err = ConfigFromProperties(map[string]string{
		"listeners":                      "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
		"security.inter.broker.protocol": "SSL",
	})
	if err != nil || c.InterBrokerListener != "SSL" {
		t.Fatalf("security.inter.broker.protocol=SSL: %q, %v", c.InterBrokerListener, err)
	}
	// One listener, whatever its name, is the inter-broker one.
	c, err = ConfigFromProperties(map[string]string{"listeners": "CLIENT://127.0.0.1:0", "listener.security.protocol.map": "CLIENT:PLAINTEXT"})
	if err != nil || c.InterBrokerListener != "CLIENT" {
		t.Fatalf("one listener: %q, %v", c.InterBrokerListener, err)
	}

	for i, tc := range []struct {
		props map[string]string
		key   string
		want  string
	}{
		{map[string]string{"listeners": "127.0.0.1:9092"}, "listeners", "NAME://host:port"},
		{map[string]string{"listeners": "A://127.0.0.1:1,A://127.0.0.1:2"}, "listeners", "twice"},
		{map[string]string{"listeners": "A://127.0.0.1:1,B://127.0.0.1:1"}, "listeners", "same port"},
		{map[string]string{"listeners": "A://127.0.0.1:70000"}, "listeners", "bad port"},
		{map[string]string{"listeners": ""}, "listeners", "no listener"},
		{map[string]string{"listeners": "EXTERNAL://127.0.0.1:0"}, "listener.security.protocol.map", "no security protocol"},
		{map[string]string{"listener.security.protocol.map": "PLAINTEXT:TLS"}, "listener.security.protocol.map", "unknown security protocol"},
		{map[string]string{"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners", "host clients can reach"},
		{map[string]string{"advertised.listeners": "OTHER://h:9092"}, "advertised.listeners", "not in listeners"},
		{map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "inter.broker.listener.name": "SSL", "security.inter.broker.protocol": "SSL"},
			"security.inter.broker.protocol", "not both"},
		{map[string]string{"listeners": "A://127.0.0.1:0,B://127.0.0.1:0", "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT"},
			"security.inter.broker.protocol", "not among the listeners"},
		{map[string]string{"inter.broker.listener.name": "NOPE"}, "inter.broker.listener.name", "not among the listeners"},
		{map[string]string{"listener.name.plaintext.no.such.setting": "1"}, "listener.name.plaintext.no.such.setting", "unknown"},
		{map[string]string{"listener.name.other.sasl.enabled.mechanisms": "PLAIN"}, "listener.name.other.sasl.enabled.mechanisms", "no listener OTHER"},
		{map[string]string{"listener.name.plaintext.sasl.enabled.mechanisms": "GSSAPI"}, "listener.name.plaintext.sasl.enabled.mechanisms", "not served"},
		{map[string]string{"connection.failed.authentication.delay.ms": "700000"}, "connection.failed.authentication.delay.ms", "less than connections.max.idle.ms"},
	} {
		_, err := ConfigFromProperties(tc.props)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Key != tc.key || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("#%d %v: got %v, want a ConfigError for %s saying %q", i, tc.props, err, tc.key, tc.want)
		}
	}
}

// TestListenersMetadataPerListener runs a broker with an internal and an
// external listener: a client on each is told the addresses of that
// listener, in Metadata, FindCoordinator and DescribeCluster.
func TestListenersMetadataPerListener(t *testing.T) {
	s := startServer(t, map[string]string{
		"listeners":                      "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
		"advertised.listeners":           "EXTERNAL://kafka.example.com:19092",
		"listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
		"inter.broker.listener.name":     "INTERNAL",
	})
	internal := s.ListenerAddr("internal").(*net.TCPAddr)
	external := s.ListenerAddr("EXTERNAL").(*net.TCPAddr)
	if s.Addr().String() != internal.String() || internal.Port == external.Port {
		t.Fatalf("Addr %s, internal %s, external %s", s.Addr(), internal, external)
	}
	for _, tc := range []struct {
		dial     string
		wantHost string
		wantPort int32
	}{
		{internal.String(), "127.0.0.1", int32(internal.Port)},
		{external.String(), "kafka.example.com", 19092},
	} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(tc.dial))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx := testCtx(t)
		mresp, err := cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrMetadataRequest())
		if err != nil {
			t.Fatalf("metadata on %s: %v", tc.dial, err)
		}
		meta := mresp.(*kmsg.MetadataResponse)
		if len(meta.Brokers) != 1 || meta.Brokers[0].Host != tc.wantHost || meta.Brokers[0].Port != tc.wantPort {
			t.Errorf("metadata on %s: brokers %+v, want %s:%d", tc.dial, meta.Brokers, tc.wantHost, tc.wantPort)
		}
		dresp, err := cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrDescribeClusterRequest())
		if err != nil {
			t.Fatalf("describe cluster on %s: %v", tc.dial, err)
		}
		if dc := dresp.(*kmsg.DescribeClusterResponse); len(dc.Brokers) != 1 || dc.Brokers[0].Host != tc.wantHost || dc.Brokers[0].Port != tc.wantPort {
			t.Errorf("describe cluster on %s: %+v", tc.dial, dc)
		}
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey = "g"
		fc.CoordinatorKeys = []string{"g"}
		// Seed broker only: the answer must not depend on which broker
		// of the metadata the request went to.
		var c kmsg.FindCoordinatorResponseCoordinator
		poll.Until(t, 30*time.Second, "the group coordinator is found", func() bool {
			fresp, err := cl.SeedBrokers()[0].Request(ctx, fc)
			if err != nil {
				t.Fatalf("find coordinator on %s: %v", tc.dial, err)
			}
			f := fresp.(*kmsg.FindCoordinatorResponse)
			if len(f.Coordinators) != 1 {
				t.Fatalf("find coordinator on %s: %+v", tc.dial, f)
			}
			c = f.Coordinators[0]
			return c.ErrorCode == 0
		})
		if c.Host != tc.wantHost || c.Port != tc.wantPort {
			t.Errorf("find coordinator on %s: %+v, want %s:%d", tc.dial, c, tc.wantHost, tc.wantPort)
		}
	}
	// Registered: the inter-broker listener's address, and both.
	self := s.self
	if self.Host != "127.0.0.1" || self.Port != int32(internal.Port) || len(self.Endpoints) != 2 ||
		self.Endpoints[1].Host != "kafka.example.com" || self.Endpoints[1].Listener != "EXTERNAL" {
		t.Errorf("registered %+v", self)
	}
}
