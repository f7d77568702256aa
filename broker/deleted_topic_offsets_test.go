package broker

import (
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/stratastream/strata/broker/group"
	"github.com/stratastream/strata/segment/poll"
)

// TestDeletedTopicOffsetsRemoved commits offsets of two standalone
// consumers for a topic (one of them also for a topic that stays), then
// deletes the topic: the coordinator writes a tombstone for each of its
// offsets to __consumer_offsets (and one for the group left without
// offsets), OffsetFetch shows none, a topic created again under the same
// name starts without them, the log cleaner compacts the deleted offsets
// away (delete.retention.ms=0), and after a restart (the partition loaded
// again from the log) they are still gone while the other offsets stay.
func TestDeletedTopicOffsetsRemoved(t *testing.T) {
	const doomed, kept, both, only = "doomed", "kept", "group-both", "group-only"
	cfg := testConfig(t, map[string]string{
		"offsets.topic.num.partitions":    "1",
		"offsets.topic.segment.bytes":     "1024",
		"log.cleaner.backoff.ms":          "50",
		"log.cleaner.min.cleanable.ratio": "0.01",
	})
	s := startServerConfig(t, cfg)
	cl := newClient(t, s)
	createTopic(t, cl, doomed, 3, nil)
	createTopic(t, cl, kept, 1, nil)
	alter(t, cl, group.Topic, map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "0", "segment.bytes": "1024"})
	l := s.topic(group.Topic).local(0).log

	simpleCommit(t, cl, both, doomed, 3, 5)
	simpleCommit(t, cl, both, kept, 1, 7)
	simpleCommit(t, cl, only, doomed, 3, 9)
	if got := committedOnly(t, cl, only, doomed); len(got) != 3 {
		t.Fatalf("before the deletion %s committed %v", only, got)
	}

	adm := kadm.NewClient(cl)
	resp, err := adm.DeleteTopics(testCtx(t), doomed)
	if err != nil || resp[doomed].Err != nil {
		t.Fatalf("delete: %v %v", err, resp[doomed].Err)
	}
	waitFor(t, "the deleted topic's offset tombstones", func() bool {
		_, tombs := offsetsKeys(t, l)
		return tombs[both] == 3 && tombs[only] == 4 // 3 offsets; 3 offsets and the group
	})
	waitFor(t, "OffsetFetch without the deleted topic's offsets", func() bool {
		return len(committedOnly(t, cl, both, doomed)) == 0 && len(committedOnly(t, cl, only, doomed)) == 0
	})
	if got, want := committedOnly(t, cl, both, kept), map[int32]int64{0: 7}; !maps.Equal(got, want) {
		t.Fatalf("%s committed %v for %s, want %v", both, got, kept, want)
	}

	// A topic of the same name starts without the old offsets.
	createTopic(t, cl, doomed, 3, nil)
	if got := committedOnly(t, cl, both, doomed); len(got) != 0 {
		t.Fatalf("the new %s has the old topic's offsets %v", doomed, got)
	}

	// Commits of the other group roll segments past the tombstones; the
	// cleaner then removes every record of the deleted offsets.
	start := time.Now()
	commits, left := 0, 0
	if !poll.For(time.Minute, func() bool {
		simpleCommit(t, cl, both, kept, 1, int64(100+commits))
		commits++
		recs, _ := offsetsKeys(t, l)
		if left = recs[only]; left == 0 {
			return true
		}
		s.cleaner.kick()
		return false
	}) {
		t.Fatalf("%s still has %d records in the log after a minute", only, left)
	}
	t.Logf("the deleted topic's offsets compacted away after %d more commits, %v", commits, time.Since(start))
	want := committedOnly(t, cl, both, kept)

	if err := s.Shutdown(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	s = startServerConfig(t, cfg)
	cl = newClient(t, s)
	if got := committedOnly(t, cl, both, kept); !maps.Equal(got, want) {
		t.Fatalf("after a restart: %s committed %v for %s, want %v", both, got, kept, want)
	}
	for _, g := range []string{both, only} {
		if got := committedOnly(t, cl, g, doomed); len(got) != 0 {
			t.Fatalf("after a restart %s has offsets %v of the deleted topic", g, got)
		}
	}
}
