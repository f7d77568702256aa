package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"
)

// The value of every record loadgen produces:
//
//	bytes 0-7    wall-clock time of the Produce call, Unix nanoseconds,
//	             big endian: the consumers' end-to-end latency
//	bytes 8-15   the record's index in the run (0, 1, 2, ...), big endian;
//	             only in values of 16 bytes or more
//	bytes 16-    filler, the same in every record, varied enough that
//	             compression has realistic but not degenerate input
//
// With one producer, record i goes to partition i mod P, so in a topic
// filled by one run record i sits at offset i div P of its partition:
// what -mode verify checks.
const (
	sentAtEnd = 8
	indexEnd  = 16
)

// values builds and checks record values of one size.
type values struct {
	filler []byte
}

func newValues(size int) *values {
	f := make([]byte, size)
	for i := range f {
		f[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[(i*7+i/13)%36]
	}
	return &values{filler: f}
}

// build returns a new value for record index sent at t.
func (v *values) build(t time.Time, index int64) []byte {
	b := bytes.Clone(v.filler)
	binary.BigEndian.PutUint64(b, uint64(t.UnixNano()))
	if len(b) >= indexEnd {
		binary.BigEndian.PutUint64(b[sentAtEnd:], uint64(index))
	}
	return b
}

// check reports whether b is the value of record index (any send time).
func (v *values) check(b []byte, index int64) error {
	switch {
	case len(b) != len(v.filler):
		return fmt.Errorf("value of %d bytes, want %d", len(b), len(v.filler))
	case len(b) < indexEnd:
		return fmt.Errorf("value of %d bytes carries no index (want at least %d)", len(b), indexEnd)
	case binary.BigEndian.Uint64(b[sentAtEnd:]) != uint64(index):
		return fmt.Errorf("value of record %d, want record %d", binary.BigEndian.Uint64(b[sentAtEnd:]), index)
	case !bytes.Equal(b[indexEnd:], v.filler[indexEnd:]):
		return fmt.Errorf("record %d: filler differs", index)
	}
	return nil
}

// sentAt returns the send time in value b, if it has one.
func sentAt(b []byte) (time.Time, bool) {
	if len(b) < sentAtEnd {
		return time.Time{}, false
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(b))), true
}
