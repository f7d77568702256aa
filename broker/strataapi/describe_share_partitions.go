package strataapi

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Wire constants: never change them.
const (
	// KeyDescribeSharePartitions is DescribeSharePartitions' API key.
	KeyDescribeSharePartitions int16 = 10001
	// DescribeSharePartitionsMaxVersion is the newest version defined.
	DescribeSharePartitionsMaxVersion int16 = 0
)

// DescribeSharePartitionsRequest asks a broker for the in-memory state
// of one share group's share partitions on the partitions it leads
// (doc.go has the encoding).
type DescribeSharePartitionsRequest struct {
	Version int16
	GroupID string
	// Topics nil: every share partition of the group loaded on this
	// broker.
	Topics []DescribeSharePartitionsRequestTopic
}

// DescribeSharePartitionsRequestTopic is one topic of the request.
type DescribeSharePartitionsRequestTopic = RequestTopic

// DescribeSharePartitionsResponse is the answer (doc.go has the
// encoding).
type DescribeSharePartitionsResponse struct {
	Version        int16
	ThrottleMillis int32
	ErrorCode      int16
	Topics         []DescribeSharePartitionsResponseTopic
}

// DescribeSharePartitionsResponseTopic is one topic of the answer.
type DescribeSharePartitionsResponseTopic struct {
	Topic      string
	ErrorCode  int16
	Partitions []DescribeSharePartition
}

// DescribeSharePartition is one share partition of the answer. Unless
// Loaded (and with a non-zero ErrorCode) the figures are -1: there is no
// in-memory state to tell.
type DescribeSharePartition struct {
	Partition int32
	ErrorCode int16
	Loaded    bool

	StartOffset int64 // the share-partition start offset
	EndOffset   int64 // the end of the in-flight window

	// In-flight records by state.
	Available, Acquired, Acknowledged, Archiving, Archived int32

	// Totals since the share partition was loaded on this broker.
	AcquiredTotal, RedeliveredTotal, ArchivedTotal int64
}

// NewDescribeSharePartition returns a partition entry, not loaded, with
// every figure -1 (unknown).
func NewDescribeSharePartition(partition int32, errorCode int16) DescribeSharePartition {
	return DescribeSharePartition{Partition: partition, ErrorCode: errorCode, StartOffset: -1, EndOffset: -1,
		Available: -1, Acquired: -1, Acknowledged: -1, Archiving: -1, Archived: -1,
		AcquiredTotal: -1, RedeliveredTotal: -1, ArchivedTotal: -1}
}

var (
	_ kmsg.Request  = (*DescribeSharePartitionsRequest)(nil)
	_ kmsg.Response = (*DescribeSharePartitionsResponse)(nil)
)

func (*DescribeSharePartitionsRequest) Key() int16           { return KeyDescribeSharePartitions }
func (*DescribeSharePartitionsRequest) MaxVersion() int16    { return DescribeSharePartitionsMaxVersion }
func (r *DescribeSharePartitionsRequest) SetVersion(v int16) { r.Version = v }
func (r *DescribeSharePartitionsRequest) GetVersion() int16  { return r.Version }
func (*DescribeSharePartitionsRequest) IsFlexible() bool     { return true }
func (r *DescribeSharePartitionsRequest) ResponseKind() kmsg.Response {
	return &DescribeSharePartitionsResponse{Version: r.Version}
}

// AppendTo appends the request body.
func (r *DescribeSharePartitionsRequest) AppendTo(dst []byte) []byte {
	dst = kbin.AppendCompactString(dst, r.GroupID)
	dst = appendRequestTopics(dst, r.Topics)
	return kbin.AppendUvarint(dst, 0)
}

// ReadFrom decodes a request body of the version set; it fails with
// ErrMalformed on bytes that do not decode or do not end with it.
func (r *DescribeSharePartitionsRequest) ReadFrom(src []byte) error {
	if r.Version < 0 || r.Version > DescribeSharePartitionsMaxVersion {
		return fmt.Errorf("%w: DescribeSharePartitions version %d", ErrMalformed, r.Version)
	}
	b := kbin.Reader{Src: src}
	r.GroupID = b.CompactString()
	var err error
	if r.Topics, err = readRequestTopics(&b); err != nil {
		return err
	}
	kmsg.SkipTags(&b)
	return complete(&b)
}

func (*DescribeSharePartitionsResponse) Key() int16           { return KeyDescribeSharePartitions }
func (*DescribeSharePartitionsResponse) MaxVersion() int16    { return DescribeSharePartitionsMaxVersion }
func (r *DescribeSharePartitionsResponse) SetVersion(v int16) { r.Version = v }
func (r *DescribeSharePartitionsResponse) GetVersion() int16  { return r.Version }
func (*DescribeSharePartitionsResponse) IsFlexible() bool     { return true }
func (r *DescribeSharePartitionsResponse) RequestKind() kmsg.Request {
	return &DescribeSharePartitionsRequest{Version: r.Version}
}

// AppendTo appends the response body.
func (r *DescribeSharePartitionsResponse) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, r.ThrottleMillis)
	dst = kbin.AppendInt16(dst, r.ErrorCode)
	dst = kbin.AppendCompactArrayLen(dst, len(r.Topics))
	for _, t := range r.Topics {
		dst = kbin.AppendCompactString(dst, t.Topic)
		dst = kbin.AppendInt16(dst, t.ErrorCode)
		dst = kbin.AppendCompactArrayLen(dst, len(t.Partitions))
		for _, p := range t.Partitions {
			dst = kbin.AppendInt32(dst, p.Partition)
			dst = kbin.AppendInt16(dst, p.ErrorCode)
			dst = kbin.AppendBool(dst, p.Loaded)
			dst = kbin.AppendInt64(dst, p.StartOffset)
			dst = kbin.AppendInt64(dst, p.EndOffset)
			for _, c := range []int32{p.Available, p.Acquired, p.Acknowledged, p.Archiving, p.Archived} {
				dst = kbin.AppendInt32(dst, c)
			}
			dst = kbin.AppendInt64(dst, p.AcquiredTotal)
			dst = kbin.AppendInt64(dst, p.RedeliveredTotal)
			dst = kbin.AppendInt64(dst, p.ArchivedTotal)
			dst = kbin.AppendUvarint(dst, 0)
		}
		dst = kbin.AppendUvarint(dst, 0)
	}
	return kbin.AppendUvarint(dst, 0)
}

// sharePartitionMinBytes is the encoded size of a share partition entry
// without tagged fields.
const sharePartitionMinBytes = 4 + 2 + 1 + 8*2 + 4*5 + 8*3 + 1

// ReadFrom decodes a response body of the version set; it fails with
// ErrMalformed on bytes that do not decode or do not end with it.
func (r *DescribeSharePartitionsResponse) ReadFrom(src []byte) error {
	if r.Version < 0 || r.Version > DescribeSharePartitionsMaxVersion {
		return fmt.Errorf("%w: DescribeSharePartitions version %d", ErrMalformed, r.Version)
	}
	b := kbin.Reader{Src: src}
	r.ThrottleMillis = b.Int32()
	r.ErrorCode = b.Int16()
	n, ok := arrayLen(&b)
	if !ok || n < 0 {
		return fmt.Errorf("%w: topics", ErrMalformed)
	}
	r.Topics = make([]DescribeSharePartitionsResponseTopic, n)
	for i := range r.Topics {
		t := &r.Topics[i]
		t.Topic = b.CompactString()
		t.ErrorCode = b.Int16()
		np, ok := arrayLen(&b)
		if !ok || np < 0 || np > len(b.Src)/sharePartitionMinBytes {
			return fmt.Errorf("%w: partitions of topic %d", ErrMalformed, i)
		}
		t.Partitions = make([]DescribeSharePartition, np)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.Partition, p.ErrorCode = b.Int32(), b.Int16()
			p.Loaded = b.Bool()
			p.StartOffset, p.EndOffset = b.Int64(), b.Int64()
			p.Available, p.Acquired, p.Acknowledged, p.Archiving, p.Archived = b.Int32(), b.Int32(), b.Int32(), b.Int32(), b.Int32()
			p.AcquiredTotal, p.RedeliveredTotal, p.ArchivedTotal = b.Int64(), b.Int64(), b.Int64()
			kmsg.SkipTags(&b)
		}
		kmsg.SkipTags(&b)
	}
	kmsg.SkipTags(&b)
	return complete(&b)
}
