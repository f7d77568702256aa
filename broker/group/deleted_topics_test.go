package group

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDeleteTopicOffsets deletes a topic's offsets from a Stable consumer
// group (which keeps its other offsets and lives on), from a group that
// only commits (deleted with them), and from a commit of the topic in
// flight during the deletion: after the tombstones are appended and after
// a restart (the partition loaded again) none of the topic's offsets is
// left, the other topic's are.
func TestDeleteTopicOffsets(t *testing.T) {
	e := newEnv(t, nil)
	spec := memberSpec{version: 7, group: "live", protocols: []string{"range"}, meta: func(string) []byte { return consumerMeta("gone", "kept") }}
	ids, gen := e.stableGroup(spec, 1)
	for _, topic := range []string{"gone", "kept"} {
		if codes := commitCodes(e.c.OffsetCommit(context.Background(), commitReq(8, "live", ids[0], gen, topic, 2, 3, nil))); codes[0] != 0 {
			t.Fatalf("commit: got %s", errName(codes[0]))
		}
	}
	if codes := commitCodes(e.c.OffsetCommit(context.Background(), commitReq(8, "idle", "", -1, "gone", 2, 4, nil))); codes[0] != 0 {
		t.Fatalf("commit: got %s", errName(codes[0]))
	}

	// A commit of "gone" by a third group is held in its append while
	// the topic's offsets are deleted.
	l := e.logOf("late")
	release := l.hold()
	done := make(chan *kmsg.OffsetCommitResponse, 1)
	go func() {
		done <- e.c.OffsetCommit(context.Background(), commitReq(8, "late", "", -1, "gone", 1, 5, nil))
	}()
	waitFor(t, "the late commit's append to be held", func() bool { return l.held.Load() == 1 })
	deleted := make(chan error, 1)
	var n int
	go func() {
		var err error
		n, err = e.c.DeleteTopicOffsets(context.Background(), []string{"gone"})
		deleted <- err
	}()
	release()
	if codes := commitCodes(recv(t, done)); codes[0] != 0 {
		t.Fatalf("late commit: got %s", errName(codes[0]))
	}
	if err := recv(t, deleted); err != nil {
		t.Fatal(err)
	}
	if n != 2+2+1 {
		t.Errorf("deleted %d offsets, want 5", n)
	}
	check := func(when string) {
		t.Helper()
		live, _ := e.fetchAll("live")
		if _, ok := live[tp{"gone", 0}]; ok || len(live) != 2 || live[tp{"kept", 0}].Offset != 3 {
			t.Errorf("%s: live has %v, want only kept's two offsets", when, live)
		}
		for _, g := range []string{"idle", "late"} {
			if got, _ := e.fetchAll(g); len(got) != 0 {
				t.Errorf("%s: %s has %v", when, g, got)
			}
		}
		if st := e.describe("live").State; st != "Stable" {
			t.Errorf("%s: live is %s, want Stable", when, st)
		}
	}
	check("after the deletion")
	if st := e.describe("idle").State; st != "Dead" {
		t.Errorf("idle is %s, want Dead", st)
	}
	e.restart()
	check("after a restart")
}
