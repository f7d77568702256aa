package coord

import (
	"maps"
	"testing"

	"github.com/stratastream/strata/segment/poll"
)

// testQuotaEntities: the entity types of client quotas (clients, and a
// user with a client id below the user's entity) are written, seen by
// another session, kept across a restart and removed; a user's quota
// keys live beside its SCRAM credential without disturbing it.
func testQuotaEntities(t *testing.T, e env) {
	a, b := e.open(t), e.open(t)
	ctx := ctxT(t, waitTimeout)
	set := func(c Coordinator, typ, name string, kv map[string]string) {
		t.Helper()
		if err := c.AlterEntityConfig(ctx, typ, name, func(cur map[string]string) (map[string]string, error) {
			if cur == nil {
				cur = map[string]string{}
			}
			maps.Copy(cur, kv)
			return cur, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	cred := "salt=AA,stored_key=BB,server_key=CC,iterations=4096"
	if err := a.AlterScramCredentials(ctx, "alice", ScramAlteration{Upsert: map[string]string{"SCRAM-SHA-256": cred}}); err != nil {
		t.Fatal(err)
	}
	set(a, EntityUsers, "alice", map[string]string{"producer_byte_rate": "1024"})
	set(a, EntityClients, DefaultEntity, map[string]string{"consumer_byte_rate": "2048"})
	set(a, EntityUsers, DefaultEntity, map[string]string{"request_percentage": "12.5"})
	set(a, EntityClients, "app", map[string]string{"request_percentage": "50.0"})
	set(a, EntityUserClients, UserClientEntity("alice", "app"), map[string]string{"producer_byte_rate": "4096"})
	set(a, EntityUserClients, UserClientEntity(DefaultEntity, DefaultEntity), map[string]string{"producer_byte_rate": "8192"})
	want := func(c Coordinator) bool {
		u := c.EntityConfigs(EntityUsers)["alice"]
		cl := c.EntityConfigs(EntityClients)
		uc := c.EntityConfigs(EntityUserClients)
		return u["producer_byte_rate"] == "1024" && u["SCRAM-SHA-256"] == cred &&
			c.EntityConfigs(EntityUsers)[DefaultEntity]["request_percentage"] == "12.5" &&
			cl[DefaultEntity]["consumer_byte_rate"] == "2048" && cl["app"]["request_percentage"] == "50.0" &&
			uc["alice/app"]["producer_byte_rate"] == "4096" && uc["<default>/<default>"]["producer_byte_rate"] == "8192" && len(uc) == 2
	}
	if !want(a) {
		t.Fatalf("writer's read: users %v clients %v user clients %v", a.EntityConfigs(EntityUsers), a.EntityConfigs(EntityClients), a.EntityConfigs(EntityUserClients))
	}
	if !poll.For(waitTimeout, func() bool { return want(b) }) {
		t.Fatalf("other session: users %v clients %v user clients %v", b.EntityConfigs(EntityUsers), b.EntityConfigs(EntityClients), b.EntityConfigs(EntityUserClients))
	}
	if got := b.ScramUsers()["alice"]; got["SCRAM-SHA-256"] != cred || len(got) != 1 {
		t.Fatalf("alice's credentials beside her quota: %v", got)
	}
	// Refused names of the nested type.
	for _, n := range []string{"alice", "alice/", "/app", "a/b/c"} {
		if err := a.AlterEntityConfig(ctx, EntityUserClients, n, func(map[string]string) (map[string]string, error) { return map[string]string{"k": "v"}, nil }); err == nil {
			t.Fatalf("user-client entity %q accepted", n)
		}
	}

	e.restart(t)
	c, d := e.open(t), e.open(t)
	if !want(c) {
		t.Fatalf("after restart: users %v clients %v user clients %v", c.EntityConfigs(EntityUsers), c.EntityConfigs(EntityClients), c.EntityConfigs(EntityUserClients))
	}
	// Removing the user's quota keeps the credential; removing the
	// user-client entity keeps the user's.
	if err := c.AlterEntityConfig(ctx, EntityUsers, "alice", func(cur map[string]string) (map[string]string, error) {
		delete(cur, "producer_byte_rate")
		return cur, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.AlterEntityConfig(ctx, EntityUserClients, "alice/app", func(map[string]string) (map[string]string, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	gone := func(c Coordinator) bool {
		_, ok := c.EntityConfigs(EntityUserClients)["alice/app"]
		u := c.EntityConfigs(EntityUsers)["alice"]
		return !ok && u["SCRAM-SHA-256"] == cred && u["producer_byte_rate"] == ""
	}
	if !gone(c) {
		t.Fatalf("writer after removal: %v %v", c.EntityConfigs(EntityUsers), c.EntityConfigs(EntityUserClients))
	}
	if !poll.For(waitTimeout, func() bool { return gone(d) }) {
		t.Fatalf("other session after removal: %v %v", d.EntityConfigs(EntityUsers), d.EntityConfigs(EntityUserClients))
	}
}
