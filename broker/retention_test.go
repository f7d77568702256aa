package broker

import (
	"testing"

	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestRetentionLoop checks that the retention loop runs with the topic's
// live configs: segments past retention.bytes go, and the log start moves.
// It waits for passes of the loop that start after each change.
func TestRetentionLoop(t *testing.T) {
	s := startServer(t, map[string]string{"log.retention.check.interval.ms": "50"})
	cl := newClient(t, s)
	createTopic(t, cl, "ret", 1, map[string]string{"segment.bytes": "1000"})
	for i := 0; i < 10; i++ {
		if sp := produceRaw(t, cl, "ret", 0, buildBatch(t, segment.CodecNone, 20)); sp.ErrorCode != 0 {
			t.Fatalf("produce: %d", sp.ErrorCode)
		}
	}
	p := s.topic("ret").parts[0]
	if n := len(p.log.Segments()); n < 3 {
		t.Fatalf("%d segments, want several: retention.bytes below has nothing to delete", n)
	}
	waitRetentionPass(t, s)
	if start := p.log.LogStartOffset(); start != 0 {
		t.Fatalf("log start %d after a retention pass without a retention limit, want 0", start)
	}
	// AlterConfigs applies the configs to the log before it answers.
	alter(t, cl, "ret", map[string]string{"segment.bytes": "1000", "retention.bytes": "1000"})
	waitRetentionPass(t, s)
	if start := p.log.LogStartOffset(); start == 0 {
		t.Fatal("retention did not delete any segment in a pass after retention.bytes=1000")
	}
	if fp := fetchRaw(t, cl, "ret", 0, 0, 1<<20); fp.ErrorCode != kerr.OffsetOutOfRange.Code || fp.LogStartOffset <= 0 {
		t.Fatalf("fetch at 0 after retention: error %d log start %d", fp.ErrorCode, fp.LogStartOffset)
	}
}
