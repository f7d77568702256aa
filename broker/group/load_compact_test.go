package group

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratastream/strata/segment"
)

// segEnv is an env whose partitions are segment logs on disk, cleaned as
// the broker's log cleaner cleans __consumer_offsets. The logs and the
// coordinator share the env's fake clock, so delete.retention.ms and
// offsets.retention.minutes pass when the test says.
type segEnv struct {
	*env
	dir  string
	scfg segment.Config
	logs []*segment.Log
}

func newSegEnv(t *testing.T) *segEnv {
	t.Helper()
	e := &segEnv{env: &env{t: t, clock: newFakeClock()}, dir: t.TempDir()}
	e.cfg = testConfig(e.clock)
	e.scfg = segment.DefaultConfig()
	e.scfg.FlushMessages = 1
	e.scfg.SegmentBytes = 4096                         // many segments, so cleaning has sealed ones to rewrite
	e.scfg.RetentionMs, e.scfg.RetentionBytes = -1, -1 // as the broker keeps __consumer_offsets
	e.openLogs()
	e.startCoordinator()
	t.Cleanup(func() {
		e.c.Close()
		e.closeLogs()
	})
	return e
}

func (e *segEnv) openLogs() {
	e.t.Helper()
	e.logs = e.logs[:0]
	for i := range e.cfg.NumPartitions {
		l, err := segment.Open(filepath.Join(e.dir, fmt.Sprintf("%s-%d", Topic, i)), e.scfg, segment.WithClock(e.clock.Now))
		if err != nil {
			e.t.Fatal(err)
		}
		e.logs = append(e.logs, l)
	}
}

func (e *segEnv) closeLogs() {
	e.t.Helper()
	for _, l := range e.logs {
		if err := l.Close(); err != nil {
			e.t.Fatal(err)
		}
	}
	e.logs = nil
}

func (e *segEnv) startCoordinator() {
	e.t.Helper()
	c, err := New(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	for i, l := range e.logs {
		if _, err := c.Load(i, l); err != nil {
			e.t.Fatal(err)
		}
	}
	e.c = c
}

// reload stops the coordinator and loads the partitions into a new one,
// as a coordinator move does; with reopen the logs are closed and
// recovered first, as after a restart.
func (e *segEnv) reload(reopen bool) {
	e.t.Helper()
	e.c.Close()
	if reopen {
		e.closeLogs()
		e.openLogs()
	}
	e.startCoordinator()
}

// clean runs one cleaning of every partition with delete.retention.ms
// deleteRetention and returns the bytes of the logs before and after.
func (e *segEnv) clean(deleteRetention time.Duration) (before, after int64) {
	e.t.Helper()
	m, err := segment.NewOffsetMap(1<<20, 0.9)
	if err != nil {
		e.t.Fatal(err)
	}
	for i, l := range e.logs {
		before += logBytes(l)
		res, err := l.Clean(context.Background(), segment.CleanConfig{Map: m, DeleteRetentionMs: deleteRetention.Milliseconds()})
		if err != nil {
			e.t.Fatalf("clean partition %d: %v", i, err)
		}
		e.t.Logf("partition %d cleaned: %d segments read, %d written, records %d kept of %d, tombstones removed %d, bytes %d -> %d",
			i, res.SegmentsRead, res.SegmentsWritten, res.RecordsKept, res.RecordsRead, res.TombstonesRemoved, res.BytesRead, res.BytesWritten)
		after += logBytes(l)
	}
	return before, after
}

func logBytes(l *segment.Log) int64 {
	var n int64
	for _, s := range l.Segments() {
		n += s.Size
	}
	return n
}

// logContents counts, over every partition, the records of each key and
// the tombstones among them.
func (e *segEnv) logContents() (records map[string]int, tombstones map[string]int) {
	e.t.Helper()
	records, tombstones = map[string]int{}, map[string]int{}
	for _, l := range e.logs {
		off, end := l.LogStartOffset(), l.LogEndOffset()
		for off < end {
			buf, err := l.ReadCopy(off, 1<<20, end)
			if err != nil {
				e.t.Fatal(err)
			}
			if len(buf) == 0 {
				break
			}
			err = segment.SplitBatches(buf, func(h segment.Header, batch []byte) error {
				off = h.NextOffset()
				it, err := segment.NewRecordIter(batch, segment.DefaultMaxDecompressed)
				if err != nil {
					return err
				}
				for {
					rec, ok, err := it.Next()
					if err != nil || !ok {
						return err
					}
					k := string(rec.Key)
					records[k]++
					if rec.Value == nil {
						tombstones[k]++
					}
				}
			})
			if err != nil {
				e.t.Fatal(err)
			}
		}
	}
	return records, tombstones
}

// committed is every offset of groups as OffsetFetch answers them.
func (e *segEnv) committed(groups ...string) map[string]map[tp]int64 {
	e.t.Helper()
	out := map[string]map[tp]int64{}
	for _, g := range groups {
		got, code := e.fetchAll(g)
		if code != 0 {
			e.t.Fatalf("fetch %s: %s", g, errName(code))
		}
		os := map[tp]int64{}
		for k, p := range got {
			if p.Offset >= 0 {
				os[k] = p.Offset
			}
		}
		out[g] = os
	}
	return out
}

func sameCommitted(t *testing.T, step string, got, want map[string]map[tp]int64) {
	t.Helper()
	for g, w := range want {
		if !maps.Equal(got[g], w) {
			t.Errorf("%s: group %s: got offsets %v, want %v", step, g, got[g], w)
		}
	}
}

// TestLoadAfterCompaction commits, overwrites, deletes and expires offsets
// in segment logs, cleans them as the log cleaner does and checks that a
// coordinator loading the cleaned logs (after a move, and after a restart
// with recovery) holds exactly what it held before; and that the
// tombstones of deleted and expired offsets stay for delete.retention.ms
// after the cleaning that first kept them, then go, with the offsets they
// deleted never coming back.
func TestLoadAfterCompaction(t *testing.T) {
	e := newSegEnv(t)
	ctx := context.Background()
	// A simple consumer that commits once and then goes: its offsets
	// expire offsets.retention.minutes after the commit (KIP-211), and the
	// Empty group with them.
	e.c.OffsetCommit(ctx, commitReq(8, "old", "", -1, "s", 3, 1, nil))
	e.clock.Advance(e.cfg.OffsetsRetention - time.Minute)

	ids, gen := buildForRestart(t, e.env)
	busy := busyGroups(e.cfg.NumPartitions)
	fill := func(from, n int) {
		for i := range n {
			for _, b := range busy {
				e.c.OffsetCommit(ctx, commitReq(8, b, "", -1, "filler", 4, int64(from+i), nil))
			}
		}
	}
	fill(0, 400)
	e.clock.Advance(2 * time.Minute)
	e.c.expireOffsets()
	if st := e.describe("old").State; st != "Dead" {
		t.Fatalf("expired simple group: got %s, want Dead", st)
	}
	// More commits, so the tombstones are in sealed segments the cleaner
	// may rewrite (the active segment is never cleaned).
	fill(400, 100)
	groups := append([]string{"g", "simple", "old", "gone"}, busy...)
	want := e.committed(groups...)
	if len(want["old"]) != 0 || len(want["gone"]) != 0 || want[busy[0]][tp{"filler", 3}] != 502 {
		t.Fatalf("before cleaning: got %v", want)
	}
	deleted := []string{
		string(offsetKey("old", "s", 0)), string(groupKey("old")),
		string(offsetKey("gone", "s", 0)), string(groupKey("gone")),
		string(offsetKey("g", "u", 0)),
	}
	_, tombs := e.logContents()
	for _, k := range deleted {
		if tombs[k] != 1 {
			t.Fatalf("before cleaning: key %q has %d tombstones, want 1", k, tombs[k])
		}
	}

	const deleteRetention = 24 * time.Hour // Kafka's delete.retention.ms
	before, after := e.clean(deleteRetention)
	t.Logf("first cleaning: %d bytes -> %d", before, after)
	if after >= before/2 {
		t.Errorf("first cleaning: %d bytes -> %d, want less than half", before, after)
	}
	recs, tombs := e.logContents()
	for _, k := range deleted {
		if tombs[k] != 1 {
			t.Errorf("after the first cleaning: key %q has %d tombstones, want 1 (kept for delete.retention.ms)", k, tombs[k])
		}
	}
	if n := recs[string(offsetKey(busy[0], "filler", 3))]; n < 1 || n > 20 {
		t.Errorf("after cleaning: %d records of a key committed 500 times, want the last few", n)
	}

	e.reload(false)
	checkRestored(t, e.env, ids, gen)
	sameCommitted(t, "after cleaning and a move", e.committed(groups...), want)

	// Past delete.retention.ms the next cleaning drops the tombstones.
	e.clock.Advance(deleteRetention + time.Minute)
	e.clean(deleteRetention)
	recs, tombs = e.logContents()
	for _, k := range deleted {
		if recs[k] != 0 {
			t.Errorf("past delete.retention.ms: key %q still has %d records (%d tombstones), want none", k, recs[k], tombs[k])
		}
	}
	e.reload(true)
	checkRestored(t, e.env, ids, gen)
	sameCommitted(t, "after tombstones went and a restart", e.committed(groups...), want)
}

// busyGroups names one group per partition of __consumer_offsets.
func busyGroups(partitions int) []string {
	out := make([]string, partitions)
	for found, i := 0, 0; found < partitions; i++ {
		id := fmt.Sprintf("busy-%d", i)
		if p := PartitionFor(id, partitions); out[p] == "" {
			out[p] = id
			found++
		}
	}
	return out
}

// TestLoadSkipsGaps replays a log with the gaps compaction leaves: inside
// and between batches, and at the tail up to the log end.
func TestLoadSkipsGaps(t *testing.T) {
	c, err := New(testConfig(newFakeClock()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	l := &memLog{}
	at := func(base int64, recs ...kv) {
		b, err := buildBatch(1, recs)
		if err != nil {
			t.Fatal(err)
		}
		segment.SetBaseOffset(b, base)
		l.mu.batches = append(l.mu.batches, b)
		h, _ := segment.ParseHeader(b)
		l.mu.next = h.NextOffset()
	}
	commit := func(p int32, off int64) kv {
		return kv{key: offsetKey("g", "t", p), value: offsetValue(offsetEntry{offset: off, leaderEpoch: -1, expireTime: -1})}
	}
	at(3, commit(0, 10))
	at(9, commit(1, 11), commit(2, 12))
	l.mu.next = 40 // the records of 11..39 were cleaned away
	p := PartitionFor("g", testPartitions)
	rep, err := c.Load(p, l)
	if err != nil || rep.Records != 3 || rep.Offsets != 3 {
		t.Fatalf("load: got %+v, %v; want 3 records, 3 offsets", rep, err)
	}
}
