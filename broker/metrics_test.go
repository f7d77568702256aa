package broker

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// scrape fetches addr's /metrics and parses it.
func scrape(t *testing.T, s *Server) map[string]*dto.MetricFamily {
	t.Helper()
	addr := s.MetricsAddr()
	if addr == nil {
		t.Fatal("no metrics listener")
	}
	resp, err := http.Get("http://" + addr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics: %s: %s", resp.Status, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// metricValue returns the value of the family's metric with the given
// labels (name=value pairs), and whether there is one.
func metricValue(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.Label {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

func mustValue(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	v, ok := metricValue(fams, name, labels...)
	if !ok {
		t.Fatalf("metric %s%v not exported", name, labels)
	}
	return v
}

// TestMetricsEndpoint checks the request, error and byte counters, and
// the state derived at scrape time. A request is counted before its
// response leaves, so the counts are exact once the answers are in.
func TestMetricsEndpoint(t *testing.T) {
	s := startServer(t, map[string]string{"metrics.listener": "127.0.0.1:0"})
	if s.PprofAddr() != nil {
		t.Fatal("pprof listener bound by default")
	}
	cl := newClient(t, s)
	const topic = "metered"
	createTopic(t, cl, topic, 1, nil)
	before := scrape(t, s)

	// The counted requests go over a raw connection: kgo might retry one,
	// and sends requests of its own.
	rc := dialRaw(t, s)
	var in int
	for i := range 5 {
		batch := buildBatch(t, segment.CodecNone, 1)
		in += len(batch)
		resp := rc.request(int32(i), produceRequest(topic, 0, batch)).(*kmsg.ProduceResponse)
		if c := resp.Topics[0].Partitions[0].ErrorCode; c != 0 {
			t.Fatalf("produce #%d: error %d", i, c)
		}
	}
	fp := rc.fetch(10, topic, 0, 0, 1<<20)
	if fp.ErrorCode != 0 || fp.HighWatermark != 5 {
		t.Fatalf("fetch: error %d, high watermark %d", fp.ErrorCode, fp.HighWatermark)
	}
	// A fetch of an unknown topic counts an error. Answered after the
	// first fetch was sent in full, it is also the barrier for the bytes
	// that one sent.
	if ep := rc.fetch(11, "no-such-topic", 0, 0, 1<<20); ep.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("fetch of an unknown topic: error %d, want UNKNOWN_TOPIC_OR_PARTITION", ep.ErrorCode)
	}

	// A group with a committed offset, for the lag.
	const group = "metered-group"
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = group, -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = topic
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = 0, 2
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	cresp, err := commit.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if c := cresp.Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("commit: error %d", c)
	}

	after := scrape(t, s)
	for i, tc := range []struct {
		name   string
		labels []string
		added  float64
	}{
		{"strata_broker_api_requests_total", []string{"api", "Produce"}, 5},
		{"strata_broker_api_requests_total", []string{"api", "Fetch"}, 2},
		{"strata_broker_api_request_duration_seconds", []string{"api", "Produce"}, 5},
		{"strata_broker_api_request_duration_seconds", []string{"api", "Fetch"}, 2},
		{"strata_broker_api_errors_total", []string{"api", "Fetch", "error", "UNKNOWN_TOPIC_OR_PARTITION"}, 1},
	} {
		was, _ := metricValue(before, tc.name, tc.labels...)
		if got := mustValue(t, after, tc.name, tc.labels...); got != was+tc.added {
			t.Errorf("#%d: %s%v: got %v, want %v (%v before, %v added)", i, tc.name, tc.labels, got, was+tc.added, was, tc.added)
		}
	}

	st := s.Stats()
	if got := mustValue(t, after, "strata_broker_topic_bytes_in_total", "topic", topic); got != float64(in) || st.ProduceBytes != int64(in) {
		t.Errorf("bytes in %v, Stats().ProduceBytes %d; want %d (the produced batches)", got, st.ProduceBytes, in)
	}
	if got := mustValue(t, after, "strata_broker_topic_bytes_out_total", "topic", topic); got != float64(in) || len(fp.RecordBatches) != in {
		t.Errorf("bytes out %v, %d fetched; want %d (every batch, once)", got, len(fp.RecordBatches), in)
	}
	if sent := st.FetchZeroCopyBytes + st.FetchCopiedBytes; sent != int64(in) {
		t.Errorf("bytes sent from files %d (zero copy %d, copied %d), want %d (the fetched batches)", sent, st.FetchZeroCopyBytes, st.FetchCopiedBytes, in)
	}

	if v := mustValue(t, after, "strata_broker_under_replicated_partitions"); v != 0 {
		t.Errorf("under-replicated %v, want 0", v)
	}
	if v := mustValue(t, after, "strata_broker_offline_partitions"); v != 0 {
		t.Errorf("offline %v, want 0", v)
	}
	if v := mustValue(t, after, "strata_groups"); v != 1 {
		t.Errorf("group count %v, want 1", v)
	}
	if v := mustValue(t, after, "strata_group_consumer_lag", "group", group); v != 3 {
		t.Errorf("lag of %s %v, want 3 (high watermark 5 - committed 2)", group, v)
	}
	// A single node loads every partition of __consumer_offsets at start
	// (empty here, so nothing was replayed).
	for p := range 3 {
		if v := mustValue(t, after, "strata_group_partition_load_bytes", "partition", strconv.Itoa(p)); v != 0 {
			t.Errorf("load bytes of partition %d: %v, want 0", p, v)
		}
		mustValue(t, after, "strata_group_partition_load_seconds", "partition", strconv.Itoa(p))
	}
	for _, name := range []string{"strata_tier_remote_fetch_bytes_total", "strata_tier_remote_fetch_duration_seconds", "go_goroutines"} {
		mustValue(t, after, name)
	}

	// Deleting the topic drops its byte counters before it answers.
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.TopicNames = []string{topic}
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr(topic)
	del.Topics = append(del.Topics, dt)
	dresp, err := del.RequestWith(testCtx(t), cl)
	if err != nil || dresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("delete: %v %+v", err, dresp)
	}
	gone := scrape(t, s)
	for _, name := range []string{"strata_broker_topic_bytes_in_total", "strata_broker_topic_bytes_out_total"} {
		if v, ok := metricValue(gone, name, "topic", topic); ok {
			t.Errorf("%s of the deleted topic still exported: %v", name, v)
		}
	}
}

// TestMetricsTiering checks the upload lag, remote fetch and chunk cache
// metrics of a broker tiering to a local directory.
func TestMetricsTiering(t *testing.T) {
	props := map[string]string{"metrics.listener": "127.0.0.1:0"}
	for k, v := range tieredProps {
		props[k] = v
	}
	s := startServer(t, props)
	cl := newClient(t, s)
	const topic = "tiered"
	createTopic(t, cl, topic, 1, tieredTopicConfigs)
	produceTiered(t, cl, topic, 0, 500)
	waitTiered(t, s, topic)

	// A fetch at 0 is served from the remote log.
	fp := fetchRaw(t, cl, topic, 0, 0, 1<<20)
	if fp.ErrorCode != 0 || len(fp.RecordBatches) == 0 {
		t.Fatalf("fetch at 0: error %d, %d bytes", fp.ErrorCode, len(fp.RecordBatches))
	}
	fams := scrape(t, s)
	// The response holds the remote segments' batches, then local ones.
	if v := mustValue(t, fams, "strata_tier_remote_fetch_bytes_total"); v <= 0 || v > float64(len(fp.RecordBatches)) {
		t.Errorf("remote fetch bytes %v, want some of the %d fetched", v, len(fp.RecordBatches))
	}
	if v := mustValue(t, fams, "strata_tier_remote_fetch_duration_seconds"); v < 1 {
		t.Errorf("remote fetch latency observations %v, want at least 1", v)
	}
	st := s.tier.reader.Stats()
	if v := mustValue(t, fams, "strata_tier_cache_misses_total"); v < 1 || v > float64(st.Cache.Misses) {
		t.Errorf("cache misses %v, reader says %d", v, st.Cache.Misses)
	}
	mustValue(t, fams, "strata_tier_cache_hits_total")
	mustValue(t, fams, "strata_tier_cache_evictions_total")
	mustValue(t, fams, "strata_tier_cache_bytes")
	for _, name := range []string{"strata_tier_upload_pending_segments", "strata_tier_upload_pending_bytes", "strata_tier_upload_oldest_pending_seconds", "strata_tier_upload_failing"} {
		mustValue(t, fams, name, "topic", topic, "partition", "0")
	}
	if v := mustValue(t, fams, "strata_tier_upload_failing", "topic", topic, "partition", "0"); v != 0 {
		t.Errorf("upload failing %v, want 0", v)
	}
}

// TestMetricsListenerOff: with metrics.listener empty (as startServer
// sets it) and strata.pprof.listener unset nothing is bound.
func TestMetricsListenerOff(t *testing.T) {
	s := startServer(t, map[string]string{"metrics.listener": ""})
	if s.MetricsAddr() != nil || s.PprofAddr() != nil {
		t.Fatalf("listeners bound: metrics %v, pprof %v", s.MetricsAddr(), s.PprofAddr())
	}
	// The registry works without a listener.
	if _, err := s.Registry().Gather(); err != nil {
		t.Fatal(err)
	}
}

func TestPprofListener(t *testing.T) {
	s := startServer(t, map[string]string{"metrics.listener": "127.0.0.1:0", "strata.pprof.listener": "http://127.0.0.1:0"})
	addr := s.PprofAddr()
	if addr == nil {
		t.Fatal("strata.pprof.listener not bound")
	}
	resp, err := http.Get("http://" + addr.String() + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "goroutine") {
		t.Fatalf("pprof: %s: %.200s", resp.Status, body)
	}
	// pprof is not on the metrics listener.
	resp, err = http.Get("http://" + s.MetricsAddr().String() + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("pprof on the metrics listener: %s", resp.Status)
	}
	// Shutdown closes the listeners.
	if err := s.Shutdown(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get("http://" + addr.String() + "/debug/pprof/"); err == nil {
		t.Fatal("pprof still served after Shutdown")
	}
}

func TestMetricsConfig(t *testing.T) {
	for _, tc := range []struct {
		v, want string
		ok      bool
	}{
		{"127.0.0.1:9308", "127.0.0.1:9308", true},
		{"http://0.0.0.0:9308/", "0.0.0.0:9308", true},
		{":9308", ":9308", true},
		{"", "", true},
		{"https://127.0.0.1:9308", "", false},
		{"127.0.0.1", "", false},
		{"127.0.0.1:99999", "", false},
	} {
		cfg, err := ConfigFromProperties(map[string]string{"metrics.listener": tc.v})
		if (err == nil) != tc.ok {
			t.Errorf("metrics.listener=%q: err %v, want ok %v", tc.v, err, tc.ok)
			continue
		}
		if tc.ok && cfg.MetricsListen != tc.want {
			t.Errorf("metrics.listener=%q: %q, want %q", tc.v, cfg.MetricsListen, tc.want)
		}
	}
	if _, err := ConfigFromProperties(map[string]string{"strata.pprof.listener": "nope"}); err == nil {
		t.Error("bad strata.pprof.listener accepted")
	}
}
