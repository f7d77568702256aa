package main

import (
	"encoding/binary"
	"testing"
)

// batchHeader returns a record batch of size bytes (header and zeroed
// records) with the fields walkBatches reads.
func batchHeader(base int64, lastDelta, records int32, size int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint64(b, uint64(base))
	binary.BigEndian.PutUint32(b[8:], uint32(size-12))
	binary.BigEndian.PutUint32(b[23:], uint32(lastDelta))
	binary.BigEndian.PutUint32(b[57:], uint32(records))
	return b
}

func TestWalkBatches(t *testing.T) {
	two := append(batchHeader(0, 9, 10, 100), batchHeader(10, 4, 5, 80)...)
	for i, tc := range []struct {
		in            []byte
		n             int
		last, records int64
	}{
		{nil, 0, -1, 0},
		{batchHeader(0, 9, 10, 100), 100, 9, 10},
		{two, 180, 14, 15},
		// A partial batch at the end (the fetch's size limit cut it) is
		// not counted.
		{two[:150], 100, 9, 10},
		{two[:60], 0, -1, 0},
	} {
		n, last, records := walkBatches(tc.in)
		if n != tc.n || last != tc.last || records != tc.records {
			t.Errorf("#%d: got %d bytes, last %d, %d records; want %d, %d, %d", i, n, last, records, tc.n, tc.last, tc.records)
		}
	}
}
