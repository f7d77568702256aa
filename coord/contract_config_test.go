package coord

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/segment/poll"
)

// testEntityConfigs: broker entity configs (the default and one broker's)
// written by one session are seen at once by it and, with a watch signal,
// by another; concurrent read-modify-writes both land; removal; an
// unknown entity type is refused; kept across a restart.
func testEntityConfigs(t *testing.T, e env) {
	a, b := e.open(t), e.open(t)
	ctx := ctxT(t, waitTimeout)
	watch, stop := b.WatchEntityConfigs()
	defer stop()

	set := func(c Coordinator, name string, kv map[string]string) {
		t.Helper()
		if err := c.AlterEntityConfig(ctx, EntityBrokers, name, func(cur map[string]string) (map[string]string, error) {
			if cur == nil {
				cur = map[string]string{}
			}
			maps.Copy(cur, kv)
			return cur, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	set(a, DefaultEntity, map[string]string{"log.retention.ms": "60000"})
	set(a, "1", map[string]string{"log.cleaner.threads": "2"})
	if got := a.EntityConfigs(EntityBrokers); got[DefaultEntity]["log.retention.ms"] != "60000" || got["1"]["log.cleaner.threads"] != "2" {
		t.Fatalf("writer's read: %v", got)
	}
	start := time.Now()
	select {
	case <-watch:
	case <-time.After(waitTimeout):
		t.Fatal("no watch signal on another session")
	}
	waitEntity(t, b, DefaultEntity, "log.retention.ms", "60000")
	waitEntity(t, b, "1", "log.cleaner.threads", "2")
	t.Logf("entity configs seen by another session after %v", time.Since(start))

	// Concurrent read-modify-writes of one entity by two sessions: both
	// keys land (compare-and-set, retried).
	var wg sync.WaitGroup
	for i, c := range []Coordinator{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := []string{"leader.replication.throttled.rate", "follower.replication.throttled.rate"}[i]
			if err := c.AlterEntityConfig(ctx, EntityBrokers, "1", func(cur map[string]string) (map[string]string, error) {
				if cur == nil {
					cur = map[string]string{}
				}
				cur[key] = "1000"
				return cur, nil
			}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	waitEntity(t, a, "1", "leader.replication.throttled.rate", "1000")
	waitEntity(t, a, "1", "follower.replication.throttled.rate", "1000")
	waitEntity(t, a, "1", "log.cleaner.threads", "2")

	// Refused: an unknown type, an empty or path-like name; an error of
	// fn is returned and writes nothing.
	for _, tc := range []struct{ typ, name string }{{"nosuch", "1"}, {EntityBrokers, ""}, {EntityBrokers, "a/b"}} {
		if err := a.AlterEntityConfig(ctx, tc.typ, tc.name, func(map[string]string) (map[string]string, error) { return map[string]string{"k": "v"}, nil }); err == nil {
			t.Fatalf("%s/%q accepted", tc.typ, tc.name)
		}
	}
	errFn := context.Canceled
	if err := a.AlterEntityConfig(ctx, EntityBrokers, "7", func(map[string]string) (map[string]string, error) { return nil, errFn }); err != errFn {
		t.Fatalf("fn's error: got %v", err)
	}
	if _, ok := a.EntityConfigs(EntityBrokers)["7"]; ok {
		t.Fatal("entity written although fn failed")
	}

	// Kept across a restart of every session; removal.
	e.restart(t)
	c := e.open(t)
	if got := c.EntityConfigs(EntityBrokers); got[DefaultEntity]["log.retention.ms"] != "60000" || len(got["1"]) != 3 {
		t.Fatalf("after restart: %v", got)
	}
	d := e.open(t)
	if err := c.AlterEntityConfig(ctx, EntityBrokers, "1", func(map[string]string) (map[string]string, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.EntityConfigs(EntityBrokers)["1"]; ok {
		t.Fatal("removed entity still listed")
	}
	if !poll.For(waitTimeout, func() bool { _, ok := d.EntityConfigs(EntityBrokers)["1"]; return !ok }) {
		t.Fatal("other session still lists the removed entity")
	}
	// Users' SCRAM credentials are entities of the same store.
	if err := c.AlterScramCredentials(ctx, "carol", ScramAlteration{Upsert: map[string]string{"SCRAM-SHA-256": "salt=AA,stored_key=BB,server_key=CC,iterations=4096"}}); err != nil {
		t.Fatal(err)
	}
	if got := c.EntityConfigs(EntityUsers)["carol"]; got["SCRAM-SHA-256"] == "" {
		t.Fatalf("users entity: %v", c.EntityConfigs(EntityUsers))
	}
}

// waitEntity polls c until broker entity name's key is want.
func waitEntity(t *testing.T, c Coordinator, name, key, want string) {
	t.Helper()
	if !poll.For(waitTimeout, func() bool { return c.EntityConfigs(EntityBrokers)[name][key] == want }) {
		t.Fatalf("broker entity %s: %s is not %q: %v", name, key, want, c.EntityConfigs(EntityBrokers)[name])
	}
}
