package broker

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Kafka's server.properties starts a broker: a setting Kafka 3.9 has
// (kafkaBrokerConfigNames, generated from Kafka's source) that Strata does
// not use is accepted and logged once at start as ignored, with the
// reason kafkaUnused gives; a few whose silent loss would change security
// or identity are refused unless they hold the value that changes
// nothing; a key that is neither Strata's nor Kafka's is refused with the
// closest known name.

// kafkaUnusedGroup is a reason and the Kafka settings it covers. With
// refuse, they are refused whatever their value; with valueMatters,
// unless their value is harmless (Kafka's default, which changes
// nothing).
type kafkaUnusedGroup struct {
	reason       string
	keys         []string
	refuse       bool
	valueMatters bool
	harmless     string
}

// kafkaUnused is the one table of Kafka settings Strata does not use,
// grouped by reason. A Kafka setting in no group has reasonOther.
var kafkaUnused = []kafkaUnusedGroup{
	{reason: "Strata leaves socket buffers and the listen backlog to the kernel",
		keys: []string{"socket.send.buffer.bytes", "socket.receive.buffer.bytes", "socket.listen.backlog.size", "replica.socket.receive.buffer.bytes"}},
	{reason: "Strata runs its work on goroutines, not thread pools",
		keys: []string{"num.recovery.threads.per.data.dir", "background.threads", "num.replica.fetchers", "num.replica.alter.log.dirs.threads",
			"group.coordinator.threads", "remote.log.manager.thread.pool.size", "remote.log.manager.copier.thread.pool.size",
			"remote.log.manager.expiration.thread.pool.size", "queued.max.requests"}},
	{reason: "Strata has no purgatory to purge: waiting requests are dropped as they complete",
		keys: []string{"fetch.purgatory.purge.interval.requests", "producer.purgatory.purge.interval.requests", "delete.records.purgatory.purge.interval.requests"}},
	{reason: "Strata's metrics are Prometheus metrics (metrics.listener), not Kafka's reporters",
		keys: []string{"metric.reporters", "metrics.num.samples", "metrics.recording.level", "metrics.sample.window.ms", "kafka.metrics.polling.interval.secs",
			"kafka.metrics.reporters", "auto.include.jmx.reporter", "telemetry.max.bytes"}},
	{reason: "the KRaft controller quorum: Strata coordinates through ZooKeeper or its embedded coordinator",
		keys: []string{"controller.quorum.append.linger.ms", "controller.quorum.election.backoff.max.ms", "controller.quorum.election.timeout.ms",
			"controller.quorum.fetch.timeout.ms", "controller.quorum.request.timeout.ms", "controller.quorum.retry.backoff.ms", "broker.heartbeat.interval.ms",
			"broker.session.timeout.ms", "initial.broker.registration.timeout.ms", "metadata.log.max.record.bytes.between.snapshots",
			"metadata.log.max.snapshot.interval.ms", "metadata.log.segment.bytes", "metadata.log.segment.min.bytes", "metadata.log.segment.ms",
			"metadata.max.idle.interval.ms", "metadata.max.retention.bytes", "metadata.max.retention.ms", "sasl.mechanism.controller.protocol",
			"controller.quota.window.num", "controller.quota.window.size.seconds", "server.max.startup.time.ms", "eligible.leader.replicas.enable",
			"zookeeper.metadata.migration.min.batch.size"}},
	{reason: "KRaft mode is not supported: Strata runs with zookeeper.connect or its embedded coordinator, and takes its id from broker.id",
		keys: []string{"process.roles", "node.id", "controller.quorum.voters", "controller.quorum.bootstrap.servers", "controller.listener.names", "metadata.log.dir"}, refuse: true},
	{reason: "Strata's ZooKeeper client speaks plaintext with open ACLs; TLS or secure ACLs to ZooKeeper cannot be honoured",
		keys: []string{"zookeeper.ssl.client.enable", "zookeeper.set.acl", "zookeeper.metadata.migration.enable"}, valueMatters: true, harmless: "false"},
	{reason: "Strata builds principals as Kafka's DefaultKafkaPrincipalBuilder does (ssl.principal.mapping.rules); another builder class cannot be loaded",
		keys: []string{"principal.builder.class"}, valueMatters: true, harmless: "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"},
	{reason: "Strata's ZooKeeper client speaks plaintext (zookeeper.ssl.client.enable is not supported)",
		keys: []string{"zookeeper.clientCnxnSocket", "zookeeper.max.in.flight.requests", "zookeeper.ssl.cipher.suites", "zookeeper.ssl.crl.enable",
			"zookeeper.ssl.enabled.protocols", "zookeeper.ssl.endpoint.identification.algorithm", "zookeeper.ssl.keystore.location",
			"zookeeper.ssl.keystore.password", "zookeeper.ssl.keystore.type", "zookeeper.ssl.ocsp.enable", "zookeeper.ssl.protocol",
			"zookeeper.ssl.truststore.location", "zookeeper.ssl.truststore.password", "zookeeper.ssl.truststore.type"}},
	{reason: "a Java plugin class: Strata cannot load Java code",
		keys: []string{"alter.config.policy.class.name", "create.topic.policy.class.name", "client.quota.callback.class",
			"replica.selector.class", "ssl.engine.factory.class", "security.providers", "sasl.client.callback.handler.class", "sasl.login.callback.handler.class",
			"sasl.login.class", "remote.log.metadata.manager.class.name", "remote.log.metadata.manager.class.path", "remote.log.storage.manager.class.name",
			"remote.log.storage.manager.class.path"}, valueMatters: true},
	{reason: "Strata's tiered storage is built in (strata.tier.*), not Kafka's remote log manager",
		keys: []string{"remote.log.index.file.cache.total.size.bytes", "remote.log.manager.copy.max.bytes.per.second",
			"remote.log.manager.copy.quota.window.num", "remote.log.manager.copy.quota.window.size.seconds", "remote.log.manager.task.interval.ms",
			"remote.log.manager.task.retry.backoff.max.ms", "remote.log.manager.task.retry.backoff.ms", "remote.log.manager.task.retry.jitter",
			"remote.log.metadata.custom.metadata.max.bytes", "remote.log.metadata.manager.impl.prefix", "remote.log.metadata.manager.listener.name",
			"remote.log.storage.manager.impl.prefix"}},
	{reason: "Strata's remote fetch quota is a token bucket, not a rate sampled over windows (fetch_remote_quota.go)",
		keys: []string{"remote.log.manager.fetch.quota.window.num", "remote.log.manager.fetch.quota.window.size.seconds"}},
	{reason: "Kerberos (GSSAPI) and OAUTHBEARER login are not supported",
		keys: []string{"sasl.kerberos.kinit.cmd", "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules", "sasl.kerberos.service.name",
			"sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.ticket.renew.window.factor", "sasl.login.connect.timeout.ms", "sasl.login.read.timeout.ms",
			"sasl.login.refresh.buffer.seconds", "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
			"sasl.login.retry.backoff.max.ms", "sasl.login.retry.backoff.ms", "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
			"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "sasl.oauthbearer.token.endpoint.url"}},
	{reason: "Strata writes one message format (v2) and protocol version; it does not pin older ones",
		keys: []string{"inter.broker.protocol.version", "log.message.format.version", "unstable.api.versions.enable", "unstable.feature.versions.enable"}},
	{reason: "Strata's logs need no preallocation, jitter or extra checkpoints",
		keys: []string{"log.preallocate", "log.roll.jitter.ms", "log.roll.jitter.hours", "log.flush.scheduler.interval.ms", "log.flush.offset.checkpoint.interval.ms",
			"log.flush.start.offset.checkpoint.interval.ms", "log.initial.task.delay.ms", "log.dir.failure.timeout.ms"}},
}

// reasonOther is the reason of a Kafka setting in no group.
const reasonOther = "a Kafka setting Strata does not implement"

// kafkaUnusedByKey indexes kafkaUnused; a key in a group that is also a
// Strata setting, or not a Kafka setting, is a mistake in the table and
// panics when the package loads.
var kafkaUnusedByKey = func() map[string]*kafkaUnusedGroup {
	kafka := map[string]bool{}
	for _, n := range kafkaBrokerConfigNames {
		kafka[n] = true
	}
	out := map[string]*kafkaUnusedGroup{}
	for i := range kafkaUnused {
		g := &kafkaUnused[i]
		for _, k := range g.keys {
			if !kafka[k] {
				panic("broker: kafkaUnused lists " + k + ", which is not a Kafka broker config")
			}
			if _, dup := out[k]; dup {
				panic("broker: kafkaUnused lists " + k + " twice")
			}
			out[k] = g
		}
	}
	return out
}()

var kafkaConfigName = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range kafkaBrokerConfigNames {
		m[n] = true
	}
	return m
}()

// unusedKafkaSetting says key is a Kafka broker setting Strata does not
// use (ok), and with what reason; err refuses it when its value cannot
// be ignored safely.
func unusedKafkaSetting(key, value string) (reason string, ok bool, err error) {
	if _, known := brokerSettingByName[key]; known {
		return "", false, nil
	}
	base := key
	if _, rest, ok := strings.Cut(strings.TrimPrefix(key, "listener.name."), "."); ok && strings.HasPrefix(key, "listener.name.") {
		base = rest // a per-listener form of a Kafka setting
	}
	if !kafkaConfigName[base] {
		return "", false, nil
	}
	g := kafkaUnusedByKey[base]
	if g == nil {
		return reasonOther, true, nil
	}
	if g.refuse || g.valueMatters && strings.TrimSpace(value) != g.harmless {
		return g.reason, true, fmt.Errorf("not supported (a Kafka setting): %s", g.reason)
	}
	return g.reason, true, nil
}

// unknownSettingHint names the known setting (Strata's or Kafka's)
// closest to key, or "" if none is close.
func unknownSettingHint(key string) string {
	best, bestD := "", 1<<30
	consider := func(n string) {
		if d := editDistance(key, n); d < bestD || d == bestD && n < best {
			best, bestD = n, d
		}
	}
	for n := range brokerSettingByName {
		consider(n)
	}
	for _, n := range kafkaBrokerConfigNames {
		consider(n)
	}
	if bestD > max(2, len(key)/4) {
		return ""
	}
	return best
}

// editDistance is the optimal string alignment distance (Levenshtein with
// adjacent transpositions).
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// logIgnoredKafkaSettings logs, once at start, the Kafka settings given
// that Strata does not use, one line per reason.
func (s *Server) logIgnoredKafkaSettings() {
	byReason := map[string][]string{}
	for k, reason := range s.cfg.IgnoredKafkaSettings {
		byReason[reason] = append(byReason[reason], k)
	}
	for _, reason := range slices.Sorted(maps.Keys(byReason)) {
		keys := byReason[reason]
		slices.Sort(keys)
		s.log.Warn("Kafka settings ignored", "reason", reason, "settings", strings.Join(keys, ","))
	}
}
