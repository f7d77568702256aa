package broker

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/segment"
)

// TestFlushMessagesOneSyncsBeforeResponse checks that with
// log.flush.interval.messages=1 every acknowledged batch is on disk before
// its produce response leaves: the log's recovery point (which moves only
// after a successful fsync) covers the batch when the response arrives,
// and the flusher's sync hook reports the fsyncs.
func TestFlushMessagesOneSyncsBeforeResponse(t *testing.T) {
	var mu sync.Mutex
	var synced []int64
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
	cfg.LogOptions = []segment.Option{segment.WithSyncHook(func(upTo int64) {
		mu.Lock()
		synced = append(synced, upTo)
		mu.Unlock()
	})}
	s := startServerConfig(t, cfg)
	cl := newClient(t, s)
	createTopic(t, cl, "durable", 1, nil)
	p := s.topic("durable").parts[0]
	var end int64
	for i := 0; i < 20; i++ {
		sp := produceRaw(t, cl, "durable", 0, buildBatch(t, segment.CodecNone, 5))
		if sp.ErrorCode != 0 {
			t.Fatalf("#%d: error %d", i, sp.ErrorCode)
		}
		end = sp.BaseOffset + 5
		if rp := p.log.RecoveryPoint(); rp < end {
			t.Fatalf("#%d: response for offsets up to %d arrived with the recovery point at %d", i, end, rp)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n, last := len(synced), int64(-1)
		if n > 0 {
			last = synced[n-1]
		}
		mu.Unlock()
		if last >= end {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sync hook saw %d fsyncs, last up to %d; want up to %d", n, last, end)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
