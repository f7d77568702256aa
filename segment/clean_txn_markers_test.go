package segment

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Property test of marker removal (clean_txn.go): random logs of plain
// batches and of committed, aborted and (at the end) open transactions of
// several producers, kept with an aborted-transaction index as the broker
// keeps it, are cleaned round after round, the clock moving before and
// past delete.retention.ms, the index losing the entries each round
// reports done. After every round: offsets strictly increase; the
// read_committed view (a consumer's filtering with the index, up to the
// last stable offset) gives every key the same latest value as before any
// cleaning; every transactional batch left still has its marker; no index
// entry names a marker that is gone; a marker went only past a delete
// horizon it had before the round; each producer's last batch is there;
// (some rounds leave the index as it was, as a broker whose index update
// failed would)
// nothing at or above the first uncleanable offset changed. After the
// last round every marker below the cleaned end whose transaction has no
// batch left is gone, and so is its index entry.

// mkTxn is a transaction of the generated log.
type mkTxn struct {
	pid         int64
	first       int64 // first offset
	marker      int64 // offset of its marker, -1 while open
	commit      bool
	dataBatches []int64 // base offsets of its data batches
}

// mkLog generates the log and keeps what a broker would know of it.
type mkLog struct {
	t        *testing.T
	l        *Log
	rng      *rand.Rand
	idx      *TxnIndex
	open     map[int64]*mkTxn // by producer
	txns     []*mkTxn
	seq      map[int64]int32
	lastData map[int64]int64 // producer -> last offset of its last data batch
	ts       int64
}

func (g *mkLog) records(n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		g.ts++
		recs[i] = Record{Timestamp: g.ts, Key: []byte(fmt.Sprintf("k%d", g.rng.IntN(10)))}
		if g.rng.IntN(6) > 0 {
			recs[i].Value = []byte(fmt.Sprintf("v%d", g.ts))
		}
	}
	return recs
}

func (g *mkLog) codec() Codec {
	if g.rng.IntN(4) == 0 {
		return CodecGzip
	}
	return CodecNone
}

// step appends one random batch: a plain one, a batch of a producer's
// transaction (beginning it if need be), or a producer's marker.
func (g *mkLog) step(pids []int64) {
	t := g.t
	if g.rng.IntN(4) == 0 {
		lgAppend(t, g.l, mustBuild(t, BatchSpec{Codec: g.codec(), Records: g.records(1 + g.rng.IntN(3))}))
		return
	}
	pid := pids[g.rng.IntN(len(pids))]
	tx := g.open[pid]
	if tx != nil && g.rng.IntN(3) == 0 {
		g.end(tx, g.rng.IntN(2) == 0)
		return
	}
	n := 1 + g.rng.IntN(3)
	b := mustBuild(t, BatchSpec{Codec: g.codec(), Idempotent: true, ProducerID: pid, BaseSequence: g.seq[pid], Transactional: true, Records: g.records(n)})
	g.seq[pid] += int32(n)
	res := lgAppend(t, g.l, b)
	if tx == nil {
		tx = &mkTxn{pid: pid, first: res.BaseOffset, marker: -1}
		g.open[pid] = tx
		g.txns = append(g.txns, tx)
	}
	tx.dataBatches = append(tx.dataBatches, res.BaseOffset)
	g.lastData[pid] = res.BaseOffset + int64(n) - 1
}

// end writes tx's marker and, for an abort, its index entry.
func (g *mkLog) end(tx *mkTxn, commit bool) {
	g.ts++
	res := lgAppend(g.t, g.l, ControlBatch(tx.pid, 0, commit, 0, g.ts))
	tx.marker, tx.commit = res.BaseOffset, commit
	delete(g.open, tx.pid)
	if !commit {
		e := AbortedTxn{ProducerID: tx.pid, FirstOffset: tx.first, LastOffset: tx.marker, LastStableOffset: g.lso()}
		if err := g.idx.Append(tx.marker/40*40, e); err != nil { // a few entries per file
			g.t.Fatal(err)
		}
	}
}

// lso is the last stable offset: the first offset of the earliest open
// transaction, else the log end.
func (g *mkLog) lso() int64 {
	lso := g.l.LogEndOffset()
	for _, tx := range g.open {
		lso = min(lso, tx.first)
	}
	return lso
}

// mkBatch is a batch as read back.
type mkBatch struct {
	h Header
	b []byte
}

func mkRead(t *testing.T, l *Log) []mkBatch {
	t.Helper()
	var out []mkBatch
	for _, b := range lgReadAll(t, l) {
		h, err := ParseHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, mkBatch{h, b})
	}
	return out
}

// mkView is what a read_committed consumer ends with, reading the log
// from its start up to lso with the index's aborted transactions (as
// Kafka's consumer filters: a producer's transactional batches are
// skipped from an aborted transaction's first offset until its ABORT
// marker): the latest value of every key, tombstones deleting.
func mkView(t *testing.T, batches []mkBatch, aborted []AbortedTxn, lso int64) map[string]string {
	t.Helper()
	aborted = slices.Clone(aborted)
	slices.SortFunc(aborted, func(a, b AbortedTxn) int { return int(a.FirstOffset - b.FirstOffset) })
	skipping := map[int64]bool{}
	view := map[string]string{}
	for _, x := range batches {
		h := x.h
		if h.BaseOffset >= lso {
			break
		}
		for len(aborted) > 0 && aborted[0].FirstOffset <= h.LastOffset() {
			skipping[aborted[0].ProducerID] = true
			aborted = aborted[1:]
		}
		recs, err := Records(x.b)
		if err != nil {
			t.Fatal(err)
		}
		if h.Control() {
			if len(recs) > 0 {
				if c, err := ParseControlRecord(recs[0].Key, recs[0].Value); err == nil && !c.Commit() {
					delete(skipping, h.ProducerID)
				}
			}
			continue
		}
		if h.Transactional() && skipping[h.ProducerID] {
			continue
		}
		for _, r := range recs {
			if r.Value == nil {
				delete(view, string(r.Key))
			} else {
				view[string(r.Key)] = string(r.Value)
			}
		}
	}
	return view
}

func TestCleanRemovesTransactionMarkers(t *testing.T) {
	const retention = 10_000 // delete.retention.ms
	iters := 12
	if testing.Short() {
		iters = 4
	}
	var totalRemoved, totalHorizons, totalDone int64
	for iter := range iters {
		t.Run(fmt.Sprint(iter), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(iter), 19))
			clock := &ctClock{t: time.UnixMilli(1_700_000_000_000)}
			cfg := lgConfig()
			cfg.SegmentBytes = int64(1024 + rng.IntN(4096))
			l := lgOpen(t, t.TempDir(), cfg, WithClock(clock.now))
			idxDir := t.TempDir()
			idx, _, err := OpenTxnIndex(idxDir)
			if err != nil {
				t.Fatal(err)
			}
			g := &mkLog{t: t, l: l, rng: rng, idx: idx, open: map[int64]*mkTxn{}, seq: map[int64]int32{}, lastData: map[int64]int64{}}
			pids := []int64{10, 11, 12}
			produce := func(n int, closeAll bool) {
				for range n {
					g.step(pids)
				}
				for _, pid := range pids {
					if tx := g.open[pid]; tx != nil && (closeAll || pid != 12) {
						g.end(tx, rng.IntN(2) == 0)
					}
				}
				if _, err := l.rollForTest(); err != nil {
					t.Fatal(err)
				}
			}
			produce(80+rng.IntN(80), false)
			lso := g.lso()
			want := mkView(t, mkRead(t, l), idx.Entries(), lso)

			clean := func(round int) CleanResult {
				t.Helper()
				before := mkRead(t, l)
				res, err := l.Clean(context.Background(), CleanConfig{
					Map: ctMap(t, 1<<14), DeleteRetentionMs: retention, UncleanableFrom: max(lso, 1),
					ProducerLastOffsets: g.lastData, AbortedTxns: idx.Entries(), TxnsComplete: true,
				})
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				// Now and then the broker fails to update the index: the
				// entries stay listed, and so must their markers.
				if round >= 6 || rng.IntN(2) == 0 {
					err = idx.Remove(res.AbortedTxnsDone)
				}
				if err != nil {
					t.Fatalf("round %d: index: %v", round, err)
				}
				after := mkRead(t, l)
				mkCheck(t, round, g, before, after, res, clock.now().UnixMilli())
				if got := mkView(t, after, idx.Entries(), lso); !mapsEqual(got, want) {
					t.Fatalf("round %d: read_committed view\n got %v\nwant %v", round, got, want)
				}
				totalRemoved += res.MarkersRemoved
				totalHorizons += res.MarkerHorizonsSet
				totalDone += int64(len(res.AbortedTxnsDone))
				return res
			}
			clean(1) // aborted data goes; markers stay, their data was read
			clock.advance(time.Millisecond)
			res := clean(2) // horizons on the markers of emptied transactions
			if res.MarkersRemoved != 0 {
				t.Fatalf("round 2: %d markers removed before delete.retention.ms", res.MarkersRemoved)
			}
			// More transactions, committed or aborted, make the log dirty
			// again (the one left open stays open).
			produce(30+rng.IntN(30), false)
			lso = g.lso()
			want = mkView(t, mkRead(t, l), idx.Entries(), lso)
			clock.advance(retention * time.Millisecond / 2)
			clean(3)
			for round := 4; round <= 7; round++ {
				clock.advance(retention * time.Millisecond)
				res = clean(round)
			}
			mkCheckFinal(t, g, mkRead(t, l), idx.Entries(), res.MappedEnd)
			// The index files hold what the index holds in memory.
			reopened, warns, err := OpenTxnIndex(idxDir)
			if err != nil || len(warns) > 0 {
				t.Fatalf("reopen index: %v %v", err, warns)
			}
			if got, want := reopened.Entries(), idx.Entries(); !slices.Equal(got, want) {
				t.Fatalf("index files hold %v, memory %v", got, want)
			}
		})
	}
	t.Logf("markers given a horizon %d, removed %d; aborted index entries done %d", totalHorizons, totalRemoved, totalDone)
	if totalRemoved == 0 || totalDone == 0 {
		t.Fatalf("the generated logs never had a marker removed (%d) or an index entry done (%d)", totalRemoved, totalDone)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// mkTxnOf returns the transaction of g that batch h (of a producer)
// belongs to: for a marker the one it ends, for a data batch the one
// holding it.
func mkTxnOf(g *mkLog, h Header) *mkTxn {
	for _, tx := range g.txns {
		if tx.pid != h.ProducerID {
			continue
		}
		if h.Control() && tx.marker == h.BaseOffset {
			return tx
		}
		if !h.Control() && slices.Contains(tx.dataBatches, h.BaseOffset) {
			return tx
		}
	}
	return nil
}

func mkCheck(t *testing.T, round int, g *mkLog, before, after []mkBatch, res CleanResult, nowMs int64) {
	t.Helper()
	prev := int64(-1)
	present := map[int64]Header{} // by base offset
	for _, x := range after {
		if x.h.BaseOffset <= prev {
			t.Fatalf("round %d: batch at %d after offset %d", round, x.h.BaseOffset, prev)
		}
		prev = x.h.LastOffset()
		present[x.h.BaseOffset] = x.h
	}
	// A transactional data batch left keeps its marker.
	for _, x := range after {
		if x.h.Transactional() && !x.h.Control() {
			tx := mkTxnOf(g, x.h)
			if tx == nil {
				t.Fatalf("round %d: batch at %d of producer %d belongs to no transaction", round, x.h.BaseOffset, x.h.ProducerID)
			}
			if _, ok := present[tx.marker]; tx.marker >= 0 && !ok {
				t.Fatalf("round %d: transaction %+v has a batch at %d but its marker is gone", round, *tx, x.h.BaseOffset)
			}
		}
	}
	// No index entry without its marker.
	for _, e := range g.idx.Entries() {
		if h, ok := present[e.LastOffset]; !ok || !h.Control() {
			t.Fatalf("round %d: index entry %+v but no marker at %d", round, e, e.LastOffset)
		}
	}
	// A marker went only past the horizon it had; nothing changed from
	// the first uncleanable offset on.
	for _, x := range before {
		_, kept := present[x.h.BaseOffset]
		if x.h.Control() && !kept {
			if hz, ok := x.h.DeleteHorizon(); !ok || hz > nowMs {
				t.Fatalf("round %d: marker at %d removed, horizon %d (set %v) at %d", round, x.h.BaseOffset, hz, ok, nowMs)
			}
		}
		if x.h.BaseOffset >= res.FirstUncleanable {
			i := slices.IndexFunc(after, func(y mkBatch) bool { return y.h.BaseOffset == x.h.BaseOffset })
			if i < 0 || !bytes.Equal(after[i].b, x.b) {
				t.Fatalf("round %d: batch at %d at or above the first uncleanable offset %d changed", round, x.h.BaseOffset, res.FirstUncleanable)
			}
		}
	}
	for pid, last := range g.lastData {
		if !slices.ContainsFunc(after, func(y mkBatch) bool { return y.h.ProducerID == pid && y.h.LastOffset() == last }) {
			t.Fatalf("round %d: producer %d's last batch (last offset %d) is gone", round, pid, last)
		}
	}
}

// mkCheckFinal: every marker below end whose transaction has no batch left
// is gone, and so is its index entry.
func mkCheckFinal(t *testing.T, g *mkLog, batches []mkBatch, entries []AbortedTxn, end int64) {
	t.Helper()
	hasData := map[*mkTxn]bool{}
	for _, x := range batches {
		if x.h.Transactional() && !x.h.Control() {
			hasData[mkTxnOf(g, x.h)] = true
		}
	}
	for _, x := range batches {
		if !x.h.Control() || x.h.BaseOffset >= end {
			continue
		}
		if tx := mkTxnOf(g, x.h); tx != nil && !hasData[tx] {
			t.Errorf("marker at %d (commit %v) kept, its transaction has no batch left", x.h.BaseOffset, tx.commit)
		}
	}
	for _, e := range entries {
		if e.LastOffset < end {
			tx := mkTxnOf(g, Header{BaseOffset: e.LastOffset, ProducerID: e.ProducerID, Attributes: attrControl})
			if tx == nil || !hasData[tx] {
				t.Errorf("index entry %+v kept, its transaction has no batch left", e)
			}
		}
	}
}
