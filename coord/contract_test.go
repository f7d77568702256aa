package coord

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"
)

// env is one isolated cluster for a contract test: a fresh embedded store
// or a fresh chroot on the shared ZooKeeper server.
type env interface {
	// open starts a new session, as a new broker process would.
	open(t *testing.T) Coordinator
	// partition cuts c off the service and returns once its session has
	// expired (its ephemeral state is gone for everyone else).
	partition(t *testing.T, c Coordinator)
	// heal lets c reconnect (it gets a new session).
	heal(t *testing.T, c Coordinator)
	// restart closes every session (a crash of all brokers, state kept).
	restart(t *testing.T)
	// setDeleteHook makes c's DeleteTopic stop after the marker.
	setDeleteHook(c Coordinator, fn func() error)
}

// contractTests is the suite both implementations pass.
var contractTests = []struct {
	name string
	fn   func(t *testing.T, e env)
}{
	{"ClusterID", testClusterID},
	{"Register", testRegister},
	{"BrokerLossSeenByWatch", testBrokerLoss},
	{"StateChangesSeenAfterExpiry", testStatesAfterExpiry},
	{"ElectionAndFencing", testElectionFencing},
	{"PartitionStateCAS", testStateCAS},
	{"Topics", testTopics},
	{"DeletionMarkerSurvivesCrash", testDeletionCrash},
	{"ControllerFailover", testControllerFailover},
	{"ControlledShutdown", testControlledShutdown},
	{"OfflineReplicas", testOfflineReplicas},
	{"PreferredElectionOnDemand", testPreferredOnDemand},
	{"UncleanElection", testUncleanElection},
	{"ControllerMoves", testControllerMoves},
	{"Reassignment", testReassignment},
	{"ReassignmentRefused", testReassignmentRefused},
	{"ReassignmentCancel", testReassignmentCancel},
	{"ReassignmentGrow", testReassignmentGrow},
	{"ReassignmentKeepsISR", testReassignmentKeepsISR},
	{"ReassignmentFailoverRestart", testReassignmentFailoverRestart},
	{"ScramCredentials", testScramCredentials},
	{"DelegationTokens", testDelegationTokens},
	{"EntityConfigs", testEntityConfigs},
	{"FinalizedFeatures", testFinalizedFeatures},
	{"QuotaEntities", testQuotaEntities},
	{"ACLs", testACLs},
	{"ACLsSeenByOther", testACLsSeenByOther},
	{"ACLsAfterExpiry", testACLsAfterExpiry},
}

func runContract(t *testing.T, newEnv func(t *testing.T) env) {
	for _, tc := range contractTests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newEnv(t))
		})
	}
}

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("COORD_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// testWriter sends log lines to t.Log (shown for failed tests or -v).
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	defer func() { _ = recover() }() // a log line after the test ended
	w.t.Log(string(b[:len(b)-1]))
	return len(b), nil
}

// waitTimeout bounds every wait for something the code guarantees will
// happen (a snapshot or event showing a change, a report, a goroutine
// ending, a call returning). It only stops a hung test, so it is
// generous: a loaded 2-core machine running ZooKeeper may take seconds
// where an idle one takes milliseconds.
const waitTimeout = time.Minute

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitSnap polls c's snapshot until cond holds, failing after
// waitTimeout.
func waitSnap(t *testing.T, c Coordinator, what string, cond func(s *Snapshot) bool) *Snapshot {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		s := c.Snapshot()
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s; snapshot: brokers %v controller %+v topics %v connected %v", waitTimeout, what, s.Brokers, s.Controller, topicStates(s), s.Connected)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func topicStates(s *Snapshot) map[string][]PartitionState {
	m := map[string][]PartitionState{}
	for name, t := range s.Topics {
		for _, p := range t.Partitions {
			m[name] = append(m[name], p.State)
		}
	}
	return m
}

// waitEvent reads sub until an event of kind arrives, failing after
// waitTimeout.
func waitEvent(t *testing.T, sub *Subscription, kind EventKind) Event {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				t.Fatalf("subscription closed while waiting for %v", kind)
			}
			if ev.Kind == kind {
				return ev
			}
		case <-timer.C:
			t.Fatalf("no %v event within %v", kind, waitTimeout)
		}
	}
}

func register(t *testing.T, c Coordinator, id int32, rack string) int64 {
	t.Helper()
	ep, err := c.Register(ctxT(t, waitTimeout), BrokerInfo{ID: id, Host: "127.0.0.1", Port: 9000 + id, ReplicationPort: 9100 + id, Rack: rack,
		Endpoints: testEndpoints(id)})
	if err != nil {
		t.Fatalf("register %d: %v", id, err)
	}
	return ep
}

// testEndpoints are broker id's listeners in the contract tests: an
// internal one on the registered address and an external one.
func testEndpoints(id int32) []Endpoint {
	return []Endpoint{
		{Listener: "INTERNAL", Host: "127.0.0.1", Port: 9000 + id, SecurityProtocol: "PLAINTEXT"},
		{Listener: "EXTERNAL", Host: "broker" + strconv.Itoa(int(id)) + ".example", Port: 19000 + id, SecurityProtocol: "SASL_SSL"},
	}
}

func createTopic(t *testing.T, c Coordinator, name string, asg [][]int32, configs map[string]string) TopicInfo {
	t.Helper()
	ti, err := c.CreateTopic(ctxT(t, waitTimeout), TopicSpec{Name: name, Assignment: asg, Configs: configs})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return ti
}

func testClusterID(t *testing.T, e env) {
	a := e.open(t)
	id := a.ClusterID()
	if len(id) != 22 {
		t.Fatalf("cluster id %q: got length %d, want 22", id, len(id))
	}
	if b := e.open(t); b.ClusterID() != id {
		t.Fatalf("second session: got cluster id %q, want %q", b.ClusterID(), id)
	}
	e.restart(t)
	if c := e.open(t); c.ClusterID() != id {
		t.Fatalf("after restart: got cluster id %q, want %q", c.ClusterID(), id)
	}
}

func testRegister(t *testing.T, e env) {
	a, b := e.open(t), e.open(t)
	ep := register(t, a, 1, "r1")
	if ep <= 0 {
		t.Fatalf("broker epoch %d, want > 0", ep)
	}
	s := waitSnap(t, b, "broker 1 seen", func(s *Snapshot) bool { return s.Live(1) })
	got, _ := s.Broker(1)
	want := BrokerInfo{ID: 1, Host: "127.0.0.1", Port: 9001, ReplicationPort: 9101, Rack: "r1", Epoch: ep, Endpoints: testEndpoints(1)}
	if !got.Equal(want) {
		t.Fatalf("broker 1: got %+v, want %+v", got, want)
	}
	if own, _ := a.Snapshot().Broker(1); !own.Equal(want) {
		t.Fatalf("read-your-writes: own snapshot has %+v, want %+v", own, want)
	}
	// A second broker with the same id is refused, within a bound.
	start := time.Now()
	_, err := b.Register(ctxT(t, waitTimeout), BrokerInfo{ID: 1, Host: "127.0.0.2", Port: 1})
	if !errors.Is(err, ErrBrokerIDInUse) {
		t.Fatalf("duplicate id: got %v, want ErrBrokerIDInUse", err)
	}
	t.Logf("duplicate refused after %v: %v", time.Since(start).Round(time.Millisecond), err)
	// Once the holder is gone, the id is free, with a larger epoch.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	waitSnap(t, b, "broker 1 gone", func(s *Snapshot) bool { return !s.Live(1) })
	ep2 := register(t, b, 1, "")
	if ep2 <= ep {
		t.Fatalf("new registration epoch %d, want > %d", ep2, ep)
	}
	if err := b.Deregister(ctxT(t, waitTimeout)); err != nil {
		t.Fatal(err)
	}
	waitSnap(t, b, "deregistered", func(s *Snapshot) bool { return !s.Live(1) })
}

func testBrokerLoss(t *testing.T, e env) {
	a, obs := e.open(t), e.open(t)
	ep := register(t, a, 7, "")
	register(t, obs, 8, "")
	_, sub := obs.Subscribe()
	defer sub.Close()
	_, asub := a.Subscribe()
	defer asub.Close()
	waitSnap(t, obs, "broker 7 seen", func(s *Snapshot) bool { return s.Live(7) })

	e.partition(t, a)
	for {
		ev := waitEvent(t, sub, EventBrokers)
		if !ev.Snapshot.Live(7) {
			break
		}
	}
	// The partitioned side, once it noticed, still reads its last
	// snapshot and cannot write.
	waitEvent(t, asub, EventDisconnected)
	if s := a.Snapshot(); s.Connected || !s.Live(7) {
		t.Fatalf("partitioned snapshot: connected %v, live(7) %v; want false, true", s.Connected, s.Live(7))
	}
	if _, err := a.CreateTopic(ctxT(t, waitTimeout), TopicSpec{Name: "x", Assignment: [][]int32{{7}}}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("write while partitioned: got %v, want ErrUnavailable", err)
	}

	e.heal(t, a)
	waitEvent(t, asub, EventSessionExpired)
	for {
		ev := waitEvent(t, sub, EventBrokers)
		if b, ok := ev.Snapshot.Broker(7); ok {
			if b.Epoch <= ep {
				t.Fatalf("re-registered with epoch %d, want > %d", b.Epoch, ep)
			}
			break
		}
	}
}

// testStatesAfterExpiry: a session that expired sees the partition states
// written while it was cut off, and later changes too.
func testStatesAfterExpiry(t *testing.T, e env) {
	a, b := e.open(t), e.open(t)
	register(t, a, 1, "")
	register(t, b, 2, "")
	createTopic(t, b, "exp", [][]int32{{1, 2}}, nil)
	waitSnap(t, a, "a sees the topic", func(s *Snapshot) bool { _, ok := s.Topic("exp"); return ok })
	_, asub := a.Subscribe()
	defer asub.Close()

	e.partition(t, a)
	write := func(leader, epoch int32) {
		t.Helper()
		ctx := ctxT(t, waitTimeout)
		st, v, err := b.PartitionState(ctx, "exp", 0)
		if err != nil {
			t.Fatal(err)
		}
		st.Leader, st.LeaderEpoch = leader, epoch
		if _, err := b.UpdatePartitionState(ctx, "exp", 0, st, v); err != nil {
			t.Fatal(err)
		}
	}
	write(2, 1)
	e.heal(t, a)
	waitEvent(t, asub, EventSessionExpired)
	leads := func(leader, epoch int32) func(s *Snapshot) bool {
		return func(s *Snapshot) bool {
			p, ok := s.Partition(TopicPartition{"exp", 0})
			return ok && p.State.Leader == leader && p.State.LeaderEpoch == epoch
		}
	}
	waitSnap(t, a, "the state written during the outage", leads(2, 1))
	write(1, 2)
	waitSnap(t, a, "the state written after the new session", leads(1, 2))
}

func testElectionFencing(t *testing.T, e env) {
	a, b := e.open(t), e.open(t)
	register(t, a, 1, "")
	register(t, b, 2, "")
	la, err := a.Campaign(ctxT(t, waitTimeout), 1)
	if err != nil {
		t.Fatal(err)
	}
	s := waitSnap(t, b, "controller 1", func(s *Snapshot) bool { return s.Controller.ID == 1 })
	if s.Controller.Epoch != la.Epoch() {
		t.Fatalf("controller epoch: got %d, want %d", s.Controller.Epoch, la.Epoch())
	}
	ti := createTopic(t, a, "fenced", [][]int32{{1, 2}}, nil)
	p := ti.Partitions[0]

	// While a is controller, b's campaign waits.
	if _, err := b.Campaign(ctxT(t, 300*time.Millisecond), 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second campaign: got %v, want context.DeadlineExceeded", err)
	}
	// a's session expires; b is elected with a larger epoch.
	e.partition(t, a)
	lb, err := b.Campaign(ctxT(t, waitTimeout), 2)
	if err != nil {
		t.Fatal(err)
	}
	if lb.Epoch() <= la.Epoch() {
		t.Fatalf("new epoch %d, want > %d", lb.Epoch(), la.Epoch())
	}
	e.heal(t, a)
	waitSnap(t, a, "a reconnected", func(s *Snapshot) bool { return s.Connected && s.Controller.ID == 2 })
	select {
	case <-la.Done():
	case <-time.After(waitTimeout):
		t.Fatal("deposed leadership not done")
	}
	// The deposed controller's conditional writes fail and change nothing.
	next := p.State.Clone()
	next.Leader, next.LeaderEpoch = 2, p.State.LeaderEpoch+1
	if _, err := la.UpdatePartitionStates(ctxT(t, waitTimeout), []StateUpdate{{TopicPartition{"fenced", 0}, next, p.Version}}); !errors.Is(err, ErrNotController) {
		t.Fatalf("deposed write: got %v, want ErrNotController", err)
	}
	if err := la.FinishTopicDeletion(ctxT(t, waitTimeout), "fenced"); !errors.Is(err, ErrNotController) {
		t.Fatalf("deposed finish deletion: got %v, want ErrNotController", err)
	}
	if st, v, err := b.PartitionState(ctxT(t, waitTimeout), "fenced", 0); err != nil || v != p.Version || st.Leader != 1 {
		t.Fatalf("state after deposed write: %+v v%d %v, want leader 1 v%d", st, v, err, p.Version)
	}
	// The new controller's writes work.
	res, err := lb.UpdatePartitionStates(ctxT(t, waitTimeout), []StateUpdate{{TopicPartition{"fenced", 0}, next, p.Version}})
	if err != nil || res[0].Err != nil || res[0].Version != p.Version+1 {
		t.Fatalf("controller write: %+v %v", res, err)
	}
	// Resign hands the role on.
	if err := lb.Resign(ctxT(t, waitTimeout)); err != nil {
		t.Fatal(err)
	}
	la2, err := a.Campaign(ctxT(t, waitTimeout), 1)
	if err != nil {
		t.Fatal(err)
	}
	if la2.Epoch() <= lb.Epoch() {
		t.Fatalf("epoch after resign: %d, want > %d", la2.Epoch(), lb.Epoch())
	}
	if _, err := lb.UpdatePartitionStates(ctxT(t, waitTimeout), []StateUpdate{{TopicPartition{"fenced", 0}, next, p.Version + 1}}); !errors.Is(err, ErrNotController) {
		t.Fatalf("write after resign: got %v, want ErrNotController", err)
	}
}

func testStateCAS(t *testing.T, e env) {
	a, b := e.open(t), e.open(t)
	register(t, a, 1, "")
	register(t, b, 2, "")
	// Both live in a's view, so both start in the ISR.
	waitSnap(t, a, "broker 2 seen", func(s *Snapshot) bool { return s.Live(2) })
	createTopic(t, a, "cas", [][]int32{{1, 2}, {2, 1}}, nil)
	ctx := ctxT(t, waitTimeout)
	st, v, err := a.PartitionState(ctx, "cas", 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Leader != 1 || !slices.Equal(st.ISR, []int32{1, 2}) || st.LeaderEpoch != 0 || v != 0 {
		t.Fatalf("initial state %+v v%d", st, v)
	}
	shrunk := st.Clone()
	shrunk.ISR = []int32{1}
	nv, err := a.UpdatePartitionState(ctx, "cas", 0, shrunk, v)
	if err != nil || nv != v+1 {
		t.Fatalf("CAS write: v%d %v, want v%d", nv, err, v+1)
	}
	if p, _ := a.Snapshot().Partition(TopicPartition{"cas", 0}); p.Version != nv || !slices.Equal(p.State.ISR, []int32{1}) {
		t.Fatalf("read-your-writes: %+v", p)
	}
	// b acts on the old version: conflict, nothing written.
	if _, err := b.UpdatePartitionState(ctx, "cas", 0, st, v); !errors.Is(err, ErrVersionConflict) {
		t.Fatalf("stale CAS: got %v, want ErrVersionConflict", err)
	}
	l, err := b.Campaign(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	res, err := l.UpdatePartitionStates(ctx, []StateUpdate{
		{TopicPartition{"cas", 0}, st, v},  // stale
		{TopicPartition{"cas", 1}, st, 0},  // current
		{TopicPartition{"cas", 9}, st, 0},  // no such partition
		{TopicPartition{"nope", 0}, st, 0}, // no such topic
	})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, ErrVersionConflict) || res[1].Err != nil || res[1].Version != 1 ||
		!errors.Is(res[2].Err, ErrUnknownPartition) || !errors.Is(res[3].Err, ErrUnknownTopic) {
		t.Fatalf("controller batch results: %+v", res)
	}
	waitSnap(t, a, "a sees cas-1 v1", func(s *Snapshot) bool {
		p, _ := s.Partition(TopicPartition{"cas", 1})
		return p.Version == 1 && p.State.Leader == 1
	})
	if _, _, err := a.PartitionState(ctx, "cas", 5); !errors.Is(err, ErrUnknownPartition) {
		t.Fatalf("state of missing partition: %v", err)
	}
}

func testTopics(t *testing.T, e env) {
	a, b := e.open(t), e.open(t)
	register(t, a, 1, "")
	register(t, b, 2, "")
	_, sub := b.Subscribe()
	defer sub.Close()
	ctx := ctxT(t, waitTimeout)
	ti := createTopic(t, a, "t1", [][]int32{{1, 2}, {2, 1}, {1, 3}}, map[string]string{"retention.ms": "1000"})
	if ti.ID == (TopicID{}) || len(ti.Partitions) != 3 {
		t.Fatalf("created %+v", ti)
	}
	// Broker 3 is not live: partition 2 starts with leader 1, ISR [1].
	if p := ti.Partitions[2]; p.State.Leader != 1 || !slices.Equal(p.State.ISR, []int32{1}) {
		t.Fatalf("partition 2 initial state %+v", p.State)
	}
	ev := waitEvent(t, sub, EventTopic)
	if ev.Topic != "t1" || ev.TopicID != ti.ID {
		t.Fatalf("event %+v", ev)
	}
	got, ok := ev.Snapshot.Topic("t1")
	if !ok || got.ID != ti.ID || got.Configs["retention.ms"] != "1000" || !slices.Equal(got.Partitions[1].Replicas, []int32{2, 1}) {
		t.Fatalf("b sees %+v", got)
	}
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "t1", Assignment: [][]int32{{1}}}); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("duplicate create: %v", err)
	}
	if _, err := b.CreateTopic(ctx, TopicSpec{Name: "bad", Assignment: [][]int32{{1, 1}}}); !errors.Is(err, ErrInvalidAssignment) {
		t.Fatalf("bad assignment: %v", err)
	}
	if err := b.AddPartitions(ctx, "t1", 2, [][]int32{{2, 1}}); !errors.Is(err, ErrInvalidPartitions) {
		t.Fatalf("add with wrong first: %v", err)
	}
	if err := b.AddPartitions(ctx, "t1", 3, [][]int32{{2, 1}, {1, 2}}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetTopicConfig(ctx, "t1", map[string]string{"cleanup.policy": "delete"}); err != nil {
		t.Fatal(err)
	}
	s := waitSnap(t, a, "a sees 5 partitions and new configs", func(s *Snapshot) bool {
		t, ok := s.Topic("t1")
		return ok && len(t.Partitions) == 5 && t.Configs["cleanup.policy"] == "delete" && len(t.Configs) == 1
	})
	t1, _ := s.Topic("t1")
	if p := t1.Partitions[3]; p.State.Leader != 2 || p.Version != 0 || t1.ID != ti.ID {
		t.Fatalf("added partition %+v", p)
	}
	if err := b.AddPartitions(ctx, "nope", 0, [][]int32{{1}}); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("add to missing topic: %v", err)
	}
	if err := b.SetTopicConfig(ctx, "nope", nil); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("config of missing topic: %v", err)
	}
	if err := a.DeleteTopic(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Snapshot().Topic("t1"); ok {
		t.Fatal("deleted topic still in own snapshot")
	}
	ev = waitEvent(t, sub, EventTopicDeleted)
	if ev.Topic != "t1" || ev.TopicID != ti.ID {
		t.Fatalf("delete event %+v", ev)
	}
	waitSnap(t, b, "deletion finished", func(s *Snapshot) bool {
		_, ok := s.Topic("t1")
		return !ok && len(s.PendingDeletion) == 0
	})
	if err := a.DeleteTopic(ctx, "t1"); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("second delete: %v", err)
	}
	// The name can be used again, with a new ID.
	ti2 := createTopic(t, b, "t1", [][]int32{{2}}, nil)
	if ti2.ID == ti.ID {
		t.Fatal("re-created topic kept the old ID")
	}
	waitSnap(t, a, "a sees the new t1", func(s *Snapshot) bool {
		t, ok := s.Topic("t1")
		return ok && t.ID == ti2.ID && len(t.Partitions) == 1 && t.Partitions[0].State.Leader == 2
	})
}

var errCrash = errors.New("simulated crash")

func testDeletionCrash(t *testing.T, e env) {
	a := e.open(t)
	register(t, a, 1, "")
	ti := createTopic(t, a, "doomed", [][]int32{{1}, {1}, {1}}, nil)
	e.setDeleteHook(a, func() error { return errCrash })
	if err := a.DeleteTopic(ctxT(t, waitTimeout), "doomed"); !errors.Is(err, errCrash) {
		t.Fatalf("delete: got %v, want the crash", err)
	}
	e.restart(t)

	b := e.open(t)
	register(t, b, 1, "")
	s := b.Snapshot()
	if _, ok := s.Topic("doomed"); ok || s.PendingDeletion["doomed"] != ti.ID {
		t.Fatalf("after crash: topic present %v, pending %v; want absent, pending with id %s", ok, s.PendingDeletion, ti.ID)
	}
	if _, err := b.CreateTopic(ctxT(t, waitTimeout), TopicSpec{Name: "doomed", Assignment: [][]int32{{1}}}); !errors.Is(err, ErrTopicExists) || !errors.Is(err, ErrTopicDeletionPending) {
		t.Fatalf("create during pending deletion: got %v, want ErrTopicExists and ErrTopicDeletionPending", err)
	}
	// The controller finishes the deletion.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- RunController(ctx, b, ControllerConfig{BrokerID: 1, Logger: testLogger(t)}) }()
	waitSnap(t, b, "deletion finished by the controller", func(s *Snapshot) bool { return len(s.PendingDeletion) == 0 })
	ti2 := createTopic(t, b, "doomed", [][]int32{{1}}, nil)
	if ti2.ID == ti.ID {
		t.Fatal("same id")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunController: %v", err)
	}
}
