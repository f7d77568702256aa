package broker

import (
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/stratastream/strata/broker/group"
	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config is a broker's configuration. Build it with DefaultConfig or
// ConfigFromProperties; the zero value is not usable.
type Config struct {
	// BrokerID is broker.id.
	BrokerID int32
	// Listen is the host:port to listen on (from listeners); port 0
	// picks a free port.
	Listen string
	// AdvertisedHost and AdvertisedPort are what Metadata tells clients
	// (advertised.listeners). Port 0 means the bound port.
	AdvertisedHost string
	AdvertisedPort int32
	// LogDir holds the partition directories and the embedded
	// coordinator's metadata (log.dirs).
	LogDir string
	// AutoCreateTopics is auto.create.topics.enable.
	AutoCreateTopics bool
	// NumPartitions is num.partitions, for auto-created topics and
	// CreateTopics with -1 partitions.
	NumPartitions int32
	// DefaultReplicationFactor is default.replication.factor.
	DefaultReplicationFactor int16
	// SocketRequestMaxBytes is socket.request.max.bytes.
	SocketRequestMaxBytes int32
	// ConnectionsMaxIdle is connections.max.idle.ms.
	ConnectionsMaxIdle time.Duration
	// RetentionCheckInterval is log.retention.check.interval.ms.
	RetentionCheckInterval time.Duration
	// TopicDefaults holds the default of every supported topic config, by
	// topic config name (retention.ms, ...), as set by the broker
	// settings (log.retention.ms, ...) or Kafka's defaults.
	TopicDefaults map[string]string
	// ZeroCopy sends fetched records with sendfile(2). Off, they are
	// copied through user space (strata.fetch.zero.copy=false; for the
	// CPU comparison benchmark).
	ZeroCopy bool
	// MetricsListen is metrics.listener: host:port serving Prometheus
	// metrics at /metrics; empty serves none (metrics.go).
	MetricsListen string
	// PprofListen is strata.pprof.listener: host:port serving
	// net/http/pprof; empty serves none.
	PprofListen string
	// ZooKeeperConnect is zookeeper.connect: "host:port[,host:port...][/chroot]"
	// (chroot default /strata). Empty runs a single node with the
	// embedded coordinator in LogDir.
	ZooKeeperConnect string
	// ZooKeeperSessionTimeout is zookeeper.session.timeout.ms: a broker
	// that ZooKeeper does not hear from this long is dead to the cluster.
	ZooKeeperSessionTimeout time.Duration
	// ZooKeeperConnectionTimeout is zookeeper.connection.timeout.ms: how
	// long the broker waits at start for its first session. Zero means
	// the session timeout.
	ZooKeeperConnectionTimeout time.Duration
	// Rack is broker.rack ("" for none); replica assignment spreads a
	// partition's replicas over racks.
	Rack string
	// ReplicationPort is replication.port: the port of the broker's gRPC
	// replication listener (on the Kafka listener's host), published in
	// its registration. 0 picks a free port at start. Only a broker in a
	// ZooKeeper cluster listens: a single node has no replicas.
	ReplicationPort int32
	// ReplicaLagTimeMax is replica.lag.time.max.ms: a follower that has
	// not caught up with the leader's log end for this long leaves the
	// ISR.
	ReplicaLagTimeMax time.Duration
	// ReplicaFetchMaxBytes is replica.fetch.max.bytes: the most a leader
	// sends a follower for one partition in one message (at least one
	// whole batch).
	ReplicaFetchMaxBytes int32
	// ReplicaFetchBackoff is replica.fetch.backoff.ms: how long a
	// follower waits before it retries a partition (or reconnects) after
	// an error.
	ReplicaFetchBackoff time.Duration
	// HWCheckpointInterval is replica.high.watermark.checkpoint.interval.ms.
	HWCheckpointInterval time.Duration
	// ControlledShutdown is controlled.shutdown.enable: on Shutdown, ask
	// the controller to move this broker's leadership away first.
	ControlledShutdown bool
	// AutoLeaderRebalance is auto.leader.rebalance.enable: the controller
	// (in whichever broker holds the role) moves leadership back to a
	// partition's preferred replica when it is live and in the ISR.
	AutoLeaderRebalance bool
	// OffsetsTopicReplicationFactor is offsets.topic.replication.factor:
	// __consumer_offsets is created with min(this, live brokers)
	// replicas.
	OffsetsTopicReplicationFactor int16
	// Groups holds the consumer group coordinator's settings
	// (offsets.topic.num.partitions, group.initial.rebalance.delay.ms,
	// group.min.session.timeout.ms, group.max.session.timeout.ms,
	// offsets.retention.minutes, offsets.retention.check.interval.ms,
	// offset.metadata.max.bytes). The server sets its Logger and
	// PartitionExists, and takes NumPartitions from __consumer_offsets
	// once that topic exists.
	Groups group.Config
	// Tiering holds the tiered storage settings (remote.storage.*,
	// remote.cache.*; see tiering.go).
	Tiering TieringConfig
	// Properties are the broker settings as given, for DescribeConfigs on
	// the broker resource.
	Properties map[string]string
	// Logger receives the broker's logs; nil means slog.Default().
	Logger *slog.Logger
	// LogOptions are passed to segment.Open for every partition log, after
	// the broker's own (tests inject hooks such as segment.WithSyncHook).
	LogOptions []segment.Option

	// hooks are the connection's test seams (conn.go), unset outside
	// this package's tests.
	hooks connHooks
}

// defaultZeroCopy is true unless built with the strata_copyfetch tag.
var defaultZeroCopy = !copyFetchBuild

// DefaultConfig is the configuration of `strata broker` with no settings:
// a single node on 127.0.0.1:9092 with data in ./data.
func DefaultConfig() Config {
	c, err := ConfigFromProperties(nil)
	if err != nil {
		panic("broker: defaults do not parse: " + err.Error())
	}
	return c
}

// ConfigError names a broker setting that is unknown or has a bad value.
type ConfigError struct {
	Key, Value string
	Reason     string
}

// Error names the key, the value and what is wrong with it.
func (e *ConfigError) Error() string {
	if e.Value == "" && strings.HasPrefix(e.Reason, "unknown") {
		return fmt.Sprintf("broker config %q: %s", e.Key, e.Reason)
	}
	return fmt.Sprintf("broker config %s=%q: %s", e.Key, e.Value, e.Reason)
}

// brokerKeys lists every accepted broker setting and a one-line note, for
// --help and for DescribeConfigs.
var brokerKeys = map[string]string{
	"broker.id":                                     "this broker's id (default 0)",
	"listeners":                                     "PLAINTEXT://host:port to listen on (default PLAINTEXT://127.0.0.1:9092; port 0 picks one)",
	"advertised.listeners":                          "PLAINTEXT://host:port clients are told to connect to (default: the listener)",
	"log.dirs":                                      "data directory (one; default ./data)",
	"log.dir":                                       "data directory if log.dirs is not set",
	"auto.create.topics.enable":                     "create unknown topics on Metadata and Produce (default true)",
	"num.partitions":                                "partitions of auto-created topics (default 1)",
	"default.replication.factor":                    "replication factor of auto-created topics (default 1)",
	"log.segment.bytes":                             "default segment.bytes (1073741824)",
	"log.roll.ms":                                   "default segment.ms",
	"log.roll.hours":                                "default segment.ms in hours (168)",
	"log.index.size.max.bytes":                      "default segment.index.bytes (10485760)",
	"log.index.interval.bytes":                      "default index.interval.bytes (4096)",
	"log.retention.ms":                              "default retention.ms",
	"log.retention.minutes":                         "default retention.ms in minutes",
	"log.retention.hours":                           "default retention.ms in hours (168)",
	"log.retention.bytes":                           "default retention.bytes (-1, unlimited)",
	"log.flush.interval.messages":                   "default flush.messages (never)",
	"log.flush.interval.ms":                         "default flush.ms (never)",
	"log.segment.delete.delay.ms":                   "default file.delete.delay.ms (60000)",
	"log.cleanup.policy":                            "default cleanup.policy (delete; compact is not supported)",
	"log.message.timestamp.type":                    "default message.timestamp.type (CreateTime or LogAppendTime)",
	"message.max.bytes":                             "default max.message.bytes (1048588)",
	"min.insync.replicas":                           "default min.insync.replicas (1)",
	"socket.request.max.bytes":                      "largest request frame accepted (104857600)",
	"connections.max.idle.ms":                       "idle connections are closed after this (600000)",
	"log.retention.check.interval.ms":               "how often retention runs (300000)",
	"num.network.threads":                           "accepted for compatibility; no effect (Go schedules connections)",
	"num.io.threads":                                "accepted for compatibility; no effect (Go schedules requests)",
	"zookeeper.connect":                             "host:port[,host:port...][/chroot] of the ZooKeeper ensemble that holds the cluster's metadata (chroot default /strata); empty (the default) runs a single node with the embedded coordinator",
	"zookeeper.session.timeout.ms":                  "a broker ZooKeeper does not hear from this long is dead to the cluster and its partitions get new leaders (default 18000)",
	"zookeeper.connection.timeout.ms":               "how long the broker waits at start for its ZooKeeper session (default: zookeeper.session.timeout.ms)",
	"broker.rack":                                   "this broker's rack; replicas of a partition are spread over racks (all brokers or none must have one)",
	"replication.port":                              "port of the broker-to-broker replication listener (gRPC), on the Kafka listener's host, published in ZooKeeper; 0 (the default) picks a free port. Only brokers with zookeeper.connect listen",
	"replica.lag.time.max.ms":                       "a follower that has not caught up with the leader for this long leaves the ISR (default 30000)",
	"replica.fetch.max.bytes":                       "most bytes a leader sends a follower for one partition at a time, at least one batch (default 1048576)",
	"replica.fetch.backoff.ms":                      "a follower's wait before retrying after a replication error (default 1000)",
	"replica.high.watermark.checkpoint.interval.ms": "how often each partition's high watermark is written to disk (default 5000)",
	"controlled.shutdown.enable":                    "on SIGTERM, move this broker's partition leadership to other replicas before exiting (default true)",
	"auto.leader.rebalance.enable":                  "move leadership back to a partition's preferred replica when it is live and in sync again (default true)",
	"unclean.leader.election.enable":                "default unclean.leader.election.enable: elect an out-of-sync replica rather than leave a partition offline (default false)",
	"offsets.topic.replication.factor":              "replicas of __consumer_offsets when it is created, capped at the live brokers (default 3)",
	"strata.fetch.zero.copy":                        "send fetched records with sendfile (default true); false copies, for benchmarks",
	"offsets.topic.num.partitions":                  "partitions of __consumer_offsets when it is created (default 50); an existing topic keeps its count",
	"group.initial.rebalance.delay.ms":              "how long the first rebalance of an empty group waits for more members (default 3000)",
	"group.min.session.timeout.ms":                  "shortest session timeout a group member may ask for (default 6000)",
	"group.max.session.timeout.ms":                  "longest session timeout a group member may ask for (default 1800000)",
	"offsets.retention.minutes":                     "committed offsets of a group that has been empty this long are deleted (default 10080)",
	"offsets.retention.check.interval.ms":           "how often expired committed offsets are looked for (default 600000)",
	"offset.metadata.max.bytes":                     "longest metadata a committed offset may carry (default 4096, at most 32767)",
}

// BrokerKeys returns the accepted broker settings with a note each, sorted
// by key, for help texts.
func BrokerKeys() [][2]string {
	out := make([][2]string, 0, len(brokerKeys))
	for k, v := range brokerKeys {
		out = append(out, [2]string{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// ConfigFromProperties builds a Config from broker settings with Kafka's
// names. Any unknown key or bad value is reported as a *ConfigError naming
// it.
func ConfigFromProperties(props map[string]string) (Config, error) {
	c := Config{
		BrokerID:                 0,
		Listen:                   "127.0.0.1:9092",
		LogDir:                   "./data",
		AutoCreateTopics:         true,
		NumPartitions:            1,
		DefaultReplicationFactor: 1,
		SocketRequestMaxBytes:    104857600,
		ConnectionsMaxIdle:       600000 * time.Millisecond,
		RetentionCheckInterval:   300000 * time.Millisecond,
		ZeroCopy:                 defaultZeroCopy,
		TopicDefaults:            map[string]string{},
		Groups:                   group.DefaultConfig(),
		Properties:               map[string]string{},

		ZooKeeperSessionTimeout:       18000 * time.Millisecond,
		ReplicaLagTimeMax:             30000 * time.Millisecond,
		ReplicaFetchMaxBytes:          1048576,
		ReplicaFetchBackoff:           1000 * time.Millisecond,
		HWCheckpointInterval:          5000 * time.Millisecond,
		ControlledShutdown:            true,
		AutoLeaderRebalance:           true,
		OffsetsTopicReplicationFactor: 3,
	}
	for _, d := range topicConfigDefs {
		c.TopicDefaults[d.name] = d.kafkaDefault
	}
	keys := make([]string, 0, len(props))
	for k := range props {
		if _, ok := brokerKeys[k]; !ok {
			return c, &ConfigError{Key: k, Reason: "unknown setting (see strata broker --help for the list)"}
		}
		keys = append(keys, k)
		c.Properties[k] = props[k]
	}
	sort.Strings(keys)
	val := func(k string) (string, bool) {
		v, ok := props[k]
		return strings.TrimSpace(v), ok
	}
	bad := func(k, reason string) error { return &ConfigError{Key: k, Value: props[k], Reason: reason} }
	intIn := func(k string, min, max int64) (int64, bool, error) {
		v, ok := val(k)
		if !ok {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, true, bad(k, "not an integer")
		}
		if n < min || n > max {
			return 0, true, bad(k, fmt.Sprintf("must be between %d and %d", min, max))
		}
		return n, true, nil
	}

	if n, ok, err := intIn("broker.id", 0, math.MaxInt32); err != nil {
		return c, err
	} else if ok {
		c.BrokerID = int32(n)
	}
	if v, ok := val("listeners"); ok {
		hp, err := parseListener(v)
		if err != nil {
			return c, bad("listeners", err.Error())
		}
		c.Listen = hp
	}
	if v, ok := val("advertised.listeners"); ok {
		hp, err := parseListener(v)
		if err != nil {
			return c, bad("advertised.listeners", err.Error())
		}
		host, port, _ := net.SplitHostPort(hp)
		p, _ := strconv.Atoi(port)
		if host == "" || host == "0.0.0.0" || host == "::" {
			return c, bad("advertised.listeners", "must name a host clients can reach")
		}
		c.AdvertisedHost, c.AdvertisedPort = host, int32(p)
	}
	if v, ok := val("log.dir"); ok {
		if v == "" {
			return c, bad("log.dir", "empty")
		}
		c.LogDir = v
	}
	if v, ok := val("log.dirs"); ok {
		dirs := strings.Split(v, ",")
		if len(dirs) != 1 || strings.TrimSpace(dirs[0]) == "" {
			return c, bad("log.dirs", "exactly one directory is supported")
		}
		c.LogDir = strings.TrimSpace(dirs[0])
	}
	if v, ok := val("auto.create.topics.enable"); ok {
		b, err := strconv.ParseBool(v)
		if err != nil || (v != "true" && v != "false") {
			return c, bad("auto.create.topics.enable", "must be true or false")
		}
		c.AutoCreateTopics = b
	}
	if n, ok, err := intIn("num.partitions", 1, math.MaxInt32); err != nil {
		return c, err
	} else if ok {
		c.NumPartitions = int32(n)
	}
	if n, ok, err := intIn("default.replication.factor", 1, math.MaxInt16); err != nil {
		return c, err
	} else if ok {
		c.DefaultReplicationFactor = int16(n)
	}
	if n, ok, err := intIn("socket.request.max.bytes", 1, math.MaxInt32); err != nil {
		return c, err
	} else if ok {
		c.SocketRequestMaxBytes = int32(n)
	}
	if n, ok, err := intIn("connections.max.idle.ms", 1, math.MaxInt64/int64(time.Millisecond)); err != nil {
		return c, err
	} else if ok {
		c.ConnectionsMaxIdle = time.Duration(n) * time.Millisecond
	}
	if n, ok, err := intIn("log.retention.check.interval.ms", 1, math.MaxInt64/int64(time.Millisecond)); err != nil {
		return c, err
	} else if ok {
		c.RetentionCheckInterval = time.Duration(n) * time.Millisecond
	}
	for _, k := range []string{"num.network.threads", "num.io.threads"} {
		if _, _, err := intIn(k, 1, math.MaxInt32); err != nil {
			return c, err
		}
	}
	if err := c.clusterSettings(val, intIn, bad); err != nil {
		return c, err
	}
	if v, ok := val("strata.fetch.zero.copy"); ok {
		if v != "true" && v != "false" {
			return c, bad("strata.fetch.zero.copy", "must be true or false")
		}
		c.ZeroCopy = v == "true"
	}
	if err := c.groupSettings(intIn, bad); err != nil {
		return c, err
	}
	if err := c.tieringSettings(val, intIn, bad); err != nil {
		return c, err
	}
	if err := c.metricsSettings(val, bad); err != nil {
		return c, err
	}

	// Broker defaults of topic configs. Where Kafka has several keys for
	// one setting, the finer unit wins (ms over minutes over hours).
	setTopic := func(topicKey, brokerKey, value string) error {
		if err := topicConfigByName[topicKey].check(value); err != nil {
			return bad(brokerKey, err.Error())
		}
		c.TopicDefaults[topicKey] = value
		return nil
	}
	scaled := func(topicKey string, keys []string, mult []int64) error {
		for i, k := range keys {
			v, ok := val(k)
			if !ok {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return bad(k, "not an integer")
			}
			if n > 0 && n > math.MaxInt64/mult[i] {
				return bad(k, "too large")
			}
			if n < 0 && mult[i] > 1 {
				n = -1 // -1 hours is unlimited too
			} else {
				n *= mult[i]
			}
			return setTopic(topicKey, k, strconv.FormatInt(n, 10))
		}
		return nil
	}
	if err := scaled("retention.ms", []string{"log.retention.ms", "log.retention.minutes", "log.retention.hours"}, []int64{1, 60000, 3600000}); err != nil {
		return c, err
	}
	if err := scaled("segment.ms", []string{"log.roll.ms", "log.roll.hours"}, []int64{1, 3600000}); err != nil {
		return c, err
	}
	for _, d := range topicConfigDefs {
		switch d.brokerKey {
		case "log.retention.ms", "log.roll.ms":
			continue // handled above
		}
		if v, ok := val(d.brokerKey); ok {
			if err := setTopic(d.name, d.brokerKey, v); err != nil {
				return c, err
			}
		}
	}
	return c, nil
}

// clusterSettings reads the coordination settings: ZooKeeper, rack,
// controller behaviour.
func (c *Config) clusterSettings(val func(k string) (string, bool), intIn func(k string, min, max int64) (int64, bool, error), bad func(k, reason string) error) error {
	if v, ok := val("zookeeper.connect"); ok && v != "" {
		if _, _, err := coord.ParseConnect(v); err != nil {
			return bad("zookeeper.connect", "want host:port[,host:port...][/chroot]: "+err.Error())
		}
		c.ZooKeeperConnect = v
	}
	if n, ok, err := intIn("zookeeper.session.timeout.ms", 1, math.MaxInt32); err != nil {
		return err
	} else if ok {
		c.ZooKeeperSessionTimeout = time.Duration(n) * time.Millisecond
	}
	if n, ok, err := intIn("zookeeper.connection.timeout.ms", 1, math.MaxInt32); err != nil {
		return err
	} else if ok {
		c.ZooKeeperConnectionTimeout = time.Duration(n) * time.Millisecond
	}
	if v, ok := val("broker.rack"); ok {
		c.Rack = v
	}
	if n, ok, err := intIn("replication.port", 0, 65535); err != nil {
		return err
	} else if ok {
		c.ReplicationPort = int32(n)
	}
	for _, d := range []struct {
		key string
		min int64
		set *time.Duration
	}{
		{"replica.lag.time.max.ms", 1, &c.ReplicaLagTimeMax},
		{"replica.fetch.backoff.ms", 0, &c.ReplicaFetchBackoff},
		{"replica.high.watermark.checkpoint.interval.ms", 1, &c.HWCheckpointInterval},
	} {
		if n, ok, err := intIn(d.key, d.min, math.MaxInt32); err != nil {
			return err
		} else if ok {
			*d.set = time.Duration(n) * time.Millisecond
		}
	}
	if n, ok, err := intIn("replica.fetch.max.bytes", 1, math.MaxInt32); err != nil {
		return err
	} else if ok {
		c.ReplicaFetchMaxBytes = int32(n)
	}
	for _, b := range []struct {
		key string
		set *bool
	}{
		{"controlled.shutdown.enable", &c.ControlledShutdown},
		{"auto.leader.rebalance.enable", &c.AutoLeaderRebalance},
	} {
		if v, ok := val(b.key); ok {
			if v != "true" && v != "false" {
				return bad(b.key, "must be true or false")
			}
			*b.set = v == "true"
		}
	}
	if n, ok, err := intIn("offsets.topic.replication.factor", 1, math.MaxInt16); err != nil {
		return err
	} else if ok {
		c.OffsetsTopicReplicationFactor = int16(n)
	}
	return nil
}

// groupSettings reads the group coordinator's settings into c.Groups.
func (c *Config) groupSettings(intIn func(k string, min, max int64) (int64, bool, error), bad func(k, reason string) error) error {
	const maxMs = math.MaxInt64 / int64(time.Millisecond)
	g := &c.Groups
	for _, s := range []struct {
		key      string
		min, max int64
		set      func(n int64)
	}{
		{"offsets.topic.num.partitions", 1, math.MaxInt32, func(n int64) { g.NumPartitions = int(n) }},
		{"group.initial.rebalance.delay.ms", 0, math.MaxInt32, func(n int64) { g.InitialRebalanceDelay = time.Duration(n) * time.Millisecond }},
		{"group.min.session.timeout.ms", 0, math.MaxInt32, func(n int64) { g.MinSessionTimeout = time.Duration(n) * time.Millisecond }},
		{"group.max.session.timeout.ms", 0, math.MaxInt32, func(n int64) { g.MaxSessionTimeout = time.Duration(n) * time.Millisecond }},
		{"offsets.retention.minutes", 1, math.MaxInt32, func(n int64) { g.OffsetsRetention = time.Duration(n) * time.Minute }},
		{"offsets.retention.check.interval.ms", 1, maxMs, func(n int64) { g.OffsetsRetentionCheckInterval = time.Duration(n) * time.Millisecond }},
		{"offset.metadata.max.bytes", 0, math.MaxInt16, func(n int64) { g.OffsetMetadataMaxBytes = int(n) }},
	} {
		n, ok, err := intIn(s.key, s.min, s.max)
		if err != nil {
			return err
		}
		if ok {
			s.set(n)
		}
	}
	if g.MinSessionTimeout > g.MaxSessionTimeout {
		return bad("group.min.session.timeout.ms", fmt.Sprintf("must not exceed group.max.session.timeout.ms (%d)", g.MaxSessionTimeout.Milliseconds()))
	}
	return nil
}

// parseListener parses a listeners value: exactly one PLAINTEXT://host:port.
func parseListener(v string) (string, error) {
	if strings.Contains(v, ",") {
		return "", fmt.Errorf("only one listener is supported")
	}
	name, hp, ok := strings.Cut(v, "://")
	if !ok {
		return "", fmt.Errorf("want PLAINTEXT://host:port")
	}
	if name != "PLAINTEXT" {
		return "", fmt.Errorf("listener %q: only PLAINTEXT is supported", name)
	}
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		return "", fmt.Errorf("want PLAINTEXT://host:port: %v", err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return "", fmt.Errorf("bad port %q", port)
	}
	return net.JoinHostPort(host, port), nil
}

// advertised returns the host and port to put in Metadata for a server
// bound at bound.
func (c *Config) advertised(bound net.Addr) (string, int32) {
	host, port := c.AdvertisedHost, c.AdvertisedPort
	if host == "" {
		host, _, _ = net.SplitHostPort(c.Listen)
		if host == "" || host == "0.0.0.0" || host == "::" {
			if h, err := os.Hostname(); err == nil {
				host = h
			} else {
				host = "localhost"
			}
		}
	}
	if port == 0 {
		if ta, ok := bound.(*net.TCPAddr); ok {
			port = int32(ta.Port)
		}
	}
	return host, port
}

// brokerConfigEntries describes the broker's settings, read-only, for
// DescribeConfigs on the broker resource.
func (c *Config) brokerConfigEntries() []configEntry {
	effective := map[string]string{
		"broker.id":                                     strconv.Itoa(int(c.BrokerID)),
		"listeners":                                     "PLAINTEXT://" + c.Listen,
		"log.dirs":                                      c.LogDir,
		"auto.create.topics.enable":                     strconv.FormatBool(c.AutoCreateTopics),
		"num.partitions":                                strconv.Itoa(int(c.NumPartitions)),
		"default.replication.factor":                    strconv.Itoa(int(c.DefaultReplicationFactor)),
		"socket.request.max.bytes":                      strconv.Itoa(int(c.SocketRequestMaxBytes)),
		"connections.max.idle.ms":                       strconv.FormatInt(c.ConnectionsMaxIdle.Milliseconds(), 10),
		"log.retention.check.interval.ms":               strconv.FormatInt(c.RetentionCheckInterval.Milliseconds(), 10),
		"strata.fetch.zero.copy":                        strconv.FormatBool(c.ZeroCopy),
		"offsets.topic.num.partitions":                  strconv.Itoa(c.Groups.NumPartitions),
		"group.initial.rebalance.delay.ms":              strconv.FormatInt(c.Groups.InitialRebalanceDelay.Milliseconds(), 10),
		"group.min.session.timeout.ms":                  strconv.FormatInt(c.Groups.MinSessionTimeout.Milliseconds(), 10),
		"group.max.session.timeout.ms":                  strconv.FormatInt(c.Groups.MaxSessionTimeout.Milliseconds(), 10),
		"offsets.retention.minutes":                     strconv.FormatInt(int64(c.Groups.OffsetsRetention/time.Minute), 10),
		"offsets.retention.check.interval.ms":           strconv.FormatInt(c.Groups.OffsetsRetentionCheckInterval.Milliseconds(), 10),
		"offset.metadata.max.bytes":                     strconv.Itoa(c.Groups.OffsetMetadataMaxBytes),
		"zookeeper.connect":                             c.ZooKeeperConnect,
		"zookeeper.session.timeout.ms":                  strconv.FormatInt(c.ZooKeeperSessionTimeout.Milliseconds(), 10),
		"replication.port":                              strconv.Itoa(int(c.ReplicationPort)),
		"replica.lag.time.max.ms":                       strconv.FormatInt(c.ReplicaLagTimeMax.Milliseconds(), 10),
		"replica.fetch.max.bytes":                       strconv.Itoa(int(c.ReplicaFetchMaxBytes)),
		"replica.fetch.backoff.ms":                      strconv.FormatInt(c.ReplicaFetchBackoff.Milliseconds(), 10),
		"replica.high.watermark.checkpoint.interval.ms": strconv.FormatInt(c.HWCheckpointInterval.Milliseconds(), 10),
		"controlled.shutdown.enable":                    strconv.FormatBool(c.ControlledShutdown),
		"auto.leader.rebalance.enable":                  strconv.FormatBool(c.AutoLeaderRebalance),
		"offsets.topic.replication.factor":              strconv.Itoa(int(c.OffsetsTopicReplicationFactor)),
	}
	if c.ZooKeeperConnectionTimeout > 0 {
		effective["zookeeper.connection.timeout.ms"] = strconv.FormatInt(c.ZooKeeperConnectionTimeout.Milliseconds(), 10)
	}
	if c.Rack != "" {
		effective["broker.rack"] = c.Rack
	}
	if c.AdvertisedHost != "" {
		effective["advertised.listeners"] = "PLAINTEXT://" + net.JoinHostPort(c.AdvertisedHost, strconv.Itoa(int(c.AdvertisedPort)))
	}
	for _, d := range topicConfigDefs {
		effective[d.brokerKey] = c.TopicDefaults[d.name]
	}
	types := map[string]kmsg.ConfigType{
		"auto.create.topics.enable":                     kmsg.ConfigTypeBoolean,
		"strata.fetch.zero.copy":                        kmsg.ConfigTypeBoolean,
		"listeners":                                     kmsg.ConfigTypeString,
		"advertised.listeners":                          kmsg.ConfigTypeString,
		"log.dirs":                                      kmsg.ConfigTypeString,
		"log.dir":                                       kmsg.ConfigTypeString,
		"zookeeper.connect":                             kmsg.ConfigTypeString,
		"broker.rack":                                   kmsg.ConfigTypeString,
		"zookeeper.session.timeout.ms":                  kmsg.ConfigTypeInt,
		"zookeeper.connection.timeout.ms":               kmsg.ConfigTypeInt,
		"replication.port":                              kmsg.ConfigTypeInt,
		"replica.lag.time.max.ms":                       kmsg.ConfigTypeLong,
		"replica.fetch.max.bytes":                       kmsg.ConfigTypeInt,
		"replica.fetch.backoff.ms":                      kmsg.ConfigTypeInt,
		"replica.high.watermark.checkpoint.interval.ms": kmsg.ConfigTypeLong,
		"controlled.shutdown.enable":                    kmsg.ConfigTypeBoolean,
		"auto.leader.rebalance.enable":                  kmsg.ConfigTypeBoolean,
		"unclean.leader.election.enable":                kmsg.ConfigTypeBoolean,
		"offsets.topic.replication.factor":              kmsg.ConfigTypeShort,
		"log.message.timestamp.type":                    kmsg.ConfigTypeString,
		"log.cleanup.policy":                            kmsg.ConfigTypeList,
		"offsets.topic.num.partitions":                  kmsg.ConfigTypeInt,
		"group.initial.rebalance.delay.ms":              kmsg.ConfigTypeInt,
		"group.min.session.timeout.ms":                  kmsg.ConfigTypeInt,
		"group.max.session.timeout.ms":                  kmsg.ConfigTypeInt,
		"offsets.retention.minutes":                     kmsg.ConfigTypeInt,
		"offset.metadata.max.bytes":                     kmsg.ConfigTypeInt,
		"remote.log.storage.system.enable":              kmsg.ConfigTypeBoolean,
		"remote.storage.s3.endpoint":                    kmsg.ConfigTypeString,
		"remote.storage.s3.bucket":                      kmsg.ConfigTypeString,
		"remote.storage.s3.region":                      kmsg.ConfigTypeString,
		"remote.storage.s3.prefix":                      kmsg.ConfigTypeString,
		"remote.storage.s3.path.style.access":           kmsg.ConfigTypeBoolean,
		"remote.storage.dir":                            kmsg.ConfigTypeString,
		"remote.cache.dir":                              kmsg.ConfigTypeString,
		"strata.remote.restore.topics":                  kmsg.ConfigTypeList,
		"metrics.listener":                              kmsg.ConfigTypeString,
		"strata.pprof.listener":                         kmsg.ConfigTypeString,
	}
	var out []configEntry
	for _, kv := range BrokerKeys() {
		k := kv[0]
		e := configEntry{name: k, doc: kv[1], typ: kmsg.ConfigTypeLong, source: kmsg.ConfigSourceDefaultConfig}
		if t, ok := types[k]; ok {
			e.typ = t
		}
		if v, ok := c.Properties[k]; ok {
			e.value, e.source = strings.TrimSpace(v), kmsg.ConfigSourceStaticBrokerConfig
		} else if v, ok := effective[k]; ok {
			e.value = v
		} else {
			continue // unset and without a default (log.roll.hours, ...)
		}
		e.synonyms = []configSynonym{{name: k, value: e.value, source: e.source}}
		out = append(out, e)
	}
	return out
}
