package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/stratastream/strata/broker/e2e/history"
	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/tiering"
	"github.com/stratastream/strata/tiering/miniotest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Tiered storage must not lose data: a topic deleted and created again
// under its name, and an unclean leader election of a tiered partition.

// genValue is the value of record i of a producer run named gen.
func genValue(gen string, i int) string {
	return fmt.Sprintf("%s-%06d-%s", gen, i, strings.Repeat("v", 80))
}

// produceGen produces records [from, to) of gen to partition 0 of topic,
// synchronously in batches of 50, recording each in h (when not nil)
// under producer gen. It returns how many were acknowledged.
func produceGen(t *testing.T, cl *kgo.Client, h *history.History, topic, gen string, from, to int) int {
	t.Helper()
	tp := history.TP{Topic: topic, Partition: 0}
	acked := 0
	for i := from; i < to; i += 50 {
		var rs []*kgo.Record
		for j := i; j < min(i+50, to); j++ {
			v := genValue(gen, j)
			rs = append(rs, &kgo.Record{Topic: topic, Partition: 0, Value: []byte(v)})
			if h != nil {
				h.Sent(gen, tp, v)
			}
		}
		res := cl.ProduceSync(tierCtx(t), rs...)
		for _, r := range res {
			switch {
			case r.Err == nil:
				acked++
				if h != nil {
					h.Answered(tp, string(r.Record.Value), history.Acked, r.Record.Offset, "")
				}
			case h != nil:
				h.Answered(tp, string(r.Record.Value), history.Unknown, -1, r.Err.Error())
			}
		}
		if err := res.FirstErr(); err != nil {
			t.Fatalf("produce %s %d..%d: %v", gen, i, i+len(rs), err)
		}
	}
	return acked
}

// bucketKeys lists the keys of the bucket under prefix.
func bucketKeys(t *testing.T, mc *minio.Client, bucket, prefix string) []string {
	t.Helper()
	var keys []string
	for o := range mc.ListObjects(tierCtx(t), bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("list bucket: %v", o.Err)
		}
		keys = append(keys, o.Key)
	}
	return keys
}

// createTopicCode is createTieredTopic that returns the error code and the
// topic id instead of failing.
func createTopicCode(t *testing.T, cl *kgo.Client, configs map[string]string) (int16, string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = tierTopic, 1, 1
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(tierCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].ErrorCode, coord.TopicID(resp.Topics[0].TopicID).String()
}

// consumeGen reads partition 0 of topic from offset 0 and checks that it
// holds exactly records [0, n) of gen.
func consumeGen(t *testing.T, addr, topic, gen string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxPartitionBytes(16<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := tierCtx(t)
	for next := 0; next < n; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before the deadline", next, n)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != int64(next) || string(r.Value) != genValue(gen, next) {
				t.Fatalf("record at %d (want %d): %.30q, want %.30q", r.Offset, next, r.Value, genValue(gen, next))
			}
			next++
		})
	}
}

// TestTieringRecreateTopicMinIO deletes a tiered topic while MinIO is down
// (so the deletion of its remote data fails and retries with growing
// backoff) and creates it again under the same name at once (a new topic
// id); the new topic is produced to, and its uploads, retried every
// second, reach MinIO before the old deletion's next retry, seconds
// away (not forced: the test logs both times, measured here about 0.3 s
// and 3.5 s after MinIO came back). The old
// incarnation's remote data must go, the new one's must stay whole and
// read from offset 0 with only its own records: keyed by topic id, the
// deletion cannot reach it. (With the name-keyed layout the retried
// deletion removed the new topic's manifest and objects.)
func TestTieringRecreateTopicMinIO(t *testing.T) {
	if strataBin == "" {
		t.Skip("end-to-end tests do not run with -short")
	}
	srv := miniotest.Start(t)
	bucket := srv.NewBucket(t)
	mc := srv.Client()
	t.Setenv("AWS_ACCESS_KEY_ID", miniotest.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", miniotest.SecretKey)
	b := StartBroker(t,
		"remote.storage.s3.endpoint="+srv.Endpoint(),
		"remote.storage.s3.bucket="+bucket,
		"remote.log.storage.system.enable=true",
		"log.retention.check.interval.ms=200",
		"strata.remote.poll.interval.ms=100",
		"strata.remote.retry.max.ms=1000",
		"offsets.topic.num.partitions=1",
	)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	configs := map[string]string{"segment.bytes": "16384", "local.retention.bytes": "1", "file.delete.delay.ms": "0"}
	const n = 600
	tiered := func(id string, what string) *tiering.Manifest {
		t.Helper()
		var m *tiering.Manifest
		waitFor(t, tierWait(), what, func() bool {
			m = readManifestOf(t, mc, bucket, tierTopic, id, 0)
			segs := localSegments(t, b)
			return m != nil && len(segs) > 0 && segs[0] > 0 && m.EndOffset() >= segs[0]
		})
		return m
	}

	code, id1 := createTopicCode(t, cl, configs)
	if code != 0 {
		t.Fatalf("create topic: error %d", code)
	}
	produceGen(t, cl, nil, tierTopic, "first", 0, n)
	m1 := tiered(id1, "the first topic tiered")
	t.Logf("first topic %s: remote [%d, %d) in %d segments", id1, m1.LogStartOffset, m1.EndOffset(), len(m1.Segments))

	// Delete it with MinIO down, and create it again.
	srv.Stop()
	if _, err := kadm.NewClient(cl).DeleteTopics(tierCtx(t), tierTopic); err != nil {
		t.Fatal(err)
	}
	var id2 string
	waitFor(t, tierWait(), "the topic created again", func() bool {
		code, id2 = createTopicCode(t, cl, configs)
		return code == 0
	})
	if id2 == id1 {
		t.Fatalf("the new topic has the old topic id %s", id1)
	}
	cl.Close()
	cl, err = kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	produceGen(t, cl, nil, tierTopic, "second", 0, n)
	waitFor(t, tierWait(), "the old topic's remote deletion failing while MinIO is down", func() bool {
		return strings.Count(b.Output(), "deleting remote data of a deleted topic failed") >= 3 // backoff 1 s, 2 s: the next try is 4 s away
	})
	srv.Restart(t)
	restarted := time.Now()
	m2 := tiered(id2, "the new topic tiered after MinIO came back")
	t.Logf("new topic %s: remote [%d, %d) in %d segments, %v after MinIO came back", id2, m2.LogStartOffset, m2.EndOffset(), len(m2.Segments), time.Since(restarted).Round(time.Millisecond))
	waitFor(t, tierWait(), "the old topic's remote data deleted", func() bool {
		return len(bucketKeys(t, mc, bucket, tiering.PartitionPrefix(tierTopic, id1, 0))) == 0
	})
	t.Logf("old topic's remote data deleted %v after MinIO came back", time.Since(restarted).Round(time.Millisecond))

	// Only the new topic's objects are left, all of them.
	m2 = readManifestOf(t, mc, bucket, tierTopic, id2, 0)
	if m2 == nil || m2.LogStartOffset != 0 || m2.Segments[0].BaseOffset != 0 || m2.TopicID != id2 {
		t.Fatalf("new topic's manifest after the old deletion: %+v", m2)
	}
	checkBucketAgrees(t, mc, bucket, m2)
	for _, k := range bucketKeys(t, mc, bucket, tierTopic+"/") {
		if !strings.HasPrefix(k, tiering.PartitionPrefix(tierTopic, id2, 0)) {
			t.Errorf("object %s is not the new topic's", k)
		}
	}
	consumeGen(t, b.Addr, tierTopic, "second", n)
}

// TestTieringUncleanElectionMinIO: a tiered partition with RF 2 on three
// brokers and unclean.leader.election.enable=true.
//
//  1. Records acknowledged by both replicas are uploaded.
//  2. The follower is killed; the leader, alone in the ISR
//     (min.insync.replicas=1), acknowledges more records and uploads
//     them: the remote log now holds records only the old leader had.
//  3. The leader is killed (the whole ISR is gone) and the out-of-sync
//     replica is restarted: the controller elects it uncleanly.
//  4. The new leader takes writes. Its archiver finds its log diverging
//     from the manifest at its log end at the election, cuts the remote
//     log there (the segment holding that offset ends there, the later
//     ones are superseded) and uploads its own records after it; local
//     retention then deletes them locally, so they are read from the
//     bucket.
//
// The end: the history checker over every record acknowledged before the
// follower died and after the election (nothing lost, duplicated,
// inconsistent or unexpected: the old leader's records of step 2 are
// unexpected if they are there), and a read from offset 0 that never
// returns one of the old leader's step 2 records; the manifest holds,
// from the divergence point on, only segments the new leader uploaded.
func TestTieringUncleanElectionMinIO(t *testing.T) {
	if strataBin == "" {
		t.Skip("end-to-end tests do not run with -short")
	}
	const topic = "unclean"
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
	md := c.createTopicWith(t, topic, 1, 2, map[string]string{
		"remote.storage.enable":          "true",
		"segment.bytes":                  "16384",
		"local.retention.bytes":          "1",
		"local.retention.ms":             "100",
		"file.delete.delay.ms":           "0",
		"min.insync.replicas":            "1",
		"unclean.leader.election.enable": "true",
	})
	d0 := md.Topics[topic].Partitions[0]
	oldLeader, epoch0 := d0.Leader, d0.LeaderEpoch
	follower := d0.Replicas[0]
	if follower == oldLeader {
		follower = d0.Replicas[1]
	}
	topicID := coord.TopicID(md.Topics[topic].ID).String()
	manifest := func() *tiering.Manifest { return readManifestOf(t, mc, bucket, topic, topicID, 0) }
	producer := func() *kgo.Client {
		cl := c.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(20))
		return cl
	}
	h := history.New()

	// 1. Replicated by both.
	// n1 is no multiple of produceGen's batches of 50, so the old leader's
	// segment holding the follower's log end goes on past it (the remote
	// segment is cut inside; at a boundary it is dropped whole).
	const n1, n2, n3 = 320, 300, 600
	if got := produceGen(t, producer(), h, topic, "both", 0, n1); got != n1 {
		t.Fatalf("%d of %d records acknowledged by both replicas", got, n1)
	}
	waitFor(t, tierWait(), "the replicated records uploaded", func() bool {
		m := manifest()
		return m != nil && m.EndOffset() >= n1/2
	})

	// 2. The follower dies; the leader alone acknowledges and uploads.
	c.Broker(follower).Kill(t)
	c.WaitMetadata(t, clusterSessionTimeout+30*time.Second, "the ISR shrunk to the leader", func(m kadm.Metadata) string {
		d := m.Topics[topic].Partitions[0]
		if d.Leader != oldLeader || !slices.Equal(d.ISR, []int32{oldLeader}) {
			return fmt.Sprintf("leader %d isr %v", d.Leader, d.ISR)
		}
		return ""
	})
	diverge := int64(n1) // the follower's log end
	if got := produceGen(t, producer(), nil, topic, "old", 0, n2); got != n2 {
		t.Fatalf("%d of %d records acknowledged by the leader alone", got, n2)
	}
	waitFor(t, tierWait(), "the old leader's own records uploaded", func() bool {
		m := manifest()
		return m != nil && m.EndOffset() >= diverge+n2/2
	})
	mOld := manifest()
	straddler := mOld.SegmentFor(diverge)
	t.Logf("old leader %d (epoch %d) uploaded [%d, %d); the follower's log ends at %d, in remote segment [%d, %d)",
		oldLeader, epoch0, mOld.LogStartOffset, mOld.EndOffset(), diverge, mOld.Segments[straddler].BaseOffset, mOld.Segments[straddler].NextOffset)

	// 3. The ISR dies; the out-of-sync replica comes back and is elected.
	c.Broker(oldLeader).Kill(t)
	killed := time.Now()
	c.Broker(follower).Restart(t)
	var epoch1 int32
	c.WaitMetadata(t, clusterSessionTimeout+60*time.Second, fmt.Sprintf("broker %d elected uncleanly", follower), func(m kadm.Metadata) string {
		d := m.Topics[topic].Partitions[0]
		if d.Leader != follower || d.LeaderEpoch <= epoch0 {
			return fmt.Sprintf("leader %d epoch %d isr %v", d.Leader, d.LeaderEpoch, d.ISR)
		}
		epoch1 = d.LeaderEpoch
		return ""
	})
	t.Logf("broker %d leads at epoch %d, %v after the old leader was killed", follower, epoch1, time.Since(killed).Round(time.Millisecond))

	// 4. The new leader's records, uploaded and deleted locally.
	if got := produceGen(t, producer(), h, topic, "new", 0, n3); got != n3 {
		t.Fatalf("%d of %d records acknowledged by the new leader", got, n3)
	}
	end := diverge + n3
	var m *tiering.Manifest
	waitFor(t, tierWait(), "the new leader's records uploaded and deleted locally", func() bool {
		m = manifest()
		segs := partitionSegments(t, c.Broker(follower), topic, 0)
		return m != nil && m.LeaderEpoch >= epoch1 && m.EndOffset() >= end-end/8 && len(m.Dropped) == 0 &&
			len(segs) > 0 && segs[0] > diverge+n3/4
	})
	t.Logf("after the election: remote [%d, %d) in %d segments, the new leader's local log from %d",
		m.LogStartOffset, m.EndOffset(), len(m.Segments), partitionSegments(t, c.Broker(follower), topic, 0)[0])
	if !strings.Contains(c.Broker(follower).Output(), "the remote log is cut there") {
		t.Errorf("broker %d never logged cutting the remote log at the divergence", follower)
	}
	cut := m.SegmentFor(diverge - 1)
	if cut < 0 || m.Segments[cut].NextOffset != diverge {
		t.Errorf("the remote log has no segment ending at the divergence point %d: %+v", diverge, m.Segments)
	} else if old := mOld.Segments[straddler]; old.BaseOffset < diverge {
		if s := m.Segments[cut]; s.ID != old.ID || s.BaseOffset != old.BaseOffset {
			t.Errorf("the old segment [%d, %d) holding the divergence point is not cut there: %+v", old.BaseOffset, old.NextOffset, s)
		}
		t.Logf("the old leader's segment [%d, %d) is cut at %d", old.BaseOffset, old.NextOffset, diverge)
	} else {
		t.Logf("the divergence point %d is a segment boundary of the old leader's remote log", diverge)
	}
	oldIDs := map[string]bool{}
	for _, s := range mOld.Segments[straddler+1:] {
		oldIDs[s.ID] = true
	}
	for _, s := range m.Segments {
		if s.BaseOffset >= diverge && (s.Epoch < epoch1 || oldIDs[s.ID]) {
			t.Errorf("remote segment [%d, %d) past the divergence uploaded at epoch %d (id %s); the new leader's epoch is %d",
				s.BaseOffset, s.NextOffset, s.Epoch, s.ID, epoch1)
		}
	}
	checkBucketAgrees(t, mc, bucket, m)

	// The log from offset 0, mostly from the bucket.
	logs := c.readLog(t, topic, []int32{0})
	for _, r := range logs[0] {
		v := string(r.Value)
		if strings.HasPrefix(v, "old-") || (r.Offset >= diverge && !strings.HasPrefix(v, "new-")) {
			t.Fatalf("offset %d holds %.20q: a record the new leader did not write", r.Offset, v)
		}
	}
	rep := h.Check(finalLog(topic, logs))
	t.Logf("UNCLEAN_HISTORY %s", rep)
	if !rep.OK() {
		t.Errorf("the history checker found %s; first problems:\n%s", rep, strings.Join(rep.Problems, "\n"))
	}
	if int64(len(logs[0])) != end {
		t.Errorf("the log holds %d records, want %d (%d replicated before, %d after the election)", len(logs[0]), end, n1, n3)
	}
}
