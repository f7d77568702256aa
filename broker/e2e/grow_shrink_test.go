package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratastream/strata/broker/e2e/history"
	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/segment/poll"
	"github.com/stratastream/strata/tiering"
	"github.com/stratastream/strata/tiering/miniotest"
)

const (
	growTopic          = "grow"
	growPartitions     = 6
	growSegmentBytes   = 16384
	growLocalRetention = 32768
	growBulkRecords    = 400 // per partition, growBulkValue bytes each
	growBulkValue      = 1000
)

// TestGrowShrinkTiered is the issue's "grow and shrink a running
// cluster" with tiered storage: MinIO, ZooKeeper and three brokers, a
// tiered topic (6 partitions, RF 2, 16 KiB segments, 32 KiB of local retention) whose
// data is mostly in the bucket, an idempotent acks=all producer and a
// consumer group running the whole time (history checker).
//
//  1. A bulk load fills the bucket to several times the local tail.
//  2. Broker 4 starts and `strata cluster add-broker 4 --execute
//     --throttle 1000000000` (a throttle too high to slow anything, so
//     that broker 4's strata_replication_throttled_bytes_total counts
//     the bytes the moves copied) runs to the end. Broker 4 then holds
//     replicas with full ISRs, and the bytes it copied of the tiered
//     topic (the larger of that counter, less its other topics' bytes,
//     and the sizes of every segment file a watcher saw in its data
//     directories) are at most 1.1 x the local tails of the moved
//     partitions' leaders at the start of the move plus one segment, and
//     less than half of the whole log: a new replica starts at the
//     leader's local log start, the rest stays in the bucket.
//  3. `strata cluster decommission --broker 1 --execute`; broker 1 is
//     stopped. A partition broker 4 now leads (if the plans gave it
//     none, one whose replicas are reordered to put broker 4 first and
//     a preferred election) is read from offset 0 through it: the old
//     offsets come from the bucket (its remote fetch counter grows, its
//     local log starts later). Then a few segments more are produced to
//     that partition: broker 4 uploads them at its leader epoch,
//     continuing the manifest (no gap, no overlap).
//  4. Production goes on a moment; the history checker finds nothing
//     lost, duplicated or inconsistent and the group saw every record.
func TestGrowShrinkTiered(t *testing.T) {
	if strataBin == "" {
		t.Skip("end-to-end tests do not run with -short")
	}
	testStart := time.Now()
	srv := miniotest.Start(t)
	bucket := srv.NewBucket(t)
	mc := srv.Client()
	t.Setenv("AWS_ACCESS_KEY_ID", miniotest.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", miniotest.SecretKey)
	tierOpts := []string{
		"remote.storage.s3.endpoint=" + srv.Endpoint(),
		"remote.storage.s3.bucket=" + bucket,
		"log.retention.check.interval.ms=200",
		"strata.remote.poll.interval.ms=100",
		"strata.remote.manifest.refresh.interval.ms=500",
		"strata.remote.retry.max.ms=1000",
	}
	c := StartCluster(t, 3, tierOpts...)
	md := c.createTopicWith(t, growTopic, growPartitions, 2, map[string]string{
		"remote.storage.enable": "true",
		"segment.bytes":         strconv.Itoa(growSegmentBytes),
		"local.retention.bytes": strconv.Itoa(growLocalRetention),
		"file.delete.delay.ms":  "0",
	})
	topicID := coord.TopicID(md.Topics[growTopic].ID).String()
	all := []int32{0, 1, 2, 3, 4, 5}
	t.Logf("MinIO, ZooKeeper, 3 brokers and the topic up in %v", time.Since(testStart).Round(time.Millisecond))

	hist := history.New()
	prod := c.startSeqProducer(t, growTopic, all, 100*time.Millisecond)
	cons := c.startChaosConsumer(t, growTopic, "grow-group", hist)
	prod.acks.waitAcks(t, all, time.Time{}, 5, 30*time.Second, "acknowledgements before the bulk load")

	// 1. Fill the bucket.
	c.growBulkLoad(t, hist)
	var remote map[int32]int64
	waitFor(t, 60*time.Second, "the bucket holding several times the local tail of every partition", func() bool {
		remote = growRemoteBytes(t, mc, bucket, topicID)
		for _, p := range all {
			if remote[p] < 8*growLocalRetention {
				return false
			}
		}
		return true
	})
	t.Logf("bucket holds %v bytes per partition %v into the test", remote, time.Since(testStart).Round(time.Millisecond))

	// 2. Broker 4 joins; add-broker moves replicas to it.
	m4 := freeAddr(t)
	c.brokers = append(c.brokers, StartBroker(t, c.brokerOverrides(4, append(slices.Clone(tierOpts), "metrics.listener="+m4))...))
	c.waitAllSee(t, 60*time.Second, 4)
	md = c.waitFullISR(t, 30*time.Second, growTopic, growPartitions, false)
	leaders := leadersOf(md, growTopic)
	tails, whole := map[int32]int64{}, map[int32]int64{}
	remote = growRemoteBytes(t, mc, bucket, topicID)
	for _, p := range all {
		tails[p] = growLocalBytes(t, c.Broker(leaders[p]), p)
		whole[p] = remote[p] + tails[p] // the bucket and the local part overlap a little: an upper bound
	}
	watch := startGrowDirWatch(c.Broker(4))
	boot := strings.Join(c.LiveAddrs(), ",")
	moveStart := time.Now()
	out := c.growRunPlan(t, "cluster", "add-broker", "4", "--execute", "--throttle", "1000000000", "--timeout", "90s", "--bootstrap-server", boot)
	moveTook := time.Since(moveStart)
	if !strings.Contains(out, "Reassignment done in") || !strings.Contains(out, "Verified:") {
		t.Fatalf("add-broker 4 --execute:\n%s", out)
	}
	t.Logf("add-broker 4 --execute took %v:\n%s", moveTook.Round(time.Millisecond), growPlanLines(out))
	md = c.waitFullISR(t, 60*time.Second, growTopic, growPartitions, false)
	var moved []int32
	for _, p := range all {
		if slices.Contains(md.Topics[growTopic].Partitions[p].Replicas, 4) {
			moved = append(moved, p)
		}
	}
	if len(moved) == 0 {
		t.Fatalf("broker 4 holds no replica of %s after add-broker: %s", growTopic, c.Describe(t, growTopic))
	}
	seen := watch.stop()
	counter := scrapeMetric(t, m4, `strata_replication_throttled_bytes_total{direction="follower"}`)
	var other int64 // broker 4's bytes of other topics (__consumer_offsets), which the counter includes
	if ents, err := os.ReadDir(c.Broker(4).Dir); err == nil {
		for _, e := range ents {
			if e.IsDir() && !strings.HasPrefix(e.Name(), growTopic+"-") {
				other += growDirLogBytes(filepath.Join(c.Broker(4).Dir, e.Name()))
			}
		}
	}
	var tail, log, watched int64
	starts := growRestarts(c.Broker(4).Output())
	for _, p := range moved {
		tail += tails[p]
		log += whole[p]
		watched += seen.bytes[p]
		t.Logf("partition %d -> broker 4: leader %d's local tail %d bytes, whole log ~%d bytes (%d in the bucket); broker 4 restarted it at offset %v, lowest segment file seen %d, %d bytes of segment files seen",
			p, leaders[p], tails[p], whole[p], remote[p], starts[p], seen.lowest(p), seen.bytes[p])
		if lo := seen.lowest(p); lo <= 0 {
			t.Errorf("partition %d: broker 4 holds a segment from offset %d: it copied from the start of the log, not from the leader's local log start", p, lo)
		}
	}
	copied := max(watched, int64(counter)-other)
	limit := tail + tail/10 + growSegmentBytes
	t.Logf("broker 4 copied %d bytes of %s (throttled-bytes counter %.0f less %d of other topics; segment files seen %d): local tails %d, limit 1.1 x tail + one segment = %d, whole log ~%d",
		copied, growTopic, counter, other, watched, tail, limit, log)
	if copied > limit {
		t.Errorf("broker 4 copied %d bytes, more than 1.1 x the local tails (%d) + one segment = %d (the whole log is ~%d)", copied, tail, limit, log)
	}
	if copied*2 > log {
		t.Errorf("broker 4 copied %d bytes, not clearly less than the whole log (~%d): the bucket's part was copied too", copied, log)
	}

	// Drain and stop broker 1.
	out = c.growRunPlan(t, "cluster", "decommission", "--broker", "1", "--execute", "--timeout", "90s",
		"--bootstrap-server", strings.Join(c.LiveAddrs(), ","))
	if !strings.Contains(out, "Reassignment done in") && !strings.Contains(out, "holds no replica") {
		t.Fatalf("decommission --broker 1 --execute:\n%s", out)
	}
	t.Logf("decommission --broker 1 --execute:\n%s", growPlanLines(out))
	md = c.waitFullISR(t, 60*time.Second, growTopic, growPartitions, false)
	for _, p := range all {
		if d := md.Topics[growTopic].Partitions[p]; slices.Contains(d.Replicas, 1) {
			t.Fatalf("partition %d still on broker 1 after decommission: replicas %v", p, d.Replicas)
		}
	}
	c.Broker(1).Stop(t)
	live := c.without(1)
	md = live.waitFullISR(t, 60*time.Second, growTopic, growPartitions, false)

	// 3. Old offsets through broker 4 as a leader.
	led := partitionsLedBy(md, growTopic, 4)
	if len(led) == 0 {
		// The plans balance leaders over every topic: broker 4 may lead
		// only __consumer_offsets partitions. Make it the preferred
		// replica of one of its partitions (same replicas, reordered:
		// nothing is copied) and elect it.
		led = []int32{live.growLeadOnBroker4(t, md)}
	}
	c.growReadOld(t, m4, led[0], hist)
	live.growUploadsAfter(t, mc, bucket, topicID, led[0], hist)
	prod.acks.waitAcks(t, all, time.Now(), 10, 60*time.Second, "acknowledgements after broker 1 stopped")

	sent := prod.stop(t)
	logs := live.readLog(t, growTopic, all)
	cons.finish(t, logs)
	addProduces(hist, "franz-go", growTopic, sent)
	rep := hist.Check(finalLog(growTopic, logs))
	t.Logf("history: %s", rep)
	if !rep.OK() {
		t.Fatalf("history check failed: %s", rep)
	}
	t.Logf("total %v", time.Since(testStart).Round(time.Millisecond))
}

// growRunPlan runs a `strata cluster ... --execute` command and returns
// its output. A failure whose every partition error is REQUEST_TIMED_OUT
// (the controller's ZooKeeper connection was down: on a loaded machine
// ZooKeeper can stall for a second, and the brokers' reads time out) is
// retriable, as in Kafka: the command is run again, up to three times in
// all, once no reassignment is listed (the new plan covers what is left).
// The command itself retries such answers for up to a minute first.
func (c *Cluster) growRunPlan(t *testing.T, args ...string) string {
	t.Helper()
	boot := args[len(args)-1]
	for try := 1; ; try++ {
		out, errOut, err := tryCmd(120*time.Second, "", strataBin, args...)
		if err == nil {
			return out
		}
		retriable := strings.Contains(errOut, "REQUEST_TIMED_OUT")
		for _, l := range strings.Split(strings.TrimSpace(errOut), "\n") {
			if strings.HasPrefix(l, "Progress: ") || strings.HasPrefix(l, "  ") {
				continue // the progress of the moves, not an error
			}
			if strings.Contains(l, ": ") && !strings.Contains(l, "REQUEST_TIMED_OUT") && !strings.HasSuffix(l, "partitions failed.") && !strings.HasSuffix(l, "partition failed.") {
				retriable = false
			}
		}
		if !retriable || try == 3 {
			t.Fatalf("strata %s (try %d): %v\nstderr:\n%s\nstdout:\n%s", strings.Join(args, " "), try, err, errOut, growPlanLines(out))
		}
		t.Logf("strata %s (try %d) failed with a retriable error; running it again once no reassignment is listed:\n%s", strings.Join(args[:3], " "), try, errOut)
		var list string
		if !poll.For(60*time.Second, func() bool {
			l, _, err := tryCmd(30*time.Second, "", strataBin, "topic", "reassign", "--list", "--bootstrap-server", boot)
			list = l
			return err == nil && l == "No partition reassignments found.\n"
		}) {
			t.Fatalf("reassignments still listed 60s after a failed %s:\n%s", strings.Join(args[:3], " "), list)
		}
	}
}

// growLeadOnBroker4 reorders the replicas of a partition broker 4 holds
// so that broker 4 comes first, runs a preferred leader election for it
// and waits until broker 4 leads it; it returns the partition.
func (c *Cluster) growLeadOnBroker4(t *testing.T, md kadm.Metadata) int32 {
	t.Helper()
	for _, p := range slices.Sorted(maps.Keys(md.Topics[growTopic].Partitions)) {
		reps := md.Topics[growTopic].Partitions[p].Replicas
		if !slices.Contains(reps, 4) {
			continue
		}
		target := append([]int32{4}, slices.DeleteFunc(slices.Clone(reps), func(id int32) bool { return id == 4 })...)
		c.alterReassignment(t, growTopic, p, target)
		c.waitReassigned(t, growTopic, p, target)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cl := c.newClient(t)
		res, err := kadm.NewClient(cl).ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{growTopic: {p: {}}})
		cl.Close()
		cancel()
		if err != nil {
			t.Fatalf("preferred leader election of %s-%d: %v", growTopic, p, err)
		}
		if r := res[growTopic][p]; r.Err != nil && !errors.Is(r.Err, kerr.ElectionNotNeeded) {
			t.Fatalf("preferred leader election of %s-%d: %v", growTopic, p, r.Err)
		}
		c.WaitMetadata(t, 60*time.Second, fmt.Sprintf("broker 4 leading %s-%d", growTopic, p), func(m kadm.Metadata) string {
			if d := m.Topics[growTopic].Partitions[p]; d.Leader != 4 {
				return fmt.Sprintf("leader %d, replicas %v, isr %v", d.Leader, d.Replicas, d.ISR)
			}
			return ""
		})
		t.Logf("broker 4 led no partition of %s: made it lead partition %d (replicas %v -> %v, preferred election)", growTopic, p, reps, target)
		return p
	}
	t.Fatalf("broker 4 holds no replica of %s", growTopic)
	return -1
}

// growBulkRecordValue is bulk record i of partition p, growBulkValue bytes.
func growBulkRecordValue(p int32, i int) string {
	return fmt.Sprintf("bulk-%d-%06d-", p, i) + string(recordValue(int(p)*1_000_000+i, growBulkValue))
}

// growBulkLoad produces growBulkRecords records to every partition with
// an idempotent acks=all client, in batches, and records each in hist.
func (c *Cluster) growBulkLoad(t *testing.T, hist *history.History) {
	t.Helper()
	start := time.Now()
	var wg sync.WaitGroup
	for p := range int32(growPartitions) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.growProduceBulk(t, hist, p, 0, growBulkRecords)
		}()
	}
	wg.Wait()
	t.Logf("bulk load: %d records of %d bytes to each of %d partitions in %v", growBulkRecords, growBulkValue, growPartitions, time.Since(start).Round(time.Millisecond))
}

// growProduceBulk produces bulk records [from, from+n) to partition p
// with an idempotent acks=all client, 25 a batch, recording each in hist.
func (c *Cluster) growProduceBulk(t *testing.T, hist *history.History, p int32, from, n int) {
	cl, err := kgo.NewClient(append(c.clientOpts(c.LiveAddrs()...), kgo.DialTimeout(2*time.Second), kgo.RetryTimeout(20*time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))...)
	if err != nil {
		t.Errorf("bulk producer: %v", err)
		return
	}
	defer cl.Close()
	tp := history.TP{Topic: growTopic, Partition: p}
	for i := from; i < from+n; i += 25 {
		var rs []*kgo.Record
		for j := i; j < min(i+25, from+n); j++ {
			v := growBulkRecordValue(p, j)
			hist.Sent("bulk", tp, v)
			rs = append(rs, &kgo.Record{Topic: growTopic, Partition: p, Value: []byte(v)})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res := cl.ProduceSync(ctx, rs...)
		cancel()
		for _, r := range res {
			if r.Err != nil {
				hist.Answered(tp, string(r.Record.Value), history.Unknown, -1, r.Err.Error())
			} else {
				hist.Answered(tp, string(r.Record.Value), history.Acked, r.Record.Offset, "")
			}
		}
	}
}

// growUploadsAfter produces a few segments more to partition p, which
// broker 4 leads, and waits until the manifest holds segments of broker
// 4's leader epoch that continue the remote log (no gap, no overlap).
func (c *Cluster) growUploadsAfter(t *testing.T, mc *minio.Client, bucket, topicID string, p int32, hist *history.History) {
	t.Helper()
	d := c.partitionMeta(t, growTopic, p)
	if d.Leader != 4 {
		t.Fatalf("partition %d: leader %d, want broker 4", p, d.Leader)
	}
	before := growManifest(t, mc, bucket, topicID, p)
	if before == nil {
		t.Fatalf("partition %d: no manifest readable before broker 4's uploads", p)
	}
	c.growProduceBulk(t, hist, p, growBulkRecords, 4*growSegmentBytes/growBulkValue)
	var m *tiering.Manifest
	waitFor(t, 60*time.Second, fmt.Sprintf("broker 4 uploading segments of partition %d at its leader epoch %d", p, d.LeaderEpoch), func() bool {
		m = growManifest(t, mc, bucket, topicID, p)
		return m != nil && m.LeaderEpoch >= d.LeaderEpoch && slices.ContainsFunc(m.Segments, func(s tiering.RemoteSegment) bool { return s.Epoch == d.LeaderEpoch })
	})
	first := slices.IndexFunc(m.Segments, func(s tiering.RemoteSegment) bool { return s.Epoch == d.LeaderEpoch })
	for i := 1; i < len(m.Segments); i++ {
		if m.Segments[i].BaseOffset != m.Segments[i-1].NextOffset {
			t.Errorf("partition %d's remote log: segment %d..%d follows one ending at %d", p, m.Segments[i].BaseOffset, m.Segments[i].NextOffset, m.Segments[i-1].NextOffset)
		}
	}
	if len(before.Segments) > first || m.LogStartOffset != 0 {
		t.Errorf("partition %d: broker 4's first segment is #%d of the manifest, which held %d before it led; log start %d", p, first, len(before.Segments), m.LogStartOffset)
	}
	t.Logf("partition %d: broker 4, leader at epoch %d, continued the remote log at offset %d (it held [%d, %d) before); remote end now %d",
		p, d.LeaderEpoch, m.Segments[first].BaseOffset, before.LogStartOffset, before.EndOffset(), m.EndOffset())
}

// growReadOld reads partition p from offset 0 through broker 4, its
// leader, and checks the records against the bulk load (recorded in hist
// as reads); broker 4's remote fetch counter must grow.
func (c *Cluster) growReadOld(t *testing.T, metrics string, p int32, hist *history.History) {
	t.Helper()
	local := partitionSegments(t, c.Broker(4), growTopic, p)
	before := scrapeMetric(t, metrics, "strata_tier_remote_fetch_bytes_total")
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Broker(4).Addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{growTopic: {p: kgo.NewOffset().At(0)}}),
		kgo.FetchMaxPartitionBytes(64<<10), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 100
	tp := history.TP{Topic: growTopic, Partition: p}
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s-%d from offset 0 through broker 4: %d of %d records", growTopic, p, got, n)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch from broker 4: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if got < n && r.Offset == int64(got) {
				hist.Read("broker 4 from offset 0", tp, r.Offset, string(r.Value))
				got++
			}
		})
	}
	after := scrapeMetric(t, metrics, "strata_tier_remote_fetch_bytes_total")
	first := int64(-1)
	if len(local) > 0 {
		first = local[0]
	}
	t.Logf("partition %d: read offsets [0, %d) through broker 4, its leader, whose local log starts at %d; broker 4's remote fetch bytes %.0f -> %.0f", p, n, first, before, after)
	if first >= 0 && first < n {
		t.Errorf("partition %d: broker 4 holds offset %d locally: the read did not come from the bucket", p, first)
	}
	if after <= before {
		t.Errorf("partition %d: broker 4 served offsets [0, %d) without fetching from the bucket (strata_tier_remote_fetch_bytes_total %.0f -> %.0f)", p, n, before, after)
	}
}

// growRemoteBytes sums the sizes of each partition's manifest segments.
func growRemoteBytes(t *testing.T, mc *minio.Client, bucket, topicID string) map[int32]int64 {
	t.Helper()
	out := map[int32]int64{}
	for p := range int32(growPartitions) {
		if m := growManifest(t, mc, bucket, topicID, p); m != nil {
			for _, s := range m.Segments {
				out[p] += s.Size
			}
		}
	}
	return out
}

// growManifest reads partition p's manifest; nil if it cannot be read
// (none yet, or MinIO answered an error).
func growManifest(t *testing.T, mc *minio.Client, bucket, topicID string, p int32) *tiering.Manifest {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	obj, err := mc.GetObject(ctx, bucket, tiering.ManifestKey(growTopic, topicID, p), minio.GetObjectOptions{})
	if err != nil {
		return nil
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		return nil
	}
	m, err := tiering.DecodeManifest(b)
	if err != nil {
		t.Fatalf("partition %d's manifest: %v", p, err)
	}
	return m
}

// growLocalBytes is the size of broker b's .log files of partition p.
func growLocalBytes(t *testing.T, b *Broker, p int32) int64 {
	t.Helper()
	return growDirLogBytes(partitionDir(b, growTopic, p))
}

// growDirLogBytes is the size of the .log files in dir (0 if it does not
// exist).
func growDirLogBytes(dir string) int64 {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && strings.HasSuffix(e.Name(), ".log") {
			n += fi.Size()
		}
	}
	return n
}

// growDirWatch polls a broker's partition directories of the topic every
// 20 ms and keeps the largest size seen of every segment file, so that
// segments deleted after upload still count.
type growDirWatch struct {
	b    *Broker
	quit chan struct{}
	done chan struct{}
	seen growSeen
}

type growSeen struct {
	sizes map[int32]map[int64]int64 // partition -> segment base -> largest size
	bytes map[int32]int64
}

func (s growSeen) lowest(p int32) int64 {
	lo := int64(-1)
	for base, n := range s.sizes[p] {
		if n > 0 && (lo < 0 || base < lo) {
			lo = base
		}
	}
	return lo
}

func startGrowDirWatch(b *Broker) *growDirWatch {
	w := &growDirWatch{b: b, quit: make(chan struct{}), done: make(chan struct{}), seen: growSeen{sizes: map[int32]map[int64]int64{}, bytes: map[int32]int64{}}}
	go func() {
		defer close(w.done)
		for {
			w.scan()
			select {
			case <-w.quit:
				w.scan()
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *growDirWatch) scan() {
	for p := range int32(growPartitions) {
		ents, err := os.ReadDir(partitionDir(w.b, growTopic, p))
		if err != nil {
			continue
		}
		for _, e := range ents {
			name, ok := strings.CutSuffix(e.Name(), ".log")
			if !ok {
				continue
			}
			base, err := strconv.ParseInt(name, 10, 64)
			fi, ierr := e.Info()
			if err != nil || ierr != nil {
				continue
			}
			if w.seen.sizes[p] == nil {
				w.seen.sizes[p] = map[int64]int64{}
			}
			w.seen.sizes[p][base] = max(w.seen.sizes[p][base], fi.Size())
		}
	}
}

func (w *growDirWatch) stop() growSeen {
	close(w.quit)
	<-w.done
	for p, m := range w.seen.sizes {
		for _, n := range m {
			w.seen.bytes[p] += n
		}
	}
	return w.seen
}

var growRestartRE = regexp.MustCompile(`msg="replica restarted at the leader's log start" topic=` + growTopic + ` partition=(\d+) offset=(\d+)`)

// growRestarts maps each partition of the topic to the offsets at which
// the broker restarted its replica at the leader's log start.
func growRestarts(output string) map[int32][]int64 {
	out := map[int32][]int64{}
	for _, m := range growRestartRE.FindAllStringSubmatch(output, -1) {
		p, _ := strconv.Atoi(m[1])
		off, _ := strconv.ParseInt(m[2], 10, 64)
		out[int32(p)] = append(out[int32(p)], off)
	}
	return out
}

// growPlanLines is the CLI output without the JSON plans.
func growPlanLines(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "{") && l != "" {
			keep = append(keep, "  "+l)
		}
	}
	return strings.Join(keep, "\n")
}
