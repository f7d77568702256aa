package share

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
