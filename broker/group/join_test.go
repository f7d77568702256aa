package group

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/segment"
)

func TestPartitionFor(t *testing.T) {
	// Expected values: Java's abs(String.hashCode()) % n, computed apart.
	tests := []struct {
		group string
		n     int
		want  int
	}{
		{"", 50, 0},
		{"a", 50, 47},
		{"my-group", 50, 12},
		{"console-consumer-12345", 50, 6},
		{"polygenelubricants", 50, 0}, // hashCode is Integer.MIN_VALUE
		{"grüße", 50, 23},
		{"😀group", 50, 32}, // a surrogate pair in UTF-16
		{"a", 3, 1},
	}
	for i, tt := range tests {
		if got := PartitionFor(tt.group, tt.n); got != tt.want {
			t.Errorf("#%d: PartitionFor(%q, %d): got %d, want %d", i, tt.group, tt.n, got, tt.want)
		}
	}
}

func TestMemberIDRequiredByVersion(t *testing.T) {
	e := newEnv(t, nil)
	for v := int16(0); v <= 7; v++ {
		s := memberSpec{version: v, group: "g-version-" + string(rune('a'+v)), client: "cl", protocols: []string{"range"}}
		resp := e.c.JoinGroup(e.ctx("cl"), s.request(""))
		wantCode := int16(0)
		if v >= 4 {
			wantCode = kerr.MemberIDRequired.Code
		}
		if resp.ErrorCode != wantCode {
			t.Errorf("#%d: v%d first join: got %s, want %s", v, v, errName(resp.ErrorCode), errName(wantCode))
		}
		if !strings.HasPrefix(resp.MemberID, "cl-") || len(resp.MemberID) != len("cl-")+36 {
			t.Errorf("#%d: v%d member id: got %q, want cl-<uuid>", v, v, resp.MemberID)
		}
		if v < 4 && (resp.Generation != 1 || resp.LeaderID != resp.MemberID || len(resp.Members) != 1) {
			t.Errorf("#%d: v%d: got generation %d leader %q members %d, want 1, itself, 1", v, v, resp.Generation, resp.LeaderID, len(resp.Members))
		}
		if v >= 4 {
			// Joining again with the id gets in.
			resp2 := e.c.JoinGroup(e.ctx("cl"), s.request(resp.MemberID))
			if resp2.ErrorCode != 0 || resp2.MemberID != resp.MemberID || resp2.Generation != 1 {
				t.Errorf("#%d: v%d second join: got %s member %q generation %d, want NONE, %q, 1", v, v, errName(resp2.ErrorCode), resp2.MemberID, resp2.Generation, resp.MemberID)
			}
		}
	}
	// A static member is never asked for a member id.
	s := memberSpec{version: 5, group: "g-static", instance: "inst", protocols: []string{"range"}}
	if resp := e.c.JoinGroup(e.ctx("cl"), s.request("")); resp.ErrorCode != 0 || !strings.HasPrefix(resp.MemberID, "inst-") {
		t.Errorf("static v5 join: got %s member %q, want NONE, inst-<uuid>", errName(resp.ErrorCode), resp.MemberID)
	}
}

func TestJoinValidation(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.MinSessionTimeout, c.MaxSessionTimeout = time.Second, time.Hour })
	tests := []struct {
		spec     memberSpec
		memberID string
		want     int16
	}{
		{memberSpec{version: 5, group: "", protocols: []string{"range"}}, "", kerr.InvalidGroupID.Code},
		{memberSpec{version: 5, group: "g", session: 999 * time.Millisecond, protocols: []string{"range"}}, "", kerr.InvalidSessionTimeout.Code},
		{memberSpec{version: 5, group: "g", session: 2 * time.Hour, protocols: []string{"range"}}, "", kerr.InvalidSessionTimeout.Code},
		{memberSpec{version: 5, group: "g", ptype: "consumer", protocols: nil}, "", kerr.InconsistentGroupProtocol.Code},
		{memberSpec{version: 5, group: "unknown", protocols: []string{"range"}}, "some-member", kerr.UnknownMemberID.Code},
	}
	for i, tt := range tests {
		if tt.spec.session == 0 {
			tt.spec.session = 2 * time.Second
		}
		resp := e.c.JoinGroup(e.ctx("c"), tt.spec.request(tt.memberID))
		if resp.ErrorCode != tt.want {
			t.Errorf("#%d: got %s, want %s", i, errName(resp.ErrorCode), errName(tt.want))
		}
		if resp.Generation != -1 {
			t.Errorf("#%d: generation: got %d, want -1", i, resp.Generation)
		}
	}
}

// TestTwoMembersJoinAndSync runs the whole v4+ handshake for two members
// joining an empty group within the initial rebalance delay.
func TestTwoMembersJoinAndSync(t *testing.T) {
	e := newEnv(t, nil)
	a := memberSpec{version: 7, group: "g", client: "alpha", protocols: []string{"range"}}
	b := memberSpec{version: 7, group: "g", client: "beta", protocols: []string{"range"}}
	resps := e.joinAll([]memberSpec{a, b})
	ra, rb := resps[0], resps[1]
	gen := ra.Generation
	for i, r := range []*kmsg.JoinGroupResponse{ra, rb} {
		if r.ErrorCode != 0 || r.Generation != gen || r.Protocol == nil || *r.Protocol != "range" ||
			r.ProtocolType == nil || *r.ProtocolType != "consumer" {
			t.Fatalf("#%d: got %s generation %d protocol %v, want NONE %d range", i, errName(r.ErrorCode), r.Generation, r.Protocol, gen)
		}
	}
	if !strings.HasPrefix(ra.MemberID, "alpha-") || !strings.HasPrefix(rb.MemberID, "beta-") {
		t.Errorf("member ids: got %q %q, want alpha-*, beta-*", ra.MemberID, rb.MemberID)
	}
	if ra.LeaderID != ra.MemberID || rb.LeaderID != ra.MemberID {
		t.Errorf("leader: got %q and %q, want the first joiner %q", ra.LeaderID, rb.LeaderID, ra.MemberID)
	}
	if len(ra.Members) != 2 || len(rb.Members) != 0 {
		t.Fatalf("member lists: got %d (leader) and %d, want 2 and 0", len(ra.Members), len(rb.Members))
	}
	if ra.Members[0].MemberID != ra.MemberID || !bytes.Equal(ra.Members[1].ProtocolMetadata, []byte("range")) {
		t.Errorf("leader's member list: got %+v", ra.Members)
	}
	if st := e.describe("g").State; st != "CompletingRebalance" {
		t.Errorf("state after join: got %s, want CompletingRebalance", st)
	}

	// The follower's SyncGroup waits for the leader's.
	chSB := e.goSync(syncReq(5, "g", rb.MemberID, gen, nil))
	e.waitSyncing("g", rb.MemberID)
	select {
	case r := <-chSB:
		t.Fatalf("follower sync answered before the leader's: %+v", r)
	case <-time.After(20 * time.Millisecond): // room for a wrong answer to arrive
	}
	sa := e.c.SyncGroup(context.Background(), syncReq(5, "g", ra.MemberID, gen, map[string][]byte{
		ra.MemberID: []byte("for-a"), rb.MemberID: []byte("for-b"),
	}))
	sb := recv(t, chSB)
	for i, tt := range []struct {
		resp *kmsg.SyncGroupResponse
		want string
	}{{sa, "for-a"}, {sb, "for-b"}} {
		if tt.resp.ErrorCode != 0 || string(tt.resp.MemberAssignment) != tt.want ||
			tt.resp.Protocol == nil || *tt.resp.Protocol != "range" {
			t.Errorf("#%d: sync: got %s %q, want NONE %q", i, errName(tt.resp.ErrorCode), tt.resp.MemberAssignment, tt.want)
		}
	}
	d := e.describe("g")
	if d.State != "Stable" || d.Protocol != "range" || len(d.Members) != 2 || string(d.Members[1].MemberAssignment) != "for-b" ||
		d.Members[0].ClientID != "alpha" || d.Members[0].ClientHost != "/127.0.0.1" {
		t.Errorf("describe: got %+v", d)
	}
	if code := e.heartbeat("g", rb.MemberID, gen, ""); code != 0 {
		t.Errorf("heartbeat: got %s, want NONE", errName(code))
	}
}

func TestProtocolSelection(t *testing.T) {
	tests := []struct {
		members [][]string
		ptypes  []string // default consumer
		want    string   // selected protocol; "" when the last member is refused
	}{
		{[][]string{{"range", "roundrobin"}, {"roundrobin", "range"}}, nil, "range"},                            // tie: leader's preference
		{[][]string{{"range", "roundrobin"}, {"roundrobin"}}, nil, "roundrobin"},                                // only common one
		{[][]string{{"x", "y"}, {"y", "x"}, {"y", "x"}}, nil, "y"},                                              // most votes
		{[][]string{{"cooperative-sticky", "range"}, {"cooperative-sticky", "range"}, {"range"}}, nil, "range"}, // only common one
		{[][]string{{"range"}, {"RoundRobinAssigner"}}, nil, ""},                                                // nothing common
		{[][]string{{"range"}, {"range"}}, []string{"consumer", "connect"}, ""},                                 // other protocol type
	}
	for i, tt := range tests {
		e := newEnv(t, nil)
		var specs []memberSpec
		for j, ps := range tt.members {
			s := memberSpec{version: 3, group: "g", protocols: ps}
			if tt.ptypes != nil {
				s.ptype = tt.ptypes[j]
			}
			specs = append(specs, s)
		}
		var last memberSpec
		if tt.want == "" { // the last member will be refused
			last, specs = specs[len(specs)-1], specs[:len(specs)-1]
		}
		resps := e.joinAll(specs)
		refused := int16(0)
		if tt.want == "" {
			refused = e.c.JoinGroup(e.ctx("c"), last.request("")).ErrorCode
		}
		leader := resps[0]
		for _, r := range resps {
			if got := *r.Protocol; tt.want != "" && got != tt.want {
				t.Errorf("#%d: got protocol %q, want %q", i, got, tt.want)
			}
		}
		if tt.want == "" && refused != kerr.InconsistentGroupProtocol.Code {
			t.Errorf("#%d: last member: got %s, want INCONSISTENT_GROUP_PROTOCOL", i, errName(refused))
		}
		if leader.LeaderID != leader.MemberID {
			t.Errorf("#%d: the first joiner is not the leader", i)
		}
	}
}

// joinAll joins the members of specs, in order, into one generation, the
// first being the leader. Like a client it rejoins a member that got an
// older generation's answer when a rebalance follows (a member slower than
// the initial delay); it returns the answers of the final generation.
func (e *env) joinAll(specs []memberSpec) []*kmsg.JoinGroupResponse {
	e.t.Helper()
	chans := make([]<-chan *kmsg.JoinGroupResponse, len(specs))
	for i, s := range specs {
		chans[i] = e.startJoin(s, i+1)
	}
	group := specs[0].group
	resps := make([]*kmsg.JoinGroupResponse, len(specs))
	deadline := time.Now().Add(10 * time.Second)
	for {
		if e.fakeTime && e.describe(group).State == StatePreparingRebalance.String() {
			// Every member is in (startJoin waited for each): let the
			// initial delay, and its extensions, pass.
			e.clock.Advance(e.cfg.InitialRebalanceDelay)
		}
		done := true
		for i, ch := range chans {
			if ch == nil {
				continue
			}
			select {
			case r := <-ch:
				if r.ErrorCode != 0 {
					e.t.Fatalf("join of member %d: got %s", i, errName(r.ErrorCode))
				}
				resps[i], chans[i] = r, nil
			default:
				done = false
			}
		}
		if done && resps[0].Generation == resps[len(resps)-1].Generation && len(resps[0].Members) == len(specs) {
			return resps
		}
		if e.describe(group).State == StatePreparingRebalance.String() {
			for i, r := range resps {
				if chans[i] == nil && r != nil {
					chans[i], resps[i] = e.rejoin(specs[i], r.MemberID), nil
				}
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatal("timed out joining the members into one generation")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// specsOf returns n members of spec; static ones get instance ids
// spec.instance+"0", +"1", ...
func specsOf(spec memberSpec, n int) []memberSpec {
	specs := make([]memberSpec, n)
	for i := range specs {
		specs[i] = spec
		if spec.instance != "" {
			specs[i].instance = spec.instance + string(rune('0'+i))
		}
	}
	return specs
}

// stableGroup brings n members of spec into a Stable generation; it
// returns their member ids (leader first) and the generation.
func (e *env) stableGroup(spec memberSpec, n int) ([]string, int32) {
	e.t.Helper()
	resps := e.joinAll(specsOf(spec, n))
	ids := make([]string, len(resps))
	for i, r := range resps {
		ids[i] = r.MemberID
	}
	gen := resps[0].Generation
	e.syncAll(spec.group, ids, gen)
	return ids, gen
}

// syncAll syncs every member, ids[0] being the leader, assigning each its
// own id as bytes.
func (e *env) syncAll(group string, ids []string, gen int32) {
	e.t.Helper()
	var chans []<-chan *kmsg.SyncGroupResponse
	for _, id := range ids[1:] {
		chans = append(chans, e.goSync(syncReq(3, group, id, gen, nil)))
	}
	assign := make(map[string][]byte)
	for _, id := range ids {
		assign[id] = []byte("assigned-" + id)
	}
	r := e.c.SyncGroup(context.Background(), syncReq(3, group, ids[0], gen, assign))
	if r.ErrorCode != 0 {
		e.t.Fatalf("leader sync: got %s", errName(r.ErrorCode))
	}
	for i, ch := range chans {
		if r := recv(e.t, ch); r.ErrorCode != 0 || string(r.MemberAssignment) != "assigned-"+ids[i+1] {
			e.t.Fatalf("sync of %s: got %s %q", ids[i+1], errName(r.ErrorCode), r.MemberAssignment)
		}
	}
}

// TestRebalanceJoinAndLeave: a third member joins a Stable group of two,
// everyone rejoins, then one leaves and the remaining two rebalance.
func TestRebalanceJoinAndLeave(t *testing.T) {
	e := newEnv(t, nil)
	spec := memberSpec{version: 7, group: "g", protocols: []string{"cooperative-sticky"}}
	ids, gen := e.stableGroup(spec, 2)

	ch3 := e.startJoin(spec, 3)
	e.waitState("g", StatePreparingRebalance)
	for i, id := range ids {
		if code := e.heartbeat("g", id, gen, ""); code != kerr.RebalanceInProgress.Code {
			t.Errorf("#%d: heartbeat during rebalance: got %s, want REBALANCE_IN_PROGRESS", i, errName(code))
		}
	}
	ch1, ch2 := e.rejoin(spec, ids[0]), e.rejoin(spec, ids[1])
	r1, r2, r3 := recv(t, ch1), recv(t, ch2), recv(t, ch3)
	for i, r := range []*kmsg.JoinGroupResponse{r1, r2, r3} {
		if r.ErrorCode != 0 || r.Generation != gen+1 || r.LeaderID != ids[0] {
			t.Fatalf("#%d: rejoin: got %s generation %d leader %q, want NONE %d %q", i, errName(r.ErrorCode), r.Generation, r.LeaderID, gen+1, ids[0])
		}
	}
	if len(r1.Members) != 3 {
		t.Fatalf("leader's member list: got %d, want 3", len(r1.Members))
	}
	ids = []string{r1.MemberID, r2.MemberID, r3.MemberID}
	gen++
	e.syncAll("g", ids, gen)

	// The second member leaves (v3 batch form).
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version = 4
	leave.Group = "g"
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: ids[1]}, {MemberID: "nobody"}}
	lr := e.c.LeaveGroup(context.Background(), leave)
	if lr.ErrorCode != 0 || len(lr.Members) != 2 || lr.Members[0].ErrorCode != 0 || lr.Members[1].ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("leave: got %+v", lr)
	}
	e.waitState("g", StatePreparingRebalance)
	ch1, ch3 = e.rejoin(spec, ids[0]), e.rejoin(spec, ids[2])
	r1, r3 = recv(t, ch1), recv(t, ch3)
	if r1.Generation != gen+1 || r3.Generation != gen+1 || len(r1.Members) != 2 {
		t.Fatalf("after leave: got generations %d %d and %d members, want %d and 2", r1.Generation, r3.Generation, len(r1.Members), gen+1)
	}
	if code := e.heartbeat("g", ids[1], gen+1, ""); code != kerr.UnknownMemberID.Code {
		t.Errorf("heartbeat of the member that left: got %s, want UNKNOWN_MEMBER_ID", errName(code))
	}
}

// TestRebalanceTimeout: a member that does not rejoin within the rebalance
// timeout is dropped, and the others go on without it, at the timeout and
// not before (on fake time).
func TestRebalanceTimeout(t *testing.T) {
	const timeout = 400 * time.Millisecond
	e := newFakeTimeEnv(t, nil)
	spec := memberSpec{version: 7, group: "g", protocols: []string{"range"}, rebalance: timeout}
	ids, gen := e.stableGroup(spec, 2)

	// A newcomer starts the rebalance; the leader rejoins, ids[1] does not.
	ch3 := e.startJoin(spec, 3)
	ch1 := e.rejoin(spec, ids[0])
	e.waitJoining("g", 2)
	e.clock.Advance(timeout - time.Millisecond)
	if st, n := e.describe("g").State, e.joining("g"); st != "PreparingRebalance" || n != 2 {
		t.Fatalf("just before the rebalance timeout: state %s with %d joins waiting, want PreparingRebalance with 2", st, n)
	}
	e.clock.Advance(time.Millisecond)
	r1, r3 := recv(t, ch1), recv(t, ch3)
	if r1.ErrorCode != 0 || r1.Generation != gen+1 || len(r1.Members) != 2 {
		t.Fatalf("join after timeout: got %s generation %d members %d, want NONE %d 2", errName(r1.ErrorCode), r1.Generation, len(r1.Members), gen+1)
	}
	if r3.Generation != gen+1 {
		t.Errorf("newcomer generation: got %d, want %d", r3.Generation, gen+1)
	}
	if code := e.heartbeat("g", ids[1], gen, ""); code != kerr.UnknownMemberID.Code {
		t.Errorf("heartbeat of the dropped member: got %s, want UNKNOWN_MEMBER_ID", errName(code))
	}
}

// TestSessionExpiry: a member that stops heartbeating is removed at its
// session timeout and not before, and the group rebalances without it
// (on fake time).
func TestSessionExpiry(t *testing.T) {
	const session = 400 * time.Millisecond
	e := newFakeTimeEnv(t, nil)
	spec := memberSpec{version: 7, group: "g", protocols: []string{"range"}, session: session, rebalance: 5 * time.Second}
	ids, gen := e.stableGroup(spec, 2)

	// The clock has not moved since the syncs, the last heartbeats of
	// both members. ids[0] heartbeats halfway; ids[1] never again.
	e.clock.Advance(session / 2)
	if code := e.heartbeat("g", ids[0], gen, ""); code != 0 {
		t.Fatalf("heartbeat at half the session: got %s, want NONE", errName(code))
	}
	e.clock.Advance(session/2 - time.Millisecond)
	if code := e.heartbeat("g", ids[0], gen, ""); code != 0 {
		t.Fatalf("heartbeat just before the other member's session timeout: got %s, want NONE", errName(code))
	}
	if d := e.describe("g"); d.State != "Stable" || len(d.Members) != 2 {
		t.Fatalf("just before the session timeout: state %s with %d members, want Stable with 2", d.State, len(d.Members))
	}
	e.clock.Advance(time.Millisecond)
	if code := e.heartbeat("g", ids[0], gen, ""); code != kerr.RebalanceInProgress.Code {
		t.Fatalf("heartbeat of the live member at the other's session timeout: got %s, want REBALANCE_IN_PROGRESS", errName(code))
	}
	r := recv(t, e.rejoin(spec, ids[0]))
	if r.ErrorCode != 0 || r.Generation != gen+1 || len(r.Members) != 1 {
		t.Fatalf("rejoin: got %s generation %d members %d, want NONE %d 1", errName(r.ErrorCode), r.Generation, len(r.Members), gen+1)
	}
}

// TestPendingMemberExpires: a member id handed out with MEMBER_ID_REQUIRED
// that never comes back stops holding up the rebalance at the session
// timeout, and not before (on fake time).
func TestPendingMemberExpires(t *testing.T) {
	const session = 300 * time.Millisecond
	e := newFakeTimeEnv(t, nil)
	spec := memberSpec{version: 7, group: "g", protocols: []string{"range"}, session: session}
	ids, gen := e.stableGroup(spec, 1)
	// A newcomer is told its id but never uses it.
	if r := e.c.JoinGroup(e.ctx("c"), spec.request("")); r.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("got %s, want MEMBER_ID_REQUIRED", errName(r.ErrorCode))
	}
	// The leader rejoins: the join phase waits for the pending id, then completes.
	ch := e.rejoin(spec, ids[0])
	e.waitJoining("g", 1)
	e.clock.Advance(session - time.Millisecond)
	if st, n := e.describe("g").State, e.joining("g"); st != "PreparingRebalance" || n != 1 {
		t.Fatalf("just before the pending member's session timeout: state %s with %d joins waiting, want PreparingRebalance with 1", st, n)
	}
	e.clock.Advance(time.Millisecond)
	r := recv(t, ch)
	if r.ErrorCode != 0 || r.Generation != gen+1 || len(r.Members) != 1 {
		t.Fatalf("rejoin: got %s generation %d members %d, want NONE %d 1", errName(r.ErrorCode), r.Generation, len(r.Members), gen+1)
	}
}

// TestStaticMembership: a static member rejoining with an empty member id
// takes its old place without a rebalance; the old id is fenced.
func TestStaticMembership(t *testing.T) {
	e := newEnv(t, nil)
	spec := memberSpec{version: 7, group: "g", protocols: []string{"range"}, instance: "inst-"}
	ids, gen := e.stableGroup(spec, 2) // instances inst-0 (leader) and inst-1

	// inst-1 restarts.
	s1 := spec
	s1.instance = "inst-1"
	r := e.c.JoinGroup(e.ctx("c"), s1.request(""))
	if r.ErrorCode != 0 || r.Generation != gen || r.MemberID == ids[1] || !strings.HasPrefix(r.MemberID, "inst-1-") {
		t.Fatalf("static rejoin: got %s generation %d member %q, want NONE %d and a new inst-1-*", errName(r.ErrorCode), r.Generation, r.MemberID, gen)
	}
	if r.LeaderID != ids[0] || len(r.Members) != 0 {
		t.Errorf("static rejoin: got leader %q with %d members, want %q and none", r.LeaderID, len(r.Members), ids[0])
	}
	if st := e.describe("g").State; st != "Stable" {
		t.Errorf("state: got %s, want Stable (no rebalance)", st)
	}
	tests := []struct {
		member, instance string
		want             int16
	}{
		{ids[0], "inst-0", 0},
		{r.MemberID, "inst-1", 0},
		{ids[1], "inst-1", kerr.FencedInstanceID.Code},
		{ids[1], "", kerr.UnknownMemberID.Code},
		{r.MemberID, "inst-9", kerr.UnknownMemberID.Code},
	}
	for i, tt := range tests {
		if code := e.heartbeat("g", tt.member, gen, tt.instance); code != tt.want {
			t.Errorf("#%d: heartbeat: got %s, want %s", i, errName(code), errName(tt.want))
		}
	}
	sr := syncReq(3, "g", r.MemberID, gen, nil)
	sr.InstanceID = kmsg.StringPtr("inst-1")
	if s := e.c.SyncGroup(context.Background(), sr); s.ErrorCode != 0 || string(s.MemberAssignment) != "assigned-"+ids[1] {
		t.Errorf("sync after static rejoin: got %s %q, want the old assignment", errName(s.ErrorCode), s.MemberAssignment)
	}

	// The replacement survives a restart.
	e.restart()
	if code := e.heartbeat("g", r.MemberID, gen, "inst-1"); code != 0 {
		t.Errorf("heartbeat after restart: got %s, want NONE", errName(code))
	}

	// inst-0 restarts supporting roundrobin too: the selection stays range
	// (inst-1 lacks it), so no rebalance. Then inst-1 restarts with both:
	// now roundrobin wins, and the group rebalances.
	both := spec
	both.protocols = []string{"roundrobin", "range"}
	both.instance = "inst-0"
	r0 := e.c.JoinGroup(e.ctx("c"), both.request(""))
	if r0.ErrorCode != 0 || r0.Generation != gen || e.describe("g").State != "Stable" {
		t.Fatalf("inst-0 rejoin: got %s generation %d state %s, want NONE %d Stable", errName(r0.ErrorCode), r0.Generation, e.describe("g").State, gen)
	}
	both1 := both
	both1.instance = "inst-1"
	ch1 := e.goJoin(e.ctx("c"), both1.request(""))
	e.waitState("g", StatePreparingRebalance)
	ch0 := e.rejoin(both, r0.MemberID)
	j0, j1 := recv(t, ch0), recv(t, ch1)
	for i, j := range []*kmsg.JoinGroupResponse{j0, j1} {
		if j.ErrorCode != 0 || j.Generation != gen+1 || *j.Protocol != "roundrobin" {
			t.Errorf("#%d: rebalance after protocol change: got %s generation %d protocol %v, want NONE %d roundrobin", i, errName(j.ErrorCode), j.Generation, *j.Protocol, gen+1)
		}
	}
}

// TestLeaveDuringRebalance: a member leaving instead of rejoining lets the
// join phase complete at once rather than at the rebalance timeout.
func TestLeaveDuringRebalance(t *testing.T) {
	e := newEnv(t, nil)
	spec := memberSpec{version: 7, group: "g", protocols: []string{"range"}, rebalance: 30 * time.Second}
	ids, gen := e.stableGroup(spec, 2)
	ch := e.startJoin(spec, 3)
	ch0 := e.rejoin(spec, ids[0])
	e.waitState("g", StatePreparingRebalance)
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version = 1
	leave.Group, leave.MemberID = "g", ids[1]
	if lr := e.c.LeaveGroup(context.Background(), leave); lr.ErrorCode != 0 {
		t.Fatalf("leave v1: got %s", errName(lr.ErrorCode))
	}
	r0, r2 := recv(t, ch0), recv(t, ch)
	if r0.Generation != gen+1 || r2.Generation != gen+1 || len(r0.Members) != 2 {
		t.Errorf("got generations %d %d with %d members, want %d and 2", r0.Generation, r2.Generation, len(r0.Members), gen+1)
	}
	// Leaving again: unknown.
	if lr := e.c.LeaveGroup(context.Background(), leave); lr.ErrorCode != kerr.UnknownMemberID.Code {
		t.Errorf("second leave: got %s, want UNKNOWN_MEMBER_ID", errName(lr.ErrorCode))
	}
}

func TestSyncErrorsAndEmptyAssignment(t *testing.T) {
	e := newEnv(t, nil)
	spec := memberSpec{version: 7, group: "g", protocols: []string{"range"}}
	resps := e.joinAll(specsOf(spec, 2))
	ra, rb := resps[0], resps[1]
	gen := ra.Generation

	bad := []struct {
		req  *kmsg.SyncGroupRequest
		want int16
	}{
		{syncReq(5, "", ra.MemberID, gen, nil), kerr.InvalidGroupID.Code},
		{syncReq(5, "other", ra.MemberID, gen, nil), kerr.UnknownMemberID.Code},
		{syncReq(5, "g", "nobody", gen, nil), kerr.UnknownMemberID.Code},
		{syncReq(5, "g", ra.MemberID, gen+1, nil), kerr.IllegalGeneration.Code},
		{func() *kmsg.SyncGroupRequest {
			r := syncReq(5, "g", ra.MemberID, gen, nil)
			r.Protocol = kmsg.StringPtr("roundrobin")
			return r
		}(), kerr.InconsistentGroupProtocol.Code},
		{func() *kmsg.SyncGroupRequest {
			r := syncReq(5, "g", ra.MemberID, gen, nil)
			r.ProtocolType = kmsg.StringPtr("connect")
			return r
		}(), kerr.InconsistentGroupProtocol.Code},
	}
	for i, tt := range bad {
		if got := e.c.SyncGroup(context.Background(), tt.req).ErrorCode; got != tt.want {
			t.Errorf("#%d: got %s, want %s", i, errName(got), errName(tt.want))
		}
	}
	// The leader assigns nothing to B: B still gets a decodable assignment.
	chSB := e.goSync(syncReq(5, "g", rb.MemberID, gen, nil))
	e.waitSyncing("g", rb.MemberID)
	sa := e.c.SyncGroup(context.Background(), syncReq(5, "g", ra.MemberID, gen, map[string][]byte{ra.MemberID: []byte("a")}))
	sb := recv(t, chSB)
	if sa.ErrorCode != 0 || string(sa.MemberAssignment) != "a" {
		t.Errorf("leader: got %s %q", errName(sa.ErrorCode), sa.MemberAssignment)
	}
	var got kmsg.ConsumerMemberAssignment
	if sb.ErrorCode != 0 || len(sb.MemberAssignment) == 0 || got.ReadFrom(sb.MemberAssignment) != nil || len(got.Topics) != 0 {
		t.Errorf("follower: got %s %x, want an encoded empty consumer assignment", errName(sb.ErrorCode), sb.MemberAssignment)
	}
	// Stable: a late sync gets the stored assignment at once.
	if s := e.c.SyncGroup(context.Background(), syncReq(5, "g", ra.MemberID, gen, nil)); string(s.MemberAssignment) != "a" {
		t.Errorf("stable sync: got %q, want %q", s.MemberAssignment, "a")
	}
}

func TestHeartbeatErrors(t *testing.T) {
	e := newEnv(t, nil)
	spec := memberSpec{version: 7, group: "g", protocols: []string{"range"}}
	ids, gen := e.stableGroup(spec, 1)
	tests := []struct {
		group, member string
		gen           int32
		want          int16
	}{
		{"g", ids[0], gen, 0},
		{"", ids[0], gen, kerr.InvalidGroupID.Code},
		{"nope", ids[0], gen, kerr.UnknownMemberID.Code},
		{"g", "nobody", gen, kerr.UnknownMemberID.Code},
		{"g", ids[0], gen + 1, kerr.IllegalGeneration.Code},
		{"g", ids[0], gen - 1, kerr.IllegalGeneration.Code},
	}
	for i, tt := range tests {
		if code := e.heartbeat(tt.group, tt.member, tt.gen, ""); code != tt.want {
			t.Errorf("#%d: got %s, want %s", i, errName(code), errName(tt.want))
		}
	}
}

// TestAbandonedJoin: a JoinGroup whose connection goes away is withdrawn,
// so the join phase does not wait for it.
func TestAbandonedJoin(t *testing.T) {
	e := newEnv(t, nil)
	spec := memberSpec{version: 3, group: "g", protocols: []string{"range"}, rebalance: 30 * time.Second}
	ids, gen := e.stableGroup(spec, 1)
	ctx, cancel := context.WithCancel(e.ctx("c"))
	chNew := e.goJoin(ctx, spec.request(""))
	e.waitMembers("g", 2)
	cancel()
	if r := recv(t, chNew); r.ErrorCode == 0 {
		t.Errorf("abandoned join: got NONE, want an error")
	}
	e.waitMembers("g", 1)
	r := recv(t, e.rejoin(spec, ids[0]))
	if r.ErrorCode != 0 || r.Generation != gen+1 || len(r.Members) != 1 {
		t.Errorf("rejoin: got %s generation %d members %d, want NONE %d 1", errName(r.ErrorCode), r.Generation, len(r.Members), gen+1)
	}
}

func TestCoordinatorStatus(t *testing.T) {
	e := newEnv(t, nil)
	e.c.Unload(PartitionFor("b", testPartitions)) // partition 2; "g" is in 1
	r := e.c.JoinGroup(e.ctx("c"), memberSpec{version: 7, group: "b", protocols: []string{"range"}}.request(""))
	if r.ErrorCode != kerr.NotCoordinator.Code {
		t.Errorf("unloaded partition: got %s, want NOT_COORDINATOR", errName(r.ErrorCode))
	}

	// A JoinGroup waiting when the coordinator closes is answered.
	spec := memberSpec{version: 3, group: "g", protocols: []string{"range"}}
	ids, _ := e.stableGroup(spec, 1)
	ch := e.startJoin(spec, 2)
	e.c.Close()
	if r := recv(t, ch); r.ErrorCode != kerr.CoordinatorNotAvailable.Code {
		t.Errorf("join across Close: got %s, want COORDINATOR_NOT_AVAILABLE", errName(r.ErrorCode))
	}
	if code := e.heartbeat("g", ids[0], 1, ""); code != kerr.CoordinatorNotAvailable.Code {
		t.Errorf("after Close: got %s, want COORDINATOR_NOT_AVAILABLE", errName(code))
	}
}

func TestLoadInProgress(t *testing.T) {
	cfg := testConfig(newFakeClock())
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	l := &blockingReadLog{memLog: &memLog{}, release: make(chan struct{})}
	// Give the log something to read so Load has to call ReadCopy.
	b, _ := buildBatch(1, []kv{{key: groupKey("x"), value: nil}})
	if _, err := l.memLog.Append(b, segment.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	p := PartitionFor("g", testPartitions)
	done := make(chan error, 1)
	go func() { _, err := c.Load(p, l); done <- err }()
	waitFor(t, "load to start", func() bool { return l.reading.Load() })
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{"g"}
	if got := c.DescribeGroups(context.Background(), req).Groups[0].ErrorCode; got != kerr.CoordinatorLoadInProgress.Code {
		t.Errorf("during load: got %s, want COORDINATOR_LOAD_IN_PROGRESS", errName(got))
	}
	close(l.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := c.DescribeGroups(context.Background(), req).Groups[0]; got.ErrorCode != 0 || got.State != "Dead" {
		t.Errorf("after load: got %s %s, want NONE Dead", errName(got.ErrorCode), got.State)
	}
	if _, err := c.Load(p, l); err == nil {
		t.Errorf("second Load of partition %d: got nil error", p)
	}
}

// TestSyncAppendFails: when the leader's assignment cannot be written, the
// waiting members get NOT_COORDINATOR and the group rebalances; an
// abandoned follower sync is answered too.
func TestSyncAppendFails(t *testing.T) {
	e := newEnv(t, nil)
	spec := memberSpec{version: 7, group: "g", protocols: []string{"range"}}
	resps := e.joinAll(specsOf(spec, 2))
	ra, rb := resps[0], resps[1]

	ctx, cancel := context.WithCancel(context.Background())
	abandoned := make(chan *kmsg.SyncGroupResponse, 1)
	go func() { abandoned <- e.c.SyncGroup(ctx, syncReq(5, "g", rb.MemberID, ra.Generation, nil)) }()
	e.waitSyncing("g", rb.MemberID)
	cancel()
	if r := recv(t, abandoned); r.ErrorCode == 0 {
		t.Errorf("abandoned sync: got NONE, want an error")
	}

	chB := e.goSync(syncReq(5, "g", rb.MemberID, ra.Generation, nil))
	e.waitSyncing("g", rb.MemberID)
	e.logOf("g").setFail(errors.New("no space"))
	sa := e.c.SyncGroup(context.Background(), syncReq(5, "g", ra.MemberID, ra.Generation, map[string][]byte{ra.MemberID: []byte("x")}))
	sb := recv(t, chB)
	if sa.ErrorCode != kerr.NotCoordinator.Code || sb.ErrorCode != kerr.NotCoordinator.Code {
		t.Errorf("syncs: got %s and %s, want NOT_COORDINATOR", errName(sa.ErrorCode), errName(sb.ErrorCode))
	}
	if st := e.describe("g").State; st != "PreparingRebalance" {
		t.Errorf("state: got %s, want PreparingRebalance", st)
	}
}

// TestStaticLeaderSkipAssignment: a static leader that restarts into a
// Stable group learns, from v9, that it leads, with the members and
// SkipAssignment set (KIP-814); before v9 it is handed the previous leader
// id so that it does not assign. A follower is never told to skip.
func TestStaticLeaderSkipAssignment(t *testing.T) {
	for _, version := range []int16{7, 9} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			e := newEnv(t, nil)
			spec := memberSpec{version: version, group: "g", protocols: []string{"range"}, instance: "inst-"}
			ids, gen := e.stableGroup(spec, 2) // inst-0 leads

			s0 := spec
			s0.instance = "inst-0"
			r := e.c.JoinGroup(e.ctx("c"), s0.request(""))
			if r.ErrorCode != 0 || r.Generation != gen || r.MemberID == ids[0] {
				t.Fatalf("leader rejoin: got %s generation %d member %q, want NONE %d and a new id", errName(r.ErrorCode), r.Generation, r.MemberID, gen)
			}
			if version >= 9 {
				if !r.SkipAssignment || r.LeaderID != r.MemberID || len(r.Members) != 2 {
					t.Errorf("v9 leader rejoin: got skip %v leader %q (self %q) with %d members, want skip, itself, 2 members", r.SkipAssignment, r.LeaderID, r.MemberID, len(r.Members))
				}
			} else if r.SkipAssignment || r.LeaderID != ids[0] || len(r.Members) != 0 {
				t.Errorf("v7 leader rejoin: got skip %v leader %q with %d members, want no skip, the old id %q, no members", r.SkipAssignment, r.LeaderID, len(r.Members), ids[0])
			}
			if st := e.describe("g").State; st != "Stable" {
				t.Errorf("state: got %s, want Stable (no rebalance)", st)
			}

			s1 := spec
			s1.instance = "inst-1"
			f := e.c.JoinGroup(e.ctx("c"), s1.request(""))
			if f.ErrorCode != 0 || f.SkipAssignment || len(f.Members) != 0 || f.LeaderID != r.MemberID {
				t.Errorf("follower rejoin: got %s skip %v leader %q with %d members, want NONE, no skip, leader %q, no members", errName(f.ErrorCode), f.SkipAssignment, f.LeaderID, len(f.Members), r.MemberID)
			}
		})
	}
}

// TestLoadStopsOnClose: a Close while a partition loads ends the replay
// before its next read (a broker shutting down waited for replays of
// partitions it would never serve).
func TestLoadStopsOnClose(t *testing.T) {
	c, err := New(testConfig(newFakeClock()))
	if err != nil {
		t.Fatal(err)
	}
	l := &blockingReadLog{memLog: &memLog{}, release: make(chan struct{})}
	// Two batches of 600 KB: more than one read of replayReadBytes.
	for i := range 2 {
		b, _ := buildBatch(1, []kv{{key: groupKey(strings.Repeat(strconv.Itoa(i), 600<<10)), value: nil}})
		if _, err := l.memLog.Append(b, segment.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	p := PartitionFor("g", testPartitions)
	type result struct {
		rep LoadReport
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := c.Load(p, l)
		done <- result{rep, err}
	}()
	waitFor(t, "load to start", func() bool { return l.reading.Load() })
	c.Close()
	close(l.release)
	r := <-done
	if !errors.Is(r.err, ErrClosed) {
		t.Fatalf("Load: %v, want ErrClosed", r.err)
	}
	if r.rep.Records != 1 {
		t.Errorf("replayed %d records, want the first read's 1", r.rep.Records)
	}
}
