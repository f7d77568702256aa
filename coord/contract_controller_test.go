package coord

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// startController runs RunController for c until the test ends and
// returns the failover reports it makes.
func startController(t *testing.T, c Coordinator, id int32, mod func(*ControllerConfig)) <-chan FailoverReport {
	t.Helper()
	reports := make(chan FailoverReport, 16)
	cfg := DefaultControllerConfig(id)
	cfg.Logger = testLogger(t).With("controller_of", id)
	cfg.RetryBackoff = 50 * time.Millisecond
	cfg.OnFailover = func(r FailoverReport) {
		select {
		case reports <- r:
		default:
		}
	}
	if mod != nil {
		mod(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- RunController(ctx, c, cfg) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, ErrClosed) {
				t.Errorf("RunController %d: %v", id, err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("RunController %d did not return", id)
		}
	})
	return reports
}

// cluster opens n sessions as brokers 1..n, each running a controller;
// broker 1 is made controller first.
func cluster(t *testing.T, e env, n int, mod func(*ControllerConfig)) ([]Coordinator, []<-chan FailoverReport) {
	t.Helper()
	cs := make([]Coordinator, n)
	reps := make([]<-chan FailoverReport, n)
	for i := range cs {
		cs[i] = e.open(t)
		register(t, cs[i], int32(i+1), "")
	}
	reps[0] = startController(t, cs[0], 1, mod)
	waitSnap(t, cs[0], 10*time.Second, "broker 1 controller", func(s *Snapshot) bool { return s.Controller.ID == 1 })
	for i := 1; i < n; i++ {
		reps[i] = startController(t, cs[i], int32(i+1), mod)
	}
	return cs, reps
}

func brokersOf(s *Snapshot) []BrokerInfo { return slices.Clone(s.Brokers) }

func leaders(s *Snapshot, topic string) []int32 {
	t, ok := s.Topic(topic)
	if !ok {
		return nil
	}
	out := make([]int32, len(t.Partitions))
	for i, p := range t.Partitions {
		out[i] = p.State.Leader
	}
	return out
}

func testControllerFailover(t *testing.T, e env) {
	cs, reps := cluster(t, e, 3, nil)
	obs := cs[0]
	waitSnap(t, obs, 5*time.Second, "3 brokers", func(s *Snapshot) bool { return len(s.Brokers) == 3 })
	asg, err := AssignReplicas(brokersOf(obs.Snapshot()), 3, 3, AssignOptions{StartIndex: 0})
	if err != nil {
		t.Fatal(err)
	}
	createTopic(t, obs, "ft", asg, nil)
	if got := leaders(obs.Snapshot(), "ft"); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("leaders %v, want [1 2 3]: one partition each", got)
	}

	// Broker 2 (not the controller) dies: its session expires. A
	// watcher notes when the new leader shows in the observer's cache.
	_, sub := obs.Subscribe()
	defer sub.Close()
	seen := make(chan time.Time, 1)
	go func() {
		for ev := range sub.Events() {
			if l := leaders(ev.Snapshot, "ft"); len(l) == 3 && l[1] != 2 && l[1] != NoLeader {
				seen <- time.Now()
				return
			}
		}
	}()
	start := time.Now()
	e.partition(t, cs[1])
	s := waitSnap(t, obs, 15*time.Second, "partition 1 failed over, broker 2 out of every ISR", func(s *Snapshot) bool {
		l := leaders(s, "ft")
		if len(l) != 3 || l[1] == 2 || l[1] == NoLeader {
			return false
		}
		ft, _ := s.Topic("ft")
		for _, p := range ft.Partitions {
			if slices.Contains(p.State.ISR, 2) {
				return false
			}
		}
		return true
	})
	var total time.Duration
	select {
	case at := <-seen:
		total = at.Sub(start)
	case <-time.After(5 * time.Second):
		t.Fatal("watcher did not see the failover")
	}
	var r FailoverReport
	select {
	case r = <-reps[0]:
	case <-time.After(5 * time.Second):
		t.Fatal("no failover report from the controller")
	}
	t.Logf("FAILOVER broker %d: %d new leaders, %d offline; %v from registration loss to new leaders written (controller), %v from cutting the broker off to the new leader seen (includes the session timeout)",
		r.Broker, r.Moved, r.Offline, r.Elapsed(), total)
	if r.Broker != 2 || r.Moved != 1 || r.Offline != 0 {
		t.Fatalf("report %+v, want broker 2, 1 moved", r)
	}
	ft, _ := s.Topic("ft")
	for i, p := range ft.Partitions {
		if slices.Contains(p.State.ISR, 2) {
			t.Fatalf("partition %d: ISR %v still holds the lost broker", i, p.State.ISR)
		}
		if !slices.Contains(p.State.ISR, p.State.Leader) {
			t.Fatalf("partition %d: leader %d not in ISR %v", i, p.State.Leader, p.State.ISR)
		}
	}
	p1 := ft.Partitions[1]
	if p1.State.LeaderEpoch != 1 || p1.State.Leader != p1.Replicas[1] {
		t.Fatalf("partition 1 state %+v (replicas %v): want the next replica in assignment order, epoch 1", p1.State, p1.Replicas)
	}
	if ft.Partitions[0].State.LeaderEpoch != 0 || ft.Partitions[0].State.Leader != 1 {
		t.Fatalf("partition 0 changed leader: %+v", ft.Partitions[0].State)
	}

	// Broker 2 returns; once the leader takes it back into the ISR (as
	// replication will when it catches up), it is preferred leader again.
	e.heal(t, cs[1])
	waitSnap(t, obs, 15*time.Second, "broker 2 back", func(s *Snapshot) bool { return s.Live(2) })
	ctx := ctxT(t, 10*time.Second)
	for {
		st, v, err := obs.PartitionState(ctx, "ft", 1)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(st.ISR, 2) {
			break
		}
		st.ISR = append(st.ISR, 2)
		if _, err := obs.UpdatePartitionState(ctx, "ft", 1, st, v); err != nil && !errors.Is(err, ErrVersionConflict) {
			t.Fatal(err)
		}
	}
	s = waitSnap(t, obs, 10*time.Second, "preferred leader 2 back on partition 1", func(s *Snapshot) bool {
		return slices.Equal(leaders(s, "ft"), []int32{1, 2, 3})
	})
	if p, _ := s.Partition(TopicPartition{"ft", 1}); p.State.LeaderEpoch != 2 {
		t.Fatalf("after preferred election: %+v, want epoch 2", p.State)
	}
}

func testControllerMoves(t *testing.T, e env) {
	cs, reps := cluster(t, e, 3, nil)
	obs := cs[2]
	waitSnap(t, obs, 5*time.Second, "3 brokers", func(s *Snapshot) bool { return len(s.Brokers) == 3 })
	asg, _ := AssignReplicas(brokersOf(obs.Snapshot()), 3, 2, AssignOptions{StartIndex: 0})
	createTopic(t, obs, "cm", asg, nil)
	epoch := obs.Snapshot().Controller.Epoch
	start := time.Now()
	e.partition(t, cs[0]) // the controller
	s := waitSnap(t, obs, 15*time.Second, "new controller and leaders", func(s *Snapshot) bool {
		l := leaders(s, "cm")
		return s.Controller.ID != NoLeader && s.Controller.ID != 1 && s.Controller.Epoch > epoch &&
			len(l) == 3 && !slices.Contains(l, 1) && !slices.Contains(l, NoLeader)
	})
	t.Logf("controller moved to %d (epoch %d -> %d); partitions of the lost controller led again %v after cutting it off",
		s.Controller.ID, epoch, s.Controller.Epoch, time.Since(start))
	var r FailoverReport
	select {
	case r = <-reps[s.Controller.ID-1]:
	case <-time.After(5 * time.Second):
		t.Fatal("no failover report")
	}
	t.Logf("FAILOVER of the controller's broker: %d new leaders in %v after the new controller's election", r.Moved, r.Elapsed())
	// The cluster keeps working.
	asg2, err := AssignReplicas(brokersOf(s), 2, 2, RandomStart)
	if err != nil {
		t.Fatal(err)
	}
	createTopic(t, obs, "after", asg2, nil)
	e.heal(t, cs[0])
	waitSnap(t, obs, 15*time.Second, "broker 1 back, not controller", func(s *Snapshot) bool {
		return s.Live(1) && s.Controller.ID != 1
	})
}

func testControlledShutdown(t *testing.T, e env) {
	cs, _ := cluster(t, e, 3, nil)
	obs := cs[0]
	waitSnap(t, obs, 5*time.Second, "3 brokers", func(s *Snapshot) bool { return len(s.Brokers) == 3 })
	asg, _ := AssignReplicas(brokersOf(obs.Snapshot()), 3, 3, AssignOptions{StartIndex: 0})
	createTopic(t, obs, "cs", asg, nil)
	solo := createTopic(t, obs, "solo", [][]int32{{2}}, nil) // nobody else can lead it
	_ = solo
	if _, err := cs[0].ControlledShutdown(ctxT(t, 5*time.Second), 2); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("shutdown for another broker's id: %v", err)
	}
	remaining, err := cs[1].ControlledShutdown(ctxT(t, 15*time.Second), 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := []TopicPartition{{"solo", 0}}; !slices.Equal(remaining, want) {
		t.Fatalf("remaining %v, want %v", remaining, want)
	}
	s := waitSnap(t, obs, 5*time.Second, "leadership moved off broker 2", func(s *Snapshot) bool {
		l := leaders(s, "cs")
		return len(l) == 3 && !slices.Contains(l, 2)
	})
	cst, _ := s.Topic("cs")
	for i, p := range cst.Partitions {
		if slices.Contains(p.State.ISR, 2) {
			t.Fatalf("partition %d: ISR %v still holds the shutting-down broker", i, p.State.ISR)
		}
	}
	// While its session lives, broker 2 is not made leader again.
	time.Sleep(300 * time.Millisecond)
	if l := leaders(obs.Snapshot(), "cs"); slices.Contains(l, 2) {
		t.Fatalf("broker 2 leads again during its shutdown: %v", l)
	}
	if err := cs[1].Close(); err != nil {
		t.Fatal(err)
	}
	// The last broker standing: nothing can move, and it is told so.
	if err := cs[2].Close(); err != nil {
		t.Fatal(err)
	}
	waitSnap(t, obs, 10*time.Second, "broker 1 alone", func(s *Snapshot) bool { return len(s.Brokers) == 1 })
	remaining, err = cs[0].ControlledShutdown(ctxT(t, 10*time.Second), 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := []TopicPartition{{"cs", 0}, {"cs", 1}, {"cs", 2}}; !slices.Equal(remaining, want) {
		t.Fatalf("last broker: remaining %v, want %v", remaining, want)
	}
}

func testPreferredOnDemand(t *testing.T, e env) {
	cs, _ := cluster(t, e, 2, func(c *ControllerConfig) { c.AutoLeaderRebalance = false })
	a := cs[0]
	waitSnap(t, a, 5*time.Second, "2 brokers", func(s *Snapshot) bool { return len(s.Brokers) == 2 })
	createTopic(t, a, "pe", [][]int32{{1, 2}, {2, 1}}, nil)
	ctx := ctxT(t, 15*time.Second)
	// A former election left broker 2 leading partition 0.
	st, v, err := a.PartitionState(ctx, "pe", 0)
	if err != nil {
		t.Fatal(err)
	}
	st.Leader, st.LeaderEpoch = 2, st.LeaderEpoch+1
	if _, err := a.UpdatePartitionState(ctx, "pe", 0, st, v); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if l := leaders(a.Snapshot(), "pe"); l[0] != 2 {
		t.Fatalf("auto rebalance is off, yet partition 0 moved: %v", l)
	}
	res, err := cs[1].ElectPreferredLeaders(ctx, []TopicPartition{{"pe", 0}, {"pe", 1}, {"pe", 7}, {"nope", 0}})
	if err != nil {
		t.Fatal(err)
	}
	want := []error{nil, ErrElectionNotNeeded, ErrUnknownPartition, ErrUnknownTopic}
	byTP := map[TopicPartition]error{}
	for _, r := range res {
		byTP[r.TopicPartition] = r.Err
	}
	for i, tp := range []TopicPartition{{"pe", 0}, {"pe", 1}, {"pe", 7}, {"nope", 0}} {
		got, ok := byTP[tp]
		if !ok || !errors.Is(got, want[i]) || (want[i] == nil && got != nil) {
			t.Fatalf("#%d %v: got %v, want %v", i, tp, got, want[i])
		}
	}
	s := waitSnap(t, a, 5*time.Second, "partition 0 led by 1", func(s *Snapshot) bool { return leaders(s, "pe")[0] == 1 })
	if p, _ := s.Partition(TopicPartition{"pe", 0}); p.State.LeaderEpoch != 2 {
		t.Fatalf("state %+v, want epoch 2", p.State)
	}
	// Preferred replica out of the ISR: not available.
	st, v, _ = a.PartitionState(ctx, "pe", 1)
	st.Leader, st.LeaderEpoch, st.ISR = 1, st.LeaderEpoch+1, []int32{1}
	if _, err := a.UpdatePartitionState(ctx, "pe", 1, st, v); err != nil {
		t.Fatal(err)
	}
	res, err = a.ElectPreferredLeaders(ctx, nil) // all partitions
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || !errors.Is(res[0].Err, ErrElectionNotNeeded) || !errors.Is(res[1].Err, ErrPreferredLeaderNotAvailable) {
		t.Fatalf("results %+v", res)
	}
}

func testUncleanElection(t *testing.T, e env) {
	cs, _ := cluster(t, e, 2, nil)
	obs := cs[1]
	waitSnap(t, obs, 5*time.Second, "2 brokers", func(s *Snapshot) bool { return len(s.Brokers) == 2 })
	createTopic(t, obs, "dirty", [][]int32{{1, 2}}, map[string]string{UncleanConfig: "true"})
	createTopic(t, obs, "clean", [][]int32{{1, 2}}, nil)
	ctx := ctxT(t, 20*time.Second)
	for _, name := range []string{"dirty", "clean"} {
		st, v, err := obs.PartitionState(ctx, name, 0)
		if err != nil {
			t.Fatal(err)
		}
		st.ISR = []int32{1} // the leader shrank the ISR: 2 fell behind
		if _, err := obs.UpdatePartitionState(ctx, name, 0, st, v); err != nil {
			t.Fatal(err)
		}
	}
	e.partition(t, cs[0])
	s := waitSnap(t, obs, 15*time.Second, "dirty led by 2, clean offline", func(s *Snapshot) bool {
		return slices.Equal(leaders(s, "dirty"), []int32{2}) && slices.Equal(leaders(s, "clean"), []int32{NoLeader})
	})
	d, _ := s.Partition(TopicPartition{"dirty", 0})
	c, _ := s.Partition(TopicPartition{"clean", 0})
	if !slices.Equal(d.State.ISR, []int32{2}) || d.State.LeaderEpoch != 1 {
		t.Fatalf("unclean: %+v, want ISR [2] epoch 1", d.State)
	}
	if !slices.Equal(c.State.ISR, []int32{1}) || c.State.LeaderEpoch != 1 {
		t.Fatalf("offline: %+v, want ISR [1] kept, epoch 1", c.State)
	}
	// The last in-sync replica returns and leads again.
	e.heal(t, cs[0])
	waitSnap(t, obs, 15*time.Second, "clean led by 1 again", func(s *Snapshot) bool {
		return slices.Equal(leaders(s, "clean"), []int32{1})
	})
}
