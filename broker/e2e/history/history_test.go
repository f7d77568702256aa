package history

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

var tp0 = TP{"t", 0}

// logOf makes a final log of values at offsets from 0.
func logOf(values ...string) []Record {
	out := make([]Record, len(values))
	for i, v := range values {
		out[i] = Record{Offset: int64(i), Value: v}
	}
	return out
}

// sendAll sends values from producer to tp0, acknowledging each at its
// index as offset.
func sendAll(h *History, producer string, values ...string) {
	for i, v := range values {
		h.Sent(producer, tp0, v)
		h.Answered(tp0, v, Acked, int64(i), "")
	}
}

func TestCheck(t *testing.T) {
	for i, tc := range []struct {
		name  string
		setup func(h *History)
		final []Record
		// want is the Report's counts, as String without reads and
		// commits.
		want string
	}{{
		name:  "all there",
		setup: func(h *History) { sendAll(h, "a", "a0", "a1", "a2") },
		final: logOf("a0", "a1", "a2"),
		want:  "acknowledged=3 unknown=0 (in the log: 0) failed=0 lost=0 duplicated=0 inconsistent=0 reordered=0 unexpected=0 commit_regressions=0 commits_past_end=0",
	}, {
		name:  "lost",
		setup: func(h *History) { sendAll(h, "a", "a0", "a1", "a2") },
		final: logOf("a0", "a1"),
		want:  "acknowledged=3 unknown=0 (in the log: 0) failed=0 lost=1 duplicated=0 inconsistent=0 reordered=0 unexpected=0 commit_regressions=0 commits_past_end=0",
	}, {
		name: "duplicated",
		setup: func(h *History) {
			h.Sent("a", tp0, "a0")
			h.Answered(tp0, "a0", Acked, 0, "")
			h.Sent("a", tp0, "a1")
			h.Answered(tp0, "a1", Acked, -1, "")
		},
		final: logOf("a0", "a1", "a1"),
		want:  "acknowledged=2 unknown=0 (in the log: 0) failed=0 lost=0 duplicated=1 inconsistent=0 reordered=0 unexpected=0 commit_regressions=0 commits_past_end=0",
	}, {
		name: "acknowledged at another offset",
		setup: func(h *History) {
			h.Sent("a", tp0, "a0")
			h.Answered(tp0, "a0", Acked, 0, "")
		},
		final: logOf("x", "a0"),
		want:  "acknowledged=1 unknown=0 (in the log: 0) failed=0 lost=0 duplicated=0 inconsistent=1 reordered=0 unexpected=1 commit_regressions=0 commits_past_end=0",
	}, {
		name:  "reordered",
		setup: func(h *History) { sendAll(h, "a", "a0", "a1", "a2") },
		final: []Record{{0, "a0"}, {1, "a2"}, {2, "a1"}},
		// a2 and a1 are each at another offset than acknowledged.
		want: "acknowledged=3 unknown=0 (in the log: 0) failed=0 lost=0 duplicated=0 inconsistent=2 reordered=1 unexpected=0 commit_regressions=0 commits_past_end=0",
	}, {
		name: "two producers interleaved",
		setup: func(h *History) {
			for _, v := range []string{"a0", "b0", "a1", "b1"} {
				h.Sent(v[:1], tp0, v)
				h.Answered(tp0, v, Acked, -1, "")
			}
		},
		final: logOf("b0", "a0", "b1", "a1"),
		want:  "acknowledged=4 unknown=0 (in the log: 0) failed=0 lost=0 duplicated=0 inconsistent=0 reordered=0 unexpected=0 commit_regressions=0 commits_past_end=0",
	}, {
		name: "unknown outcomes may or may not be there",
		setup: func(h *History) {
			sendAll(h, "a", "a0")
			h.Sent("a", tp0, "a1")
			h.Answered(tp0, "a1", Unknown, -1, "request timed out")
			h.Sent("a", tp0, "a2") // never answered
			h.Sent("a", tp0, "a3")
			h.Answered(tp0, "a3", Unknown, -1, "client closed")
		},
		final: logOf("a0", "a1", "a2"),
		want:  "acknowledged=1 unknown=3 (in the log: 2) failed=0 lost=0 duplicated=0 inconsistent=0 reordered=0 unexpected=0 commit_regressions=0 commits_past_end=0",
	}, {
		name: "a failed produce must not be there",
		setup: func(h *History) {
			sendAll(h, "a", "a0")
			h.Sent("a", tp0, "a1")
			h.Answered(tp0, "a1", Failed, -1, "MESSAGE_TOO_LARGE")
		},
		final: logOf("a0", "a1"),
		want:  "acknowledged=1 unknown=0 (in the log: 0) failed=1 lost=0 duplicated=0 inconsistent=0 reordered=0 unexpected=1 commit_regressions=0 commits_past_end=0",
	}, {
		name:  "never produced",
		setup: func(h *History) { sendAll(h, "a", "a0") },
		final: logOf("a0", "ghost"),
		want:  "acknowledged=1 unknown=0 (in the log: 0) failed=0 lost=0 duplicated=0 inconsistent=0 reordered=0 unexpected=1 commit_regressions=0 commits_past_end=0",
	}, {
		name: "a consumer read another record at an offset",
		setup: func(h *History) {
			sendAll(h, "a", "a0", "a1")
			h.Read("c", tp0, 1, "b9")
		},
		final: logOf("a0", "a1"),
		want:  "acknowledged=2 unknown=0 (in the log: 0) failed=0 lost=0 duplicated=0 inconsistent=1 reordered=0 unexpected=0 commit_regressions=0 commits_past_end=0",
	}, {
		name: "two consumers disagree, and one read past the end",
		setup: func(h *History) {
			sendAll(h, "a", "a0")
			h.Read("c1", tp0, 0, "a0")
			h.Read("c2", tp0, 0, "a0")
			h.Read("c1", tp0, 1, "x")
			h.Read("c2", tp0, 1, "y")
		},
		final: logOf("a0"),
		want:  "acknowledged=1 unknown=0 (in the log: 0) failed=0 lost=0 duplicated=0 inconsistent=2 reordered=0 unexpected=0 commit_regressions=0 commits_past_end=0",
	}, {
		name: "commits go back only across a rebalance",
		setup: func(h *History) {
			sendAll(h, "a", "a0", "a1", "a2")
			h.Committed("g", 1, tp0, 1)
			h.Committed("g", 1, tp0, 3)
			h.Committed("g", 2, tp0, 2) // new generation: allowed
			h.Committed("g", 2, tp0, 1) // back within generation 2
			h.Committed("g", 2, tp0, 4) // past the end (3)
		},
		final: logOf("a0", "a1", "a2"),
		want:  "acknowledged=3 unknown=0 (in the log: 0) failed=0 lost=0 duplicated=0 inconsistent=0 reordered=0 unexpected=0 commit_regressions=1 commits_past_end=1",
	}} {
		h := New()
		tc.setup(h)
		r := h.Check(map[TP][]Record{tp0: tc.final})
		got, _, _ := strings.Cut(r.String(), " reads=")
		if got != tc.want {
			t.Errorf("#%d %s: got\n%s\nwant\n%s\nproblems: %q", i, tc.name, got, tc.want, r.Problems)
		}
		wantOK := strings.HasSuffix(tc.want, "lost=0 duplicated=0 inconsistent=0 reordered=0 unexpected=0 commit_regressions=0 commits_past_end=0")
		if r.OK() != wantOK {
			t.Errorf("#%d %s: OK() = %v, want %v", i, tc.name, r.OK(), wantOK)
		}
		if !r.OK() && len(r.Problems) == 0 {
			t.Errorf("#%d %s: not OK and no problem described", i, tc.name)
		}
	}
}

// TestCheckPartitionNotRead: a partition produced to and missing from the
// final log is empty: its acknowledged records are lost.
func TestCheckPartitionNotRead(t *testing.T) {
	h := New()
	sendAll(h, "a", "a0")
	r := h.Check(map[TP][]Record{})
	if r.Lost != 1 || r.OK() {
		t.Errorf("got %v, want lost=1", r)
	}
}

// TestConcurrent: producers, readers and commits from many goroutines
// (run with -race).
func TestConcurrent(t *testing.T) {
	h := New()
	const producers, n = 4, 200
	var wg sync.WaitGroup
	for p := range producers {
		tp := TP{"t", int32(p)}
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range n {
				v := fmt.Sprintf("%d-%d", p, i)
				h.Sent("p", tp, v)
				h.Answered(tp, v, Acked, int64(i), "")
			}
		}()
		go func() {
			defer wg.Done()
			for i := range n {
				h.Read("c", tp, int64(i), fmt.Sprintf("%d-%d", p, i))
				h.Committed("g", 1, tp, int64(i+1))
			}
		}()
	}
	wg.Wait()
	final := map[TP][]Record{}
	for p := range producers {
		tp := TP{"t", int32(p)}
		for i := range n {
			final[tp] = append(final[tp], Record{int64(i), fmt.Sprintf("%d-%d", p, i)})
		}
	}
	r := h.Check(final)
	if !r.OK() || r.Acknowledged != producers*n || r.Reads != 2*producers*n || r.Commits != producers*n {
		t.Errorf("got %v, problems %q", r, r.Problems)
	}
}
