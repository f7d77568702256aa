package producer

import (
	"math"
	"testing"
	"time"

	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
)

// hdr is a produced batch header: records records, sequences from seq.
func hdr(pid int64, epoch int16, seq int32, records int32) segment.Header {
	return segment.Header{
		Magic:           segment.Magic,
		ProducerID:      pid,
		ProducerEpoch:   epoch,
		BaseSequence:    seq,
		LastOffsetDelta: records - 1,
		RecordCount:     records,
		MaxTimestamp:    1000,
	}
}

// partition simulates the server's append path over a StateManager.
type partition struct {
	t   *testing.T
	s   *StateManager
	leo int64
}

func newPartition(t *testing.T) *partition {
	return &partition{t: t, s: NewStateManager(0)}
}

// produce runs Check, "appends" when allowed and Updates, returning the
// base offset the producer is told and the Kafka error code.
func (p *partition) produce(h segment.Header) (base int64, code int16) {
	p.t.Helper()
	dup, err := p.s.Check(h)
	if err != nil {
		return -1, ErrorCode(err)
	}
	if dup != nil {
		return dup.FirstOffset, 0
	}
	base = p.leo
	p.leo += int64(h.LastOffsetDelta) + 1
	p.s.Update(h, base)
	return base, 0
}

func (p *partition) mustProduce(h segment.Header) int64 {
	p.t.Helper()
	base, code := p.produce(h)
	if code != 0 {
		p.t.Fatalf("produce pid %d epoch %d seq %d: error %d", h.ProducerID, h.ProducerEpoch, h.BaseSequence, code)
	}
	return base
}

func TestDuplicateOfEachCachedBatch(t *testing.T) {
	p := newPartition(t)
	// Six batches of 5 records: sequences 0-4, 5-9, ..., 25-29.
	var bases []int64
	for i := range 6 {
		bases = append(bases, p.mustProduce(hdr(7, 0, int32(i*5), 5)))
	}
	leo := p.leo
	for i := range 6 {
		base, code := p.produce(hdr(7, 0, int32(i*5), 5))
		wantBase, wantCode := bases[i], int16(0)
		if i == 0 { // evicted from the five cached: Kafka answers OOOSN
			wantBase, wantCode = -1, kerr.OutOfOrderSequenceNumber.Code
		}
		if base != wantBase || code != wantCode {
			t.Errorf("#%d: got base %d code %d, want base %d code %d", i, base, code, wantBase, wantCode)
		}
	}
	if p.leo != leo {
		t.Errorf("duplicates appended: log end %d, want %d", p.leo, leo)
	}
	// The producer goes on where it was.
	if base, code := p.produce(hdr(7, 0, 30, 1)); code != 0 || base != leo {
		t.Errorf("next batch: got base %d code %d, want base %d code 0", base, code, leo)
	}
}

func txnHdr(pid int64, epoch int16, seq, n int32) segment.Header {
	h := hdr(pid, epoch, seq, n)
	h.Attributes = 0x10
	return h
}

func TestCheckRules(t *testing.T) {
	const max = math.MaxInt32
	tests := []struct {
		name  string
		setup []segment.Header // produced first, must succeed
		probe segment.Header
		code  int16
		dup   bool // probe is answered as a duplicate
	}{
		{name: "non-idempotent", probe: hdr(-1, -1, -1, 3)},
		{name: "unknown producer at 0", probe: hdr(1, 0, 0, 1)},
		{name: "unknown producer at 42 (KIP-360)", probe: hdr(1, 0, 42, 1)},
		{name: "in sequence", setup: []segment.Header{hdr(1, 0, 0, 3)}, probe: hdr(1, 0, 3, 1)},
		{name: "gap", setup: []segment.Header{hdr(1, 0, 0, 3)}, probe: hdr(1, 0, 4, 1), code: kerr.OutOfOrderSequenceNumber.Code},
		{name: "behind, not cached", setup: []segment.Header{hdr(1, 0, 0, 3)}, probe: hdr(1, 0, 1, 2), code: kerr.OutOfOrderSequenceNumber.Code},
		{name: "duplicate", setup: []segment.Header{hdr(1, 0, 0, 3)}, probe: hdr(1, 0, 0, 3), dup: true},
		{name: "same first seq, other length", setup: []segment.Header{hdr(1, 0, 0, 3)}, probe: hdr(1, 0, 0, 2), code: kerr.OutOfOrderSequenceNumber.Code},
		{name: "stale epoch", setup: []segment.Header{hdr(1, 2, 0, 3)}, probe: hdr(1, 1, 3, 1), code: kerr.InvalidProducerEpoch.Code},
		{name: "stale epoch, duplicate range", setup: []segment.Header{hdr(1, 2, 0, 3)}, probe: hdr(1, 1, 0, 3), code: kerr.InvalidProducerEpoch.Code},
		{name: "epoch bump at 0", setup: []segment.Header{hdr(1, 0, 0, 3)}, probe: hdr(1, 1, 0, 1)},
		{name: "epoch bump not at 0", setup: []segment.Header{hdr(1, 0, 0, 3)}, probe: hdr(1, 1, 3, 1), code: kerr.OutOfOrderSequenceNumber.Code},
		{name: "epoch bump then old epoch", setup: []segment.Header{hdr(1, 0, 0, 3), hdr(1, 1, 0, 1)}, probe: hdr(1, 0, 3, 1), code: kerr.InvalidProducerEpoch.Code},
		{name: "old epoch's batch not a duplicate after bump", setup: []segment.Header{hdr(1, 0, 0, 3), hdr(1, 1, 0, 1)}, probe: hdr(1, 0, 0, 3), code: kerr.InvalidProducerEpoch.Code},
		{name: "other producer unaffected", setup: []segment.Header{hdr(1, 5, 0, 3)}, probe: hdr(2, 0, 0, 1)},
		{name: "wrap: last seq MaxInt32, next 0", setup: []segment.Header{hdr(1, 0, max-2, 3)}, probe: hdr(1, 0, 0, 1)},
		{name: "wrap: last seq MaxInt32, next MaxInt32+1 impossible, 1 is a gap", setup: []segment.Header{hdr(1, 0, max-2, 3)}, probe: hdr(1, 0, 1, 1), code: kerr.OutOfOrderSequenceNumber.Code},
		{name: "wrap inside a batch", setup: []segment.Header{hdr(1, 0, max-1, 4)}, probe: hdr(1, 0, 2, 1)},
		{name: "wrap inside a batch, duplicate", setup: []segment.Header{hdr(1, 0, max-1, 4)}, probe: hdr(1, 0, max-1, 4), dup: true},
		{name: "transactional", probe: txnHdr(1, 0, 0, 1)},
		{name: "transactional, stale epoch", setup: []segment.Header{hdr(1, 2, 0, 3)}, probe: txnHdr(1, 1, 3, 1), code: kerr.InvalidProducerEpoch.Code},
		{name: "transactional, gap", setup: []segment.Header{txnHdr(1, 0, 0, 3)}, probe: txnHdr(1, 0, 4, 1), code: kerr.OutOfOrderSequenceNumber.Code},
		{name: "transactional, duplicate", setup: []segment.Header{txnHdr(1, 0, 0, 3)}, probe: txnHdr(1, 0, 0, 3), dup: true},
		{name: "non-transactional inside a transaction", setup: []segment.Header{txnHdr(1, 0, 0, 3)}, probe: hdr(1, 0, 3, 1), code: kerr.InvalidTxnState.Code},
		{name: "control", probe: func() segment.Header { h := hdr(1, 0, 0, 1); h.Attributes = 0x30; return h }(), code: kerr.InvalidRecord.Code},
		{name: "control without producer", probe: func() segment.Header { h := hdr(-1, -1, -1, 1); h.Attributes = 0x20; return h }(), code: kerr.InvalidRecord.Code},
		{name: "negative sequence", probe: hdr(1, 0, -1, 1), code: kerr.InvalidRecord.Code},
		{name: "negative epoch", probe: hdr(1, -1, 0, 1), code: kerr.InvalidRecord.Code},
	}
	for i, tt := range tests {
		p := newPartition(t)
		for _, h := range tt.setup {
			p.mustProduce(h)
		}
		leo := p.leo
		dup, err := p.s.Check(tt.probe)
		if got := ErrorCode(err); got != tt.code {
			t.Errorf("#%d %s: got code %d (%v), want %d", i, tt.name, got, err, tt.code)
		}
		if (dup != nil) != tt.dup {
			t.Errorf("#%d %s: got duplicate %v, want %v", i, tt.name, dup, tt.dup)
		}
		if p.leo != leo {
			t.Errorf("#%d %s: Check changed the log", i, tt.name)
		}
	}
}

func TestDuplicateReturnsOriginalMetadata(t *testing.T) {
	p := newPartition(t)
	p.mustProduce(hdr(-1, -1, -1, 10)) // offsets 0-9 from someone else
	h := hdr(3, 0, 0, 4)
	h.MaxTimestamp = 12345
	p.mustProduce(h)
	dup, err := p.s.Check(h)
	want := BatchMeta{FirstSeq: 0, LastSeq: 3, FirstOffset: 10, LastOffset: 13, Timestamp: 12345}
	if err != nil || dup == nil || *dup != want {
		t.Fatalf("got %+v, %v; want %+v", dup, err, want)
	}
}

func TestUpdateNewEpochClearsCache(t *testing.T) {
	s := NewStateManager(0)
	s.Update(hdr(1, 0, 0, 2), 0)
	s.Update(hdr(1, 0, 2, 2), 2)
	s.Update(hdr(1, 1, 0, 1), 4)
	epoch, batches, ok := s.Producer(1)
	if !ok || epoch != 1 || len(batches) != 1 || batches[0].FirstOffset != 4 {
		t.Fatalf("got epoch %d batches %+v ok %v, want epoch 1 and the one batch at 4", epoch, batches, ok)
	}
	if got := s.End(); got != 5 {
		t.Errorf("End: got %d, want 5", got)
	}
}

func TestTruncateHeadAndExpiry(t *testing.T) {
	s := NewStateManager(0)
	a, b, a2 := hdr(1, 0, 0, 5), hdr(2, 0, 0, 5), hdr(1, 0, 5, 1)
	a.MaxTimestamp, b.MaxTimestamp, a2.MaxTimestamp = 1_000, 90_000_000, 2_000
	s.Update(a, 0)   // offsets 0-4
	s.Update(b, 5)   // offsets 5-9
	s.Update(a2, 10) // offset 10
	if n := s.TruncateHead(5); n != 0 {
		t.Errorf("TruncateHead(5): got %d, want 0 (producer 1 has a batch at 10)", n)
	}
	if n := s.TruncateHead(10); n != 1 {
		t.Errorf("TruncateHead(10): got %d, want 1", n)
	}
	if got := s.ProducerIDs(); len(got) != 1 || got[0] != 1 {
		t.Errorf("after TruncateHead: got %v, want [1]", got)
	}
	// Producer 1's last batch has timestamp 2000.
	now := time.UnixMilli(2_000 + 86_400_000 - 1)
	if n := s.ExpireProducers(now, 24*time.Hour); n != 0 {
		t.Errorf("ExpireProducers just before: got %d, want 0", n)
	}
	if n := s.ExpireProducers(now.Add(time.Millisecond), 24*time.Hour); n != 1 {
		t.Errorf("ExpireProducers at expiry: got %d, want 1", n)
	}
	// A forgotten producer is accepted at any sequence.
	if dup, err := s.Check(hdr(1, 0, 77, 1)); dup != nil || err != nil {
		t.Errorf("after expiry: got %v, %v; want accepted", dup, err)
	}
}

func TestIncrementSequence(t *testing.T) {
	const max = math.MaxInt32
	tests := []struct{ seq, n, want int32 }{
		{0, 0, 0}, {0, 1, 1}, {5, 4, 9},
		{max, 1, 0}, {max - 1, 1, max}, {max - 1, 3, 1}, {max, max, max - 1},
	}
	for i, tt := range tests {
		if got := incrementSequence(tt.seq, tt.n); got != tt.want {
			t.Errorf("#%d: incrementSequence(%d, %d): got %d, want %d", i, tt.seq, tt.n, got, tt.want)
		}
	}
}
