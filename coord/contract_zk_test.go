package coord

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/stratastream/strata/coord/zktest"

	"github.com/stratastream/strata/segment/poll"
)

// zkSessionTimeout is the contract tests' ZooKeeper session timeout:
// short, so expiry tests are quick; long enough that a loaded 2-core
// machine keeps its sessions (go-zookeeper drops a connection that has
// been silent for two thirds of it, 4s, and a write there fails with
// ErrUnavailable).
const zkSessionTimeout = 6 * time.Second

var chrootSeq atomic.Int64

// zkEnv runs the contract suite against ZK coordinators, each on its own
// chroot of one shared server and connected through its own proxy, so a
// test can cut one session off.
type zkEnv struct {
	srv    *zktest.Server
	chroot string
	mu     sync.Mutex
	open_  []*ZK
	proxy  map[*ZK]*zktest.Proxy
}

func newZKEnvOn(srv *zktest.Server) func(t *testing.T) env {
	return func(t *testing.T) env {
		name := strings.NewReplacer("/", "_").Replace(t.Name())
		return &zkEnv{srv: srv, chroot: fmt.Sprintf("/strata-test/%s-%d", name, chrootSeq.Add(1)), proxy: map[*ZK]*zktest.Proxy{}}
	}
}

func (e *zkEnv) open(t *testing.T) Coordinator {
	t.Helper()
	p := zktest.NewProxy(t, e.srv.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	z, err := DialZK(ctx, Config{ZooKeeperConnect: p.ConnectString(e.chroot), SessionTimeout: zkSessionTimeout, ConnectTimeout: waitTimeout, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = z.Close() })
	e.mu.Lock()
	e.proxy[z] = p
	e.open_ = append(e.open_, z)
	e.mu.Unlock()
	return z
}

// partition blocks c's proxy and returns once ZooKeeper has expired c's
// session: one session timeout after the server last heard from it,
// rounded up to its tick, or later on a loaded machine. The sign is an
// ephemeral znode of the session, created here outside the chroot, gone:
// ZooKeeper deletes a session's ephemeral znodes in the transaction that
// ends the session.
func (e *zkEnv) partition(t *testing.T, c Coordinator) {
	t.Helper()
	z := c.(*ZK)
	e.mu.Lock()
	p := e.proxy[z]
	e.mu.Unlock()
	marker := fmt.Sprintf("%s.session-%x", e.chroot, z.conn.SessionID())
	if _, err := z.conn.Create(marker, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("session marker %s: %v", marker, err)
	}
	p.Block()
	waitGone(t, rawZK(t, e.srv.Addr()), marker, zkSessionTimeout+waitTimeout)
}

// waitGone polls until the znode at path does not exist, failing after
// timeout.
func waitGone(t *testing.T, raw *zk.Conn, path string, timeout time.Duration) {
	t.Helper()
	var err error
	gone := poll.For(timeout, func() bool {
		var ok bool
		// err: not connected yet, or a dropped connection; ask again.
		ok, _, err = raw.Exists(path)
		return err == nil && !ok
	})
	if !gone {
		t.Fatalf("%s still exists %v later (last error %v)", path, timeout, err)
	}
}

func (e *zkEnv) heal(t *testing.T, c Coordinator) {
	e.mu.Lock()
	p := e.proxy[c.(*ZK)]
	e.mu.Unlock()
	p.Unblock()
}

func (e *zkEnv) restart(t *testing.T) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, z := range e.open_ {
		_ = z.Close()
	}
	e.open_ = nil
}

func (e *zkEnv) setDeleteHook(c Coordinator, fn func() error) { c.(*ZK).hookAfterMarker = fn }

func TestContractZK(t *testing.T) {
	srv := zktest.Start(t)
	runContract(t, newZKEnvOn(srv))
}
