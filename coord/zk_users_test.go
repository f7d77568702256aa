package coord

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/stratastream/strata/coord/zktest"
)

// TestZKScramKafkaLayout: the znodes are Kafka's, both ways: what
// AlterScramCredentials writes is what Kafka's AdminZkClient writes, and
// a user config written as Kafka's tools write it (znode, then change
// notification) reaches the cache, with the user's other configs kept.
func TestZKScramKafkaLayout(t *testing.T) {
	srv := zktest.Start(t)
	e := newZKEnvOn(srv)(t).(*zkEnv)
	z := e.open(t).(*ZK)
	raw := rawZK(t, srv.Addr())
	ctx := ctxT(t, waitTimeout)
	cred := "salt=AAAA,stored_key=BBBB,server_key=CCCC,iterations=4096"
	if err := z.AlterScramCredentials(ctx, "us er*", ScramAlteration{Upsert: map[string]string{"SCRAM-SHA-256": cred}}); err != nil {
		t.Fatal(err)
	}
	data, _, err := raw.Get(e.chroot + "/config/users/us%20er%2A")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Version int               `json:"version"`
		Config  map[string]string `json:"config"`
	}
	if err := json.Unmarshal(data, &d); err != nil || d.Version != 1 || d.Config["SCRAM-SHA-256"] != cred || len(d.Config) != 1 {
		t.Fatalf("user znode: %s (%v)", data, err)
	}
	changes, _, err := raw.Children(e.chroot + "/config/changes")
	if err != nil || len(changes) != 1 || !strings.HasPrefix(changes[0], "config_change_") {
		t.Fatalf("notifications: %v %v", changes, err)
	}
	note, _, _ := raw.Get(e.chroot + "/config/changes/" + changes[0])
	if string(note) != `{"version":2,"entity_path":"users/us%20er%2A"}` {
		t.Fatalf("notification: %s", note)
	}

	// As kafka-configs --zookeeper --alter --entity-type users would.
	kafka := `{"version":1,"config":{"producer_byte_rate":"1024","SCRAM-SHA-512":"salt=ZZZZ,stored_key=YYYY,server_key=XXXX,iterations=4096"}}`
	if _, err := raw.Create(e.chroot+"/config/users/carol", []byte(kafka), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create(e.chroot+"/config/changes/config_change_", []byte(`{"version":2,"entity_path":"users/carol"}`), zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	waitCred(t, z, "carol", "SCRAM-SHA-512", "salt=ZZZZ,stored_key=YYYY,server_key=XXXX,iterations=4096")
	// Deleting the credential keeps the quota.
	if err := z.AlterScramCredentials(ctx, "carol", ScramAlteration{Delete: []string{"SCRAM-SHA-512"}}); err != nil {
		t.Fatal(err)
	}
	data, _, err = raw.Get(e.chroot + "/config/users/carol")
	if err != nil || string(data) != `{"version":1,"config":{"producer_byte_rate":"1024"}}` {
		t.Fatalf("carol after delete: %s %v", data, err)
	}
	if _, ok := z.ScramUsers()["carol"]; ok {
		t.Fatal("carol still has credentials")
	}
}

// TestZKBrokerConfigKafkaLayout: broker entity configs are Kafka's
// /config/brokers/<default> and /config/brokers/<id> znodes with their
// change notifications, and a broker config written as Kafka's
// kafka-configs --zookeeper writes it reaches the cache.
func TestZKBrokerConfigKafkaLayout(t *testing.T) {
	srv := zktest.Start(t)
	e := newZKEnvOn(srv)(t).(*zkEnv)
	z := e.open(t).(*ZK)
	raw := rawZK(t, srv.Addr())
	ctx := ctxT(t, waitTimeout)
	if err := z.AlterEntityConfig(ctx, EntityBrokers, DefaultEntity, func(map[string]string) (map[string]string, error) {
		return map[string]string{"log.retention.ms": "60000"}, nil
	}); err != nil {
		t.Fatal(err)
	}
	data, _, err := raw.Get(e.chroot + "/config/brokers/<default>")
	if err != nil || string(data) != `{"version":1,"config":{"log.retention.ms":"60000"}}` {
		t.Fatalf("default broker znode: %s (%v)", data, err)
	}
	changes, _, err := raw.Children(e.chroot + "/config/changes")
	if err != nil || len(changes) != 1 {
		t.Fatalf("notifications: %v %v", changes, err)
	}
	note, _, _ := raw.Get(e.chroot + "/config/changes/" + changes[0])
	if string(note) != `{"version":2,"entity_path":"brokers/<default>"}` {
		t.Fatalf("notification: %s", note)
	}
	watch, stop := z.WatchEntityConfigs()
	defer stop()
	if _, err := raw.Create(e.chroot+"/config/brokers/3", []byte(`{"version":1,"config":{"log.cleaner.threads":"2"}}`), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create(e.chroot+"/config/changes/config_change_", []byte(`{"version":2,"entity_path":"brokers/3"}`), zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-watch:
	case <-time.After(waitTimeout):
		t.Fatal("no watch signal for a change written as Kafka writes it")
	}
	waitEntity(t, z, "3", "log.cleaner.threads", "2")
}
