package broker

import (
	"context"
	"encoding/binary"
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
		want := map[int16][2]int16{0: {3, 9}, 1: {4, 12}, 2: {1, 7}, 3: {0, 12},
			8: {1, 8}, 9: {1, 8}, 10: {0, 4}, 11: {0, 7}, 12: {0, 4}, 13: {0, 4}, 14: {0, 5}, 15: {0, 5}, 16: {0, 4},
			18: {0, 3}, 19: {2, 7}, 20: {1, 6}, 22: {0, 4},
			23: {2, 4}, 32: {0, 4}, 33: {0, 2}, 37: {0, 3}, 42: {0, 2}, 43: {0, 2}, 44: {0, 1}, 47: {0, 0}, 60: {0, 1}}
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
	if resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != 18 || resp.ApiKeys[0].MaxVersion != 3 {
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

	// An innocent connection with a long poll in flight the whole time.
	bystander := dialRaw(t, s)
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 11
	fetch.MaxWaitMillis, fetch.MinBytes, fetch.MaxBytes = 3000, 1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "bad"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes = 3, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	bystander.send(100, fetch)

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
		checkServing(t, s)
	}
	// A frame larger than the limit with a body too.
	rc := dialRaw(t, s)
	rc.writeFrame(make([]byte, 1001))
	rc.expectClosed()

	// A negative size.
	rc = dialRaw(t, s)
	_, _ = rc.c.Write([]byte{0xff, 0xff, 0xff, 0xff})
	rc.expectClosed()

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
	if st := s.Stats(); st.RequestsRejected < 10 {
		t.Fatalf("rejected %d frames, want at least 10", st.RequestsRejected)
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

func TestIdleConnectionClosed(t *testing.T) {
	s := startServer(t, map[string]string{"connections.max.idle.ms": "200"})
	rc := dialRaw(t, s)
	start := time.Now()
	rc.expectClosed()
	if el := time.Since(start); el < 150*time.Millisecond {
		t.Fatalf("closed after %v, before the idle timeout", el)
	}
	// A long poll longer than the idle timeout is not idleness.
	cl := newClient(t, s)
	createTopic(t, cl, "idle", 1, nil)
	rc = dialRaw(t, s)
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 12
	fetch.MaxWaitMillis, fetch.MinBytes, fetch.MaxBytes = 600, 1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "idle"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	rc.send(1, fetch)
	if corr, _, err := rc.readFrame(); err != nil || corr != 1 {
		t.Fatalf("long poll across the idle timeout: corr %d err %v", corr, err)
	}
}

func TestShutdownFinishesInFlight(t *testing.T) {
	cfg, err := ConfigFromProperties(map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": t.TempDir()})
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
	rc := dialRaw(t, s)
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 12
	fetch.MaxWaitMillis, fetch.MinBytes, fetch.MaxBytes = 30000, 1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "sd"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	rc.send(1, fetch)
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	if corr, _, err := rc.readFrame(); err != nil || corr != 1 {
		t.Fatalf("in-flight fetch during shutdown: corr %d err %v", corr, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("shutdown took %v", el)
	}
	if err := <-served; err != ErrServerClosed {
		t.Fatalf("Serve returned %v", err)
	}
	rc.expectClosed()
}
