package broker

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/stratastream/strata/broker/group"
	"github.com/stratastream/strata/broker/share"
	"github.com/stratastream/strata/broker/sharestate"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config is a broker's configuration. Build it with DefaultConfig or
// ConfigFromProperties; the zero value is not usable.
type Config struct {
	// BrokerID is broker.id.
	BrokerID int32
	// Listeners are the listeners to bind (listeners), in order; the
	// first is the one Addr reports (listeners.go).
	Listeners []ListenerAddr
	// AdvertisedListeners are what Metadata tells clients of each
	// listener (advertised.listeners); nil means Listeners.
	AdvertisedListeners []ListenerAddr
	// ListenerProtocols is listener.security.protocol.map: each listener
	// name's security protocol.
	ListenerProtocols map[string]SecurityProtocol
	// InterBrokerListener names the listener other brokers use
	// (inter.broker.listener.name, else the listener named by
	// InterBrokerProtocol, else the only listener); its advertised host
	// is where they reach this broker's replication port too.
	InterBrokerListener string
	// InterBrokerProtocol is security.inter.broker.protocol.
	InterBrokerProtocol SecurityProtocol
	// ListenerOverrides are the per-listener settings
	// (listener.name.<name>.<setting>) by upper-cased listener name,
	// then setting name; ListenerProperties resolves them.
	ListenerOverrides map[string]map[string]string
	// LogDirs are the data directories (log.dirs), each holding
	// partition directories, its own meta.properties and lock
	// (logdirs.go). The first also holds the embedded coordinator's
	// metadata and the producer-id blocks (MetaDir).
	LogDirs []string
	// AutoCreateTopics is auto.create.topics.enable.
	AutoCreateTopics bool
	// NumPartitions is num.partitions, for auto-created topics and
	// CreateTopics with -1 partitions.
	NumPartitions int32
	// DefaultReplicationFactor is default.replication.factor.
	DefaultReplicationFactor int16
	// SocketRequestMaxBytes is socket.request.max.bytes.
	SocketRequestMaxBytes int32
	// MaxConnections is max.connections: at that many open connections
	// the accept loop waits until one closes.
	MaxConnections int32
	// MaxConnectionsPerIP is max.connections.per.ip: a connection from
	// an address that already has that many is closed at once.
	MaxConnectionsPerIP int32
	// QuotaWindowNum and QuotaWindowSizeSeconds are quota.window.num
	// and quota.window.size.seconds: the samples client quota rates are
	// measured over (client_quotas.go).
	QuotaWindowNum         int32
	QuotaWindowSizeSeconds int32
	// MaxConnectionsPerIPOverrides is max.connections.per.ip.overrides:
	// limits by IP address or hostname (resolved by NewServer) that
	// replace MaxConnectionsPerIP.
	MaxConnectionsPerIPOverrides map[string]int
	// QueuedMaxRequestBytes is queued.max.request.bytes: the bytes of
	// request frames read and not yet answered, over all connections,
	// beyond which readers wait; 0 or less for no bound.
	QueuedMaxRequestBytes int64
	// MaxPartitionsPerRequest is strata.max.partitions.per.request: the
	// most partitions one CreateTopics or CreatePartitions may create.
	MaxPartitionsPerRequest int32
	// MaxBrokerPartitions is strata.max.broker.partitions: the most
	// partition replicas a topic change may leave on any broker.
	MaxBrokerPartitions int32
	// ConnectionsMaxIdle is connections.max.idle.ms.
	ConnectionsMaxIdle time.Duration
	// ConnectionsMaxReauth is connections.max.reauth.ms, broker-wide
	// (listeners may override it).
	ConnectionsMaxReauth time.Duration
	// SSLReloadCheckInterval is strata.ssl.reload.check.interval.ms: how
	// often TLS listeners look for changed certificate files; 0 for never.
	SSLReloadCheckInterval time.Duration
	// FailedAuthenticationDelay is
	// connection.failed.authentication.delay.ms.
	FailedAuthenticationDelay time.Duration
	// DelegationTokenSecretKey is delegation.token.secret.key (else its
	// deprecated alias delegation.token.master.key, DelegationTokenMasterKey):
	// empty for delegation tokens disabled (delegation_tokens.go).
	DelegationTokenSecretKey, DelegationTokenMasterKey string
	// DelegationTokenMaxLifetime, DelegationTokenExpiryTime and
	// DelegationTokenExpiryCheckInterval are delegation.token.max.lifetime.ms,
	// delegation.token.expiry.time.ms and
	// delegation.token.expiry.check.interval.ms.
	DelegationTokenMaxLifetime, DelegationTokenExpiryTime, DelegationTokenExpiryCheckInterval time.Duration
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
	// embedded coordinator in MetaDir.
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
	// LeaderReplicationThrottledRate and FollowerReplicationThrottledRate
	// are leader.replication.throttled.rate and
	// follower.replication.throttled.rate as the properties file gives
	// them (bytes per second, math.MaxInt64: unthrottled); run-time
	// changes are kept by the server (replication_throttle.go).
	LeaderReplicationThrottledRate, FollowerReplicationThrottledRate int64
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
	// OffsetsTopicSegmentBytes is offsets.topic.segment.bytes: the
	// segment.bytes __consumer_offsets is created with. Only sealed
	// segments are compacted, so it bounds what a coordinator replays
	// beyond one record per key.
	OffsetsTopicSegmentBytes int32
	// Groups holds the consumer group coordinator's settings
	// (offsets.topic.num.partitions, group.initial.rebalance.delay.ms,
	// group.min.session.timeout.ms, group.max.session.timeout.ms,
	// offsets.retention.minutes, offsets.retention.check.interval.ms,
	// offset.metadata.max.bytes). The server sets its Logger and
	// PartitionExists, and takes NumPartitions from __consumer_offsets
	// once that topic exists.
	Groups group.Config
	// Share holds the share group settings (group.share.*;
	// settings_share.go). The server sets its Persister, GroupConfig,
	// Logger and MemberGone.
	Share share.Config
	// SharePersister stores share-partition state; share groups are
	// served only with one. Not a setting: the share coordinator, or a
	// test's in-memory persister.
	SharePersister sharestate.Persister
	// GroupProtocols holds the settings of consumer (KIP-848), share and
	// streams groups: their group configs' defaults and bounds
	// (group.consumer.*, group.share.*, group.streams.*;
	// settings_group_protocols.go).
	GroupProtocols GroupProtocolConfig
	// ShareCoordinator holds the share coordinator's settings
	// (share.coordinator.*; settings_share_coordinator.go).
	ShareCoordinator ShareCoordinatorConfig
	// Transactions holds the transaction coordinator's settings
	// (transaction.*, transactional.id.expiration.ms; txn_coordinator.go).
	Transactions TransactionConfig
	// Cleaner holds the log cleaner's settings (log.cleaner.*;
	// log_cleaner.go).
	Cleaner CleanerConfig
	// Tiering holds the tiered storage settings (remote.storage.*,
	// remote.cache.*; see tiering.go).
	Tiering TieringConfig
	// Properties are the broker settings as given, for DescribeConfigs on
	// the broker resource.
	Properties map[string]string
	// IgnoredKafkaSettings are the Kafka settings given that Strata does
	// not use, with the reason (kafka_settings.go), logged at start.
	IgnoredKafkaSettings map[string]string
	// Logger receives the broker's logs; nil means slog.Default().
	Logger *slog.Logger
	// LogOptions are passed to segment.Open for every partition log, after
	// the broker's own (tests inject hooks such as segment.WithSyncHook).
	LogOptions []segment.Option

	// hooks are the connection's test seams (conn.go), unset outside
	// this package's tests.
	hooks connHooks
}

// MetaDir is the first of log.dirs: it holds what the broker keeps once
// rather than per directory (the embedded coordinator's file, the
// producer-id blocks) and the default places of the local object store
// and the remote chunk cache.
func (c *Config) MetaDir() string {
	if len(c.LogDirs) == 0 {
		return ""
	}
	return c.LogDirs[0]
}

// defaultZeroCopy is true unless built with the strata_copyfetch tag.
var defaultZeroCopy = !copyFetchBuild

// DefaultConfig is the configuration of `strata broker` with no settings:
// every setting at its default, a single node with the embedded
// coordinator.
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

// Error names the key, the value (unless the setting is sensitive) and
// what is wrong with it.
func (e *ConfigError) Error() string {
	if e.Value == "" && strings.HasPrefix(e.Reason, "unknown setting "+e.Key+":") {
		return e.Reason
	}
	if e.Value == "" && strings.HasPrefix(e.Reason, "unknown") {
		return fmt.Sprintf("broker config %q: %s", e.Key, e.Reason)
	}
	if sensitiveKey(e.Key) {
		return fmt.Sprintf("broker config %s (value hidden): %s", e.Key, e.Reason)
	}
	return fmt.Sprintf("broker config %s=%q: %s", e.Key, e.Value, e.Reason)
}

// ConfigFromProperties builds a Config from broker settings with Kafka's
// names, as the settings registry (settings.go) describes them: every
// setting starts at its default, then each given one is checked and
// applied, in the registry's order. Any unknown key or bad value is
// reported as a *ConfigError naming it.
func ConfigFromProperties(props map[string]string) (Config, error) {
	c := Config{
		TopicDefaults: map[string]string{},
		Groups:        group.DefaultConfig(),
		Share:         share.DefaultConfig(),
		Properties:    map[string]string{},
	}
	for i := range settings {
		if s := &settings[i]; s.hasDefault() {
			if err := s.apply(&c, s.def); err != nil {
				panic(fmt.Sprintf("broker: default %s=%q: %v", s.label(), s.def, err))
			}
		}
	}
	for k, v := range props {
		if name, rest, s, ok := perListenerSetting(k); ok {
			scratch := c
			if err := s.apply(&scratch, strings.TrimSpace(v)); err != nil {
				return c, &ConfigError{Key: k, Value: v, Reason: err.Error()}
			}
			if c.ListenerOverrides == nil {
				c.ListenerOverrides = map[string]map[string]string{}
			}
			if c.ListenerOverrides[name] == nil {
				c.ListenerOverrides[name] = map[string]string{}
			}
			c.ListenerOverrides[name][rest] = strings.TrimSpace(v)
			c.Properties[k] = v
			continue
		}
		if _, ok := brokerSettingByName[k]; !ok {
			reason, kafka, err := unusedKafkaSetting(k, v)
			if err != nil {
				return c, &ConfigError{Key: k, Value: v, Reason: err.Error()}
			}
			if kafka {
				if c.IgnoredKafkaSettings == nil {
					c.IgnoredKafkaSettings = map[string]string{}
				}
				c.IgnoredKafkaSettings[k] = reason
				continue
			}
			reason = "unknown setting (see strata broker --help for the list)"
			if hint := unknownSettingHint(k); hint != "" {
				reason = "unknown setting " + k + ": did you mean " + hint + "?"
			}
			return c, &ConfigError{Key: k, Reason: reason}
		}
		c.Properties[k] = v
	}
	for i := range settings {
		s := &settings[i]
		if s.name == "" || s.synonymOf != "" {
			continue // a topic config only, or read with its setting
		}
		if len(s.synonyms) == 0 {
			v, ok := props[s.name]
			if !ok {
				continue
			}
			if err := s.apply(&c, strings.TrimSpace(v)); err != nil {
				return c, &ConfigError{Key: s.name, Value: v, Reason: err.Error()}
			}
			continue
		}
		// The finest unit given wins; the others are not read.
		for _, from := range append([]*setting{s}, s.synonyms...) {
			v, ok := props[from.name]
			if !ok {
				continue
			}
			if err := s.applyScaled(&c, from, strings.TrimSpace(v)); err != nil {
				return c, &ConfigError{Key: from.name, Value: v, Reason: err.Error()}
			}
			break
		}
	}
	if err := checkAcrossSettings(&c); err != nil {
		return c, err
	}
	return c, nil
}

// brokerConfigEntries describes the broker's settings, read-only, for
// DescribeConfigs on the broker resource: the value given, else the
// effective one; a setting without a value of its own is left out until it
// is given.
func (c *Config) brokerConfigEntries() []configEntry {
	var out []configEntry
	for _, s := range sortedBrokerSettings {
		e := configEntry{name: s.name, doc: s.doc, typ: s.typ.kafka(), source: kmsg.ConfigSourceDefaultConfig, readOnly: true, sensitive: s.sensitive}
		if v, ok := c.Properties[s.name]; ok {
			e.value, e.source = strings.TrimSpace(v), kmsg.ConfigSourceStaticBrokerConfig
		} else if v, ok := s.current(c); ok {
			e.value = v
		} else {
			continue
		}
		// Kafka's synonym order: the static settings (the setting, then
		// its synonyms in coarser units), then the default.
		for _, n := range s.brokerNames() {
			if v, ok := c.Properties[n]; ok {
				e.synonyms = append(e.synonyms, configSynonym{name: n, value: strings.TrimSpace(v), source: kmsg.ConfigSourceStaticBrokerConfig})
			}
		}
		if s.synonymOf == "" && s.hasDefault() {
			e.synonyms = append(e.synonyms, configSynonym{name: s.name, value: s.def, source: kmsg.ConfigSourceDefaultConfig})
		}
		if len(e.synonyms) == 0 {
			e.synonyms = []configSynonym{{name: s.name, value: e.value, source: e.source}}
		}
		out = append(out, e)
	}
	// The per-listener settings given, as Kafka lists them.
	for k, v := range c.Properties {
		if _, _, s, ok := perListenerSetting(k); ok {
			out = append(out, configEntry{name: k, value: strings.TrimSpace(v), doc: s.doc, typ: s.typ.kafka(), readOnly: true, sensitive: s.sensitive,
				source:   kmsg.ConfigSourceStaticBrokerConfig,
				synonyms: []configSynonym{{name: k, value: strings.TrimSpace(v), source: kmsg.ConfigSourceStaticBrokerConfig}}})
		}
	}
	slices.SortFunc(out, func(a, b configEntry) int { return strings.Compare(a.name, b.name) })
	return out
}

// sensitiveKey says the setting named key (possibly per listener) holds
// a secret.
func sensitiveKey(key string) bool {
	if s := brokerSettingByName[key]; s != nil {
		return s.sensitive
	}
	_, _, s, ok := perListenerSetting(key)
	return ok && s.sensitive
}
