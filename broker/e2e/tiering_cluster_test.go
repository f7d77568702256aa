package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/tiering"
	"github.com/stratastream/strata/tiering/miniotest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTieringClusterMinIO is the "with replication in place"
// case of tiered storage: MinIO, ZooKeeper and three brokers tiering to
// one bucket, a topic with RF 3, tiny segments and tiny local retention,
// and an idempotent acks=all producer running the whole time.
//
//  1. The leader of partition 0 is killed with SIGKILL while it uploads
//     (uploads run continuously: segments seal every few hundred
//     milliseconds and the poll interval is 100 ms). A new leader is
//     elected; the test waits until it commits segments of its own epoch
//     and checks that it continued from the manifest: the manifest seen
//     at the kill is a prefix of every later one, the remote log stays
//     contiguous from offset 0, no gap, no overlap.
//  2. The killed broker restarts (auto.leader.rebalance.enable is off, so
//     it stays a follower), rejoins the ISR and must upload nothing while
//     it follows (it may be elected in step 3, and upload then).
//  3. The leader of partition 0 (the one elected in step 1) is made a
//     deposed leader that still runs: MinIO is stopped until that leader
//     holds sealed, committed segments it could not upload, the leader is
//     frozen with SIGSTOP, MinIO comes back, and once the controller has
//     elected another leader and that one has committed the manifest at
//     its newer epoch, the frozen broker is resumed with SIGCONT. (A
//     SIGKILLed leader cannot write late; a frozen one can.) What is
//     forced: the resumed broker wakes up still believing it leads, with
//     a stale manifest view and uploads pending, and its archiver's timer
//     is overdue. What is not forced: that its archiver runs a step
//     before the broker hears from ZooKeeper that it was deposed (in
//     practice the ZooKeeper reconnect takes about 2 s, so it does, and
//     the conditional manifest write is refused: "archiver fenced by a
//     newer leader", which the test logs, with the orphaned objects of
//     the refused upload). The test does not require that race; it
//     requires, whatever happened, that the manifest never goes back (a
//     background watcher checks every version it reads against the
//     previous one: the epoch never decreases, the older segments are a
//     prefix of the newer), that no broker logs the commit of a segment
//     the final manifest lacks, that no segment was uploaded by a broker
//     that did not lead the partition at the segment's epoch, and that
//     the resumed broker commits nothing.
//  4. Production stops; once every sealed segment is remote, the test
//     consumes both partitions from offset 0 (mostly from the bucket) and
//     wants every acknowledged record exactly once, in order,
//     byte-identical, and no unacknowledged record twice.
//  5. Every replica's local log ends up small: followers delete local
//     segments that the manifest holds, too, once they reload it
//     (strata.remote.manifest.refresh.interval.ms, 500 ms here), and a
//     follower that caught up with a large fetch rolled its segments at
//     segment.bytes as the leader did.
//
// Partition 1 is there as a partition whose leader may not move: its
// uploads and checks go on alongside.
func TestTieringClusterMinIO(t *testing.T) {
	if strataBin == "" {
		t.Skip("end-to-end tests do not run with -short")
	}
	testStart := time.Now()
	srv := miniotest.Start(t)
	bucket := srv.NewBucket(t)
	mc := srv.Client()
	t.Setenv("AWS_ACCESS_KEY_ID", miniotest.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", miniotest.SecretKey)

	c := StartCluster(t, 3,
		"remote.storage.s3.endpoint="+srv.Endpoint(),
		"remote.storage.s3.bucket="+bucket,
		"log.retention.check.interval.ms=200",
		"strata.remote.poll.interval.ms=100",
		"strata.remote.manifest.refresh.interval.ms=500",
		"strata.remote.retry.max.ms=1000",
		"auto.leader.rebalance.enable=false",
	)
	t.Logf("MinIO, ZooKeeper and 3 brokers up in %v", time.Since(testStart).Round(time.Millisecond))

	md := c.tcmCreateTopic(t, tcmTopic, tcmPartitions, 3, map[string]string{
		"remote.storage.enable": "true",
		"segment.bytes":         strconv.Itoa(tcmSegmentBytes),
		"local.retention.bytes": "1",
		"local.retention.ms":    "100",
		"file.delete.delay.ms":  "0",
		"min.insync.replicas":   "2",
	})
	epochs := newTcmEpochs()
	epochs.observe(md)
	stopMeta := epochs.watch(c)
	defer stopMeta()

	watch := newTcmManifestWatch(mc, bucket, coord.TopicID(md.Topics[tcmTopic].ID).String())
	stopWatch := watch.run()
	defer stopWatch()

	prod := startTcmProducer(t, c)
	defer prod.stop()

	// 1. Kill the leader of partition 0 while it uploads.
	victim := md.Topics[tcmTopic].Partitions[0].Leader
	e1 := md.Topics[tcmTopic].Partitions[0].LeaderEpoch
	waitFor(t, 60*time.Second, "partition 0 uploading and deleting local segments", func() bool {
		m := watch.latest(0)
		segs := partitionSegments(t, c.Broker(victim), tcmTopic, 0)
		return m != nil && len(m.Segments) >= 4 && len(segs) > 0 && segs[0] > 0
	})
	c.Broker(victim).Kill(t)
	killedAt := time.Now()
	time.Sleep(300 * time.Millisecond) // a PUT in flight at the kill lands or not by now
	mKill := watch.fresh(t, 0)
	t.Logf("killed broker %d, leader of partition 0 at epoch %d: its manifest holds %d segments [%d, %d); %d records acknowledged",
		victim, e1, len(mKill.Segments), mKill.LogStartOffset, mKill.EndOffset(), prod.acked(0))

	var l2 int32
	var e2 int32
	c.WaitMetadata(t, clusterSessionTimeout+60*time.Second, "a new leader of partition 0", func(m kadm.Metadata) string {
		epochs.observe(m)
		d := m.Topics[tcmTopic].Partitions[0]
		if d.Leader < 0 || d.Leader == victim || d.LeaderEpoch <= e1 {
			return fmt.Sprintf("leader %d epoch %d isr %v", d.Leader, d.LeaderEpoch, d.ISR)
		}
		l2, e2 = d.Leader, d.LeaderEpoch
		return ""
	})
	t.Logf("broker %d leads partition 0 at epoch %d, %v after the kill", l2, e2, time.Since(killedAt).Round(time.Millisecond))
	waitFor(t, 60*time.Second, "the new leader committing segments of its own epoch", func() bool {
		m := watch.latest(0)
		return m != nil && m.LeaderEpoch >= e2 && m.EndOffset() > mKill.EndOffset() && tcmCountEpoch(m, e2) >= 2
	})
	m2 := watch.latest(0)
	first := slices.IndexFunc(m2.Segments, func(s tiering.RemoteSegment) bool { return s.Epoch >= e2 })
	if first < len(mKill.Segments) || (first > 0 && m2.Segments[first].BaseOffset != m2.Segments[first-1].NextOffset) {
		t.Errorf("the new leader's first segment (index %d, base %d) does not continue the manifest of the killed leader (%d segments, end %d)",
			first, m2.Segments[first].BaseOffset, len(mKill.Segments), mKill.EndOffset())
	}
	t.Logf("the new leader continues the remote log at %d (the killed leader committed up to %d); remote end now %d, %v after the kill",
		m2.Segments[first].BaseOffset, mKill.EndOffset(), m2.EndOffset(), time.Since(killedAt).Round(time.Millisecond))

	// 2. The killed broker comes back as a follower and catches up.
	c.Broker(victim).Restart(t)
	restarted := time.Now()
	c.WaitMetadata(t, 60*time.Second, fmt.Sprintf("broker %d back in the ISR of partition 0, as a follower", victim), func(m kadm.Metadata) string {
		epochs.observe(m)
		d := m.Topics[tcmTopic].Partitions[0]
		if !slices.Contains(d.ISR, victim) || d.Leader != l2 || d.LeaderEpoch != e2 {
			return fmt.Sprintf("leader %d epoch %d isr %v", d.Leader, d.LeaderEpoch, d.ISR)
		}
		return ""
	})
	t.Logf("broker %d is back in the ISR of partition 0 %v after its restart", victim, time.Since(restarted).Round(time.Millisecond))

	// 3. Give the leader of partition 0 uploads it cannot finish (MinIO
	// stopped), freeze it, bring MinIO back, and let it run again once
	// another broker leads the partition and committed at a newer epoch.
	mOutage := watch.fresh(t, 0)
	srv.Stop()
	outageAt := time.Now()
	waitFor(t, 60*time.Second, fmt.Sprintf("broker %d holding sealed segments it could not upload", l2), func() bool {
		n := 0
		for _, base := range partitionSegments(t, c.Broker(l2), tcmTopic, 0) {
			if base >= mOutage.EndOffset() {
				n++
			}
		}
		// Sealed ones past the remote end (one may have gone up just
		// before the outage), and the active one.
		return n >= 4
	})
	zombie := c.Broker(l2)
	zp := zombie.proc()
	if err := zp.signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP broker %d: %v", l2, err)
	}
	frozen := true
	resume := func() {
		if frozen {
			frozen = false
			if err := zp.signal(syscall.SIGCONT); err != nil {
				t.Errorf("SIGCONT broker %d: %v", l2, err)
			}
		}
	}
	t.Cleanup(resume) // before the brokers' own cleanups
	frozenAt := time.Now()
	srv.Restart(t)
	t.Logf("MinIO was down %v; broker %d (leader of partition 0 at epoch %d, remote end %d, local segments %v) frozen",
		time.Since(outageAt).Round(time.Millisecond), l2, e2, mOutage.EndOffset(), partitionSegments(t, zombie, tcmTopic, 0))
	var l3, e3 int32
	c.WaitMetadata(t, clusterSessionTimeout+60*time.Second, fmt.Sprintf("a leader of partition 0 other than the frozen broker %d", l2), func(m kadm.Metadata) string {
		epochs.observe(m)
		d := m.Topics[tcmTopic].Partitions[0]
		if d.Leader < 0 || d.Leader == l2 || d.LeaderEpoch <= e2 {
			return fmt.Sprintf("leader %d epoch %d isr %v", d.Leader, d.LeaderEpoch, d.ISR)
		}
		l3, e3 = d.Leader, d.LeaderEpoch
		return ""
	})
	waitFor(t, 60*time.Second, fmt.Sprintf("broker %d committing the manifest at epoch %d", l3, e3), func() bool {
		m := watch.latest(0)
		return m != nil && m.LeaderEpoch >= e3 && tcmCountEpoch(m, e3) >= 1
	})
	mark := len(zombie.Output())
	resumedAt := time.Now()
	resume()
	t.Logf("broker %d frozen for %v; broker %d leads partition 0 at epoch %d and committed; broker %d resumed",
		l2, time.Since(frozenAt).Round(time.Millisecond), l3, e3, l2)
	c.WaitMetadata(t, 60*time.Second, fmt.Sprintf("broker %d back in the ISR of partition 0, as a follower", l2), func(m kadm.Metadata) string {
		epochs.observe(m)
		d := m.Topics[tcmTopic].Partitions[0]
		if !slices.Contains(d.ISR, l2) || d.Leader != l3 || len(d.ISR) != 3 {
			return fmt.Sprintf("leader %d epoch %d isr %v", d.Leader, d.LeaderEpoch, d.ISR)
		}
		return ""
	})
	// A little more under the final leadership, then stop producing.
	before := watch.latest(0).EndOffset()
	waitFor(t, 60*time.Second, "uploads after the frozen leader's return", func() bool {
		return watch.latest(0).EndOffset() > before
	})
	prod.stop()
	t.Logf("production stopped %v into the test: acknowledged %d + %d records, %d produce errors",
		time.Since(testStart).Round(time.Millisecond), prod.acked(0), prod.acked(1), prod.errorCount())

	// 4. Everything sealed goes remote; all records read back.
	md = c.waitTcmLeaders(t)
	leaders := leadersOf(md, tcmTopic)
	waitFor(t, 60*time.Second, "every sealed segment uploaded", func() bool {
		for p := range int32(tcmPartitions) {
			segs := partitionSegments(t, c.Broker(leaders[p]), tcmTopic, p)
			m := watch.latest(p)
			if m == nil || len(segs) == 0 || m.EndOffset() < segs[len(segs)-1] {
				return false
			}
		}
		return true
	})
	stopWatch()
	stopMeta()
	var final [tcmPartitions]*tiering.Manifest
	for p := range int32(tcmPartitions) {
		final[p] = watch.fresh(t, p)
		tcmCheckManifest(t, p, final[p])
		tcmCheckBucket(t, mc, bucket, p, final[p])
	}
	if !tcmPrefix(mKill, final[0]) {
		t.Errorf("the segments the killed leader committed are not a prefix of the final manifest")
	}
	for _, pr := range watch.problems() {
		t.Errorf("manifest watcher: %s", pr)
	}
	t.Logf("manifest watcher saw %d versions of partition 0's manifest and %d of partition 1's", watch.versions(0), watch.versions(1))

	// Who uploaded what: every "upload committed" line of every broker
	// run names a segment of the final manifest, and the segment's epoch
	// is one at which that broker led the partition.
	uploaders := map[int32]map[string]int32{0: {}, 1: {}} // partition -> segment id -> broker
	for _, id := range c.IDs() {
		b := c.Broker(id)
		for run, out := range tcmRunOutputs(b) {
			if id == l2 && run == len(tcmRunOutputs(b))-1 {
				out = out[:min(mark, len(out))] // before the resume; what follows is checked below
			}
			for _, u := range tcmUploads(out) {
				uploaders[u.partition][u.id] = id
			}
		}
	}
	for _, u := range tcmUploads(zombie.Output()[min(mark, len(zombie.Output())):]) {
		uploaders[u.partition][u.id] = l2
		if u.partition == 0 {
			t.Errorf("broker %d, deposed from partition 0 while frozen, committed segment %d..%d (id %s) after it resumed", l2, u.base, u.next, u.id)
		}
	}
	for p := range int32(tcmPartitions) {
		var unattributed []string
		for _, s := range final[p].Segments {
			b, ok := uploaders[p][s.ID]
			if !ok {
				// Committed just before a SIGKILL cut the log line.
				unattributed = append(unattributed, fmt.Sprintf("%d..%d epoch %d", s.BaseOffset, s.NextOffset, s.Epoch))
				continue
			}
			if l, known := epochs.leader(p, s.Epoch); known && l != b {
				t.Errorf("partition %d: segment %d..%d was uploaded by broker %d at epoch %d, led by broker %d", p, s.BaseOffset, s.NextOffset, b, s.Epoch, l)
			}
		}
		committed := 0
		for id := range uploaders[p] {
			if !slices.ContainsFunc(final[p].Segments, func(s tiering.RemoteSegment) bool { return s.ID == id }) {
				t.Errorf("partition %d: a broker logged the commit of segment id %s, which the final manifest lacks", p, id)
			}
			committed++
		}
		t.Logf("partition %d: %d remote segments [%d, %d), epoch:[base,next)xsegments %v; %d upload commits in the logs; segments without one: %v",
			p, len(final[p].Segments), final[p].LogStartOffset, final[p].EndOffset(), tcmEpochSpans(final[p]), committed, unattributed)
	}
	// The restarted broker uploaded nothing of partition 0 as a follower.
	vouts := tcmRunOutputs(c.Broker(victim))
	for _, u := range tcmUploads(vouts[len(vouts)-1]) {
		if u.partition == 0 {
			if l, _ := epochs.leader(0, tcmSegmentEpoch(final[0], u.id)); l != victim {
				t.Errorf("broker %d, restarted as a follower of partition 0, committed segment %d..%d", victim, u.base, u.next)
			}
		}
	}
	// The deposed leader's late manifest write, if it made one.
	after := zombie.Output()[min(mark, len(zombie.Output())):]
	if lines := tcmGrep(after, "fenced by a newer leader"); len(lines) > 0 {
		t.Logf("broker %d's late manifest write was refused (the race happened this run):\n%s", l2, strings.Join(lines, "\n"))
	} else {
		t.Logf("broker %d learned of its deposition before its archiver tried a commit (the fencing race did not happen this run)", l2)
	}
	if late := tcmLateObjects(t, mc, bucket, final[0], e2, resumedAt); len(late) > 0 {
		t.Logf("objects of epoch %d that broker %d uploaded after it resumed, which no manifest references: %v", e2, l2, late)
	}
	for _, id := range c.IDs() {
		if id == l2 {
			continue
		}
		outs := tcmRunOutputs(c.Broker(id))
		if lines := tcmGrep(outs[len(outs)-1], "fenced by a newer leader"); len(lines) > 0 {
			t.Logf("broker %d was fenced too:\n%s", id, strings.Join(lines, "\n"))
		}
	}

	localStart := partitionSegments(t, c.Broker(leaders[0]), tcmTopic, 0)[0]
	t.Logf("replay from offset 0: partition 0's leader (broker %d) holds local data from %d, the bucket up to %d",
		leaders[0], localStart, final[0].EndOffset())
	if localStart == 0 {
		t.Errorf("the leader of partition 0 still holds offset 0 locally: the replay does not cross the remote boundary")
	}
	prod.verify(t, c)

	// 5. Every replica's local log ends up small.
	deadline := time.Now().Add(time.Minute)
	small := func() (bool, string) {
		var sb strings.Builder
		ok := true
		for _, id := range c.IDs() {
			for p := range int32(tcmPartitions) {
				segs := partitionSegments(t, c.Broker(id), tcmTopic, p)
				n := tcmLocalBytes(t, c.Broker(id), p)
				fmt.Fprintf(&sb, " broker %d p%d: %d segments from %v, %d bytes;", id, p, len(segs), segs[:min(1, len(segs))], n)
				if len(segs) > 2 || n > 3*tcmSegmentBytes {
					ok = false
				}
			}
		}
		return ok, sb.String()
	}
	for {
		ok, state := small()
		if ok {
			t.Logf("every replica's local log is small %v after production stopped:%s", time.Since(prod.stoppedAt).Round(time.Millisecond), state)
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("local logs still large %v after production stopped (a follower keeps segments the manifest holds, or wrote oversized ones while catching up):%s",
				time.Since(prod.stoppedAt).Round(time.Millisecond), state)
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("total %v", time.Since(testStart).Round(time.Millisecond))
}

const (
	tcmTopic         = "tiered-cluster"
	tcmPartitions    = 2
	tcmSegmentBytes  = 16384
	tcmBatch         = 50
	tcmBatchInterval = 10 * time.Millisecond
)

func tcmKey(p int32, i int) string { return fmt.Sprintf("p%d-%09d", p, i) }
func tcmValue(p int32, i int) []byte {
	return recordValue(int(p)*1_000_000_000+i, 100)
}

// tcmCreateTopic creates topic with the configs through CreateTopics and
// waits until every partition has a leader and a full ISR.
func (c *Cluster) tcmCreateTopic(t *testing.T, topic string, partitions int32, rf int16, configs map[string]string) kadm.Metadata {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, rf
	for k, v := range configs {
		cc := kmsg.NewCreateTopicsRequestTopicConfig()
		cc.Name, cc.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, cc)
	}
	req.Topics = append(req.Topics, rt)
	cl := c.newClient(t)
	defer cl.Close()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("creating %s: %v", topic, err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("creating %s: error %d %v", topic, code, resp.Topics[0].ErrorMessage)
	}
	var md kadm.Metadata
	c.WaitMetadata(t, 60*time.Second, "leaders and full ISRs of "+topic, func(m kadm.Metadata) string {
		td, ok := m.Topics[topic]
		if !ok || len(td.Partitions) != int(partitions) {
			return "topic not listed with all partitions"
		}
		for p, d := range td.Partitions {
			if d.Leader < 0 || len(d.ISR) != int(rf) {
				return fmt.Sprintf("partition %d: leader %d, isr %v", p, d.Leader, d.ISR)
			}
		}
		md = m
		return ""
	})
	return md
}

// waitTcmLeaders waits until every partition of the topic has a leader
// and returns the metadata.
func (c *Cluster) waitTcmLeaders(t *testing.T) kadm.Metadata {
	t.Helper()
	var md kadm.Metadata
	c.WaitMetadata(t, 60*time.Second, "leaders of "+tcmTopic, func(m kadm.Metadata) string {
		for p, d := range m.Topics[tcmTopic].Partitions {
			if d.Leader < 0 {
				return fmt.Sprintf("partition %d has no leader", p)
			}
		}
		md = m
		return ""
	})
	return md
}

// tcmProducer produces to every partition of the topic from its own
// goroutine with franz-go's idempotent acks=all producer, record i of
// partition p keyed tcmKey(p, i), and remembers which were acknowledged.
type tcmProducer struct {
	t         *testing.T
	cl        *kgo.Client
	quit      chan struct{}
	wg        sync.WaitGroup
	once      sync.Once
	stoppedAt time.Time

	mu struct {
		sync.Mutex
		// status[p][i]: 1 sent (outcome unknown or failed), 2 acknowledged.
		status [tcmPartitions][]byte
		errs   int
	}
}

func startTcmProducer(t *testing.T, c *Cluster) *tcmProducer {
	pr := &tcmProducer{t: t, quit: make(chan struct{})}
	pr.cl = c.newClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0),
		// A request to a frozen leader fails after 5 s, not 20: it is
		// retried (idempotently) at the new leader.
		kgo.ProduceRequestTimeout(3*time.Second), kgo.RequestTimeoutOverhead(2*time.Second))
	for p := range int32(tcmPartitions) {
		pr.wg.Add(1)
		go pr.run(p)
	}
	return pr
}

func (pr *tcmProducer) run(p int32) {
	defer pr.wg.Done()
	for {
		select {
		case <-pr.quit:
			return
		default:
		}
		pr.mu.Lock()
		from := len(pr.mu.status[p])
		for range tcmBatch {
			pr.mu.status[p] = append(pr.mu.status[p], 1)
		}
		pr.mu.Unlock()
		rs := make([]*kgo.Record, 0, tcmBatch)
		for i := from; i < from+tcmBatch; i++ {
			rs = append(rs, &kgo.Record{Topic: tcmTopic, Partition: p, Key: []byte(tcmKey(p, i)), Value: tcmValue(p, i)})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res := pr.cl.ProduceSync(ctx, rs...)
		cancel()
		pr.mu.Lock()
		for _, r := range res {
			i, _ := strconv.Atoi(strings.TrimPrefix(string(r.Record.Key), fmt.Sprintf("p%d-", p)))
			if r.Err == nil {
				pr.mu.status[p][i] = 2
			} else {
				if pr.mu.errs < 5 {
					pr.t.Logf("produce p%d record %d: %v", p, i, r.Err)
				}
				pr.mu.errs++
			}
		}
		pr.mu.Unlock()
		select {
		case <-pr.quit:
			return
		case <-time.After(tcmBatchInterval):
		}
	}
}

// stop stops producing and waits for the goroutines.
func (pr *tcmProducer) stop() {
	pr.once.Do(func() {
		close(pr.quit)
		pr.wg.Wait()
		pr.cl.Close()
		pr.stoppedAt = time.Now()
	})
}

func (pr *tcmProducer) acked(p int32) int {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	n := 0
	for _, s := range pr.mu.status[p] {
		if s == 2 {
			n++
		}
	}
	return n
}

func (pr *tcmProducer) errorCount() int {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.mu.errs
}

// verify consumes every partition from offset 0 to its end and checks
// that every acknowledged record is there exactly once, in order,
// byte-identical, that offsets are dense, and that no record appears
// twice.
func (pr *tcmProducer) verify(t *testing.T, c *Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admCl := c.newClient(t)
	ends, err := kadm.NewClient(admCl).ListEndOffsets(ctx, tcmTopic)
	admCl.Close()
	if err != nil {
		t.Fatalf("ListEndOffsets: %v", err)
	}
	var end [tcmPartitions]int64
	offs := map[int32]kgo.Offset{}
	for p := range int32(tcmPartitions) {
		o, ok := ends.Lookup(tcmTopic, p)
		if !ok || o.Err != nil {
			t.Fatalf("ListEndOffsets partition %d: %v", p, o.Err)
		}
		end[p] = o.Offset
		offs[p] = kgo.NewOffset().AtStart()
	}
	cl := c.newClient(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tcmTopic: offs}),
		kgo.FetchMaxPartitionBytes(256<<10), kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	start := time.Now()
	var next [tcmPartitions]int64
	var last [tcmPartitions]int
	var seen [tcmPartitions]map[int]bool
	for p := range seen {
		seen[p] = map[int]bool{}
		last[p] = -1
	}
	done := func() bool {
		for p := range next {
			if next[p] < end[p] {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed up to offsets %v of %v before the deadline", next, end)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("fetch partition %d: %v", p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			p := r.Partition
			if r.Offset >= end[p] {
				return
			}
			if r.Offset != next[p] {
				t.Fatalf("partition %d: record at offset %d, want %d (a hole or a repeat)", p, r.Offset, next[p])
			}
			next[p]++
			i, err := strconv.Atoi(strings.TrimPrefix(string(r.Key), fmt.Sprintf("p%d-", p)))
			if err != nil || tcmKey(p, i) != string(r.Key) {
				t.Fatalf("partition %d offset %d: key %q", p, r.Offset, r.Key)
			}
			if !bytes.Equal(r.Value, tcmValue(p, i)) {
				t.Fatalf("partition %d offset %d: value of record %d differs", p, r.Offset, i)
			}
			if seen[p][i] {
				t.Fatalf("partition %d offset %d: record %d again", p, r.Offset, i)
			}
			if i < last[p] {
				t.Fatalf("partition %d offset %d: record %d after record %d", p, r.Offset, i, last[p])
			}
			seen[p][i], last[p] = true, i
		})
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	for p := range int32(tcmPartitions) {
		missing, unacked := 0, 0
		for i, s := range pr.mu.status[p] {
			switch {
			case s == 2 && !seen[p][i]:
				if missing < 5 {
					t.Errorf("partition %d: acknowledged record %d missing", p, i)
				}
				missing++
			case s != 2 && seen[p][i]:
				unacked++
			}
		}
		if missing > 0 {
			t.Errorf("partition %d: %d acknowledged records missing", p, missing)
		}
		t.Logf("partition %d: read offsets [0, %d) in order, byte-identical; %d records sent, all acknowledged ones present once; %d unacknowledged present",
			p, end[p], len(pr.mu.status[p]), unacked)
	}
	t.Logf("replay took %v", time.Since(start).Round(time.Millisecond))
}

// tcmEpochs maps each partition's leader epochs to their leaders, from
// the metadata seen.
type tcmEpochs struct {
	mu sync.Mutex
	m  map[int32]map[int32]int32 // partition -> epoch -> leader
}

func newTcmEpochs() *tcmEpochs { return &tcmEpochs{m: map[int32]map[int32]int32{}} }

func (e *tcmEpochs) observe(md kadm.Metadata) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for p, d := range md.Topics[tcmTopic].Partitions {
		if d.Leader < 0 {
			continue
		}
		if e.m[p] == nil {
			e.m[p] = map[int32]int32{}
		}
		e.m[p][d.LeaderEpoch] = d.Leader
	}
}

func (e *tcmEpochs) leader(p, epoch int32) (int32, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	l, ok := e.m[p][epoch]
	return l, ok
}

// watch polls the metadata in the background until the returned function
// is called.
func (e *tcmEpochs) watch(c *Cluster) func() {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			if md, err := tcmMetadata(c); err == nil {
				e.observe(md)
			}
			select {
			case <-quit:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(quit); <-done }) }
}

// tcmMetadata asks a running broker for the topic's metadata, as
// Cluster.Metadata does, without a testing.TB (it runs on a goroutine of
// its own).
func tcmMetadata(c *Cluster) (kadm.Metadata, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.LiveAddrs()...), kgo.DialTimeout(time.Second), kgo.RetryTimeout(2*time.Second))
	if err != nil {
		return kadm.Metadata{}, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return kadm.NewClient(cl).Metadata(ctx, tcmTopic)
}

// tcmManifestWatch reads every partition's manifest every 100 ms and
// checks each version against the previous one: the leader epoch never
// goes down, and the older version's segments are a prefix of the newer
// one's (no retention in this test, so nothing may leave the head).
type tcmManifestWatch struct {
	mc      *minio.Client
	bucket  string
	topicID string
	mu      sync.Mutex
	last    [tcmPartitions]*tiering.Manifest
	seen    [tcmPartitions]int
	probs   []string
	errs    int
}

func newTcmManifestWatch(mc *minio.Client, bucket, topicID string) *tcmManifestWatch {
	return &tcmManifestWatch{mc: mc, bucket: bucket, topicID: topicID}
}

func (w *tcmManifestWatch) run() func() {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			for p := range int32(tcmPartitions) {
				w.poll(p)
			}
			select {
			case <-quit:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(quit); <-done }) }
}

func (w *tcmManifestWatch) poll(p int32) *tiering.Manifest {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := tcmLoadManifest(ctx, w.mc, w.bucket, w.topicID, p)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.errs++
		if errors.Is(err, tiering.ErrBadManifest) {
			w.probs = append(w.probs, fmt.Sprintf("partition %d: %v", p, err))
		}
		return w.last[p]
	}
	if m == nil {
		return w.last[p]
	}
	prev := w.last[p]
	if pr := tcmManifestProblem(m); pr != "" {
		w.probs = append(w.probs, fmt.Sprintf("partition %d, manifest of epoch %d: %s", p, m.LeaderEpoch, pr))
	}
	if prev != nil {
		switch {
		case m.LeaderEpoch < prev.LeaderEpoch:
			w.probs = append(w.probs, fmt.Sprintf("partition %d: manifest leader epoch went from %d back to %d", p, prev.LeaderEpoch, m.LeaderEpoch))
		case !tcmPrefix(prev, m):
			w.probs = append(w.probs, fmt.Sprintf("partition %d: manifest of epoch %d (%d segments, end %d) does not extend the one of epoch %d (%d segments, end %d)",
				p, m.LeaderEpoch, len(m.Segments), m.EndOffset(), prev.LeaderEpoch, len(prev.Segments), prev.EndOffset()))
		}
	}
	if prev == nil || !m.UpdatedAt.Equal(prev.UpdatedAt) || len(m.Segments) != len(prev.Segments) {
		w.seen[p]++
	}
	w.last[p] = m
	return m
}

// latest is the last manifest the watcher read.
func (w *tcmManifestWatch) latest(p int32) *tiering.Manifest {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last[p]
}

// fresh reads the manifest now (through the watcher's checks).
func (w *tcmManifestWatch) fresh(t *testing.T, p int32) *tiering.Manifest {
	t.Helper()
	m := w.poll(p)
	if m == nil {
		t.Fatalf("partition %d: no manifest in the bucket", p)
	}
	return m
}

func (w *tcmManifestWatch) problems() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.probs)
}

func (w *tcmManifestWatch) versions(p int32) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen[p]
}

// tcmLoadManifest reads a partition's manifest with minio-go; nil when
// there is none yet.
func tcmLoadManifest(ctx context.Context, mc *minio.Client, bucket, topicID string, p int32) (*tiering.Manifest, error) {
	obj, err := mc.GetObject(ctx, bucket, tiering.ManifestKey(tcmTopic, topicID, p), minio.GetObjectOptions{})
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			return nil, nil
		}
		return nil, err
	}
	return tiering.DecodeManifest(b)
}

// tcmManifestProblem says what is wrong with a manifest's remote log:
// not starting at offset 0, a gap or an overlap, a segment's epoch lower
// than the one before it or above the manifest's.
func tcmManifestProblem(m *tiering.Manifest) string {
	if m.LogStartOffset != 0 {
		return fmt.Sprintf("remote log starts at %d, want 0", m.LogStartOffset)
	}
	var prev *tiering.RemoteSegment
	for i := range m.Segments {
		s := &m.Segments[i]
		switch {
		case i == 0 && s.BaseOffset != 0:
			return fmt.Sprintf("first segment starts at %d", s.BaseOffset)
		case s.NextOffset <= s.BaseOffset:
			return fmt.Sprintf("segment %d..%d is empty", s.BaseOffset, s.NextOffset)
		case prev != nil && s.BaseOffset > prev.NextOffset:
			return fmt.Sprintf("gap between %d and %d", prev.NextOffset, s.BaseOffset)
		case prev != nil && s.BaseOffset < prev.NextOffset:
			return fmt.Sprintf("segment %d..%d overlaps %d..%d", s.BaseOffset, s.NextOffset, prev.BaseOffset, prev.NextOffset)
		case prev != nil && s.Epoch < prev.Epoch:
			return fmt.Sprintf("segment %d..%d of epoch %d after one of epoch %d", s.BaseOffset, s.NextOffset, s.Epoch, prev.Epoch)
		case s.Epoch > m.LeaderEpoch:
			return fmt.Sprintf("segment %d..%d of epoch %d in a manifest of epoch %d", s.BaseOffset, s.NextOffset, s.Epoch, m.LeaderEpoch)
		}
		prev = s
	}
	return ""
}

func tcmCheckManifest(t *testing.T, p int32, m *tiering.Manifest) {
	t.Helper()
	if pr := tcmManifestProblem(m); pr != "" {
		t.Errorf("partition %d: final manifest: %s", p, pr)
	}
	if len(m.Segments) == 0 {
		t.Errorf("partition %d: nothing remote", p)
	}
}

// tcmCheckBucket checks that every object of every manifest segment is in
// the bucket, and logs how many objects no manifest entry references
// (uploads cut by the kill or refused commits: the sweeper's, after its
// grace period).
func tcmCheckBucket(t *testing.T, mc *minio.Client, bucket string, p int32, m *tiering.Manifest) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	have := map[string]bool{}
	for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: m.Prefix(), Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("list bucket: %v", o.Err)
		}
		have[o.Key] = true
	}
	delete(have, m.Key())
	for i := range m.Segments {
		for _, k := range m.SegmentKeys(&m.Segments[i]) {
			if !have[k] {
				t.Errorf("partition %d: segment %d..%d: object %s missing from the bucket", p, m.Segments[i].BaseOffset, m.Segments[i].NextOffset, k)
			}
			delete(have, k)
		}
	}
	if len(have) > 0 {
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range have {
				if !yield(k) {
					return
				}
			}
		})
		t.Logf("partition %d: %d objects no manifest entry references (left for the sweeper): %v", p, len(keys), keys[:min(8, len(keys))])
	}
}

// tcmPrefix reports whether a's segments are the first ones of b's.
func tcmPrefix(a, b *tiering.Manifest) bool {
	if len(a.Segments) > len(b.Segments) {
		return false
	}
	for i, s := range a.Segments {
		o := b.Segments[i]
		if s.BaseOffset != o.BaseOffset || s.NextOffset != o.NextOffset || s.Epoch != o.Epoch || s.ID != o.ID {
			return false
		}
	}
	return true
}

// tcmLateObjects lists the objects of partition 0 uploaded at epoch after
// since that the manifest does not reference.
func tcmLateObjects(t *testing.T, mc *minio.Client, bucket string, m *tiering.Manifest, epoch int32, since time.Time) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ref := map[string]bool{}
	for i := range m.Segments {
		for _, k := range m.SegmentKeys(&m.Segments[i]) {
			ref[k] = true
		}
	}
	var out []string
	for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: m.Prefix(), Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("list bucket: %v", o.Err)
		}
		name := strings.TrimPrefix(o.Key, m.Prefix())
		f := strings.SplitN(name, "-", 3)
		if len(f) == 3 && f[1] == strconv.Itoa(int(epoch)) && !ref[o.Key] && !o.LastModified.Before(since.Add(-time.Second)) {
			out = append(out, name)
		}
	}
	return out
}

func tcmCountEpoch(m *tiering.Manifest, epoch int32) int {
	n := 0
	for _, s := range m.Segments {
		if s.Epoch == epoch {
			n++
		}
	}
	return n
}

func tcmSegmentEpoch(m *tiering.Manifest, id string) int32 {
	for _, s := range m.Segments {
		if s.ID == id {
			return s.Epoch
		}
	}
	return -1
}

// tcmEpochSpans summarizes a manifest as "epoch:[base,next) n segments".
func tcmEpochSpans(m *tiering.Manifest) []string {
	var out []string
	for i := 0; i < len(m.Segments); {
		j := i
		for j < len(m.Segments) && m.Segments[j].Epoch == m.Segments[i].Epoch {
			j++
		}
		out = append(out, fmt.Sprintf("%d:[%d,%d)x%d", m.Segments[i].Epoch, m.Segments[i].BaseOffset, m.Segments[j-1].NextOffset, j-i))
		i = j
	}
	return out
}

// tcmLocalBytes is the size of the replica's .log files.
func tcmLocalBytes(t *testing.T, b *Broker, p int32) int64 {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(b.Dir, fmt.Sprintf("%s-%d", tcmTopic, p)))
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".log") {
			continue
		}
		if fi, err := e.Info(); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// tcmRunOutputs returns the output of each process the broker ran, in
// order.
func tcmRunOutputs(b *Broker) []string {
	b.mu.Lock()
	all := slices.Clone(b.mu.all)
	b.mu.Unlock()
	out := make([]string, len(all))
	for i, p := range all {
		out[i] = p.out.String()
	}
	return out
}

type tcmUpload struct {
	partition  int32
	base, next int64
	id         string
}

var tcmUploadRE = regexp.MustCompile(`msg="tiering: upload committed"[^\n]*? topic=` + regexp.QuoteMeta(tcmTopic) +
	` partition=(\d+)[^\n]*? base=(\d+) next=(\d+)[^\n]*? id=([0-9a-f]+)`)

// tcmUploads lists the topic's "upload committed" log lines in output.
func tcmUploads(output string) []tcmUpload {
	var out []tcmUpload
	for _, m := range tcmUploadRE.FindAllStringSubmatch(output, -1) {
		p, _ := strconv.Atoi(m[1])
		base, _ := strconv.ParseInt(m[2], 10, 64)
		next, _ := strconv.ParseInt(m[3], 10, 64)
		out = append(out, tcmUpload{partition: int32(p), base: base, next: next, id: m[4]})
	}
	return out
}

// tcmGrep returns the lines of output that contain s.
func tcmGrep(output, s string) []string {
	var out []string
	for _, l := range strings.Split(output, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}
