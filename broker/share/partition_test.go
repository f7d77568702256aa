package share

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

var testLimits = Limits{Lock: 10 * time.Second, DeliveryCountLimit: 3, MaxRecordLocks: 100}

// batches returns batches of size records each covering [from, to).
func batches(from, to, size int64) []Batch {
	var out []Batch
	for b := from; b < to; b += size {
		out = append(out, Batch{Base: b, Last: min(b+size, to) - 1})
	}
	return out
}

func TestPartitionAcquireAndAccept(t *testing.T) {
	p := NewPartition(0)
	now := time.Unix(1000, 0)
	got := p.Acquire("a", batches(0, 10, 5), 100, false, now, testLimits)
	if want := []AcquiredRange{{0, 9, 1}}; !slices.Equal(got, want) {
		t.Fatalf("acquired %v, want %v", got, want)
	}
	if off, ok := p.FetchOffset(now, testLimits); off != 10 || !ok {
		t.Fatalf("fetch offset %d %v, want 10 true", off, ok)
	}
	// Another member cannot acknowledge a's records.
	if _, code := p.Acknowledge("b", []AckBatch{{0, 4, []int8{AckAccept}}}, now, testLimits); code != kerr.InvalidRecordState.Code {
		t.Fatalf("b's ack: code %d, want INVALID_RECORD_STATE", code)
	}
	if _, code := p.Acknowledge("a", []AckBatch{{0, 4, []int8{AckAccept}}}, now, testLimits); code != 0 {
		t.Fatalf("ack: code %d", code)
	}
	if start, end := p.Offsets(); start != 5 || end != 10 {
		t.Fatalf("offsets %d %d, want 5 10", start, end)
	}
	// An acknowledged record cannot be acknowledged again.
	if _, code := p.Acknowledge("a", []AckBatch{{4, 5, []int8{AckAccept}}}, now, testLimits); code != kerr.InvalidRecordState.Code {
		t.Fatalf("second ack: code %d, want INVALID_RECORD_STATE", code)
	}
}

func TestPartitionStrictAndBatchLimits(t *testing.T) {
	now := time.Unix(1000, 0)
	p := NewPartition(0)
	if got := p.Acquire("a", batches(0, 10, 5), 3, true, now, testLimits); !slices.Equal(got, []AcquiredRange{{0, 2, 1}}) {
		t.Fatalf("strict: %v", got)
	}
	p = NewPartition(0)
	if got := p.Acquire("a", batches(0, 10, 5), 3, false, now, testLimits); !slices.Equal(got, []AcquiredRange{{0, 4, 1}}) {
		t.Fatalf("batch mode: %v, want the whole first batch", got)
	}
	// The in-flight window stops acquisition at MaxRecordLocks.
	p = NewPartition(0)
	l := testLimits
	l.MaxRecordLocks = 4
	if got := p.Acquire("a", batches(0, 10, 5), 100, false, now, l); !slices.Equal(got, []AcquiredRange{{0, 3, 1}}) {
		t.Fatalf("window: %v", got)
	}
	if _, ok := p.FetchOffset(now, l); ok {
		t.Fatal("a full window offers records")
	}
}

func TestPartitionLockExpiryAndDeliveryLimit(t *testing.T) {
	p := NewPartition(0)
	now := time.Unix(1000, 0)
	for i := 1; i <= int(testLimits.DeliveryCountLimit); i++ {
		got := p.Acquire("a", batches(0, 2, 2), 100, false, now, testLimits)
		if want := []AcquiredRange{{0, 1, int16(i)}}; !slices.Equal(got, want) {
			t.Fatalf("delivery %d: %v, want %v", i, got, want)
		}
		if p.Expire(now.Add(testLimits.Lock-time.Millisecond), testLimits) {
			t.Fatal("lock expired early")
		}
		now = now.Add(testLimits.Lock)
		if !p.Expire(now, testLimits) {
			t.Fatalf("delivery %d: lock did not expire", i)
		}
	}
	// Delivered DeliveryCountLimit times: archived, and the start moves.
	if start, end := p.Offsets(); start != 2 || end != 2 {
		t.Fatalf("offsets %d %d, want 2 2", start, end)
	}
}

func TestPartitionAckTypes(t *testing.T) {
	now := time.Unix(1000, 0)
	p := NewPartition(0)
	p.Acquire("a", batches(0, 5, 5), 100, false, now, testLimits)
	// Per-offset types: accept, release, reject, renew, gap.
	undo, code := p.Acknowledge("a", []AckBatch{{0, 4, []int8{AckAccept, AckRelease, AckReject, AckRenew, AckGap}}}, now.Add(5*time.Second), testLimits)
	if code != 0 {
		t.Fatalf("code %d", code)
	}
	if c := p.Counts(); c != (Counts{Available: 1, Acquired: 1, Archived: 2}) {
		t.Fatalf("counts %+v", c)
	}
	// Offset 3 was renewed: its lock runs from now+5s.
	if p.Expire(now.Add(testLimits.Lock), testLimits); p.Counts().Acquired != 1 {
		t.Fatal("renewed lock expired")
	}
	// The released offset 1 is offered first and redelivered.
	if off, _ := p.FetchOffset(now, testLimits); off != 1 {
		t.Fatalf("fetch offset %d, want 1", off)
	}
	if got := p.Acquire("b", batches(0, 5, 5), 100, false, now, testLimits); !slices.Equal(got, []AcquiredRange{{1, 1, 2}}) {
		t.Fatalf("redelivered %v", got)
	}
	_ = undo
}

func TestPartitionAcknowledgeUndo(t *testing.T) {
	now := time.Unix(1000, 0)
	p := NewPartition(0)
	p.Acquire("a", batches(0, 4, 4), 100, false, now, testLimits)
	undo, code := p.Acknowledge("a", []AckBatch{{0, 3, []int8{AckAccept}}}, now, testLimits)
	if code != 0 {
		t.Fatal(code)
	}
	undo()
	if start, end := p.Offsets(); start != 0 || end != 4 || p.Counts().Acquired != 4 {
		t.Fatalf("after undo: %d %d %+v", start, end, p.Counts())
	}
}

func TestPartitionControlBatchesAndGaps(t *testing.T) {
	now := time.Unix(1000, 0)
	p := NewPartition(0)
	// 0-1 data, 2 a marker, 3-4 compacted away, 5-6 data.
	bs := []Batch{{Base: 0, Last: 1}, {Base: 2, Last: 2, Archive: true}, {Base: 5, Last: 6}}
	got := p.Acquire("a", bs, 100, false, now, testLimits)
	if want := []AcquiredRange{{0, 1, 1}, {5, 6, 1}}; !slices.Equal(got, want) {
		t.Fatalf("acquired %v, want %v", got, want)
	}
	if _, code := p.Acknowledge("a", []AckBatch{{0, 1, []int8{AckAccept}}, {5, 6, []int8{AckAccept}}}, now, testLimits); code != 0 {
		t.Fatal(code)
	}
	if start, end := p.Offsets(); start != 7 || end != 7 {
		t.Fatalf("offsets %d %d, want 7 7", start, end)
	}
}

func TestPartitionReleaseMember(t *testing.T) {
	now := time.Unix(1000, 0)
	p := NewPartition(0)
	p.Acquire("a", batches(0, 3, 3), 100, false, now, testLimits)
	p.Acquire("b", batches(3, 6, 3), 100, false, now, testLimits)
	if !p.ReleaseMember("a", testLimits) {
		t.Fatal("nothing released")
	}
	if c := p.Counts(); c.Available != 3 || c.Acquired != 3 {
		t.Fatalf("counts %+v", c)
	}
}

func TestValidateAckBatches(t *testing.T) {
	for i, c := range []struct {
		b    []AckBatch
		want int16
	}{
		{[]AckBatch{{0, 3, []int8{1}}}, 0},
		{[]AckBatch{{0, 1, []int8{1, 2}}}, 0},
		{[]AckBatch{{3, 1, []int8{1}}}, kerr.InvalidRequest.Code},
		{[]AckBatch{{0, 3, nil}}, kerr.InvalidRequest.Code},
		{[]AckBatch{{0, 3, []int8{1, 1}}}, kerr.InvalidRequest.Code},
		{[]AckBatch{{0, 3, []int8{1}}, {3, 4, []int8{1}}}, kerr.InvalidRequest.Code},
		{[]AckBatch{{0, 0, []int8{AckRenew}}}, kerr.InvalidRequest.Code},
		{[]AckBatch{{0, 0, []int8{-1}}}, kerr.InvalidRequest.Code},
	} {
		if got := ValidateAckBatches(c.b, AckReject); got != c.want {
			t.Errorf("#%d: got %d, want %d", i, got, c.want)
		}
	}
}

func TestAssignSimple(t *testing.T) {
	parts := func(string) int32 { return 3 }
	a := assign(map[string][]string{"m1": {"t"}}, parts)
	if !slices.Equal(a["m1"]["t"], []int32{0, 1, 2}) {
		t.Fatalf("one member: %v", a)
	}
	a = assign(map[string][]string{"m1": {"t"}, "m2": {"t"}}, parts)
	if !slices.Equal(a["m1"]["t"], []int32{0, 2}) || !slices.Equal(a["m2"]["t"], []int32{1}) {
		t.Fatalf("two members: %v", a)
	}
	members := map[string][]string{}
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		members[id] = []string{"t"}
	}
	a = assign(members, parts)
	count := map[int32]int{}
	for _, m := range a {
		if len(m["t"]) != 1 {
			t.Fatalf("five members: %v", a)
		}
		count[m["t"][0]]++
	}
	if len(count) != 3 {
		t.Fatalf("five members leave a partition unassigned: %v", a)
	}
}

func TestPartitionSkipTo(t *testing.T) {
	now := time.Unix(1000, 0)
	p := NewPartition(0)
	p.Acquire("a", batches(0, 6, 3), 100, false, now, testLimits)
	p.SkipTo(4)
	if start, end := p.Offsets(); start != 4 || end != 6 || p.Counts().Acquired != 2 {
		t.Fatalf("after skip: %d %d %+v", start, end, p.Counts())
	}
	p.SkipTo(10)
	if start, end := p.Offsets(); start != 10 || end != 10 {
		t.Fatalf("skip past the end: %d %d", start, end)
	}
}

// FuzzPartition drives a share partition with operations decoded from
// the input (acquire, acknowledge with any batches, expire, release) and
// checks the invariants: no panic, start <= end, the window within
// MaxRecordLocks, every offset of the window has a record, no record is
// delivered more often than the delivery limit.
func FuzzPartition(f *testing.F) {
	f.Add([]byte{0, 3, 10, 1, 0, 2, 1, 2, 4, 0, 3, 1})
	f.Add([]byte{0, 9, 9, 0, 9, 9, 2, 5, 0, 1, 1, 1, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		l := Limits{Lock: time.Second, DeliveryCountLimit: 3, MaxRecordLocks: 16}
		p := NewPartition(0)
		now := time.Unix(0, 0)
		next := func() int64 {
			if len(ops) == 0 {
				return 0
			}
			v := int64(ops[0])
			ops = ops[1:]
			return v
		}
		for len(ops) > 0 {
			member := []string{"a", "b"}[next()%2]
			switch next() % 4 {
			case 0:
				from, _ := p.FetchOffset(now, l)
				p.Acquire(member, batches(from, from+next()%20+1, next()%5+1), int(next()%10), next()%2 == 0, now, l)
			case 1:
				first := next()
				last := first + next()%8
				types := []int8{int8(next() % 5)}
				if next()%2 == 0 {
					types = make([]int8, last-first+1)
					for i := range types {
						types[i] = int8(next() % 5)
					}
				}
				b := []AckBatch{{First: first, Last: last, Types: types}}
				if ValidateAckBatches(b, AckRenew) == 0 {
					p.Acknowledge(member, b, now, l)
				}
			case 2:
				now = now.Add(time.Duration(next()) * 10 * time.Millisecond)
				p.Expire(now, l)
			case 3:
				p.ReleaseMember(member, l)
			}
			p.mu.Lock()
			if p.mu.start > p.mu.end || p.mu.end-p.mu.start > int64(l.MaxRecordLocks) {
				t.Fatalf("window [%d, %d)", p.mu.start, p.mu.end)
			}
			for o := p.mu.start; o < p.mu.end; o++ {
				r := p.mu.inflight[o]
				if r == nil || r.deliveries > l.DeliveryCountLimit {
					t.Fatalf("offset %d: record %+v", o, r)
				}
			}
			p.mu.Unlock()
		}
	})
}
