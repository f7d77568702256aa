package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/tiering"
)

// Metrics and pprof.
//
// Every Server has its own Prometheus registry (not the global default,
// so that several servers can run in one process), served at /metrics on
// metrics.listener (127.0.0.1:9404 unless set; empty serves none), with
// the /healthz and /readyz probes (health.go). The hot path only touches
// counters and histograms created up front (per API key) or once per
// topic (bytes in and out); everything derived from state (partitions
// under-replicated or offline, upload lag, chunk cache, groups and
// consumer lag, the controller, connections by listener, per-partition
// offsets and sizes in metrics_partitions.go) is computed at scrape time
// by custom collectors. docs/monitoring.md lists the metric names.
//
// strata.pprof.listener, when set, serves net/http/pprof on its own mux
// and listener, never on the metrics one.

// metricsSettings are the settings of the metrics and pprof listeners.
var metricsSettings = []setting{
	{name: "metrics.listener", typ: typeString, def: DefaultMetricsListener,
		set:   func(c *Config, v string) error { c.MetricsListen = ""; return setHTTPListener(&c.MetricsListen, v) },
		value: func(c *Config) string { return c.MetricsListen },
		doc:   "host:port (or http://host:port) serving Prometheus metrics at /metrics and the /healthz and /readyz probes (docs/monitoring.md); port 0 picks one, an empty value serves none. A broker that cannot bind it does not start."},
	{name: "strata.pprof.listener", typ: typeString, unset: "pprof is not served",
		set: func(c *Config, v string) error { return setHTTPListener(&c.PprofListen, v) },
		doc: "host:port (or http://host:port) serving Go's net/http/pprof at /debug/pprof/. Bind it to a loopback address."},
}

// setHTTPListener stores a listener setting's host:port in dst; empty
// serves none.
func setHTTPListener(dst *string, v string) error {
	if v == "" {
		return nil
	}
	hp, err := parseHTTPListener(v)
	if err != nil {
		return err
	}
	*dst = hp
	return nil
}

// parseHTTPListener accepts host:port or http://host:port[/].
func parseHTTPListener(v string) (string, error) {
	v = strings.TrimSpace(v)
	if rest, ok := strings.CutPrefix(v, "http://"); ok {
		v = strings.TrimSuffix(rest, "/")
	} else if strings.Contains(v, "://") {
		return "", errors.New("want host:port or http://host:port")
	}
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return "", fmt.Errorf("want host:port or http://host:port: %v", err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("bad port %q", port)
	}
	return net.JoinHostPort(host, port), nil
}

// DefaultMetricsListener is metrics.listener's default: the loopback
// address, so that a broker started without settings serves its metrics
// and probes to its own machine only (they name topics and groups);
// deployments that are scraped from elsewhere (docker-compose, k8s,
// systemd files in deploy/) bind 0.0.0.0 explicitly. 9404 is the port
// Prometheus exporters for Kafka brokers commonly use.
const DefaultMetricsListener = "127.0.0.1:9404"

// Latency buckets in seconds: 0.5 ms to about 33 s.
var latencyBuckets = prometheus.ExponentialBuckets(0.0005, 2, 17)

// brokerMetrics holds a server's registry, its hot-path metrics and its
// HTTP listeners.
type brokerMetrics struct {
	reg *prometheus.Registry

	// apis is indexed by API key; nil where the key is not served.
	apis     []*apiMetrics
	errors   *prometheus.CounterVec // api, error
	bytesIn  *prometheus.CounterVec // topic
	bytesOut *prometheus.CounterVec // topic
	topics   sync.Map               // topic name -> *topicMetrics

	remoteBytes   prometheus.Counter
	remoteLatency prometheus.Histogram
	remoteErrors  prometheus.Counter
	auths         *prometheus.CounterVec // by listener, mechanism, result

	metricsLn, pprofLn net.Listener
	httpSrvs           []*http.Server
	httpWG             sync.WaitGroup
}

type apiMetrics struct {
	name     string
	requests prometheus.Counter
	latency  prometheus.Observer
}

type topicMetrics struct {
	in, out prometheus.Counter
}

// newBrokerMetrics creates the registry and the metrics; s's collector
// reads the server's state at scrape time.
func newBrokerMetrics(s *Server) *brokerMetrics {
	m := &brokerMetrics{reg: prometheus.NewRegistry()}
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_broker_api_requests_total",
		Help: "Requests handled, by API (Kafka's request name).",
	}, []string{"api"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "strata_broker_api_request_duration_seconds",
		Help:    "Time from the start of handling a request to its response ready to send (long-polling fetches included; the socket write is not), by API.",
		Buckets: latencyBuckets,
	}, []string{"api"})
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_broker_api_errors_total",
		Help: "Error codes in responses, by API and Kafka error name: the top-level code, and per partition for Produce and Fetch.",
	}, []string{"api", "error"})
	m.bytesIn = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_broker_topic_bytes_in_total",
		Help: "Record batch bytes appended by Produce, by topic.",
	}, []string{"topic"})
	m.bytesOut = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_broker_topic_bytes_out_total",
		Help: "Record batch bytes put in Fetch responses (zero-copy, copied and remote), by topic.",
	}, []string{"topic"})
	m.remoteBytes = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "strata_tier_remote_fetch_bytes_total",
		Help: "Record bytes read from the remote log (object store through the chunk cache) for Fetch.",
	})
	m.remoteLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "strata_tier_remote_fetch_duration_seconds",
		Help:    "Time of one read from the remote log (a cache hit or the GET of a chunk).",
		Buckets: latencyBuckets,
	})
	m.remoteErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "strata_tier_remote_fetch_errors_total",
		Help: "Reads from the remote log that failed (offset out of range excluded).",
	})

	m.auths = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "strata_broker_authentications_total",
		Help: "Connection authentications (TLS client certificates and SASL exchanges, re-authentications included), by listener, mechanism (tls, or the SASL mechanism) and result (success, failure).",
	}, []string{"listener", "mechanism", "result"})

	maxKey := int16(0)
	for k := range apis {
		maxKey = max(maxKey, k)
	}
	m.apis = make([]*apiMetrics, maxKey+1)
	for k := range apis {
		name := kmsg.NameForKey(k)
		m.apis[k] = &apiMetrics{name: name, requests: requests.WithLabelValues(name), latency: latency.WithLabelValues(name)}
	}
	throttle := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "strata_broker_client_quota_throttle_seconds",
		Help:    "Throttle times applied to clients over their quotas (docs/quotas.md), by quota type (produce, fetch, request).",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
	}, []string{"quota"})
	if q := s.clientQuotas; q != nil {
		for t := range q.throttle {
			q.throttle[t] = throttle.WithLabelValues(quotaNames[t])
		}
	}
	m.reg.MustRegister(requests, latency, throttle, m.errors, m.bytesIn, m.bytesOut, m.remoteBytes, m.remoteLatency, m.remoteErrors, m.auths,
		&stateCollector{s: s}, limitsCollector{s: s}, partitionCollector{s: s}, remoteReadCollector{s: s}, shareCollector{s: s},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// authSucceeded and authFailed count one authentication.
func (m *brokerMetrics) authSucceeded(listener, mechanism string) {
	m.auths.WithLabelValues(listener, mechanism, "success").Inc()
}

func (m *brokerMetrics) authFailed(listener, mechanism string) {
	m.auths.WithLabelValues(listener, mechanism, "failure").Inc()
}

// Registry is the server's Prometheus registry, for embedding its metrics
// elsewhere (tests, a process serving several brokers).
func (s *Server) Registry() *prometheus.Registry { return s.metrics.reg }

// MetricsAddr is the address metrics.listener is bound to, nil when it is
// not set.
func (s *Server) MetricsAddr() net.Addr {
	if s.metrics.metricsLn == nil {
		return nil
	}
	return s.metrics.metricsLn.Addr()
}

// PprofAddr is the address strata.pprof.listener is bound to, nil when it
// is not set.
func (s *Server) PprofAddr() net.Addr {
	if s.metrics.pprofLn == nil {
		return nil
	}
	return s.metrics.pprofLn.Addr()
}

// observeRequest counts one handled request and its latency, the time
// since start. The connection calls it before writing the response
// (conn.process), so that a client that has its answer sees it counted.
func (m *brokerMetrics) observeRequest(key int16, start time.Time) {
	if key < 0 || int(key) >= len(m.apis) || m.apis[key] == nil {
		return
	}
	a := m.apis[key]
	a.requests.Inc()
	a.latency.Observe(time.Since(start).Seconds())
}

// countError counts one error code (0 is not an error) of API key.
func (m *brokerMetrics) countError(key int16, code int16) {
	if code == 0 || key < 0 || int(key) >= len(m.apis) || m.apis[key] == nil {
		return
	}
	name := "UNKNOWN_SERVER_ERROR"
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		name = e.Message
	}
	m.errors.WithLabelValues(m.apis[key].name, name).Inc()
}

// countResponseErrors counts the error codes of a kmsg response where
// they are cheap to find: Produce per partition, and the top-level code
// of the APIs that have one. Fetch counts its own (fetchReply in
// fetch_encode.go).
func (m *brokerMetrics) countResponseErrors(key int16, resp kmsg.Response) {
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				m.countError(key, r.Topics[i].Partitions[j].ErrorCode)
			}
		}
	case *kmsg.ListOffsetsResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				m.countError(key, r.Topics[i].Partitions[j].ErrorCode)
			}
		}
	case *kmsg.OffsetCommitResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				m.countError(key, r.Topics[i].Partitions[j].ErrorCode)
			}
		}
	case *kmsg.OffsetFetchResponse:
		m.countError(key, r.ErrorCode)
		for i := range r.Groups {
			m.countError(key, r.Groups[i].ErrorCode)
		}
	case *kmsg.FindCoordinatorResponse:
		m.countError(key, r.ErrorCode)
		for i := range r.Coordinators {
			m.countError(key, r.Coordinators[i].ErrorCode)
		}
	case *kmsg.JoinGroupResponse:
		m.countError(key, r.ErrorCode)
	case *kmsg.SyncGroupResponse:
		m.countError(key, r.ErrorCode)
	case *kmsg.HeartbeatResponse:
		m.countError(key, r.ErrorCode)
	case *kmsg.LeaveGroupResponse:
		m.countError(key, r.ErrorCode)
	case *kmsg.ListGroupsResponse:
		m.countError(key, r.ErrorCode)
	case *kmsg.ApiVersionsResponse:
		m.countError(key, r.ErrorCode)
	case *kmsg.InitProducerIDResponse:
		m.countError(key, r.ErrorCode)
	case *kmsg.CreateTopicsResponse:
		for i := range r.Topics {
			m.countError(key, r.Topics[i].ErrorCode)
		}
	case *kmsg.DeleteTopicsResponse:
		for i := range r.Topics {
			m.countError(key, r.Topics[i].ErrorCode)
		}
	}
}

// topic returns the byte counters of a topic, creating them once.
func (m *brokerMetrics) topic(name string) *topicMetrics {
	if v, ok := m.topics.Load(name); ok {
		return v.(*topicMetrics)
	}
	tm := &topicMetrics{in: m.bytesIn.WithLabelValues(name), out: m.bytesOut.WithLabelValues(name)}
	v, _ := m.topics.LoadOrStore(name, tm)
	return v.(*topicMetrics)
}

// forgetTopic drops a deleted topic's byte counters.
func (m *brokerMetrics) forgetTopic(name string) {
	m.topics.Delete(name)
	m.bytesIn.DeleteLabelValues(name)
	m.bytesOut.DeleteLabelValues(name)
}

// observeRemoteRead records one read from the remote log.
func (m *brokerMetrics) observeRemoteRead(start time.Time, size int64, err error) {
	m.remoteLatency.Observe(time.Since(start).Seconds())
	if size > 0 {
		m.remoteBytes.Add(float64(size))
	}
	if err != nil {
		m.remoteErrors.Inc()
	}
}

// startHTTP binds metrics.listener and strata.pprof.listener (when set)
// and serves them until stopHTTP.
func (s *Server) startHTTP() error {
	m := s.metrics
	if s.cfg.MetricsListen != "" {
		ln, err := net.Listen("tcp", s.cfg.MetricsListen)
		if err != nil {
			return fmt.Errorf("broker: metrics.listener %s: %w (set metrics.listener to a free host:port, or to an empty value to serve no metrics and probes)", s.cfg.MetricsListen, err)
		}
		m.metricsLn = ln
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, ErrorLog: slogPrinter{s}}))
		s.handleProbes(mux)
		m.serve(s, ln, mux)
	}
	if s.cfg.PprofListen != "" {
		ln, err := net.Listen("tcp", s.cfg.PprofListen)
		if err != nil {
			return fmt.Errorf("broker: strata.pprof.listener %s: %w", s.cfg.PprofListen, err)
		}
		m.pprofLn = ln
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		m.serve(s, ln, mux)
		s.log.Warn("pprof enabled", "addr", ln.Addr().String())
	}
	return nil
}

func (m *brokerMetrics) serve(s *Server, ln net.Listener, h http.Handler) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	m.httpSrvs = append(m.httpSrvs, srv)
	m.httpWG.Add(1)
	go func() {
		defer m.httpWG.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http listener stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
}

// stopHTTP closes the metrics and pprof listeners and their connections.
func (s *Server) stopHTTP() {
	m := s.metrics
	if m == nil {
		return
	}
	for _, srv := range m.httpSrvs {
		_ = srv.Close()
	}
	for _, ln := range []net.Listener{m.metricsLn, m.pprofLn} {
		if ln != nil {
			_ = ln.Close()
		}
	}
	m.httpWG.Wait()
}

// slogPrinter adapts the server's logger to promhttp's ErrorLog.
type slogPrinter struct{ s *Server }

func (p slogPrinter) Println(v ...any) { p.s.log.Warn("metrics: " + fmt.Sprint(v...)) }

// stateCollector computes, at scrape time, the metrics derived from the
// server's state.
type stateCollector struct{ s *Server }

var (
	descUnderReplicated = prometheus.NewDesc("strata_broker_under_replicated_partitions",
		"Partitions this broker leads whose in-sync replica set is smaller than their replica set.", nil, nil)
	descOffline = prometheus.NewDesc("strata_broker_offline_partitions",
		"Partitions without a live leader, reported by the controller only (0 on other brokers), as in Kafka.", nil, nil)
	descLeaderPartitions = prometheus.NewDesc("strata_broker_leader_partitions",
		"Partitions this broker leads.", nil, nil)
	descPendingSegs = prometheus.NewDesc("strata_tier_upload_pending_segments",
		"Sealed local segments not uploaded yet, per partition this broker archives.", []string{"topic", "partition"}, nil)
	descPendingBytes = prometheus.NewDesc("strata_tier_upload_pending_bytes",
		"Bytes of the sealed local segments not uploaded yet, per partition this broker archives.", []string{"topic", "partition"}, nil)
	descPendingAge = prometheus.NewDesc("strata_tier_upload_oldest_pending_seconds",
		"Age of the oldest sealed segment not uploaded yet (0 when none), per partition this broker archives.", []string{"topic", "partition"}, nil)
	descUploadFailing = prometheus.NewDesc("strata_tier_upload_failing",
		"1 while the partition's last upload step failed, per partition this broker archives.", []string{"topic", "partition"}, nil)
	descLastUpload = prometheus.NewDesc("strata_tier_last_upload_timestamp_seconds",
		"Unix time of the partition's last committed upload since this broker started archiving it (absent before the first), per partition this broker archives.", []string{"topic", "partition"}, nil)
	descUploadedSegs = prometheus.NewDesc("strata_tier_uploaded_segments_total",
		"Segments uploaded and committed since this broker started archiving the partition, per partition this broker archives.", []string{"topic", "partition"}, nil)
	descUploadedBytes = prometheus.NewDesc("strata_tier_uploaded_bytes_total",
		"Bytes of the segments uploaded and committed since this broker started archiving the partition, per partition this broker archives.", []string{"topic", "partition"}, nil)
	descUploadThrottled = prometheus.NewDesc("strata_tier_upload_throttled_total",
		"Upload steps the object store throttled (S3's 503 SlowDown) since this broker started archiving the partition, per partition this broker archives.", []string{"topic", "partition"}, nil)
	descUploadBackoff = prometheus.NewDesc("strata_tier_upload_backoff_seconds",
		"Wait before the next upload attempt chosen after the partition's last failed step (0 when not failing), per partition this broker archives.", []string{"topic", "partition"}, nil)
	descRemoteCleanRounds = prometheus.NewDesc("strata_tier_remote_clean_rounds_total",
		"Remote cleanings committed (compacted replacements swapped into the manifest) since this broker started archiving the partition, per compacted partition this broker archives.", []string{"topic", "partition"}, nil)
	descRemoteCleanRead = prometheus.NewDesc("strata_tier_remote_clean_read_bytes_total",
		"Bytes of remote segments the remote cleaner read, per compacted partition this broker archives.", []string{"topic", "partition"}, nil)
	descRemoteCleanWritten = prometheus.NewDesc("strata_tier_remote_clean_written_bytes_total",
		"Bytes of compacted replacement objects the remote cleaner committed, per compacted partition this broker archives.", []string{"topic", "partition"}, nil)
	descRemoteCleanRemoved = prometheus.NewDesc("strata_tier_remote_clean_removed_records_total",
		"Records the remote cleaner removed (superseded values and expired tombstones), per compacted partition this broker archives.", []string{"topic", "partition"}, nil)
	descRemoteCleanCheckpoint = prometheus.NewDesc("strata_tier_remote_clean_checkpoint_offset",
		"The remote cleaner checkpoint in the partition's manifest (the first remote offset not compacted yet; it survives leader changes), per compacted partition this broker archives.", []string{"topic", "partition"}, nil)
	descRemoteCleanFailing = prometheus.NewDesc("strata_tier_remote_clean_failing",
		"1 while the partition's last remote cleaning failed, per compacted partition this broker archives.", []string{"topic", "partition"}, nil)
	descStoreErrors = prometheus.NewDesc("strata_tier_store_errors_total",
		"Failed requests to the S3 object store, by operation (put, get, head, list, delete) and code (S3's error code such as SlowDown or InternalError, http_<status>, or timeout, reset, refused, closed, truncated, other), the S3 client's retried attempts included.", []string{"op", "code"}, nil)
	descCacheJoins = prometheus.NewDesc("strata_tier_cache_inflight_joins_total",
		"Remote reads that waited for a GET of their chunk already under way (read-ahead or another reader).", nil, nil)
	descPartCacheReads = prometheus.NewDesc("strata_tier_cache_reads_total",
		"Remote reads per partition by how the chunk cache served them: result hit (cached), join (waited for a GET under way) or miss (started a GET).", []string{"topic", "partition", "result"}, nil)
	descCacheHits = prometheus.NewDesc("strata_tier_cache_hits_total",
		"Remote reads served from a cached chunk.", nil, nil)
	descCacheMisses = prometheus.NewDesc("strata_tier_cache_misses_total",
		"Remote reads that had to start a GET of a chunk.", nil, nil)
	descCacheEvictions = prometheus.NewDesc("strata_tier_cache_evictions_total",
		"Chunks evicted from the chunk cache.", nil, nil)
	descCacheBytes = prometheus.NewDesc("strata_tier_cache_bytes",
		"Bytes of cached and loading chunks.", nil, nil)
	descLogDirOffline = prometheus.NewDesc("strata_broker_log_dir_offline",
		"1 while the log directory is offline (its disk failed; its partitions are not served here), else 0, per directory of log.dirs.", []string{"dir"}, nil)
	descOfflineLogDirs = prometheus.NewDesc("strata_broker_offline_log_dirs",
		"Log directories offline (Kafka's OfflineLogDirectoryCount).", nil, nil)
	descLogDirPartitions = prometheus.NewDesc("strata_broker_log_dir_partitions",
		"Partition directories in the log directory (found at start or placed since), per directory of log.dirs.", []string{"dir"}, nil)
	descOfflineReplicas = prometheus.NewDesc("strata_broker_offline_replicas",
		"Hosted partitions whose replica on this broker is offline (failed log directory or damaged files).", nil, nil)
	descGroups = prometheus.NewDesc("strata_groups",
		"Consumer groups this broker coordinates.", nil, nil)
	descGroupLag = prometheus.NewDesc("strata_group_consumer_lag",
		"Sum over the group's committed partitions that this broker leads of high watermark minus committed offset.", []string{"group"}, nil)
	descGroupLoadSeconds = prometheus.NewDesc("strata_group_partition_load_seconds",
		"How long loading the __consumer_offsets partition into the group coordinator took, per partition this broker coordinates.", []string{"partition"}, nil)
	descGroupLoadBytes = prometheus.NewDesc("strata_group_partition_load_bytes",
		"Bytes of the __consumer_offsets partition replayed by its load, per partition this broker coordinates.", []string{"partition"}, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUnderReplicated, descOffline, descLeaderPartitions,
		descPendingSegs, descPendingBytes, descPendingAge, descUploadFailing,
		descLastUpload, descUploadedSegs, descUploadedBytes, descUploadThrottled, descUploadBackoff, descStoreErrors,
		descRemoteCleanRounds, descRemoteCleanRead, descRemoteCleanWritten, descRemoteCleanRemoved, descRemoteCleanFailing, descRemoteCleanCheckpoint,
		descCacheHits, descCacheMisses, descCacheEvictions, descCacheBytes, descCacheJoins, descPartCacheReads,
		descLogDirOffline, descOfflineLogDirs, descLogDirPartitions, descOfflineReplicas,
		descGroups, descGroupLag, descGroupLoadSeconds, descGroupLoadBytes} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	if !s.started.Load() {
		return // NewServer is still setting up what is read below
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}

	// Partitions, from the metadata cache.
	if s.coord != nil {
		snap := s.coord.Snapshot()
		var under, offline, leading int
		for _, t := range snap.Topics {
			for _, p := range t.Partitions {
				live := p.State.Leader != coord.NoLeader && snap.Live(p.State.Leader)
				if !live {
					offline++
				}
				if p.State.Leader == s.cfg.BrokerID && live {
					leading++
					if len(p.State.ISR) < len(p.Replicas) {
						under++
					}
				}
			}
		}
		if snap.Controller.ID != s.cfg.BrokerID {
			offline = 0
		}
		gauge(descUnderReplicated, float64(under))
		gauge(descOffline, float64(offline))
		gauge(descLeaderPartitions, float64(leading))
	}

	// Log directories.
	if s.dirs != nil {
		offlineDirs := 0
		for _, d := range s.dirs.states() {
			v := 0.0
			if d.offline {
				v = 1
				offlineDirs++
			}
			gauge(descLogDirOffline, v, d.path)
			gauge(descLogDirPartitions, float64(d.partitions), d.path)
		}
		gauge(descOfflineLogDirs, float64(offlineDirs))
		gauge(descOfflineReplicas, float64(s.dirs.offlineCount()))
	}

	// Upload lag: the archivers, read outside s.mu (Lag stats a file).
	type archived struct {
		topic string
		index int32
		pt    *partTier
	}
	var parts []archived
	s.mu.RLock()
	for _, ts := range s.mu.topics {
		for _, p := range ts.parts {
			if p != nil && p.tier != nil {
				parts = append(parts, archived{p.topic, p.index, p.tier})
			}
		}
	}
	s.mu.RUnlock()
	for _, a := range parts {
		a.pt.mu.Lock()
		arch := a.pt.arch
		a.pt.mu.Unlock()
		if arch == nil {
			continue
		}
		l := arch.Lag()
		if !l.Leader {
			continue
		}
		idx := strconv.Itoa(int(a.index))
		gauge(descPendingSegs, float64(l.SegmentsPending), a.topic, idx)
		gauge(descPendingBytes, float64(l.BytesPending), a.topic, idx)
		gauge(descPendingAge, l.OldestPending.Seconds(), a.topic, idx)
		failing := 0.0
		if l.Failing {
			failing = 1
		}
		gauge(descUploadFailing, failing, a.topic, idx)
		if !l.LastUpload.IsZero() {
			gauge(descLastUpload, float64(l.LastUpload.UnixNano())/1e9, a.topic, idx)
		}
		ch <- prometheus.MustNewConstMetric(descUploadedSegs, prometheus.CounterValue, float64(l.UploadedSegs), a.topic, idx)
		ch <- prometheus.MustNewConstMetric(descUploadedBytes, prometheus.CounterValue, float64(l.UploadedBytes), a.topic, idx)
		ch <- prometheus.MustNewConstMetric(descUploadThrottled, prometheus.CounterValue, float64(l.Throttled), a.topic, idx)
		gauge(descUploadBackoff, l.Backoff.Seconds(), a.topic, idx)
		if arch.Compacted() {
			rc := arch.RemoteCleanStats()
			ch <- prometheus.MustNewConstMetric(descRemoteCleanRounds, prometheus.CounterValue, float64(rc.Rounds), a.topic, idx)
			ch <- prometheus.MustNewConstMetric(descRemoteCleanRead, prometheus.CounterValue, float64(rc.BytesRead), a.topic, idx)
			ch <- prometheus.MustNewConstMetric(descRemoteCleanWritten, prometheus.CounterValue, float64(rc.BytesWritten), a.topic, idx)
			ch <- prometheus.MustNewConstMetric(descRemoteCleanRemoved, prometheus.CounterValue, float64(rc.RecordsRemoved), a.topic, idx)
			failing := 0.0
			if rc.LastError != nil {
				failing = 1
			}
			gauge(descRemoteCleanFailing, failing, a.topic, idx)
			gauge(descRemoteCleanCheckpoint, float64(rc.CheckpointOffset), a.topic, idx)
		}
	}

	// Object store errors.
	if s.tier != nil {
		if ec, ok := s.tier.store.(tiering.ErrorCounter); ok {
			for _, e := range ec.StoreErrors() {
				ch <- prometheus.MustNewConstMetric(descStoreErrors, prometheus.CounterValue, float64(e.Count), e.Op, e.Code)
			}
		}
	}

	// Chunk cache.
	if s.tier != nil && s.tier.reader != nil {
		st := s.tier.reader.Stats()
		counter(descCacheHits, st.Cache.Hits)
		counter(descCacheMisses, st.Cache.Misses)
		counter(descCacheEvictions, st.Cache.Evictions)
		counter(descCacheJoins, st.Cache.InflightJoins)
		gauge(descCacheBytes, float64(st.Cache.Bytes))
		for k, rc := range s.tier.reader.PartitionReadCounts() {
			idx := strconv.Itoa(int(k.Partition))
			for _, r := range []struct {
				result string
				n      int64
			}{{"hit", rc.Hits}, {"join", rc.InflightJoins}, {"miss", rc.Misses}} {
				ch <- prometheus.MustNewConstMetric(descPartCacheReads, prometheus.CounterValue, float64(r.n), k.Topic, idx, r.result)
			}
		}
	}

	// Groups and their lag.
	if s.groups != nil {
		c.collectGroups(ch)
	}
}

// collectGroups exports the group count and, per group, the lag over the
// partitions this broker leads (a partition led elsewhere is left out: its
// high watermark is not known here).
func (c *stateCollector) collectGroups(ch chan<- prometheus.Metric) {
	s := c.s
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.Version = 4
	groups := s.groups.ListGroups(ctx, lreq)
	ch <- prometheus.MustNewConstMetric(descGroups, prometheus.GaugeValue, float64(len(groups.Groups)))
	for _, r := range s.groupLoadReports() {
		p := strconv.Itoa(r.Partition)
		ch <- prometheus.MustNewConstMetric(descGroupLoadSeconds, prometheus.GaugeValue, r.Duration.Seconds(), p)
		ch <- prometheus.MustNewConstMetric(descGroupLoadBytes, prometheus.GaugeValue, float64(r.Bytes), p)
	}
	for _, g := range groups.Groups {
		freq := kmsg.NewPtrOffsetFetchRequest()
		freq.Version = 7
		freq.Group = g.Group
		freq.Topics = nil // all committed
		resp := s.groups.OffsetFetch(ctx, freq)
		if resp.ErrorCode != 0 {
			continue
		}
		var lag int64
		for _, t := range resp.Topics {
			ts := s.topic(t.Topic)
			if ts == nil {
				continue
			}
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 || p.Offset < 0 {
					continue
				}
				part := ts.local(p.Partition)
				if part == nil {
					continue
				}
				if _, err := part.leaderCheck(s.cfg.BrokerID); err != nil {
					continue
				}
				lag += max(part.log.HighWatermark()-p.Offset, 0)
			}
		}
		ch <- prometheus.MustNewConstMetric(descGroupLag, prometheus.GaugeValue, float64(lag), g.Group)
	}
}
