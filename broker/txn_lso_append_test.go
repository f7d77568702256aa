package broker

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/segment/poll"
)

// TestTxnLSOHeldDuringAppend: a transaction's first batch is readable in
// the log (followers fetch it, and their acknowledgements move the high
// watermark past it) before its append returns, as the append waits for
// its fsync (log.flush.interval.messages=1). The last stable offset must
// be held at the batch from the moment it is in the log: TestTxnChaos
// (seed 1796168428380809492, 3 minutes) caught a read_committed consumer
// reading an open transaction in that window. The sync hook holds the
// fsync while the test asks for the last stable offset at a high
// watermark at the log end.
func TestTxnLSOHeldDuringAppend(t *testing.T) {
	var mu sync.Mutex
	armed, entered, release := false, make(chan struct{}), make(chan struct{})
	cfg, err := ConfigFromProperties(map[string]string{
		"listeners":                   "PLAINTEXT://127.0.0.1:0",
		"metrics.listener":            "",
		"log.dirs":                    t.TempDir(),
		"log.flush.interval.messages": "1",
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.LogOptions = []segment.Option{segment.WithSyncHook(func(int64) {
		mu.Lock()
		a := armed
		armed = false
		mu.Unlock()
		if a {
			close(entered)
			<-release
		}
	})}
	s := startServerConfig(t, cfg)
	cl := newClient(t, s)
	createTopic(t, cl, "lso-append", 1, nil)
	p := s.topic("lso-append").parts[0]

	// A plain record first: the transaction starts at offset 1.
	if sp := produceRaw(t, cl, "lso-append", 0, buildBatch(t, segment.CodecNone, 1)); sp.ErrorCode != 0 {
		t.Fatalf("plain produce: error %d", sp.ErrorCode)
	}
	mu.Lock()
	armed = true
	mu.Unlock()
	done := make(chan error, 1)
	go func() {
		_, err := p.appendProduced(txnBatch(t, 7 /* pid */, 0, 0, 3, "open"), segment.AppendOptions{}, false, 0)
		done <- err
	}()
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("the transactional batch's fsync never came")
	}
	// The batch is in the log, its append not returned.
	if !poll.For(10*time.Second, func() bool { return p.log.LogEndOffset() == 4 }) {
		t.Errorf("log end %d while the append waits for its fsync, want 4", p.log.LogEndOffset())
	}
	lso := p.lastStableOffsetAt(p.log.LogEndOffset())
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("append: %v", err)
	}
	if lso != 1 {
		t.Errorf("last stable offset %d at high watermark 4 while the open transaction's first batch (offset 1) was being appended, want 1", lso)
	}
	if got := p.lastStableOffsetAt(p.log.LogEndOffset()); got != 1 {
		t.Errorf("after the append: last stable offset %d, want 1 (the transaction is open)", got)
	}
}
