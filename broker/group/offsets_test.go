package group

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestCommitFetchRoundTrip(t *testing.T) {
	e := newEnv(t, nil)
	meta := "hello"
	for v := int16(1); v <= 8; v++ {
		group := fmt.Sprintf("simple-%d", v)
		m := &meta
		if v%2 == 0 {
			m = nil // null metadata is stored as ""
		}
		resp := e.c.OffsetCommit(context.Background(), commitReq(v, group, "", -1, "t", 3, 100, m))
		for i, code := range commitCodes(resp) {
			if code != 0 {
				t.Fatalf("v%d #%d: commit: got %s", v, i, errName(code))
			}
		}
		wantMeta := "hello"
		if m == nil {
			wantMeta = ""
		}
		wantEpoch := int32(-1)
		if v >= 6 {
			wantEpoch = 7
		}
		// Read back at every fetch version that has one group.
		for fv := int16(1); fv <= 7; fv++ {
			req := kmsg.NewPtrOffsetFetchRequest()
			req.Version = fv
			req.Group = group
			req.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0, 2, 9}}, {Topic: "none", Partitions: []int32{0}}}
			r := e.c.OffsetFetch(context.Background(), req)
			if r.ErrorCode != 0 || len(r.Topics) != 2 {
				t.Fatalf("commit v%d fetch v%d: got %s with %d topics", v, fv, errName(r.ErrorCode), len(r.Topics))
			}
			got := r.Topics[0].Partitions
			fetchEpoch := wantEpoch
			if fv < 5 {
				fetchEpoch = -1 // not in the response; kmsg's default
			}
			tests := []struct {
				p      kmsg.OffsetFetchResponseTopicPartition
				offset int64
				meta   string
				epoch  int32
			}{
				{got[0], 100, wantMeta, fetchEpoch},
				{got[1], 102, wantMeta, fetchEpoch},
				{got[2], -1, "", -1},
				{r.Topics[1].Partitions[0], -1, "", -1},
			}
			for i, tt := range tests {
				if fv < 5 {
					tt.p.LeaderEpoch = -1
				}
				if tt.p.Offset != tt.offset || tt.p.Metadata == nil || *tt.p.Metadata != tt.meta || tt.p.LeaderEpoch != tt.epoch || tt.p.ErrorCode != 0 {
					t.Errorf("commit v%d fetch v%d #%d: got offset %d meta %v epoch %d err %d, want %d %q %d 0",
						v, fv, i, tt.p.Offset, tt.p.Metadata, tt.p.LeaderEpoch, tt.p.ErrorCode, tt.offset, tt.meta, tt.epoch)
				}
			}
		}
		// Null topics ask for everything (v2+).
		all, code := e.fetchAll(group)
		if code != 0 || len(all) != 3 || all[tp{"t", 1}].Offset != 101 {
			t.Errorf("commit v%d: fetch all: got %s %v", v, errName(code), all)
		}
	}

	// v8 with several groups, one unknown.
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	for _, g := range []string{"simple-8", "unknown"} {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = g
		rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{1}}}
		req.Groups = append(req.Groups, rg)
	}
	r := e.c.OffsetFetch(context.Background(), req)
	if len(r.Groups) != 2 || r.Groups[0].Topics[0].Partitions[0].Offset != 101 || r.Groups[1].Topics[0].Partitions[0].Offset != -1 ||
		r.Groups[1].Topics[0].Partitions[0].Metadata == nil {
		t.Errorf("v8 fetch: got %+v", r.Groups)
	}
}

func TestCommitValidation(t *testing.T) {
	e := newEnv(t, func(c *Config) {
		c.OffsetMetadataMaxBytes = 10
		c.PartitionExists = func(topic string, p int32) bool { return topic != "missing" }
	})
	spec := memberSpec{version: 7, group: "g", protocols: []string{"range"}}
	ids, gen := e.stableGroup(spec, 1)
	long := strings.Repeat("x", 11)
	short := "ok"
	tests := []struct {
		req  *kmsg.OffsetCommitRequest
		want int16
	}{
		{commitReq(8, "g", ids[0], gen, "t", 1, 5, nil), 0},
		{commitReq(8, "g", ids[0], gen+1, "t", 1, 5, nil), kerr.IllegalGeneration.Code},
		{commitReq(8, "g", "nobody", gen, "t", 1, 5, nil), kerr.UnknownMemberID.Code},
		{commitReq(8, "g", "", -1, "t", 1, 5, nil), kerr.UnknownMemberID.Code}, // simple commit to a group with members
		{commitReq(8, "unknown", "m", 3, "t", 1, 5, nil), kerr.IllegalGeneration.Code},
		{commitReq(8, "g", ids[0], gen, "t", 1, 5, &long), kerr.OffsetMetadataTooLarge.Code},
		{commitReq(8, "g", ids[0], gen, "t", 1, 5, &short), 0},
		{commitReq(8, "g", ids[0], gen, "missing", 1, 5, nil), kerr.UnknownTopicOrPartition.Code},
		{func() *kmsg.OffsetCommitRequest {
			r := commitReq(8, "g", ids[0], gen, "t", 1, 5, nil)
			r.InstanceID = kmsg.StringPtr("not-static")
			return r
		}(), kerr.UnknownMemberID.Code},
	}
	for i, tt := range tests {
		codes := commitCodes(e.c.OffsetCommit(context.Background(), tt.req))
		if len(codes) != 1 || codes[0] != tt.want {
			t.Errorf("#%d: got %v, want [%s]", i, codes, errName(tt.want))
		}
	}
	// During CompletingRebalance: REBALANCE_IN_PROGRESS; during
	// PreparingRebalance commits are still taken.
	ch := e.startJoin(spec, 2)
	e.waitState("g", StatePreparingRebalance)
	if codes := commitCodes(e.c.OffsetCommit(context.Background(), commitReq(8, "g", ids[0], gen, "t", 1, 6, nil))); codes[0] != 0 {
		t.Errorf("commit while preparing: got %s, want NONE", errName(codes[0]))
	}
	r0 := recv(t, e.rejoin(spec, ids[0]))
	recv(t, ch)
	if codes := commitCodes(e.c.OffsetCommit(context.Background(), commitReq(8, "g", ids[0], r0.Generation, "t", 1, 7, nil))); codes[0] != kerr.RebalanceInProgress.Code {
		t.Errorf("commit while completing: got %s, want REBALANCE_IN_PROGRESS", errName(codes[0]))
	}
}

// TestCommitWaitsForAppend: the answer and the visibility of a commit both
// wait for the append; a failed append commits nothing.
func TestCommitWaitsForAppend(t *testing.T) {
	e := newEnv(t, nil)
	l := e.logOf("g")
	if codes := commitCodes(e.c.OffsetCommit(context.Background(), commitReq(8, "g", "", -1, "t", 1, 10, nil))); codes[0] != 0 {
		t.Fatalf("first commit: got %s", errName(codes[0]))
	}
	release := l.hold()
	done := make(chan *kmsg.OffsetCommitResponse, 1)
	go func() { done <- e.c.OffsetCommit(context.Background(), commitReq(8, "g", "", -1, "t", 1, 20, nil)) }()
	waitFor(t, "the commit's append to be held", func() bool { return l.held.Load() == 1 })
	select {
	case <-done:
		t.Fatal("commit answered before its append returned")
	case <-time.After(30 * time.Millisecond): // room for a wrong answer to arrive
	}
	if got, _ := e.fetchAll("g"); got[tp{"t", 0}].Offset != 10 {
		t.Errorf("offset before the append returned: got %d, want 10", got[tp{"t", 0}].Offset)
	}
	release()
	if codes := commitCodes(recv(t, done)); codes[0] != 0 {
		t.Errorf("second commit: got %s", errName(codes[0]))
	}
	if got, _ := e.fetchAll("g"); got[tp{"t", 0}].Offset != 20 {
		t.Errorf("offset after the append: got %d, want 20", got[tp{"t", 0}].Offset)
	}

	l.setFail(errors.New("disk on fire"))
	if codes := commitCodes(e.c.OffsetCommit(context.Background(), commitReq(8, "g", "", -1, "t", 1, 30, nil))); codes[0] != kerr.NotCoordinator.Code {
		t.Errorf("failed append: got %s, want NOT_COORDINATOR", errName(codes[0]))
	}
	if got, _ := e.fetchAll("g"); got[tp{"t", 0}].Offset != 20 {
		t.Errorf("offset after a failed append: got %d, want 20", got[tp{"t", 0}].Offset)
	}
}

// TestCommitsShareAppends: commits that queue up during an append go to
// the log together in the next one.
func TestCommitsShareAppends(t *testing.T) {
	e := newEnv(t, nil)
	l := e.logOf("g")
	base := l.appends()
	release := l.hold()
	var wg sync.WaitGroup
	const n = 20
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			topic := fmt.Sprintf("t%d", i)
			if codes := commitCodes(e.c.OffsetCommit(context.Background(), commitReq(8, "g", "", -1, topic, 2, int64(i), nil))); codes[0] != 0 {
				t.Errorf("#%d: got %s", i, errName(codes[0]))
			}
		}()
	}
	waitFor(t, "commits to queue", func() bool {
		g, _ := e.c.lookup("g", false)
		if g == nil {
			return false
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.pendingCommits) == 2*n
	})
	release()
	wg.Wait()
	if got := l.appends() - base; got > 2 {
		t.Errorf("appends for %d queued commits: got %d, want at most 2", n, got)
	}
	all, _ := e.fetchAll("g")
	if len(all) != 2*n {
		t.Errorf("committed partitions: got %d, want %d", len(all), 2*n)
	}
}

func TestDeleteGroupsAndOffsets(t *testing.T) {
	e := newEnv(t, nil)
	// A consumer group subscribed to "sub", with offsets in "sub" and "old".
	spec := memberSpec{version: 7, group: "live", protocols: []string{"range"}, meta: func(string) []byte { return consumerMeta("sub") }}
	ids, gen := e.stableGroup(spec, 1)
	for _, topic := range []string{"sub", "old"} {
		if codes := commitCodes(e.c.OffsetCommit(context.Background(), commitReq(8, "live", ids[0], gen, topic, 2, 1, nil))); codes[0] != 0 {
			t.Fatalf("commit: got %s", errName(codes[0]))
		}
	}
	// A group with offsets only.
	if codes := commitCodes(e.c.OffsetCommit(context.Background(), commitReq(8, "idle", "", -1, "t", 2, 1, nil))); codes[0] != 0 {
		t.Fatalf("commit: got %s", errName(codes[0]))
	}

	od := func(group string, topics ...string) *kmsg.OffsetDeleteResponse {
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = group
		for _, topic := range topics {
			req.Topics = append(req.Topics, kmsg.OffsetDeleteRequestTopic{Topic: topic, Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}})
		}
		return e.c.OffsetDelete(context.Background(), req)
	}
	r := od("live", "sub", "old")
	if r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != kerr.GroupSubscribedToTopic.Code || r.Topics[1].Partitions[0].ErrorCode != 0 {
		t.Errorf("offset delete in a live group: got %+v", r)
	}
	if r := od("nope", "t"); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("offset delete of an unknown group: got %s", errName(r.ErrorCode))
	}
	if r := od("idle", "t"); r.ErrorCode != 0 || r.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Errorf("offset delete in an empty group: got %+v", r)
	}
	live, _ := e.fetchAll("live")
	idle, _ := e.fetchAll("idle")
	if _, ok := live[tp{"old", 0}]; ok || len(live) != 3 || len(idle) != 1 {
		t.Errorf("after offset delete: got live %v idle %v", live, idle)
	}

	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.Version = 2
	dg.Groups = []string{"live", "idle", "nope"}
	dr := e.c.DeleteGroups(context.Background(), dg)
	want := []int16{kerr.NonEmptyGroup.Code, 0, kerr.GroupIDNotFound.Code}
	for i, g := range dr.Groups {
		if g.Group != dg.Groups[i] || g.ErrorCode != want[i] {
			t.Errorf("#%d: delete %s: got %s, want %s", i, g.Group, errName(g.ErrorCode), errName(want[i]))
		}
	}
	if idle, _ := e.fetchAll("idle"); len(idle) != 0 {
		t.Errorf("offsets of a deleted group: got %v", idle)
	}
	if st := e.describe("idle").State; st != "Dead" {
		t.Errorf("deleted group: got state %s, want Dead", st)
	}

	// All of it survives a restart.
	e.restart()
	live, _ = e.fetchAll("live")
	idle, _ = e.fetchAll("idle")
	if _, ok := live[tp{"old", 0}]; ok || len(live) != 3 || len(idle) != 0 {
		t.Errorf("after restart: got live %v idle %v", live, idle)
	}
}

func TestListAndDescribe(t *testing.T) {
	e := newEnv(t, nil)
	spec := memberSpec{version: 7, group: "stable", protocols: []string{"range"}}
	e.stableGroup(spec, 1)
	e.c.OffsetCommit(context.Background(), commitReq(8, "simple", "", -1, "t", 1, 1, nil))
	tests := []struct {
		version int16
		states  []string
		want    []string
	}{
		{0, nil, []string{"simple", "stable"}},
		{4, nil, []string{"simple", "stable"}},
		{4, []string{"stable"}, []string{"stable"}},
		{4, []string{"Empty", "Dead"}, []string{"simple"}},
	}
	for i, tt := range tests {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = tt.version
		req.StatesFilter = tt.states
		resp := e.c.ListGroups(context.Background(), req)
		var got []string
		for _, g := range resp.Groups {
			got = append(got, g.Group)
		}
		if resp.ErrorCode != 0 || fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("#%d: got %s %v, want %v", i, errName(resp.ErrorCode), got, tt.want)
		}
		if tt.version == 4 && len(resp.Groups) > 0 && resp.Groups[len(resp.Groups)-1].Group == "stable" &&
			(resp.Groups[len(resp.Groups)-1].GroupState != "Stable" || resp.Groups[len(resp.Groups)-1].ProtocolType != "consumer") {
			t.Errorf("#%d: got %+v", i, resp.Groups)
		}
	}
	d := e.describe("simple")
	if d.State != "Empty" || d.ProtocolType != "" || len(d.Members) != 0 {
		t.Errorf("describe simple: got %+v", d)
	}
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version = 3
	req.Groups = []string{"stable"}
	req.IncludeAuthorizedOperations = true
	if got := e.c.DescribeGroups(context.Background(), req).Groups[0]; got.AuthorizedOperations != allGroupOperations {
		t.Errorf("authorized operations: got %d, want %d", got.AuthorizedOperations, allGroupOperations)
	}
}

// TestOffsetExpiry drives retention with the fake clock.
func TestOffsetExpiry(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.OffsetsRetention = time.Hour })
	// A consumer group commits now and becomes Empty 30 minutes later: its
	// offsets expire an hour after it became Empty, not after the commit.
	spec := memberSpec{version: 7, group: "consumers", protocols: []string{"range"}}
	ids, gen := e.stableGroup(spec, 1)
	e.c.OffsetCommit(context.Background(), commitReq(8, "consumers", ids[0], gen, "c", 1, 1, nil))
	// A group that only commits: each offset expires an hour after its commit.
	e.c.OffsetCommit(context.Background(), commitReq(8, "simple", "", -1, "a", 1, 1, nil))
	e.clock.Advance(30 * time.Minute)
	e.c.OffsetCommit(context.Background(), commitReq(8, "simple", "", -1, "b", 1, 1, nil))
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version = 4
	leave.Group = "consumers"
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: ids[0]}}
	e.c.LeaveGroup(context.Background(), leave)
	e.waitState("consumers", StateEmpty)

	tests := []struct {
		advance                    time.Duration
		simple, consumers          int
		simpleState, consumerState string
	}{
		{0, 2, 1, "Empty", "Empty"},
		{31 * time.Minute, 1, 1, "Empty", "Empty"}, // "a" is 61 min old; "c" too, but its group was Empty for 31
		{20 * time.Minute, 1, 1, "Empty", "Empty"},
		{10 * time.Minute, 0, 0, "Dead", "Dead"}, // "b" is 61 min old; "consumers" Empty for 61: groups go too
	}
	for i, tt := range tests {
		e.clock.Advance(tt.advance)
		e.c.expireOffsets()
		// The deletions apply when their append returns; wait for it.
		waitFor(t, "expiry to apply", func() bool {
			simple, _ := e.fetchAll("simple")
			consumers, _ := e.fetchAll("consumers")
			return len(simple) == tt.simple && len(consumers) == tt.consumers
		})
		if st := e.describe("simple").State; st != tt.simpleState {
			t.Errorf("#%d: simple: got state %s, want %s", i, st, tt.simpleState)
		}
		if st := e.describe("consumers").State; st != tt.consumerState {
			t.Errorf("#%d: consumers: got state %s, want %s", i, st, tt.consumerState)
		}
	}
	if st := e.describe("consumers").State; st != "Dead" {
		t.Errorf("consumers state: got %s, want Dead", st)
	}
	e.restart()
	if got, _ := e.fetchAll("consumers"); len(got) != 0 {
		t.Errorf("after restart: got %v", got)
	}
}
