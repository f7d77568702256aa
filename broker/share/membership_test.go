package share

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/group"
)

// fakeTopics is a Topics of fixed partition counts.
type fakeTopics map[string]int32

func (f fakeTopics) Topic(name string) ([16]byte, int32, bool) {
	n, ok := f[name]
	return [16]byte{byte(len(name))}, n, ok
}

func heartbeat(gs *Groups, topics Topics, member string, epoch int32, subs ...string) *kmsg.ShareGroupHeartbeatResponse {
	req := kmsg.NewPtrShareGroupHeartbeatRequest()
	req.GroupID, req.MemberID, req.MemberEpoch = "g", member, epoch
	if subs != nil {
		req.SubscribedTopicNames = subs
	}
	return gs.Heartbeat(context.Background(), req, "client", "host", topics)
}

func assigned(resp *kmsg.ShareGroupHeartbeatResponse) int {
	n := 0
	if resp.Assignment != nil {
		for _, tp := range resp.Assignment.TopicPartitions {
			n += len(tp.Partitions)
		}
	}
	return n
}

func TestGroupsMembership(t *testing.T) {
	now := time.Unix(1000, 0)
	var gone []string
	cfg, err := Config{Persister: NewMemPersister(), Now: func() time.Time { return now },
		MemberGone: func(_, m string) { gone = append(gone, m) }}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	gs := newGroups(cfg)
	topics := fakeTopics{"t": 4}

	a := heartbeat(gs, topics, "a", 0, "t")
	if a.ErrorCode != 0 || a.MemberEpoch != 1 || assigned(a) != 4 {
		t.Fatalf("a joins: %+v", a)
	}
	b := heartbeat(gs, topics, "b", 0, "t")
	if b.ErrorCode != 0 || b.MemberEpoch != 2 || assigned(b) != 2 {
		t.Fatalf("b joins: epoch %d, %d partitions", b.MemberEpoch, assigned(b))
	}
	// a learns of its smaller share on its next heartbeat; its old epoch
	// is still accepted once.
	a = heartbeat(gs, topics, "a", 1)
	if a.ErrorCode != 0 || a.MemberEpoch != 2 || assigned(a) != 2 {
		t.Fatalf("a heartbeats: epoch %d, %d partitions", a.MemberEpoch, assigned(a))
	}
	if r := heartbeat(gs, topics, "a", 5); r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("fenced: %d", r.ErrorCode)
	}
	// More partitions: the epoch moves on the next heartbeat.
	topics["t"] = 6
	if a = heartbeat(gs, topics, "a", 2); a.MemberEpoch != 3 || assigned(a) != 3 {
		t.Fatalf("after a partition change: epoch %d, %d partitions", a.MemberEpoch, assigned(a))
	}
	// b leaves; a times out.
	if r := heartbeat(gs, topics, "b", -1); r.ErrorCode != 0 || r.MemberEpoch != -1 || len(gone) != 1 {
		t.Fatalf("b leaves: %+v, gone %v", r, gone)
	}
	now = now.Add(cfg.Defaults.SessionTimeout)
	if out := gs.expire(now); len(out) != 1 || out[0].member != "a" {
		t.Fatalf("expired %v", out)
	}
	if !gs.Exists("g") || gs.HasMembers("g") {
		t.Fatal("the group does not outlive its members")
	}
	if l := gs.List(); len(l) != 1 || l[0] != (Listing{ID: "g", State: StateEmpty}) {
		t.Fatalf("list: got %+v, want g Empty", l)
	}
	if r := heartbeat(gs, topics, "a", 3); r.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("heartbeat after expiry: %d", r.ErrorCode)
	}
}

func TestGroupsLimitsAndValidation(t *testing.T) {
	cfg, _ := Config{Persister: NewMemPersister(), MaxGroupSize: 1}.withDefaults()
	gs := newGroups(cfg)
	topics := fakeTopics{"t": 1}
	for i, c := range []struct {
		member string
		epoch  int32
		subs   []string
		want   int16
	}{
		{"", 0, []string{"t"}, kerr.InvalidRequest.Code},
		{"a", 0, nil, kerr.InvalidRequest.Code},
		{"a", -2, []string{"t"}, kerr.InvalidRequest.Code},
		{"a", 0, []string{"t"}, 0},
		{"b", 0, []string{"t"}, kerr.GroupMaxSizeReached.Code},
		{"c", 3, nil, kerr.UnknownMemberID.Code},
	} {
		if r := heartbeat(gs, topics, c.member, c.epoch, c.subs...); r.ErrorCode != c.want {
			t.Errorf("#%d: got %d, want %d", i, r.ErrorCode, c.want)
		}
	}
}

// fakeStore is a Store that keeps the last state stored of each group, as
// the group coordinator's load would read it back.
type fakeStore struct {
	groups map[string]*group.ShareGroupState
	fail   int16 // the code every store answers, when set
	stores int
}

func (f *fakeStore) StoreShareGroup(prev, next *group.ShareGroupState) (int16, <-chan error) {
	if f.fail != 0 {
		return f.fail, nil
	}
	f.stores++
	switch {
	case next == nil:
		delete(f.groups, prev.ID)
	default:
		f.groups[next.ID] = next
	}
	done := make(chan error, 1)
	done <- nil
	return 0, done
}

func (f *fakeStore) states() []group.ShareGroupState {
	var out []group.ShareGroupState
	for _, st := range f.groups {
		out = append(out, *st)
	}
	return out
}

// TestGroupsStoreAndRestore: every change is stored; a coordinator that
// restores the stored groups has them with their epochs and members,
// whose heartbeats go on at their epochs (no rejoin) and whose sessions
// start at the restore; an Empty group is kept, listed and deleted; a
// store the coordinator refuses is NOT_COORDINATOR.
func TestGroupsStoreAndRestore(t *testing.T) {
	now := time.Unix(1000, 0)
	st := &fakeStore{groups: map[string]*group.ShareGroupState{}}
	cfg, err := Config{Persister: NewMemPersister(), Now: func() time.Time { return now }, Store: st}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	topics := fakeTopics{"t": 4}
	old := newGroups(cfg)
	heartbeat(old, topics, "a", 0, "t")
	b := heartbeat(old, topics, "b", 0, "t")
	if s := st.groups["g"]; s == nil || s.Epoch != 2 || len(s.Members) != 2 {
		t.Fatalf("stored after two joins: %+v", s)
	}

	// The coordinator moves: the new one restores the stored state later.
	now = now.Add(time.Minute)
	gs := newGroups(cfg)
	gs.Restore(st.states(), topics)
	d := gs.Describe("g", topics)
	if d.ErrorCode != 0 || d.GroupEpoch != 2 || len(d.Members) != 2 || d.GroupState != StateStable {
		t.Fatalf("restored: %+v", d)
	}
	stores := st.stores
	if r := heartbeat(gs, topics, "b", b.MemberEpoch); r.ErrorCode != 0 || r.MemberEpoch != b.MemberEpoch {
		t.Fatalf("b heartbeats after the move: %+v", r)
	}
	if st.stores != stores {
		t.Errorf("a heartbeat that changed nothing stored the group")
	}
	// a never heartbeats again: its session, started at the restore,
	// times out.
	if out := gs.expire(now.Add(cfg.Defaults.SessionTimeout - time.Millisecond)); len(out) != 0 {
		t.Fatalf("expired before the session timeout: %v", out)
	}
	now = now.Add(cfg.Defaults.SessionTimeout)
	heartbeat(gs, topics, "b", b.MemberEpoch) // b stays
	if out := gs.expire(now); len(out) != 1 || out[0].member != "a" {
		t.Fatalf("expired %v, want a", out)
	}
	if s := st.groups["g"]; s.Epoch != 3 || len(s.Members) != 1 {
		t.Fatalf("stored after a's expiry: epoch %d, %d members", s.Epoch, len(s.Members))
	}
	heartbeat(gs, topics, "b", -1)
	if s := st.groups["g"]; s == nil || s.Epoch != 4 || len(s.Members) != 0 {
		t.Fatalf("stored after the last member left: %+v", s)
	}

	// Empty, after another move: still a group, at its epoch.
	gs = newGroups(cfg)
	gs.Restore(st.states(), topics)
	if l := gs.List(); len(l) != 1 || l[0].State != StateEmpty {
		t.Fatalf("list: %+v", l)
	}
	if d := gs.Describe("g", topics); d.ErrorCode != 0 || d.GroupState != StateEmpty || d.GroupEpoch != 4 {
		t.Fatalf("describe Empty: %+v", d)
	}
	if r := heartbeat(gs, topics, "c", 0, "t"); r.MemberEpoch != 5 {
		t.Fatalf("a join after the move: epoch %d, want 5 (the epoch goes on)", r.MemberEpoch)
	}
	if code := gs.Delete(context.Background(), "g"); code != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete with a member: %d", code)
	}
	heartbeat(gs, topics, "c", -1)
	st.fail = kerr.NotCoordinator.Code
	if r := heartbeat(gs, topics, "d", 0, "t"); r.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("join when the store is refused: %d", r.ErrorCode)
	}
	if code := gs.Delete(context.Background(), "g"); code != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete: %d, want NON_EMPTY_GROUP (d joined in memory)", code)
	}
	// d joins again (its client retries): what memory holds is stored.
	st.fail = 0
	if r := heartbeat(gs, topics, "d", 0, "t"); r.ErrorCode != 0 || st.groups["g"].Members["d"].ClientID != "client" {
		t.Fatalf("d's join retried: %d, stored %+v", r.ErrorCode, st.groups["g"])
	}
	heartbeat(gs, topics, "d", -1)
	if code := gs.Delete(context.Background(), "g"); code != 0 || gs.Exists("g") || st.groups["g"] != nil {
		t.Fatalf("delete: %d, exists %v, stored %+v", code, gs.Exists("g"), st.groups["g"])
	}
	if code := gs.Delete(context.Background(), "g"); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete again: %d", code)
	}
}
