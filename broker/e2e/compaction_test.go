package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/e2e/history"
	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/segment/poll"
)

// Compacted topics end to end: real clients (franz-go, kcat) reading a
// compacted topic from offset 0 while the cleaner rewrites it, and a
// broker killed with SIGKILL while it cleans. What is checked is Kafka's
// compaction guarantee (compactionCheck): offsets strictly increase and
// each record is at the offset it was acknowledged at; every key's latest
// record is there (a tombstone may go once delete.retention.ms has
// passed); below the cleaner checkpoint no key has a record older than its
// latest one there; and, at the end, tombstones past delete.retention.ms
// are gone.

// compactTopicConfigs are the configs of the compacted test topics: small
// segments, cleaned as soon as a sealed segment is dirty.
func compactTopicConfigs(extra ...string) map[string]string {
	c := map[string]string{
		"cleanup.policy":            "compact",
		"segment.bytes":             "32768",
		"min.cleanable.dirty.ratio": "0.01",
		"delete.retention.ms":       "2000",
	}
	for _, kv := range extra {
		k, v, _ := strings.Cut(kv, "=")
		c[k] = v
	}
	return c
}

// compactProducer is a producer whose batches are uncompressed and at
// most 16 KiB, so that a round spans several segments.
func compactProducer(t testing.TB, b *Broker) *kgo.Client {
	t.Helper()
	return b.Client(t, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(16384))
}

// createTopicConfigs creates a one-partition topic with configs.
func createTopicConfigs(t testing.TB, b *Broker, topic string, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 1
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, b.Client(t))
	if err != nil {
		t.Fatalf("CreateTopics %s: %v", topic, err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("CreateTopics %s: %v %v", topic, err, resp.Topics[0].ErrorMessage)
	}
}

// compactKey and compactValue name key k and its value of round r (no
// spaces, for kcat); a value says its key and round.
func compactKey(k int) string { return "k" + strconv.Itoa(k) }

func compactValue(k, r, size int) string {
	v := fmt.Sprintf("k%d-r%d-", k, r)
	return v + strings.Repeat("x", max(size-len(v), 0))
}

// parseCompactValue returns the key and round a value names.
func parseCompactValue(v string) (key string, round int, ok bool) {
	f := strings.SplitN(v, "-", 3)
	if len(f) != 3 || !strings.HasPrefix(f[1], "r") {
		return "", 0, false
	}
	r, err := strconv.Atoi(f[1][1:])
	return f[0], r, err == nil
}

// compactRecord is one record produced or read: key, value (null for a
// tombstone) and offset.
type compactRecord struct {
	key    string
	value  *string
	offset int64
}

func (r compactRecord) String() string {
	if r.value == nil {
		return fmt.Sprintf("%s=<tombstone>@%d", r.key, r.offset)
	}
	v := *r.value
	if i := strings.LastIndexByte(v, '-'); i > 0 {
		v = v[:i]
	}
	return fmt.Sprintf("%s=%s@%d", r.key, v, r.offset)
}

// compactRound describes what a round produces: which keys, and which of
// them get a tombstone instead of a value.
type compactRound struct {
	round      int
	keys       []int
	tombstones map[int]bool
	valueSize  int
}

// produceCompactRound produces a round to partition 0 of each topic
// (acks=all, idempotent) and returns the acknowledged records by topic.
// Every record must be acknowledged: else the error.
func produceCompactRound(ctx context.Context, cl *kgo.Client, topics []string, cr compactRound) (map[string][]compactRecord, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for _, topic := range topics {
		for _, k := range cr.keys {
			r := &kgo.Record{Topic: topic, Partition: 0, Key: []byte(compactKey(k))}
			if !cr.tombstones[k] {
				r.Value = []byte(compactValue(k, cr.round, cr.valueSize))
			}
			recs = append(recs, r)
		}
	}
	out := map[string][]compactRecord{}
	for _, pr := range cl.ProduceSync(ctx, recs...) {
		if pr.Err != nil {
			return nil, fmt.Errorf("round %d: produce %s to %s: %w", cr.round, pr.Record.Key, pr.Record.Topic, pr.Err)
		}
		rec := compactRecord{key: string(pr.Record.Key), offset: pr.Record.Offset}
		if pr.Record.Value != nil {
			v := string(pr.Record.Value)
			rec.value = &v
		}
		out[pr.Record.Topic] = append(out[pr.Record.Topic], rec)
	}
	return out, nil
}

// compactionReport counts what compactionCheck found wrong; all must be
// zero.
type compactionReport struct {
	Produced, Read int
	// Lost: a key's latest acknowledged record is not there (a
	// tombstone excepted, when tombstones may have gone).
	Lost int
	// Stale: a record below the cleaner checkpoint older than its key's
	// latest record below it.
	Stale int
	// Inconsistent: offsets not increasing, a record at an offset other
	// than its acknowledgement's, or a record never produced.
	Inconsistent int
	// TombstonesLeft: tombstones read that should be gone (only counted
	// when asked).
	TombstonesLeft int
	Problems       []string
}

func (r compactionReport) ok() bool {
	return r.Lost+r.Stale+r.Inconsistent+r.TombstonesLeft == 0
}

func (r compactionReport) String() string {
	return fmt.Sprintf("produced=%d read=%d lost=%d stale=%d inconsistent=%d tombstones_left=%d",
		r.Produced, r.Read, r.Lost, r.Stale, r.Inconsistent, r.TombstonesLeft)
}

func (r *compactionReport) problem(format string, args ...any) {
	if len(r.Problems) < 20 {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// compactionCheck holds what was read from offset 0 against what was
// produced, with ckpt the cleaner checkpoint read before the read began.
// tombstonesGone also requires the tombstones below ckpt to be gone.
func compactionCheck(produced, read []compactRecord, ckpt int64, tombstonesGone bool) compactionReport {
	r := compactionReport{Produced: len(produced), Read: len(read)}
	byOffset := map[int64]compactRecord{}
	latest := map[string]compactRecord{}
	latestBelow := map[string]int64{}
	for _, p := range produced {
		byOffset[p.offset] = p
		latest[p.key] = p
		if p.offset < ckpt {
			latestBelow[p.key] = p.offset
		}
	}
	seen := map[int64]bool{}
	prev := int64(-1)
	for _, rd := range read {
		if rd.offset <= prev {
			r.Inconsistent++
			r.problem("offset %d read after %d", rd.offset, prev)
		}
		prev = rd.offset
		p, ok := byOffset[rd.offset]
		if !ok || p.key != rd.key || (p.value == nil) != (rd.value == nil) || p.value != nil && *p.value != *rd.value {
			r.Inconsistent++
			r.problem("read %v, produced there: %v (found %v)", rd, p, ok)
			continue
		}
		seen[rd.offset] = true
		if rd.offset < ckpt && latestBelow[rd.key] != rd.offset {
			r.Stale++
			r.problem("read %v below the cleaner checkpoint %d, but %s has a newer record at %d", rd, ckpt, rd.key, latestBelow[rd.key])
		}
		if tombstonesGone && rd.value == nil && rd.offset < ckpt {
			r.TombstonesLeft++
			r.problem("tombstone %v below the cleaner checkpoint %d is still there", rd, ckpt)
		}
	}
	for _, p := range latest {
		if !seen[p.offset] && p.value != nil {
			r.Lost++
			r.problem("latest record %v not read", p)
		}
	}
	return r
}

// readCompacted reads partition 0 of topic from offset 0 to its high
// watermark with franz-go.
func readCompacted(t testing.TB, b *Broker, topic string) []compactRecord {
	t.Helper()
	end := listEndOffsets(t, b, topic, 1)[0]
	if end == 0 {
		return nil
	}
	cl := b.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var out []compactRecord
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: %v after %d records", topic, ctx.Err(), len(out))
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("fetch %s: %v", topic, fe.Err)
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			cr := compactRecord{key: string(r.Key), offset: r.Offset}
			if r.Value != nil {
				v := string(r.Value)
				cr.value = &v
			}
			out = append(out, cr)
			done = done || r.Offset+1 >= end
		})
		if done {
			return out
		}
		if len(out) > 0 && fs.NumRecords() == 0 {
			// The records up to end may have been cleaned away; the
			// client only stops at a record, so ask where it is.
			if off := fetchOffsetAfter(t, b, topic, out[len(out)-1].offset+1); off < 0 || off >= end {
				return out
			}
		}
	}
}

// fetchOffsetAfter returns the first offset at or after from that a fetch
// returns a record for, -1 if none before the high watermark.
func fetchOffsetAfter(t testing.TB, b *Broker, topic string, from int64) int64 {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = from, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	resp, err := fetchV12{req}.RequestWith(ctx, b.Client(t))
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("fetch %s at %d: %v", topic, from, kerr.ErrorForCode(p.ErrorCode))
	}
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: topic, Partition: 0, KeepControlRecords: true}, &p, kgo.DefaultDecompressor(), nil)
	for _, r := range fp.Records {
		if r.Offset >= from {
			return r.Offset
		}
	}
	return -1
}

// kcatReadCompacted reads partition 0 of topic from the beginning to its
// end with kcat, tombstones as NULL (-Z).
func kcatReadCompacted(t testing.TB, b *Broker, topic string) []compactRecord {
	t.Helper()
	out := runCmd(t, 60*time.Second, "", "kcat", "-C", "-b", b.Addr, "-t", topic, "-p", "0",
		"-o", "beginning", "-e", "-q", "-Z", "-f", `%o %k %s\n`)
	var recs []compactRecord
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, " ")
		if len(f) != 3 {
			t.Fatalf("kcat line %q: want 3 fields", line)
		}
		off, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			t.Fatalf("kcat line %q: %v", line, err)
		}
		r := compactRecord{key: f[1], offset: off}
		if f[2] != "NULL" {
			v := f[2]
			r.value = &v
		}
		recs = append(recs, r)
	}
	return recs
}

// cleanerCheckpoint reads the cleaner checkpoint of partition 0 of topic
// (0 before the first cleaning).
func cleanerCheckpoint(t testing.TB, b *Broker, topic string) int64 {
	t.Helper()
	off, _, err := segment.ReadCleanerCheckpoint(partitionDir(b, topic, 0))
	if err != nil {
		t.Fatalf("cleaner checkpoint of %s: %v", topic, err)
	}
	return off
}

// activeBase is the base offset of the newest segment of partition 0 of
// topic: the cleaner never gets past it.
func activeBase(t testing.TB, b *Broker, topic string) int64 {
	t.Helper()
	segs, err := segment.ListSegments(partitionDir(b, topic, 0))
	if err != nil || len(segs) == 0 {
		t.Fatalf("segments of %s: %v (%d)", topic, err, len(segs))
	}
	return segs[len(segs)-1].BaseOffset
}

// checkCompactionSettled reads topic and checks it against its cleaner
// checkpoint on disk. The broker writes a cleaning's checkpoint file a
// moment before it serves the cleaned segments (segment.Log.swapCleaned
// commits the swap on disk, then puts the new segments in the log), so
// a read in between sees segments the file already calls clean, which no
// client can tell. A violation therefore counts only when settleReads
// reads in a row at the same checkpoint show one; a real one stays.
func checkCompactionSettled(t testing.TB, b *Broker, topic string, produced []compactRecord, tombstonesGone bool) compactionReport {
	t.Helper()
	const settleReads, maxReads = 3, 20
	var r compactionReport
	prev, seen := int64(-1), 0
	for range maxReads {
		ckpt := cleanerCheckpoint(t, b, topic)
		r = compactionCheck(produced, readCompacted(t, b, topic), ckpt, tombstonesGone)
		if r.Lost+r.Stale+r.Inconsistent == 0 {
			return r
		}
		if ckpt != prev {
			prev, seen = ckpt, 0
		}
		if seen++; seen >= settleReads {
			return r
		}
	}
	return r
}

// waitCleanedUpTo waits until the cleaner checkpoint of topic reaches its
// active segment.
func waitCleanedUpTo(t testing.TB, b *Broker, topic string) {
	t.Helper()
	poll.Until(t, 5*time.Minute, "the cleaner checkpoint of "+topic+" to reach the active segment", func() bool {
		b.RequireAlive(t)
		return cleanerCheckpoint(t, b, topic) >= activeBase(t, b, topic)
	})
}

// requireCompaction fails the test with the report unless it is clean.
func requireCompaction(t testing.TB, what string, r compactionReport) {
	t.Helper()
	t.Logf("%s: %v", what, r)
	if !r.ok() {
		t.Fatalf("%s: compaction guarantee broken: %v\n%s", what, r, strings.Join(r.Problems, "\n"))
	}
}

// TestCompactedTopicReadWhileCleaned produces rounds of values for a set
// of keys to a compacted topic while franz-go and kcat read it from offset
// 0 over and over, the cleaner (throttled, so that it is busy through the
// run) rewriting it meanwhile. Each read must have increasing offsets and,
// per key, rounds that increase with the offset; once production stops and
// the cleaner has caught up, a last read by each client must show the
// compaction guarantee.
func TestCompactedTopicReadWhileCleaned(t *testing.T) {
	requireKcat(t)
	const topic, keys, rounds = "changelog", 300, 8
	b := StartBroker(t, "log.cleaner.backoff.ms=100", "log.cleaner.io.max.bytes.per.second=1048576", "log.cleaner.io.buffer.size=65536")
	createTopicConfigs(t, b, topic, compactTopicConfigs())
	cl := compactProducer(t, b)

	var produced []compactRecord
	var produceErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		all := make([]int, keys)
		for k := range all {
			all[k] = k
		}
		for r := range rounds {
			recs, err := produceCompactRound(t.Context(), cl, []string{topic}, compactRound{round: r, keys: all, valueSize: 200})
			if err != nil {
				produceErr = err
				return
			}
			produced = append(produced, recs[topic]...)
		}
	}()
	passes := map[string]int{}
	check := func(reader string, recs []compactRecord) {
		prev := int64(-1)
		rounds := map[string]int{}
		for _, r := range recs {
			if r.offset <= prev {
				t.Fatalf("%s: offset %d after %d", reader, r.offset, prev)
			}
			prev = r.offset
			if r.value == nil {
				continue
			}
			key, round, ok := parseCompactValue(*r.value)
			if !ok || key != r.key {
				t.Fatalf("%s: record %v: value not of its key", reader, r)
			}
			if last, ok := rounds[key]; ok && round <= last {
				t.Fatalf("%s: %v after round %d of the same key", reader, r, last)
			}
			rounds[key] = round
		}
		passes[reader]++
	}
	// Read until production has stopped and the cleaner has caught up,
	// so that reads overlap cleanings.
	deadline := time.Now().Add(2 * time.Minute)
	for caughtUp := false; !caughtUp; {
		select {
		case <-done:
			if produceErr != nil { // read after done was closed
				t.Fatal(produceErr)
			}
			caughtUp = cleanerCheckpoint(t, b, topic) >= activeBase(t, b, topic)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cleaner did not catch up within 2 minutes")
		}
		check("franz-go", readCompacted(t, b, topic))
		check("kcat", kcatReadCompacted(t, b, topic))
	}
	ckpt := cleanerCheckpoint(t, b, topic)
	franz := readCompacted(t, b, topic)
	kc := kcatReadCompacted(t, b, topic)
	t.Logf("%d rounds of %d keys; reads while producing and cleaning: %v; cleaner checkpoint %d", rounds, keys, passes, ckpt)
	requireCompaction(t, "franz-go after cleaning", compactionCheck(produced, franz, ckpt, false))
	requireCompaction(t, "kcat after cleaning", compactionCheck(produced, kc, ckpt, false))
	if len(franz) >= len(produced)/2 {
		t.Fatalf("%d records left of %d produced: the cleaner compacted little", len(franz), len(produced))
	}
}

// compactionKills is how many times TestCompactionKilledWhileCleaning
// kills the broker: STRATA_CHAOS_COMPACT_KILLS for make chaos, else 3.
func compactionKills(t *testing.T) int {
	t.Helper()
	if v := os.Getenv("STRATA_CHAOS_COMPACT_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("STRATA_CHAOS_COMPACT_KILLS=%q: want a positive count", v)
		}
		return n
	}
	return 3
}

// TestCompactionKilledWhileCleaning kills a broker with SIGKILL while its
// cleaner (throttled, so that a cleaning takes seconds) rewrites a
// compacted topic, at random points: half the kills at a random time after
// a round was produced (while the cleaner maps or rewrites), half at a
// random time after a .cleaned file appeared (while it writes cleaned
// segments or swaps them in). After each restart the compaction guarantee
// must hold; at the end, once the cleaner has caught up and
// delete.retention.ms has passed, the tombstones must be gone too. The
// same records go to a topic with cleanup.policy=delete, which the history
// checker holds against everything acknowledged.
func TestCompactionKilledWhileCleaning(t *testing.T) {
	const topic, plain, keys = "compacted", "plain", 1000
	kills := compactionKills(t)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0))
	t.Logf("seed %d, %d kills", seed, kills)
	b := StartBroker(t, "log.cleaner.backoff.ms=100", "log.cleaner.io.max.bytes.per.second=262144", "log.cleaner.io.buffer.size=16384")
	createTopicConfigs(t, b, topic, compactTopicConfigs())
	createTopicConfigs(t, b, plain, map[string]string{"segment.bytes": "32768"})
	hist := history.New()
	var produced []compactRecord
	// Round 0 writes every key, round 1 every key with tombstones for
	// every tenth, later rounds the keys that were not deleted.
	all, live := []int{}, []int{}
	tomb := map[int]bool{}
	for k := range keys {
		all = append(all, k)
		if k%10 == 0 {
			tomb[k] = true
		} else {
			live = append(live, k)
		}
	}
	produce := func(cr compactRound) {
		cl := compactProducer(t, b)
		recs, err := produceCompactRound(t.Context(), cl, []string{topic, plain}, cr)
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		produced = append(produced, recs[topic]...)
		tp := history.TP{Topic: plain, Partition: 0}
		for _, r := range recs[plain] {
			v := historyValue(r)
			hist.Sent("producer", tp, v)
			hist.Answered(tp, v, history.Acked, r.offset, "")
		}
	}
	produce(compactRound{round: 0, keys: all, valueSize: 300})
	produce(compactRound{round: 1, keys: all, tombstones: tomb, valueSize: 300})
	midClean := 0
	for i := range kills {
		produce(compactRound{round: 2 + i, keys: live, valueSize: 300})
		var delay time.Duration
		if i%2 == 0 {
			delay = time.Duration(rng.IntN(2000)) * time.Millisecond
		} else {
			dir := partitionDir(b, topic, 0)
			poll.Until(t, time.Minute, "a .cleaned file in "+dir, func() bool { return hasFileWithSuffix(dir, segment.CleanedSuffix) })
			delay = time.Duration(rng.IntN(500)) * time.Millisecond
		}
		// The kill lands at a random point: the fault's timing, not a wait
		// for a condition (any point must leave the log whole).
		killAt := time.NewTimer(delay)
		<-killAt.C
		dir := partitionDir(b, topic, 0)
		b.Kill(t)
		mid := hasFileWithSuffix(dir, segment.CleanedSuffix) || hasFileWithSuffix(dir, segment.SwapSuffix)
		if mid {
			midClean++
		}
		t.Logf("kill %d (%v after round %d): cleaner checkpoint %d, cleaning files present: %v", i+1, delay, 2+i, cleanerCheckpoint(t, b, topic), mid)
		b.Restart(t)
		ckpt := cleanerCheckpoint(t, b, topic)
		requireCompaction(t, fmt.Sprintf("after restart %d", i+1), compactionCheck(produced, readCompacted(t, b, topic), ckpt, false))
	}
	// A last round, cleaned to the end: then the tombstones of round 1
	// go once delete.retention.ms has passed since the cleaning that
	// first kept them.
	produce(compactRound{round: 2 + kills, keys: live, valueSize: 300})
	waitCleanedUpTo(t, b, topic)
	var last compactionReport
	poll.Until(t, 2*time.Minute, "the tombstones past delete.retention.ms to go", func() bool {
		b.RequireAlive(t)
		last = checkCompactionSettled(t, b, topic, produced, true)
		if last.Lost+last.Stale+last.Inconsistent > 0 {
			requireCompaction(t, "waiting for tombstones to go", last)
		}
		return last.ok()
	})
	requireCompaction(t, "final", last)
	t.Logf("%d kills, %d of them with a cleaning's files on disk", kills, midClean)

	final := map[history.TP][]history.Record{}
	tp := history.TP{Topic: plain, Partition: 0}
	for _, r := range readCompacted(t, b, plain) {
		final[tp] = append(final[tp], history.Record{Offset: r.offset, Value: historyValue(r)})
	}
	rep := hist.Check(final)
	t.Logf("history of %s: %v", plain, rep)
	if !rep.OK() || rep.Lost+rep.Inconsistent+rep.Duplicated != 0 {
		t.Fatalf("history of %s: %v\n%s", plain, rep, strings.Join(rep.Problems, "\n"))
	}
}

// historyValue names a record uniquely for the history checker.
func historyValue(r compactRecord) string {
	if r.value == nil {
		return r.key + "-tombstone"
	}
	return *r.value
}

// hasFileWithSuffix reports whether dir holds a file whose name ends in
// suffix.
func hasFileWithSuffix(dir, suffix string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), suffix) {
			return true
		}
	}
	return false
}
