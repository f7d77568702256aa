package broker

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// The metrics Kafka has that the state collector (metrics.go) did not:
// the active controller (kafka.controller:ActiveControllerCount),
// connections by listener (kafka.server:socket-server-metrics
// connection-count, connection-creation-total, connection-close-total),
// each hosted partition's log size, log start and end offsets and high
// watermark (kafka.log:type=Log Size, LogStartOffset, LogEndOffset), and
// the broker's readiness as /readyz answers it. All are computed at
// scrape time. The per-partition series are one per partition this
// broker hosts, as Kafka's are: their number is bounded by the
// partitions of the cluster (times the replication factor, over the
// brokers), not by clients.

// listenerConns counts one listener's connections. Only the accept loop
// adds; each connection's processLoop removes its own.
type listenerConns struct {
	open, acceptedN, closedN atomic.Int64
}

func (c *listenerConns) accepted() { c.acceptedN.Add(1); c.open.Add(1) }
func (c *listenerConns) closed()   { c.closedN.Add(1); c.open.Add(-1) }

var (
	descControllerActive = prometheus.NewDesc("strata_controller_active",
		"1 while this broker is the active controller, else 0 (Kafka's ActiveControllerCount); summed over the brokers of a healthy cluster it is 1.", nil, nil)
	descReady = prometheus.NewDesc("strata_broker_ready",
		"1 while the broker is ready to serve clients, as /readyz answers (registered, leading partitions open, not shutting down, accepting), else 0.", nil, nil)
	descListenerConns = prometheus.NewDesc("strata_broker_listener_connections",
		"Client connections open now, by listener (Kafka's connection-count).", []string{"listener"}, nil)
	descListenerAccepted = prometheus.NewDesc("strata_broker_listener_connections_accepted_total",
		"Client connections accepted (and not refused by max.connections.per.ip), by listener (Kafka's connection-creation-total).", []string{"listener"}, nil)
	descListenerClosed = prometheus.NewDesc("strata_broker_listener_connections_closed_total",
		"Client connections closed, by listener (Kafka's connection-close-total).", []string{"listener"}, nil)
	partLabels        = []string{"topic", "partition"}
	descLogSize       = prometheus.NewDesc("strata_log_size_bytes", "Bytes of the partition's local segment files (Kafka's Log Size), per partition hosted here.", partLabels, nil)
	descLogRemoteSize = prometheus.NewDesc("strata_log_remote_size_bytes", "Bytes of the partition's remote segments in the object store, per tiered partition hosted here (from the manifest this broker knows).", partLabels, nil)
	descLogStart      = prometheus.NewDesc("strata_log_start_offset", "The partition's log start offset, remote log included (Kafka's LogStartOffset), per partition hosted here.", partLabels, nil)
	descLogLocalStart = prometheus.NewDesc("strata_log_local_start_offset", "The first offset of the partition's local log, per partition hosted here.", partLabels, nil)
	descLogEnd        = prometheus.NewDesc("strata_log_end_offset", "The partition's log end offset, the next offset to be written (Kafka's LogEndOffset), per partition hosted here.", partLabels, nil)
	descLogHighWater  = prometheus.NewDesc("strata_log_high_watermark_offset", "The partition's high watermark as this replica knows it, per partition hosted here.", partLabels, nil)
	partitionDescs    = []*prometheus.Desc{descControllerActive, descReady, descListenerConns, descListenerAccepted, descListenerClosed, descLogSize, descLogRemoteSize, descLogStart, descLogLocalStart, descLogEnd, descLogHighWater}
)

// partitionCollector exports the metrics above.
type partitionCollector struct{ s *Server }

func (c partitionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range partitionDescs {
		ch <- d
	}
}

func (c partitionCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	active := 0.0
	if s.controllerActive.Load() {
		active = 1
	}
	gauge(descControllerActive, active)
	ready := 0.0
	if s.notReady() == "" {
		ready = 1
	}
	gauge(descReady, ready)
	for _, l := range s.lns {
		gauge(descListenerConns, float64(l.conns.open.Load()), l.name)
		ch <- prometheus.MustNewConstMetric(descListenerAccepted, prometheus.CounterValue, float64(l.conns.acceptedN.Load()), l.name)
		ch <- prometheus.MustNewConstMetric(descListenerClosed, prometheus.CounterValue, float64(l.conns.closedN.Load()), l.name)
	}
	if !s.started.Load() {
		return // the partitions are being opened
	}
	for _, p := range s.allPartitions() {
		idx := strconv.Itoa(int(p.index))
		gauge(descLogSize, float64(logSize(p.log.Segments())), p.topic, idx)
		if m := p.tier.manifest(); m != nil {
			gauge(descLogRemoteSize, float64(m.Bytes()), p.topic, idx)
		}
		gauge(descLogStart, float64(p.logStart()), p.topic, idx)
		gauge(descLogLocalStart, float64(p.log.LogStartOffset()), p.topic, idx)
		gauge(descLogEnd, float64(p.log.LogEndOffset()), p.topic, idx)
		gauge(descLogHighWater, float64(p.log.HighWatermark()), p.topic, idx)
	}
}
