package txn

// State is a transaction's state, with Kafka's ids (TransactionState in
// TransactionMetadata.scala). The ids are stored in __transaction_state:
// never change or reuse them.
type State int8

// The states of a transaction.
const (
	Empty             State = 0 // no transaction: the id has a producer id and epoch
	Ongoing           State = 1 // partitions were added; not ended yet
	PrepareCommit     State = 2 // the commit is decided; markers are being written
	PrepareAbort      State = 3 // the abort is decided; markers are being written
	CompleteCommit    State = 4 // every partition has its commit marker
	CompleteAbort     State = 5 // every partition has its abort marker
	Dead              State = 6 // the id expired; its record is a tombstone
	PrepareEpochFence State = 7 // in memory only: the epoch is being bumped to abort
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

// String returns Kafka's name of the state, as DescribeTransactions and
// ListTransactions show it.
func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "Unknown"
}

// ParseState returns the state Kafka names name (case-sensitive, as
// Kafka's TransactionState.fromName).
func ParseState(name string) (State, bool) {
	for i, n := range stateNames {
		if n == name {
			return State(i), true
		}
	}
	return 0, false
}

// valid reports whether s is one of the eight states.
func (s State) valid() bool { return s >= Empty && s <= PrepareEpochFence }

// validPrevious are the states each state may be entered from, as Kafka's
// TransactionState.validPreviousStates.
var validPrevious = map[State][]State{
	Empty:             {Empty, CompleteCommit, CompleteAbort},
	Ongoing:           {Ongoing, Empty, CompleteCommit, CompleteAbort},
	PrepareCommit:     {Ongoing},
	PrepareAbort:      {Ongoing, PrepareEpochFence, Empty, CompleteCommit, CompleteAbort}, // ended: an empty abort of transaction version 2
	CompleteCommit:    {PrepareCommit},
	CompleteAbort:     {PrepareAbort},
	Dead:              {Empty, CompleteCommit, CompleteAbort},
	PrepareEpochFence: {Ongoing},
}

// CanTransition reports whether a transaction in state from may move to
// state to.
func CanTransition(from, to State) bool {
	for _, p := range validPrevious[to] {
		if p == from {
			return true
		}
	}
	return false
}

// ended reports whether no transaction is open in state s: a new one may
// begin (AddPartitionsToTxn) and the id may expire.
func (s State) ended() bool { return s == Empty || s == CompleteCommit || s == CompleteAbort }
