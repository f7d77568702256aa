package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/tiering"
	"github.com/stratastream/strata/tiering/miniotest"
)

// Scenario 7, adding a replica to a partition, in two runs of the same
// size on fresh servers (ZooKeeper, MinIO, two brokers):
//
//   - tiered: topic of one partition, RF 1, remote.storage.enable,
//     segment.bytes -catchup-segment-bytes, local.retention.bytes
//     -catchup-local-bytes; filled with -catchup-bucket-bytes plus
//     -catchup-local-bytes of 1 KiB records (loadgen, acks=1), then the
//     run waits until the manifest covers every sealed segment and local
//     retention trimmed the leader to its tail;
//   - full copy: the same with remote.storage.enable=false, the whole log
//     local (what Kafka does without KIP-1023).
//
// In each, AlterPartitionReassignments sets the replicas to [leader, other]
// and the suite polls every catchupPoll: the new replica's partition
// directory and its .log bytes, Metadata's ISR and
// ListPartitionReassignments, which give the phases of the join (metadata
// to the new broker, first bytes, copy, ISR expansion, reassignment done).
// Bytes copied are the new broker's .log bytes when it joined the ISR and
// its strata_replication_throttled_bytes_total{direction="follower"}
// (the partition is in follower.replication.throttled.replicas with the
// rate left unlimited, so that the counter counts it and nothing holds it
// back). Nothing is produced during the join, so the leader's log is the
// same from the request to the end.

const (
	catchupTopic  = "catchup"
	catchupBucket = "strata-catchup"
	catchupRecord = 1024
	// catchupPoll is how often the join is sampled.
	catchupPoll = 100 * time.Millisecond
	// catchupSpare is the disk space left to the rest of the machine.
	catchupSpare = 15 << 30
	// catchupCounter is the new broker's replication byte counter.
	catchupCounter = `strata_replication_throttled_bytes_total{direction="follower"}`
)

// catchupRun is one add-replica measurement.
type catchupRun struct {
	Label  string `json:"label"`
	Tiered bool   `json:"tiered"`
	// SegmentBytes and LocalRetentionBytes are the topic's segment.bytes
	// and (tiered) local.retention.bytes.
	SegmentBytes        int64 `json:"segment_bytes"`
	LocalRetentionBytes int64 `json:"local_retention_bytes,omitempty"`
	// Produce is the fill (loadgen).
	Produce *lgSide `json:"produce"`
	// TierWaitS is how long the fill took to be uploaded and trimmed.
	TierWaitS float64 `json:"tier_wait_s,omitempty"`
	// BucketBytes is the manifest's segment bytes at the request.
	BucketBytes int64 `json:"bucket_bytes"`
	// LeaderLocalBytes is the leader's .log bytes at the request: its local
	// tail (tiered) or the whole log (full copy).
	LeaderLocalBytes int64 `json:"leader_local_bytes"`
	LeaderLogStart   int64 `json:"leader_local_log_start"`
	LogEnd           int64 `json:"log_end_offset"`
	Leader           int32 `json:"leader"`
	NewReplica       int32 `json:"new_replica"`
	// Joins are the add-replica measurements, one per -catchup-repeat:
	// after each the replica is removed again (reassignment back to the
	// leader alone) and its files deleted before the next.
	Joins []*catchupJoin `json:"joins"`
}

// catchupJoin is one add-replica measurement.
type catchupJoin struct {
	// CopiedDirBytes is the new replica's .log bytes when it joined the
	// ISR; CopiedCounterBytes its replication byte counter's growth
	// from the request to the end of the join (-1: not read).
	CopiedDirBytes     int64 `json:"copied_dir_bytes"`
	CopiedCounterBytes int64 `json:"copied_counter_bytes"`
	// NewLogStart is the base offset of the new replica's lowest segment.
	NewLogStart int64 `json:"new_replica_log_start"`
	// OutOfRange counts the new broker's log lines naming
	// OFFSET_OUT_OF_RANGE during the join (the leader's refusal of a
	// START below its local log start).
	OutOfRange int `json:"offset_out_of_range_refusals"`
	// Phases, seconds from the request (0: not seen).
	Phases catchupPhases `json:"phases"`
	// CopyMBPerS is CopiedDirBytes over the copy phase (first bytes to
	// all bytes).
	CopyMBPerS float64 `json:"copy_mb_per_s"`
	// Samples are the polls: seconds from the request, new replica's .log
	// bytes, 1 once the ISR lists it.
	Samples [][3]float64 `json:"samples,omitempty"`
}

// copied is the figure of bytes copied: the larger of the two counts
// (the counter, when read, includes what was fetched and truncated).
func (j *catchupJoin) copied() int64 { return max(j.CopiedDirBytes, j.CopiedCounterBytes) }

// medianJoin is the join with the median time to the ISR (of an even
// number, the slower of the middle two); nil if none joined.
func medianJoin(joins []*catchupJoin) *catchupJoin {
	var ok []*catchupJoin
	for _, j := range joins {
		if j.Phases.ISR > 0 {
			ok = append(ok, j)
		}
	}
	if len(ok) == 0 {
		return nil
	}
	slices.SortStableFunc(ok, func(a, b *catchupJoin) int { return cmp.Compare(a.Phases.ISR, b.Phases.ISR) })
	return ok[len(ok)/2]
}

// catchupPhases are the moments of the join, in seconds after the
// AlterPartitionReassignments request was sent.
type catchupPhases struct {
	Answered float64 `json:"answered_s"`    // the request's answer
	Replica  float64 `json:"replica_s"`     // the partition directory exists on the new broker
	First    float64 `json:"first_bytes_s"` // its first .log bytes
	Copied   float64 `json:"copied_s"`      // its .log bytes reach the leader's
	ISR      float64 `json:"isr_s"`         // every broker's Metadata lists it in the ISR
	ISRFirst float64 `json:"isr_first_s"`   // the first broker's Metadata does
	Done     float64 `json:"done_s"`        // ListPartitionReassignments lists the partition no more
}

// durations splits the join into its phases: metadata to the new broker
// (request to replica), the start of replication (replica to first
// bytes: START, the leader's OFFSET_OUT_OF_RANGE and the restart at its
// local log start), the copy (first bytes to all bytes), and the ISR
// expansion (all bytes to the ISR in the metadata). A phase whose end was
// not seen is -1.
func (p catchupPhases) durations() (metadata, start, copying, isr float64) {
	d := func(from, to float64) float64 {
		if to <= 0 || to < from {
			return -1
		}
		return to - from
	}
	return d(0, p.Replica), d(p.Replica, p.First), d(p.First, p.Copied), d(p.Copied, p.ISR)
}

// catchupSizes are the sizes of both runs.
type catchupSizes struct {
	bucket, local, segment int64
}

// fitCatchup scales sizes down to what fits free bytes of disk: the full
// copy holds the log twice (leader and new replica), the tiered run the
// bucket and, while the archiver catches up, up to the whole log locally;
// catchupSpare stays free. ok is false if they had to shrink.
func fitCatchup(sz catchupSizes, free int64) (catchupSizes, bool) {
	need := float64(2*(sz.bucket+sz.local)) * 1.1
	room := float64(free - catchupSpare)
	if room >= need {
		return sz, true
	}
	scale := max(room, 0) / need
	out := sz
	out.bucket = int64(float64(sz.bucket) * scale)
	out.local = max(int64(float64(sz.local)*scale), sz.segment)
	return out, false
}

// s7: adding a replica to a partition mostly in the bucket, against a
// full copy.
func (r *runner) s7(ctx context.Context, s *scenario) error {
	sz := catchupSizes{r.o.catchupBucket, r.o.catchupLocal, r.o.catchupSegment}
	if sz.segment < 1<<20 || sz.local < sz.segment || sz.bucket < sz.local {
		return fmt.Errorf("want -catchup-segment-bytes >= 1 MiB, -catchup-local-bytes >= it and -catchup-bucket-bytes >= that (got %d, %d, %d)", sz.segment, sz.local, sz.bucket)
	}
	dir := filepath.Join(r.tmp, "s7")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	free := freeBytes(dir)
	fit, ok := fitCatchup(sz, free)
	if !ok {
		if fit.bucket < fit.local {
			return fmt.Errorf("%.1f GiB free on the disk: no room for even %d MiB in the bucket", float64(free)/(1<<30), fit.local>>20)
		}
		s.note(fmt.Sprintf("SMALLER THAN ASKED: sizes scaled down from %.2f GiB in the bucket and %d MiB local to %.2f GiB and %d MiB to fit the %.1f GiB free on the disk (the full copy holds the log twice; %d GiB left free).",
			float64(sz.bucket)/(1<<30), sz.local>>20, float64(fit.bucket)/(1<<30), fit.local>>20, float64(free)/(1<<30), catchupSpare>>30))
		sz = fit
	}

	// The physical limits of a copy, measured first on a quiet machine.
	var loop lbResult
	logf("  loopback TCP limit, %d bytes", r.o.loopback)
	if err := runJSON(ctx, 2*time.Minute, &loop, r.bins["loopback"], "-json", "-bytes", strconv.FormatInt(r.o.loopback, 10)); err != nil {
		s.fail("loopback", err)
	} else {
		logf("    %.0f MB/s", loop.MBPerS)
		s.raw("s7-loopback", loop)
	}
	rawBytes := min(sz.bucket+sz.local, 2<<30)
	rw, err := rawDiskWrite(dir, rawBytes)
	if err != nil {
		s.fail("raw disk write", err)
	} else {
		logf("  raw sequential write of %d MB: %.0f MB/s with fdatasync, %.0f MB/s page cache only", rawBytes/1e6, rw.SyncMBPerS, rw.CacheMBPerS)
		s.raw("s7-raw-write", rw)
	}

	var runs []*catchupRun
	for _, tiered := range []bool{true, false} {
		name := "tiered"
		if !tiered {
			name = "full"
		}
		run, err := r.catchup(ctx, s, filepath.Join(dir, name), tiered, sz, r.o.catchupRepeat)
		killAll() // whatever the run left
		// The next run needs the room.
		if rerr := os.RemoveAll(filepath.Join(dir, name)); rerr != nil {
			logf("  removing %s: %v", name, rerr)
		}
		syncAll()
		if run != nil {
			runs = append(runs, run)
			s.raw("s7-"+name, run)
		}
		if err != nil {
			return fmt.Errorf("%s run: %w", name, err)
		}
	}
	catchupFigures(s, runs[0], runs[1], loop.MBPerS, rw)
	return nil
}

// catchupFigures sets scenario 7's figures, rows and notes from the two
// runs and the limits (loopback MB/s, raw disk write; zero or nil when
// not measured). Times are of each run's median join, bytes copied the
// most of any join that reached the ISR.
func catchupFigures(s *scenario, tiered, full *catchupRun, loopMBPerS float64, rw *rawWrite) {
	tj, fj := medianJoin(tiered.Joins), medianJoin(full.Joins)
	var tCopied, fCopied, tISR, fISR, fRate float64
	if tj != nil {
		tISR = tj.Phases.ISR
		for _, j := range tiered.Joins {
			if j.Phases.ISR > 0 {
				tCopied = max(tCopied, float64(j.copied())/1e6)
			}
		}
	}
	if fj != nil {
		fCopied, fISR, fRate = float64(fj.copied())/1e6, fj.Phases.ISR, fj.CopyMBPerS
	}
	f := s.figure("add a replica, tiered: bytes copied ÷ the leader's local tail", "MB", &goal{"<=", 1.1, onRatio})
	f.setIf(tCopied)
	f.ref(fmt.Sprintf("the leader's local .log bytes at the request (%.2f GB in the bucket)", float64(tiered.BucketBytes)/1e9), float64(tiered.LeaderLocalBytes)/1e6)
	f = s.figure("add a replica, time to join the ISR, tiered ÷ full copy", "s", &goal{"<=", 0.1, onRatio})
	f.setIf(tISR)
	f.ref(fmt.Sprintf("the same join with tiering off: a full copy of %.2f GB", float64(full.LeaderLocalBytes)/1e9), fISR)
	f = s.figure("add a replica, bytes copied, tiered ÷ full copy", "MB", nil)
	f.setIf(tCopied)
	f.ref("the full copy's bytes copied", fCopied)
	bound, boundName := loopMBPerS, "loopback TCP, one Go sender and receiver, 1 MiB writes"
	if rw != nil && rw.SyncMBPerS > 0 && (bound <= 0 || rw.SyncMBPerS < bound) {
		bound, boundName = rw.SyncMBPerS, fmt.Sprintf("write() 1 MiB + fdatasync, %d MB (below loopback TCP's %.0f MB/s)", rw.Bytes/1e6, loopMBPerS)
	} else if rw != nil && rw.SyncMBPerS > 0 {
		boundName += fmt.Sprintf(" (below the raw disk write's %.0f MB/s)", rw.SyncMBPerS)
	}
	f = s.figure("add a replica, full copy rate ÷ the lower of loopback TCP and raw disk write", "MB/s", nil)
	f.setIf(fRate)
	f.ref(boundName, bound)

	bars := barGroup{Title: "S7 add a replica: seconds to the ISR", Unit: "s"}
	bars.add("tiered", tISR, false)
	bars.add("full copy", fISR, true)
	s.Bars = append(s.Bars, bars)

	s.RowHeader = []string{"join", "bucket MB", "leader local MB", "copied MB (.log files)", "copied MB (counter)", "new replica starts at", "metadata s", "start s", "copy s", "ISR expansion s", "to ISR s", "reassignment done s", "copy MB/s"}
	for _, run := range []*catchupRun{tiered, full} {
		for i, j := range run.Joins {
			md, st, cp, isr := j.Phases.durations()
			counter := "—"
			if j.CopiedCounterBytes >= 0 {
				counter = fmt.Sprintf("%.1f", float64(j.CopiedCounterBytes)/1e6)
			}
			name := fmt.Sprintf("%s #%d", run.Label, i+1)
			if j == medianJoin(run.Joins) {
				name += " (median)"
			}
			s.Rows = append(s.Rows, []string{name, fmt.Sprintf("%.1f", float64(run.BucketBytes)/1e6), fmt.Sprintf("%.1f", float64(run.LeaderLocalBytes)/1e6),
				fmt.Sprintf("%.1f", float64(j.CopiedDirBytes)/1e6), counter,
				fmt.Sprintf("offset %d of %d (leader's local start %d; %d OFFSET_OUT_OF_RANGE)", j.NewLogStart, run.LogEnd, run.LeaderLogStart, j.OutOfRange),
				secs(md), secs(st), secs(cp), secs(isr), secs(j.Phases.ISR), secs(j.Phases.Done), fmt.Sprintf("%.0f", j.CopyMBPerS)})
		}
	}
	s.note(fmt.Sprintf("Two runs of the same size, each on fresh servers: ZooKeeper, MinIO and two brokers; one partition, RF 1, segment.bytes %d MiB, filled with %d records of 1 KiB by loadgen (acks=1, no compression). Tiered: remote.storage.enable=true, local.retention.bytes %d MiB; the run waits until the manifest covers every sealed segment and the leader is trimmed to its tail. Full copy: remote.storage.enable=false, everything local. Then AlterPartitionReassignments to [leader, other], nothing produced meanwhile, sampled every %v; %d joins per run (after each the replica is reassigned away and its files deleted); the time figures are of the median join by time to the ISR, the tiered bytes copied of the join that copied most.",
		tiered.SegmentBytes>>20, tiered.records(), tiered.LocalRetentionBytes>>20, catchupPoll, len(tiered.Joins)))
	s.note("Phases of a join, in seconds: metadata = request to the partition directory on the new broker (controller, ZooKeeper, the broker's metadata, the replica created); start = to its first .log bytes (the fetcher's START from offset 0, the leader's OFFSET_OUT_OF_RANGE, the restart at the leader's local log start); copy = to .log bytes equal to the leader's; ISR expansion = to Metadata's ISR listing the new broker (the follower's report, the leader's ZooKeeper write, the metadata reaching the broker asked). Bytes copied: the new broker's .log bytes when it joined the ISR, and its strata_replication_throttled_bytes_total{direction=\"follower\"} over the join (the partition is in follower.replication.throttled.replicas, the rate unlimited); the figure is the larger. Full copy rate: .log bytes over the copy phase.")
}

// records is the number of records the run produced.
func (c *catchupRun) records() int64 {
	if c.Produce == nil {
		return 0
	}
	return c.Produce.Records
}

func secs(v float64) string {
	if v < 0 {
		return "not seen"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// catchup is one run: servers in dir, the fill, the joins.
func (r *runner) catchup(ctx context.Context, s *scenario, dir string, tiered bool, sz catchupSizes, repeat int) (*catchupRun, error) {
	run := &catchupRun{Label: "tiered", Tiered: tiered, SegmentBytes: sz.segment, LocalRetentionBytes: sz.local}
	name := "tiered"
	if !tiered {
		run.Label, run.LocalRetentionBytes, name = "full copy", 0, "full"
	}
	logf("  %s run: %.2f GiB for the bucket, %d MiB local", run.Label, float64(sz.bucket)/(1<<30), sz.local>>20)
	zk, zkAddr, err := startZooKeeper(filepath.Join(dir, "zk"))
	if err != nil {
		return nil, err
	}
	defer zk.stop()
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
	if err := mc.MakeBucket(ctx, catchupBucket, minio.MakeBucketOptions{}); err != nil {
		return nil, fmt.Errorf("make bucket: %w", err)
	}
	brokers := map[int32]*broker{}
	metrics := map[int32]string{}
	defer func() {
		// The brokers' logs of the run, for the profile of the joins.
		logDir := filepath.Join(r.out, "catchup")
		if err := os.MkdirAll(logDir, 0o755); err != nil {
			logf("  %v", err)
		}
		for id, b := range brokers {
			b.stop()
			p := filepath.Join(logDir, fmt.Sprintf("%s-broker-%d.log", name, id))
			if err := os.WriteFile(p, []byte(b.Tail(256<<10)), 0o644); err != nil {
				logf("  %v", err)
			}
		}
	}()
	var addrs []string
	for id := int32(1); id <= 2; id++ {
		m, err := freeAddr()
		if err != nil {
			return nil, err
		}
		b, err := startBroker(r.bins["strata"], fmt.Sprintf("broker-%d", id), filepath.Join(dir, fmt.Sprintf("broker-%d", id)), minioEnv(),
			fmt.Sprintf("broker.id=%d", id), "zookeeper.connect="+zkAddr+"/strata-bench", "zookeeper.session.timeout.ms=18000",
			"offsets.topic.replication.factor=1", "metrics.listener="+m,
			"remote.storage.s3.endpoint=http://"+maddr, "remote.storage.s3.bucket="+catchupBucket,
			"remote.cache.dir="+filepath.Join(dir, fmt.Sprintf("cache-%d", id)),
			"log.retention.check.interval.ms=1000", "log.segment.delete.delay.ms=1000", "strata.remote.poll.interval.ms=500")
		if err != nil {
			return nil, err
		}
		brokers[id], metrics[id] = b, m
		addrs = append(addrs, b.addr)
	}
	seeds := strings.Join(addrs, ",")
	if err := waitBrokers(ctx, seeds, 2, 60*time.Second); err != nil {
		return nil, err
	}

	total := sz.bucket + sz.local
	cfg := []string{"-topic-config", "segment.bytes=" + strconv.FormatInt(sz.segment, 10)}
	if tiered {
		cfg = append(cfg, "-topic-config", "remote.storage.enable=true", "-topic-config", "local.retention.bytes="+strconv.FormatInt(sz.local, 10))
	} else {
		cfg = append(cfg, "-topic-config", "remote.storage.enable=false")
	}
	res, err := r.loadgen(ctx, s, "s7-fill-"+name, seeds, append([]string{"-topic", catchupTopic, "-create", "-replication-factor", "1", "-partitions", "1",
		"-size", strconv.Itoa(catchupRecord), "-records", strconv.FormatInt(total/catchupRecord, 10), "-acks", "1", "-compression", "none"}, cfg...)...)
	if err != nil {
		return nil, fmt.Errorf("fill: %w", err)
	}
	run.Produce = res.Produce

	// kadm's Metadata answers from the client's cache (up to
	// MetadataMinAge, 5 s, old); the joins ask each broker directly
	// (partitionView).
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return nil, err
	}
	adm := kadm.NewClient(cl)
	defer adm.Close()
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	md, err := adm.Metadata(mctx, catchupTopic)
	cancel()
	if err != nil {
		return nil, err
	}
	pm, ok := md.Topics[catchupTopic].Partitions[0]
	if !ok || len(pm.Replicas) != 1 {
		return nil, fmt.Errorf("partition 0 of %s: want one replica, metadata says %+v", catchupTopic, pm)
	}
	run.Leader = pm.Leader
	run.NewReplica = 3 - pm.Leader
	leader, newb := brokers[run.Leader], brokers[run.NewReplica]
	if leader == nil || newb == nil {
		return nil, fmt.Errorf("leader %d is not one of brokers 1 and 2", pm.Leader)
	}
	topicID := coord.TopicID(md.Topics[catchupTopic].ID).String()
	ends, err := listOffsets(ctx, adm, catchupTopic, true)
	if err != nil {
		return nil, err
	}
	run.LogEnd = ends[0]
	if run.LogEnd != res.Produce.Records {
		return nil, fmt.Errorf("log end offset %d, produced %d records", run.LogEnd, res.Produce.Records)
	}

	if tiered {
		logf("  waiting until the bucket holds every sealed segment and the leader keeps only its tail")
		t0 := time.Now()
		if err := waitCatchupTiered(ctx, s, mc, topicID, leader.dir, sz); err != nil {
			return run, err
		}
		run.TierWaitS = time.Since(t0).Seconds()
	}
	if m, err := readManifest(ctx, mc, topicID); err == nil && m != nil {
		run.BucketBytes = m.Bytes()
	} else if tiered {
		return run, fmt.Errorf("manifest: %v", err)
	}
	run.LeaderLocalBytes = localLogs(leader.dir, catchupTopic).bytes
	run.LeaderLogStart = lowestSegment(filepath.Join(leader.dir, segment.PartitionDirName(catchupTopic, 0)))
	logf("  leader %d: %.1f MB local from offset %d, log end %d; %.1f MB in the bucket", run.Leader, float64(run.LeaderLocalBytes)/1e6, run.LeaderLogStart, run.LogEnd, float64(run.BucketBytes)/1e6)

	// Count the new replica's bytes (the rate stays unlimited).
	if err := setTopicConfig(ctx, adm, catchupTopic, map[string]string{"follower.replication.throttled.replicas": fmt.Sprintf("0:%d", run.NewReplica)}); err != nil {
		return run, fmt.Errorf("set follower.replication.throttled.replicas: %w", err)
	}
	var longest time.Duration // of the joins so far, with the removal before it
	for k := range max(1, repeat) {
		if k > 0 {
			if left := time.Until(s.deadline); left < 2*longest+30*time.Second {
				s.note(fmt.Sprintf("%s: %d joins of the %d asked; the scenario's time bound had %v left, the longest join took %v.", run.Label, k, repeat, left.Round(time.Second), longest.Round(time.Second)))
				break
			}
		}
		t0 := time.Now()
		if k > 0 {
			if err := r.unjoin(ctx, s, run, cl, adm, newb.dir); err != nil {
				return run, err
			}
		}
		syncAll() // earlier writeback out of the way of the copy
		j, err := r.join(ctx, s, run, cl, adm, newb, metrics[run.NewReplica])
		if j != nil {
			run.Joins = append(run.Joins, j)
		}
		if err != nil {
			return run, err
		}
		longest = max(longest, time.Since(t0))
		md, st, cp, isr := j.Phases.durations()
		logf("  %s #%d: to ISR %.2f s (first broker %.2f s; metadata %s, start %s, copy %s, ISR expansion %s), reassignment done %.2f s; copied %.1f MB (.log files), counter %.1f MB, %.0f MB/s; new replica starts at %d (leader's local start %d), %d OFFSET_OUT_OF_RANGE",
			run.Label, k+1, j.Phases.ISR, j.Phases.ISRFirst, secs(md), secs(st), secs(cp), secs(isr), j.Phases.Done, float64(j.CopiedDirBytes)/1e6, float64(j.CopiedCounterBytes)/1e6, j.CopyMBPerS, j.NewLogStart, run.LeaderLogStart, j.OutOfRange)
	}
	if now := localLogs(leader.dir, catchupTopic).bytes; now != run.LeaderLocalBytes {
		s.note(fmt.Sprintf("%s: the leader's local .log bytes changed during the joins, from %d to %d.", run.Label, run.LeaderLocalBytes, now))
	}
	for id, b := range brokers {
		if !b.Alive() {
			return run, fmt.Errorf("broker %d exited during the run: %s", id, b.Tail(1500))
		}
	}
	return run, nil
}

// unjoin reassigns the partition back to the leader alone and waits
// (bounded) until the reassignment is done and the other broker's
// partition directory is gone.
func (r *runner) unjoin(ctx context.Context, s *scenario, run *catchupRun, cl *kgo.Client, adm *kadm.Client, newDir string) error {
	partDir := filepath.Join(newDir, segment.PartitionDirName(catchupTopic, 0))
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(catchupTopic, 0, []int32{run.Leader})
	if err := alterAssignments(ctx, adm, req); err != nil {
		return fmt.Errorf("removing the replica again: %w", err)
	}
	deadline := time.Now().Add(min(2*time.Minute, time.Until(s.deadline)))
	for {
		_, serr := os.Stat(partDir)
		gone := errors.Is(serr, os.ErrNotExist) && localLogs(newDir, catchupTopic).bytes == 0
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ls, err := adm.ListPartitionReassignments(lctx, kadm.TopicsSet{catchupTopic: {0: {}}})
		cancel()
		var state []string
		var merr error
		alone := true
		for _, id := range []int32{run.Leader, run.NewReplica} {
			replicas, isr, err := partitionView(ctx, cl, id)
			merr = errors.Join(merr, err)
			state = append(state, fmt.Sprintf("broker %d: replicas %v ISR %v", id, replicas, isr))
			alone = alone && err == nil && slices.Equal(replicas, []int32{run.Leader}) && slices.Equal(isr, []int32{run.Leader})
		}
		if gone && err == nil && len(ls[catchupTopic]) == 0 && alone {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica on broker %d not removed in time (directory gone: %v, reassignments listed: %v, %v; metadata: %s %v)", run.NewReplica, gone, ls, err, strings.Join(state, "; "), merr)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// alterAssignments sends one AlterPartitionReassignments request.
func alterAssignments(ctx context.Context, adm *kadm.Client, req kadm.AlterPartitionAssignmentsReq) error {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resps, err := adm.AlterPartitionAssignments(rctx, req)
	if err == nil {
		resps.Each(func(a kadm.AlterPartitionAssignmentsResponse) {
			if a.Err != nil && err == nil {
				err = fmt.Errorf("%s-%d: %w (%s)", a.Topic, a.Partition, a.Err, a.ErrMessage)
			}
		})
	}
	return err
}

// join sends the reassignment to [leader, new] and samples the join
// until the reassignment is done (bounded by the scenario's deadline).
func (r *runner) join(ctx context.Context, s *scenario, run *catchupRun, cl *kgo.Client, adm *kadm.Client, newb *broker, metricsAddr string) (*catchupJoin, error) {
	j := &catchupJoin{CopiedCounterBytes: -1}
	partDir := filepath.Join(newb.dir, segment.PartitionDirName(catchupTopic, 0))
	counter0, cerr := scrapeCounter(metricsAddr, catchupCounter)
	if cerr != nil {
		s.fail("replication byte counter", cerr)
	}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(catchupTopic, 0, []int32{run.Leader, run.NewReplica})
	logf("  AlterPartitionReassignments %s-0 to [%d %d]", catchupTopic, run.Leader, run.NewReplica)
	t0 := time.Now()
	since := func() float64 { return max(time.Since(t0).Seconds(), 1e-6) }
	err := alterAssignments(ctx, adm, req)
	j.Phases.Answered = since()
	if err != nil {
		return j, fmt.Errorf("AlterPartitionReassignments: %w", err)
	}
	deadline := s.deadline.Add(-10 * time.Second)
	tick := time.NewTicker(catchupPoll)
	defer tick.Stop()
	for {
		if _, err := os.Stat(partDir); err == nil && j.Phases.Replica == 0 {
			j.Phases.Replica = since()
		}
		bytes := localLogs(newb.dir, catchupTopic).bytes
		if bytes > 0 && j.Phases.First == 0 {
			j.Phases.First = since()
		}
		if bytes >= run.LeaderLocalBytes && j.Phases.Copied == 0 {
			j.Phases.Copied = since()
		}
		if j.Phases.ISR == 0 {
			all := true
			for _, id := range []int32{run.Leader, run.NewReplica} {
				_, isr, err := partitionView(ctx, cl, id)
				in := err == nil && slices.Contains(isr, run.NewReplica)
				all = all && in
				if in && j.Phases.ISRFirst == 0 {
					j.Phases.ISRFirst = since()
				}
			}
			if all {
				j.Phases.ISR = since()
				j.CopiedDirBytes = localLogs(newb.dir, catchupTopic).bytes
			}
		}
		if j.Phases.ISR > 0 && j.Phases.Done == 0 {
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			ls, err := adm.ListPartitionReassignments(lctx, kadm.TopicsSet{catchupTopic: {0: {}}})
			cancel()
			if err == nil && len(ls[catchupTopic]) == 0 {
				j.Phases.Done = since()
			}
		}
		t := since()
		if len(j.Samples) < 20000 {
			isr := 0.0
			if j.Phases.ISR > 0 {
				isr = 1
			}
			j.Samples = append(j.Samples, [3]float64{t, float64(bytes), isr})
		}
		if j.Phases.Done > 0 {
			break
		}
		if time.Now().After(deadline) {
			return j, fmt.Errorf("broker %d not in the ISR with the reassignment done %.0f s after the request (ISR at %s s, %d of the leader's %d bytes copied)",
				run.NewReplica, t, secs(j.Phases.ISR), bytes, run.LeaderLocalBytes)
		}
		select {
		case <-ctx.Done():
			return j, ctx.Err()
		case <-tick.C:
		}
	}
	if j.Phases.Copied == 0 {
		// The ISR listed it before a poll saw all bytes (or its files
		// hold fewer: the bytes copied show it).
		j.Phases.Copied = j.Phases.ISR
	}
	if cp := j.Phases.Copied - j.Phases.First; cp > 0 && j.Phases.First > 0 {
		j.CopyMBPerS = float64(j.CopiedDirBytes) / cp / 1e6
	}
	if cerr == nil {
		if c, err := scrapeCounter(metricsAddr, catchupCounter); err != nil {
			s.fail("replication byte counter", err)
		} else {
			// Nothing is produced, so the growth is the join's bytes.
			j.CopiedCounterBytes = int64(c - counter0)
		}
	}
	j.NewLogStart = lowestSegment(partDir)
	j.OutOfRange = countLogLines(newb.Tail(1<<20), "OFFSET_OUT_OF_RANGE", t0)
	return j, nil
}

// waitCatchupTiered waits until the manifest ends at the leader's active
// segment (every sealed segment uploaded) and local retention has trimmed
// the leader to at most local.retention.bytes plus one segment.
func waitCatchupTiered(ctx context.Context, s *scenario, mc *minio.Client, topicID, leaderDir string, sz catchupSizes) error {
	partDir := filepath.Join(leaderDir, segment.PartitionDirName(catchupTopic, 0))
	deadline := s.deadline.Add(-time.Duration(float64(time.Until(s.deadline)) * 0.6))
	var last string
	for {
		active := highestSegment(partDir)
		local := localLogs(leaderDir, catchupTopic).bytes
		m, err := readManifest(ctx, mc, topicID)
		if err != nil {
			return err
		}
		var why string
		switch {
		case m == nil:
			why = "no manifest yet"
		case m.EndOffset() < active:
			why = fmt.Sprintf("remote ends at %d, the active segment starts at %d (%.1f MB remote)", m.EndOffset(), active, float64(m.Bytes())/1e6)
		case local > sz.local+sz.segment:
			why = fmt.Sprintf("leader holds %.1f MB locally", float64(local)/1e6)
		default:
			return nil
		}
		if why != last {
			logf("    %s", why)
			last = why
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not tiered in time: %s", why)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// readManifest reads partition 0's manifest (nil if there is none yet).
func readManifest(ctx context.Context, mc *minio.Client, topicID string) (*tiering.Manifest, error) {
	obj, err := mc.GetObject(ctx, catchupBucket, tiering.ManifestKey(catchupTopic, topicID, 0), minio.GetObjectOptions{})
	var b []byte
	if err == nil {
		b, err = io.ReadAll(obj)
		obj.Close()
	}
	if err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			return nil, nil
		}
		return nil, fmt.Errorf("manifest: %w", err)
	}
	return tiering.DecodeManifest(b)
}

// lowestSegment and highestSegment are the base offsets of the lowest
// and highest .log file in a partition directory (-1: none).
func lowestSegment(dir string) int64 {
	lo, _ := segmentRange(dir)
	return lo
}

func highestSegment(dir string) int64 {
	_, hi := segmentRange(dir)
	return hi
}

func segmentRange(dir string) (lo, hi int64) {
	lo, hi = -1, -1
	files, _ := os.ReadDir(dir) // a missing directory holds no segments
	for _, f := range files {
		base, suffix, err := segment.ParseSegmentFileName(f.Name())
		if err != nil || suffix != segment.LogSuffix {
			continue
		}
		if lo < 0 || base < lo {
			lo = base
		}
		hi = max(hi, base)
	}
	return lo, hi
}

// scrapeCounter reads one series from a broker's metrics listener.
func scrapeCounter(addr, series string) (float64, error) {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s/metrics: %s", addr, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	v, ok := metricSample(string(b), series)
	if !ok {
		return 0, errors.New(series + " not in " + addr + "/metrics")
	}
	return v, nil
}

// metricSample is the value of series (name and labels exactly as
// exposed, e.g. `x_total{a="b"}`) in a Prometheus text exposition.
func metricSample(text, series string) (float64, bool) {
	for _, l := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(l, series+" ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, false
		}
		v, err := strconv.ParseFloat(f[0], 64)
		return v, err == nil
	}
	return 0, false
}

// countLogLines counts the lines of a broker's log output (slog text,
// each line opening with time=<RFC 3339>) that contain substr and are
// stamped at or after since.
func countLogLines(out, substr string, since time.Time) int {
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, substr) {
			continue
		}
		stamp, _, _ := strings.Cut(strings.TrimPrefix(l, "time="), " ")
		if t, err := time.Parse(time.RFC3339Nano, stamp); err == nil && !t.Before(since.Truncate(time.Millisecond)) {
			n++
		}
	}
	return n
}

// partitionView asks broker id itself, past the client's metadata cache,
// for the replicas and ISR of the catch-up topic's partition 0.
func partitionView(ctx context.Context, cl *kgo.Client, id int32) (replicas, isr []int32, err error) {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(catchupTopic)
	req.Topics = append(req.Topics, t)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl.Broker(int(id)))
	if err != nil {
		return nil, nil, err
	}
	for _, rt := range resp.Topics {
		if rt.Topic == nil || *rt.Topic != catchupTopic {
			continue
		}
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			return nil, nil, err
		}
		for _, p := range rt.Partitions {
			if p.Partition == 0 {
				if p.ErrorCode == kerr.ReplicaNotAvailable.Code { // the lists are still given
					return p.Replicas, p.ISR, nil
				}
				return p.Replicas, p.ISR, kerr.ErrorForCode(p.ErrorCode)
			}
		}
	}
	return nil, nil, fmt.Errorf("broker %d: no partition 0 of %s in its metadata", id, catchupTopic)
}
