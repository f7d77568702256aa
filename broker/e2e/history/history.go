// Package history checks what Kafka clients were told against what a log
// holds: a History collects every produce (in each producer's order, with
// its outcome), every record a consumer read at an offset, and every
// offset a consumer group committed, from any number of goroutines; Check
// then holds them against the log read back in full at the end and
// reports what is wrong, by kind, with counts.
//
// The guarantees it checks are Kafka's, for producers that retry
// (idempotent, acks=all) and consumers that read committed data:
//
//   - every acknowledged record is in the log exactly once, at the offset
//     its acknowledgement gave (when it gave one): else lost, duplicated
//     or inconsistent;
//   - no two reads ever saw different records at one offset of a
//     partition, and no consumer read past the end of the final log (a
//     record that was later truncated away): else inconsistent;
//   - on every partition, each producer's records are in the order it
//     produced them: else reordered;
//   - nothing is in the log that was never produced, or whose produce
//     definitely failed; a record whose produce had no answer or an
//     ambiguous error (unknown outcome) may or may not be there: else
//     unexpected;
//   - within one generation of a consumer group, the offset it commits
//     for a partition never goes backwards, and no commit points past the
//     end of the log: else commit regressions, commits past the end.
//     Across a rebalance (a new generation) a commit may go back, as a
//     partition's new owner starts from the last commit it fetched.
//
// Records are told apart by value, which must be unique within a
// partition (a producer's name and a sequence number, say).
package history

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
)

// TP names a partition of a topic.
type TP struct {
	Topic     string
	Partition int32
}

func (tp TP) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// Record is one record of the final log.
type Record struct {
	Offset int64
	Value  string
}

// Outcome is what a producer was told of one record.
type Outcome int

const (
	// Pending: sent, no answer yet. At Check an unanswered produce
	// counts as unknown: it may have been written.
	Pending Outcome = iota
	// Acked: the broker acknowledged the record.
	Acked
	// Failed: the broker refused the record; it was not written.
	Failed
	// Unknown: the produce failed in a way that does not tell whether
	// the record was written (a timeout, a connection lost in flight, a
	// client closed with the record in flight).
	Unknown
)

// maxProblems bounds how many problems a Report describes; the counts are
// always complete.
const maxProblems = 50

// History is the record of a run. Its methods are safe for concurrent
// use.
type History struct {
	mu struct {
		sync.Mutex
		// produces[tp][value] is every record produced to tp.
		produces map[TP]map[string]*produce
		// order[producer][tp] is the producer's records in its order.
		order map[string]map[TP][]*produce
		// reads[tp][offset] is the first read of that offset.
		reads map[TP]map[int64]read
		// conflicts are reads that disagreed with an earlier one.
		conflicts []string
		nreads    int
		commits   map[commitKey][]int64
		ncommits  int
	}
}

type produce struct {
	producer string
	tp       TP
	value    string
	n        int // its place in the producer's order on tp
	outcome  Outcome
	offset   int64 // acknowledged offset, or -1
	err      string
}

type read struct {
	reader string
	value  string
}

type commitKey struct {
	group      string
	generation int32
	tp         TP
}

// New returns an empty History.
func New() *History {
	h := &History{}
	h.mu.produces = map[TP]map[string]*produce{}
	h.mu.order = map[string]map[TP][]*produce{}
	h.mu.reads = map[TP]map[int64]read{}
	h.mu.commits = map[commitKey][]int64{}
	return h
}

// Sent records that producer handed value to its client for tp. Calls for
// one producer and partition must come in the order the records were
// produced. A value sent twice to one partition is a caller's bug and
// panics.
func (h *History) Sent(producer string, tp TP, value string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	byValue := h.mu.produces[tp]
	if byValue == nil {
		byValue = map[string]*produce{}
		h.mu.produces[tp] = byValue
	}
	if _, dup := byValue[value]; dup {
		panic(fmt.Sprintf("history: value %q sent twice to %v", value, tp))
	}
	if h.mu.order[producer] == nil {
		h.mu.order[producer] = map[TP][]*produce{}
	}
	p := &produce{producer: producer, tp: tp, value: value, n: len(h.mu.order[producer][tp]), offset: -1}
	byValue[value] = p
	h.mu.order[producer][tp] = append(h.mu.order[producer][tp], p)
}

// Answered records the outcome of the produce of value to tp: Acked with
// the offset the acknowledgement gave (-1 if it gave none), or Failed or
// Unknown with the error. A value never Sent panics.
func (h *History) Answered(tp TP, value string, outcome Outcome, offset int64, err string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.mu.produces[tp][value]
	if p == nil {
		panic(fmt.Sprintf("history: answer for %q on %v, which was never sent", value, tp))
	}
	p.outcome, p.err = outcome, err
	if outcome == Acked {
		p.offset = offset
	}
}

// Read records that reader read value at offset of tp.
func (h *History) Read(reader string, tp TP, offset int64, value string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.readLocked(reader, tp, offset, value)
}

func (h *History) readLocked(reader string, tp TP, offset int64, value string) {
	h.mu.nreads++
	m := h.mu.reads[tp]
	if m == nil {
		m = map[int64]read{}
		h.mu.reads[tp] = m
	}
	first, ok := m[offset]
	if !ok {
		m[offset] = read{reader: reader, value: value}
		return
	}
	if first.value != value {
		h.mu.conflicts = append(h.mu.conflicts, fmt.Sprintf("%v offset %d: %s read %q, %s read %q", tp, offset, first.reader, first.value, reader, value))
	}
}

// Committed records that group, in generation, committed offset for tp
// (and the broker accepted it). Calls for one group and partition must
// come in the order the broker answered them.
func (h *History) Committed(group string, generation int32, tp TP, offset int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := commitKey{group, generation, tp}
	h.mu.commits[k] = append(h.mu.commits[k], offset)
	h.mu.ncommits++
}

// Report is what Check found. The counts are of records unless named
// otherwise.
type Report struct {
	// Acknowledged, Unknown and Failed partition the records produced
	// by outcome (Unknown includes those never answered).
	Acknowledged, Unknown, Failed int
	// UnknownPresent is how many of the Unknown records are in the log.
	UnknownPresent int
	// Lost: acknowledged and not in the log.
	Lost int
	// Duplicated: extra copies of records that are in the log more
	// than once.
	Duplicated int
	// Inconsistent: offsets at which two reads saw different records,
	// reads past the end of the log, and acknowledged records found at
	// another offset than their acknowledgement gave.
	Inconsistent int
	// Reordered: records found before one their producer produced
	// earlier on the same partition.
	Reordered int
	// Unexpected: records in the log that were never produced or whose
	// produce definitely failed.
	Unexpected int
	// CommitRegressions: commits lower than the group's previous one for
	// the partition in the same generation. CommitsPastEnd: commits past
	// the end of the log.
	CommitRegressions, CommitsPastEnd int
	// Reads and Commits are how many reads and commits were recorded
	// (the final log included in Reads).
	Reads, Commits int
	// Problems describe the first problems found (at most maxProblems).
	Problems []string
}

// OK reports whether the history holds.
func (r Report) OK() bool {
	return r.Lost+r.Duplicated+r.Inconsistent+r.Reordered+r.Unexpected+r.CommitRegressions+r.CommitsPastEnd == 0
}

// String is the counts on one line.
func (r Report) String() string {
	return fmt.Sprintf("acknowledged=%d unknown=%d (in the log: %d) failed=%d lost=%d duplicated=%d inconsistent=%d reordered=%d unexpected=%d commit_regressions=%d commits_past_end=%d reads=%d commits=%d",
		r.Acknowledged, r.Unknown, r.UnknownPresent, r.Failed, r.Lost, r.Duplicated, r.Inconsistent, r.Reordered, r.Unexpected,
		r.CommitRegressions, r.CommitsPastEnd, r.Reads, r.Commits)
}

func (r *Report) problem(format string, args ...any) {
	if len(r.Problems) < maxProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// Check holds the history against final, the whole log of every
// partition that was produced to or read (records in offset order, read
// from the log start to the end offset once every producer had stopped
// and every produce had its answer). final's records count as reads.
// Every partition of the history must be in final: one that is not is
// taken as empty.
func (h *History) Check(final map[TP][]Record) Report {
	h.mu.Lock()
	defer h.mu.Unlock()
	var r Report
	ends := map[TP]int64{}
	for _, tp := range sortedTPs(final) {
		recs := final[tp]
		if len(recs) > 0 {
			ends[tp] = recs[len(recs)-1].Offset + 1
		}
		for i, rec := range recs {
			if i > 0 && rec.Offset <= recs[i-1].Offset {
				r.Inconsistent++
				r.problem("%v: the final log has offset %d after %d", tp, rec.Offset, recs[i-1].Offset)
			}
			h.readLocked("the final log", tp, rec.Offset, rec.Value)
		}
	}
	r.Reads, r.Commits = h.mu.nreads, h.mu.ncommits
	for _, c := range h.mu.conflicts {
		r.Inconsistent++
		r.problem("%s", c)
	}
	for _, tp := range sortedTPs(h.mu.reads) {
		for _, off := range slices.Sorted(maps.Keys(h.mu.reads[tp])) {
			if off >= ends[tp] {
				rd := h.mu.reads[tp][off]
				r.Inconsistent++
				r.problem("%v offset %d: %s read %q, past the end of the log (%d)", tp, off, rd.reader, rd.value, ends[tp])
			}
		}
	}

	// Where each produced record is in the final log.
	found := map[*produce][]int64{}
	for _, tp := range sortedTPs(final) {
		for _, rec := range final[tp] {
			p := h.mu.produces[tp][rec.Value]
			switch {
			case p == nil:
				r.Unexpected++
				r.problem("%v offset %d: %q was never produced to this partition", tp, rec.Offset, rec.Value)
				continue
			case p.outcome == Failed:
				r.Unexpected++
				r.problem("%v offset %d: %q is there, but its produce failed (%s)", tp, rec.Offset, rec.Value, p.err)
			}
			found[p] = append(found[p], rec.Offset)
		}
	}

	for _, producer := range slices.Sorted(maps.Keys(h.mu.order)) {
		for _, tp := range sortedTPs(h.mu.order[producer]) {
			last := int64(-1)
			var lastValue string
			for _, p := range h.mu.order[producer][tp] {
				offs := found[p]
				switch p.outcome {
				case Acked:
					r.Acknowledged++
					if len(offs) == 0 {
						r.Lost++
						r.problem("%v: %q from %s was acknowledged (offset %d) and is not in the log", tp, p.value, producer, p.offset)
					} else if p.offset >= 0 && offs[0] != p.offset {
						r.Inconsistent++
						r.problem("%v: %q from %s was acknowledged at offset %d and is at %d", tp, p.value, producer, p.offset, offs[0])
					}
				case Failed:
					r.Failed++
				default:
					r.Unknown++
					if len(offs) > 0 {
						r.UnknownPresent++
					}
				}
				if len(offs) > 1 {
					r.Duplicated += len(offs) - 1
					r.problem("%v: %q from %s is in the log %d times, at %v", tp, p.value, producer, len(offs), offs)
				}
				if len(offs) == 0 {
					continue
				}
				if offs[0] < last {
					r.Reordered++
					r.problem("%v: %q from %s is at offset %d, before %q (offset %d) which it produced earlier", tp, p.value, producer, offs[0], lastValue, last)
				} else {
					last, lastValue = offs[0], p.value
				}
			}
		}
	}

	for _, k := range slices.SortedFunc(maps.Keys(h.mu.commits), compareCommitKeys) {
		prev := int64(-1)
		for _, off := range h.mu.commits[k] {
			if off < prev {
				r.CommitRegressions++
				r.problem("group %s generation %d %v: committed %d after %d", k.group, k.generation, k.tp, off, prev)
			}
			prev = max(prev, off)
			if off > ends[k.tp] {
				r.CommitsPastEnd++
				r.problem("group %s generation %d %v: committed %d, past the end of the log (%d)", k.group, k.generation, k.tp, off, ends[k.tp])
			}
		}
	}
	return r
}

func sortedTPs[V any](m map[TP]V) []TP {
	return slices.SortedFunc(maps.Keys(m), compareTPs)
}

func compareTPs(a, b TP) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

func compareCommitKeys(a, b commitKey) int {
	if c := strings.Compare(a.group, b.group); c != 0 {
		return c
	}
	if c := compareTPs(a.tp, b.tp); c != 0 {
		return c
	}
	return int(a.generation) - int(b.generation)
}
