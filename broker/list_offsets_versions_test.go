package broker

import (
	"maps"
	"testing"
	"time"

	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/segment/poll"
	"github.com/stratastream/strata/tiering/miniotest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// listOffsetAt sends a ListOffsets of partition 0 of topic for ts at
// version v over a raw connection, read_uncommitted, and returns the
// partition's answer.
func listOffsetAt(t *testing.T, s *Server, v int16, topic string, ts int64) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = v, -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, ts, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := dialRaw(t, s).request(1, req).(*kmsg.ListOffsetsResponse)
	return resp.Topics[0].Partitions[0]
}

// TestListOffsetsLocalAndTieredSpecsUntiered: on an untiered partition
// -4 (earliest local, v8) is the log start, as -2, and -5 (latest tiered,
// v9) is offset -1 with epoch -1, as Kafka; each is UNSUPPORTED_VERSION
// before its version, and an unknown negative timestamp always is.
func TestListOffsetsLocalAndTieredSpecsUntiered(t *testing.T) {
	s := startServer(t, nil)
	cl := newClient(t, s)
	const topic = "specs"
	createTopic(t, cl, topic, 1, nil)
	for range 3 {
		if p := produceRaw(t, cl, topic, 0, buildBatch(t, segment.CodecNone, 4)); p.ErrorCode != 0 {
			t.Fatalf("produce: %v", kerr.ErrorForCode(p.ErrorCode))
		}
	}
	for _, tc := range []struct {
		v               int16
		ts              int64
		code            int16
		offset          int64
		epoch           int32
		beforeDeleteRec bool
	}{
		{8, -4, 0, 0, 0, true},
		{9, -4, 0, 0, 0, true},
		{9, -5, 0, -1, -1, true},
		{7, -4, kerr.UnsupportedVersion.Code, -1, -1, true},
		{8, -5, kerr.UnsupportedVersion.Code, -1, -1, true},
		{9, -6, kerr.UnsupportedVersion.Code, -1, -1, true},
		// After DeleteRecords to 6: the log start moves, -4 with it.
		{8, -4, 0, 6, 0, false},
		{9, -2, 0, 6, 0, false},
		{9, -5, 0, -1, -1, false},
	} {
		if !tc.beforeDeleteRec && s.topic(topic).local(0).logStart() == 0 {
			if p := deleteRecordsRaw(t, s, 2, topic, 0, 6, 10000); p.ErrorCode != 0 || p.LowWatermark != 6 {
				t.Fatalf("DeleteRecords to 6: %v low watermark %d", kerr.ErrorForCode(p.ErrorCode), p.LowWatermark)
			}
		}
		p := listOffsetAt(t, s, tc.v, topic, tc.ts)
		if p.ErrorCode != tc.code || p.Offset != tc.offset || p.LeaderEpoch != tc.epoch || p.Timestamp != -1 {
			t.Errorf("v%d %d: %v offset %d epoch %d timestamp %d; want %v offset %d epoch %d timestamp -1",
				tc.v, tc.ts, kerr.ErrorForCode(p.ErrorCode), p.Offset, p.LeaderEpoch, p.Timestamp, kerr.ErrorForCode(tc.code), tc.offset, tc.epoch)
		}
	}
}

// TestListOffsetsTieredSpecsMinIO: on a partition tiered to MinIO,
// ListOffsets -5 (latest tiered, v9) is -1 until a segment is uploaded,
// then the last offset in the bucket (the manifest's last segment) with
// its epoch; -4 (earliest local, v8) is the local log's first offset,
// above the log start (-2, 0) once local retention deleted what was
// uploaded, and never above the highest tiered offset + 1 (nothing local
// is deleted before it is uploaded). The record at -5 is read back.
func TestListOffsetsTieredSpecsMinIO(t *testing.T) {
	mio := miniotest.Start(t)
	bucket := mio.NewBucket(t)
	t.Setenv("AWS_ACCESS_KEY_ID", miniotest.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", miniotest.SecretKey)
	props := maps.Clone(tieredProps)
	props["remote.storage.s3.endpoint"], props["remote.storage.s3.bucket"] = mio.Endpoint(), bucket
	s := startServer(t, props)
	cl := newClient(t, s)
	const topic, n = "tier-specs", 1500
	createTopic(t, cl, topic, 1, tieredTopicConfigs)

	// A few records in the active segment: nothing is uploaded yet.
	produceTiered(t, cl, topic, 0, 10)
	if p := listOffsetAt(t, s, 9, topic, -5); p.ErrorCode != 0 || p.Offset != -1 || p.LeaderEpoch != -1 {
		t.Fatalf("-5 before any upload: %v offset %d epoch %d, want offset -1 epoch -1", kerr.ErrorForCode(p.ErrorCode), p.Offset, p.LeaderEpoch)
	}
	if p := listOffsetAt(t, s, 8, topic, -4); p.ErrorCode != 0 || p.Offset != 0 {
		t.Fatalf("-4 before any upload: %v offset %d, want 0", kerr.ErrorForCode(p.ErrorCode), p.Offset)
	}

	produceTiered(t, cl, topic, 10, n)
	p := waitTiered(t, s, topic)
	// Uploads and local retention go on for a while after the last
	// produce: compare each answer with the partition's state read just
	// before and after it, until both reads agree.
	var local, tieredOff kmsg.ListOffsetsResponseTopicPartition
	var wantLocal, wantTiered int64
	start := time.Now()
	settled := poll.For(60*time.Second, func() bool {
		l0, h0 := p.log.LogStartOffset(), highestTiered(p)
		local, tieredOff = listOffsetAt(t, s, 8, topic, -4), listOffsetAt(t, s, 9, topic, -5)
		l1, h1 := p.log.LogStartOffset(), highestTiered(p)
		wantLocal, wantTiered = l1, h1
		return l0 == l1 && h0 == h1 && local.Offset == l1 && tieredOff.Offset == h1
	})
	if !settled {
		t.Fatalf("-4 %d (local log start %d), -5 %d (highest tiered %d): never agreed in 60s", local.Offset, wantLocal, tieredOff.Offset, wantTiered)
	}
	t.Logf("settled after %v: local log start %d, highest tiered offset %d, high watermark %d", time.Since(start), wantLocal, wantTiered, p.log.HighWatermark())
	if local.ErrorCode != 0 || tieredOff.ErrorCode != 0 || local.Timestamp != -1 || tieredOff.Timestamp != -1 {
		t.Fatalf("-4: %v timestamp %d; -5: %v timestamp %d", kerr.ErrorForCode(local.ErrorCode), local.Timestamp, kerr.ErrorForCode(tieredOff.ErrorCode), tieredOff.Timestamp)
	}
	if wantLocal <= 0 || wantTiered < 0 || wantLocal > wantTiered+1 || wantTiered >= p.log.HighWatermark() {
		t.Fatalf("local log start %d, highest tiered %d, high watermark %d: want 0 < local <= tiered+1, tiered < high watermark", wantLocal, wantTiered, p.log.HighWatermark())
	}
	if local.LeaderEpoch != 0 || tieredOff.LeaderEpoch != 0 {
		t.Fatalf("epochs: -4 %d, -5 %d, want 0 (one leader epoch)", local.LeaderEpoch, tieredOff.LeaderEpoch)
	}
	if e := listOffsetAt(t, s, 9, topic, -2); e.ErrorCode != 0 || e.Offset != 0 {
		t.Fatalf("-2 (earliest): %v offset %d, want 0 (the remote log start)", kerr.ErrorForCode(e.ErrorCode), e.Offset)
	}
	// -4 and -5 before their versions.
	if e := listOffsetAt(t, s, 7, topic, -4); e.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("-4 at v7: %v, want UNSUPPORTED_VERSION", kerr.ErrorForCode(e.ErrorCode))
	}
	if e := listOffsetAt(t, s, 8, topic, -5); e.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("-5 at v8: %v, want UNSUPPORTED_VERSION", kerr.ErrorForCode(e.ErrorCode))
	}
	// The record at the highest tiered offset is there, and is the one
	// produced at it.
	fp := fetchRaw(t, cl, topic, 0, wantTiered, 1<<20)
	if fp.ErrorCode != 0 || len(fp.RecordBatches) == 0 {
		t.Fatalf("fetch at %d: %v, %d bytes", wantTiered, kerr.ErrorForCode(fp.ErrorCode), len(fp.RecordBatches))
	}
	found := false
	if err := segment.SplitBatches(fp.RecordBatches, func(h segment.Header, b []byte) error {
		it, err := segment.NewRecordIter(b, segment.DefaultMaxDecompressed)
		if err != nil {
			return err
		}
		for {
			rec, ok, err := it.Next()
			if err != nil || !ok {
				return err
			}
			if rec.Offset == wantTiered {
				found = string(rec.Value) == string(tierRecord(int(wantTiered)).Value)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Fatalf("the record at the highest tiered offset %d was not read back as produced", wantTiered)
	}
}

// highestTiered is the last offset of the partition's last remote
// segment, -1 when there is none.
func highestTiered(p *partition) int64 {
	m := p.tier.manifest()
	if m == nil || len(m.Segments) == 0 {
		return -1
	}
	return m.Segments[len(m.Segments)-1].NextOffset - 1
}
