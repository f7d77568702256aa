package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/segment/poll"
)

// testLogWriter sends server logs to t.Log.
type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// logLines is a log writer that keeps the lines a server logs (and
// passes them on to t.Log).
type logLines struct {
	t  *testing.T
	mu sync.Mutex
	// lines are the lines written, without their newline.
	lines []string
}

func (l *logLines) Write(p []byte) (int, error) {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		l.lines = append(l.lines, line)
		l.t.Log(line)
	}
	return len(p), nil
}

// containing returns the lines that contain sub.
func (l *logLines) containing(sub string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return out
}

// startServer runs a server on 127.0.0.1:0 in a temporary directory with
// the given extra settings, stopped at the end of the test.
// __consumer_offsets gets 3 partitions unless props say otherwise: 50
// logs per server would slow every test down.
func startServer(t *testing.T, props map[string]string) *Server {
	t.Helper()
	return startServerConfig(t, testConfig(t, props))
}

// testConfig is the configuration startServer runs, for a test that
// changes it further.
func testConfig(t *testing.T, props map[string]string) Config {
	t.Helper()
	all := map[string]string{
		"listeners":                    "PLAINTEXT://127.0.0.1:0",
		"log.dirs":                     t.TempDir(),
		"offsets.topic.num.partitions": "3",
		// Each cleaner thread clears its share of this when it first
		// cleans; 128 MiB a server would weigh on the tests.
		"log.cleaner.dedupe.buffer.size": "4194304",
		// Not the default 127.0.0.1:9404: tests run side by side; a
		// test that scrapes sets 127.0.0.1:0.
		"metrics.listener": "",
	}
	for k, v := range props {
		all[k] = v
	}
	cfg, err := ConfigFromProperties(all)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: testLogLevel()}))
	return cfg
}

func startServerConfig(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil && err != ErrServerClosed {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s
}

// newClient returns a franz-go client for s, closed at the end of the
// test.
func newClient(t *testing.T, s *Server, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(s.Addr().String()),
		kgo.DisableIdempotentWrite(),
		kgo.RetryTimeout(5 * time.Second),
		kgo.MetadataMinAge(50 * time.Millisecond),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// createTopic creates a topic through the Kafka API.
func createTopic(t *testing.T, cl *kgo.Client, name string, partitions int32, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Topics[0].ErrorCode; c != 0 {
		t.Fatalf("create topic %s: error %d %v", name, c, resp.Topics[0].ErrorMessage)
	}
}

// buildBatch builds a record batch of n records with values "v<i>".
func buildBatch(t *testing.T, codec segment.Codec, n int) []byte {
	t.Helper()
	spec := segment.BatchSpec{Codec: codec}
	now := time.Now().UnixMilli()
	for i := 0; i < n; i++ {
		spec.Records = append(spec.Records, segment.Record{Timestamp: now, Key: []byte{byte('a' + i%26)}, Value: []byte("v" + strconv.Itoa(i))})
	}
	b, err := segment.BuildBatch(spec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// produceRaw sends one batch to topic/partition with a Produce request
// (acks=-1, at the highest version, 9) and returns the partition's
// response.
func produceRaw(t *testing.T, cl *kgo.Client, topic string, partition int32, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := rawTxnProduceRequest(topic, partition, batch)
	br := cl.Broker(0)
	resp, err := br.Request(testCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
}

// rawTxnProduceRequest is produceRequest with a transactional id when
// batch is transactional, as such batches need one; the tests that append
// them raw turn the coordinator's verification off (noTxnVerification).
func rawTxnProduceRequest(topic string, partition int32, batch []byte) *kmsg.ProduceRequest {
	req := produceRequest(topic, partition, batch)
	if h, err := segment.ParseHeader(batch); err == nil && h.Transactional() {
		id := "raw-partition-test"
		req.TransactionID = &id
	}
	return req
}

// noTxnVerification is the setting of the tests that append transactional
// batches raw (produceRaw), without a transaction coordinator's
// transaction behind them.
var noTxnVerification = map[string]string{"transaction.partition.verification.enable": "false"}

// produceVersion is produceRaw at a given version, over a raw connection.
func produceVersion(t *testing.T, s *Server, topic string, partition int32, batch []byte, version int16) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	rc := dialRaw(t, s)
	req := produceRequest(topic, partition, batch)
	req.Version = version
	rc.send(1, req)
	_, body, err := rc.readFrame()
	if err != nil {
		t.Fatal(err)
	}
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	decodeResponse(t, resp, body)
	return resp.Topics[0].Partitions[0]
}

func produceRequest(topic string, partition int32, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// fetchRaw fetches one partition with a raw Fetch request.
func fetchRaw(t *testing.T, cl *kgo.Client, topic string, partition int32, offset int64, maxBytes int32) kmsg.FetchResponseTopicPartition {
	t.Helper()
	// kgo sets the version it negotiated with the broker.
	resp, err := cl.Broker(0).Request(testCtx(t), fetchV12{fetchRequest(topic, partition, offset, maxBytes)})
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
}

// rawConn is a bare TCP connection to the server for frame-level tests.
type rawConn struct {
	t *testing.T
	c net.Conn
}

func dialRaw(t *testing.T, s *Server) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{t: t, c: c}
}

// send writes a request frame for req at its version.
func (r *rawConn) send(corr int32, req kmsg.Request) {
	r.t.Helper()
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw"))
	if _, err := r.c.Write(f.AppendRequest(nil, req, corr)); err != nil {
		r.t.Fatal(err)
	}
}

// writeFrame writes raw bytes with a size prefix.
func (r *rawConn) writeFrame(body []byte) {
	r.t.Helper()
	b := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	if _, err := r.c.Write(append(b, body...)); err != nil {
		r.t.Fatal(err)
	}
}

// readFrame reads one response frame and returns its correlation id and
// the rest.
func (r *rawConn) readFrame() (int32, []byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r.c, size[:]); err != nil {
		return 0, nil, err
	}
	b := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r.c, b); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(b)), b[4:], nil
}

// expectClosed checks that the server closes the connection.
func (r *rawConn) expectClosed() {
	r.t.Helper()
	_ = r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	n, err := r.c.Read(b[:])
	if err == nil {
		r.t.Fatalf("connection still open: read %d bytes", n)
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		r.t.Fatal("connection not closed within 5s")
	}
}

// request sends req and returns its decoded response, which must be the
// next frame on the connection.
func (r *rawConn) request(corr int32, req kmsg.Request) kmsg.Response {
	r.t.Helper()
	r.send(corr, req)
	got, body, err := r.readFrame()
	if err != nil || got != corr {
		r.t.Fatalf("%s v%d: corr %d err %v, want corr %d", kmsg.NameForKey(req.Key()), req.GetVersion(), got, err, corr)
	}
	resp := req.ResponseKind()
	decodeResponse(r.t, resp, body)
	return resp
}

// fetchRequest is a Fetch (v12, no wait) of one partition.
func fetchRequest(topic string, partition int32, offset int64, maxBytes int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.MaxBytes = maxBytes
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, maxBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// fetch is fetchRaw over this connection.
func (r *rawConn) fetch(corr int32, topic string, partition int32, offset int64, maxBytes int32) kmsg.FetchResponseTopicPartition {
	r.t.Helper()
	resp := r.request(corr, fetchRequest(topic, partition, offset, maxBytes)).(*kmsg.FetchResponse)
	return resp.Topics[0].Partitions[0]
}

// barrier returns once the server has answered an ApiVersions sent after
// everything before it on this connection. The connection handles its
// requests one at a time, so every earlier response was then written in
// full and counted, the bytes Fetch sent from files included (those are
// counted once sent, after the client may have its answer).
func (r *rawConn) barrier() {
	r.t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	r.request(-1, req)
}

// waitFor polls cond until it holds, for at most a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, time.Minute, what, cond)
}

// waitFetchesWaiting waits until n long-polling fetches wait for an
// append in s. Nothing but an append, their MaxWait or shutdown ends
// their wait then.
func waitFetchesWaiting(t *testing.T, s *Server, n int64) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d fetches to wait for an append", n), func() bool { return s.progress.fetchesWaiting.Load() == n })
}

// waitRetentionPass waits for a retention pass that starts after the
// call: the pass running at the call may have looked at a partition
// already, so it waits for the one after it to complete.
func waitRetentionPass(t *testing.T, s *Server) {
	t.Helper()
	want := s.progress.retentionPasses.Load() + 2
	waitFor(t, "a retention pass", func() bool { return s.progress.retentionPasses.Load() >= want })
}

// decodeResponse parses a response body (after the correlation id).
func decodeResponse(t *testing.T, resp kmsg.Response, body []byte) {
	t.Helper()
	if resp.IsFlexible() && resp.Key() != apiVersionsKey {
		if len(body) == 0 || body[0] != 0 {
			t.Fatalf("flexible response header: want empty tagged fields, got %x", body[:min(len(body), 1)])
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decode %T: %v", resp, err)
	}
}

// alter replaces a topic's configs with AlterConfigs.
func alter(t *testing.T, cl *kgo.Client, topic string, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrAlterConfigsRequest()
	rr := kmsg.NewAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	for k, v := range configs {
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Resources[0].ErrorCode; c != 0 {
		t.Fatalf("alter %s: error %d %v", topic, c, resp.Resources[0].ErrorMessage)
	}
}

// testLogLevel is the servers' log level in tests: warnings, or what
// STRATA_TEST_LOG names (debug, info).
func testLogLevel() slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(os.Getenv("STRATA_TEST_LOG"))); err != nil || os.Getenv("STRATA_TEST_LOG") == "" {
		return slog.LevelWarn
	}
	return l
}

// fetchV12 pins a Fetch request to v12, the last version that names
// topics, for kgo, which sends a request at the highest version both
// sides know: from v13 topics go by id, and the requests it wraps carry
// names.
type fetchV12 struct{ *kmsg.FetchRequest }

func (fetchV12) MaxVersion() int16 { return 12 }

// RequestWith is kmsg.FetchRequest.RequestWith at v12.
func (f fetchV12) RequestWith(ctx context.Context, r kmsg.Requestor) (*kmsg.FetchResponse, error) {
	resp, err := r.Request(ctx, f)
	fr, _ := resp.(*kmsg.FetchResponse)
	return fr, err
}
