package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/stratastream/strata/broker/strataapi"
	"github.com/stratastream/strata/tiering/miniotest"
)

// Scenario 8's cold replay: a one-partition topic whose whole log is in
// MinIO (nothing local but the empty active segment) drained from its
// start by a classic group's one consumer and by share groups of 1 and
// 4 consumers (share.auto.offset.reset=earliest), each run from a cold
// chunk cache: the broker restarted with an empty remote.cache.dir, as
// scenario 4's cold replays are. Each share run's reference is the
// classic run just before it. Consumers do no work per record: the
// figure is how fast a share group drains history from the bucket.

const (
	shareReplayBucket     = "strata-share-replay"
	shareReplayTopic      = "s8-tiered"
	shareReplayRecordSize = 1024
	// shareReplaySegment is the topic's segment.bytes: several segments
	// even in a quick run, each one object read through the chunk cache.
	shareReplaySegment = 8 << 20
	// shareReplayBatch is each share consumer's ShareMaxRecords (strict):
	// franz-go's default, so that 4 consumers together hold the
	// partition's whole in-flight window
	// (group.share.partition.max.record.locks, 2000).
	shareReplayBatch    = 500
	shareReplayStepTime = 3 * time.Minute
)

// s8ColdReplay adds the cold replay's figures, rows and raw results to
// s; a step that fails is recorded as a failure of s.
func (r *runner) s8ColdReplay(ctx context.Context, s *scenario) {
	n := int(r.o.shareReplayBytes / shareReplayRecordSize)
	runs, err := r.shareColdRuns(ctx, s, n)
	if err != nil {
		s.fail("cold replay", err)
	}
	var classic *shareResult
	for _, run := range runs {
		s.raw(run.Label, run)
		if run.Group == "classic" {
			classic = run
			s.row("cold, classic, 1 consumer", fmt.Sprintf("%d records, %d chunk cache misses, first record after %.2f s", run.Records, run.CacheMisses, run.FirstRecordS),
				run.RecordsPerS, run.MBPerS, run.Seconds)
			continue
		}
		s.row(fmt.Sprintf("cold, share, %d consumer(s)", run.Consumers), fmt.Sprintf("%d records, %d deliveries, %d chunk cache misses, first record after %.2f s", run.Records, run.Deliveries, run.CacheMisses, run.FirstRecordS),
			run.RecordsPerS, run.MBPerS, run.Seconds)
		if classic == nil {
			continue
		}
		logf("  cold replay, %d share consumers: %.0f records/s (%.1f MB/s); classic consumer %.0f records/s (%.1f MB/s)",
			run.Consumers, run.RecordsPerS, run.MBPerS, classic.RecordsPerS, classic.MBPerS)
		ref := "a classic consumer of the partition from offset 0, the same topic, cold cache, in the same run"
		f := s.figure(fmt.Sprintf("cold replay from the bucket, share group of %d consumer(s), records/s ÷ a classic consumer from offset 0", run.Consumers), "records/s", nil)
		f.setIf(run.RecordsPerS)
		f.ref(ref, classic.RecordsPerS)
		f = s.figure(fmt.Sprintf("cold replay from the bucket, share group of %d consumer(s), MB/s ÷ a classic consumer from offset 0", run.Consumers), "MB/s", nil)
		f.setIf(run.MBPerS)
		f.ref(ref, classic.MBPerS)
		classic = nil
	}
	s.note(fmt.Sprintf("Cold replay: MinIO and a broker of its own; a one-partition topic of %d records of %d B (%d MiB, acks=all, batches of at most 16 KiB) with remote.storage.enable=true, segment.bytes %d MiB, local.retention.bytes=1 and local.retention.ms=1000, then segment.ms=1000; the runs start once the manifest covers the whole log from offset 0 and the local directory holds only the empty active segment. Before each run the broker is restarted with an empty remote.cache.dir (a cold chunk cache; the run's chunk cache misses, from DescribeTieredStorage, are in its row) and with no remote fetch quota, as scenario 4's replays. In order: a classic consumer (franz-go, of partition 0 from offset 0, no group, default fetch sizes), a share group of 1, the classic consumer again, a share group of 4; each share group is a new group with share.auto.offset.reset=earliest whose members fetch at most %d records each when they poll (ShareMaxRecords, ShareMaxRecordsStrict) and accept every record; each share figure's reference is the classic run just before it. No work per record. Times run from the consumers' creation (so they include the first read from the bucket and, for a share group, joining it; the first record's arrival is in each row) to the last record polled (share groups: and every acknowledgement flushed); MB/s counts keys and values.",
		n, shareReplayRecordSize, r.o.shareReplayBytes>>20, shareReplaySegment>>20, shareReplayBatch))
}

// shareColdRuns sets up the tiered topic and runs the cold replays in
// order; it returns the runs measured, and the error that stopped it.
func (r *runner) shareColdRuns(ctx context.Context, s *scenario, n int) ([]*shareResult, error) {
	dir := filepath.Join(r.tmp, "s8", "replay")
	minioBin, err := miniotest.Binary()
	if err != nil {
		return nil, err
	}
	mp, maddr, err := startMinIO(minioBin, filepath.Join(dir, "minio"), nil /* on loopback */)
	if err != nil {
		return nil, err
	}
	defer mp.stop()
	mc, err := minio.New(maddr, &minio.Options{Creds: credentials.NewStaticV4(minioUser, minioSecret, "")})
	if err != nil {
		return nil, err
	}
	if err := mc.MakeBucket(ctx, shareReplayBucket, minio.MakeBucketOptions{}); err != nil {
		return nil, fmt.Errorf("make bucket: %w", err)
	}
	cacheN := 0
	settings := func() []string {
		cacheN++
		return []string{
			"remote.storage.s3.endpoint=http://" + maddr,
			"remote.storage.s3.bucket=" + shareReplayBucket,
			"remote.cache.dir=" + filepath.Join(dir, fmt.Sprintf("cache-%d", cacheN)), // empty: a cold cache
			"remote.cache.bytes=" + strconv.FormatInt(r.o.shareReplayBytes+r.o.shareReplayBytes/4+256<<20, 10),
			remoteFetchQuotaKey + "=" + strconv.FormatInt(math.MaxInt64, 10),
			"log.retention.check.interval.ms=1000",
			"strata.remote.poll.interval.ms=500",
			"log.segment.delete.delay.ms=1000",
			"group.share.min.heartbeat.interval.ms=500", "group.share.heartbeat.interval.ms=1000",
		}
	}
	b, err := startBroker(r.bins["strata"], "broker", filepath.Join(dir, "data"), minioEnv(), settings()...)
	if err != nil {
		return nil, err
	}
	defer func() { b.stop() }()

	logf("  cold replay: producing %d records of %d B to %s", n, shareReplayRecordSize, shareReplayTopic)
	if err := shareProduce(ctx, b.addr, shareReplayTopic, 0, n, shareReplayRecordSize, map[string]string{
		"remote.storage.enable": "true",
		"segment.bytes":         strconv.Itoa(shareReplaySegment),
		// Kafka's size rule keeps the last sealed segment when the
		// active one is empty; local time retention trims it.
		"local.retention.bytes": "1",
		"local.retention.ms":    "1000",
	}); err != nil {
		return nil, err
	}
	adm, err := newAdmin(b.addr)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	// Roll the active segment too, so that the whole log goes remote.
	if err := setTopicConfig(ctx, adm, shareReplayTopic, map[string]string{"segment.ms": "1000"}); err != nil {
		return nil, fmt.Errorf("set segment.ms: %w", err)
	}
	logf("  cold replay: waiting until the bucket holds the whole log and the local log is trimmed")
	t0 := time.Now()
	if _, _, err := waitTiered(ctx, adm, mc, tieredTopic{shareReplayBucket, shareReplayTopic, 1}, b.dir, int64(n), shareReplayStepTime); err != nil {
		return nil, err
	}
	logf("    tiered after %.1fs", time.Since(t0).Seconds())

	var runs []*shareResult
	for i, consumers := range []int{1, 4} {
		for _, share := range []bool{false, true} {
			if err := b.restart(settings()...); err != nil {
				return runs, fmt.Errorf("restart: %w", err)
			}
			if earliest, err := listOffsets(ctx, adm, shareReplayTopic, false); err != nil || earliest[0] != 0 {
				return runs, fmt.Errorf("after the restart ListOffsets earliest is %v (%v), want 0", earliest, err)
			}
			var run *shareResult
			if share {
				run, err = shareConsume(ctx, b.addr, shareReplayTopic, fmt.Sprintf("s8-cold-share-%d", consumers), consumers, n, shareReplayBatch, 0)
			} else {
				run, err = classicConsume(ctx, b.addr, shareReplayTopic, "" /* no group */, n, 0)
			}
			if err != nil {
				return runs, err
			}
			if !share {
				run.Label = fmt.Sprintf("s8-cold-classic-%d", i+1)
			}
			run.fromStart()
			if run.CacheMisses, err = chunkCacheMisses(b.addr, shareReplayTopic); err != nil {
				return runs, err
			}
			if run.CacheMisses <= 0 {
				return runs, fmt.Errorf("%s: the chunk cache had no misses for %s: the run did not read the bucket", run.Label, shareReplayTopic)
			}
			runs = append(runs, run)
		}
	}
	if !b.Alive() {
		return runs, errors.New("broker exited during the cold replay:\n" + b.Tail(4000))
	}
	return runs, nil
}

// fromStart makes the run's time and rates count from the clients'
// creation: a replay's time includes its first read from the bucket
// (and a share group's, joining the group).
func (r *shareResult) fromStart() {
	r.Seconds += r.FirstRecordS
	r.RecordsPerS = float64(r.Records) / r.Seconds
	r.MBPerS = float64(r.Bytes) / r.Seconds / 1e6
}

// chunkCacheMisses is the broker's chunk cache misses for partition 0 of
// topic since it started, from DescribeTieredStorage (Strata's key
// 10000).
func chunkCacheMisses(addr, topic string) (int64, error) {
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return 0, err
	}
	req := &strataapi.DescribeTieredStorageRequest{Topics: []strataapi.DescribeTieredStorageRequestTopic{{Topic: topic, Partitions: []int32{0}}}}
	resp := req.ResponseKind().(*strataapi.DescribeTieredStorageResponse)
	if err := strataapi.RoundTrip(conn, "bench-suite", 1, req, resp); err != nil {
		return 0, fmt.Errorf("DescribeTieredStorage: %w", err)
	}
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		return 0, fmt.Errorf("DescribeTieredStorage of %s: %+v", topic, resp)
	}
	return resp.Topics[0].Partitions[0].CacheMisses, nil
}
