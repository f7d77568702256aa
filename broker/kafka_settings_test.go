package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/coord/zktest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafka39ServerPropertiesKeys are the keys of the config/server.properties
// Kafka 3.9 ships (its key list only; the values below are this test's).
var kafka39ServerPropertiesKeys = []string{
	"broker.id", "num.network.threads", "num.io.threads", "socket.send.buffer.bytes", "socket.receive.buffer.bytes",
	"socket.request.max.bytes", "log.dirs", "num.partitions", "num.recovery.threads.per.data.dir",
	"offsets.topic.replication.factor", "transaction.state.log.replication.factor", "transaction.state.log.min.isr",
	"log.retention.hours", "log.retention.check.interval.ms", "zookeeper.connect", "zookeeper.connection.timeout.ms",
	"group.initial.rebalance.delay.ms",
}

// TestKafkaServerProperties: a properties file with the keys of Kafka
// 3.9's server.properties (and a real ZooKeeper in zookeeper.connect)
// starts a broker that serves a produce and a fetch, and logs the Kafka
// settings it ignores once each, with their reason; a key that is
// neither Strata's nor Kafka's is refused with the closest name; KRaft's
// node.id is refused.
func TestKafkaServerProperties(t *testing.T) {
	zks := zktest.Start(t)
	dir := t.TempDir()
	values := map[string]string{
		"broker.id": "7", "num.network.threads": "3", "num.io.threads": "8", "socket.send.buffer.bytes": "102400",
		"socket.receive.buffer.bytes": "102400", "socket.request.max.bytes": "104857600", "log.dirs": filepath.Join(dir, "data"),
		"num.partitions": "2", "num.recovery.threads.per.data.dir": "1", "offsets.topic.replication.factor": "1",
		"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1", "log.retention.hours": "168",
		"log.retention.check.interval.ms": "300000", "zookeeper.connect": zks.ConnectString(fmt.Sprintf("/strata-props-%d", time.Now().UnixNano())),
		"zookeeper.connection.timeout.ms": "18000", "group.initial.rebalance.delay.ms": "0",
	}
	var b strings.Builder
	b.WriteString("# written by TestKafkaServerProperties\n")
	for _, k := range kafka39ServerPropertiesKeys {
		fmt.Fprintf(&b, "%s=%s\n", k, values[k])
	}
	// The test's own: a free port, no metrics listener (its default port
	// may be taken on this machine), few offsets partitions.
	b.WriteString("listeners=PLAINTEXT://127.0.0.1:0\nmetrics.listener=\noffsets.topic.num.partitions=3\n")
	path := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	props, err := ReadPropertiesFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ConfigFromProperties(props)
	if err != nil {
		t.Fatalf("Kafka's server.properties keys refused: %v", err)
	}
	logs := &logLines{t: t}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s := startServerConfig(t, cfg)
	cl := newClient(t, s, kgo.AllowAutoTopicCreation())
	ctx := testCtx(t)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "props", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cons := newClient(t, s, kgo.ConsumeTopics("props"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if fs := cons.PollRecords(ctx, 1); fs.Err() != nil || fs.NumRecords() != 1 {
		t.Fatalf("fetch: %v, %d records", fs.Err(), fs.NumRecords())
	}
	for _, k := range []string{"socket.send.buffer.bytes", "socket.receive.buffer.bytes", "num.recovery.threads.per.data.dir"} {
		lines := logs.containing(k)
		if len(lines) != 1 || !strings.Contains(lines[0], "Kafka settings ignored") || !strings.Contains(lines[0], "reason=") {
			t.Errorf("%s: logged %d times: %q", k, len(lines), lines)
		}
	}
	if got := logs.containing("Strata leaves socket buffers"); len(got) != 1 || !strings.Contains(got[0], "socket.receive.buffer.bytes,socket.send.buffer.bytes") {
		t.Errorf("socket buffers not grouped under one reason: %q", got)
	}

	// Neither Strata's nor Kafka's: refused with the closest name.
	props["lgo.dirs"] = "/tmp/x"
	_, err = ConfigFromProperties(props)
	var ce *ConfigError
	if !errors.As(err, &ce) || err.Error() != "unknown setting lgo.dirs: did you mean log.dirs?" {
		t.Fatalf("unknown key: %v", err)
	}
	delete(props, "lgo.dirs")
	props["node.id"] = "1"
	if _, err := ConfigFromProperties(props); err == nil || !strings.Contains(err.Error(), "KRaft mode is not supported") {
		t.Fatalf("node.id: %v", err)
	}
	delete(props, "node.id")
	props["zookeeper.ssl.client.enable"] = "true"
	if _, err := ConfigFromProperties(props); err == nil {
		t.Fatal("zookeeper.ssl.client.enable=true accepted")
	}
	props["zookeeper.ssl.client.enable"] = "false"
	if cfg, err := ConfigFromProperties(props); err != nil || cfg.IgnoredKafkaSettings["zookeeper.ssl.client.enable"] == "" {
		t.Fatalf("zookeeper.ssl.client.enable=false: %v", err)
	}
}

func TestUnknownSettingHint(t *testing.T) {
	for key, want := range map[string]string{
		"lgo.dirs": "log.dirs", "log.retention.hour": "log.retention.hours", "zookeper.connect": "zookeeper.connect",
		"socket.send.bufer.bytes": "socket.send.buffer.bytes", "completely.different.thing.xyz": "",
	} {
		if got := unknownSettingHint(key); got != want {
			t.Errorf("%s: got %q, want %q", key, got, want)
		}
	}
}
