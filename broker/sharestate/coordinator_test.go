package sharestate

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/segment"
)

const testPartitions = 3

// env is a coordinator over real segment logs in a temp directory.
type env struct {
	t    *testing.T
	dir  string
	logs []*segment.Log
	c    *Coordinator
	cfg  Config
}

func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	cfg.NumPartitions = testPartitions
	e := &env{t: t, dir: t.TempDir(), cfg: cfg}
	e.open()
	t.Cleanup(e.close)
	return e
}

func (e *env) open() {
	e.t.Helper()
	scfg := segment.DefaultConfig()
	scfg.FlushMessages = 1
	c, err := New(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.c = c
	for i := range testPartitions {
		l, err := segment.Open(filepath.Join(e.dir, Topic+"-"+strconv.Itoa(i)), scfg)
		if err != nil {
			e.t.Fatal(err)
		}
		e.logs = append(e.logs, l)
		if _, err := c.Load(i, l); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) close() {
	if e.c != nil {
		e.c.Close()
		e.c = nil
	}
	for _, l := range e.logs {
		if err := l.Close(); err != nil {
			e.t.Error(err)
		}
	}
	e.logs = nil
}

// reopen is a failover: a new coordinator loads the logs.
func (e *env) reopen() {
	e.close()
	e.open()
}

func key(group string, p int32) Key {
	return Key{GroupID: group, TopicID: [16]byte{1, 2, 3}, Partition: p}
}

func mustOK(t *testing.T, what string, e *kerr.Error) {
	t.Helper()
	if e != nil {
		t.Fatalf("%s: %v", what, e)
	}
}

func (e *env) read(k Key) State {
	e.t.Helper()
	st, ke := e.c.Read(k, -1, false)
	mustOK(e.t, "read", ke)
	return st
}

func TestCoordinatorKeyAndPartition(t *testing.T) {
	k := Key{GroupID: "g", TopicID: [16]byte{0: 0xfb, 15: 0xff}, Partition: 7}
	if got, want := CoordinatorKey(k), "g:-wAAAAAAAAAAAAAAAAAA_w:7"; got != want {
		t.Errorf("key: got %q, want %q", got, want)
	}
	if got, err := ParseCoordinatorKey("a:b:" + CoordinatorKey(k)[2:]); err != nil || got != (Key{GroupID: "a:b", TopicID: k.TopicID, Partition: 7}) {
		t.Errorf("parse: got %+v %v", got, err)
	}
	for _, bad := range []string{"g", "g:x", ":-wAAAAAAAAAAAAAAAAAA_w:7", "g:abc:1", "g:-wAAAAAAAAAAAAAAAAAA_w:-1", "g:-wAAAAAAAAAAAAAAAAAA_w:x"} {
		if _, err := ParseCoordinatorKey(bad); err == nil {
			t.Errorf("parse %q: no error", bad)
		}
	}
	for i := range 20 {
		k := key("g"+strconv.Itoa(i), int32(i))
		if p := PartitionFor(k, 50); p < 0 || p >= 50 {
			t.Errorf("#%d: partition %d", i, p)
		}
	}
}

func TestCombine(t *testing.T) {
	b := func(f, l int64, s int8, n int16) StateBatch { return StateBatch{f, l, s, n} }
	for i, c := range []struct {
		cur, upd []StateBatch
		start    int64
		want     []StateBatch
	}{
		{nil, []StateBatch{b(0, 9, Acked, 1)}, 0, []StateBatch{b(0, 9, Acked, 1)}},
		{[]StateBatch{b(0, 9, Available, 1)}, []StateBatch{b(3, 5, Acked, 1)}, 0,
			[]StateBatch{b(0, 2, Available, 1), b(3, 5, Acked, 1), b(6, 9, Available, 1)}},
		{[]StateBatch{b(0, 4, Acked, 1)}, []StateBatch{b(5, 9, Acked, 1)}, -1, []StateBatch{b(0, 9, Acked, 1)}},
		{[]StateBatch{b(0, 9, Acked, 1)}, nil, 5, []StateBatch{b(5, 9, Acked, 1)}},
		{[]StateBatch{b(0, 3, Acked, 1)}, []StateBatch{b(0, 3, Archived, 2), b(2, 2, Available, 3)}, 0,
			[]StateBatch{b(0, 1, Archived, 2), b(2, 2, Available, 3), b(3, 3, Archived, 2)}},
		{nil, []StateBatch{b(5, 4, Acked, 1)}, 0, nil},
	} {
		if got := combine(c.cur, c.upd, c.start); !reflect.DeepEqual(got, c.want) {
			t.Errorf("#%d: got %v, want %v", i, got, c.want)
		}
	}
}

// TestWriteReadSnapshotReplay: writes become update records and every
// UpdatesPerSnapshot-th a snapshot; a new coordinator loading the logs
// (failover) reads the same state, whatever the mix of records.
func TestWriteReadSnapshotReplay(t *testing.T) {
	e := newEnv(t, Config{UpdatesPerSnapshot: 3})
	k := key("g", 0)
	mustOK(t, "initialize", e.c.Initialize(k, 1, 0))
	for i := range int64(8) {
		w := WriteState{StateEpoch: 1, LeaderEpoch: 5, StartOffset: i, DeliveryCompleteCount: int32(i),
			Batches: []StateBatch{{First: i * 10, Last: i*10 + 9, DeliveryState: Acked, DeliveryCount: 1}, {First: i*10 + 20, Last: i*10 + 20, DeliveryState: Available, DeliveryCount: 2}}}
		mustOK(t, "write", e.c.Write(k, w))
	}
	before := e.read(k)
	if before.StartOffset != 7 || before.StateEpoch != 1 || before.LeaderEpoch != 5 || before.DeliveryCompleteCount != 7 || len(before.Batches) == 0 {
		t.Fatalf("state: %+v", before)
	}
	if got := before.Batches[0]; got.First != 7 || got.DeliveryState != Acked {
		t.Errorf("first batch: %+v", got)
	}
	e.reopen()
	if after := e.read(k); !reflect.DeepEqual(after, before) {
		t.Errorf("after replay:\n got %+v\nwant %+v", after, before)
	}
	// A state epoch change is a snapshot at once.
	mustOK(t, "new state epoch", e.c.Write(k, WriteState{StateEpoch: 2, LeaderEpoch: 6, StartOffset: -1, DeliveryCompleteCount: -1}))
	e.reopen()
	if st := e.read(k); st.StateEpoch != 2 || st.LeaderEpoch != 6 || st.StartOffset != 7 {
		t.Errorf("after the state epoch change: %+v", st)
	}
}

func TestFencing(t *testing.T) {
	e := newEnv(t, Config{})
	k := key("g", 1)
	mustOK(t, "initialize", e.c.Initialize(k, 3, 0))
	mustOK(t, "write", e.c.Write(k, WriteState{StateEpoch: 3, LeaderEpoch: 4, StartOffset: 0, DeliveryCompleteCount: -1}))
	for i, c := range []struct {
		err  *kerr.Error
		call func() *kerr.Error
	}{
		{kerr.FencedLeaderEpoch, func() *kerr.Error {
			return e.c.Write(k, WriteState{StateEpoch: 3, LeaderEpoch: 3, StartOffset: -1, DeliveryCompleteCount: -1})
		}},
		{kerr.FencedStateEpoch, func() *kerr.Error {
			return e.c.Write(k, WriteState{StateEpoch: 2, LeaderEpoch: 4, StartOffset: -1, DeliveryCompleteCount: -1})
		}},
		{kerr.FencedStateEpoch, func() *kerr.Error { return e.c.Initialize(k, 2, 0) }},
		{kerr.FencedLeaderEpoch, func() *kerr.Error { _, ke := e.c.Read(k, 3, false); return ke }},
		{nil, func() *kerr.Error { _, ke := e.c.Read(k, 9, false); return ke }},
		// The read at leader epoch 9 fences writers of epoch 4.
		{kerr.FencedLeaderEpoch, func() *kerr.Error {
			return e.c.Write(k, WriteState{StateEpoch: 3, LeaderEpoch: 4, StartOffset: -1, DeliveryCompleteCount: -1})
		}},
		{kerr.InvalidRequest, func() *kerr.Error { return e.c.Write(Key{GroupID: "g"}, WriteState{}) }},
	} {
		if got := c.call(); got != c.err {
			t.Errorf("#%d: got %v, want %v", i, got, c.err)
		}
	}
	e.c.Unload(e.c.PartitionFor(k))
	if _, ke := e.c.Read(k, -1, false); ke != kerr.NotCoordinator {
		t.Errorf("unloaded: got %v, want NOT_COORDINATOR", ke)
	}
}

func TestDeleteAndUnknownTopic(t *testing.T) {
	known := true
	e := newEnv(t, Config{PartitionExists: func([16]byte, int32) bool { return known }})
	k := key("g", 2)
	mustOK(t, "write", e.c.Write(k, WriteState{StateEpoch: 0, LeaderEpoch: 0, StartOffset: 5, DeliveryCompleteCount: -1,
		Batches: []StateBatch{{First: 5, Last: 6, DeliveryState: Acked, DeliveryCount: 1}}}))
	mustOK(t, "update", e.c.Write(k, WriteState{StateEpoch: 0, LeaderEpoch: 0, StartOffset: -1, DeliveryCompleteCount: -1}))
	mustOK(t, "delete", e.c.Delete(k))
	e.reopen()
	if st := e.read(k); st.StartOffset != -1 || len(st.Batches) != 0 {
		t.Errorf("after delete and replay: %+v", st)
	}
	known = false
	if ke := e.c.Write(k, WriteState{StartOffset: -1}); ke != kerr.UnknownTopicOrPartition {
		t.Errorf("unknown partition: got %v", ke)
	}
}

// TestPersisterMessages: the kmsg methods answer each partition in the
// request's version (v1 summary with the delivery-complete count).
func TestPersisterMessages(t *testing.T) {
	e := newEnv(t, Config{})
	ctx := context.Background()
	topic := [16]byte{9}
	w := kmsg.NewPtrWriteShareGroupStateRequest()
	w.Version, w.GroupID = 1, "g"
	wt := kmsg.NewWriteShareGroupStateRequestTopic()
	wt.TopicID = topic
	for p := range int32(4) {
		wp := kmsg.NewWriteShareGroupStateRequestTopicPartition()
		wp.Partition, wp.StartOffset, wp.DeliveryCompleteCount = p, 10, 3
		sb := kmsg.NewWriteShareGroupStateRequestTopicPartitionStateBatch()
		sb.FirstOffset, sb.LastOffset, sb.DeliveryState, sb.DeliveryCount = 10, 12, Acked, 1
		wp.StateBatches = append(wp.StateBatches, sb)
		wt.Partitions = append(wt.Partitions, wp)
	}
	w.Topics = append(w.Topics, wt)
	wr, _ := e.c.WriteShareGroupState(ctx, w)
	for _, p := range wr.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("write %d: %v", p.Partition, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	s := kmsg.NewPtrReadShareGroupStateSummaryRequest()
	s.Version, s.GroupID = 1, "g"
	st := kmsg.NewReadShareGroupStateSummaryRequestTopic()
	st.TopicID = topic
	sp := kmsg.NewReadShareGroupStateSummaryRequestTopicPartition()
	sp.Partition, sp.LeaderEpoch = 2, 0
	st.Partitions = append(st.Partitions, sp)
	s.Topics = append(s.Topics, st)
	sr, _ := e.c.ReadShareGroupStateSummary(ctx, s)
	if p := sr.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.StartOffset != 10 || p.DeliveryCompleteCount != 3 {
		t.Errorf("summary: %+v", p)
	}
	r := kmsg.NewPtrReadShareGroupStateRequest()
	r.GroupID = "g"
	rt := kmsg.NewReadShareGroupStateRequestTopic()
	rt.TopicID = topic
	rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
	rp.Partition = 3
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	rr, _ := e.c.ReadShareGroupState(ctx, r)
	if p := rr.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.StateBatches) != 1 || p.StateBatches[0].LastOffset != 12 {
		t.Errorf("read: %+v", p)
	}
}

func TestLoadErrors(t *testing.T) {
	e := newEnv(t, Config{})
	if _, err := e.c.Load(0, e.logs[0]); !errors.Is(err, ErrAlreadyLoaded) {
		t.Errorf("twice: %v", err)
	}
	if _, err := e.c.Load(testPartitions, e.logs[0]); !errors.Is(err, ErrBadPartition) {
		t.Errorf("out of range: %v", err)
	}
}

// gatedLog is a Log whose first ReadCopy waits for release, after
// telling reading.
type gatedLog struct {
	Log
	once             sync.Once
	reading, release chan struct{}
}

func (g *gatedLog) ReadCopy(offset int64, maxBytes int, maxOffset int64) ([]byte, error) {
	g.once.Do(func() {
		close(g.reading)
		<-g.release
	})
	return g.Log.ReadCopy(offset, maxBytes, maxOffset)
}

// TestLoadStopsWhenDropped: a Close or an Unload while a partition loads
// ends its replay at the next record (a broker shutting down waited for
// replays of partitions it would never serve), and the partition is not
// loaded.
func TestLoadStopsWhenDropped(t *testing.T) {
	for _, how := range []string{"close", "unload"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t, Config{UpdatesPerSnapshot: 1000})
			k := key("g", 0)
			p := e.c.PartitionFor(k)
			mustOK(t, "initialize", e.c.Initialize(k, 1, 0))
			for i := range int64(20) {
				mustOK(t, "write", e.c.Write(k, WriteState{StateEpoch: 1, LeaderEpoch: 1, StartOffset: i, DeliveryCompleteCount: -1}))
			}
			c, err := New(e.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			g := &gatedLog{Log: e.logs[p], reading: make(chan struct{}), release: make(chan struct{})}
			type result struct {
				rep LoadReport
				err error
			}
			done := make(chan result, 1)
			go func() {
				rep, err := c.Load(p, g)
				done <- result{rep, err}
			}()
			<-g.reading
			if how == "close" {
				c.Close()
			} else {
				c.Unload(p)
			}
			close(g.release)
			r := <-done
			if !errors.Is(r.err, ErrClosed) {
				t.Fatalf("Load: %v, want ErrClosed", r.err)
			}
			if r.rep.Records != 0 {
				t.Errorf("replayed %d records after the partition was dropped", r.rep.Records)
			}
			if c.Loaded(p) {
				t.Error("the partition is loaded")
			}
		})
	}
}
