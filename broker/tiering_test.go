package broker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratastream/strata/segment/poll"
	"github.com/stratastream/strata/tiering"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// tieredProps are broker settings that make tiering fast to observe.
var tieredProps = map[string]string{
	"log.retention.check.interval.ms": "200",
	"strata.remote.poll.interval.ms":  "100",
}

// tieredTopicConfigs: tiny segments, tiny local retention.
var tieredTopicConfigs = map[string]string{
	"remote.storage.enable": "true",
	"segment.bytes":         "4096",
	"local.retention.bytes": "1",
	"file.delete.delay.ms":  "0",
}

func tierRecord(i int) *kgo.Record {
	return &kgo.Record{
		Key:   []byte(fmt.Sprintf("k%05d", i)),
		Value: []byte(fmt.Sprintf("value-%05d-%s", i, bytes.Repeat([]byte{byte('a' + i%26)}, 40))),
	}
}

// produceTiered produces records [from, to) to partition 0 of topic.
func produceTiered(t *testing.T, cl *kgo.Client, topic string, from, to int) {
	t.Helper()
	const batch = 50
	for i := from; i < to; i += batch {
		var rs []*kgo.Record
		for j := i; j < min(i+batch, to); j++ {
			r := tierRecord(j)
			r.Topic, r.Partition = topic, 0
			rs = append(rs, r)
		}
		if err := cl.ProduceSync(testCtx(t), rs...).FirstErr(); err != nil {
			t.Fatalf("produce %d..: %v", i, err)
		}
	}
}

// consumeTiered reads n records of partition 0 from offset 0 and checks
// each is the one produced, in order.
func consumeTiered(t *testing.T, addr, topic string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxBytes(64<<10), kgo.FetchMaxPartitionBytes(16<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	next := 0
	for next < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before the deadline", next, n)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			want := tierRecord(next)
			if r.Offset != int64(next) || !bytes.Equal(r.Key, want.Key) || !bytes.Equal(r.Value, want.Value) {
				t.Fatalf("record %d: got offset %d key %q value %q", next, r.Offset, r.Key, r.Value)
			}
			next++
		})
	}
}

func tierListEarliest(t *testing.T, cl *kgo.Client, topic string) (int64, int16) {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = 0, -2
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}

// waitTiered waits until the partition's local log start is above 0 and
// its manifest holds segments, and returns the partition.
func waitTiered(t *testing.T, s *Server, topic string) *partition {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p := s.topic(topic).local(0)
		m := p.remoteManifest()
		if p.log.LogStartOffset() > 0 && m != nil && len(m.Segments) > 0 {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("not tiered after 30s: local log start %d, manifest %v", p.log.LogStartOffset(), m)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestTieringLocalStoreReplayFromZero(t *testing.T) {
	s := startServer(t, tieredProps)
	cl := newClient(t, s)
	const topic, n = "tiered", 2000
	createTopic(t, cl, topic, 1, tieredTopicConfigs)
	produceTiered(t, cl, topic, 0, n)
	p := waitTiered(t, s, topic)

	// Nothing local was deleted before it was uploaded: the local log
	// starts at or below the remote end. Uploads and local retention go
	// on meanwhile, so the local start is read first: the remote end
	// only grows.
	local := p.log.LogStartOffset()
	m := p.remoteManifest()
	if local > m.EndOffset() {
		t.Fatalf("local log start %d above the remote end %d", local, m.EndOffset())
	}
	if m.LogStartOffset != 0 {
		t.Fatalf("remote log start %d, want 0", m.LogStartOffset)
	}
	// The objects are in the local-directory store.
	objs := filepath.Join(s.cfg.MetaDir(), "objects", filepath.FromSlash(m.Prefix()))
	if ents, err := os.ReadDir(objs); err != nil || len(ents) < 2 {
		t.Fatalf("objects in %s: %d, %v", objs, len(ents), err)
	}

	if off, code := tierListEarliest(t, cl, topic); code != 0 || off != 0 {
		t.Fatalf("ListOffsets earliest = %d (error %d), want 0", off, code)
	}
	consumeTiered(t, s.Addr().String(), topic, n)

	// A fetch from offset 0 reports the remote log start.
	fp := fetchRaw(t, cl, topic, 0, 0, 1<<20)
	if fp.ErrorCode != 0 || fp.LogStartOffset != 0 || len(fp.RecordBatches) == 0 {
		t.Fatalf("fetch at 0: error %d, log start %d, %d bytes", fp.ErrorCode, fp.LogStartOffset, len(fp.RecordBatches))
	}
	if st := s.tier.reader.Stats(); st.Cache.Misses == 0 {
		t.Fatalf("remote reader was not used: %+v", st)
	}
	// Every remote chunk sent was released after its response was written.
	deadline := time.Now().Add(5 * time.Second)
	for s.tier.reader.Stats().Cache.Pinned != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("remote chunks still pinned after the fetches: %+v", s.tier.reader.Stats().Cache)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTieringRemoteRetentionAndOutOfRange(t *testing.T) {
	s := startServer(t, tieredProps)
	cl := newClient(t, s)
	const topic, n = "tiered-ret", 1000
	createTopic(t, cl, topic, 1, tieredTopicConfigs)
	produceTiered(t, cl, topic, 0, n)
	p := waitTiered(t, s, topic)

	// Total retention cuts the remote log: the remote log start moves up
	// and fetches below it are OFFSET_OUT_OF_RANGE.
	cfgs := map[string]string{"retention.bytes": "8000"}
	for k, v := range tieredTopicConfigs {
		cfgs[k] = v
	}
	alter(t, cl, topic, cfgs)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if m := p.remoteManifest(); m != nil && m.LogStartOffset > 0 {
			break
		}
		if time.Now().After(deadline) {
			m := p.remoteManifest()
			t.Errorf("remote retention did not move the remote log start: cfg %+v arch %v manifest bytes %d segs %d start %d", s.topic(topic).cfg, p.tier.archiver() != nil, m.Bytes(), len(m.Segments), m.LogStartOffset)
			t.Logf("lag %+v hw %d segs %+v", p.tier.archiver().Lag(), p.log.HighWatermark(), p.log.Segments())
			t.FailNow()
		}
		time.Sleep(50 * time.Millisecond)
	}
	if fp := fetchRaw(t, cl, topic, 0, 0, 1<<20); fp.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch below the remote log start: error %d, want OFFSET_OUT_OF_RANGE", fp.ErrorCode)
	}
	// The remote log start may move up again while the last uploads let
	// retention delete more: a fetch at the start that is out of range
	// counts only if the start did not move meanwhile (it moves a
	// bounded number of times).
	for {
		start, code := tierListEarliest(t, cl, topic)
		if code != 0 || start <= 0 {
			t.Fatalf("ListOffsets earliest = %d (error %d), want > 0", start, code)
		}
		fp := fetchRaw(t, cl, topic, 0, start, 1<<20)
		if fp.ErrorCode == kerr.OffsetOutOfRange.Code {
			if now, _ := tierListEarliest(t, cl, topic); now > start {
				continue
			}
		}
		if fp.ErrorCode != 0 || len(fp.RecordBatches) == 0 {
			t.Fatalf("fetch at the remote log start %d: error %d, %d bytes", start, fp.ErrorCode, len(fp.RecordBatches))
		}
		break
	}
}

func TestTieringOffsetsTopicNotTiered(t *testing.T) {
	s := startServer(t, map[string]string{"remote.log.storage.system.enable": "true"})
	cl := newClient(t, s)
	createTopic(t, cl, "plain", 1, nil)
	if p := s.topic("plain").local(0); p.tier.archiver() == nil {
		t.Fatal("remote.log.storage.system.enable=true: no archiver for a new topic")
	}
	if s.topic("__consumer_offsets") == nil {
		createTopic(t, cl, "__consumer_offsets", 1, nil)
	}
	if p := s.topic("__consumer_offsets").local(0); p.tier.archiver() != nil || p.tier.gate.Tiered() {
		t.Fatal("__consumer_offsets is tiered")
	}
}

func TestTieringToggleAndDelete(t *testing.T) {
	s := startServer(t, tieredProps)
	cl := newClient(t, s)
	const topic = "tiered-toggle"
	createTopic(t, cl, topic, 1, map[string]string{"segment.bytes": "4096"})
	p := s.topic(topic).local(0)
	if p.tier.archiver() != nil {
		t.Fatal("archiver runs for a topic without remote.storage.enable")
	}
	alter(t, cl, topic, tieredTopicConfigs)
	produceTiered(t, cl, topic, 0, 500)
	p = waitTiered(t, s, topic)
	if off, code := tierListEarliest(t, cl, topic); code != 0 || off != 0 {
		t.Fatalf("ListOffsets earliest = %d (error %d), want 0", off, code)
	}

	// Off: the archiver stops, remote data stays readable.
	off := map[string]string{}
	for k, v := range tieredTopicConfigs {
		off[k] = v
	}
	off["remote.storage.enable"] = "false"
	alter(t, cl, topic, off)
	if p.tier.archiver() != nil {
		t.Fatal("archiver still runs after remote.storage.enable=false")
	}
	if p.log.LogStartOffset() == 0 {
		t.Fatal("local log start is 0: the remote read below is not tested")
	}
	if fp := fetchRaw(t, cl, topic, 0, 0, 1<<20); fp.ErrorCode != 0 || len(fp.RecordBatches) == 0 {
		t.Fatalf("fetch at 0 with tiering off: error %d, %d bytes; remote data must stay readable", fp.ErrorCode, len(fp.RecordBatches))
	}
	if off, code := tierListEarliest(t, cl, topic); code != 0 || off != 0 {
		t.Fatalf("ListOffsets earliest with tiering off = %d (error %d), want 0", off, code)
	}

	// Deleting the topic deletes its remote data.
	topicID := s.topic(topic).id.String()
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TopicNames = []string{topic}
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	if _, err := req.RequestWith(testCtx(t), cl); err != nil {
		t.Fatal(err)
	}
	store := s.tier.store
	deadline := time.Now().Add(10 * time.Second)
	for {
		objs, err := store.List(context.Background(), tiering.PartitionPrefix(topic, topicID, 0))
		if err == nil && len(objs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("remote data of the deleted topic remains: %d objects, %v", len(objs), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestTieringRestoreIntoFreshBroker(t *testing.T) {
	objects := t.TempDir()
	props := map[string]string{"remote.storage.dir": objects}
	for k, v := range tieredProps {
		props[k] = v
	}
	const topic = "tiered-restore"
	a := startServer(t, props)
	cla := newClient(t, a, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	createTopic(t, cla, topic, 2, tieredTopicConfigs)
	produceTiered(t, cla, topic, 0, 1500)
	waitTiered(t, a, topic)
	cla.Close()
	topicID := a.topic(topic).id.String()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	store, err := tiering.NewLocalStore(objects)
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := tiering.LoadManifest(ctx, store, topic, topicID, 0)
	if err != nil {
		t.Fatal(err)
	}
	end := m.EndOffset()
	if end == 0 {
		t.Fatal("nothing remote")
	}

	// A fresh broker (new data directory, new coordinator state) on the
	// same store.
	props["strata.remote.restore.topics"] = "*"
	b := startServer(t, props)
	tb := b.topic(topic)
	if tb == nil || len(tb.parts) != 2 || tb.id.String() != m.TopicID || !tb.cfg.remoteStorage || tb.cfg.seg.SegmentBytes != 4096 {
		t.Fatalf("restored topic: %+v", tb)
	}
	p := tb.local(0)
	if got := p.log.LogEndOffset(); got != end {
		t.Fatalf("restored log end %d, want the remote end %d", got, end)
	}
	clb := newClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if off, code := tierListEarliest(t, clb, topic); code != 0 || off != 0 {
		t.Fatalf("ListOffsets earliest = %d (error %d), want 0", off, code)
	}
	consumeTiered(t, b.Addr().String(), topic, int(end))

	// Producers continue after the remote end, and uploads go on.
	r := tierRecord(int(end))
	r.Topic, r.Partition = topic, 0
	res, err := clb.ProduceSync(testCtx(t), r).First()
	if err != nil || res.Offset != end {
		t.Fatalf("produce after restore: offset %d, %v; want %d", res.Offset, err, end)
	}
	produceTiered(t, clb, topic, int(end)+1, int(end)+600)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if m2 := p.remoteManifest(); m2 != nil && m2.EndOffset() > end && m2.LogStartOffset == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no uploads after restore: %+v", p.tier.archiver().Lag())
		}
		time.Sleep(50 * time.Millisecond)
	}
	consumeTiered(t, b.Addr().String(), topic, int(end)+600)
}

// copyDir copies the files under src into dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dst, filepath.Dir(rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTieringRestoreLegacyBucket restores a topic from a bucket written
// before the topic id joined the object keys (tiering's
// testdata/legacy-bucket: topic events, id 0a1b2c3d-…-00000000e001, 3
// partitions, partition 1 remote [0, 44)): the topic comes back with its
// id, partition 1 reads from offset 0 out of the legacy layout, and new
// uploads continue the legacy partition where it is.
func TestTieringRestoreLegacyBucket(t *testing.T) {
	const topic, topicID, end = "events", "0a1b2c3d-0000-4000-8000-00000000e001", 44
	objects := t.TempDir()
	copyDir(t, filepath.Join("..", "tiering", "testdata", "legacy-bucket"), objects)
	props := map[string]string{"remote.storage.dir": objects, "strata.remote.restore.topics": topic}
	for k, v := range tieredProps {
		props[k] = v
	}
	s := startServer(t, props)
	ts := s.topic(topic)
	if ts == nil || ts.id.String() != topicID || len(ts.parts) != 3 || !ts.cfg.remoteStorage {
		t.Fatalf("restored topic: %+v", ts)
	}
	p := ts.local(1)
	if got := p.log.LogEndOffset(); got != end {
		t.Fatalf("restored log end %d, want the remote end %d", got, end)
	}
	cl := newClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {1: kgo.NewOffset().AtStart()}}))
	ctx := testCtx(t)
	for next := int64(0); next < end; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", next, end)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next || !bytes.HasPrefix(r.Value, fmt.Appendf(nil, "value-%08d-", next)) {
				t.Fatalf("record %d: offset %d value %.20q", next, r.Offset, r.Value)
			}
			next++
		})
	}

	// New data goes on in the legacy layout.
	alter(t, cl, topic, map[string]string{"remote.storage.enable": "true", "segment.bytes": "1024"})
	for i := range 30 {
		r := &kgo.Record{Topic: topic, Partition: 1, Value: fmt.Appendf(nil, "new-%d-%s", i, bytes.Repeat([]byte{'n'}, 100))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var m *tiering.Manifest
	if !poll.For(time.Minute, func() bool { m = p.remoteManifest(); return m != nil && m.EndOffset() > end }) {
		t.Fatalf("no uploads after restore: %+v", p.tier.archiver().Lag())
	}
	if !m.LegacyKeys || m.Prefix() != tiering.LegacyPartitionPrefix(topic, 1) {
		t.Fatalf("uploads after restore went to %s (legacy %v)", m.Prefix(), m.LegacyKeys)
	}
	if _, err := os.Stat(filepath.Join(objects, topic, topicID)); !os.IsNotExist(err) {
		t.Fatalf("objects in the new layout for a legacy partition: %v", err)
	}
}

// TestMetricsTieringUploadsAndPartitionCache checks the tiering metrics
// that `strata tier status` and dashboards read besides the upload lag:
// last upload time and upload totals per partition, and the chunk cache's
// reads per partition, which add up to the cache-wide counters.
func TestMetricsTieringUploadsAndPartitionCache(t *testing.T) {
	props := map[string]string{"metrics.listener": "127.0.0.1:0"}
	for k, v := range tieredProps {
		props[k] = v
	}
	s := startServer(t, props)
	cl := newClient(t, s)
	const topic = "tiered"
	createTopic(t, cl, topic, 1, tieredTopicConfigs)
	before := time.Now()
	produceTiered(t, cl, topic, 0, 500)
	p := waitTiered(t, s, topic)
	// The archiver counts an upload just after committing it to the
	// manifest: wait for the count. Uploads go on in the background.
	waitFor(t, "an upload counted", func() bool { return p.tier.archiver().Lag().UploadedSegs > 0 })
	for range 2 { // the second read of offset 0 hits the cache
		if fp := fetchRaw(t, cl, topic, 0, 0, 1<<20); fp.ErrorCode != 0 || len(fp.RecordBatches) == 0 {
			t.Fatalf("fetch at 0: error %d, %d bytes", fp.ErrorCode, len(fp.RecordBatches))
		}
	}
	fams := scrape(t, s)
	m := p.remoteManifest() // holds at least the uploads counted at the scrape, in order
	part := []string{"topic", topic, "partition", "0"}
	if v := mustValue(t, fams, "strata_tier_last_upload_timestamp_seconds", part...); v < float64(before.Unix()) || v > float64(time.Now().Unix()+1) {
		t.Errorf("last upload at %v, want between %v and now", v, before.Unix())
	}
	segs := mustValue(t, fams, "strata_tier_uploaded_segments_total", part...)
	if segs < 1 || int(segs) > len(m.Segments) {
		t.Fatalf("uploaded segments %v, want at least 1 and at most the manifest's %d", segs, len(m.Segments))
	}
	var want int64
	for _, rs := range m.Segments[:int(segs)] {
		want += rs.Size
	}
	if v := mustValue(t, fams, "strata_tier_uploaded_bytes_total", part...); v != float64(want) {
		t.Errorf("uploaded bytes %v, want %d (the first %v segments of the manifest)", v, want, segs)
	}
	var reads float64
	for _, r := range []struct{ result, total string }{
		{"hit", "strata_tier_cache_hits_total"},
		{"join", "strata_tier_cache_inflight_joins_total"},
		{"miss", "strata_tier_cache_misses_total"},
	} {
		v := mustValue(t, fams, "strata_tier_cache_reads_total", append(part, "result", r.result)...)
		if all := mustValue(t, fams, r.total); v != all {
			t.Errorf("%s reads of the partition %v, cache-wide %v (one partition read)", r.result, v, all)
		}
		reads += v
	}
	if hits := mustValue(t, fams, "strata_tier_cache_reads_total", append(part, "result", "hit")...); hits < 1 || reads < 2 {
		t.Errorf("%v reads, %v hits; want a hit on the second fetch", reads, hits)
	}

	// Deleting the topic drops its cache counters.
	del := kmsg.NewPtrDeleteTopicsRequest()
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr(topic)
	del.Topics = append(del.Topics, dt)
	if _, err := del.RequestWith(testCtx(t), cl); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := metricValue(scrape(t, s), "strata_tier_cache_reads_total", part...); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("cache reads of a deleted topic still exported")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
