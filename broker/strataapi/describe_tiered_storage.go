package strataapi

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Wire constants: never change them.
const (
	// KeyDescribeTieredStorage is DescribeTieredStorage's API key.
	KeyDescribeTieredStorage int16 = 10000
	// DescribeTieredStorageMaxVersion is the newest version defined.
	DescribeTieredStorageMaxVersion int16 = 0
)

// ErrMalformed is returned by ReadFrom for bytes that do not decode.
var ErrMalformed = errors.New("strataapi: malformed message")

// Name returns the name of one of Strata's own API keys, "" for another
// key.
func Name(key int16) string {
	switch key {
	case KeyDescribeTieredStorage:
		return "DescribeTieredStorage"
	case KeyDescribeSharePartitions:
		return "DescribeSharePartitions"
	}
	return ""
}

// DescribeTieredStorageRequest asks a broker for the tiered-storage state
// of partitions it leads (doc.go has the encoding).
type DescribeTieredStorageRequest struct {
	Version int16
	// Topics nil: every partition this broker leads whose topic tiers.
	Topics []DescribeTieredStorageRequestTopic
}

// DescribeTieredStorageRequestTopic is one topic of the request.
type DescribeTieredStorageRequestTopic = RequestTopic

// DescribeTieredStorageResponse is the answer (doc.go has the encoding).
type DescribeTieredStorageResponse struct {
	Version        int16
	ThrottleMillis int32
	ErrorCode      int16
	// The chunk cache's counters since the broker started; -1 without
	// tiered storage.
	CacheHits, CacheJoins, CacheMisses, CacheEvictions, CacheBytes int64
	Topics                                                         []DescribeTieredStorageResponseTopic
}

// DescribeTieredStorageResponseTopic is one topic of the answer.
type DescribeTieredStorageResponseTopic struct {
	Topic      string
	ErrorCode  int16
	Partitions []DescribeTieredStoragePartition
}

// DescribeTieredStoragePartition is one partition of the answer. With a
// non-zero ErrorCode the other fields are -1.
type DescribeTieredStoragePartition struct {
	Partition int32
	ErrorCode int16

	// From the committed manifest; -1 while none is known.
	ManifestEpoch  int32
	RemoteLogStart int64
	RemoteLogEnd   int64
	RemoteBytes    int64
	RemoteSegments int32
	LastUploadMs   int64 // -1 also when no segment is remote

	LocalSegments   int32
	PendingSegments int32
	PendingBytes    int64
	OldestPendingMs int64

	CacheHits, CacheJoins, CacheMisses int64
}

// NewDescribeTieredStoragePartition returns a partition entry with every
// figure -1 (unknown).
func NewDescribeTieredStoragePartition(partition int32, errorCode int16) DescribeTieredStoragePartition {
	return DescribeTieredStoragePartition{Partition: partition, ErrorCode: errorCode,
		ManifestEpoch: -1, RemoteLogStart: -1, RemoteLogEnd: -1, RemoteBytes: -1, RemoteSegments: -1, LastUploadMs: -1,
		LocalSegments: -1, PendingSegments: -1, PendingBytes: -1, OldestPendingMs: -1,
		CacheHits: -1, CacheJoins: -1, CacheMisses: -1}
}

var (
	_ kmsg.Request  = (*DescribeTieredStorageRequest)(nil)
	_ kmsg.Response = (*DescribeTieredStorageResponse)(nil)
)

func (*DescribeTieredStorageRequest) Key() int16           { return KeyDescribeTieredStorage }
func (*DescribeTieredStorageRequest) MaxVersion() int16    { return DescribeTieredStorageMaxVersion }
func (r *DescribeTieredStorageRequest) SetVersion(v int16) { r.Version = v }
func (r *DescribeTieredStorageRequest) GetVersion() int16  { return r.Version }
func (*DescribeTieredStorageRequest) IsFlexible() bool     { return true }
func (r *DescribeTieredStorageRequest) ResponseKind() kmsg.Response {
	return &DescribeTieredStorageResponse{Version: r.Version}
}

// AppendTo appends the request body.
func (r *DescribeTieredStorageRequest) AppendTo(dst []byte) []byte {
	dst = appendRequestTopics(dst, r.Topics)
	return kbin.AppendUvarint(dst, 0)
}

// ReadFrom decodes a request body of the version set; it fails with
// ErrMalformed on bytes that do not decode or do not end with it.
func (r *DescribeTieredStorageRequest) ReadFrom(src []byte) error {
	if r.Version < 0 || r.Version > DescribeTieredStorageMaxVersion {
		return fmt.Errorf("%w: DescribeTieredStorage version %d", ErrMalformed, r.Version)
	}
	b := kbin.Reader{Src: src}
	var err error
	if r.Topics, err = readRequestTopics(&b); err != nil {
		return err
	}
	kmsg.SkipTags(&b)
	return complete(&b)
}

func (*DescribeTieredStorageResponse) Key() int16           { return KeyDescribeTieredStorage }
func (*DescribeTieredStorageResponse) MaxVersion() int16    { return DescribeTieredStorageMaxVersion }
func (r *DescribeTieredStorageResponse) SetVersion(v int16) { r.Version = v }
func (r *DescribeTieredStorageResponse) GetVersion() int16  { return r.Version }
func (*DescribeTieredStorageResponse) IsFlexible() bool     { return true }
func (r *DescribeTieredStorageResponse) RequestKind() kmsg.Request {
	return &DescribeTieredStorageRequest{Version: r.Version}
}

// AppendTo appends the response body.
func (r *DescribeTieredStorageResponse) AppendTo(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, r.ThrottleMillis)
	dst = kbin.AppendInt16(dst, r.ErrorCode)
	for _, v := range []int64{r.CacheHits, r.CacheJoins, r.CacheMisses, r.CacheEvictions, r.CacheBytes} {
		dst = kbin.AppendInt64(dst, v)
	}
	dst = kbin.AppendCompactArrayLen(dst, len(r.Topics))
	for _, t := range r.Topics {
		dst = kbin.AppendCompactString(dst, t.Topic)
		dst = kbin.AppendInt16(dst, t.ErrorCode)
		dst = kbin.AppendCompactArrayLen(dst, len(t.Partitions))
		for _, p := range t.Partitions {
			dst = kbin.AppendInt32(dst, p.Partition)
			dst = kbin.AppendInt16(dst, p.ErrorCode)
			dst = kbin.AppendInt32(dst, p.ManifestEpoch)
			dst = kbin.AppendInt64(dst, p.RemoteLogStart)
			dst = kbin.AppendInt64(dst, p.RemoteLogEnd)
			dst = kbin.AppendInt64(dst, p.RemoteBytes)
			dst = kbin.AppendInt32(dst, p.RemoteSegments)
			dst = kbin.AppendInt64(dst, p.LastUploadMs)
			dst = kbin.AppendInt32(dst, p.LocalSegments)
			dst = kbin.AppendInt32(dst, p.PendingSegments)
			dst = kbin.AppendInt64(dst, p.PendingBytes)
			dst = kbin.AppendInt64(dst, p.OldestPendingMs)
			dst = kbin.AppendInt64(dst, p.CacheHits)
			dst = kbin.AppendInt64(dst, p.CacheJoins)
			dst = kbin.AppendInt64(dst, p.CacheMisses)
			dst = kbin.AppendUvarint(dst, 0)
		}
		dst = kbin.AppendUvarint(dst, 0)
	}
	return kbin.AppendUvarint(dst, 0)
}

// partitionMinBytes is the encoded size of a partition entry without
// tagged fields.
const partitionMinBytes = 4 + 2 + 4 + 8*3 + 4 + 8 + 4 + 4 + 8*2 + 8*3 + 1

// ReadFrom decodes a response body of the version set; it fails with
// ErrMalformed on bytes that do not decode or do not end with it.
func (r *DescribeTieredStorageResponse) ReadFrom(src []byte) error {
	if r.Version < 0 || r.Version > DescribeTieredStorageMaxVersion {
		return fmt.Errorf("%w: DescribeTieredStorage version %d", ErrMalformed, r.Version)
	}
	b := kbin.Reader{Src: src}
	r.ThrottleMillis = b.Int32()
	r.ErrorCode = b.Int16()
	r.CacheHits, r.CacheJoins, r.CacheMisses, r.CacheEvictions, r.CacheBytes = b.Int64(), b.Int64(), b.Int64(), b.Int64(), b.Int64()
	n, ok := arrayLen(&b)
	if !ok || n < 0 {
		return fmt.Errorf("%w: topics", ErrMalformed)
	}
	r.Topics = make([]DescribeTieredStorageResponseTopic, n)
	for i := range r.Topics {
		t := &r.Topics[i]
		t.Topic = b.CompactString()
		t.ErrorCode = b.Int16()
		np, ok := arrayLen(&b)
		if !ok || np < 0 || np > len(b.Src)/partitionMinBytes {
			return fmt.Errorf("%w: partitions of topic %d", ErrMalformed, i)
		}
		t.Partitions = make([]DescribeTieredStoragePartition, np)
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.Partition, p.ErrorCode = b.Int32(), b.Int16()
			p.ManifestEpoch = b.Int32()
			p.RemoteLogStart, p.RemoteLogEnd, p.RemoteBytes = b.Int64(), b.Int64(), b.Int64()
			p.RemoteSegments = b.Int32()
			p.LastUploadMs = b.Int64()
			p.LocalSegments, p.PendingSegments = b.Int32(), b.Int32()
			p.PendingBytes, p.OldestPendingMs = b.Int64(), b.Int64()
			p.CacheHits, p.CacheJoins, p.CacheMisses = b.Int64(), b.Int64(), b.Int64()
			kmsg.SkipTags(&b)
		}
		kmsg.SkipTags(&b)
	}
	kmsg.SkipTags(&b)
	return complete(&b)
}
