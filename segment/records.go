package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Errors found inside a batch's records section. Both wrap ErrCorrupt.
var (
	ErrBadRecord   = fmt.Errorf("%w: malformed record", ErrCorrupt)
	ErrRecordCount = fmt.Errorf("%w: records do not match the header's count", ErrCorrupt)
)

// minRecordSize is the smallest encoding of a record: a one-byte length and
// six one-byte fields (attributes, timestamp delta, offset delta, key length,
// value length, header count).
const minRecordSize = 7

// RecordHeader is one header of a record. A nil Value is a null value.
type RecordHeader struct {
	Key   string
	Value []byte
}

// Record is one record of a batch, with offset and timestamp made absolute.
// A nil Key or Value is null; an empty non-nil one is empty. Key, Value and
// header values alias the batch (or its decompressed records), so they stay
// valid only as long as those bytes do.
type Record struct {
	Offset    int64
	Timestamp int64
	Key       []byte
	Value     []byte
	Headers   []RecordHeader
}

// RecordIter reads the records of one batch in order.
type RecordIter struct {
	h         Header
	data      []byte // records not read yet
	left      int32  // how many the header still promises
	read      int32
	lastDelta int64
	err       error
}

// NewRecordIter validates batch, which must be exactly one batch
// (ValidateBatch), and decompresses its records section, allowing at most
// maxDecompressed bytes (DefaultMaxDecompressed is a sane choice).
// Errors wrap ErrCorrupt.
func NewRecordIter(batch []byte, maxDecompressed int) (*RecordIter, error) {
	h, err := ValidateBatch(batch)
	if err != nil {
		return nil, err
	}
	if len(batch) != h.Size() {
		return nil, fmt.Errorf("%w: batch at base offset %d is %d bytes, given %d", ErrBadLength, h.BaseOffset, h.Size(), len(batch))
	}
	data, err := DecompressLimit(h.Compression(), batch[HeaderSize:], maxDecompressed)
	if err != nil {
		return nil, fmt.Errorf("%w (batch at base offset %d)", err, h.BaseOffset)
	}
	return &RecordIter{h: h, data: data, left: h.RecordCount, lastDelta: -1}, nil
}

// Header returns the batch's header.
func (it *RecordIter) Header() Header { return it.h }

// Next returns the next record. It returns ok == false with a nil error
// after the last record, once it has checked that exactly the header's
// record count was present with nothing after it. After an error every call
// returns the same error. Errors wrap ErrBadRecord or ErrRecordCount.
func (it *RecordIter) Next() (rec Record, ok bool, err error) {
	if it.err != nil {
		return Record{}, false, it.err
	}
	switch {
	case it.left == 0 && len(it.data) != 0:
		it.err = fmt.Errorf("%w: %d bytes after record %d of batch at base offset %d", ErrRecordCount, len(it.data), it.read, it.h.BaseOffset)
		return Record{}, false, it.err
	case it.left == 0:
		return Record{}, false, nil
	case len(it.data) == 0:
		it.err = fmt.Errorf("%w: header says %d records, batch at base offset %d holds %d", ErrRecordCount, it.h.RecordCount, it.h.BaseOffset, it.read)
		return Record{}, false, it.err
	}
	rec, n, err := it.parse(it.data)
	if err != nil {
		it.err = fmt.Errorf("%w: record %d of batch at base offset %d: %s", ErrBadRecord, it.read, it.h.BaseOffset, err)
		return Record{}, false, it.err
	}
	it.data = it.data[n:]
	it.left--
	it.read++
	return rec, true, nil
}

// Records decodes every record of one batch, allowing DefaultMaxDecompressed
// bytes of decompressed records. Errors wrap ErrCorrupt.
func Records(batch []byte) ([]Record, error) {
	it, err := NewRecordIter(batch, DefaultMaxDecompressed)
	if err != nil {
		return nil, err
	}
	recs := make([]Record, 0, min(int(it.h.RecordCount), len(it.data)/minRecordSize))
	for {
		rec, ok, err := it.Next()
		if err != nil {
			return nil, err
		}
		if !ok {
			return recs, nil
		}
		recs = append(recs, rec)
	}
}

// parse decodes the record at the start of b and returns it with the number
// of bytes it took. The error text is wrapped by Next.
func (it *RecordIter) parse(b []byte) (Record, int, error) {
	var rec Record
	size, n := binary.Varint(b)
	if n <= 0 {
		return rec, 0, errors.New("bad length varint")
	}
	if size < 0 || size > int64(len(b)-n) {
		return rec, 0, fmt.Errorf("length %d, %d bytes remain", size, len(b)-n)
	}
	total := n + int(size)
	d := fieldReader{b: b[n:total]}
	d.byte() // attributes: unused by Kafka
	tsDelta := d.varint("timestamp delta", math.MinInt64, math.MaxInt64)
	offDelta := d.varint("offset delta", 0, int64(it.h.LastOffsetDelta))
	rec.Key = d.bytes("key")
	rec.Value = d.bytes("value")
	count := d.varint("header count", 0, int64(len(d.b)/2)) // a header takes at least two bytes
	if d.err == nil && count > 0 {
		rec.Headers = make([]RecordHeader, count)
		for i := range rec.Headers {
			key := d.bytes("header key")
			if d.err == nil && key == nil {
				d.err = errors.New("null header key")
			}
			rec.Headers[i] = RecordHeader{Key: string(key), Value: d.bytes("header value")}
		}
	}
	if d.err != nil {
		return Record{}, 0, d.err
	}
	if len(d.b) != 0 {
		return Record{}, 0, fmt.Errorf("length %d, fields end %d bytes early", size, len(d.b))
	}
	if offDelta <= it.lastDelta {
		return Record{}, 0, fmt.Errorf("offset delta %d after %d", offDelta, it.lastDelta)
	}
	it.lastDelta = offDelta
	rec.Offset = it.h.BaseOffset + offDelta
	if it.h.LogAppendTime() {
		rec.Timestamp = it.h.MaxTimestamp
	} else {
		rec.Timestamp = it.h.BaseTimestamp + tsDelta
	}
	return rec, total, nil
}

// fieldReader reads a record's fields, keeping the first error.
type fieldReader struct {
	b   []byte
	err error
}

func (d *fieldReader) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.err = errors.New("empty record")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// varint reads a zigzag varint and checks it lies in [lo, hi].
func (d *fieldReader) varint(what string, lo, hi int64) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = fmt.Errorf("bad %s varint", what)
		return 0
	}
	if v < lo || v > hi {
		d.err = fmt.Errorf("%s %d outside [%d, %d]", what, v, lo, hi)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// bytes reads a varint length and that many bytes; length -1 is null (nil).
func (d *fieldReader) bytes(what string) []byte {
	if d.err != nil {
		return nil
	}
	// The varint is read here rather than by d.varint so that the field's
	// label is built only for an error message.
	n, k := binary.Varint(d.b)
	switch {
	case k <= 0:
		d.err = fmt.Errorf("bad %s length varint", what)
		return nil
	case n < -1 || n > math.MaxInt32:
		d.err = fmt.Errorf("%s length %d outside [-1, %d]", what, n, math.MaxInt32)
		return nil
	}
	d.b = d.b[k:]
	if n < 0 {
		return nil
	}
	if n > int64(len(d.b)) {
		d.err = fmt.Errorf("%s of %d bytes, %d remain", what, n, len(d.b))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}
