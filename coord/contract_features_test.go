package coord

import (
	"maps"
	"testing"
	"time"

	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/segment/poll"
)

// testFinalizedFeatures: a new cluster starts with NewClusterFeatures;
// a change by one session is seen at once by it and, with a watch
// signal, by another, with a larger epoch; a level below 1 removes the
// feature; kept across a restart.
func testFinalizedFeatures(t *testing.T, e env) {
	a, b := e.open(t), e.open(t)
	ctx := ctxT(t, waitTimeout)
	fs, epoch := a.FinalizedFeatures()
	if !maps.Equal(fs, NewClusterFeatures) || epoch < 0 {
		t.Fatalf("new cluster: %v epoch %d, want %v", fs, epoch, NewClusterFeatures)
	}
	watch, stop := b.WatchFeatures()
	defer stop()
	set := func(level int16) {
		t.Helper()
		if err := a.AlterFinalizedFeatures(ctx, func(cur map[string]int16) (map[string]int16, error) {
			cur["transaction.version"] = level
			return cur, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	set(2)
	fs, epoch2 := a.FinalizedFeatures()
	if fs["transaction.version"] != 2 || epoch2 <= epoch {
		t.Fatalf("writer's read: %v epoch %d (was %d)", fs, epoch2, epoch)
	}
	select {
	case <-watch:
	case <-time.After(waitTimeout):
		t.Fatal("no watch signal on another session")
	}
	if !poll.For(waitTimeout, func() bool {
		got, ep := b.FinalizedFeatures()
		return got["transaction.version"] == 2 && ep == epoch2
	}) {
		got, ep := b.FinalizedFeatures()
		t.Fatalf("other session: %v epoch %d", got, ep)
	}
	set(0)
	if fs, _ := a.FinalizedFeatures(); len(fs) != 0 {
		t.Fatalf("level 0 kept: %v", fs)
	}
	set(2)
	e.restart(t)
	c := e.open(t)
	if fs, _ := c.FinalizedFeatures(); fs["transaction.version"] != 2 {
		t.Fatalf("after restart: %v", fs)
	}
}

// TestZKFeaturesOfOlderCluster: a cluster whose /feature znode is
// missing (created before features were kept) reads as having none, at
// epoch -1, and its first AlterFinalizedFeatures creates the znode in
// Kafka's format, which another session's watch sees.
func TestZKFeaturesOfOlderCluster(t *testing.T) {
	srv := zktest.Start(t)
	e := newZKEnvOn(srv)(t).(*zkEnv)
	a := e.open(t).(*ZK)
	if err := a.conn.Delete(a.path(zFeature), -1); err != nil {
		t.Fatal(err)
	}
	b := e.open(t)
	if fs, epoch := b.FinalizedFeatures(); len(fs) != 0 || epoch != -1 {
		t.Fatalf("without /feature: %v epoch %d, want none at -1", fs, epoch)
	}
	if !poll.For(waitTimeout, func() bool { _, epoch := a.FinalizedFeatures(); return epoch == -1 }) {
		t.Fatal("the deletion was not seen by the session that made it")
	}
	ctx := ctxT(t, waitTimeout)
	if err := b.AlterFinalizedFeatures(ctx, func(cur map[string]int16) (map[string]int16, error) {
		cur["transaction.version"] = 2
		return cur, nil
	}); err != nil {
		t.Fatal(err)
	}
	data, _, err := a.conn.Get(a.path(zFeature))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"version":2,"status":1,"features":{"transaction.version":{"max_version_level":2}}}`; string(data) != want {
		t.Errorf("/feature: %s, want %s", data, want)
	}
	if !poll.For(waitTimeout, func() bool { fs, epoch := a.FinalizedFeatures(); return fs["transaction.version"] == 2 && epoch == 0 }) {
		fs, epoch := a.FinalizedFeatures()
		t.Fatalf("other session: %v epoch %d", fs, epoch)
	}
}
