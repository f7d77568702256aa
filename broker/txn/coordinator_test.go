package txn

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stratastream/strata/segment/poll"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestInitProducerID(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.init("a")
	if epoch != 0 {
		t.Fatalf("first init: epoch %d, want 0", epoch)
	}
	pid2, epoch2 := e.init("a")
	if pid2 != pid || epoch2 != 1 {
		t.Fatalf("re-init: got %d/%d, want %d/1", pid2, epoch2, pid)
	}
	// KIP-360: the current id and epoch bump; a retry with the previous
	// epoch gets the same answer; a stale epoch is fenced.
	p3, e3, ke := e.c.InitProducerID("a", 60000, pid, 1)
	if ke != nil || p3 != pid || e3 != 2 {
		t.Fatalf("KIP-360 bump: %d/%d %v", p3, e3, ke)
	}
	if p, ep, ke := e.c.InitProducerID("a", 60000, pid, 1); ke != nil || p != pid || ep != 2 {
		t.Fatalf("KIP-360 retry: %d/%d %v, want %d/2", p, ep, ke, pid)
	}
	if _, _, ke := e.c.InitProducerID("a", 60000, pid, 0); ke != kerr.ProducerFenced {
		t.Fatalf("stale epoch: %v, want PRODUCER_FENCED", ke)
	}
	if _, _, ke := e.c.InitProducerID("a", 60000, pid+100, 0); ke != kerr.ProducerFenced {
		t.Fatalf("other producer id: %v, want PRODUCER_FENCED", ke)
	}
	for i, to := range []int32{0, -1, int32((15 * time.Minute).Milliseconds()) + 1} {
		if _, _, ke := e.c.InitProducerID("a", to, -1, -1); ke != kerr.InvalidTransactionTimeout {
			t.Errorf("#%d: timeout %d: %v, want INVALID_TRANSACTION_TIMEOUT", i, to, ke)
		}
	}
	if _, _, ke := e.c.InitProducerID("", 1000, -1, -1); ke != kerr.InvalidRequest {
		t.Errorf("empty id: %v, want INVALID_REQUEST", ke)
	}
	// The state survives a failover.
	e.reopen(1)
	if md := e.state("a"); md.ProducerID != pid || md.ProducerEpoch != 2 || md.State != Empty {
		t.Fatalf("after reload: %+v", md)
	}
}

func TestInitProducerIDEpochExhausted(t *testing.T) {
	e := newEnv(t)
	pid, _ := e.init("x")
	e.c.mu.Lock()
	e.c.mu.txns["x"].md.ProducerEpoch = math.MaxInt16 - 1
	e.c.mu.Unlock()
	p, ep, ke := e.c.InitProducerID("x", 60000, pid, math.MaxInt16-1)
	if ke != nil || p == pid || ep != 0 {
		t.Fatalf("exhausted: %d/%d %v, want a new id with epoch 0", p, ep, ke)
	}
	// The retry of that call (the answer lost) names the old id with the
	// exhausted epoch: it is the last producer id, not fenced.
	if p2, ep2, ke := e.c.InitProducerID("x", 60000, pid, math.MaxInt16-1); ke != nil || p2 != p || ep2 != 0 {
		t.Fatalf("retry: %d/%d %v, want %d/0", p2, ep2, ke, p)
	}
}

func TestCommitSendsMarkers(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.init("c")
	parts := tps("t", "t", "u")
	if ke := e.c.AddPartitions("c", pid, epoch, parts[:2]); ke != nil {
		t.Fatal(ke)
	}
	e.clock.Advance(time.Second)
	if ke := e.c.AddPartitions("c", pid, epoch, parts); ke != nil {
		t.Fatal(ke)
	}
	md := e.state("c")
	if md.State != Ongoing || len(md.Partitions) != 3 {
		t.Fatalf("after adds: %+v", md)
	}
	if ke := e.c.AddPartitions("c", pid, epoch+1, parts); ke != kerr.ProducerFenced {
		t.Errorf("add with another epoch: %v", ke)
	}
	if ke := e.c.AddPartitions("c", pid+1, epoch, parts); ke != kerr.InvalidProducerIDMapping {
		t.Errorf("add with another id: %v", ke)
	}
	if ke := e.c.EndTxn("c", pid, epoch, true); ke != nil {
		t.Fatal(ke)
	}
	done := e.awaitState("c", CompleteCommit)
	if len(done.Partitions) != 0 {
		t.Errorf("completed with partitions %v", done.Partitions)
	}
	part := e.c.PartitionFor("c")
	for _, tp := range parts {
		ms := e.mk.get(tp)
		if len(ms) != 1 || !ms[0].Commit || ms[0].ProducerID != pid || ms[0].ProducerEpoch != epoch || ms[0].CoordinatorEpoch != 0 {
			t.Errorf("%v: markers %+v", tp, ms)
		}
	}
	if ke := e.c.EndTxn("c", pid, epoch, true); ke != nil {
		t.Errorf("retried commit: %v, want none", ke)
	}
	if ke := e.c.EndTxn("c", pid, epoch, false); ke != kerr.InvalidTxnState {
		t.Errorf("abort after commit: %v, want INVALID_TXN_STATE", ke)
	}
	if ke := e.c.EndTxn("c", pid, epoch+1, true); ke != kerr.ProducerFenced {
		t.Errorf("commit with another epoch: %v, want PRODUCER_FENCED", ke)
	}
	// A new transaction begins from CompleteCommit.
	if ke := e.c.AddPartitions("c", pid, epoch, parts[:1]); ke != nil {
		t.Fatal(ke)
	}
	if ke := e.c.EndTxn("c", pid, epoch, false); ke != nil {
		t.Fatal(ke)
	}
	e.awaitState("c", CompleteAbort)
	if ms := e.mk.get(parts[0]); len(ms) != 2 || ms[1].Commit {
		t.Errorf("second transaction's marker: %+v", ms)
	}
	if ke := e.c.EndTxn("c", pid, epoch, false); ke != nil {
		t.Errorf("retried abort: %v", ke)
	}
	if ke := e.c.EndTxn("c", pid, epoch, true); ke != kerr.InvalidTxnState {
		t.Errorf("commit after abort: %v", ke)
	}
	t.Logf("transactional id in partition %d", part)
}

func TestEndTxnErrors(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.init("e")
	for i, tt := range []struct {
		id     string
		pid    int64
		epoch  int16
		commit bool
		want   *kerr.Error
	}{
		{"e", pid, epoch, true, kerr.InvalidTxnState}, // Empty
		{"e", pid + 1, epoch, true, kerr.InvalidProducerIDMapping},
		{"e", pid, epoch - 1, true, kerr.ProducerFenced},
		{"unknown", pid, epoch, true, kerr.InvalidProducerIDMapping},
		{"", pid, epoch, true, kerr.InvalidRequest},
	} {
		if ke := e.c.EndTxn(tt.id, tt.pid, tt.epoch, tt.commit); ke != tt.want {
			t.Errorf("#%d: got %v, want %v", i, ke, tt.want)
		}
	}
}

// TestConcurrentWhileMarkersPending: until every marker is written the
// transaction stays PrepareCommit: the producer's next transaction and a
// new InitProducerId get CONCURRENT_TRANSACTIONS; a partition whose
// leader is away is retried.
func TestConcurrentWhileMarkersPending(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.init("p")
	parts := tps("a", "b")
	e.mk.setFail(func(tp TopicPartition) MarkerResult {
		if tp.Topic == "b" {
			return MarkerResult{Code: kerr.NotLeaderForPartition.Code}
		}
		return MarkerResult{}
	})
	if ke := e.c.AddPartitions("p", pid, epoch, parts); ke != nil {
		t.Fatal(ke)
	}
	if ke := e.c.EndTxn("p", pid, epoch, true); ke != nil {
		t.Fatal(ke)
	}
	if ke := e.c.AddPartitions("p", pid, epoch, parts); ke != kerr.ConcurrentTransactions {
		t.Errorf("add while committing: %v", ke)
	}
	if ke := e.c.EndTxn("p", pid, epoch, true); ke != kerr.ConcurrentTransactions {
		t.Errorf("commit retried while committing: %v", ke)
	}
	if ke := e.c.EndTxn("p", pid, epoch, false); ke != kerr.InvalidTxnState {
		t.Errorf("abort while committing: %v", ke)
	}
	if _, _, ke := e.c.InitProducerID("p", 60000, -1, -1); ke != kerr.ConcurrentTransactions {
		t.Errorf("init while committing: %v", ke)
	}
	if md := e.state("p"); md.State != PrepareCommit {
		t.Fatalf("state %v", md.State)
	}
	// As in Kafka, the partition that has its marker leaves the
	// transaction shown; the one still waiting stays.
	if !poll.For(10*time.Second, func() bool {
		got := e.state("p").SortedPartitions()
		return len(got) == 1 && got[0] == parts[1]
	}) {
		t.Errorf("partitions while b waits: %v, want [b-1]", e.state("p").SortedPartitions())
	}
	e.mk.setFail(nil) // the leader is back
	e.awaitState("p", CompleteCommit)
	if len(e.mk.get(parts[0])) != 1 || len(e.mk.get(parts[1])) != 1 {
		t.Errorf("markers: a %d, b %d; want one each", len(e.mk.get(parts[0])), len(e.mk.get(parts[1])))
	}
}

// TestInitFencesOngoing: InitProducerId for an id with an ongoing
// transaction aborts it with the epoch bumped (the old producer is
// fenced), answers CONCURRENT_TRANSACTIONS, and the retry bumps again.
func TestInitFencesOngoing(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.init("z")
	parts := tps("t")
	if ke := e.c.AddPartitions("z", pid, epoch, parts); ke != nil {
		t.Fatal(ke)
	}
	if _, _, ke := e.c.InitProducerID("z", 60000, -1, -1); ke != kerr.ConcurrentTransactions {
		t.Fatalf("init over an ongoing transaction: %v", ke)
	}
	md := e.awaitState("z", CompleteAbort)
	if md.ProducerEpoch != epoch+1 {
		t.Errorf("fenced epoch %d, want %d", md.ProducerEpoch, epoch+1)
	}
	if ms := e.mk.get(parts[0]); len(ms) != 1 || ms[0].Commit || ms[0].ProducerEpoch != epoch+1 {
		t.Errorf("abort marker %+v", ms)
	}
	// The zombie is fenced.
	if ke := e.c.EndTxn("z", pid, epoch, true); ke != kerr.ProducerFenced {
		t.Errorf("zombie commit: %v, want PRODUCER_FENCED", ke)
	}
	if ke := e.c.AddPartitions("z", pid, epoch, parts); ke != kerr.ProducerFenced {
		t.Errorf("zombie add: %v, want PRODUCER_FENCED", ke)
	}
	p2, e2, ke := e.c.InitProducerID("z", 60000, -1, -1)
	if ke != nil || p2 != pid || e2 != epoch+2 {
		t.Fatalf("retried init: %d/%d %v, want %d/%d", p2, e2, ke, pid, epoch+2)
	}
}

// TestLoadCompletesPrepareCommit is a failover mid-commit: PrepareCommit
// is in the log but no marker was written; the next coordinator loads the
// partition, writes every marker with its own epoch and CompleteCommit.
func TestLoadCompletesPrepareCommit(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.init("f")
	parts := tps("x", "y", "z")
	if ke := e.c.AddPartitions("f", pid, epoch, parts); ke != nil {
		t.Fatal(ke)
	}
	e.mk.setFail(func(TopicPartition) MarkerResult { return MarkerResult{Code: kerr.RequestTimedOut.Code} })
	if ke := e.c.EndTxn("f", pid, epoch, true); ke != nil {
		t.Fatal(ke)
	}
	e.reopen(7) // the old coordinator dies before any marker is written
	e.mk.setFail(nil)
	if len(e.mk.get(parts[0])) != 0 {
		t.Fatal("a marker was written before the failover")
	}
	e.awaitState("f", CompleteCommit)
	for _, tp := range parts {
		ms := e.mk.get(tp)
		if len(ms) != 1 || !ms[0].Commit || ms[0].CoordinatorEpoch != 7 {
			t.Errorf("%v: markers %+v, want one commit at coordinator epoch 7", tp, ms)
		}
	}
	// And once more: CompleteCommit is what the log holds now.
	e.reopen(8)
	if md := e.state("f"); md.State != CompleteCommit || len(md.Partitions) != 0 {
		t.Errorf("after a second failover: %+v", md)
	}
}

// TestMarkersDroppedAndFenced: a deleted partition's marker is dropped; a
// newer coordinator's fencing stops the sender.
func TestMarkersDroppedAndFenced(t *testing.T) {
	e := newEnv(t)
	pid, epoch := e.init("d")
	parts := tps("keep", "gone")
	e.mk.setFail(func(tp TopicPartition) MarkerResult { return MarkerResult{Gone: tp.Topic == "gone"} })
	if ke := e.c.AddPartitions("d", pid, epoch, parts); ke != nil {
		t.Fatal(ke)
	}
	if ke := e.c.EndTxn("d", pid, epoch, true); ke != nil {
		t.Fatal(ke)
	}
	e.awaitState("d", CompleteCommit)

	pid2, epoch2 := e.init("g")
	e.mk.setFail(func(TopicPartition) MarkerResult { return MarkerResult{Code: kerr.TransactionCoordinatorFenced.Code} })
	if ke := e.c.AddPartitions("g", pid2, epoch2, parts[:1]); ke != nil {
		t.Fatal(ke)
	}
	calls := func() int { e.mk.mu.Lock(); defer e.mk.mu.Unlock(); return e.mk.calls }
	before := calls()
	if ke := e.c.EndTxn("g", pid2, epoch2, false); ke != nil {
		t.Fatal(ke)
	}
	if !poll.For(10*time.Second, func() bool { return e.c.senders.Load() == 0 }) {
		t.Fatal("the fenced sender did not stop")
	}
	if n := calls() - before; n != 1 {
		t.Errorf("fenced sender made %d calls, want 1", n)
	}
	if md := e.state("g"); md.State != PrepareAbort {
		t.Errorf("fenced transaction in %v, want PrepareAbort (left to the newer coordinator)", md.State)
	}
}

func TestTimeoutAborts(t *testing.T) {
	e := newEnv(t)
	pid, epoch, ke := e.c.InitProducerID("slow", 10_000, -1, -1)
	if ke != nil {
		t.Fatal(ke)
	}
	parts := tps("t")
	if ke := e.c.AddPartitions("slow", pid, epoch, parts); ke != nil {
		t.Fatal(ke)
	}
	if n := e.c.AbortTimedOut(); n != 0 {
		t.Fatalf("aborted %d before the timeout", n)
	}
	e.clock.Advance(10*time.Second + time.Millisecond)
	if n := e.c.AbortTimedOut(); n != 1 {
		t.Fatalf("aborted %d, want 1", n)
	}
	md := e.awaitState("slow", CompleteAbort)
	if md.ProducerEpoch != epoch+1 {
		t.Errorf("epoch %d after the timeout abort, want %d (fenced)", md.ProducerEpoch, epoch+1)
	}
	if ms := e.mk.get(parts[0]); len(ms) != 1 || ms[0].Commit || ms[0].ProducerEpoch != epoch+1 {
		t.Errorf("markers %+v", ms)
	}
	if ke := e.c.EndTxn("slow", pid, epoch, true); ke != kerr.ProducerFenced {
		t.Errorf("commit after the timeout: %v, want PRODUCER_FENCED", ke)
	}
}

func TestRemoveExpired(t *testing.T) {
	e := newEnv(t)
	e.init("old")
	pid, epoch := e.init("busy")
	if ke := e.c.AddPartitions("busy", pid, epoch, tps("t")); ke != nil {
		t.Fatal(ke)
	}
	e.clock.Advance(7*24*time.Hour + time.Second)
	e.init("new")
	if n := e.c.RemoveExpired(); n != 1 {
		t.Fatalf("removed %d, want 1 (the ongoing one and the new one stay)", n)
	}
	if _, ke := e.c.Describe("old"); ke != kerr.TransactionalIDNotFound {
		t.Fatalf("expired id: %v", ke)
	}
	e.reopen(1)
	if _, ke := e.c.Describe("old"); ke != kerr.TransactionalIDNotFound {
		t.Errorf("expired id after reload: %v (the tombstone should delete it)", ke)
	}
	e.state("busy")
	e.state("new")
}

func TestListAndDescribe(t *testing.T) {
	e := newEnv(t)
	for i := range 4 {
		e.init(fmt.Sprintf("l%d", i))
	}
	pid, epoch := e.init("l9")
	if ke := e.c.AddPartitions("l9", pid, epoch, tps("t", "t")); ke != nil {
		t.Fatal(ke)
	}
	e.clock.Advance(time.Minute)
	all, ke := e.c.List(ListFilter{MinDurationMs: -1})
	if ke != nil || len(all) != 5 {
		t.Fatalf("list all: %d %v", len(all), ke)
	}
	for i := 1; i < len(all); i++ {
		if all[i-1].TransactionalID >= all[i].TransactionalID {
			t.Errorf("not ordered: %q then %q", all[i-1].TransactionalID, all[i].TransactionalID)
		}
	}
	for i, tt := range []struct {
		f    ListFilter
		want []string
	}{
		{ListFilter{States: []State{Ongoing}, MinDurationMs: -1}, []string{"l9"}},
		{ListFilter{ProducerIDs: []int64{pid}, MinDurationMs: -1}, []string{"l9"}},
		{ListFilter{States: []State{Ongoing}, MinDurationMs: 2 * time.Minute.Milliseconds()}, nil},
		{ListFilter{States: []State{Ongoing}, MinDurationMs: 30 * time.Second.Milliseconds()}, []string{"l9"}},
		{ListFilter{States: []State{PrepareCommit}, MinDurationMs: -1}, nil},
	} {
		got, ke := e.c.List(tt.f)
		var ids []string
		for _, m := range got {
			ids = append(ids, m.TransactionalID)
		}
		if ke != nil || fmt.Sprint(ids) != fmt.Sprint(tt.want) {
			t.Errorf("#%d: got %v %v, want %v", i, ids, ke, tt.want)
		}
	}
	md := e.state("l9")
	if md.State != Ongoing || md.ProducerID != pid || len(md.SortedPartitions()) != 2 || md.TimeoutMs != 60000 {
		t.Errorf("describe: %+v", md)
	}
	if _, ke := e.c.Describe("nope"); ke != kerr.TransactionalIDNotFound {
		t.Errorf("describe unknown: %v", ke)
	}
}

// TestNotCoordinator: a partition not loaded, or unloaded, answers
// NOT_COORDINATOR; a partition loading answers COORDINATOR_LOAD_IN_PROGRESS;
// Close answers COORDINATOR_NOT_AVAILABLE.
func TestNotCoordinator(t *testing.T) {
	e := newEnv(t)
	e.init("n")
	p := e.c.PartitionFor("n")
	e.c.Unload(p)
	if _, _, ke := e.c.InitProducerID("n", 1000, -1, -1); ke != kerr.NotCoordinator {
		t.Errorf("unloaded: %v", ke)
	}
	gate := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := e.c.Load(p, 3, blockingLog{e.logs[p], gate})
		done <- err
	}()
	if !pollStatus(e.c, "n", kerr.CoordinatorLoadInProgress) {
		t.Errorf("loading: %v", e.c.Status("n"))
	}
	if _, ke := e.c.List(ListFilter{MinDurationMs: -1}); ke != kerr.CoordinatorLoadInProgress {
		t.Errorf("list while loading: %v", ke)
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if md := e.state("n"); md.ProducerEpoch != 0 {
		t.Errorf("reloaded: %+v", md)
	}
	_ = e.c.Close()
	if _, _, ke := e.c.InitProducerID("n", 1000, -1, -1); ke != kerr.CoordinatorNotAvailable {
		t.Errorf("closed: %v", ke)
	}
}

// TestEndTxnWaitsForCompletion: with EndWait, EndTxn answers once the
// transaction is complete, so the next transaction starts at once; a
// transaction whose markers cannot be written is answered when the wait
// ends, still prepared, and completes later.
func TestEndTxnWaitsForCompletion(t *testing.T) {
	e := newEnv(t)
	e.cfg.EndWait = time.Minute
	e.reopen(1)
	pid, epoch := e.init("w")
	parts := tps("a", "b")
	if ke := e.c.AddPartitions("w", pid, epoch, parts); ke != nil {
		t.Fatal(ke)
	}
	if ke := e.c.EndTxn("w", pid, epoch, true); ke != nil {
		t.Fatal(ke)
	}
	if md := e.state("w"); md.State != CompleteCommit {
		t.Fatalf("state after EndTxn: %v, want CompleteCommit", md.State)
	}
	if ke := e.c.AddPartitions("w", pid, epoch, parts); ke != nil {
		t.Fatalf("next transaction's first AddPartitionsToTxn: %v", ke)
	}

	e.mk.setFail(func(tp TopicPartition) MarkerResult {
		if tp.Topic == "b" {
			return MarkerResult{Code: kerr.NotLeaderForPartition.Code}
		}
		return MarkerResult{}
	})
	e.c.cfg.EndWait = 20 * time.Millisecond
	if ke := e.c.EndTxn("w", pid, epoch, false); ke != nil {
		t.Fatal(ke)
	}
	if md := e.state("w"); md.State != PrepareAbort {
		t.Fatalf("state after EndTxn with a marker failing: %v, want PrepareAbort", md.State)
	}
	e.mk.setFail(nil)
	e.awaitState("w", CompleteAbort)
}

// TestLoadStopsOnClose: a Close while a partition loads ends its replay
// (a broker shutting down waited for replays of partitions it would
// never serve).
func TestLoadStopsOnClose(t *testing.T) {
	e := newEnv(t)
	e.init("s")
	p := e.c.PartitionFor("s")
	e.c.Unload(p)
	gate := make(chan struct{})
	type result struct {
		rep LoadReport
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := e.c.Load(p, 3, blockingLog{e.logs[p], gate})
		done <- result{rep, err}
	}()
	if !pollStatus(e.c, "s", kerr.CoordinatorLoadInProgress) {
		t.Fatalf("loading: %v", e.c.Status("s"))
	}
	_ = e.c.Close()
	close(gate)
	r := <-done
	if !errors.Is(r.err, ErrClosed) {
		t.Fatalf("Load: %v, want ErrClosed", r.err)
	}
	if r.rep.Records != 0 {
		t.Errorf("replayed %d records after Close", r.rep.Records)
	}
}
