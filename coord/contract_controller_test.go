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
		case <-time.After(waitTimeout):
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
	waitSnap(t, cs[0], "broker 1 controller", func(s *Snapshot) bool { return s.Controller.ID == 1 })
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

// rejoinISR adds broker id to tp's ISR through c, as the partition
// leader does once a follower caught up.
func rejoinISR(t *testing.T, c Coordinator, tp TopicPartition, id int32) {
	t.Helper()
	ctx := ctxT(t, waitTimeout)
	for {
		st, v, err := c.PartitionState(ctx, tp.Topic, tp.Partition)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(st.ISR, id) {
			return
		}
		st.ISR = append(st.ISR, id)
		if _, err := c.UpdatePartitionState(ctx, tp.Topic, tp.Partition, st, v); err != nil && !errors.Is(err, ErrVersionConflict) {
			t.Fatal(err)
		}
	}
}

func testControllerFailover(t *testing.T, e env) {
	cs, reps := cluster(t, e, 3, nil)
	obs := cs[0]
	waitSnap(t, obs, "3 brokers", func(s *Snapshot) bool { return len(s.Brokers) == 3 })
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
	s := waitSnap(t, obs, "partition 1 failed over, broker 2 out of every ISR", func(s *Snapshot) bool {
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
	case <-time.After(waitTimeout):
		t.Fatal("watcher did not see the failover")
	}
	var r FailoverReport
	select {
	case r = <-reps[0]:
	case <-time.After(waitTimeout):
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
	waitSnap(t, obs, "broker 2 back", func(s *Snapshot) bool { return s.Live(2) })
	rejoinISR(t, obs, TopicPartition{"ft", 1}, 2)
	s = waitSnap(t, obs, "preferred leader 2 back on partition 1", func(s *Snapshot) bool {
		return slices.Equal(leaders(s, "ft"), []int32{1, 2, 3})
	})
	if p, _ := s.Partition(TopicPartition{"ft", 1}); p.State.LeaderEpoch != 2 {
		t.Fatalf("after preferred election: %+v, want epoch 2", p.State)
	}
}

func testControllerMoves(t *testing.T, e env) {
	cs, reps := cluster(t, e, 3, nil)
	obs := cs[2]
	waitSnap(t, obs, "3 brokers", func(s *Snapshot) bool { return len(s.Brokers) == 3 })
	asg, _ := AssignReplicas(brokersOf(obs.Snapshot()), 3, 2, AssignOptions{StartIndex: 0})
	createTopic(t, obs, "cm", asg, nil)
	epoch := obs.Snapshot().Controller.Epoch
	start := time.Now()
	e.partition(t, cs[0]) // the controller
	s := waitSnap(t, obs, "new controller and leaders", func(s *Snapshot) bool {
		l := leaders(s, "cm")
		return s.Controller.ID != NoLeader && s.Controller.ID != 1 && s.Controller.Epoch > epoch &&
			len(l) == 3 && !slices.Contains(l, 1) && !slices.Contains(l, NoLeader)
	})
	t.Logf("controller moved to %d (epoch %d -> %d); partitions of the lost controller led again %v after cutting it off",
		s.Controller.ID, epoch, s.Controller.Epoch, time.Since(start))
	var r FailoverReport
	select {
	case r = <-reps[s.Controller.ID-1]:
	case <-time.After(waitTimeout):
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
	waitSnap(t, obs, "broker 1 back, not controller", func(s *Snapshot) bool {
		return s.Live(1) && s.Controller.ID != 1
	})
}

func testControlledShutdown(t *testing.T, e env) {
	cs, _ := cluster(t, e, 3, nil)
	obs := cs[0]
	waitSnap(t, obs, "3 brokers", func(s *Snapshot) bool { return len(s.Brokers) == 3 })
	asg, _ := AssignReplicas(brokersOf(obs.Snapshot()), 3, 3, AssignOptions{StartIndex: 0})
	createTopic(t, obs, "cs", asg, nil)
	solo := createTopic(t, obs, "solo", [][]int32{{2}}, nil) // nobody else can lead it
	_ = solo
	if _, err := cs[0].ControlledShutdown(ctxT(t, waitTimeout), 2); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("shutdown for another broker's id: %v", err)
	}
	remaining, err := cs[1].ControlledShutdown(ctxT(t, waitTimeout), 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := []TopicPartition{{"solo", 0}}; !slices.Equal(remaining, want) {
		t.Fatalf("remaining %v, want %v", remaining, want)
	}
	s := waitSnap(t, obs, "leadership moved off broker 2", func(s *Snapshot) bool {
		l := leaders(s, "cs")
		return len(l) == 3 && !slices.Contains(l, 2)
	})
	cst, _ := s.Topic("cs")
	for i, p := range cst.Partitions {
		if slices.Contains(p.State.ISR, 2) {
			t.Fatalf("partition %d: ISR %v still holds the shutting-down broker", i, p.State.ISR)
		}
	}
	// While its session lives, broker 2 is not made leader again, not
	// even where it is the preferred replica and back in the ISR (as
	// replication puts it): the controller takes it out of the ISR
	// instead. Waiting for that decision, not for some time, shows that
	// the controller has judged the case.
	// Its leader and leader epoch stay: broker 2 did not lead in between.
	var pref TopicPartition
	var before PartitionState
	for i, p := range cst.Partitions {
		if p.Replicas[0] == 2 {
			pref, before = TopicPartition{"cs", int32(i)}, p.State
		}
	}
	if pref.Topic == "" {
		t.Fatalf("no partition of cs prefers broker 2: %+v", cst.Partitions)
	}
	rejoinISR(t, obs, pref, 2)
	s = waitSnap(t, obs, "broker 2 out of the ISR of "+pref.String()+" again", func(s *Snapshot) bool {
		p, ok := s.Partition(pref)
		return ok && !slices.Contains(p.State.ISR, 2)
	})
	if l := leaders(s, "cs"); slices.Contains(l, 2) {
		t.Fatalf("broker 2 leads again during its shutdown: %v", l)
	}
	if p, _ := s.Partition(pref); p.State.Leader != before.Leader || p.State.LeaderEpoch != before.LeaderEpoch {
		t.Fatalf("%s: state %+v, was %+v: broker 2 led it during its shutdown", pref, p.State, before)
	}
	if err := cs[1].Close(); err != nil {
		t.Fatal(err)
	}
	// The last broker standing: nothing can move, and it is told so.
	if err := cs[2].Close(); err != nil {
		t.Fatal(err)
	}
	waitSnap(t, obs, "broker 1 alone", func(s *Snapshot) bool { return len(s.Brokers) == 1 })
	remaining, err = cs[0].ControlledShutdown(ctxT(t, waitTimeout), 1)
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
	waitSnap(t, a, "2 brokers", func(s *Snapshot) bool { return len(s.Brokers) == 2 })
	createTopic(t, a, "pe", [][]int32{{1, 2}, {2, 1}}, nil)
	ctx := ctxT(t, waitTimeout)
	// A former election left broker 2 leading partition 0.
	st, v, err := a.PartitionState(ctx, "pe", 0)
	if err != nil {
		t.Fatal(err)
	}
	st.Leader, st.LeaderEpoch = 2, st.LeaderEpoch+1
	if _, err := a.UpdatePartitionState(ctx, "pe", 0, st, v); err != nil {
		t.Fatal(err)
	}
	// Auto rebalance is off: the controller leaves partition 0 to broker
	// 2. To know that it has judged the change, not merely that some
	// time passed, give it work after it: partition 1 without a leader.
	// Each controller pass plans every partition on a snapshot at least
	// as new as the change that woke it, so once partition 1 has a
	// leader again, a pass has seen partition 0 led by 2.
	st1, v1, err := a.PartitionState(ctx, "pe", 1)
	if err != nil {
		t.Fatal(err)
	}
	st1.Leader, st1.LeaderEpoch = NoLeader, st1.LeaderEpoch+1
	if _, err := a.UpdatePartitionState(ctx, "pe", 1, st1, v1); err != nil {
		t.Fatal(err)
	}
	waitSnap(t, a, "partition 1 led again", func(s *Snapshot) bool {
		p, ok := s.Partition(TopicPartition{"pe", 1})
		return ok && p.State.Leader != NoLeader
	})
	if st, _, err := a.PartitionState(ctx, "pe", 0); err != nil || st.Leader != 2 {
		t.Fatalf("auto rebalance is off, yet partition 0 moved: %+v %v", st, err)
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
	s := waitSnap(t, a, "partition 0 led by 1", func(s *Snapshot) bool { return leaders(s, "pe")[0] == 1 })
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
	waitSnap(t, obs, "2 brokers", func(s *Snapshot) bool { return len(s.Brokers) == 2 })
	createTopic(t, obs, "dirty", [][]int32{{1, 2}}, map[string]string{UncleanConfig: "true"})
	createTopic(t, obs, "clean", [][]int32{{1, 2}}, nil)
	ctx := ctxT(t, waitTimeout)
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
	s := waitSnap(t, obs, "dirty led by 2, clean offline", func(s *Snapshot) bool {
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
	waitSnap(t, obs, "clean led by 1 again", func(s *Snapshot) bool {
		return slices.Equal(leaders(s, "clean"), []int32{1})
	})
}

// testOfflineReplicas: a broker reports some of its replicas offline
// (their log directory failed). The controller moves those partitions'
// leadership to another in-sync replica and takes the broker out of
// their ISRs; its other replicas keep leading; a partition with no other
// in-sync replica goes offline. While the session lives, the replicas
// stay out; a new session (a restart) brings them back.
func testOfflineReplicas(t *testing.T, e env) {
	cs, _ := cluster(t, e, 3, nil)
	obs := cs[0]
	waitSnap(t, obs, "3 brokers", func(s *Snapshot) bool { return len(s.Brokers) == 3 })
	asg, _ := AssignReplicas(brokersOf(obs.Snapshot()), 3, 3, AssignOptions{StartIndex: 0})
	createTopic(t, obs, "od", asg, nil) // broker 2 leads od-1
	createTopic(t, obs, "od2", asg, nil)
	createTopic(t, obs, "solo", [][]int32{{2}}, nil)
	if got := leaders(obs.Snapshot(), "od"); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("leaders %v, want [1 2 3]", got)
	}
	bad := []TopicPartition{{"od", 0}, {"od", 1}, {"solo", 0}}
	if _, err := cs[0].ReportOfflineReplicas(ctxT(t, waitTimeout), 2, bad); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("report for another broker's id: %v", err)
	}
	remaining, err := cs[1].ReportOfflineReplicas(ctxT(t, waitTimeout), 2, bad)
	if err != nil {
		t.Fatal(err)
	}
	if len(remaining) != 0 {
		t.Fatalf("remaining %v, want none: an offline replica leads nothing", remaining)
	}
	s := waitSnap(t, obs, "broker 2's offline replicas out", func(s *Snapshot) bool {
		od, _ := s.Partition(TopicPartition{"od", 1})
		so, _ := s.Partition(TopicPartition{"solo", 0})
		return od.State.Leader != 2 && od.State.Leader != NoLeader && so.State.Leader == NoLeader
	})
	for _, tp := range bad[:2] {
		if p, _ := s.Partition(tp); slices.Contains(p.State.ISR, 2) {
			t.Errorf("%s: ISR %v still holds the offline replica", tp, p.State.ISR)
		}
	}
	// Broker 2's replicas in a healthy directory are untouched.
	if p, _ := s.Partition(TopicPartition{"od2", 1}); p.State.Leader != 2 || !slices.Contains(p.State.ISR, 2) {
		t.Errorf("od2-1: %+v, want broker 2 still leading", p.State)
	}
	if p, _ := s.Partition(TopicPartition{"od", 2}); !slices.Contains(p.State.ISR, 2) {
		t.Errorf("od-2: ISR %v lost broker 2, whose replica is fine", p.State.ISR)
	}
	// Replication putting it back is undone while the report lives.
	tp := TopicPartition{"od", 1}
	rejoinISR(t, obs, tp, 2)
	waitSnap(t, obs, "broker 2 out of od-1's ISR again", func(s *Snapshot) bool {
		p, _ := s.Partition(tp)
		return !slices.Contains(p.State.ISR, 2) && p.State.Leader != 2
	})
	// A second report adds up with the first.
	if _, err := cs[1].ReportOfflineReplicas(ctxT(t, waitTimeout), 2, []TopicPartition{{"od2", 1}}); err != nil {
		t.Fatal(err)
	}
	s = waitSnap(t, obs, "od2-1 moved off broker 2", func(s *Snapshot) bool {
		p, _ := s.Partition(TopicPartition{"od2", 1})
		return p.State.Leader != 2 && p.State.Leader != NoLeader
	})
	if p, _ := s.Partition(tp); p.State.Leader == 2 {
		t.Errorf("od-1 led by broker 2 again after the second report")
	}
}
