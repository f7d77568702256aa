package coord

import (
	"errors"
	"slices"
	"testing"
)

// reassign runs AlterPartitionReassignments and fails on any error.
func reassign(t *testing.T, c Coordinator, changes ...ReassignmentChange) {
	t.Helper()
	for i, err := range c.AlterPartitionReassignments(ctxT(t, waitTimeout), changes) {
		if err != nil {
			t.Fatalf("reassignment %d (%v -> %v): %v", i, changes[i].TopicPartition, changes[i].Target, err)
		}
	}
}

// partitionOf returns the partition tp of s (the zero value if absent).
func partitionOf(s *Snapshot, tp TopicPartition) PartitionInfo {
	p, _ := s.Partition(tp)
	return p
}

// reassigned says the partition's assignment is replicas, with no
// reassignment in progress, and its ISR holds exactly those replicas and
// its leader one of them.
func reassigned(tp TopicPartition, replicas []int32) func(s *Snapshot) bool {
	return func(s *Snapshot) bool {
		p := partitionOf(s, tp)
		isr := slices.Sorted(slices.Values(p.State.ISR))
		want := slices.Sorted(slices.Values(replicas))
		return !p.Reassigning() && slices.Equal(p.Replicas, replicas) && slices.Equal(isr, want) &&
			slices.Contains(replicas, p.State.Leader)
	}
}

// testReassignment moves a partition from [1,2] to [2,3]: the full set
// while broker 3 catches up, then the target, with leadership moved off
// broker 1.
func testReassignment(t *testing.T, e env) {
	cs, _ := cluster(t, e, 3, nil)
	c := cs[1]
	waitSnap(t, c, "3 brokers", func(s *Snapshot) bool { return len(s.Brokers) == 3 })
	createTopic(t, c, "mv", [][]int32{{1, 2}, {1, 2}}, nil)
	tp := TopicPartition{"mv", 0}
	before := partitionOf(c.Snapshot(), tp)
	if before.State.Leader != 1 {
		t.Fatalf("leader %d, want 1", before.State.Leader)
	}

	reassign(t, c, ReassignmentChange{TopicPartition: tp, Target: []int32{2, 3}})
	s := c.Snapshot() // read-your-writes
	p := partitionOf(s, tp)
	if !slices.Equal(p.Replicas, []int32{2, 3, 1}) || !slices.Equal(p.Adding, []int32{3}) || !slices.Equal(p.Removing, []int32{1}) {
		t.Fatalf("during: replicas %v adding %v removing %v, want [2 3 1] [3] [1]", p.Replicas, p.Adding, p.Removing)
	}
	if !slices.Equal(p.TargetReplicas(), []int32{2, 3}) || !slices.Equal(p.OriginalReplicas(), []int32{2, 1}) {
		t.Fatalf("target %v original %v", p.TargetReplicas(), p.OriginalReplicas())
	}
	if q := partitionOf(s, TopicPartition{"mv", 1}); q.Reassigning() || !slices.Equal(q.Replicas, []int32{1, 2}) {
		t.Fatalf("partition 1 changed: %+v", q)
	}
	// Another session sees it, and it stays pending while 3 is not in
	// the ISR.
	waitSnap(t, cs[2], "reassignment seen", func(s *Snapshot) bool { return partitionOf(s, tp).Reassigning() })
	if p := partitionOf(c.Snapshot(), tp); !p.Reassigning() {
		t.Fatalf("completed without broker 3 in the ISR: %+v", p)
	}

	rejoinISR(t, c, tp, 3) // broker 3 caught up
	s = waitSnap(t, c, "reassignment complete", reassigned(tp, []int32{2, 3}))
	p = partitionOf(s, tp)
	if p.State.Leader != 2 || p.State.LeaderEpoch <= before.State.LeaderEpoch {
		t.Fatalf("leader %d epoch %d, want 2 at an epoch above %d", p.State.Leader, p.State.LeaderEpoch, before.State.LeaderEpoch)
	}
}

// testReassignmentRefused checks what AlterPartitionReassignments
// refuses, and that a refused change in a request does not stop the
// others.
func testReassignmentRefused(t *testing.T, e env) {
	c := e.open(t)
	register(t, c, 1, "")
	register(t, e.open(t), 2, "")
	createTopic(t, c, "rf", [][]int32{{1}}, nil)
	tp := TopicPartition{"rf", 0}
	cases := []struct {
		ch   ReassignmentChange
		want error
	}{
		{ReassignmentChange{TopicPartition: TopicPartition{"nope", 0}, Target: []int32{1}}, ErrUnknownTopic},
		{ReassignmentChange{TopicPartition: TopicPartition{"rf", 1}, Target: []int32{1}}, ErrUnknownPartition},
		{ReassignmentChange{TopicPartition: TopicPartition{"rf", -1}, Target: []int32{1}}, ErrUnknownPartition},
		{ReassignmentChange{TopicPartition: tp, Target: []int32{}}, ErrInvalidAssignment},
		{ReassignmentChange{TopicPartition: tp, Target: []int32{1, 1}}, ErrInvalidAssignment},
		{ReassignmentChange{TopicPartition: tp, Target: []int32{1, -2}}, ErrInvalidAssignment},
		{ReassignmentChange{TopicPartition: tp, Target: []int32{1, 9}}, ErrInvalidAssignment}, // 9 is not live
		{ReassignmentChange{TopicPartition: tp, Target: nil}, ErrNoReassignmentInProgress},
	}
	for i, tc := range cases {
		errs := c.AlterPartitionReassignments(ctxT(t, waitTimeout), []ReassignmentChange{tc.ch})
		if len(errs) != 1 || !errors.Is(errs[0], tc.want) {
			t.Errorf("#%d: got %v, want %v", i, errs, tc.want)
		}
	}
	if p := partitionOf(c.Snapshot(), tp); p.Reassigning() || !slices.Equal(p.Replicas, []int32{1}) {
		t.Fatalf("a refused change was stored: %+v", p)
	}
	// One good change among bad ones is stored.
	errs := c.AlterPartitionReassignments(ctxT(t, waitTimeout), []ReassignmentChange{
		{TopicPartition: tp, Target: []int32{1, 1}}, {TopicPartition: tp, Target: []int32{2}}, {TopicPartition: TopicPartition{"rf", 5}, Target: []int32{1}},
	})
	if !errors.Is(errs[0], ErrInvalidAssignment) || errs[1] != nil || !errors.Is(errs[2], ErrUnknownPartition) {
		t.Fatalf("mixed request: %v", errs)
	}
	if p := partitionOf(c.Snapshot(), tp); !slices.Equal(p.Replicas, []int32{2, 1}) || !slices.Equal(p.Adding, []int32{2}) {
		t.Fatalf("mixed request stored %+v", p)
	}
	// Reassigning to a broker already in the set needs it live only if it is added.
	reassign(t, c, ReassignmentChange{TopicPartition: tp, Target: []int32{1}})
	if p := partitionOf(c.Snapshot(), tp); p.Reassigning() || !slices.Equal(p.Replicas, []int32{1}) {
		t.Fatalf("back to the original: %+v", p)
	}
}

// testReassignmentCancel cancels a reassignment whose first new replica
// has joined the ISR (the second, never caught up, keeps it pending): the
// original replicas come back and the ISR loses the replica that was
// being added, leadership included.
func testReassignmentCancel(t *testing.T, e env) {
	cs, _ := cluster(t, e, 4, nil)
	c := cs[2]
	waitSnap(t, c, "4 brokers", func(s *Snapshot) bool { return len(s.Brokers) == 4 })
	createTopic(t, c, "cx", [][]int32{{1, 2}}, nil)
	tp := TopicPartition{"cx", 0}
	reassign(t, c, ReassignmentChange{TopicPartition: tp, Target: []int32{3, 4}})
	if p := partitionOf(c.Snapshot(), tp); !slices.Equal(p.Replicas, []int32{3, 4, 1, 2}) || !slices.Equal(p.Removing, []int32{1, 2}) {
		t.Fatalf("during: %+v", p)
	}
	rejoinISR(t, c, tp, 3)
	// Broker 3, the new preferred replica, takes leadership (auto leader
	// rebalance) while broker 4 is still missing from the ISR.
	waitSnap(t, c, "3 leads", func(s *Snapshot) bool { return partitionOf(s, tp).State.Leader == 3 })
	if p := partitionOf(c.Snapshot(), tp); !p.Reassigning() {
		t.Fatalf("completed without broker 4: %+v", p)
	}
	reassign(t, c, ReassignmentChange{TopicPartition: tp, Target: nil})
	if p := partitionOf(c.Snapshot(), tp); p.Reassigning() || !slices.Equal(p.Replicas, []int32{1, 2}) {
		t.Fatalf("after cancel: %+v", p)
	}
	waitSnap(t, c, "cancelled: back to [1 2], 3 out of the ISR and not leading", reassigned(tp, []int32{1, 2}))
	errs := c.AlterPartitionReassignments(ctxT(t, waitTimeout), []ReassignmentChange{{TopicPartition: tp, Target: nil}})
	if !errors.Is(errs[0], ErrNoReassignmentInProgress) {
		t.Fatalf("second cancel: %v", errs)
	}
}

// testReassignmentFailoverRestart: a reassignment pending when the
// controller dies is completed by the next; one pending when every
// broker stops survives the restart and completes after it.
func testReassignmentFailoverRestart(t *testing.T, e env) {
	cs, _ := cluster(t, e, 3, nil)
	c := cs[1]
	waitSnap(t, c, "3 brokers", func(s *Snapshot) bool { return len(s.Brokers) == 3 })
	createTopic(t, c, "fo", [][]int32{{1, 2}, {2, 3}}, nil)
	tp0, tp1 := TopicPartition{"fo", 0}, TopicPartition{"fo", 1}
	reassign(t, c, ReassignmentChange{TopicPartition: tp0, Target: []int32{2, 3}})

	// The controller (broker 1) dies before broker 3 catches up.
	e.partition(t, cs[0])
	waitSnap(t, c, "a new controller", func(s *Snapshot) bool { return s.Controller.ID == 2 || s.Controller.ID == 3 })
	if p := partitionOf(c.Snapshot(), tp0); !p.Reassigning() {
		t.Fatalf("reassignment lost in the failover: %+v", p)
	}
	rejoinISR(t, c, tp0, 3)
	waitSnap(t, c, "completed by the new controller", reassigned(tp0, []int32{2, 3}))

	// A full restart in the middle of another reassignment.
	e.heal(t, cs[0])
	waitSnap(t, c, "broker 1 back", func(s *Snapshot) bool { return s.Live(1) })
	reassign(t, c, ReassignmentChange{TopicPartition: tp1, Target: []int32{3, 1}})
	e.restart(t)
	ns := make([]Coordinator, 3)
	for i := range ns {
		ns[i] = e.open(t)
		register(t, ns[i], int32(i+1), "")
	}
	p := partitionOf(ns[0].Snapshot(), tp1)
	if !slices.Equal(p.Replicas, []int32{3, 1, 2}) || !slices.Equal(p.Adding, []int32{1}) || !slices.Equal(p.Removing, []int32{2}) {
		t.Fatalf("after restart: %+v, want replicas [3 1 2] adding [1] removing [2]", p)
	}
	for i, n := range ns {
		startController(t, n, int32(i+1), nil)
	}
	rejoinISR(t, ns[0], tp1, 1)
	waitSnap(t, ns[0], "completed after the restart", reassigned(tp1, []int32{3, 1}))
}

// testReassignmentGrow raises a partition's replication factor: the
// replicas do not change when it completes, only the adding set goes,
// and every session sees that.
func testReassignmentGrow(t *testing.T, e env) {
	cs, _ := cluster(t, e, 2, nil)
	c := cs[1]
	waitSnap(t, c, "2 brokers", func(s *Snapshot) bool { return len(s.Brokers) == 2 })
	createTopic(t, c, "gr", [][]int32{{1}}, nil)
	tp := TopicPartition{"gr", 0}
	reassign(t, c, ReassignmentChange{TopicPartition: tp, Target: []int32{1, 2}})
	rejoinISR(t, c, tp, 2)
	for _, s := range cs {
		waitSnap(t, s, "grown to [1 2]", reassigned(tp, []int32{1, 2}))
	}
}

// testReassignmentKeepsISR: a change that would take every in-sync
// replica out of the assignment is refused (Kafka refuses such a cancel
// without unclean leader election): here the replica being added is the
// only one in sync, so cancelling, or retargeting away from it, is
// INVALID_REPLICA_ASSIGNMENT until an original replica is back in the
// ISR, or the change allows an unclean election.
func testReassignmentKeepsISR(t *testing.T, e env) {
	cs, _ := cluster(t, e, 4, nil)
	c := cs[2]
	waitSnap(t, c, "4 brokers", func(s *Snapshot) bool { return len(s.Brokers) == 4 })
	createTopic(t, c, "ki", [][]int32{{1, 2}}, nil)
	tp := TopicPartition{"ki", 0}
	reassign(t, c, ReassignmentChange{TopicPartition: tp, Target: []int32{3, 4}})
	rejoinISR(t, c, tp, 3)
	waitSnap(t, c, "3 leads", func(s *Snapshot) bool { return partitionOf(s, tp).State.Leader == 3 })
	// Brokers 1 and 2 fall behind: only 3, being added, is in sync.
	ctx := ctxT(t, waitTimeout)
	for {
		st, v, err := c.PartitionState(ctx, tp.Topic, tp.Partition)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(st.ISR, []int32{3}) {
			break
		}
		st.ISR = []int32{3}
		if _, err := c.UpdatePartitionState(ctx, tp.Topic, tp.Partition, st, v); err != nil && !errors.Is(err, ErrVersionConflict) {
			t.Fatal(err)
		}
	}
	waitSnap(t, c, "ISR [3]", func(s *Snapshot) bool { return slices.Equal(partitionOf(s, tp).State.ISR, []int32{3}) })
	for _, ch := range []ReassignmentChange{
		{TopicPartition: tp},                        // cancel: back to [1 2]
		{TopicPartition: tp, Target: []int32{4, 1}}, // drops 3
		{TopicPartition: tp, Target: []int32{1, 2}}, // the original, as a target
	} {
		errs := c.AlterPartitionReassignments(ctxT(t, waitTimeout), []ReassignmentChange{ch})
		if !errors.Is(errs[0], ErrInvalidAssignment) {
			t.Fatalf("change to %v with only 3 in sync: %v, want ErrInvalidAssignment", ch.Target, errs[0])
		}
	}
	if p := partitionOf(c.Snapshot(), tp); !slices.Equal(p.Replicas, []int32{3, 4, 1, 2}) || !slices.Equal(p.Adding, []int32{3, 4}) {
		t.Fatalf("a refused change was stored: %+v", p)
	}
	// Broker 1 catches up again: now the cancel keeps an in-sync replica.
	rejoinISR(t, c, tp, 1)
	waitSnap(t, c, "1 back in the ISR", func(s *Snapshot) bool { return slices.Contains(partitionOf(s, tp).State.ISR, int32(1)) })
	reassign(t, c, ReassignmentChange{TopicPartition: tp})
	waitSnap(t, c, "cancelled: [1 2], led by 1", func(s *Snapshot) bool {
		p := partitionOf(s, tp)
		return !p.Reassigning() && slices.Equal(p.Replicas, []int32{1, 2}) && p.State.Leader == 1 && !slices.Contains(p.State.ISR, int32(3))
	})
}
