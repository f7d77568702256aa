package coord

import (
	"maps"
	"testing"
	"time"

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
