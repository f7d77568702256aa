package txn

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/segment/poll"
	"github.com/twmb/franz-go/pkg/kerr"
)

const testPartitions = 3

// clock is a settable test clock.
type clock struct{ ms atomic.Int64 }

func (c *clock) Now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *clock) Advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// markers records the markers written and answers each partition with
// the code fail gives it (0 when fail is nil).
type markers struct {
	mu      sync.Mutex
	written map[TopicPartition][]MarkerBatch
	fail    func(tp TopicPartition) MarkerResult
	calls   int
}

func (m *markers) WriteMarkers(ctx context.Context, b MarkerBatch) map[TopicPartition]MarkerResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	out := map[TopicPartition]MarkerResult{}
	for _, tp := range b.Partitions {
		r := MarkerResult{}
		if m.fail != nil {
			r = m.fail(tp)
		}
		if r.Code == 0 && !r.Gone {
			m.written[tp] = append(m.written[tp], b)
		}
		out[tp] = r
	}
	return out
}

func (m *markers) setFail(f func(TopicPartition) MarkerResult) {
	m.mu.Lock()
	m.fail = f
	m.mu.Unlock()
}

func (m *markers) get(tp TopicPartition) []MarkerBatch {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]MarkerBatch(nil), m.written[tp]...)
}

// env is a coordinator over real segment logs in a temp directory.
type env struct {
	t     *testing.T
	dir   string
	clock *clock
	mk    *markers
	logs  []*segment.Log
	c     *Coordinator
	next  atomic.Int64
	cfg   Config
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), clock: &clock{}, mk: &markers{written: map[TopicPartition][]MarkerBatch{}}}
	e.clock.ms.Store(1_700_000_000_000)
	e.next.Store(1000)
	e.cfg = Config{
		NumPartitions: testPartitions, MaxTimeout: 15 * time.Minute, IDExpiration: 7 * 24 * time.Hour,
		AbortInterval: time.Hour, ExpireInterval: time.Hour, // the tests call the checks themselves
		NewProducerID: func() (int64, error) { return e.next.Add(1), nil },
		Markers:       e.mk, MarkerBackoff: time.Millisecond, MaxMarkerBackoff: 5 * time.Millisecond,
		Now: e.clock.Now,
	}
	e.open(0)
	t.Cleanup(e.close)
	return e
}

// open opens the logs and a coordinator that loads every partition at
// coordinator epoch epoch.
func (e *env) open(epoch int32) {
	e.t.Helper()
	cfg := segment.DefaultConfig()
	cfg.FlushMessages = 1
	for i := range testPartitions {
		l, err := segment.Open(filepath.Join(e.dir, Topic+"-"+string(rune('0'+i))), cfg)
		if err != nil {
			e.t.Fatal(err)
		}
		e.logs = append(e.logs, l)
	}
	c, err := New(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.c = c
	for i, l := range e.logs {
		if _, err := c.Load(i, epoch, l); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) close() {
	if e.c != nil {
		_ = e.c.Close()
		e.c = nil
	}
	for _, l := range e.logs {
		_ = l.Close()
	}
	e.logs = nil
}

// reopen is a failover: the coordinator goes, a new one loads the logs
// at a higher epoch.
func (e *env) reopen(epoch int32) {
	e.close()
	e.open(epoch)
}

func (e *env) init(id string) (int64, int16) {
	e.t.Helper()
	pid, epoch, ke := e.c.InitProducerID(id, 60000, -1, -1)
	if ke != nil {
		e.t.Fatalf("InitProducerID(%q): %v", id, ke)
	}
	return pid, epoch
}

func (e *env) state(id string) Metadata {
	e.t.Helper()
	md, ke := e.c.Describe(id)
	if ke != nil {
		e.t.Fatalf("Describe(%q): %v", id, ke)
	}
	return md
}

// awaitState waits until id is in state want.
func (e *env) awaitState(id string, want State) Metadata {
	e.t.Helper()
	var md Metadata
	if !poll.For(10*time.Second, func() bool {
		var ke *kerr.Error
		md, ke = e.c.Describe(id)
		return ke == nil && md.State == want
	}) {
		e.t.Fatalf("%q: state %v, want %v", id, md.State, want)
	}
	return md
}

func tps(names ...string) []TopicPartition {
	var out []TopicPartition
	for i, n := range names {
		out = append(out, TopicPartition{n, int32(i)})
	}
	return out
}

// blockingLog holds reads until gate is closed.
type blockingLog struct {
	Log
	gate chan struct{}
}

func (b blockingLog) ReadCopy(offset int64, maxBytes int, maxOffset int64) ([]byte, error) {
	<-b.gate
	return b.Log.ReadCopy(offset, maxBytes, maxOffset)
}

func pollStatus(c *Coordinator, id string, want *kerr.Error) bool {
	return poll.For(10*time.Second, func() bool { return c.Status(id) == want })
}
