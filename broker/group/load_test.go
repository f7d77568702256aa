package group

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/segment"
)

var _ Log = (*segment.Log)(nil)

// checkRestored checks what a restart must keep of the group built by
// buildForRestart.
func checkRestored(t *testing.T, e *env, ids []string, gen int32) {
	t.Helper()
	d := e.describe("g")
	if d.State != "Stable" || d.Protocol != "range" || len(d.Members) != 2 {
		t.Fatalf("restored group: got state %s protocol %q %d members, want Stable range 2", d.State, d.Protocol, len(d.Members))
	}
	for i, m := range d.Members {
		if m.MemberID != ids[i] || string(m.MemberAssignment) != "assigned-"+ids[i] || m.ClientID != "client" {
			t.Errorf("#%d: restored member: got %s %q %q", i, m.MemberID, m.MemberAssignment, m.ClientID)
		}
	}
	// The members carry on with their generation, without a rebalance.
	for i, id := range ids {
		if code := e.heartbeat("g", id, gen, ""); code != 0 {
			t.Errorf("#%d: heartbeat after restart: got %s, want NONE", i, errName(code))
		}
	}
	if s := e.c.SyncGroup(context.Background(), syncReq(3, "g", ids[1], gen, nil)); string(s.MemberAssignment) != "assigned-"+ids[1] {
		t.Errorf("sync after restart: got %q", s.MemberAssignment)
	}
	got, _ := e.fetchAll("g")
	want := map[tp]int64{{"t", 0}: 200, {"t", 1}: 201, {"u", 0}: -1}
	for k, off := range want {
		p, ok := got[k]
		if off == -1 {
			if ok {
				t.Errorf("%v: deleted offset came back: %d", k, p.Offset)
			}
			continue
		}
		if !ok || p.Offset != off || p.LeaderEpoch != 7 || *p.Metadata != "m" {
			t.Errorf("%v: got %+v, want offset %d epoch 7 metadata m", k, p, off)
		}
	}
	if simple, _ := e.fetchAll("simple"); len(simple) != 1 || simple[tp{"s", 0}].Offset != 5 {
		t.Errorf("simple group after restart: got %v", simple)
	}
	if st := e.describe("gone").State; st != "Dead" {
		t.Errorf("deleted group after restart: got %s, want Dead", st)
	}
}

// buildForRestart makes a Stable group g of two members with offsets (one
// overwritten, one deleted), a simple group and a deleted group.
func buildForRestart(t *testing.T, e *env) ([]string, int32) {
	t.Helper()
	spec := memberSpec{version: 7, group: "g", protocols: []string{"range"}, session: 30 * time.Second,
		meta: func(string) []byte { return consumerMeta("t") }}
	ids, gen := e.stableGroup(spec, 2)
	m := "m"
	for _, base := range []int64{100, 200} {
		e.c.OffsetCommit(context.Background(), commitReq(8, "g", ids[0], gen, "t", 2, base, &m))
	}
	e.c.OffsetCommit(context.Background(), commitReq(8, "g", ids[0], gen, "u", 1, 9, &m))
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "g"
	od.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "u", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	if r := e.c.OffsetDelete(context.Background(), od); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("offset delete: got %+v", r)
	}
	e.c.OffsetCommit(context.Background(), commitReq(8, "simple", "", -1, "s", 1, 5, nil))
	e.c.OffsetCommit(context.Background(), commitReq(8, "gone", "", -1, "s", 1, 5, nil))
	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.Groups = []string{"gone"}
	if r := e.c.DeleteGroups(context.Background(), dg); r.Groups[0].ErrorCode != 0 {
		t.Fatalf("delete: got %s", errName(r.Groups[0].ErrorCode))
	}
	return ids, gen
}

func TestRestartFromMemLog(t *testing.T) {
	e := newEnv(t, nil)
	ids, gen := buildForRestart(t, e)
	e.restart()
	checkRestored(t, e, ids, gen)
}

// TestRestartFromSegmentLog replays from real segment logs on disk,
// reopened as after a crash-free restart.
func TestRestartFromSegmentLog(t *testing.T) {
	dir := t.TempDir()
	cfg := segment.DefaultConfig()
	cfg.FlushMessages = 1
	cfg.SegmentBytes = 4096 // several segments, so the replay crosses files
	var logs []*segment.Log
	open := func() {
		logs = logs[:0]
		for i := range testPartitions {
			l, err := segment.Open(dir+"/"+Topic+"-"+string(rune('0'+i)), cfg)
			if err != nil {
				t.Fatal(err)
			}
			logs = append(logs, l)
		}
	}
	closeAll := func() {
		for _, l := range logs {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	open()
	e := &env{t: t, clock: newFakeClock()}
	e.cfg = testConfig(e.clock)
	start := func() {
		c, err := New(e.cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i, l := range logs {
			if _, err := c.Load(i, l); err != nil {
				t.Fatal(err)
			}
		}
		e.c = c
	}
	start()
	ids, gen := buildForRestart(t, e)
	// Enough commits to roll segments.
	for i := range 50 {
		e.c.OffsetCommit(context.Background(), commitReq(8, "busy", "", -1, "filler", 4, int64(i), nil))
	}
	e.c.Close()
	closeAll()

	open()
	t.Cleanup(closeAll)
	start()
	t.Cleanup(func() { e.c.Close() })
	if segs := logs[PartitionFor("busy", testPartitions)].Segments(); len(segs) < 2 {
		t.Errorf("segments of busy's partition: got %d, want several", len(segs))
	}
	checkRestored(t, e, ids, gen)
	if got, _ := e.fetchAll("busy"); got[tp{"filler", 3}].Offset != 52 {
		t.Errorf("last filler commit: got %d, want 52", got[tp{"filler", 3}].Offset)
	}
}

func TestLoadCorruptAndUnknown(t *testing.T) {
	c, err := New(testConfig(newFakeClock()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	p := PartitionFor("g", testPartitions)

	// Records this package cannot read are skipped and counted.
	l := &memLog{}
	good := kv{key: offsetKey("g", "t", 0), value: offsetValue(offsetEntry{offset: 42, leaderEpoch: -1, expireTime: -1})}
	unknownKey := kv{key: []byte{0, 9, 1, 2}, value: []byte{0, 0}}
	badValue := kv{key: offsetKey("g", "t", 1), value: []byte{0, 3, 1}}
	futureValue := kv{key: offsetKey("g", "t", 2), value: []byte{0, 99, 0, 0}}
	b, err := buildBatch(1, []kv{good, unknownKey, badValue, futureValue})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(b, segment.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	rep, err := c.Load(p, l)
	if err != nil || rep.Records != 4 || rep.Skipped != 3 || rep.Groups != 1 || rep.Offsets != 1 {
		t.Errorf("load: got %+v, %v; want 4 records, 3 skipped, 1 group, 1 offset", rep, err)
	}
	c.Unload(p)

	// A corrupt batch fails the load; the partition stays unowned.
	bad := &memLog{}
	if _, err := bad.Append(b, segment.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	bad.mu.batches[0][segment.HeaderSize+3] ^= 0xff
	if _, err := c.Load(p, bad); !errors.Is(err, ErrLoad) || !segment.IsCorrupt(err) {
		t.Errorf("load of a corrupt log: got %v, want ErrLoad wrapping a corruption", err)
	}
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group = "g"
	if code := c.Heartbeat(context.Background(), req).ErrorCode; code != kerr.NotCoordinator.Code {
		t.Errorf("after a failed load: got %s, want NOT_COORDINATOR", errName(code))
	}
	if _, err := c.Load(testPartitions, l); !errors.Is(err, ErrBadPartition) {
		t.Errorf("load of partition %d: got %v, want ErrBadPartition", testPartitions, err)
	}
}
