package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/segment"
)

// TestPickFilthiest checks the choice of the partition to clean
// (Kafka's grabFilthiestCompactedLog).
func TestPickFilthiest(t *testing.T) {
	const now = int64(1_000_000)
	def := topicConfig{minCleanableRatio: 0.5, maxCompactionLagMs: math.MaxInt64}
	lag := def
	lag.maxCompactionLagMs = 1000
	cand := func(name string, cfg topicConfig, clean, dirty int64, firstDirtyTs, horizon int64) cleanCandidate {
		info := segment.CleanableInfo{CleanBytes: clean, DirtyBytes: dirty, FirstDirtyTimestamp: firstDirtyTs, EarliestDeleteHorizon: horizon}
		if clean+dirty > 0 {
			info.DirtyRatio = float64(dirty) / float64(clean+dirty)
		}
		return cleanCandidate{p: &partition{topic: name}, cfg: cfg, info: info}
	}
	for i, tc := range []struct {
		cands     []cleanCandidate
		want      string // "" for none
		wantDirty float64
		wantDelay time.Duration
	}{
		{nil, "", 0, 0},
		{[]cleanCandidate{cand("a", def, 0, 0, -1, -1)}, "", 0, 0},
		// Below the ratio: not cleaned; at it: not either (Kafka's ">").
		{[]cleanCandidate{cand("a", def, 60, 40, now, -1), cand("b", def, 50, 50, now, -1)}, "", 50, 0},
		// The dirtiest of those above the ratio.
		{[]cleanCandidate{cand("a", def, 40, 60, now, -1), cand("b", def, 10, 90, now, -1), cand("c", def, 30, 70, now, -1)}, "b", 90, 0},
		// max.compaction.lag.ms makes a partition below the ratio due;
		// it competes on its ratio with the others.
		{[]cleanCandidate{cand("a", lag, 90, 10, now-3000, -1)}, "a", 10, 2 * time.Second},
		{[]cleanCandidate{cand("a", lag, 90, 10, now-3000, -1), cand("b", def, 20, 80, now, -1)}, "b", 80, 2 * time.Second},
		// Overdue, but nothing dirty (the dirty part is in the active segment).
		{[]cleanCandidate{cand("a", lag, 90, 0, now-3000, -1)}, "", 0, 2 * time.Second},
		// Nothing dirty enough: tombstones past their horizon.
		{[]cleanCandidate{cand("a", def, 90, 10, now, now+1), cand("b", def, 80, 20, now, now)}, "b", 20, 0},
		{[]cleanCandidate{cand("a", def, 90, 10, now, now+1)}, "", 10, 0},
		// Dirty ones win over tombstones.
		{[]cleanCandidate{cand("a", def, 100, 0, -1, 5), cand("b", def, 40, 60, now, -1)}, "b", 60, 0},
	} {
		got, st := pickFilthiest(tc.cands, now)
		name := ""
		if got != nil {
			name = got.p.topic
		}
		if name != tc.want || math.Abs(100*st.maxDirtyRatio-tc.wantDirty) > 1e-9 || st.maxCompactionDelay != tc.wantDelay {
			t.Errorf("#%d: got %q (max dirty %v%%, delay %v), want %q (%v%%, %v)", i, name, 100*st.maxDirtyRatio, st.maxCompactionDelay, tc.want, tc.wantDirty, tc.wantDelay)
		}
	}
}

// TestCompactionDelayMs checks Kafka's maxCompactionDelay.
func TestCompactionDelayMs(t *testing.T) {
	for i, tc := range []struct{ ts, lag, now, want int64 }{
		{-1, 10, 100, 0},
		{0, 10, 100, 0},
		{50, 10, 100, 40},
		{90, 10, 100, 0},
		{50, math.MaxInt64, 100, 0},
	} {
		if got := compactionDelayMs(tc.ts, tc.lag, tc.now); got != tc.want {
			t.Errorf("#%d: got %d, want %d", i, got, tc.want)
		}
	}
}

// compactedConfigs are the configs of a compacted test topic: small
// segments, cleaned as soon as anything is dirty.
func compactedConfigs(extra map[string]string) map[string]string {
	c := map[string]string{
		"cleanup.policy":            "compact",
		"segment.bytes":             "2048",
		"min.cleanable.dirty.ratio": "0.01",
	}
	for k, v := range extra {
		c[k] = v
	}
	return c
}

// keyedRecord is a record produced or read: its key, value (nil for a
// tombstone) and offset.
type keyedRecord struct {
	key    string
	value  []byte
	offset int64
}

// produceKeyed produces rounds of values for keys k0..k<keys-1> to
// partition 0 of topic, one record per request (so segments roll), and
// returns them with their offsets. Keys in tombstones get a null value
// in the last round.
func produceKeyed(t *testing.T, cl *kgo.Client, topic string, keys, rounds int, tombstones map[int]bool) []keyedRecord {
	t.Helper()
	var out []keyedRecord
	for r := range rounds {
		for k := range keys {
			key := "k" + strconv.Itoa(k)
			val := []byte(fmt.Sprintf("%s-r%d", key, r))
			if r == rounds-1 && tombstones[k] {
				val = nil
			}
			res := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Partition: 0, Key: []byte(key), Value: val})
			rec, err := res.First()
			if err != nil {
				t.Fatalf("produce %s: %v", key, err)
			}
			out = append(out, keyedRecord{key: key, value: val, offset: rec.Offset})
		}
	}
	return out
}

// readAllKeyed reads partition 0 of topic from offset 0 up to end with a
// franz-go consumer.
func readAllKeyed(t *testing.T, s *Server, topic string, end int64) []keyedRecord {
	t.Helper()
	cl := newClient(t, s, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))
	ctx := testCtx(t)
	var out []keyedRecord
	next := int64(0)
	for next < end {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %s: at %d of %d: %v", topic, next, end, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch %s: %v", topic, err) })
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, keyedRecord{key: string(r.Key), value: r.Value, offset: r.Offset})
			next = r.Offset + 1
		})
		if next < end {
			// The last offsets may have been cleaned away: the high
			// watermark says where the log ends.
			if hw := s.topic(topic).local(0).log.HighWatermark(); len(fs.Records()) == 0 && next >= hw {
				break
			}
		}
	}
	return out
}

// checkCompacted checks Kafka's compaction guarantee on what was read
// from offset 0 against what was produced, with the cleaner checkpoint
// ckpt: offsets strictly increase and each read record is a produced one
// at its original offset; every key's latest record is there, unless it
// is a tombstone that may have gone (tombstonesMayGo); below ckpt no key
// has a record older than its latest one below ckpt.
func checkCompacted(t *testing.T, produced, read []keyedRecord, ckpt int64, tombstonesMayGo bool) {
	t.Helper()
	byOffset := map[int64]keyedRecord{}
	latest := map[string]keyedRecord{}
	latestBelow := map[string]int64{}
	for _, r := range produced {
		byOffset[r.offset] = r
		latest[r.key] = r
		if r.offset < ckpt {
			latestBelow[r.key] = r.offset
		}
	}
	seen := map[int64]bool{}
	prev := int64(-1)
	for _, r := range read {
		if r.offset <= prev {
			t.Fatalf("offset %d after %d: offsets must increase", r.offset, prev)
		}
		prev = r.offset
		p, ok := byOffset[r.offset]
		if !ok || p.key != r.key || string(p.value) != string(r.value) || (p.value == nil) != (r.value == nil) {
			t.Fatalf("offset %d: read %s=%q, produced %s=%q", r.offset, r.key, r.value, p.key, p.value)
		}
		if r.offset < ckpt && latestBelow[r.key] != r.offset {
			t.Fatalf("offset %d: %s=%q is below the cleaner checkpoint %d, but %s has a newer record at %d", r.offset, r.key, r.value, ckpt, r.key, latestBelow[r.key])
		}
		seen[r.offset] = true
	}
	for k, r := range latest {
		if !seen[r.offset] && !(r.value == nil && tombstonesMayGo) {
			t.Fatalf("key %s: latest record at %d (%q) not read", k, r.offset, r.value)
		}
	}
}

// onCleaned sets s's cleaner hook; events are sent on the returned
// channel (dropped when it is full).
func onCleaned(t *testing.T, s *Server) <-chan cleanEvent {
	t.Helper()
	ch := make(chan cleanEvent, 1000)
	h := func(e cleanEvent) {
		select {
		case ch <- e:
		default:
		}
	}
	s.cleaner.onCleaned.Store(&h)
	t.Cleanup(func() { s.cleaner.onCleaned.Store(nil) })
	return ch
}

// waitCleaned waits for a cleaning of topic (any topic for "") that
// cleaned something, and returns it.
func waitCleaned(t *testing.T, events <-chan cleanEvent, topic string) cleanEvent {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case e := <-events:
			if e.err != nil {
				t.Fatalf("cleaning %s-%d: %v", e.p.topic, e.p.index, e.err)
			}
			if (topic == "" || e.p.topic == topic) && e.res.Cleaned {
				return e
			}
		case <-deadline:
			t.Fatalf("no cleaning of %s within a minute", topic)
		}
	}
}

// TestLogCleanerCompacts produces many values of few keys to a
// compacted topic and reads it back from offset 0 once cleaned: the
// guarantee holds, and less is left than was produced.
func TestLogCleanerCompacts(t *testing.T) {
	s := startServer(t, map[string]string{"log.cleaner.backoff.ms": "50"})
	events := onCleaned(t, s)
	cl := newClient(t, s)
	createTopic(t, cl, "cmp", 1, compactedConfigs(nil))
	produced := produceKeyed(t, cl, "cmp", 10, 12, map[int]bool{3: true})
	p := s.topic("cmp").local(0)
	e := waitCleaned(t, events, "cmp")
	t.Logf("cleaned: first dirty %d, mapped end %d, %d segments read, %d written, %d of %d records kept, %v",
		e.res.FirstDirty, e.res.MappedEnd, e.res.SegmentsRead, e.res.SegmentsWritten, e.res.RecordsKept, e.res.RecordsRead, e.res.Duration)
	waitFor(t, "the cleaner checkpoint to reach the last sealed segment", func() bool {
		info, err := p.log.Cleanable(segment.CleanConfig{})
		return err == nil && p.log.CleanerCheckpoint() > 0 && info.DirtyBytes == 0
	})
	ckpt := p.log.CleanerCheckpoint()
	read := readAllKeyed(t, s, "cmp", p.log.HighWatermark())
	checkCompacted(t, produced, read, ckpt, true)
	if len(read) >= len(produced) {
		t.Fatalf("read %d records of %d produced: nothing was compacted", len(read), len(produced))
	}
	t.Logf("%d records produced, %d read after cleaning up to %d", len(produced), len(read), ckpt)
	if got := gaugeValue(t, s, "strata_log_cleaner_runs_total"); got < 1 {
		t.Errorf("strata_log_cleaner_runs_total = %v", got)
	}
	if got := gaugeValue(t, s, "strata_log_cleaner_written_bytes_total"); got <= 0 {
		t.Errorf("strata_log_cleaner_written_bytes_total = %v", got)
	}
}

// gaugeValue is the value of the unlabelled metric name of s.
func gaugeValue(t *testing.T, s *Server, name string) float64 {
	t.Helper()
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.Metric) == 0 {
			continue
		}
		m := mf.Metric[0]
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// waitIdle waits until every cleaner thread sleeps, and drops the
// events of the cleanings before (the tests that use it set a backoff of
// an hour, so the threads sleep until kicked).
func waitIdle(t *testing.T, s *Server, events <-chan cleanEvent) {
	t.Helper()
	waitFor(t, "the cleaner threads to sleep", func() bool { return s.cleaner.sleeping.Load() == s.cleaner.config().Threads })
	for len(events) > 0 {
		<-events
	}
}

// kickAndWait ends the cleaner's backoff and waits for its next two
// picks (the one it makes on waking and another after it).
func kickAndWait(t *testing.T, s *Server) {
	t.Helper()
	want := s.cleaner.picks.Load() + 1
	s.cleaner.kick()
	waitFor(t, "a cleaner pick", func() bool { return s.cleaner.picks.Load() >= want })
}

// TestLogCleanerDirtiestFirstAndBackoff checks that a sleeping cleaner
// cleans nothing until its backoff ends, then the dirtiest partition
// first.
func TestLogCleanerDirtiestFirstAndBackoff(t *testing.T) {
	s := startServer(t, map[string]string{"log.cleaner.backoff.ms": "3600000"})
	events := onCleaned(t, s)
	cl := newClient(t, s)
	createTopic(t, cl, "lightly", 1, compactedConfigs(nil))
	createTopic(t, cl, "heavily", 1, compactedConfigs(nil))
	waitFor(t, "the cleaner's first pick", func() bool { return s.cleaner.picks.Load() >= 1 })
	// Both wholly dirty (ratio 1): clean both once, so each has a clean
	// section.
	produceKeyed(t, cl, "lightly", 10, 3, nil)
	produceKeyed(t, cl, "heavily", 10, 3, nil)
	s.cleaner.kick()
	waitCleaned(t, events, "lightly")
	waitIdle(t, s, events)

	produceKeyed(t, cl, "lightly", 10, 3, nil)
	produceKeyed(t, cl, "heavily", 10, 20, nil)
	light, err := s.topic("lightly").local(0).log.Cleanable(segment.CleanConfig{})
	if err != nil {
		t.Fatal(err)
	}
	heavy, err := s.topic("heavily").local(0).log.Cleanable(segment.CleanConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dirty ratios: lightly %.2f (%d dirty bytes), heavily %.2f", light.DirtyRatio, light.DirtyBytes, heavy.DirtyRatio)
	if light.DirtyBytes == 0 || light.DirtyRatio <= 0.01 || light.DirtyRatio >= heavy.DirtyRatio {
		t.Fatalf("setup: want 0.01 < lightly's ratio < heavily's")
	}
	if len(events) > 0 {
		e := <-events
		t.Fatalf("cleaned %s during the backoff", e.p.topic)
	}
	s.cleaner.kick()
	first := waitCleaned(t, events, "")
	if first.p.topic != "heavily" {
		t.Fatalf("first cleaned %s, want the dirtier heavily", first.p.topic)
	}
	waitCleaned(t, events, "lightly")
}

// TestLogCleanerMaxCompactionLag checks that a partition below its
// min.cleanable.dirty.ratio is cleaned once its dirty data is older than
// max.compaction.lag.ms, and that both change at run time.
func TestLogCleanerMaxCompactionLag(t *testing.T) {
	s := startServer(t, map[string]string{"log.cleaner.backoff.ms": "3600000"})
	events := onCleaned(t, s)
	cl := newClient(t, s)
	createTopic(t, cl, "lag", 1, compactedConfigs(map[string]string{"min.cleanable.dirty.ratio": "1"}))
	produceKeyed(t, cl, "lag", 10, 5, nil)
	waitFor(t, "the cleaner's first pick", func() bool { return s.cleaner.picks.Load() >= 1 })
	kickAndWait(t, s)
	kickAndWait(t, s)
	if len(events) > 0 {
		e := <-events
		t.Fatalf("cleaned %s at ratio 1 without lag", e.p.topic)
	}
	if g := gaugeValue(t, s, "strata_log_cleaner_max_dirty_percent"); g != 100 {
		t.Errorf("strata_log_cleaner_max_dirty_percent = %v, want 100", g)
	}
	alter(t, cl, "lag", compactedConfigs(map[string]string{"min.cleanable.dirty.ratio": "1", "max.compaction.lag.ms": "1"}))
	s.cleaner.kick()
	waitCleaned(t, events, "lag")
}

// TestLogCleanerStoppedByDelete deletes a topic while the cleaner, slowed
// by log.cleaner.io.max.bytes.per.second, cleans it: the cleaning is
// cancelled, the topic's files go, nothing is marked uncleanable and the
// log directory stays online.
func TestLogCleanerStoppedByDelete(t *testing.T) {
	s := startServer(t, map[string]string{
		"log.cleaner.backoff.ms":              "50",
		"log.cleaner.io.buffer.size":          "1024",
		"log.cleaner.io.max.bytes.per.second": "1024",
	})
	events := onCleaned(t, s)
	cl := newClient(t, s)
	createTopic(t, cl, "doomed", 1, compactedConfigs(nil))
	produceKeyed(t, cl, "doomed", 10, 10, nil)
	p := s.topic("doomed").local(0)
	dir := p.path()
	waitFor(t, "a cleaning of doomed to run", func() bool {
		s.cleaner.mu.Lock()
		defer s.cleaner.mu.Unlock()
		return s.cleaner.mu.running[p] != nil
	})
	adm := kadm.NewClient(cl)
	resp, err := adm.DeleteTopics(testCtx(t), "doomed")
	if err != nil || resp["doomed"].Err != nil {
		t.Fatalf("delete: %v %v", err, resp["doomed"].Err)
	}
	e := <-events
	if e.p != p || !errors.Is(e.err, context.Canceled) {
		t.Fatalf("cleaning ended with %v, want it cancelled", e.err)
	}
	waitFor(t, "the deleted partition's directory to go", func() bool {
		_, err := os.Stat(dir)
		return os.IsNotExist(err)
	})
	if g := gaugeValue(t, s, "strata_log_cleaner_uncleanable_partitions"); g != 0 {
		t.Errorf("uncleanable partitions %v", g)
	}
	if n := s.dirs.offlineCount(); n != 0 {
		t.Errorf("%d log directories offline", n)
	}
}

// TestProduceKeylessToCompactedTopic checks that a compacted topic
// refuses a batch holding a record without a key (INVALID_RECORD, the
// record named), alone: the other partition of the request and keyed
// batches are appended; after cleanup.policy goes back to delete, the
// keyless batch is accepted.
func TestProduceKeylessToCompactedTopic(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	createTopic(t, cl, "keyed", 2, map[string]string{"cleanup.policy": "compact,delete"})
	keyless := func(codec segment.Codec) []byte {
		b, err := segment.BuildBatch(segment.BatchSpec{Codec: codec, Records: []segment.Record{
			{Timestamp: time.Now().UnixMilli(), Key: []byte("a"), Value: []byte("1")},
			{Timestamp: time.Now().UnixMilli(), Value: []byte("no key")},
		}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, codec := range []segment.Codec{segment.CodecNone, segment.CodecZstd} {
		req := produceRequest("keyed", 0, keyless(codec))
		rp := req.Topics[0].Partitions[0]
		rp.Partition, rp.Records = 1, buildBatch(t, segment.CodecNone, 3)
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
		resp, err := cl.Broker(0).Request(testCtx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		parts := resp.(*kmsg.ProduceResponse).Topics[0].Partitions
		bad, good := parts[0], parts[1]
		want := "Compacted topic cannot accept message without key in topic partition keyed-0."
		if bad.ErrorCode != kerr.InvalidRecord.Code || bad.ErrorMessage == nil || *bad.ErrorMessage != want ||
			len(bad.ErrorRecords) != 1 || bad.ErrorRecords[0].RelativeOffset != 1 {
			t.Fatalf("codec %v: keyless batch: code %d message %v records %+v", codec, bad.ErrorCode, bad.ErrorMessage, bad.ErrorRecords)
		}
		if good.ErrorCode != 0 {
			t.Fatalf("codec %v: keyed batch of the same request: code %d", codec, good.ErrorCode)
		}
	}
	if end := s.topic("keyed").local(0).log.LogEndOffset(); end != 0 {
		t.Fatalf("keyed-0 holds %d offsets after only refused batches", end)
	}
	alter(t, cl, "keyed", map[string]string{"cleanup.policy": "delete"})
	waitFor(t, "the policy change to apply", func() bool { return !s.topic("keyed").cfg.compact })
	if sp := produceRaw(t, cl, "keyed", 0, keyless(segment.CodecNone)); sp.ErrorCode != 0 {
		t.Fatalf("keyless batch to a delete topic: code %d", sp.ErrorCode)
	}
}

// TestCleanupPolicyChangedAtRunTime turns compaction on for a topic with
// IncrementalAlterConfigs: the cleaner then compacts what it holds.
func TestCleanupPolicyChangedAtRunTime(t *testing.T) {
	s := startServer(t, map[string]string{"log.cleaner.backoff.ms": "50"})
	events := onCleaned(t, s)
	cl := newClient(t, s)
	createTopic(t, cl, "later", 1, map[string]string{"segment.bytes": "2048"})
	produced := produceKeyed(t, cl, "later", 10, 6, nil)
	adm := kadm.NewClient(cl)
	resp, err := adm.AlterTopicConfigs(testCtx(t), []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "cleanup.policy", Value: kmsg.StringPtr("compact")},
		{Op: kadm.SetConfig, Name: "min.cleanable.dirty.ratio", Value: kmsg.StringPtr("0.01")},
	}, "later")
	if err != nil || resp[0].Err != nil {
		t.Fatalf("alter: %v %v", err, resp)
	}
	waitCleaned(t, events, "later")
	p := s.topic("later").local(0)
	read := readAllKeyed(t, s, "later", p.log.HighWatermark())
	checkCompacted(t, produced, read, p.log.CleanerCheckpoint(), false)
	if len(read) >= len(produced) {
		t.Fatalf("read %d of %d: nothing compacted", len(read), len(produced))
	}
}

// TestLogCleanerAbortedByLogDirMove moves a partition to another log
// directory while a throttled cleaning of it runs: the cleaning is
// cancelled before the move copies a file, none starts while the move
// runs, and cleaning resumes in the new directory.
func TestLogCleanerAbortedByLogDirMove(t *testing.T) {
	d1, d2 := t.TempDir(), t.TempDir()
	s := startServer(t, map[string]string{
		"log.dirs":                            d1 + "," + d2,
		"log.cleaner.backoff.ms":              "50",
		"log.cleaner.io.buffer.size":          "1024",
		"log.cleaner.io.max.bytes.per.second": "1024",
	})
	events := onCleaned(t, s)
	cl := newClient(t, s)
	createTopic(t, cl, "moving", 1, compactedConfigs(nil))
	produceKeyed(t, cl, "moving", 10, 10, nil)
	p := s.topic("moving").local(0)
	running := func() bool {
		s.cleaner.mu.Lock()
		defer s.cleaner.mu.Unlock()
		return s.cleaner.mu.running[p] != nil
	}
	waitFor(t, "a cleaning of moving to run", running)
	dest := d1
	if p.logDir().path == d1 {
		dest = d2
	}
	var cleanedDuringMove atomic.Int32
	s.testMoveHook = func(point, _ string) {
		if running() {
			cleanedDuringMove.Add(1)
		}
	}
	if code := alterLogDir(t, cl, dest, "moving", 0)[0]; code != 0 {
		t.Fatalf("AlterReplicaLogDirs: %v", kerr.ErrorForCode(code))
	}
	if e := <-events; e.p != p || !errors.Is(e.err, context.Canceled) {
		t.Fatalf("cleaning ended with %v, want it cancelled by the move", e.err)
	}
	waitFor(t, "the move to finish", func() bool { return p.logDir().path == dest && p.futureReplica() == nil })
	if n := cleanedDuringMove.Load(); n > 0 {
		t.Fatalf("a cleaning ran at %d steps of the move", n)
	}
	waitFor(t, "a cleaning in the new directory", running)
}

// TestLogCleanerMarksCorruptPartitionUncleanable damages a sealed
// segment of a compacted topic: the cleaning fails, the partition is
// counted uncleanable and not tried again, and its log directory stays
// online (a corrupt batch is not a failing disk).
func TestLogCleanerMarksCorruptPartitionUncleanable(t *testing.T) {
	s := startServer(t, map[string]string{"log.cleaner.backoff.ms": "3600000"})
	events := onCleaned(t, s)
	cl := newClient(t, s)
	createTopic(t, cl, "damaged", 1, compactedConfigs(nil))
	waitFor(t, "the cleaner's first pick", func() bool { return s.cleaner.picks.Load() >= 1 })
	waitIdle(t, s, events)
	produceKeyed(t, cl, "damaged", 10, 5, nil)
	p := s.topic("damaged").local(0)
	f, err := os.OpenFile(filepath.Join(p.path(), segment.SegmentFileName(0, segment.LogSuffix)), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("garbage!"), 70); err != nil { // inside the first batch's records
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	s.cleaner.kick()
	var e cleanEvent
	select {
	case e = <-events:
	case <-time.After(time.Minute):
		t.Fatal("no cleaning within a minute")
	}
	if !segment.IsCorrupt(e.err) {
		t.Fatalf("cleaning ended with %v, want corruption", e.err)
	}
	if g := gaugeValue(t, s, "strata_log_cleaner_uncleanable_partitions"); g != 1 {
		t.Fatalf("uncleanable partitions %v, want 1", g)
	}
	kickAndWait(t, s)
	if len(events) > 0 {
		t.Fatalf("an uncleanable partition was cleaned again: %v", (<-events).err)
	}
	if n := s.dirs.offlineCount(); n != 0 {
		t.Fatalf("%d log directories offline", n)
	}
}
