package segment

import (
	"context"
	"slices"
	"testing"
)

// TestCleanDropsAbortedTransactions: with the aborted-transaction index
// passed in, the cleaner drops the aborted transaction's records (and
// they shadow nothing), keeps the committed transaction's and the
// markers, and keeps an aborted batch empty when it is its producer's
// last; without the index the aborted record stays.
func TestCleanDropsAbortedTransactions(t *testing.T) {
	build := func(t *testing.T) *Log {
		l := lgOpen(t, t.TempDir(), lgConfig())
		for _, b := range [][]byte{
			mustBuild(t, BatchSpec{Records: []Record{{Timestamp: 1, Key: []byte("a"), Value: []byte("plain")}}}),                                                                    // 0
			mustBuild(t, BatchSpec{Idempotent: true, ProducerID: 5, Transactional: true, Records: []Record{{Timestamp: 2, Key: []byte("a"), Value: []byte("aborted")}}}),            // 1
			mustBuild(t, BatchSpec{Idempotent: true, ProducerID: 5, Transactional: true, BaseSequence: 1, Records: []Record{{Timestamp: 2, Key: []byte("c"), Value: []byte("x")}}}), // 2
			ControlBatch(5, 0, false, 0, 3), // 3: abort
			mustBuild(t, BatchSpec{Idempotent: true, ProducerID: 6, Transactional: true, Records: []Record{{Timestamp: 4, Key: []byte("b"), Value: []byte("committed")}}}), // 4
			ControlBatch(6, 0, true, 0, 5), // 5: commit
		} {
			lgAppend(t, l, b)
		}
		if _, err := l.rollForTest(); err != nil {
			t.Fatal(err)
		}
		return l
	}
	offsets := func(t *testing.T, l *Log) (recs []int64, empty []int64) {
		for _, b := range lgReadAll(t, l) {
			h, _ := ParseHeader(b)
			if h.RecordCount == 0 {
				empty = append(empty, h.BaseOffset)
			}
			rs, err := Records(b)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				recs = append(recs, r.Offset)
			}
		}
		return recs, empty
	}
	aborted := []AbortedTxn{{ProducerID: 5, FirstOffset: 1, LastOffset: 3, LastStableOffset: 4}}

	l := build(t)
	res, err := l.Clean(context.Background(), CleanConfig{Map: ctMap(t, 1<<12), ProducerLastOffsets: map[int64]int64{}, AbortedTxns: aborted})
	if err != nil {
		t.Fatal(err)
	}
	if recs, empty := offsets(t, l); !slices.Equal(recs, []int64{0, 3, 4, 5}) || len(empty) != 0 || res.AbortedRecordsDropped != 2 {
		t.Fatalf("kept %v (empty batches %v), dropped %d aborted; want [0 3 4 5], none, 2", recs, empty, res.AbortedRecordsDropped)
	}

	// Producer 5's last data batch (2) is kept, empty.
	l = build(t)
	if _, err := l.Clean(context.Background(), CleanConfig{Map: ctMap(t, 1<<12), ProducerLastOffsets: map[int64]int64{5: 2}, AbortedTxns: aborted}); err != nil {
		t.Fatal(err)
	}
	if recs, empty := offsets(t, l); !slices.Equal(recs, []int64{0, 3, 4, 5}) || !slices.Equal(empty, []int64{2}) {
		t.Fatalf("kept %v, empty batches %v; want [0 3 4 5] and [2]", recs, empty)
	}

	// Without the index the aborted records stay.
	l = build(t)
	if _, err := l.Clean(context.Background(), CleanConfig{Map: ctMap(t, 1<<12), ProducerLastOffsets: map[int64]int64{}}); err != nil {
		t.Fatal(err)
	}
	if recs, _ := offsets(t, l); !slices.Equal(recs, []int64{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("kept %v without the index, want everything", recs)
	}
}

func mustBuild(t *testing.T, spec BatchSpec) []byte {
	t.Helper()
	b, err := BuildBatch(spec)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCleanMapsCommittedTransactions: with TxnsComplete a committed
// transaction's record supersedes an older plain value of its key, as in
// Kafka, while an aborted transaction's later record of the same key
// supersedes nothing and is dropped; without it the committed record maps
// nothing and the plain value stays.
func TestCleanMapsCommittedTransactions(t *testing.T) {
	build := func(t *testing.T) *Log {
		l := lgOpen(t, t.TempDir(), lgConfig())
		for _, b := range [][]byte{
			mustBuild(t, BatchSpec{Records: []Record{{Timestamp: 1, Key: []byte("a"), Value: []byte("plain")}}}),                                                           // 0
			mustBuild(t, BatchSpec{Idempotent: true, ProducerID: 6, Transactional: true, Records: []Record{{Timestamp: 2, Key: []byte("a"), Value: []byte("committed")}}}), // 1
			ControlBatch(6, 0, true, 0, 3), // 2: commit
			mustBuild(t, BatchSpec{Idempotent: true, ProducerID: 5, Transactional: true, Records: []Record{{Timestamp: 4, Key: []byte("a"), Value: []byte("aborted")}}}), // 3
			ControlBatch(5, 0, false, 0, 5), // 4: abort
			mustBuild(t, BatchSpec{Records: []Record{{Timestamp: 6, Key: []byte("z"), Value: []byte("other")}}}), // 5
		} {
			lgAppend(t, l, b)
		}
		if _, err := l.rollForTest(); err != nil {
			t.Fatal(err)
		}
		return l
	}
	kept := func(t *testing.T, l *Log) (offs []int64) {
		for _, b := range lgReadAll(t, l) {
			rs, err := Records(b)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				offs = append(offs, r.Offset)
			}
		}
		return offs
	}
	aborted := []AbortedTxn{{ProducerID: 5, FirstOffset: 3, LastOffset: 4, LastStableOffset: 5}}
	for _, tt := range []struct {
		complete bool
		want     []int64
	}{
		{true, []int64{1, 2, 4, 5}},
		{false, []int64{0, 1, 2, 4, 5}},
	} {
		l := build(t)
		if _, err := l.Clean(context.Background(), CleanConfig{Map: ctMap(t, 1<<12), ProducerLastOffsets: map[int64]int64{}, AbortedTxns: aborted, TxnsComplete: tt.complete}); err != nil {
			t.Fatal(err)
		}
		if got := kept(t, l); !slices.Equal(got, tt.want) {
			t.Errorf("TxnsComplete %v: kept %v, want %v", tt.complete, got, tt.want)
		}
	}
}
