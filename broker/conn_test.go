package broker

import (
	"context"
	"encoding/binary"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// checkServing proves the server still answers on a fresh connection.
func checkServing(t *testing.T, s *Server) {
	t.Helper()
	rc := dialRaw(t, s)
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1.0"
	rc.send(42, req)
	corr, body, err := rc.readFrame()
	if err != nil || corr != 42 {
		t.Fatalf("fresh connection: corr %d err %v", corr, err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	decodeResponse(t, resp, body)
	if resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
		t.Fatalf("ApiVersions: %+v", resp)
	}
}

func TestApiVersionsAdvertisesExactlyTheRegistry(t *testing.T) {
	s := startServer(t, nil)
	rc := dialRaw(t, s)
	for _, v := range []int16{0, 1, 2, 3} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1.0"
		rc.send(int32(v), req)
		corr, body, err := rc.readFrame()
		if err != nil || corr != int32(v) {
			t.Fatalf("v%d: corr %d err %v", v, corr, err)
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = v
		decodeResponse(t, resp, body) // v0 header even at v3
		got := map[int16][2]int16{}
		for _, k := range resp.ApiKeys {
			got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
		}
		// The conformance table's Strata column (kafka39_apis.go).
		want := map[int16][2]int16{}
		for _, a := range Kafka39APIs {
			if a.Served() {
				want[a.Key] = [2]int16{a.StrataMin, a.StrataMax}
			}
		}
		if len(got) != len(want) {
			t.Fatalf("v%d: advertised %v, want %v", v, got, want)
		}
		for k, w := range want {
			if got[k] != w {
				t.Fatalf("v%d: key %d advertised %v, want %v", v, k, got[k], w)
			}
		}
	}
	// v3 with an illegal software name.
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "-bad-", "1"
	rc.send(9, req)
	_, body, err := rc.readFrame()
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	decodeResponse(t, resp, body)
	if resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("bad software name: error %d", resp.ErrorCode)
	}
}

func TestApiVersionsUnsupportedVersion(t *testing.T) {
	s := startServer(t, nil)
	rc := dialRaw(t, s)
	// ApiVersions v99: header as for v3+, body we cannot know.
	frame := []byte{0, 18, 0, 99, 0, 0, 0, 5, 0, 3, 'a', 'b', 'c', 0, 0xde, 0xad}
	rc.writeFrame(frame)
	corr, body, err := rc.readFrame()
	if err != nil || corr != 5 {
		t.Fatalf("corr %d err %v", corr, err)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	decodeResponse(t, resp, body)
	if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != 18 || resp.ApiKeys[0].MaxVersion != 4 {
		t.Fatalf("got %+v", resp)
	}
	// The connection stays usable.
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 1
	rc.send(6, req)
	if corr, _, err := rc.readFrame(); err != nil || corr != 6 {
		t.Fatalf("after unsupported version: corr %d err %v", corr, err)
	}
}

func TestBadFramesCloseOnlyTheirConnection(t *testing.T) {
	s := startServer(t, map[string]string{"socket.request.max.bytes": "1000"})
	cl := newClient(t, s)
	createTopic(t, cl, "bad", 1, nil)
	produceRaw(t, cl, "bad", 0, buildBatch(t, segment.CodecNone, 3))

	// An innocent connection with a long poll in flight the whole time:
	// its MaxWait outlasts the test, so only an append can end it.
	bystander := dialRaw(t, s)
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 11
	fetch.MaxWaitMillis, fetch.MinBytes, fetch.MaxBytes = math.MaxInt32, 1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "bad"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes = 3, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	bystander.send(100, fetch)
	waitFetchesWaiting(t, s, 1)

	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"unknown api key", []byte{0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0xff, 0xff}},
		{"unknown api key 8 (not served yet)", []byte{0, 8, 0, 1, 0, 0, 0, 1, 0xff, 0xff}},
		{"unsupported version", []byte{0, 0, 0, 2, 0, 0, 0, 1, 0xff, 0xff}},
		{"negative version", []byte{0, 3, 0xff, 0xff, 0, 0, 0, 1, 0xff, 0xff}},
		{"short header", []byte{0, 3, 0}},
		{"truncated client id", []byte{0, 3, 0, 1, 0, 0, 0, 1, 0, 50, 'x'}},
		{"malformed body", append([]byte{0, 3, 0, 1, 0, 0, 0, 1, 0xff, 0xff}, 0x7f, 0xff, 0xff, 0xff)},
		{"malformed tags", append([]byte{0, 3, 0, 12, 0, 0, 0, 1, 0xff, 0xff}, 0x05, 0x01)},
		{"oversized", make([]byte, 1001)},
	} {
		rejected := s.Stats().RequestsRejected
		rc := dialRaw(t, s)
		if tc.name == "oversized" {
			// Only the size prefix: the server refuses before reading on.
			var b [4]byte
			binary.BigEndian.PutUint32(b[:], 1<<30)
			if _, err := rc.c.Write(b[:]); err != nil {
				t.Fatal(err)
			}
		} else {
			rc.writeFrame(tc.frame)
		}
		rc.expectClosed()
		// Counted before the connection is closed.
		if got := s.Stats().RequestsRejected - rejected; got != 1 {
			t.Fatalf("%s: %d frames counted as rejected, want 1", tc.name, got)
		}
		checkServing(t, s)
	}
	rejected := s.Stats().RequestsRejected
	// A frame larger than the limit with a body too.
	rc := dialRaw(t, s)
	rc.writeFrame(make([]byte, 1001))
	rc.expectClosed()

	// A negative size.
	rc = dialRaw(t, s)
	_, _ = rc.c.Write([]byte{0xff, 0xff, 0xff, 0xff})
	rc.expectClosed()
	if got := s.Stats().RequestsRejected - rejected; got != 2 {
		t.Fatalf("oversized with a body and negative size: %d frames counted as rejected, want 2", got)
	}

	// The bystander's fetch still waits.
	if n := s.progress.fetchesWaiting.Load(); n != 1 {
		t.Fatalf("%d fetches waiting after the bad frames, want the bystander's", n)
	}

	// The bystander's fetch is answered, woken by this append.
	produceRaw(t, cl, "bad", 0, buildBatch(t, segment.CodecNone, 1))
	corr, body, err := bystander.readFrame()
	if err != nil || corr != 100 {
		t.Fatalf("bystander: corr %d err %v", corr, err)
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 11
	decodeResponse(t, resp, body)
	if h, err := segment.ValidateBatch(resp.Topics[0].Partitions[0].RecordBatches); err != nil || h.BaseOffset != 3 {
		t.Fatalf("bystander fetch: %v %+v", err, h)
	}
	if hw := s.topic("bad").parts[0].log.HighWatermark(); hw != 4 {
		t.Fatalf("stored data changed: high watermark %d, want 4", hw)
	}
}

func TestPipelinedResponsesInOrder(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	createTopic(t, cl, "pipe", 1, nil)
	rc := dialRaw(t, s)
	const n = 40
	for i := int32(0); i < n; i++ {
		switch i % 3 {
		case 0:
			req := kmsg.NewPtrProduceRequest()
			req.Version = 9
			req.Acks = 1
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = "pipe"
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Records = buildBatch(t, segment.CodecNone, 1)
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			rc.send(i, req)
		case 1:
			req := kmsg.NewPtrMetadataRequest()
			req.Version = 12
			rc.send(i, req)
		case 2:
			req := kmsg.NewPtrApiVersionsRequest()
			req.Version = 2
			rc.send(i, req)
		}
	}
	var wantBase int64
	for i := int32(0); i < n; i++ {
		corr, body, err := rc.readFrame()
		if err != nil || corr != i {
			t.Fatalf("response %d: corr %d err %v", i, corr, err)
		}
		if i%3 == 0 {
			resp := kmsg.NewPtrProduceResponse()
			resp.Version = 9
			decodeResponse(t, resp, body)
			if got := resp.Topics[0].Partitions[0].BaseOffset; got != wantBase {
				t.Fatalf("produce %d: base offset %d, want %d (in order)", i, got, wantBase)
			}
			wantBase++
		}
	}
}

// TestIdleConnectionClosed times the idle timeout from before the dial:
// the server arms it after accepting the connection, so it cannot close
// the connection sooner than that.
func TestIdleConnectionClosed(t *testing.T) {
	const idle = 200 * time.Millisecond
	s := startServer(t, map[string]string{"connections.max.idle.ms": strconv.Itoa(int(idle.Milliseconds()))})
	start := time.Now()
	rc := dialRaw(t, s)
	rc.expectClosed()
	if el := time.Since(start); el < idle {
		t.Fatalf("closed after %v, before the idle timeout %v", el, idle)
	}
	// A long poll three times the idle timeout is not idleness: the
	// connection stays open for its answer.
	cl := newClient(t, s)
	createTopic(t, cl, "idle", 1, nil)
	rc = dialRaw(t, s)
	fetch := fetchRequest("idle", 0, 0, 1<<20)
	fetch.MaxWaitMillis, fetch.MinBytes = int32(3*idle.Milliseconds()), 1
	start = time.Now()
	if fp := rc.request(1, fetch).(*kmsg.FetchResponse).Topics[0].Partitions[0]; fp.ErrorCode != 0 {
		t.Fatalf("long poll across the idle timeout: error %d", fp.ErrorCode)
	}
	if el := time.Since(start); el < 3*idle {
		t.Fatalf("long poll answered after %v, before its MaxWait %v: the idle timeout was not crossed", el, 3*idle)
	}
}

func TestShutdownFinishesInFlight(t *testing.T) {
	cfg, err := ConfigFromProperties(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "metrics.listener": "", "log.dirs": t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	cl := newClient(t, s)
	createTopic(t, cl, "sd", 1, nil)
	// A long poll whose MaxWait outlasts the test: only the shutdown can
	// answer it before the connection's read deadline.
	rc := dialRaw(t, s)
	fetch := fetchRequest("sd", 0, 0, 1<<20)
	fetch.MaxWaitMillis, fetch.MinBytes = math.MaxInt32, 1
	rc.send(1, fetch)
	waitFetchesWaiting(t, s, 1)
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	if corr, _, err := rc.readFrame(); err != nil || corr != 1 {
		t.Fatalf("in-flight fetch during shutdown: corr %d err %v", corr, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != ErrServerClosed {
		t.Fatalf("Serve returned %v", err)
	}
	rc.expectClosed()
}

// TestRecoveredPanicClosesOnlyItsConnection makes a handler, then the
// reader, panic on one connection (through the test hooks): each time that
// connection alone is closed, the others go on, and the broker logs an
// ERROR line holding PanicMarker, which the end-to-end tests look for.
func TestRecoveredPanicClosesOnlyItsConnection(t *testing.T) {
	const handlePanic, readPanic = 666, 667 // correlation ids that panic
	logs := &logLines{t: t}
	cfg := testConfig(t, nil)
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.hooks.read = func(r *request) {
		if r.corr == readPanic {
			panic("test: reader panic")
		}
	}
	cfg.hooks.handle = func(r *request) {
		if r.corr == handlePanic {
			panic("test: handler panic")
		}
	}
	s := startServerConfig(t, cfg)
	apiVersions := func(rc *rawConn, corr int32) {
		t.Helper()
		req := kmsg.NewPtrApiVersionsRequest()
		if resp := rc.request(corr, req).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
			t.Fatalf("ApiVersions: error %d", resp.ErrorCode)
		}
	}
	bystander := dialRaw(t, s)
	apiVersions(bystander, 1)

	for i, tc := range []struct {
		corr int32
		msg  string
	}{
		{handlePanic, PanicMarker + ": panic handling request; closing connection"},
		{readPanic, PanicMarker + ": panic reading request; closing connection"},
	} {
		victim := dialRaw(t, s)
		apiVersions(victim, 1) // answered before the panic
		victim.send(tc.corr, kmsg.NewPtrApiVersionsRequest())
		victim.expectClosed()
		// Logged before the connection was closed.
		lines := logs.containing(tc.msg)
		if len(lines) != 1 || !strings.Contains(lines[0], "level=ERROR") {
			t.Fatalf("#%d: log lines with %q: %q, want one at level ERROR", i, tc.msg, lines)
		}
		apiVersions(bystander, int32(10+i))
		checkServing(t, s)
	}
	if lines := logs.containing(PanicMarker); len(lines) != 2 {
		t.Fatalf("log lines with %s: %q, want the two panics", PanicMarker, lines)
	}
}
