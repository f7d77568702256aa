package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/tiering"
	"github.com/stratastream/strata/tiering/miniotest"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/segment/poll"
)

// Tiered storage against a real MinIO and a real `strata broker` process:
// tiny segments and tiny local retention, so nearly everything lives only
// in the bucket; replay from offset 0 with kcat and franz-go; a MinIO
// outage while producing; a SIGKILL of the broker during uploads.

const tierTopic = "tiered"

func tierKey(i int) string    { return fmt.Sprintf("k%06d", i) }
func tierValue(i int) []byte  { return recordValue(i, 100) }
func tierWait() time.Duration { return 30 * time.Second }
func tierCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// tierProduce produces records [from, to) to partition 0 synchronously, in
// batches of 50, pausing pause between batches.
func tierProduce(t *testing.T, cl *kgo.Client, from, to int, pause time.Duration) {
	t.Helper()
	for i := from; i < to; i += 50 {
		var rs []*kgo.Record
		for j := i; j < min(i+50, to); j++ {
			rs = append(rs, &kgo.Record{Topic: tierTopic, Partition: 0, Key: []byte(tierKey(j)), Value: tierValue(j)})
		}
		if err := cl.ProduceSync(tierCtx(t), rs...).FirstErr(); err != nil {
			t.Fatalf("produce %d..%d: %v", i, i+len(rs), err)
		}
		if pause > 0 {
			time.Sleep(pause)
		}
	}
}

// readManifest reads the partition's manifest from the bucket with
// minio-go, an S3 client independent of the broker's.
func readManifest(t *testing.T, mc *minio.Client, bucket, topicID string) *tiering.Manifest {
	t.Helper()
	return readManifestOf(t, mc, bucket, tierTopic, topicID, 0)
}

// readManifestOf reads the manifest of partition p of the topic
// incarnation topicID with minio-go; nil when there is none.
func readManifestOf(t *testing.T, mc *minio.Client, bucket, topic, topicID string, p int32) *tiering.Manifest {
	t.Helper()
	obj, err := mc.GetObject(tierCtx(t), bucket, tiering.ManifestKey(topic, topicID, p), minio.GetObjectOptions{})
	if err != nil {
		t.Fatalf("get manifest: %v", err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			return nil
		}
		t.Fatalf("read manifest: %v", err)
	}
	m, err := tiering.DecodeManifest(b)
	if err != nil {
		t.Fatalf("decode manifest: %v", err)
	}
	return m
}

// localSegments returns the base offsets of the tiered partition's .log
// files, sorted.
func localSegments(t *testing.T, b *Broker) []int64 {
	t.Helper()
	return partitionSegments(t, b, tierTopic, 0)
}

// partitionSegments returns the base offsets of the .log files of the
// broker's replica of topic's partition p, sorted; none when the broker
// has no such directory.
func partitionSegments(t *testing.T, b *Broker, topic string, p int32) []int64 {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(b.Dir, fmt.Sprintf("%s-%d", topic, p)))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(name, 10, 64); err == nil {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// checkBucketAgrees fails unless every object of every manifest segment
// exists in the bucket.
func checkBucketAgrees(t *testing.T, mc *minio.Client, bucket string, m *tiering.Manifest) {
	t.Helper()
	have := map[string]bool{}
	for o := range mc.ListObjects(tierCtx(t), bucket, minio.ListObjectsOptions{Prefix: m.Prefix(), Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("list bucket: %v", o.Err)
		}
		have[o.Key] = true
	}
	for i := range m.Segments {
		for _, k := range m.SegmentKeys(&m.Segments[i]) {
			if !have[k] {
				t.Errorf("manifest segment %d..%d: object %s missing from the bucket", m.Segments[i].BaseOffset, m.Segments[i].NextOffset, k)
			}
		}
	}
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, d, what, cond)
}

// checkAllRecords consumes partition 0 from the beginning with franz-go
// and kcat and checks records [0, n) byte for byte, in order.
func checkAllRecords(t *testing.T, addr string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{tierTopic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxPartitionBytes(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := tierCtx(t)
	next := 0
	for next < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("franz-go: consumed %d of %d records before the deadline", next, n)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("franz-go fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if next >= n {
				return
			}
			if r.Offset != int64(next) || string(r.Key) != tierKey(next) || !bytes.Equal(r.Value, tierValue(next)) {
				t.Fatalf("franz-go record %d: offset %d key %q", next, r.Offset, r.Key)
			}
			next++
		})
	}

	got := kcatConsume(t, addr, tierTopic)[0]
	if len(got) < n {
		t.Fatalf("kcat read %d records, want at least %d", len(got), n)
	}
	for i := range n {
		r := got[i]
		if r.Offset != int64(i) || r.Key != tierKey(i) || r.Value != string(tierValue(i)) {
			t.Fatalf("kcat record %d: offset %d key %q", i, r.Offset, r.Key)
		}
	}
}

func TestTieringMinIO(t *testing.T) {
	requireKcat(t)
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
		"remote.log.storage.system.enable=true",
		"log.retention.check.interval.ms=200",
		"strata.remote.poll.interval.ms=100",
		"strata.remote.retry.max.ms=1000",
		"offsets.topic.num.partitions=1",
	)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topicID := createTieredTopic(t, cl)

	// 1. Tiny segments, tiny local retention: segments leave local disk
	// only after upload; replay from 0 crosses the remote-to-local
	// boundary.
	tierProduce(t, cl, 0, 1000, 0)
	var m *tiering.Manifest
	waitFor(t, tierWait(), "segments uploaded and deleted locally", func() bool {
		m = readManifest(t, mc, bucket, topicID)
		segs := localSegments(t, b)
		return m != nil && len(m.Segments) > 0 && len(segs) > 0 && segs[0] > 0
	})
	if segs := localSegments(t, b); segs[0] > m.EndOffset() {
		// The manifest only grows: local data older than its end was
		// uploaded before it left.
		if m2 := readManifest(t, mc, bucket, topicID); segs[0] > m2.EndOffset() {
			t.Fatalf("local log starts at %d, above the remote end %d", segs[0], m2.EndOffset())
		}
	}
	t.Logf("tiered: %d remote segments [%d, %d), local segments from %d", len(m.Segments), m.LogStartOffset, m.EndOffset(), localSegments(t, b)[0])
	checkAllRecords(t, b.Addr, 1000)

	// `strata tier status` on the running broker: remote columns from the
	// bucket, local ones from its data directory, the cache hit ratio of
	// the replay above from its metrics.
	store := []string{"--override", "remote.storage.s3.endpoint=" + srv.Endpoint(), "--override", "remote.storage.s3.bucket=" + bucket,
		"--override", "log.dirs=" + b.Dir, "--override", "metrics.listener=" + metricsAddr}
	st := tierStatusRow(t, store)
	if st.RemoteLogStart == nil || *st.RemoteLogStart != 0 || st.RemoteLogEnd == nil || *st.RemoteLogEnd <= 0 ||
		st.LogEnd == nil || *st.LogEnd != 1000 || st.LocalLogStart == nil || *st.LocalLogStart > *st.RemoteLogEnd ||
		st.CacheReads == nil || *st.CacheReads == 0 || st.LastUpload == nil {
		t.Fatalf("tier status of the running broker: %s", st.raw)
	}

	// 2. MinIO down for 30 s while producing (the outage): produce
	// goes on, nothing local is deleted that the manifest lacks, uploads
	// catch up afterwards.
	waitFor(t, tierWait(), "every sealed segment uploaded", func() bool {
		m = readManifest(t, mc, bucket, topicID)
		segs := localSegments(t, b)
		return m != nil && len(segs) > 0 && m.EndOffset() >= segs[len(segs)-1]
	})
	frozen := m.EndOffset()
	srv.Stop()
	outageEnd := time.Now().Add(30 * time.Second)
	next := 1000
	for time.Now().Before(outageEnd) {
		tierProduce(t, cl, next, next+20, 0)
		next += 20
		segs := localSegments(t, b)
		if segs[0] > frozen {
			t.Fatalf("during the outage the local log starts at %d, above the last committed remote end %d", segs[0], frozen)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if segs := localSegments(t, b); len(segs) < 3 {
		t.Fatalf("only %d local segments after producing through the outage", len(segs))
	}
	t.Logf("outage: produced up to %d; remote end frozen at %d; local segments from %d", next, frozen, localSegments(t, b)[0])
	srv.Restart(t)
	waitFor(t, tierWait(), "uploads caught up after the outage", func() bool {
		m = readManifest(t, mc, bucket, topicID)
		segs := localSegments(t, b)
		return m != nil && m.EndOffset() > frozen && len(segs) > 0 && segs[0] > frozen && m.EndOffset() >= segs[len(segs)-1]
	})
	t.Logf("after the outage: %d remote segments [%d, %d)", len(m.Segments), m.LogStartOffset, m.EndOffset())
	checkBucketAgrees(t, mc, bucket, m)
	checkAllRecords(t, b.Addr, next)

	// 3. SIGKILL during uploads: after restart the manifest and the bucket
	// agree and every record is readable.
	killAt := next + 600
	tierProduce(t, cl, next, killAt, 0)
	if mk := readManifest(t, mc, bucket, topicID); mk != nil {
		t.Logf("killing the broker at %d produced, remote end %d", killAt, mk.EndOffset())
	}
	b.Kill(t)
	b.Restart(t)
	cl.Close()
	cl, err = kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	total := killAt + 400
	tierProduce(t, cl, killAt, total, 0)
	waitFor(t, tierWait(), "uploads caught up after the restart", func() bool {
		m = readManifest(t, mc, bucket, topicID)
		segs := localSegments(t, b)
		return m != nil && len(segs) > 0 && m.EndOffset() >= segs[len(segs)-1]
	})
	t.Logf("after the kill: %d remote segments [%d, %d)", len(m.Segments), m.LogStartOffset, m.EndOffset())
	if m.LogStartOffset != 0 || m.Segments[0].BaseOffset != 0 {
		t.Fatalf("remote log starts at %d (first segment %d), want 0", m.LogStartOffset, m.Segments[0].BaseOffset)
	}
	checkBucketAgrees(t, mc, bucket, m)
	checkAllRecords(t, b.Addr, total)

	// 4. `strata tier status` shows the partition; `strata tier restore`
	// recreates the topic in a fresh data directory (new coordinator
	// state) from the bucket alone: consumers read everything remote from
	// offset 0, producers continue after the remote end.
	cl.Close()
	b.Stop(t)
	remoteEnd := readManifest(t, mc, bucket, topicID).EndOffset()
	status := runCmd(t, 30*time.Second, "", strataBin, append([]string{"tier", "status"}, store...)...)
	if !strings.Contains(status, tierTopic) || !strings.Contains(status, strconv.FormatInt(remoteEnd, 10)) {
		t.Fatalf("strata tier status lacks the partition or its remote end %d:\n%s", remoteEnd, status)
	}
	// Stopped: everything sealed is uploaded, the log ends at the last
	// record, and there is no cache to report.
	st = tierStatusRow(t, store)
	if st.RemoteLogEnd == nil || *st.RemoteLogEnd != remoteEnd || st.LogEnd == nil || *st.LogEnd != int64(total) ||
		st.PendingSegments == nil || *st.PendingSegments != 0 || st.CacheHitRatio != nil {
		t.Fatalf("tier status of the stopped broker (remote end %d, %d records): %s", remoteEnd, total, st.raw)
	}
	store = store[:4] // the bucket only, for the fresh broker
	fresh := t.TempDir()
	out := runCmd(t, 60*time.Second, "", strataBin, append([]string{"tier", "restore", "--all", "--override", "log.dirs=" + fresh}, store...)...)
	if !strings.Contains(out, "restored "+tierTopic) {
		t.Fatalf("strata tier restore:\n%s", out)
	}
	b2 := StartBroker(t,
		"log.dirs="+fresh,
		"remote.storage.s3.endpoint="+srv.Endpoint(),
		"remote.storage.s3.bucket="+bucket,
		"strata.remote.poll.interval.ms=100",
	)
	checkAllRecords(t, b2.Addr, int(remoteEnd))
	cl, err = kgo.NewClient(kgo.SeedBrokers(b2.Addr), kgo.DisableIdempotentWrite(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	res, err := cl.ProduceSync(tierCtx(t), &kgo.Record{Topic: tierTopic, Partition: 0, Key: []byte(tierKey(int(remoteEnd))), Value: tierValue(int(remoteEnd))}).First()
	if err != nil || res.Offset != remoteEnd {
		t.Fatalf("produce after restore: offset %v, %v; want %d", res, err, remoteEnd)
	}
}

// tierStatus is the partition row of `strata tier status --format json`.
type tierStatus struct {
	LocalLogStart   *int64     `json:"local_log_start_offset"`
	RemoteLogStart  *int64     `json:"remote_log_start_offset"`
	RemoteLogEnd    *int64     `json:"remote_log_end_offset"`
	LogEnd          *int64     `json:"log_end_offset"`
	PendingSegments *int       `json:"pending_segments"`
	LastUpload      *time.Time `json:"last_upload"`
	CacheReads      *int64     `json:"cache_reads"`
	CacheHitRatio   *float64   `json:"cache_hit_ratio"`
	raw             string
}

// tierStatusRow runs `strata tier status tiered --format json` with the
// given settings and returns partition 0's row.
func tierStatusRow(t *testing.T, settings []string) tierStatus {
	t.Helper()
	out := runCmd(t, 30*time.Second, "", strataBin, append([]string{"tier", "status", tierTopic, "--format", "json"}, settings...)...)
	var rep struct {
		Partitions []json.RawMessage `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Partitions) != 1 {
		t.Fatalf("strata tier status --format json: %v\n%s", err, out)
	}
	st := tierStatus{raw: string(rep.Partitions[0])}
	if err := json.Unmarshal(rep.Partitions[0], &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// createTieredTopic creates the topic with tiny segments and tiny local
// retention (remote.storage.enable comes from the broker default) and
// returns its topic id.
func createTieredTopic(t *testing.T, cl *kgo.Client) string {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = tierTopic, 1, 1
	for k, v := range map[string]string{"segment.bytes": "16384", "local.retention.bytes": "1", "file.delete.delay.ms": "0"} {
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
		t.Fatalf("create topic: error %d %v", c, resp.Topics[0].ErrorMessage)
	}
	return coord.TopicID(resp.Topics[0].TopicID).String()
}
