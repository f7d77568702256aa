package coord

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/coord/zktest"
)

// TestZKACLsScale (STRATA_ACL_SCALE=N, not in make test) creates N ACLs on
// N topics through one coordinator in one call and logs how long that
// took, how long another coordinator took to see them all, and how long a
// third took to load them at start.
func TestZKACLsScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("STRATA_ACL_SCALE"))
	if n <= 0 {
		t.Skip("STRATA_ACL_SCALE not set")
	}
	e := newZKEnvOn(zktest.Start(t))(t)
	a, b := e.open(t), e.open(t)
	var bs []acl.Binding
	for i := 0; i < n; i++ {
		bs = append(bs, aclBinding(acl.ResourceTopic, fmt.Sprintf("topic-%d", i), acl.PatternLiteral, "User:alice", acl.OpRead, acl.PermissionAllow))
	}
	start := time.Now()
	for i, err := range a.CreateACLs(ctxT(t, 10*time.Minute), bs) {
		if err != nil {
			t.Fatalf("#%d: %v", i, err)
		}
	}
	t.Logf("ACL_SCALE created %d ACLs in %v", n, time.Since(start))
	waitACLs(t, b, "b sees them all", func(got []acl.Binding) bool { return len(got) == n })
	t.Logf("ACL_SCALE another coordinator saw all %d after %v from the start of the creation", n, time.Since(start))
	start = time.Now()
	c := e.open(t)
	if got, _ := c.ACLs(); len(got) != n {
		t.Fatalf("new coordinator loaded %d", len(got))
	}
	t.Logf("ACL_SCALE a new coordinator loaded %d ACLs in %v", n, time.Since(start))
}
