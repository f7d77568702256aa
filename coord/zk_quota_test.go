package coord

import (
	"slices"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/segment/poll"
)

// TestZKQuotaKafkaLayout: client quota entities are Kafka's znodes
// (/config/clients/<id>, /config/users/<user>/clients/<id>, with
// <default>), with Kafka's change notifications, and a user-client quota
// written as kafka-configs --zookeeper writes it reaches the cache.
func TestZKQuotaKafkaLayout(t *testing.T) {
	srv := zktest.Start(t)
	e := newZKEnvOn(srv)(t).(*zkEnv)
	z := e.open(t).(*ZK)
	raw := rawZK(t, srv.Addr())
	ctx := ctxT(t, waitTimeout)
	put := func(typ, name string, cfg map[string]string) {
		t.Helper()
		if err := z.AlterEntityConfig(ctx, typ, name, func(map[string]string) (map[string]string, error) { return cfg, nil }); err != nil {
			t.Fatal(err)
		}
	}
	put(EntityClients, "app", map[string]string{"producer_byte_rate": "1024"})
	put(EntityUserClients, UserClientEntity("alice", DefaultEntity), map[string]string{"consumer_byte_rate": "2048"})
	for p, want := range map[string]string{
		"/config/clients/app":                   `{"version":1,"config":{"producer_byte_rate":"1024"}}`,
		"/config/users/alice/clients/<default>": `{"version":1,"config":{"consumer_byte_rate":"2048"}}`,
	} {
		data, _, err := raw.Get(e.chroot + p)
		if err != nil || string(data) != want {
			t.Fatalf("%s: %s (%v), want %s", p, data, err, want)
		}
	}
	changes, _, err := raw.Children(e.chroot + "/config/changes")
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, c := range changes {
		d, _, _ := raw.Get(e.chroot + "/config/changes/" + c)
		notes = append(notes, string(d))
	}
	slices.Sort(notes)
	if want := []string{`{"version":2,"entity_path":"clients/app"}`, `{"version":2,"entity_path":"users/alice/clients/<default>"}`}; !slices.Equal(notes, want) {
		t.Fatalf("notifications %v, want %v", notes, want)
	}

	// As kafka-configs --zookeeper --alter --entity-type users
	// --entity-name bob --entity-type clients --entity-name web would.
	for _, p := range []string{"/config/users/bob", "/config/users/bob/clients"} {
		if _, err := raw.Create(e.chroot+p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := raw.Create(e.chroot+"/config/users/bob/clients/web", []byte(`{"version":1,"config":{"request_percentage":"25.0"}}`), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create(e.chroot+"/config/changes/config_change_", []byte(`{"version":2,"entity_path":"users/bob/clients/web"}`), zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if !poll.For(waitTimeout, func() bool { return z.EntityConfigs(EntityUserClients)["bob/web"]["request_percentage"] == "25.0" }) {
		t.Fatalf("user-client entity written as Kafka does not seen: %v", z.EntityConfigs(EntityUserClients))
	}
}
