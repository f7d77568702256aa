package group

import (
	"bytes"
	"errors"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// oneUUID is Kafka's Uuid.ONE_UUID, the topic id of its formatter tests.
var oneUUID = [16]byte{15: 1}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// TestShareRecordsKafkaLayout checks the keys and values against bytes
// laid out by hand from Kafka's ShareGroup*Key/Value schemas, with the
// values of Kafka's ShareGroupMessageFormatterTest.
func TestShareRecordsKafkaLayout(t *testing.T) {
	rack := "rack-a"
	m := ShareMemberState{
		RackID: &rack, ClientID: "client-id", ClientHost: "1.2.3.4", Topics: []string{"topic"},
		Target: map[[16]byte][]int32{oneUUID: {1, 0}}, Assigned: map[[16]byte][]int32{oneUUID: {0, 1}},
		Epoch: 1, PreviousEpoch: 0,
	}
	uuidParts := cat(oneUUID[:], []byte{3, 0, 0, 0, 0, 0, 0, 0, 1, 0}) // uuid, [0, 1], no tags
	for i, c := range []struct {
		got, want []byte
	}{
		{shareKey(keyShareMemberV10, "group-id", "member-id"), cat([]byte{0, 10, 0, 8}, []byte("group-id"), []byte{0, 9}, []byte("member-id"))},
		{shareKey(keyShareMetadataV11, "group-id", "ignored"), cat([]byte{0, 11, 0, 8}, []byte("group-id"))},
		{shareKey(keyShareStatePartitionsV15, "g", ""), []byte{0, 15, 0, 1, 'g'}},
		{shareMemberValue(m), cat([]byte{0, 0, 7}, []byte("rack-a"), []byte{10}, []byte("client-id"), []byte{8}, []byte("1.2.3.4"),
			[]byte{2, 6}, []byte("topic"), []byte{0})},
		{shareEpochValue(1), []byte{0, 0, 0, 0, 0, 1, 0}},
		{shareTargetValue(m), cat([]byte{0, 0, 2}, uuidParts, []byte{0})},
		{shareCurrentValue(m), cat([]byte{0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2}, uuidParts, []byte{0})},
		{shareStateValue(&ShareStatePartitions{
			Initializing: []ShareTopicPartitions{{ID: oneUUID, Name: "topic", Partitions: []int32{1}}},
			Initialized:  []ShareTopicPartitions{{ID: oneUUID, Name: "topic", Partitions: []int32{0}}},
			Deleting:     []ShareTopicPartitions{{ID: oneUUID, Name: "topic"}},
		}), cat([]byte{0, 0},
			[]byte{2}, oneUUID[:], []byte{6}, []byte("topic"), []byte{2, 0, 0, 0, 1, 0},
			[]byte{2}, oneUUID[:], []byte{6}, []byte("topic"), []byte{2, 0, 0, 0, 0, 0},
			[]byte{2}, oneUUID[:], []byte{6}, []byte("topic"), []byte{0},
			[]byte{0})},
	} {
		if !bytes.Equal(c.got, c.want) {
			t.Errorf("#%d: got %x, want %x", i, c.got, c.want)
		}
	}

	// Kafka 4.1 writes ShareGroupMetadataValue with its MetadataHash, a
	// tagged field (tag 0, int64): read past it.
	withHash := []byte{0, 0, 0, 0, 0, 1, 1, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1}
	r, err := decodeRecord(shareKey(keyShareMetadataV11, "group-id", ""), withHash)
	if err != nil || r.share == nil || r.share.epoch != 1 || r.group != "group-id" {
		t.Fatalf("epoch with metadata hash: got %+v, %v", r.share, err)
	}
	r, err = decodeRecord(shareKey(keyShareCurrentMemberV14, "g", "m"), shareCurrentValue(m))
	if err != nil || r.share.member != "m" || r.share.mem.Epoch != 1 || !slices.Equal(r.share.mem.Assigned[oneUUID], []int32{0, 1}) {
		t.Fatalf("current assignment: got %+v, %v", r.share, err)
	}
	if r, err := decodeRecord(shareKey(keyShareMemberV10, "g", "m"), nil); err != nil || !r.share.tombstone || r.share.member != "m" {
		t.Fatalf("member tombstone: got %+v, %v", r.share, err)
	}
	for i, c := range []struct {
		key, value []byte
		want       error
	}{
		{shareKey(keyShareMetadataV11, "g", ""), []byte{0, 0, 0}, ErrBadRecord},
		{shareKey(keyShareMetadataV11, "g", ""), []byte{0, 1, 0, 0, 0, 7, 0}, ErrUnknownRecord},
		{shareKey(keyShareMetadataV11, "g", ""), []byte{0, 0, 0, 0, 0, 7, 0, 9}, ErrBadRecord},
		{[]byte{0, 10, 0, 1, 'g'}, nil, ErrBadRecord}, // a member key without its member
		{shareKey(keyShareTargetMemberV13, "g", "m"), []byte{0, 0, 0xff, 0xff, 0xff, 0x0f}, ErrBadRecord},
	} {
		if _, err := decodeRecord(c.key, c.value); !errors.Is(err, c.want) {
			t.Errorf("#%d: got %v, want %v", i, err, c.want)
		}
	}
}

// shareRecordSamples are one record of each share group type.
func shareRecordSamples() []kv {
	rack := "r"
	m := ShareMemberState{RackID: &rack, ClientID: "c", ClientHost: "/1.2.3.4", Topics: []string{"a", "b"},
		Target: map[[16]byte][]int32{oneUUID: {0, 2}}, Assigned: map[[16]byte][]int32{oneUUID: {0}}, Epoch: 5, PreviousEpoch: 4}
	return []kv{
		{shareKey(keyShareMemberV10, "g", "m"), shareMemberValue(m)},
		{shareKey(keyShareMetadataV11, "g", ""), shareEpochValue(7)},
		{shareKey(keyShareTargetMetadataV12, "g", ""), shareEpochValue(6)},
		{shareKey(keyShareTargetMemberV13, "g", "m"), shareTargetValue(m)},
		{shareKey(keyShareCurrentMemberV14, "g", "m"), shareCurrentValue(m)},
		{shareKey(keyShareStatePartitionsV15, "g", ""), shareStateValue(&ShareStatePartitions{
			Initialized: []ShareTopicPartitions{{ID: oneUUID, Name: "a", Partitions: []int32{0, 1}}},
			Deleting:    []ShareTopicPartitions{{ID: oneUUID, Name: "b"}}})},
	}
}

// reencodeShare encodes the value of a decoded share record again.
func reencodeShare(r *shareRecord) []byte {
	switch r.kind {
	case keyShareMemberV10:
		return shareMemberValue(*r.mem)
	case keyShareMetadataV11, keyShareTargetMetadataV12:
		return shareEpochValue(r.epoch)
	case keyShareTargetMemberV13:
		return shareTargetValue(ShareMemberState{Target: r.target})
	case keyShareCurrentMemberV14:
		return shareCurrentValue(*r.mem)
	default:
		return shareStateValue(r.state)
	}
}

// shareLogGroups loads every partition of e's logs into a new coordinator
// and returns the share groups found, by id.
func shareLogGroups(t *testing.T, cfg Config, logs []Log) map[string]ShareGroupState {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out := map[string]ShareGroupState{}
	for i, l := range logs {
		rep, err := c.Load(i, l)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Skipped != 0 {
			t.Fatalf("partition %d: %d records skipped", i, rep.Skipped)
		}
		for _, g := range rep.ShareGroups {
			out[g.ID] = g
		}
	}
	return out
}

// storeShare stores a share group change and waits for its append.
func storeShare(t *testing.T, c *Coordinator, prev, next *ShareGroupState) {
	t.Helper()
	code, wait := c.StoreShareGroup(prev, next)
	if code != 0 {
		t.Fatalf("store: %s", errName(code))
	}
	if wait != nil {
		if err := <-wait; err != nil {
			t.Fatalf("store: %v", err)
		}
	}
}

// goneGroup is the id of the group shareHistory deletes: one of g's
// partition, so that cleaning the partition cleans both.
func goneGroup(numPartitions int) string {
	for i := 0; ; i++ {
		id := "gone-" + strconv.Itoa(i)
		if PartitionFor(id, numPartitions) == PartitionFor("g", numPartitions) {
			return id
		}
	}
}

// shareHistory stores a share group's life in c: g joined by two
// members, one of them leaving; a group goneGroup created and deleted.
// It returns what the log must hold of g.
func shareHistory(t *testing.T, c *Coordinator) ShareGroupState {
	t.Helper()
	a := ShareMemberState{ClientID: "ca", ClientHost: "/h", Topics: []string{"t"}, Target: map[[16]byte][]int32{oneUUID: {0, 1}},
		Assigned: map[[16]byte][]int32{oneUUID: {0, 1}}, Epoch: 1}
	g1 := &ShareGroupState{ID: "g", Epoch: 1, AssignmentEpoch: 1, Members: map[string]ShareMemberState{"a": a}}
	storeShare(t, c, nil, g1)
	b := a
	b.ClientID, b.Target, b.Assigned, b.Epoch = "cb", map[[16]byte][]int32{oneUUID: {1}}, map[[16]byte][]int32{oneUUID: {1}}, 2
	a2 := a
	a2.Target, a2.Assigned, a2.Epoch, a2.PreviousEpoch = map[[16]byte][]int32{oneUUID: {0}}, map[[16]byte][]int32{oneUUID: {0}}, 2, 1
	g2 := &ShareGroupState{ID: "g", Epoch: 2, AssignmentEpoch: 2, Members: map[string]ShareMemberState{"a": a2, "b": b},
		StatePartitions: &ShareStatePartitions{Initialized: []ShareTopicPartitions{{ID: oneUUID, Name: "t", Partitions: []int32{0, 1}}}}}
	storeShare(t, c, g1, g2)
	g3 := &ShareGroupState{ID: "g", Epoch: 3, AssignmentEpoch: 2, Members: map[string]ShareMemberState{"b": b}, StatePartitions: g2.StatePartitions}
	storeShare(t, c, g2, g3)
	gone := &ShareGroupState{ID: goneGroup(c.NumPartitions()), Epoch: 1, Members: map[string]ShareMemberState{"x": a}}
	storeShare(t, c, nil, gone)
	storeShare(t, c, gone, nil)
	return *g3
}

func checkShareGroups(t *testing.T, step string, got map[string]ShareGroupState, want ShareGroupState) {
	t.Helper()
	g, ok := got[want.ID]
	if !ok || len(got) != 1 {
		t.Fatalf("%s: share groups %v, want only %s", step, slices.Sorted(maps.Keys(got)), want.ID)
	}
	if g.Epoch != want.Epoch || g.AssignmentEpoch != want.AssignmentEpoch || len(g.Members) != len(want.Members) {
		t.Fatalf("%s: got epoch %d/%d with %d members, want %d/%d with %d", step, g.Epoch, g.AssignmentEpoch, len(g.Members), want.Epoch, want.AssignmentEpoch, len(want.Members))
	}
	for id, wm := range want.Members {
		gm := g.Members[id]
		if !bytes.Equal(shareMemberValue(gm), shareMemberValue(wm)) || !bytes.Equal(shareTargetValue(gm), shareTargetValue(wm)) ||
			!bytes.Equal(shareCurrentValue(gm), shareCurrentValue(wm)) {
			t.Errorf("%s: member %s: got %+v, want %+v", step, id, gm, wm)
		}
	}
	if g.StatePartitions == nil || !bytes.Equal(shareStateValue(g.StatePartitions), shareStateValue(want.StatePartitions)) {
		t.Errorf("%s: state partitions: got %+v, want %+v", step, g.StatePartitions, want.StatePartitions)
	}
}

// TestShareGroupStoreAndLoad: the records StoreShareGroup appends bring
// back, on a new coordinator's Load, the share group as last stored
// (epochs, members, assignments, state partitions); a removed member and
// a deleted group stay gone; a store of what the log holds appends
// nothing; and a partition not loaded is NOT_COORDINATOR.
func TestShareGroupStoreAndLoad(t *testing.T) {
	e := newEnv(t, nil)
	want := shareHistory(t, e.c)
	appends := e.logOf("g").appends()
	if code, wait := e.c.StoreShareGroup(&want, &want); code != 0 || wait != nil {
		t.Errorf("store of no change: %s, %v", errName(code), wait)
	}
	if got := e.logOf("g").appends(); got != appends {
		t.Errorf("a store of no change appended (%d appends, was %d)", got, appends)
	}
	logs := make([]Log, len(e.logs))
	for i, l := range e.logs {
		logs[i] = l
	}
	checkShareGroups(t, "after a load", shareLogGroups(t, e.cfg, logs), want)
	// The share records make no classic or consumer group.
	e.restart()
	if d := e.describe("g"); d.State != "Dead" {
		t.Errorf("the share group's id as a classic group: %s, want Dead", d.State)
	}
	e.c.Unload(PartitionFor("g", e.cfg.NumPartitions))
	if code, _ := e.c.StoreShareGroup(nil, &want); code != kerr.NotCoordinator.Code {
		t.Errorf("store to an unloaded partition: %s", errName(code))
	}
}

// TestShareGroupsAfterCompaction: cleaning __consumer_offsets as the log
// cleaner does keeps the latest record of each of a share group's keys,
// so a coordinator loading the cleaned logs (after a move, and after a
// restart with recovery) restores the same group; the deleted group's
// records stay deleted once its tombstones pass delete.retention.ms.
func TestShareGroupsAfterCompaction(t *testing.T) {
	e := newSegEnv(t)
	want := shareHistory(t, e.c)
	// Many changes of one key, so cleaning has something to drop.
	for range 200 {
		next := want
		next.Epoch++
		storeShare(t, e.c, &want, &next)
		want = next
	}
	epochKey, goneKey := shareKey(keyShareMetadataV11, "g", ""), shareKey(keyShareMetadataV11, goneGroup(e.cfg.NumPartitions), "")
	const deleteRetention = 24 * time.Hour // Kafka's delete.retention.ms
	before, after := e.clean(deleteRetention)
	recs, _ := e.logContents()
	if after >= before/2 || recs[string(epochKey)] < 1 || recs[string(epochKey)] > 100 {
		t.Fatalf("first cleaning: %d bytes -> %d, %d records of g's epoch key of 203 written", before, after, recs[string(epochKey)])
	}
	e.clock.Advance(deleteRetention + time.Minute)
	e.clean(deleteRetention)
	recs, tombs := e.logContents()
	if recs[string(goneKey)] != 0 {
		t.Errorf("past delete.retention.ms: the deleted group's epoch key has %d records (%d tombstones), want none", recs[string(goneKey)], tombs[string(goneKey)])
	}
	for _, reopen := range []bool{false, true} {
		e.c.Close()
		if reopen {
			e.closeLogs()
			e.openLogs()
		}
		logs := make([]Log, len(e.logs))
		for i, l := range e.logs {
			logs[i] = l
		}
		checkShareGroups(t, map[bool]string{false: "after a move", true: "after a restart"}[reopen], shareLogGroups(t, e.cfg, logs), want)
		e.startCoordinator()
	}
}
