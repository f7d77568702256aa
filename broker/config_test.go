package broker

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	c := DefaultConfig()
	if formatListenerList(c.Listeners) != "PLAINTEXT://127.0.0.1:9092" || c.InterBrokerListener != "PLAINTEXT" || !slices.Equal(c.LogDirs, []string{"./data"}) || !c.AutoCreateTopics || c.NumPartitions != 1 ||
		c.SocketRequestMaxBytes != 104857600 || c.ConnectionsMaxIdle != 10*time.Minute || c.RetentionCheckInterval != 5*time.Minute {
		t.Fatalf("defaults: %+v", c)
	}
	if c.TopicDefaults["max.message.bytes"] != "1048588" || c.TopicDefaults["retention.ms"] != "604800000" {
		t.Fatalf("topic defaults: %v", c.TopicDefaults)
	}
}

func TestConfigFromProperties(t *testing.T) {
	c, err := ConfigFromProperties(map[string]string{
		"broker.id":                   "3",
		"listeners":                   "PLAINTEXT://0.0.0.0:0",
		"advertised.listeners":        "PLAINTEXT://kafka.example:19092",
		"log.dir":                     "/ignored",
		"log.dirs":                    "/var/lib/strata",
		"log.retention.hours":         "2",
		"log.retention.minutes":       "30",
		"log.roll.hours":              "1",
		"log.flush.interval.messages": "1",
		"message.max.bytes":           "2000000",
		"num.io.threads":              "8",
		"zookeeper.connect":           "",
		"strata.fetch.zero.copy":      "false",
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.BrokerID != 3 || formatListenerList(c.Listeners) != "PLAINTEXT://0.0.0.0:0" || formatListenerList(c.AdvertisedListeners) != "PLAINTEXT://kafka.example:19092" || !slices.Equal(c.LogDirs, []string{"/var/lib/strata"}) || c.ZeroCopy {
		t.Fatalf("got %+v", c)
	}
	for k, want := range map[string]string{"retention.ms": "1800000", "segment.ms": "3600000", "flush.messages": "1", "max.message.bytes": "2000000"} {
		if got := c.TopicDefaults[k]; got != want {
			t.Fatalf("%s: got %s, want %s", k, got, want)
		}
	}
}

func TestConfigGroupSettings(t *testing.T) {
	c := DefaultConfig()
	if g := c.Groups; g.NumPartitions != 50 || g.InitialRebalanceDelay != 3*time.Second || g.MinSessionTimeout != 6*time.Second ||
		g.MaxSessionTimeout != 30*time.Minute || g.OffsetsRetention != 7*24*time.Hour || g.OffsetsRetentionCheckInterval != 10*time.Minute ||
		g.OffsetMetadataMaxBytes != 4096 {
		t.Fatalf("group defaults: %+v", g)
	}
	c, err := ConfigFromProperties(map[string]string{
		"offsets.topic.num.partitions":        "7",
		"group.initial.rebalance.delay.ms":    "0",
		"group.min.session.timeout.ms":        "100",
		"group.max.session.timeout.ms":        "200",
		"offsets.retention.minutes":           "60",
		"offsets.retention.check.interval.ms": "1000",
		"offset.metadata.max.bytes":           "10",
	})
	if err != nil {
		t.Fatal(err)
	}
	if g := c.Groups; g.NumPartitions != 7 || g.InitialRebalanceDelay != 0 || g.MinSessionTimeout != 100*time.Millisecond ||
		g.MaxSessionTimeout != 200*time.Millisecond || g.OffsetsRetention != time.Hour || g.OffsetsRetentionCheckInterval != time.Second ||
		g.OffsetMetadataMaxBytes != 10 {
		t.Fatalf("group settings: %+v", g)
	}
	got := map[string]string{}
	for _, e := range c.brokerConfigEntries() {
		got[e.name] = e.value
	}
	if got["offsets.topic.num.partitions"] != "7" || got["offsets.retention.minutes"] != "60" || got["offset.metadata.max.bytes"] != "10" {
		t.Fatalf("described settings: %v", got)
	}
}

func TestConfigClusterSettings(t *testing.T) {
	c := DefaultConfig()
	if c.ZooKeeperConnect != "" || c.ZooKeeperSessionTimeout != 18*time.Second || !c.ControlledShutdown || !c.AutoLeaderRebalance ||
		c.OffsetsTopicReplicationFactor != 3 || c.TopicDefaults["unclean.leader.election.enable"] != "false" || c.Rack != "" || c.ReplicationPort != 0 {
		t.Fatalf("cluster defaults: %+v", c)
	}
	c, err := ConfigFromProperties(map[string]string{
		"zookeeper.connect":                "zk1:2181,zk2:2181/prod",
		"zookeeper.session.timeout.ms":     "4000",
		"zookeeper.connection.timeout.ms":  "1000",
		"broker.rack":                      "r1",
		"replication.port":                 "9093",
		"controlled.shutdown.enable":       "false",
		"auto.leader.rebalance.enable":     "false",
		"unclean.leader.election.enable":   "true",
		"offsets.topic.replication.factor": "1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.ZooKeeperConnect != "zk1:2181,zk2:2181/prod" || c.ZooKeeperSessionTimeout != 4*time.Second || c.ZooKeeperConnectionTimeout != time.Second ||
		c.Rack != "r1" || c.ReplicationPort != 9093 || c.ControlledShutdown || c.AutoLeaderRebalance || c.OffsetsTopicReplicationFactor != 1 ||
		c.TopicDefaults["unclean.leader.election.enable"] != "true" {
		t.Fatalf("cluster settings: %+v", c)
	}
}

func TestConfigRemoteCacheSettings(t *testing.T) {
	c, err := ConfigFromProperties(map[string]string{
		"remote.cache.bytes":             "536870912",
		"remote.cache.chunk.bytes":       "1048576",
		"remote.cache.readahead.chunks":  "-1",
		"remote.cache.readahead.threads": "2",
	})
	if err != nil {
		t.Fatal(err)
	}
	if tc := c.Tiering; tc.CacheBytes != 512<<20 || tc.ChunkBytes != 1<<20 || tc.ReadAheadChunks != -1 || tc.ReadAheadThreads != 2 {
		t.Fatalf("remote cache settings: %+v", tc)
	}
	for _, kv := range [][2]string{
		{"remote.cache.readahead.chunks", "-2"},
		{"remote.cache.readahead.chunks", "5000"},
		{"remote.cache.readahead.threads", "0"},
		{"remote.cache.readahead.threads", "x"},
	} {
		if _, err := ConfigFromProperties(map[string]string{kv[0]: kv[1]}); err == nil || !strings.Contains(err.Error(), kv[0]) {
			t.Errorf("%s=%s: error %v, want one naming the setting", kv[0], kv[1], err)
		}
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	for i, tc := range []struct {
		key, value string
	}{
		{"no.such.key", "1"},
		{"broker.id", "-1"},
		{"broker.id", "x"},
		{"listeners", "127.0.0.1:9092"},
		{"listeners", "PLAINTEXT://a:1,PLAINTEXT://b:2"},
		{"advertised.listeners", "PLAINTEXT://0.0.0.0:9092"},
		{"log.dirs", "/a,,/b"},
		{"log.dirs", "/a,/b/../a"},
		{"log.dirs", "/a,/a/b"},
		{"log.dir", ""},
		{"auto.create.topics.enable", "yes"},
		{"num.partitions", "0"},
		{"log.segment.bytes", "10"},
		{"log.retention.ms", "-5"},
		{"log.retention.hours", "x"},
		{"log.message.timestamp.type", "Now"},
		{"log.cleanup.policy", "compact,tidy"},
		{"log.cleaner.min.cleanable.ratio", "2"},
		{"log.cleaner.threads", "-1"},
		{"log.cleaner.io.max.bytes.per.second", "0"},
		{"log.cleaner.dedupe.buffer.size", "10"},
		{"message.max.bytes", "3000000000"},
		{"socket.request.max.bytes", "0"},
		{"connections.max.idle.ms", "0"},
		{"num.network.threads", "0"},
		{"zookeeper.connect", "/strata"},
		{"zookeeper.connect", "zk:2181/a//b"},
		{"zookeeper.session.timeout.ms", "0"},
		{"zookeeper.connection.timeout.ms", "x"},
		{"replication.port", "70000"},
		{"controlled.shutdown.enable", "yes"},
		{"auto.leader.rebalance.enable", "1"},
		{"unclean.leader.election.enable", "maybe"},
		{"offsets.topic.replication.factor", "0"},
		{"strata.fetch.zero.copy", "maybe"},
		{"offsets.topic.num.partitions", "0"},
		{"group.initial.rebalance.delay.ms", "-1"},
		{"group.min.session.timeout.ms", "1900000"}, // above the default maximum
		{"group.max.session.timeout.ms", "x"},
		{"offsets.retention.minutes", "0"},
		{"offsets.retention.check.interval.ms", "0"},
		{"offset.metadata.max.bytes", "40000"},
	} {
		_, err := ConfigFromProperties(map[string]string{tc.key: tc.value})
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Key != tc.key || !strings.Contains(err.Error(), tc.key) {
			t.Fatalf("#%d %s=%s: got %v, want a ConfigError naming the key", i, tc.key, tc.value, err)
		}
	}
}
