package segment

import (
	"errors"
	"testing"
)

func TestControlBatchRoundTrip(t *testing.T) {
	for _, commit := range []bool{false, true} {
		b := ControlBatch(42, 7, commit, 3, 1700000000000)
		h, err := ValidateBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		if !h.Control() || !h.Transactional() || h.ProducerID != 42 || h.ProducerEpoch != 7 || h.BaseSequence != -1 || h.RecordCount != 1 || h.LastOffsetDelta != 0 {
			t.Fatalf("header %+v", h)
		}
		c, ok, err := ParseControlBatch(b)
		if err != nil || !ok {
			t.Fatalf("parse: %v %v", ok, err)
		}
		if c.Commit() != commit || c.CoordinatorEpoch != 3 {
			t.Fatalf("marker %+v, want commit=%v epoch 3", c, commit)
		}
	}
}

func TestParseControlRecordRejects(t *testing.T) {
	cases := []struct{ key, value []byte }{
		{nil, []byte{0, 0, 0, 0, 0, 1}},
		{[]byte{0, 0, 0}, []byte{0, 0, 0, 0, 0, 1}},
		{[]byte{0, 0, 0, 2}, []byte{0, 0, 0, 0, 0, 1}}, // unknown type
		{[]byte{0xff, 0xff, 0, 1}, []byte{0, 0, 0, 0, 0, 1}},
		{[]byte{0, 0, 0, 1}, []byte{0, 0, 0, 0, 0}},
		{[]byte{0, 0, 0, 1}, []byte{0x80, 0, 0, 0, 0, 0}},
	}
	for i, c := range cases {
		if _, err := ParseControlRecord(c.key, c.value); !errors.Is(err, ErrBadControl) {
			t.Errorf("case %d: err %v, want ErrBadControl", i, err)
		}
	}
	// A higher version with trailing bytes is read, as Kafka does.
	c, err := ParseControlRecord([]byte{0, 1, 0, 1, 9}, []byte{0, 1, 0, 0, 0, 5, 7, 7})
	if err != nil || !c.Commit() || c.CoordinatorEpoch != 5 {
		t.Fatalf("%+v %v", c, err)
	}
	// A data batch is not a control batch.
	b, _ := BuildBatch(BatchSpec{Records: []Record{{Value: []byte("x")}}})
	if _, _, err := ParseControlBatch(b); !errors.Is(err, ErrBadControl) {
		t.Fatalf("data batch: %v", err)
	}
}

func FuzzParseControlRecord(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1}, []byte{0, 0, 0, 0, 0, 3})
	f.Add([]byte{0, 0, 0, 0}, []byte{0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 2}, []byte{})
	f.Add([]byte{}, []byte{0, 0})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		c, err := ParseControlRecord(key, value)
		if err != nil {
			if !errors.Is(err, ErrBadControl) {
				t.Fatalf("error %v does not wrap ErrBadControl", err)
			}
			return
		}
		if c.Type != ControlAbort && c.Type != ControlCommit {
			t.Fatalf("accepted type %d", c.Type)
		}
		// What was accepted round-trips through ControlBatch.
		b := ControlBatch(1, 0, c.Commit(), c.CoordinatorEpoch, 0)
		c2, ok, err := ParseControlBatch(b)
		if err != nil || !ok || c2 != c {
			t.Fatalf("round trip %+v -> %+v %v %v", c, c2, ok, err)
		}
	})
}
