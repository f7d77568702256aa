package coord

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/broker/acl"
)

func aclBinding(rt acl.ResourceType, name string, pt acl.PatternType, principal string, op acl.Operation, perm acl.PermissionType) acl.Binding {
	return acl.Binding{Pattern: acl.Pattern{Type: rt, Name: name, Pattern: pt}, Entry: acl.Entry{Principal: principal, Host: "*", Operation: op, Permission: perm}}
}

// waitACLs polls c's ACLs until cond holds, failing after waitTimeout,
// and logs how long it took.
func waitACLs(t *testing.T, c Coordinator, what string, cond func([]acl.Binding) bool) []acl.Binding {
	t.Helper()
	start := time.Now()
	for {
		bs, changed := c.ACLs()
		if cond(bs) {
			t.Logf("%s after %v", what, time.Since(start))
			return bs
		}
		select {
		case <-changed:
		case <-time.After(time.Until(start.Add(waitTimeout))):
			t.Fatalf("waited %v for %s; ACLs %v", waitTimeout, what, bs)
		}
	}
}

func hasBinding(b acl.Binding) func([]acl.Binding) bool {
	return func(bs []acl.Binding) bool { return slices.Contains(bs, b) }
}

func checkErrs(t *testing.T, errs []error, want ...error) {
	t.Helper()
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d", len(errs), len(want))
	}
	for i := range errs {
		if (want[i] == nil) != (errs[i] == nil) || (want[i] != nil && !errors.Is(errs[i], want[i])) {
			t.Fatalf("#%d: got %v, want %v", i, errs[i], want[i])
		}
	}
}

// testACLs: create (including duplicates and an invalid binding), list,
// delete by filters with Kafka's matching, and the state after a restart
// of every session.
func testACLs(t *testing.T, e env) {
	a := e.open(t)
	ctx := ctxT(t, waitTimeout)
	readT := aclBinding(acl.ResourceTopic, "orders", acl.PatternLiteral, "User:alice", acl.OpRead, acl.PermissionAllow)
	denyT := aclBinding(acl.ResourceTopic, "orders", acl.PatternLiteral, "User:bob", acl.OpRead, acl.PermissionDeny)
	pre := aclBinding(acl.ResourceTopic, "ord", acl.PatternPrefixed, "User:*", acl.OpDescribe, acl.PermissionAllow)
	wild := aclBinding(acl.ResourceTopic, "*", acl.PatternLiteral, "User:carol", acl.OpWrite, acl.PermissionAllow)
	grp := aclBinding(acl.ResourceGroup, "g1", acl.PatternLiteral, "User:alice", acl.OpRead, acl.PermissionAllow)
	clu := aclBinding(acl.ResourceCluster, acl.ClusterName, acl.PatternLiteral, "User:admin", acl.OpAlter, acl.PermissionAllow)
	bad := aclBinding(acl.ResourceTopic, "x", acl.PatternMatch, "User:alice", acl.OpRead, acl.PermissionAllow)
	checkErrs(t, a.CreateACLs(ctx, []acl.Binding{readT, denyT, pre, wild, grp, clu, bad, readT}), nil, nil, nil, nil, nil, nil, acl.ErrInvalid, nil)
	got, _ := a.ACLs()
	if want := []acl.Binding{readT, denyT, wild, pre, grp, clu}; !sameBindings(got, want) {
		t.Fatalf("after create: got %v, want %v", got, want)
	}

	name := "orders"
	match := acl.Filter{Type: acl.ResourceTopic, Name: &name, Pattern: acl.PatternMatch, Operation: acl.OpAny, Permission: acl.PermissionAny}
	bob := "User:bob"
	denyBob := acl.Filter{Type: acl.ResourceAny, Pattern: acl.PatternAny, Principal: &bob, Operation: acl.OpAny, Permission: acl.PermissionDeny}
	res := a.DeleteACLs(ctx, []acl.Filter{denyBob, match, acl.MatchAll})
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("filter %d: %v", i, r.Err)
		}
	}
	if !sameBindings(res[0].Deleted, []acl.Binding{denyT}) || !sameBindings(res[1].Deleted, []acl.Binding{readT, denyT, wild, pre}) || len(res[2].Deleted) != 6 {
		t.Fatalf("deleted %v / %v / %v", res[0].Deleted, res[1].Deleted, res[2].Deleted)
	}
	if got, _ := a.ACLs(); len(got) != 0 {
		t.Fatalf("after deleting all: %v", got)
	}

	checkErrs(t, a.CreateACLs(ctx, []acl.Binding{readT, pre}), nil, nil)
	e.restart(t)
	c := e.open(t)
	waitACLs(t, c, "ACLs after a restart", func(bs []acl.Binding) bool { return sameBindings(bs, []acl.Binding{readT, pre}) })
	if res := c.DeleteACLs(ctx, []acl.Filter{{Type: acl.ResourceGroup, Pattern: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}}); res[0].Err != nil || len(res[0].Deleted) != 0 {
		t.Fatalf("deleting nothing: %+v", res[0])
	}
}

// testACLsSeenByOther: one broker's coordinator creates and deletes ACLs,
// another's sees each change; concurrent creations on one resource from
// both lose nothing.
func testACLsSeenByOther(t *testing.T, e env) {
	a, b := e.open(t), e.open(t)
	ctx := ctxT(t, waitTimeout)
	x := aclBinding(acl.ResourceTopic, "t", acl.PatternLiteral, "User:alice", acl.OpWrite, acl.PermissionAllow)
	checkErrs(t, a.CreateACLs(ctx, []acl.Binding{x}), nil)
	waitACLs(t, b, "b sees a's ACL", hasBinding(x))
	p := aclBinding(acl.ResourceTransactionalID, "tx-", acl.PatternPrefixed, "User:alice", acl.OpWrite, acl.PermissionAllow)
	checkErrs(t, b.CreateACLs(ctx, []acl.Binding{p}), nil)
	waitACLs(t, a, "a sees b's prefixed ACL", hasBinding(p))

	const perSide = 20
	var wg sync.WaitGroup
	var want []acl.Binding
	var mu sync.Mutex
	var failures []error
	for side, c := range []Coordinator{a, b} {
		for i := 0; i < perSide; i++ {
			bnd := aclBinding(acl.ResourceTopic, "shared", acl.PatternLiteral, fmt.Sprintf("User:u%d-%d", side, i), acl.OpRead, acl.PermissionAllow)
			want = append(want, bnd)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.CreateACLs(ctx, []acl.Binding{bnd})[0]; err != nil {
					mu.Lock()
					failures = append(failures, err)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("concurrent creates failed: %v", failures)
	}
	all := func(bs []acl.Binding) bool {
		for _, w := range want {
			if !slices.Contains(bs, w) {
				return false
			}
		}
		return true
	}
	waitACLs(t, a, "a sees all concurrent ACLs", all)
	waitACLs(t, b, "b sees all concurrent ACLs", all)

	res := a.DeleteACLs(ctx, []acl.Filter{{Type: acl.ResourceAny, Pattern: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}})
	if res[0].Err != nil || len(res[0].Deleted) != 2+2*perSide {
		t.Fatalf("delete all: %d deleted, %v", len(res[0].Deleted), res[0].Err)
	}
	waitACLs(t, b, "b sees the deletion", func(bs []acl.Binding) bool { return len(bs) == 0 })
}

func sameBindings(got, want []acl.Binding) bool {
	if len(got) != len(want) {
		return false
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			return false
		}
	}
	return true
}

// testACLsAfterExpiry: a coordinator cut off until its session expired
// misses the change notifications written meanwhile; once back it must
// still end up with the other broker's changes (ZK: a full reload).
func testACLsAfterExpiry(t *testing.T, e env) {
	a, b := e.open(t), e.open(t)
	ctx := ctxT(t, waitTimeout)
	x := aclBinding(acl.ResourceGroup, "g", acl.PatternLiteral, "User:alice", acl.OpRead, acl.PermissionAllow)
	y := aclBinding(acl.ResourceTopic, "t-", acl.PatternPrefixed, "User:bob", acl.OpWrite, acl.PermissionDeny)
	checkErrs(t, a.CreateACLs(ctx, []acl.Binding{x}), nil)
	waitACLs(t, b, "b sees x", hasBinding(x))
	e.partition(t, b)
	checkErrs(t, a.CreateACLs(ctx, []acl.Binding{y}), nil)
	if res := a.DeleteACLs(ctx, []acl.Filter{{Type: acl.ResourceGroup, Pattern: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}}); res[0].Err != nil || len(res[0].Deleted) != 1 {
		t.Fatalf("delete x: %+v", res[0])
	}
	e.heal(t, b)
	waitACLs(t, b, "b sees y and not x after its session expired", func(bs []acl.Binding) bool { return sameBindings(bs, []acl.Binding{y}) })
}
