package producer

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/stratastream/strata/segment"
)

// txnModel is the reference for the property test: the log as a list of
// batches, from which everything is recomputed from scratch.
type txnModel struct {
	batches []modelBatch
}

type modelBatch struct {
	base, last int64
	pid        int64 // -1: no producer
	txn        bool
	marker     int // 0 data, 1 commit, 2 abort
}

type modelView struct {
	open    map[int64]int64 // pid -> first offset of its open transaction
	aborted []segment.AbortedTxn
	done    []CompletedTxn // every completed transaction, in marker order
}

func (m *txnModel) view() modelView {
	v := modelView{open: map[int64]int64{}}
	for _, b := range m.batches {
		switch {
		case b.marker != 0:
			first, ok := v.open[b.pid]
			if !ok {
				continue
			}
			delete(v.open, b.pid)
			lso := b.base + 1
			for _, f := range v.open {
				lso = min(lso, f)
			}
			c := CompletedTxn{ProducerID: b.pid, FirstOffset: first, LastOffset: b.base, Aborted: b.marker == 2, LastStableOffset: lso}
			v.done = append(v.done, c)
			if c.Aborted {
				v.aborted = append(v.aborted, c.AbortedTxn())
			}
		case b.txn:
			if _, ok := v.open[b.pid]; !ok {
				v.open[b.pid] = b.base
			}
		}
	}
	return v
}

func (m *txnModel) lso(hw int64) int64 {
	v := m.view()
	lso := hw
	for _, f := range v.open {
		lso = min(lso, f)
	}
	for _, c := range v.done {
		if c.LastOffset >= hw {
			lso = min(lso, c.FirstOffset)
		}
	}
	return lso
}

func (m *txnModel) truncate(end int64) {
	for len(m.batches) > 0 && m.batches[len(m.batches)-1].base >= end {
		m.batches = m.batches[:len(m.batches)-1]
	}
}

// txnPartition is the broker's glue around a real log, a StateManager and
// a TxnIndex, as package broker wires them (idempotence.go,
// txn_partition.go).
type txnPartition struct {
	t   *testing.T
	dir string
	l   *segment.Log
	s   *StateManager
	x   *segment.TxnIndex
}

func (p *txnPartition) segBase(off int64) int64 {
	base := int64(0)
	for _, si := range p.l.Segments() {
		if si.BaseOffset <= off {
			base = si.BaseOffset
		}
	}
	return base
}

func (p *txnPartition) load() {
	p.t.Helper()
	x, _, err := segment.OpenTxnIndex(p.dir)
	if err != nil {
		p.t.Fatal(err)
	}
	p.x = x
	p.s = NewStateManager(0)
	p.reload()
}

func (p *txnPartition) reload() {
	p.t.Helper()
	rep, err := p.s.Load(p.dir, p.l.LogStartOffset(), p.l.LogEndOffset(), readerOf(p.l))
	if err != nil {
		p.t.Fatal(err)
	}
	if err := p.x.TruncateTo(rep.ReplayFrom); err != nil {
		p.t.Fatal(err)
	}
	for _, c := range rep.Completed {
		if c.Aborted {
			if err := p.x.Append(p.segBase(c.LastOffset), c.AbortedTxn()); err != nil {
				p.t.Fatal(err)
			}
		}
	}
}

func (p *txnPartition) append(b []byte) int64 {
	p.t.Helper()
	h, err := segment.ParseHeader(b)
	if err != nil {
		p.t.Fatal(err)
	}
	if !h.Control() && h.BaseSequence >= 0 {
		if dup, err := p.s.Check(h); dup != nil || err != nil {
			p.t.Fatalf("Check refused %+v: %v %v", h, dup, err)
		}
	}
	res, err := p.l.Append(b, segment.AppendOptions{})
	if err != nil {
		p.t.Fatal(err)
	}
	stored, _ := segment.ParseHeader(b)
	p.s.Update(stored, res.BaseOffset)
	if stored.Control() {
		m, ok, err := segment.ParseControlBatch(b)
		if err != nil || !ok {
			p.t.Fatalf("marker: %v %v", ok, err)
		}
		if c, ok := p.s.ApplyMarker(stored, m, res.BaseOffset); ok && c.Aborted {
			if err := p.x.Append(p.segBase(res.BaseOffset), c.AbortedTxn()); err != nil {
				p.t.Fatal(err)
			}
		}
	}
	return res.BaseOffset
}

// TestTxnStateProperty appends random interleavings of several
// producers' transactional batches (with and without sequences), plain
// batches and commit/abort markers (some for empty transactions) to a
// real segment log, with snapshots, restarts, truncations (as a follower
// does) and a rising high watermark, and compares the state's LSO, open
// transactions and the aborted-transaction index (as loaded from its
// files) with a model recomputed from the log's batches.
func TestTxnStateProperty(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { txnProperty(t, seed) })
	}
}

func txnProperty(t *testing.T, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	dir := filepath.Join(t.TempDir(), "topic-0")
	p := &txnPartition{t: t, dir: dir, l: openLog(t, dir)}
	p.load()
	var m txnModel
	const producers = 4
	seq := map[int64]int32{}
	var hw int64
	for step := range 400 {
		pid := int64(rng.Intn(producers))
		switch r := rng.Intn(100); {
		case r < 45: // a transactional batch
			n := 1 + rng.Intn(3)
			spec := segment.BatchSpec{Idempotent: true, Transactional: true, ProducerID: pid, BaseSequence: seq[pid]}
			if pid == 3 {
				spec.BaseSequence = -1 // as the group coordinator's offset commits
			} else {
				seq[pid] += int32(n)
			}
			for range n {
				spec.Records = append(spec.Records, segment.Record{Timestamp: int64(1000 + step), Value: []byte("x")})
			}
			b, err := segment.BuildBatch(spec)
			if err != nil {
				t.Fatal(err)
			}
			base := p.append(b)
			m.batches = append(m.batches, modelBatch{base: base, last: base + int64(n) - 1, pid: pid, txn: true})
		case r < 55: // a plain batch
			b, _ := segment.BuildBatch(segment.BatchSpec{Records: []segment.Record{{Timestamp: int64(step), Value: []byte("p")}}})
			base := p.append(b)
			m.batches = append(m.batches, modelBatch{base: base, last: base, pid: -1})
		case r < 80: // a marker
			commit := rng.Intn(2) == 0
			base := p.append(segment.ControlBatch(pid, 0, commit, 0, int64(step)))
			kind := 2
			if commit {
				kind = 1
			}
			m.batches = append(m.batches, modelBatch{base: base, last: base, pid: pid, marker: kind})
		case r < 88: // the high watermark rises
			hw = hw + rng.Int63n(p.l.LogEndOffset()-hw+1)
		case r < 93: // a snapshot at the log end, with the index synced first
			if err := p.x.Sync(); err != nil {
				t.Fatal(err)
			}
			if err := p.s.Snapshot(dir, p.l.LogEndOffset()); err != nil {
				t.Fatal(err)
			}
		case r < 97: // a restart
			if err := p.l.Close(); err != nil {
				t.Fatal(err)
			}
			p.l = openLog(t, dir)
			p.load()
		default: // a truncation above the high watermark, as a follower's
			end := p.l.LogEndOffset()
			to := hw + rng.Int63n(end-hw+1)
			if err := p.l.TruncateTo(to); err != nil {
				t.Fatal(err)
			}
			m.truncate(p.l.LogEndOffset())
			p.reload()
			for pid := range int64(producers) {
				// Sequences restart where the state says.
				if _, bs, ok := p.s.Producer(pid); ok && len(bs) > 0 {
					seq[pid] = bs[len(bs)-1].LastSeq + 1
				} else {
					seq[pid] = 0
				}
			}
		}
		hw = min(hw, p.l.LogEndOffset())
		v := m.view()
		if got, want := p.s.LastStableOffset(hw), m.lso(hw); got != want {
			t.Fatalf("step %d: LSO(%d) = %d, model %d", step, hw, got, want)
		}
		open := map[int64]int64{}
		for _, pi := range p.s.Describe() {
			if pi.TxnStartOffset >= 0 {
				open[pi.ProducerID] = pi.TxnStartOffset
			}
		}
		if !reflect.DeepEqual(open, v.open) {
			t.Fatalf("step %d: open transactions %v, model %v", step, open, v.open)
		}
		if got := p.x.Entries(); !(len(got) == 0 && len(v.aborted) == 0) && !reflect.DeepEqual(got, v.aborted) {
			t.Fatalf("step %d: index %+v, model %+v", step, got, v.aborted)
		}
		if got := p.x.CollectAborted(0, p.l.LogEndOffset()); len(got) != len(v.aborted) {
			t.Fatalf("step %d: collected %d, model %d", step, len(got), len(v.aborted))
		}
	}
	// The index files hold what the index says.
	x, warns, err := segment.OpenTxnIndex(dir)
	if err != nil || len(warns) > 0 {
		t.Fatalf("reopen index: %v %v", warns, err)
	}
	if got, want := x.Entries(), p.x.Entries(); !reflect.DeepEqual(got, want) {
		t.Fatalf("index files %+v, in memory %+v", got, want)
	}
	t.Logf("log end %d, %d segments, %d aborted transactions", p.l.LogEndOffset(), len(p.l.Segments()), len(p.x.Entries()))
}
