package strataapi

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// RequestTopic is one topic of a request that names partitions by topic:
// a topic name and its partitions (empty: every partition of the topic
// the broker leads). Encoded as a compact string, a compact array of
// INT32 and a tagged-field section.
type RequestTopic struct {
	Topic      string
	Partitions []int32
}

// appendRequestTopics appends topics as a compact nullable array (nil:
// null).
func appendRequestTopics(dst []byte, topics []RequestTopic) []byte {
	dst = kbin.AppendCompactNullableArrayLen(dst, len(topics), topics == nil)
	for _, t := range topics {
		dst = kbin.AppendCompactString(dst, t.Topic)
		dst = kbin.AppendCompactArrayLen(dst, len(t.Partitions))
		for _, p := range t.Partitions {
			dst = kbin.AppendInt32(dst, p)
		}
		dst = kbin.AppendUvarint(dst, 0) // no tagged fields
	}
	return dst
}

// readRequestTopics reads what appendRequestTopics appends; nil for a
// null array.
func readRequestTopics(b *kbin.Reader) ([]RequestTopic, error) {
	n, ok := arrayLen(b)
	if !ok {
		return nil, fmt.Errorf("%w: topics", ErrMalformed)
	}
	if n < 0 {
		return nil, nil
	}
	topics := make([]RequestTopic, n)
	for i := range topics {
		t := &topics[i]
		t.Topic = b.CompactString()
		np, ok := arrayLen(b)
		if !ok || np < 0 || np > len(b.Src)/4 {
			return nil, fmt.Errorf("%w: partitions of topic %d", ErrMalformed, i)
		}
		t.Partitions = make([]int32, np)
		for j := range t.Partitions {
			t.Partitions[j] = b.Int32()
		}
		kmsg.SkipTags(b)
	}
	return topics, nil
}

// arrayLen reads a compact array length: -1 for null. It refuses a length
// larger than the bytes left, as every element takes at least one byte.
func arrayLen(b *kbin.Reader) (int, bool) {
	n := int(b.CompactArrayLen())
	if !b.Ok() || n < -1 || n > len(b.Src) {
		return 0, false
	}
	return n, true
}

// complete checks that b decoded without error and used all its bytes.
func complete(b *kbin.Reader) error {
	if !b.Ok() {
		return fmt.Errorf("%w: truncated", ErrMalformed)
	}
	if len(b.Src) != 0 {
		return fmt.Errorf("%w: %d bytes after the message", ErrMalformed, len(b.Src))
	}
	return nil
}
