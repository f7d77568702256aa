package coord

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stratastream/strata/coord/zktest"
)

func TestParseConnect(t *testing.T) {
	tests := []struct {
		in      string
		servers []string
		chroot  string
		bad     bool
	}{
		{"127.0.0.1:2181", []string{"127.0.0.1:2181"}, "/strata", false},
		{"h1:1,h2:2/kafka", []string{"h1:1", "h2:2"}, "/kafka", false},
		{"h1:1,h2:2/a/b/", []string{"h1:1", "h2:2"}, "/a/b", false},
		{"h1/", []string{"h1:2181"}, "/", false},
		{"h1:1 , h2:2/x", []string{"h1:1", "h2:2"}, "/x", false},
		{"/strata", nil, "", true},
		{"h1:1/a//b", nil, "", true},
	}
	for i, tc := range tests {
		servers, chroot, err := ParseConnect(tc.in)
		if (err != nil) != tc.bad {
			t.Errorf("#%d %q: got error %v, want error %v", i, tc.in, err, tc.bad)
			continue
		}
		if !tc.bad && (!slices.Equal(servers, tc.servers) || chroot != tc.chroot) {
			t.Errorf("#%d %q: got %v %q, want %v %q", i, tc.in, servers, chroot, tc.servers, tc.chroot)
		}
	}
}

func rawZK(t *testing.T, addr string) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect([]string{addr}, 5*time.Second, zk.WithLogInfo(false), zk.WithLogger(nopZKLog{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

type nopZKLog struct{}

func (nopZKLog) Printf(string, ...any) {}

func dial(t *testing.T, connect string, timeout time.Duration) *ZK {
	t.Helper()
	z, err := DialZK(ctxT(t, waitTimeout), Config{ZooKeeperConnect: connect, SessionTimeout: timeout, ConnectTimeout: waitTimeout, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = z.Close() })
	return z
}

func TestZKChroot(t *testing.T) {
	srv := zktest.Start(t)
	raw := rawZK(t, srv.Addr())
	dial(t, srv.ConnectString("/deep/chroot/x"), zkSessionTimeout)
	dial(t, srv.ConnectString(""), zkSessionTimeout) // default /strata
	for _, p := range []string{"/deep/chroot/x/brokers/ids", "/deep/chroot/x/topics", "/deep/chroot/x/cluster/id",
		"/deep/chroot/x/admin/delete_topics", "/strata/brokers/ids", "/strata/cluster/id"} {
		if ok, _, err := raw.Exists(p); err != nil || !ok {
			t.Errorf("%s: exists %v, %v", p, ok, err)
		}
	}
	// Two chroots are two clusters.
	a := dial(t, srv.ConnectString("/c1"), zkSessionTimeout)
	b := dial(t, srv.ConnectString("/c2"), zkSessionTimeout)
	if a.ClusterID() == b.ClusterID() {
		t.Fatal("two chroots share a cluster id")
	}
	// Nothing reachable: Open fails in bounded time with ErrUnavailable.
	start := time.Now()
	_, err := DialZK(ctxT(t, waitTimeout), Config{ZooKeeperConnect: "127.0.0.1:1/x", SessionTimeout: 2 * time.Second, ConnectTimeout: time.Second})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("dial to a closed port: got %v, want ErrUnavailable", err)
	}
	t.Logf("unreachable ZooKeeper reported after %v: %v", time.Since(start).Round(time.Millisecond), err)
}

// TestZKOutage stops ZooKeeper until both sessions noticed: the cache
// stays readable, writes fail at once with ErrUnavailable, and everything
// works again once the server is back.
func TestZKOutage(t *testing.T) {
	srv := zktest.Start(t)
	a := dial(t, srv.ConnectString("/outage"), zkSessionTimeout)
	b := dial(t, srv.ConnectString("/outage"), zkSessionTimeout)
	register(t, a, 1, "")
	register(t, b, 2, "")
	createTopic(t, a, "kept", [][]int32{{1, 2}}, nil)
	waitSnap(t, b, "b sees the topic", func(s *Snapshot) bool { _, ok := s.Topic("kept"); return ok })
	_, sub := a.Subscribe()
	defer sub.Close()

	srv.Stop()
	outage := time.Now()
	ev := waitEvent(t, sub, EventDisconnected)
	t.Logf("outage noticed after %v: %v", time.Since(outage).Round(time.Millisecond), ev.Err)
	s := a.Snapshot()
	if s.Connected || !s.Live(1) || !s.Live(2) {
		t.Fatalf("snapshot during outage: connected %v brokers %v", s.Connected, s.Brokers)
	}
	if p, ok := s.Partition(TopicPartition{"kept", 0}); !ok || p.State.Leader != 1 {
		t.Fatalf("topic during outage: %+v %v", p, ok)
	}
	ctx := ctxT(t, waitTimeout)
	for _, w := range []struct {
		name string
		fn   func() error
	}{
		{"create topic", func() error {
			_, err := a.CreateTopic(ctx, TopicSpec{Name: "new", Assignment: [][]int32{{1}}})
			return err
		}},
		{"update state", func() error {
			_, err := a.UpdatePartitionState(ctx, "kept", 0, PartitionState{Leader: 1, ISR: []int32{1}}, 0)
			return err
		}},
		{"set config", func() error { return a.SetTopicConfig(ctx, "kept", nil) }},
		{"campaign", func() error {
			_, err := a.Campaign(ctxT(t, time.Second), 1)
			if errors.Is(err, context.DeadlineExceeded) {
				return ErrUnavailable // it waits for the service, as it should
			}
			return err
		}},
	} {
		err := w.fn()
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("%s during outage: got %v, want ErrUnavailable", w.name, err)
		}
		// At once: without asking the ZooKeeper client, which would queue
		// the request and fail it later with one of its own errors.
		for _, zerr := range unavailableErrs {
			if errors.Is(err, zerr) {
				t.Errorf("%s during outage went to the ZooKeeper client: %v", w.name, err)
			}
		}
	}
	// Both sessions go through the outage before the server returns.
	waitSnap(t, b, "b disconnected", func(s *Snapshot) bool { return !s.Connected })
	srv.Restart()
	t.Logf("ZooKeeper was down %v", time.Since(outage).Round(time.Millisecond))

	waitSnap(t, a, "a reconnected", func(s *Snapshot) bool { return s.Connected })
	waitSnap(t, b, "b reconnected", func(s *Snapshot) bool { return s.Connected })
	createTopic(t, b, "after", [][]int32{{2, 1}}, nil)
	waitSnap(t, a, "a sees b's new topic and both brokers", func(s *Snapshot) bool {
		_, ok := s.Topic("after")
		return ok && s.Live(1) && s.Live(2)
	})
	if _, err := a.UpdatePartitionState(ctxT(t, waitTimeout), "kept", 0, PartitionState{Leader: 1, ISR: []int32{1}}, 0); err != nil {
		t.Fatalf("write after recovery: %v", err)
	}
}

// TestZKRegisterWaitsForDeadSession: a broker restarted right after
// kill -9 finds its old registration; Register waits for the old session
// to expire instead of refusing.
func TestZKRegisterWaitsForDeadSession(t *testing.T) {
	srv := zktest.Start(t)
	p := zktest.NewProxy(t, srv.Addr())
	old := dial(t, p.ConnectString("/restart"), zkSessionTimeout)
	register(t, old, 5, "")
	p.Block() // the old process is gone; its session lingers
	fresh := dial(t, srv.ConnectString("/restart"), zkSessionTimeout)
	// Register waits up to 2s more than its session timeout for the old
	// session to expire; ZooKeeper takes the old session's timeout, and
	// longer on a loaded machine. What is tested here is that Register
	// waits, so it is given time enough.
	fresh.registerGrace = waitTimeout
	start := time.Now()
	if _, err := fresh.Register(ctxT(t, 2*waitTimeout), BrokerInfo{ID: 5, Host: "127.0.0.1", Port: 1}); err != nil {
		t.Fatalf("register after the old session died: %v", err)
	}
	t.Logf("registered %v after the old process vanished", time.Since(start).Round(time.Millisecond))
}

// TestZKFailedRefreshReloads: a refresh after a write that fails half-way
// (the topic read, its partition state not) leaves the cache marked for a
// full reload, which reads the state again without any further write or
// watch.
func TestZKFailedRefreshReloads(t *testing.T) {
	srv := zktest.Start(t)
	z := dial(t, srv.ConnectString("/refresh"), zkSessionTimeout)
	register(t, z, 1, "")
	createTopic(t, z, "r", [][]int32{{1}}, nil)
	tp := TopicPartition{"r", 0}
	want, ok := z.Snapshot().Partition(tp)
	if !ok || want.State.Leader != 1 {
		t.Fatalf("%s after create: got %+v (found %v), want leader 1", tp, want, ok)
	}
	z.refresh(ctxT(t, waitTimeout), "a test write", func(c *zkCache) error {
		// What loadTopic leaves when the topic's read succeeds and its
		// partition state's read fails.
		old := c.topics[tp.Topic]
		nt := *old
		nt.Partitions = slices.Clone(old.Partitions)
		nt.Partitions[tp.Partition].State, nt.Partitions[tp.Partition].Version = PartitionState{Leader: NoLeader}, -1
		c.topics[tp.Topic] = &nt
		return fmt.Errorf("%w: injected: get %s failed", ErrUnavailable, tp)
	})
	waitSnap(t, z, "the partition state read again", func(s *Snapshot) bool {
		p, ok := s.Partition(tp)
		return ok && p.Version == want.Version && p.State.Leader == want.State.Leader
	})
}
