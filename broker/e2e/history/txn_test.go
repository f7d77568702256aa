package history

import (
	"strings"
	"testing"
	"time"
)

// txnFixture is a pipeline of three inputs: attempt a1 copies in-0 and
// in-1 and commits; a2 copies in-2 and aborts; a3 copies in-2 again and
// commits.
func txnFixture(t0 time.Time) (*TxnHistory, map[TP][]TxnRecord) {
	h := NewTxn()
	for _, in := range []string{"in-0", "in-1", "in-2"} {
		h.Input(in)
	}
	for i, a := range []struct {
		id     string
		inputs []string
		commit bool
	}{{"a1", []string{"in-0", "in-1"}, true}, {"a2", []string{"in-2"}, false}, {"a3", []string{"in-2"}, true}} {
		h.Began(a.id)
		for _, in := range a.inputs {
			h.Produced(a.id, in)
		}
		h.Ending(a.id, a.commit, t0.Add(time.Duration(i)*time.Second))
		if a.commit {
			h.Ended(a.id, TxnCommitted, "")
		} else {
			h.Ended(a.id, TxnAborted, "")
		}
	}
	tp := TP{"out", 0}
	final := map[TP][]TxnRecord{tp: {{0, "a1", "in-0"}, {1, "a1", "in-1"}, {5, "a3", "in-2"}}}
	return h, final
}

func TestTxnCheck(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tp := TP{"out", 0}
	later := t0.Add(time.Hour)
	for i, tc := range []struct {
		name   string
		mutate func(h *TxnHistory, final map[TP][]TxnRecord)
		check  func(r TxnReport) bool
		want   string // a problem containing it; "" for OK
	}{
		{"clean", func(h *TxnHistory, final map[TP][]TxnRecord) {
			h.Read("reader", tp, 0, "a1", "in-0", later)
			h.Read("reader", tp, 1, "a1", "in-1", later)
			h.Read("reader", tp, 5, "a3", "in-2", later)
			h.ReadAll("reader")
		}, func(r TxnReport) bool {
			return r.OK() && r.Committed == 2 && r.Aborted == 1 && r.Output == 3 && r.Reads == 3
		}, ""},
		{"aborted in the final output", func(h *TxnHistory, final map[TP][]TxnRecord) {
			final[tp] = append(final[tp], TxnRecord{3, "a2", "in-2"})
		}, func(r TxnReport) bool { return r.AbortedReads == 1 && r.Duplicated == 1 }, "which was aborted"},
		{"aborted read concurrently", func(h *TxnHistory, final map[TP][]TxnRecord) {
			h.Read("reader", tp, 3, "a2", "in-2", later)
		}, func(r TxnReport) bool { return r.AbortedReads == 1 && r.EarlyReads == 1 }, "not in the committed output"},
		{"lost input", func(h *TxnHistory, final map[TP][]TxnRecord) {
			final[tp] = final[tp][:2]
		}, func(r TxnReport) bool { return r.Lost == 2 }, `input "in-2" is not in the output`},
		{"torn attempt", func(h *TxnHistory, final map[TP][]TxnRecord) {
			final[tp] = final[tp][1:]
		}, func(r TxnReport) bool { return r.Lost == 2 }, "1 of its 2 records"},
		{"duplicate", func(h *TxnHistory, final map[TP][]TxnRecord) {
			h.Began("a4")
			h.Produced("a4", "in-0")
			h.Ending("a4", true, t0)
			h.Ended("a4", TxnUnknown, "timeout")
			final[TP{"out", 1}] = []TxnRecord{{0, "a4", "in-0"}}
		}, func(r TxnReport) bool { return r.Duplicated == 1 && r.Unknown == 1 && r.UnknownCommitted == 1 }, "in the output again"},
		{"read before commit", func(h *TxnHistory, final map[TP][]TxnRecord) {
			h.Read("reader", tp, 5, "a3", "in-2", t0) // a3 asked to commit at t0+2s
		}, func(r TxnReport) bool { return r.EarlyReads == 1 && r.AbortedReads == 0 }, "before its producer asked to commit"},
		{"read of an open attempt", func(h *TxnHistory, final map[TP][]TxnRecord) {
			h.Began("a5")
			h.Produced("a5", "in-1")
			h.Read("reader", TP{"out", 1}, 0, "a5", "in-1", later)
		}, func(r TxnReport) bool { return r.EarlyReads == 1 && r.AbortedReads == 1 && r.Unknown == 1 }, "asked false"},
		{"read at another offset", func(h *TxnHistory, final map[TP][]TxnRecord) {
			h.Read("reader", tp, 4, "a3", "in-2", later)
		}, func(r TxnReport) bool { return r.Inconsistent == 1 }, "the output has"},
		{"complete reader missed one", func(h *TxnHistory, final map[TP][]TxnRecord) {
			h.Read("reader", tp, 0, "a1", "in-0", later)
			h.ReadAll("reader")
		}, func(r TxnReport) bool { return r.Inconsistent == 2 }, "never read"},
		{"unknown attempt in the output", func(h *TxnHistory, final map[TP][]TxnRecord) {
			final[tp] = append(final[tp], TxnRecord{9, "zz", "in-0"})
		}, func(r TxnReport) bool { return r.Inconsistent == 1 }, "never began"},
		{"committed attempt not in the output", func(h *TxnHistory, final map[TP][]TxnRecord) {
			h.Began("a6")
			h.Produced("a6", "in-1")
			h.Ending("a6", true, t0)
			h.Ended("a6", TxnCommitted, "")
		}, func(r TxnReport) bool { return r.Lost == 1 }, `attempt "a6" (outcome committed): 1 of its 1`},
	} {
		h, final := txnFixture(t0)
		tc.mutate(h, final)
		r := h.Check(final)
		if !tc.check(r) {
			t.Errorf("#%d %s: got %v, problems %q", i, tc.name, r, r.Problems)
		}
		if tc.want == "" {
			if !r.OK() {
				t.Errorf("#%d %s: got %v, want OK: %q", i, tc.name, r, r.Problems)
			}
			continue
		}
		if r.OK() {
			t.Errorf("#%d %s: got OK, want a problem with %q", i, tc.name, tc.want)
		}
		if !strings.Contains(strings.Join(r.Problems, "\n"), tc.want) {
			t.Errorf("#%d %s: problems %q, want one with %q", i, tc.name, r.Problems, tc.want)
		}
	}
}
