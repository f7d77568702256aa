package coord

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratastream/strata/coord/zktest"
)

// zkSessionTimeout is the contract tests' ZooKeeper session timeout:
// short, so expiry tests are quick; long enough for -race on 2 cores.
const zkSessionTimeout = 2 * time.Second

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
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	z, err := DialZK(ctx, Config{ZooKeeperConnect: p.ConnectString(e.chroot), SessionTimeout: zkSessionTimeout, Logger: testLogger(t)})
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

func (e *zkEnv) partition(t *testing.T, c Coordinator) {
	e.mu.Lock()
	p := e.proxy[c.(*ZK)]
	e.mu.Unlock()
	p.Block()
	// The server expires the session one session timeout after it last
	// heard from the client, rounded up to its tick (250ms).
	time.Sleep(zkSessionTimeout + 600*time.Millisecond)
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
