package txn

import "testing"

// TestTransitions checks every (from, to) pair against Kafka's
// TransactionState.validPreviousStates, written out here as the legal
// pairs (with Kafka 4.x's empty abort of transaction version 2: ended to
// PrepareAbort): every other pair is refused.
func TestTransitions(t *testing.T) {
	legal := map[[2]State]bool{
		{Empty, Empty}: true, {CompleteCommit, Empty}: true, {CompleteAbort, Empty}: true,
		{Ongoing, Ongoing}: true, {Empty, Ongoing}: true, {CompleteCommit, Ongoing}: true, {CompleteAbort, Ongoing}: true,
		{Ongoing, PrepareCommit}: true,
		{Ongoing, PrepareAbort}:  true, {PrepareEpochFence, PrepareAbort}: true,
		{Empty, PrepareAbort}: true, {CompleteCommit, PrepareAbort}: true, {CompleteAbort, PrepareAbort}: true,
		{PrepareCommit, CompleteCommit}: true,
		{PrepareAbort, CompleteAbort}:   true,
		{Empty, Dead}:                   true, {CompleteCommit, Dead}: true, {CompleteAbort, Dead}: true,
		{Ongoing, PrepareEpochFence}: true,
	}
	n := 0
	for from := Empty; from <= PrepareEpochFence; from++ {
		for to := Empty; to <= PrepareEpochFence; to++ {
			want := legal[[2]State{from, to}]
			if got := CanTransition(from, to); got != want {
				t.Errorf("%v -> %v: got %v, want %v", from, to, got, want)
			}
			if want {
				n++
			}
		}
	}
	if n != len(legal) {
		t.Fatalf("%d legal pairs seen, table has %d", n, len(legal))
	}
	if CanTransition(State(8), Empty) || CanTransition(Empty, State(-1)) {
		t.Error("a state outside Kafka's eight is accepted")
	}
}

func TestStateNames(t *testing.T) {
	for i, want := range []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"} {
		st := State(i)
		if st.String() != want {
			t.Errorf("#%d: got %q, want %q", i, st.String(), want)
		}
		if got, ok := ParseState(want); !ok || got != st {
			t.Errorf("#%d: ParseState(%q) = %v, %v", i, want, got, ok)
		}
	}
	if _, ok := ParseState("ongoing"); ok {
		t.Error("ParseState is case-insensitive; Kafka's is not")
	}
}
