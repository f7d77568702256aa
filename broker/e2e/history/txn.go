package history

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// TxnHistory checks an exactly-once consume-transform-produce pipeline:
// inputs copied to an output topic by transactions (attempts), each
// output record naming the input it copies and the attempt that wrote
// it, and read_committed readers of the output. Check holds it against
// the output read back in full with read_committed at the end:
//
//   - no aborted read: no record of an attempt that was aborted (the
//     producer asked to abort, EndTransaction said it aborted, or its
//     records are not in the final committed output) is ever read with
//     read_committed, concurrently or in the final log;
//   - no lost committed write: every input is in the final output, every
//     record of an attempt that EndTransaction said committed is there,
//     and an attempt in the final output is there whole (atomicity);
//   - no duplicate: each input is in the final output once;
//   - no read before commit: a read_committed reader reads a record only
//     after its producer asked to commit the attempt, of an attempt that
//     is in the final output, at the offset the final output has it;
//   - a reader marked complete (ReadAll) read every record of the final
//     output.
//
// Its methods are safe for concurrent use.
type TxnHistory struct {
	mu struct {
		sync.Mutex
		inputs   map[string]bool
		attempts map[string]*attempt
		reads    []txnRead
		complete map[string]bool
	}
}

// TxnOutcome is what EndTransaction told the producer of an attempt.
type TxnOutcome int

const (
	// TxnOpen: not ended yet; at Check it counts as unknown.
	TxnOpen TxnOutcome = iota
	// TxnCommitted: EndTransaction said the attempt committed.
	TxnCommitted
	// TxnAborted: EndTransaction said the attempt aborted.
	TxnAborted
	// TxnUnknown: EndTransaction failed (or was never called after a
	// failure): the attempt may have committed or not; the final log
	// decides.
	TxnUnknown
)

type attempt struct {
	id       string
	inputs   []string // the inputs it copied, in produce order
	ending   bool     // EndTransaction called
	commit   bool     // ... asking to commit
	endingAt time.Time
	outcome  TxnOutcome
	err      string
}

type txnRead struct {
	reader  string
	tp      TP
	offset  int64
	attempt string
	input   string
	at      time.Time
}

// TxnRecord is one record of the final output: the attempt that wrote it
// and the input it copies.
type TxnRecord struct {
	Offset  int64
	Attempt string
	Input   string
}

// NewTxn returns an empty TxnHistory.
func NewTxn() *TxnHistory {
	h := &TxnHistory{}
	h.mu.inputs = map[string]bool{}
	h.mu.attempts = map[string]*attempt{}
	h.mu.complete = map[string]bool{}
	return h
}

// Input records an input the pipeline must copy exactly once.
func (h *TxnHistory) Input(value string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.inputs[value] = true
}

// Began records that attempt id began. An id begun twice panics.
func (h *TxnHistory) Began(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.attempts[id] != nil {
		panic(fmt.Sprintf("history: attempt %q began twice", id))
	}
	h.mu.attempts[id] = &attempt{id: id}
}

// Produced records that attempt id produced the copy of input.
func (h *TxnHistory) Produced(id, input string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.attemptLocked(id).inputs = append(h.attemptLocked(id).inputs, input)
}

// Ending records that the producer called EndTransaction for attempt id
// at time at, asking to commit or to abort.
func (h *TxnHistory) Ending(id string, commit bool, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.attemptLocked(id)
	a.ending, a.commit, a.endingAt = true, commit, at
}

// Ended records what EndTransaction answered for attempt id (err for
// TxnUnknown).
func (h *TxnHistory) Ended(id string, outcome TxnOutcome, err string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.attemptLocked(id)
	a.outcome, a.err = outcome, err
}

func (h *TxnHistory) attemptLocked(id string) *attempt {
	a := h.mu.attempts[id]
	if a == nil {
		panic(fmt.Sprintf("history: attempt %q never began", id))
	}
	return a
}

// Read records that reader, reading with read_committed, got at time at
// the record at offset of tp that attempt wrote copying input. at must
// be taken after the fetch returned.
func (h *TxnHistory) Read(reader string, tp TP, offset int64, attempt, input string, at time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.reads = append(h.mu.reads, txnRead{reader, tp, offset, attempt, input, at})
}

// ReadAll records that reader read the output to its end: Check then
// requires it to have read every record of the final output.
func (h *TxnHistory) ReadAll(reader string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.complete[reader] = true
}

// TxnReport is what Check found.
type TxnReport struct {
	// Inputs, Attempts: how many were recorded. Committed, Aborted,
	// Unknown partition the attempts by what EndTransaction said
	// (Unknown includes those never ended); UnknownCommitted is how many
	// of the Unknown ones the final output holds.
	Inputs, Attempts, Committed, Aborted, Unknown, UnknownCommitted int
	// Output is how many records the final output holds; Reads how
	// many concurrent reads were recorded.
	Output, Reads int
	// AbortedReads: records of aborted attempts read (concurrently or in
	// the final output).
	AbortedReads int
	// Lost: inputs not in the final output, and records of committed
	// attempts (or of attempts partly in the output) missing from it.
	Lost int
	// Duplicated: extra copies of inputs in the final output.
	Duplicated int
	// EarlyReads: records read before their producer asked to commit,
	// or of an attempt it never asked to commit.
	EarlyReads int
	// Inconsistent: reads that the final output does not hold at that
	// offset (though of a committed attempt), records of unknown
	// attempts or inputs, and records a complete reader missed.
	Inconsistent int
	// Problems describe the first problems found (at most maxProblems).
	Problems []string
}

// OK reports whether the history holds.
func (r TxnReport) OK() bool {
	return r.AbortedReads+r.Lost+r.Duplicated+r.EarlyReads+r.Inconsistent == 0
}

// String is the counts on one line.
func (r TxnReport) String() string {
	return fmt.Sprintf("inputs=%d attempts=%d committed=%d aborted=%d unknown=%d (committed per the log: %d) output=%d reads=%d aborted_reads=%d lost=%d duplicated=%d early_reads=%d inconsistent=%d",
		r.Inputs, r.Attempts, r.Committed, r.Aborted, r.Unknown, r.UnknownCommitted, r.Output, r.Reads,
		r.AbortedReads, r.Lost, r.Duplicated, r.EarlyReads, r.Inconsistent)
}

func (r *TxnReport) problem(format string, args ...any) {
	if len(r.Problems) < maxProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// Check holds the history against final, the whole output read with
// read_committed at the end, by partition.
func (h *TxnHistory) Check(final map[TP][]TxnRecord) TxnReport {
	h.mu.Lock()
	defer h.mu.Unlock()
	var r TxnReport
	r.Inputs, r.Attempts, r.Reads = len(h.mu.inputs), len(h.mu.attempts), len(h.mu.reads)

	at := map[TP]map[int64]TxnRecord{}
	inFinal := map[string]map[string]int{} // attempt -> input -> copies
	copies := map[string]int{}
	for _, tp := range sortedTPs(final) {
		at[tp] = map[int64]TxnRecord{}
		for _, rec := range final[tp] {
			r.Output++
			at[tp][rec.Offset] = rec
			a := h.mu.attempts[rec.Attempt]
			switch {
			case a == nil:
				r.Inconsistent++
				r.problem("%v offset %d: %q copied by attempt %q, which never began", tp, rec.Offset, rec.Input, rec.Attempt)
				continue
			case a.outcome == TxnAborted || (a.ending && !a.commit):
				r.AbortedReads++
				r.problem("%v offset %d: %q of attempt %q, which was aborted (asked to commit %v, outcome %v), is in the read_committed output", tp, rec.Offset, rec.Input, rec.Attempt, a.commit, a.outcome)
			}
			if !slices.Contains(a.inputs, rec.Input) {
				r.Inconsistent++
				r.problem("%v offset %d: attempt %q never produced the copy of %q", tp, rec.Offset, rec.Attempt, rec.Input)
			}
			if !h.mu.inputs[rec.Input] {
				r.Inconsistent++
				r.problem("%v offset %d: %q is not an input", tp, rec.Offset, rec.Input)
			}
			if inFinal[rec.Attempt] == nil {
				inFinal[rec.Attempt] = map[string]int{}
			}
			inFinal[rec.Attempt][rec.Input]++
			if copies[rec.Input]++; copies[rec.Input] == 2 {
				r.problem("%v offset %d: %q is in the output again (attempt %q)", tp, rec.Offset, rec.Input, rec.Attempt)
			}
		}
	}
	for _, in := range slices.Sorted(maps.Keys(h.mu.inputs)) {
		switch n := copies[in]; {
		case n == 0:
			r.Lost++
			r.problem("input %q is not in the output", in)
		case n > 1:
			r.Duplicated += n - 1
		}
	}
	for _, id := range slices.Sorted(maps.Keys(h.mu.attempts)) {
		a := h.mu.attempts[id]
		switch a.outcome {
		case TxnCommitted:
			r.Committed++
		case TxnAborted:
			r.Aborted++
		default:
			r.Unknown++
			if inFinal[id] != nil {
				r.UnknownCommitted++
			}
		}
		if a.outcome != TxnCommitted && inFinal[id] == nil {
			continue
		}
		// Committed, or in the output: there whole.
		missing := 0
		for _, in := range a.inputs {
			if inFinal[id][in] == 0 {
				missing++
			}
		}
		if missing > 0 {
			r.Lost += missing
			r.problem("attempt %q (outcome %v): %d of its %d records are not in the output", id, a.outcome, missing, len(a.inputs))
		}
	}

	read := map[string]map[TP]map[int64]bool{}
	for _, rd := range h.mu.reads {
		if read[rd.reader] == nil {
			read[rd.reader] = map[TP]map[int64]bool{}
		}
		if read[rd.reader][rd.tp] == nil {
			read[rd.reader][rd.tp] = map[int64]bool{}
		}
		read[rd.reader][rd.tp][rd.offset] = true
		a := h.mu.attempts[rd.attempt]
		if a == nil {
			r.Inconsistent++
			r.problem("%s read %q of attempt %q, which never began, at %v offset %d", rd.reader, rd.input, rd.attempt, rd.tp, rd.offset)
			continue
		}
		if !a.ending || !a.commit || rd.at.Before(a.endingAt) {
			r.EarlyReads++
			r.problem("%s read %q of attempt %q at %v offset %d at %s, before its producer asked to commit it (asked %v, commit %v, at %s)",
				rd.reader, rd.input, rd.attempt, rd.tp, rd.offset, rd.at.Format("15:04:05.000000"), a.ending, a.commit, a.endingAt.Format("15:04:05.000000"))
		}
		got, ok := at[rd.tp][rd.offset]
		switch {
		case ok && got.Attempt == rd.attempt && got.Input == rd.input:
		case inFinal[rd.attempt] == nil || a.outcome == TxnAborted:
			r.AbortedReads++
			r.problem("%s read %q of attempt %q (outcome %v), not in the committed output, at %v offset %d", rd.reader, rd.input, rd.attempt, a.outcome, rd.tp, rd.offset)
		default:
			r.Inconsistent++
			r.problem("%s read %q of attempt %q at %v offset %d; the output has %+v there (present %v)", rd.reader, rd.input, rd.attempt, rd.tp, rd.offset, got, ok)
		}
	}
	for _, reader := range slices.Sorted(maps.Keys(h.mu.complete)) {
		missed := 0
		for _, tp := range sortedTPs(final) {
			for _, rec := range final[tp] {
				if !read[reader][tp][rec.Offset] {
					if missed++; missed <= 3 {
						r.problem("%s (complete) never read %v offset %d (%q of %q)", reader, tp, rec.Offset, rec.Input, rec.Attempt)
					}
				}
			}
		}
		r.Inconsistent += missed
	}
	return r
}

func (o TxnOutcome) String() string {
	switch o {
	case TxnOpen:
		return "open"
	case TxnCommitted:
		return "committed"
	case TxnAborted:
		return "aborted"
	case TxnUnknown:
		return "unknown"
	}
	return fmt.Sprintf("TxnOutcome(%d)", int(o))
}
