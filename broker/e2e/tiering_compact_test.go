package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/e2e/history"
	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/tiering"
	"github.com/stratastream/strata/tiering/miniotest"
)

// A compacted topic that tiers (Kafka refuses the combination; Strata
// allows it): a real `strata broker`, a real MinIO, franz-go. Keys are
// produced over and over, segments tier once the local cleaner cleaned
// them, the remote cleaner compacts the bucket, and a replay from offset
// 0 must show Kafka's compaction guarantee; then the broker is killed
// with SIGKILL while a remote cleaning uploads its replacements, and the
// manifest must point only at complete objects.

// tcTopic is the compacted tiered topic; tcPlain gets the same records
// with cleanup.policy=delete, tiered too, for the history checker.
const tcTopic, tcPlain = "tcompact", "tcplain"

// tcAck is what a producer was told of one record of tcTopic.
type tcAck struct {
	key   string
	value []byte // nil: a tombstone
}

// tcProducer produces rounds of values of keys k0000.. and records
// every acknowledged offset.
type tcProducer struct {
	t     *testing.T
	cl    *kgo.Client
	keys  int
	size  int
	round int
	acked map[int64]tcAck
	hist  *history.History
}

// tcHistoryValue names a record of tcPlain for the history checker.
func tcHistoryValue(key string, value []byte, round int) string {
	if value == nil {
		return fmt.Sprintf("%s-r%03d-tombstone", key, round)
	}
	return string(value)
}

// produceRound produces one value (or, every seventh key in tombstone
// rounds, a tombstone) of every key, synchronously in batches of 100.
func (p *tcProducer) produceRound(tombstones bool) {
	p.t.Helper()
	for i := 0; i < p.keys; i += 100 {
		var rs []*kgo.Record
		for k := i; k < min(i+100, p.keys); k++ {
			key := fmt.Sprintf("k%04d", k)
			var v []byte
			if !tombstones || k%7 != 0 {
				v = []byte(fmt.Sprintf("%s-r%03d-%s", key, p.round, strings.Repeat("v", p.size)))
			}
			round := []kgo.RecordHeader{{Key: "round", Value: []byte(strconv.Itoa(p.round))}}
			rs = append(rs, &kgo.Record{Topic: tcTopic, Partition: 0, Key: []byte(key), Value: v},
				&kgo.Record{Topic: tcPlain, Partition: 0, Key: []byte(key), Value: v, Headers: round})
			p.hist.Sent("producer", history.TP{Topic: tcPlain}, tcHistoryValue(key, v, p.round))
		}
		res := p.cl.ProduceSync(tierCtx(p.t), rs...)
		if err := res.FirstErr(); err != nil {
			p.t.Fatalf("produce round %d: %v", p.round, err)
		}
		for _, r := range res {
			if r.Record.Topic == tcPlain {
				p.hist.Answered(history.TP{Topic: tcPlain}, tcHistoryValue(string(r.Record.Key), r.Record.Value, p.round), history.Acked, r.Record.Offset, "")
				continue
			}
			p.acked[r.Record.Offset] = tcAck{string(r.Record.Key), r.Record.Value}
		}
	}
	p.round++
}

// tcRead is one record read back.
type tcRead struct {
	offset int64
	key    string
	value  []byte
	round  int // from the "round" header, -1 without one
}

// tcReadCompacted reads partition 0 of tcTopic from offset 0 with
// franz-go up to end (exclusive).
func tcReadCompacted(t *testing.T, addr string, end int64) []tcRead {
	t.Helper()
	return tcReadTopic(t, addr, tcTopic, end)
}

// tcReadTopic reads partition 0 of topic from offset 0 with franz-go up
// to end (exclusive).
func tcReadTopic(t *testing.T, addr, topic string, end int64) []tcRead {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxPartitionBytes(32<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []tcRead
	next := int64(0)
	for next < end {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("franz-go: read up to offset %d of %d before the deadline", next, end)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("franz-go fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < end {
				round := -1
				for _, h := range r.Headers {
					if h.Key == "round" {
						if n, err := strconv.Atoi(string(h.Value)); err == nil {
							round = n
						}
					}
				}
				out = append(out, tcRead{r.Offset, string(r.Key), r.Value, round})
			}
			next = r.Offset + 1
		})
	}
	return out
}

// tcReport counts what a replay got wrong against Kafka's compaction
// guarantee for a log read from offset 0: lost (a key's latest
// acknowledged record missing at its offset), inconsistent (a record that
// is not what was acknowledged at its offset), reordered (an offset not
// above the one before), older (a key's value read after a newer value
// of the key, or, where dups counts, a key read twice in a range that was
// cleaned whole).
type tcReport struct {
	read, lost, inconsistent, reordered, older, dups int
}

func tcCheck(acked map[int64]tcAck, recs []tcRead, end int64, cleanedBelow int64) tcReport {
	rep := tcReport{read: len(recs)}
	latest := map[string]int64{}
	for off, a := range acked {
		if cur, ok := latest[a.key]; off < end && (!ok || off > cur) {
			latest[a.key] = off
		}
	}
	lastSeen := map[string]int64{}
	seenBelow := map[string]bool{}
	got := map[int64]bool{}
	for i, r := range recs {
		if i > 0 && r.offset <= recs[i-1].offset {
			rep.reordered++
		}
		a, ok := acked[r.offset]
		if !ok || a.key != r.key || string(a.value) != string(r.value) || (a.value == nil) != (r.value == nil) {
			rep.inconsistent++
			continue
		}
		if prev, ok := lastSeen[r.key]; ok && prev > r.offset {
			rep.older++
		}
		lastSeen[r.key] = r.offset
		if r.offset < cleanedBelow {
			if seenBelow[r.key] {
				rep.dups++
			}
			seenBelow[r.key] = true
		}
		got[r.offset] = true
	}
	for _, off := range latest {
		if !got[off] {
			rep.lost++
		}
	}
	return rep
}

// tcCreateTopic creates topic with cleanup.policy policy, tiered, with
// tiny segments and tiny local retention, and returns its topic id.
func tcCreateTopic(t *testing.T, cl *kgo.Client, topic, policy string) string {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 1
	for k, v := range map[string]string{
		"cleanup.policy": policy, "remote.storage.enable": "true", "segment.bytes": "16384",
		"local.retention.bytes": "1", "file.delete.delay.ms": "0", "min.cleanable.dirty.ratio": "0.01",
	} {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(tierCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Topics[0].ErrorCode; c != 0 {
		t.Fatalf("create compacted tiered topic: error %d %v", c, resp.Topics[0].ErrorMessage)
	}
	return coord.TopicID(resp.Topics[0].TopicID).String()
}

// bucketObjects lists the partition's objects with minio-go.
func bucketObjects(t *testing.T, mc *minio.Client, bucket string, m *tiering.Manifest) map[string]int64 {
	t.Helper()
	have := map[string]int64{}
	for o := range mc.ListObjects(tierCtx(t), bucket, minio.ListObjectsOptions{Prefix: m.Prefix(), Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("list bucket: %v", o.Err)
		}
		have[o.Key] = o.Size
	}
	return have
}

// stableView reads the manifest and lists the bucket until the manifest
// did not change during the listing, so the two agree on one version
// (with file.delete.delay.ms=0 a newer manifest's purge may delete what
// an older one names right away).
func stableView(t *testing.T, mc *minio.Client, bucket, topicID string) (*tiering.Manifest, map[string]int64) {
	t.Helper()
	for range 50 {
		m := readManifestOf(t, mc, bucket, tcTopic, topicID, 0)
		have := bucketObjects(t, mc, bucket, m)
		if m2 := readManifestOf(t, mc, bucket, tcTopic, topicID, 0); m2.UpdatedAt.Equal(m.UpdatedAt) {
			return m, have
		}
	}
	t.Fatal("the manifest changed during each of 50 listings")
	return nil, nil
}

// replacementsInFlight returns the .log objects of the partition that no
// entry of m references and that begin below m's end: replacements a
// remote cleaning uploaded and has not committed (an upload of new data
// begins at the end or above).
func replacementsInFlight(m *tiering.Manifest, have map[string]int64) []string {
	ref := map[string]bool{}
	for i := range m.Segments {
		ref[m.SegmentKey(&m.Segments[i], tiering.SuffixLog)] = true
	}
	for i := range m.Dropped {
		ref[m.SegmentKey(&m.Dropped[i].RemoteSegment, tiering.SuffixLog)] = true
	}
	var out []string
	for k := range have {
		name, ok := strings.CutSuffix(strings.TrimPrefix(k, m.Prefix()), tiering.SuffixLog)
		if !ok || ref[k] {
			continue
		}
		base, err := strconv.ParseInt(strings.SplitN(name, "-", 2)[0], 10, 64)
		if err == nil && base < m.EndOffset() {
			out = append(out, name)
		}
	}
	return out
}

// checkManifestComplete fails unless every object of every live segment
// of m is in the bucket, its .log object exactly Size bytes.
func checkManifestComplete(t *testing.T, m *tiering.Manifest, have map[string]int64) {
	t.Helper()
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	for i := range m.Segments {
		s := &m.Segments[i]
		for _, k := range m.SegmentKeys(s) {
			size, ok := have[k]
			if !ok {
				t.Errorf("manifest segment [%d, %d): object %s missing from the bucket", s.BaseOffset, s.NextOffset, k)
			}
			if strings.HasSuffix(k, tiering.SuffixLog) && size != s.Size {
				t.Errorf("manifest segment [%d, %d): %s has %d bytes, the manifest says %d", s.BaseOffset, s.NextOffset, k, size, s.Size)
			}
		}
	}
}

func TestTieringCompactedMinIO(t *testing.T) {
	if strataBin == "" {
		t.Skip("end-to-end tests do not run with -short")
	}
	srv := miniotest.Start(t)
	bucket := srv.NewBucket(t)
	mc := srv.Client()
	t.Setenv("AWS_ACCESS_KEY_ID", miniotest.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", miniotest.SecretKey)
	metricsAddr := freeAddr(t)
	b := StartBroker(t,
		"remote.storage.s3.endpoint="+srv.Endpoint(),
		"remote.storage.s3.bucket="+bucket,
		"metrics.listener="+metricsAddr,
		"log.retention.check.interval.ms=200",
		"log.cleaner.backoff.ms=100",
		// Paces both cleaners, so a remote cleaning's uploads take long
		// enough for the kill below to land among them.
		"log.cleaner.io.max.bytes.per.second=262144",
		"strata.remote.poll.interval.ms=100",
		"strata.remote.retry.max.ms=1000",
		"strata.remote.cleaner.interval.ms=200",
		"strata.remote.sweep.interval.ms=500",
		"strata.remote.sweep.grace.ms=4000",
		"offsets.topic.num.partitions=1",
	)
	newClient := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	cl := newClient()
	defer func() { cl.Close() }()
	topicID := tcCreateTopic(t, cl, tcTopic, "compact")
	tcCreateTopic(t, cl, tcPlain, "delete")
	p := &tcProducer{t: t, cl: cl, keys: 400, size: 120, acked: map[int64]tcAck{}, hist: history.New()}
	rounds := func() float64 {
		return scrapeMetric(t, metricsAddr, fmt.Sprintf(`strata_tier_remote_clean_rounds_total{partition="0",topic="%s"}`, tcTopic))
	}

	// 1. Rounds of every key; the last one deletes every seventh key.
	for range 4 {
		p.produceRound(false)
	}
	p.produceRound(true)
	end := int64(len(p.acked))
	var m *tiering.Manifest
	began := time.Now()
	waitFor(t, 120*time.Second, "cleaned segments tiered, deleted locally, and the remote log cleaned whole", func() bool {
		m = readManifestOf(t, mc, bucket, tcTopic, topicID, 0)
		segs := partitionSegments(t, b, tcTopic, 0)
		if m == nil || len(m.Segments) < 2 || len(segs) == 0 || segs[0] == 0 || rounds() < 1 {
			return false
		}
		rep := tcCheck(p.acked, tcReadCompacted(t, b.Addr, m.EndOffset()), m.EndOffset(), m.EndOffset())
		return rep.dups == 0
	})
	t.Logf("remote log [%d, %d) in %d segments after %v; local log from %d; %v remote cleanings",
		m.LogStartOffset, m.EndOffset(), len(m.Segments), time.Since(began).Round(time.Millisecond), partitionSegments(t, b, tcTopic, 0)[0], rounds())
	if m.LogStartOffset != 0 {
		t.Errorf("remote log starts at %d: compaction moved the log start", m.LogStartOffset)
	}
	recs := tcReadCompacted(t, b.Addr, end)
	rep := tcCheck(p.acked, recs, end, m.EndOffset())
	t.Logf("replay from 0 of %d acknowledged records: %+v", end, rep)
	if rep.lost+rep.inconsistent+rep.reordered+rep.older+rep.dups != 0 || rep.read >= int(end) {
		t.Fatalf("compaction guarantee broken or nothing compacted: %+v", rep)
	}
	m, have := stableView(t, mc, bucket, topicID)
	checkManifestComplete(t, m, have)

	// 2. SIGKILL while a remote cleaning uploads its replacements: the
	// manifest points only at complete objects, the replacements are
	// left for the sweeper, and after the restart the next cleaning
	// completes.
	var inflight []string
	for attempt := 0; attempt < 4 && inflight == nil; attempt++ {
		before := rounds()
		p.produceRound(false)
		// Looked at every 20 ms: the window between a replacement's
		// upload and its commit is short.
		tick := time.NewTicker(20 * time.Millisecond)
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) && inflight == nil {
			m = readManifestOf(t, mc, bucket, tcTopic, topicID, 0)
			if m != nil {
				inflight = replacementsInFlight(m, bucketObjects(t, mc, bucket, m))
			}
			if inflight == nil && rounds() > before {
				break // missed that one; produce and try again
			}
			<-tick.C
		}
		tick.Stop()
	}
	if inflight == nil {
		t.Fatal("never saw a remote cleaning's replacements before their commit")
	}
	b.Kill(t)
	killedAt := time.Now()
	m, have = stableView(t, mc, bucket, topicID)
	t.Logf("killed during a remote swap: %d replacement objects uploaded, uncommitted: %v; manifest [%d, %d) in %d segments",
		len(inflight), inflight, m.LogStartOffset, m.EndOffset(), len(m.Segments))
	checkManifestComplete(t, m, have)

	b.Restart(t)
	cl.Close()
	cl = newClient()
	p.cl = cl
	p.produceRound(false)
	end = int64(len(p.acked))
	waitFor(t, 120*time.Second, "the remote log cleaned whole after the restart", func() bool {
		m = readManifestOf(t, mc, bucket, tcTopic, topicID, 0)
		if m == nil || rounds() < 1 {
			return false
		}
		return tcCheck(p.acked, tcReadCompacted(t, b.Addr, m.EndOffset()), m.EndOffset(), m.EndOffset()).dups == 0
	})
	recs = tcReadCompacted(t, b.Addr, end)
	rep = tcCheck(p.acked, recs, end, m.EndOffset())
	t.Logf("after the restart: remote log [%d, %d), replay of %d acknowledged records: %+v", m.LogStartOffset, m.EndOffset(), end, rep)
	if rep.lost+rep.inconsistent+rep.reordered+rep.older+rep.dups != 0 {
		t.Fatalf("compaction guarantee broken after the kill: %+v", rep)
	}
	if m.LogStartOffset != 0 {
		t.Errorf("remote log starts at %d after the restart: compaction moved the log start", m.LogStartOffset)
	}
	// The uncommitted replacements go once the sweeper watched them for
	// its grace.
	waitFor(t, 60*time.Second, "the killed cleaning's replacements swept", func() bool {
		m, have = stableView(t, mc, bucket, topicID)
		for _, name := range inflight {
			if _, ok := have[m.Prefix()+name+tiering.SuffixLog]; ok {
				return false
			}
		}
		return true
	})
	t.Logf("replacements swept %v after the kill", time.Since(killedAt).Round(time.Millisecond))
	checkManifestComplete(t, m, have)

	// The same records in a tiered topic that deletes: the history
	// checker holds every acknowledgement against it after the kill.
	final := map[history.TP][]history.Record{}
	for _, r := range tcReadTopic(t, b.Addr, tcPlain, int64(len(p.acked))) {
		final[history.TP{Topic: tcPlain}] = append(final[history.TP{Topic: tcPlain}], history.Record{Offset: r.offset, Value: tcHistoryValue(r.key, r.value, r.round)})
	}
	hrep := p.hist.Check(final)
	t.Logf("history of %s: %v", tcPlain, hrep)
	if !hrep.OK() || hrep.Lost+hrep.Inconsistent+hrep.Duplicated != 0 {
		t.Fatalf("history of %s: %v\n%s", tcPlain, hrep, strings.Join(hrep.Problems, "\n"))
	}

	// 3. `strata tier restore` into a fresh data directory yields the
	// compacted topic: its configs, and the compacted remote log read
	// from offset 0.
	cl.Close()
	b.Stop(t)
	m, _ = stableView(t, mc, bucket, topicID)
	fresh := t.TempDir()
	store := []string{"--override", "remote.storage.s3.endpoint=" + srv.Endpoint(), "--override", "remote.storage.s3.bucket=" + bucket}
	out := runCmd(t, 60*time.Second, "", strataBin, append([]string{"tier", "restore", "--topic", tcTopic, "--override", "log.dirs=" + fresh}, store...)...)
	if !strings.Contains(out, "restored "+tcTopic) {
		t.Fatalf("strata tier restore:\n%s", out)
	}
	b2 := StartBroker(t, "log.dirs="+fresh, "remote.storage.s3.endpoint="+srv.Endpoint(), "remote.storage.s3.bucket="+bucket,
		"strata.remote.poll.interval.ms=100")
	recs = tcReadCompacted(t, b2.Addr, m.EndOffset())
	rep = tcCheck(p.acked, recs, m.EndOffset(), m.EndOffset())
	t.Logf("restored: remote log [%d, %d), replay: %+v", m.LogStartOffset, m.EndOffset(), rep)
	if rep.lost+rep.inconsistent+rep.reordered+rep.older+rep.dups != 0 {
		t.Fatalf("restored compacted topic breaks the guarantee: %+v", rep)
	}
	cl2, err := kgo.NewClient(kgo.SeedBrokers(b2.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, tcTopic
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(tierCtx(t), cl2)
	if err != nil || len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("describe configs of the restored topic: %v %+v", err, resp)
	}
	policy := ""
	for _, c := range resp.Resources[0].Configs {
		if c.Name == "cleanup.policy" && c.Value != nil {
			policy = *c.Value
		}
	}
	if policy != "compact" {
		t.Fatalf("restored topic has cleanup.policy %q, want compact", policy)
	}
}
