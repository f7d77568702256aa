package txn

import (
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// endV2 ends id's transaction as a client of transaction version 2 and
// returns the producer id and epoch it is given.
func (e *env) endV2(id string, pid int64, epoch int16, commit bool) (int64, int16) {
	e.t.Helper()
	p, ep, ke := e.c.EndTxnV2(id, pid, epoch, commit)
	if ke != nil {
		e.t.Fatalf("EndTxnV2(%q, %d, %d, %v): %v", id, pid, epoch, commit, ke)
	}
	return p, ep
}

// TestVersion2BumpsEpochPerTransaction: every EndTxn of transaction
// version 2 bumps the epoch, the markers carry the bumped epoch and
// version 2, and the next transaction runs at the epoch EndTxn returned.
func TestVersion2BumpsEpochPerTransaction(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.init("v2")
	parts := tps("t", "u")
	for round := range 3 {
		if ke := e.c.AddPartitionsV2("v2", pid, epoch, parts); ke != nil {
			t.Fatalf("round %d: %v", round, ke)
		}
		commit := round != 1
		p, ep := e.endV2("v2", pid, epoch, commit)
		if p != pid || ep != epoch+1 {
			t.Fatalf("round %d: EndTxnV2 gave %d/%d, want %d/%d", round, p, ep, pid, epoch+1)
		}
		want := CompleteAbort
		if commit {
			want = CompleteCommit
		}
		md := e.awaitState("v2", want)
		if md.ProducerEpoch != ep || md.ClientVersion != TransactionVersion2 {
			t.Fatalf("round %d: %+v", round, md)
		}
		for _, tp := range parts {
			ms := e.mk.get(tp)
			m := ms[len(ms)-1]
			if len(ms) != round+1 || m.ProducerEpoch != ep || m.Commit != commit || m.TransactionVersion != 2 {
				t.Errorf("round %d %v: markers %+v", round, tp, ms)
			}
		}
		// The previous epoch is fenced now.
		if ke := e.c.AddPartitionsV2("v2", pid, epoch, parts); ke != kerr.ProducerFenced {
			t.Errorf("round %d: add at the previous epoch: %v, want PRODUCER_FENCED", round, ke)
		}
		epoch = ep
	}
}

// TestVersion2RetriedEndTxn: an EndTxn retried with the epoch before its
// bump (the answer was lost) is answered as the first one was.
func TestVersion2RetriedEndTxn(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.init("r")
	if ke := e.c.AddPartitionsV2("r", pid, epoch, tps("t")); ke != nil {
		t.Fatal(ke)
	}
	_, ep := e.endV2("r", pid, epoch, true)
	e.awaitState("r", CompleteCommit)
	if p, ep2, ke := e.c.EndTxnV2("r", pid, epoch, true); ke != nil || p != pid || ep2 != ep {
		t.Errorf("retried commit: %d/%d %v, want %d/%d", p, ep2, ke, pid, ep)
	}
	if _, _, ke := e.c.EndTxnV2("r", pid, epoch, false); ke != kerr.InvalidTxnState {
		t.Errorf("abort retried after a commit: %v, want INVALID_TXN_STATE", ke)
	}
	// As Kafka: under version 2 a commit at the current epoch of a
	// completed transaction is no retry, and is fenced.
	if _, _, ke := e.c.EndTxnV2("r", pid, ep, true); ke != kerr.ProducerFenced {
		t.Errorf("commit with nothing ongoing: %v, want PRODUCER_FENCED", ke)
	}
	if ke := e.c.AddPartitionsV2("r", pid, ep, tps("t")); ke != nil {
		t.Fatal(ke)
	}
	_, ep3 := e.endV2("r", pid, ep, false)
	e.awaitState("r", CompleteAbort)
	if _, _, ke := e.c.EndTxnV2("r", pid, epoch, true); ke != kerr.ProducerFenced || ep3 != epoch+2 {
		t.Errorf("two epochs behind: %v (epoch %d), want PRODUCER_FENCED", ke, ep3)
	}
	if n := len(e.mk.get(TopicPartition{"t", 0})); n != 2 {
		t.Errorf("%d markers, want 2", n)
	}
}

// TestVersion2EmptyAbort: an abort with no transaction ongoing is legal
// under transaction version 2, bumps the epoch and writes no marker;
// under version 1 it stays INVALID_TXN_STATE.
func TestVersion2EmptyAbort(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.init("ea")
	if ke := e.c.EndTxn("ea", pid, epoch, false); ke != kerr.InvalidTxnState {
		t.Errorf("version 1 empty abort: %v, want INVALID_TXN_STATE", ke)
	}
	p, ep := e.endV2("ea", pid, epoch, false)
	if p != pid || ep != epoch+1 {
		t.Fatalf("empty abort: %d/%d", p, ep)
	}
	md := e.awaitState("ea", CompleteAbort)
	if md.ProducerEpoch != ep || e.mk.calls != 0 {
		t.Errorf("after the empty abort: %+v, %d marker calls", md, e.mk.calls)
	}
	if _, _, ke := e.c.EndTxnV2("ea", pid, epoch, false); ke != nil {
		t.Errorf("retried empty abort: %v", ke)
	}
}

// TestVersion2EpochOverflow: the EndTxn that reaches the last epoch
// hands the producer a new id with epoch 0; a retry of it names the old
// id and the exhausted epoch; the state survives a failover.
func TestVersion2EpochOverflow(t *testing.T) {
	e := newEnv(t)
	pid, _ := e.init("o")
	// Walk the epoch to the exhausted one by InitProducerId bumps is too
	// slow; set it through the log instead: a failover loads it.
	md := e.state("o")
	md.ProducerEpoch = epochExhausted
	if ke := e.c.write(e.c.mu.partitions[e.c.PartitionFor("o")], "o", &md); ke != nil {
		t.Fatal(ke)
	}
	e.reopen(1)
	epoch := int16(epochExhausted)
	if ke := e.c.AddPartitionsV2("o", pid, epoch, tps("t")); ke != nil {
		t.Fatal(ke)
	}
	p, ep := e.endV2("o", pid, epoch, true)
	if p == pid || ep != 0 {
		t.Fatalf("overflow: %d/%d, want a new id with epoch 0", p, ep)
	}
	got := e.awaitState("o", CompleteCommit)
	if got.ProducerID != p || got.ProducerEpoch != 0 || got.LastProducerID != pid {
		t.Errorf("completed: %+v", got)
	}
	if ms := e.mk.get(TopicPartition{"t", 0}); len(ms) != 1 || ms[0].ProducerID != pid || ms[0].ProducerEpoch != math.MaxInt16 {
		t.Errorf("markers %+v, want the old id at epoch %d", ms, math.MaxInt16)
	}
	if p2, ep2, ke := e.c.EndTxnV2("o", pid, epoch, true); ke != nil || p2 != p || ep2 != 0 {
		t.Errorf("retry after overflow: %d/%d %v", p2, ep2, ke)
	}
	e.reopen(2)
	got = e.state("o")
	if got.ProducerID != p || got.ProducerEpoch != 0 || got.ClientVersion != TransactionVersion2 || got.LastProducerID != pid {
		t.Errorf("after failover: %+v", got)
	}
	if ke := e.c.AddPartitionsV2("o", p, 0, tps("t")); ke != nil {
		t.Errorf("next transaction on the new id: %v", ke)
	}
}

// TestVersion2FailoverMidTransaction: a coordinator that fails over
// with a version 2 transaction prepared sends its markers with the
// bumped epoch and completes it.
func TestVersion2FailoverMidTransaction(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.init("f2")
	if ke := e.c.AddPartitionsV2("f2", pid, epoch, tps("t")); ke != nil {
		t.Fatal(ke)
	}
	e.mk.setFail(func(TopicPartition) MarkerResult { return MarkerResult{Code: kerr.NotLeaderForPartition.Code} })
	_, ep := e.endV2("f2", pid, epoch, true)
	e.reopen(1)
	if md := e.state("f2"); md.State != PrepareCommit || md.ProducerEpoch != ep || md.ClientVersion != TransactionVersion2 {
		t.Fatalf("loaded: %+v", md)
	}
	e.mk.setFail(nil)
	e.reopen(2)
	e.awaitState("f2", CompleteCommit)
	ms := e.mk.get(TopicPartition{"t", 0})
	if len(ms) == 0 || ms[len(ms)-1].ProducerEpoch != ep || ms[len(ms)-1].CoordinatorEpoch != 2 {
		t.Errorf("markers %+v", ms)
	}
	if p, ep2, ke := e.c.EndTxnV2("f2", pid, epoch, true); ke != nil || p != pid || ep2 != ep {
		t.Errorf("retry after failover: %d/%d %v", p, ep2, ke)
	}
}

// TestVersion2TimeoutFences: a transaction of version 2 that passes its
// timeout is aborted with the epoch bumped; the fenced producer's EndTxn
// is PRODUCER_FENCED (a fence is no EndTxn bump to retry).
func TestVersion2TimeoutFences(t *testing.T) {
	e := newEnv(t)
	pid, epoch, ke := e.c.InitProducerID("to", 1000, -1, -1)
	if ke != nil {
		t.Fatal(ke)
	}
	if ke := e.c.AddPartitionsV2("to", pid, epoch, tps("t")); ke != nil {
		t.Fatal(ke)
	}
	e.clock.Advance(2 * time.Second)
	if n := e.c.AbortTimedOut(); n != 1 {
		t.Fatalf("%d aborts", n)
	}
	md := e.awaitState("to", CompleteAbort)
	if md.ProducerEpoch != epoch+1 {
		t.Fatalf("after the timeout: %+v", md)
	}
	for _, commit := range []bool{true, false} {
		if _, _, ke := e.c.EndTxnV2("to", pid, epoch, commit); ke != kerr.ProducerFenced {
			t.Errorf("fenced producer's EndTxn (commit %v): %v, want PRODUCER_FENCED", commit, ke)
		}
	}
}

// TestVersion2ConcurrentAdds: partition leaders adding their partitions
// to one transaction at once (version 2) all succeed, one write after
// the other, instead of answering CONCURRENT_TRANSACTIONS.
func TestVersion2ConcurrentAdds(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.init("ca")
	const n = 16
	errs := make(chan *kerr.Error, n)
	for i := range n {
		go func() {
			errs <- e.c.AddPartitionsV2("ca", pid, epoch, []TopicPartition{{"t", int32(i)}})
		}()
	}
	for range n {
		if ke := <-errs; ke != nil {
			t.Errorf("concurrent add: %v", ke)
		}
	}
	if md := e.state("ca"); md.State != Ongoing || len(md.Partitions) != n {
		t.Fatalf("after %d concurrent adds: %v with %d partitions", n, md.State, len(md.Partitions))
	}
}
