package zktest

import (
	"net"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

func TestServerStopRestartAndProxy(t *testing.T) {
	s := Start(t)
	if !s.Running() {
		t.Fatal("not running")
	}
	c, _, err := zk.Connect([]string{s.Addr()}, 4*time.Second, zk.WithLogInfo(false), zk.WithLogger(discard{}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitSession(t, c)
	if _, err := c.Create("/kept", []byte("x"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if s.Running() {
		t.Fatal("running after Stop")
	}
	if conn, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		conn.Close()
		t.Fatal("port still answers after Stop")
	}
	s.Restart()
	waitSession(t, c)
	if b, _, err := c.Get("/kept"); err != nil || string(b) != "x" {
		t.Fatalf("after restart: %q %v", b, err)
	}

	p := NewProxy(t, s.Addr())
	pc, _, err := zk.Connect([]string{p.Addr()}, 4*time.Second, zk.WithLogInfo(false), zk.WithLogger(discard{}))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	waitSession(t, pc)
	p.Block()
	deadline := time.Now().Add(waitTimeout)
	for pc.State() == zk.StateHasSession {
		if time.Now().After(deadline) {
			t.Fatal("client still connected through a blocked proxy")
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.Unblock()
	waitSession(t, pc)
}

// waitTimeout bounds the waits for what must happen; it only stops a
// hung test, so it is generous for a loaded machine.
const waitTimeout = time.Minute

func waitSession(t *testing.T, c *zk.Conn) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for c.State() != zk.StateHasSession {
		if time.Now().After(deadline) {
			t.Fatalf("no session: %v", c.State())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
