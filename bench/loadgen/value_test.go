package main

import (
	"testing"
	"time"
)

func TestValueRoundTrip(t *testing.T) {
	for i, size := range []int{16, 17, 100, 1024} {
		v := newValues(size)
		now := time.Unix(1700000000, 123456789)
		b := v.build(now, 42)
		if len(b) != size {
			t.Errorf("#%d: got %d bytes, want %d", i, len(b), size)
		}
		if got, ok := sentAt(b); !ok || !got.Equal(now) {
			t.Errorf("#%d: got sent at %v (%v), want %v", i, got, ok, now)
		}
		if err := v.check(b, 42); err != nil {
			t.Errorf("#%d: got %v, want a match", i, err)
		}
		if err := v.check(b, 43); err == nil {
			t.Errorf("#%d: record 42 passed as record 43", i)
		}
		b[size-1]++
		if err := v.check(b, 42); err == nil {
			t.Errorf("#%d: changed filler passed", i)
		}
	}
}

func TestValueWithoutIndex(t *testing.T) {
	v := newValues(8)
	b := v.build(time.Unix(0, 5), 7)
	if got, ok := sentAt(b); !ok || got.UnixNano() != 5 {
		t.Errorf("got sent at %v (%v), want 5 ns", got, ok)
	}
	if err := v.check(b, 7); err == nil {
		t.Errorf("an 8-byte value passed verify, which needs an index")
	}
}
