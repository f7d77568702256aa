package segment

import (
	"encoding/binary"
	"fmt"
)

// Control batches carry transaction markers (Kafka's EndTransactionMarker):
// a batch with the transactional and control attributes, the producer's id
// and epoch, base sequence -1 and exactly one record whose key and value
// are
//
//	key    version int16 (0) | type int16 (0 ABORT, 1 COMMIT)
//	value  version int16 (0) | coordinator epoch int32
//
// Kafka's readers accept a higher version and ignore trailing bytes; so
// does ParseControlRecord.

// Control record types (Kafka's ControlRecordType).
const (
	ControlAbort  int16 = 0
	ControlCommit int16 = 1
)

// ErrBadControl says a control batch's record is not a transaction marker.
var ErrBadControl = fmt.Errorf("%w: bad control record", ErrCorrupt)

// ControlBatch returns a transaction marker batch at base offset 0 for the
// producer: a COMMIT marker when commit, else an ABORT marker, written by
// the coordinator of epoch coordinatorEpoch, with timestamp timestampMs.
// The log gives it its offset and leader epoch on append.
func ControlBatch(producerID int64, epoch int16, commit bool, coordinatorEpoch int32, timestampMs int64) []byte {
	typ := ControlAbort
	if commit {
		typ = ControlCommit
	}
	key := binary.BigEndian.AppendUint16(make([]byte, 0, 4), 0)
	key = binary.BigEndian.AppendUint16(key, uint16(typ))
	val := binary.BigEndian.AppendUint16(make([]byte, 0, 6), 0)
	val = binary.BigEndian.AppendUint32(val, uint32(coordinatorEpoch))
	b, err := BuildBatch(BatchSpec{
		Idempotent: true, ProducerID: producerID, ProducerEpoch: epoch, BaseSequence: -1,
		Transactional: true, Control: true,
		Records: []Record{{Timestamp: timestampMs, Key: key, Value: val}},
	})
	if err != nil {
		panic(err) // a fixed-size, uncompressed batch: not reached
	}
	return b
}

// ControlRecord is a decoded transaction marker.
type ControlRecord struct {
	Type             int16 // ControlAbort or ControlCommit
	CoordinatorEpoch int32
}

// Commit reports whether the marker commits its transaction.
func (c ControlRecord) Commit() bool { return c.Type == ControlCommit }

// ParseControlRecord decodes the key and value of a control record. Errors
// wrap ErrBadControl.
func ParseControlRecord(key, value []byte) (ControlRecord, error) {
	if len(key) < 4 {
		return ControlRecord{}, fmt.Errorf("%w: key of %d bytes", ErrBadControl, len(key))
	}
	if v := int16(binary.BigEndian.Uint16(key)); v < 0 {
		return ControlRecord{}, fmt.Errorf("%w: key version %d", ErrBadControl, v)
	}
	c := ControlRecord{Type: int16(binary.BigEndian.Uint16(key[2:]))}
	if c.Type != ControlAbort && c.Type != ControlCommit {
		return ControlRecord{}, fmt.Errorf("%w: type %d is not a transaction marker", ErrBadControl, c.Type)
	}
	if len(value) < 6 {
		return ControlRecord{}, fmt.Errorf("%w: value of %d bytes", ErrBadControl, len(value))
	}
	if v := int16(binary.BigEndian.Uint16(value)); v < 0 {
		return ControlRecord{}, fmt.Errorf("%w: value version %d", ErrBadControl, v)
	}
	c.CoordinatorEpoch = int32(binary.BigEndian.Uint32(value[2:]))
	return c, nil
}

// ParseControlBatch decodes the marker of a whole control batch (header
// and records; it may be compressed). ok is false for a control batch
// without records, which compaction leaves when it removed the marker
// (Kafka ignores those). Errors wrap ErrCorrupt.
func ParseControlBatch(batch []byte) (c ControlRecord, ok bool, err error) {
	it, err := NewRecordIter(batch, 1<<20)
	if err != nil {
		return c, false, err
	}
	h := it.Header()
	if !h.Control() {
		return c, false, fmt.Errorf("%w: not a control batch", ErrBadControl)
	}
	rec, ok, err := it.Next()
	if err != nil || !ok {
		return c, false, err
	}
	c, err = ParseControlRecord(rec.Key, rec.Value)
	if err != nil {
		return c, false, err
	}
	return c, true, nil
}
