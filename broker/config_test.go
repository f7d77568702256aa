package broker

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	c := DefaultConfig()
	if c.Listen != "127.0.0.1:9092" || c.LogDir != "./data" || !c.AutoCreateTopics || c.NumPartitions != 1 ||
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
	if c.BrokerID != 3 || c.Listen != "0.0.0.0:0" || c.AdvertisedHost != "kafka.example" || c.AdvertisedPort != 19092 || c.LogDir != "/var/lib/strata" || c.ZeroCopy {
		t.Fatalf("got %+v", c)
	}
	for k, want := range map[string]string{"retention.ms": "1800000", "segment.ms": "3600000", "flush.messages": "1", "max.message.bytes": "2000000"} {
		if got := c.TopicDefaults[k]; got != want {
			t.Fatalf("%s: got %s, want %s", k, got, want)
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
		{"listeners", "SSL://127.0.0.1:9093"},
		{"listeners", "127.0.0.1:9092"},
		{"listeners", "PLAINTEXT://a:1,PLAINTEXT://b:2"},
		{"advertised.listeners", "PLAINTEXT://0.0.0.0:9092"},
		{"log.dirs", "/a,/b"},
		{"auto.create.topics.enable", "yes"},
		{"num.partitions", "0"},
		{"log.segment.bytes", "10"},
		{"log.retention.ms", "-5"},
		{"log.retention.hours", "x"},
		{"log.message.timestamp.type", "Now"},
		{"log.cleanup.policy", "compact"},
		{"message.max.bytes", "3000000000"},
		{"socket.request.max.bytes", "0"},
		{"connections.max.idle.ms", "0"},
		{"num.network.threads", "0"},
		{"zookeeper.connect", "zk:2181"},
		{"strata.fetch.zero.copy", "maybe"},
	} {
		_, err := ConfigFromProperties(map[string]string{tc.key: tc.value})
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Key != tc.key || !strings.Contains(err.Error(), tc.key) {
			t.Fatalf("#%d %s=%s: got %v, want a ConfigError naming the key", i, tc.key, tc.value, err)
		}
	}
}
