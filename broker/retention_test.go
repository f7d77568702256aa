package broker

import (
	"testing"
	"time"

	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestRetentionLoop checks that the retention loop runs with the topic's
// live configs: segments past retention.bytes go, and the log start moves.
func TestRetentionLoop(t *testing.T) {
	s := startServer(t, map[string]string{"log.retention.check.interval.ms": "50"})
	cl := newClient(t, s)
	createTopic(t, cl, "ret", 1, map[string]string{"segment.bytes": "1000"})
	for i := 0; i < 10; i++ {
		if sp := produceRaw(t, cl, "ret", 0, buildBatch(t, segment.CodecNone, 20)); sp.ErrorCode != 0 {
			t.Fatalf("produce: %d", sp.ErrorCode)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if start := s.topic("ret").parts[0].log.LogStartOffset(); start != 0 {
		t.Fatalf("log start %d before any retention limit", start)
	}
	alter(t, cl, "ret", map[string]string{"segment.bytes": "1000", "retention.bytes": "1000"})
	deadline := time.Now().Add(10 * time.Second)
	for s.topic("ret").parts[0].log.LogStartOffset() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("retention did not delete any segment")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if fp := fetchRaw(t, cl, "ret", 0, 0, 1<<20); fp.ErrorCode != kerr.OffsetOutOfRange.Code || fp.LogStartOffset <= 0 {
		t.Fatalf("fetch at 0 after retention: error %d log start %d", fp.ErrorCode, fp.LogStartOffset)
	}
}
