package broker

import (
	"github.com/stratastream/strata/segment/poll"

	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// dribbler hands out its bytes and then fails, recording the largest
// buffer the frame reader had ready each time it read.
type dribbler struct {
	data    []byte
	served  int
	largest []int // served+len(p) at each Read: the buffer's size then
}

func (d *dribbler) Read(p []byte) (int, error) {
	d.largest = append(d.largest, d.served+len(p))
	if d.served == len(d.data) {
		return 0, io.ErrUnexpectedEOF
	}
	n := copy(p, d.data[d.served:])
	d.served += n
	return n, nil
}

// TestFrameBufferGrowsWithTheBytesThatArrive holds readFrameBody to its
// rule: the buffer is at most frameFirstChunk before any byte arrived and
// never more than frameGrowth times the bytes read when it grows, so a
// client that announces a large frame and sends little gets little; a
// frame that arrives whole comes out intact.
func TestFrameBufferGrowsWithTheBytesThatArrive(t *testing.T) {
	const announced = 100 << 20
	for i, sent := range []int{0, 1, 5000, frameFirstChunk, frameFirstChunk + 1, 1 << 20, 3<<20 + 7} {
		d := &dribbler{data: bytes.Repeat([]byte{7}, sent)}
		if _, err := readFrameBody(d, announced); err == nil {
			t.Fatalf("#%d: a frame cut short at %d bytes read without error", i, sent)
		}
		before := 0
		for _, size := range d.largest {
			if limit := max(frameFirstChunk, frameGrowth*before); size > limit {
				t.Fatalf("#%d: buffer of %d bytes with %d read, limit %d", i, size, before, limit)
			}
			before = min(size, sent)
		}
	}
	for i, size := range []int{8, frameFirstChunk, frameFirstChunk + 1, 5 << 20} {
		want := make([]byte, size)
		for j := range want {
			want[j] = byte(j * 31)
		}
		got, err := readFrameBody(bytes.NewReader(want), int32(size))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("#%d: frame of %d bytes: err %v, intact %v", i, size, err, bytes.Equal(got, want))
		}
	}
}

// apiVersionsOK sends an ApiVersions on rc and requires its answer.
func apiVersionsOK(t *testing.T, rc *rawConn, corr int32) {
	t.Helper()
	if resp := rc.request(corr, kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions: error %d", resp.ErrorCode)
	}
}

// dialFrom opens a raw connection to s from the local address ip.
func dialFrom(t *testing.T, s *Server, ip string) *rawConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatalf("dial from %s: %v", ip, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{t: t, c: c}
}

// TestMaxConnectionsPerIP opens connections from 127.0.0.1 (limit 2)
// and from 127.0.0.2 (override 3): the connection over an address's
// limit is closed at once and counted, the others are served, and a
// closed connection frees its place.
func TestMaxConnectionsPerIP(t *testing.T) {
	s := startServer(t, map[string]string{
		"max.connections.per.ip":           "2",
		"max.connections.per.ip.overrides": "127.0.0.2:3",
	})
	for _, tc := range []struct {
		ip    string
		limit int
	}{{"127.0.0.1", 2}, {"127.0.0.2", 3}} {
		var open []*rawConn
		for i := range tc.limit {
			rc := dialFrom(t, s, tc.ip)
			apiVersionsOK(t, rc, int32(i))
			open = append(open, rc)
		}
		refusedBefore := s.quotas.refused.Load()
		over := dialFrom(t, s, tc.ip)
		over.expectClosed()
		if got := s.quotas.refused.Load() - refusedBefore; got != 1 {
			t.Fatalf("%s: %d connections refused, want 1", tc.ip, got)
		}
		_ = open[0].c.Close()
		waitFor(t, "the closed connection to be uncounted", func() bool {
			s.quotas.mu.Lock()
			defer s.quotas.mu.Unlock()
			return s.quotas.mu.perIP[netip.MustParseAddr(tc.ip)] == tc.limit-1
		})
		apiVersionsOK(t, dialFrom(t, s, tc.ip), 9)
	}
}

// TestMaxConnectionsBlocksAccept opens max.connections connections: the
// accept loop then waits, so a further connection (taken by the kernel's
// backlog) is not served until one of them closes.
func TestMaxConnectionsBlocksAccept(t *testing.T) {
	s := startServer(t, map[string]string{"max.connections": "2"})
	a, b := dialRaw(t, s), dialRaw(t, s)
	apiVersionsOK(t, a, 1)
	apiVersionsOK(t, b, 1)
	waitFor(t, "the accept loop to wait at max.connections", s.quotas.waiting.Load)
	c := dialRaw(t, s) // connects: the listen backlog holds it
	c.send(5, kmsg.NewPtrApiVersionsRequest())
	if got := s.Stats().ConnectionsAccepted; got != 2 {
		t.Fatalf("accepted %d connections while waiting at max.connections=2", got)
	}
	_ = a.c.Close()
	if corr, _, err := c.readFrame(); err != nil || corr != 5 {
		t.Fatalf("third connection after one closed: corr %d err %v", corr, err)
	}
	if s.quotas.blockedNanos.Load() <= 0 {
		t.Fatal("time blocked at max.connections not counted")
	}
}

// paddedApiVersions is an ApiVersions v3 request frame (without its size
// prefix) of size bytes: the client software name fills it.
func paddedApiVersions(t *testing.T, corr int32, size int) []byte {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareVersion = "1"
	req.ClientSoftwareName = "x"
	base := len(frameWithCorr(req, corr))
	req.ClientSoftwareName = strings.Repeat("x", size-base+1)
	for len(frameWithCorr(req, corr)) > size { // the compact length's varint grew
		req.ClientSoftwareName = req.ClientSoftwareName[1:]
	}
	f := frameWithCorr(req, corr)
	if len(f) != size {
		t.Fatalf("padded ApiVersions of %d bytes, want %d", len(f), size)
	}
	return f
}

// TestQueuedMaxRequestBytesBlocksReaders fills queued.max.request.bytes
// with two requests held in a handler; another connection's reader then
// waits before reading its frame's body, and reads and is answered once
// the held requests are.
func TestQueuedMaxRequestBytesBlocksReaders(t *testing.T) {
	const frame = 40 << 10
	release := make(chan struct{})
	cfg := testConfig(t, map[string]string{"socket.request.max.bytes": "65536", "queued.max.request.bytes": "65536"})
	cfg.hooks.handle = func(r *request) {
		if r.corr == 100 {
			<-release
		}
	}
	s := startServerConfig(t, cfg)
	holder := dialRaw(t, s)
	holder.writeFrame(paddedApiVersions(t, 100, frame))
	holder.writeFrame(paddedApiVersions(t, 101, frame))
	waitFor(t, "both held requests to be read", func() bool { return s.reqMem.reserved() == 2*frame })

	waiter := dialRaw(t, s)
	waiter.writeFrame(paddedApiVersions(t, 7, frame))
	waitFor(t, "the other reader to wait for queued.max.request.bytes", func() bool { return s.reqMem.waiting.Load() == 1 })
	if got := s.reqMem.reserved(); got != 2*frame {
		t.Fatalf("%d bytes reserved while a reader waits, want %d", got, 2*frame)
	}
	close(release)
	for _, corr := range []int32{100, 101} {
		if got, _, err := holder.readFrame(); err != nil || got != corr {
			t.Fatalf("held request: corr %d err %v, want %d", got, err, corr)
		}
	}
	if got, _, err := waiter.readFrame(); err != nil || got != 7 {
		t.Fatalf("waiting connection: corr %d err %v", got, err)
	}
	waitFor(t, "every reservation to be released", func() bool { return s.reqMem.reserved() == 0 })
}

// TestQueuedBytesReleasedWhenConnectionDrops makes a handler panic with
// requests queued behind it: the connection closes, and the bytes of the
// requests it never answered are released.
func TestQueuedBytesReleasedWhenConnectionDrops(t *testing.T) {
	const frame = 4 << 10
	cfg := testConfig(t, map[string]string{"queued.max.request.bytes": "209715200"})
	var srv atomic.Pointer[Server]
	cfg.hooks.handle = func(r *request) {
		if r.corr == 1 {
			// The others are read while this one is handled; not
			// a test assertion (this is not the test's goroutine).
			poll.For(time.Minute, func() bool { return srv.Load().reqMem.reserved() >= 5*frame })
			panic("test: handler panic with requests queued")
		}
	}
	logs := &logLines{t: t}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s := startServerConfig(t, cfg)
	srv.Store(s)
	rc := dialRaw(t, s)
	for corr := int32(1); corr <= 5; corr++ {
		rc.writeFrame(paddedApiVersions(t, corr, frame))
	}
	rc.expectClosed()
	waitFor(t, "the unanswered requests' bytes to be released", func() bool { return s.reqMem.reserved() == 0 })
	checkServing(t, s)
	if len(logs.containing(PanicMarker)) != 1 {
		t.Fatalf("want the one recovered panic logged")
	}
}

// TestConnectionLimitSettings checks the settings' validation, with
// Kafka's rules.
func TestConnectionLimitSettings(t *testing.T) {
	good := []map[string]string{
		{"max.connections.per.ip.overrides": "127.0.0.1:5, localhost:0,[::1]:7,::2:3"},
		{"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "10.0.0.1:100"},
		{"queued.max.request.bytes": "104857600"},
		{"queued.max.request.bytes": "0"},
		{"max.connections": "0"},
	}
	for i, props := range good {
		if _, err := ConfigFromProperties(props); err != nil {
			t.Errorf("#%d: %v", i, err)
		}
	}
	c, _ := ConfigFromProperties(good[0])
	if got := perIPOverridesValue(&c); got != "127.0.0.1:5,::1:7,::2:3,localhost:0" {
		t.Errorf("overrides rendered as %q", got)
	}
	bad := []map[string]string{
		{"max.connections.per.ip": "0"},
		{"max.connections.per.ip.overrides": "127.0.0.1"},
		{"max.connections.per.ip.overrides": "127.0.0.1:-1"},
		{"max.connections.per.ip.overrides": "127.0.0.1:x"},
		{"max.connections.per.ip.overrides": "bad host:3"},
		{"max.connections.per.ip.overrides": "a:1,a:2"},
		{"queued.max.request.bytes": "1000"},
		{"max.connections": "-1"},
		{"strata.max.partitions.per.request": "0"},
	}
	for i, props := range bad {
		var ce *ConfigError
		if _, err := ConfigFromProperties(props); !errors.As(err, &ce) {
			t.Errorf("#%d: %v accepted (err %v)", i, props, err)
		}
	}
}

// TestRequestMemoryServesWaitersInOrder fills the pool and queues
// readers: they are granted in the order they came, as long as any byte
// is free (non-strict), a newcomer waits behind them, and a reader that
// stops waiting leaves without holding anything.
func TestRequestMemoryServesWaitersInOrder(t *testing.T) {
	m := newRequestMemory(10)
	never := make(chan struct{})
	if !m.reserve(10, never) {
		t.Fatal("first reservation refused")
	}
	granted := make(chan string, 4)
	wait := func(name string, n int64, stop chan struct{}) {
		want := m.waiting.Load() + 1
		go func() {
			if m.reserve(n, stop) {
				granted <- name
			} else {
				granted <- name + " stopped"
			}
		}()
		waitFor(t, name+" to wait", func() bool { return m.waiting.Load() == want })
	}
	quit := make(chan struct{})
	wait("a", 6, never)
	wait("quitter", 1, quit)
	wait("b", 6, never)
	wait("c", 1, never)
	close(quit)
	if got := <-granted; got != "quitter stopped" {
		t.Fatalf("got %q, want the quitter to stop", got)
	}
	for _, step := range []struct {
		release int64
		want    string
		waiting int64
	}{
		{4, "a", 2}, // 6 used: a gets 6 (12 used, non-strict)
		{6, "b", 1}, // the first holder's rest: b
		{6, "c", 0}, // a's: c
	} {
		m.release(step.release)
		if got := <-granted; got != step.want {
			t.Fatalf("granted %q, want %q", got, step.want)
		}
		waitFor(t, "the grant to be counted", func() bool { return m.waiting.Load() == step.waiting })
	}
	m.release(6)
	m.release(1)
	if m.reserved() != 0 {
		t.Fatalf("used %d after every release", m.reserved())
	}
}

// TestPerIPOverrideByHostname gives localhost a limit of 1: the name is
// resolved when the broker starts, so connections from 127.0.0.1 get it.
func TestPerIPOverrideByHostname(t *testing.T) {
	s := startServer(t, map[string]string{"max.connections.per.ip.overrides": "localhost:1"})
	first := dialFrom(t, s, "127.0.0.1")
	apiVersionsOK(t, first, 1)
	dialFrom(t, s, "127.0.0.1").expectClosed()
	apiVersionsOK(t, dialFrom(t, s, "127.0.0.2"), 2)
}
