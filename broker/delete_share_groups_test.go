package broker

import (
	"testing"
	"time"

	"github.com/stratastream/strata/segment/poll"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// deleteGroupCodes sends DeleteGroups for groups and returns each one's
// code.
func deleteGroupCodes(t *testing.T, s *Server, groups ...string) map[string]int16 {
	t.Helper()
	req := kmsg.NewPtrDeleteGroupsRequest()
	req.Groups = groups
	resp := brokerRequest(t, s, newClient(t, s), req).(*kmsg.DeleteGroupsResponse)
	out := map[string]int16{}
	for _, g := range resp.Groups {
		out[g.Group] = g.ErrorCode
	}
	if len(out) != len(groups) {
		t.Fatalf("DeleteGroups %v: answered %+v", groups, resp.Groups)
	}
	return out
}

// TestDeleteGroupsShareGroup: DeleteGroups refuses a share group with
// members (NON_EMPTY_GROUP), deletes an empty one's state in the share
// coordinator (the group is then unknown to DescribeShareGroupOffsets,
// and its next member starts by share.auto.offset.reset, earliest here),
// and answers GROUP_ID_NOT_FOUND for it afterwards, beside a classic
// group deleted in the same request.
func TestDeleteGroupsShareGroup(t *testing.T) {
	s, cl := startShareAdminServer(t, nil)
	if top, code := alterShareOffset(t, s, cl, "sg", "q", 0, 6); top != 0 || code != 0 {
		t.Fatalf("alter: %d %d", top, code)
	}
	sc := newShareConsumer(t, s, "sg", "q")
	if !poll.For(20*time.Second, func() bool { return s.shares.Groups.HasMembers("sg") }) {
		t.Fatal("the share consumer did not join")
	}
	if got := deleteGroupCodes(t, s, "sg"); got["sg"] != kerr.NonEmptyGroup.Code {
		t.Errorf("delete with a member: %v, want NON_EMPTY_GROUP", kerr.ErrorForCode(got["sg"]))
	}
	sc.Close()
	waitShareGroupEmpty(t, s, "sg")

	commitOffset(t, cl, "classic", "q")
	got := deleteGroupCodes(t, s, "sg", "classic", "nobody")
	if got["sg"] != 0 || got["classic"] != 0 || got["nobody"] != kerr.GroupIDNotFound.Code {
		t.Fatalf("delete sg, classic, nobody: %v, want 0 0 GROUP_ID_NOT_FOUND", got)
	}
	if g := describeShareOffsets(t, s, cl, "sg", nil); g.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Errorf("describe after delete: %+v", g)
	}
	if got := deleteGroupCodes(t, s, "sg"); got["sg"] != kerr.GroupIDNotFound.Code {
		t.Errorf("delete again: %v, want GROUP_ID_NOT_FOUND", kerr.ErrorForCode(got["sg"]))
	}
	if off := firstShareOffset(t, s, "sg"); off != 0 {
		t.Errorf("a member after the delete starts at %d, want 0 (earliest, not the deleted 6)", off)
	}
}
