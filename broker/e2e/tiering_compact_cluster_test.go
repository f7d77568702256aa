package e2e

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratastream/strata/broker/e2e/history"
	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/tiering"
	"github.com/stratastream/strata/tiering/miniotest"
)

// A compacted tiered topic across leader changes: three real `strata
// broker` processes, real ZooKeeper, real MinIO, franz-go. Keys are
// produced in rounds (acks=all, min.insync.replicas=2), cleaned segments
// tier, the leader's remote cleaner compacts the bucket; then the leader
// is killed with SIGKILL, the new leader goes on tiering and compacting
// (its remote cleaner starting at the checkpoint the manifest holds), and
// a replay from offset 0 must show Kafka's compaction guarantee; the same
// records in a tiered topic that deletes pass the history checker.

// compactTierKills is how many leaders TestTieringCompactedClusterFailover
// kills: STRATA_CHAOS_COMPACT_TIER_KILLS for make chaos, else 1.
func compactTierKills(t *testing.T) int {
	t.Helper()
	if v := os.Getenv("STRATA_CHAOS_COMPACT_TIER_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("STRATA_CHAOS_COMPACT_TIER_KILLS=%q: want a positive count", v)
		}
		return n
	}
	return 1
}

// tccCleanedRE matches a remote cleaning's commit of partition 0 of
// tcTopic in a broker's log, with the offset its round began at.
var tccCleanedRE = regexp.MustCompile(`msg="tiering: remote cleaning committed"[^\n]*? topic=` + regexp.QuoteMeta(tcTopic) + ` partition=0[^\n]*? from=(\d+)`)

// tccFirstCleanFrom is where the first remote cleaning logged by b's
// current process began; ok is false if it logged none.
func tccFirstCleanFrom(b *Broker) (int64, bool) {
	outs := tcmRunOutputs(b)
	if len(outs) == 0 {
		return 0, false
	}
	m := tccCleanedRE.FindStringSubmatch(outs[len(outs)-1])
	if m == nil {
		return 0, false
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n, true
}

func TestTieringCompactedClusterFailover(t *testing.T) {
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
		"log.cleaner.backoff.ms=100",
		"strata.remote.poll.interval.ms=100",
		"strata.remote.manifest.refresh.interval.ms=500",
		"strata.remote.retry.max.ms=1000",
		"strata.remote.cleaner.interval.ms=200",
		"strata.remote.sweep.interval.ms=500",
		"strata.remote.sweep.grace.ms=4000",
		"auto.leader.rebalance.enable=false",
	)
	t.Logf("MinIO, ZooKeeper and 3 brokers up in %v", time.Since(testStart).Round(time.Millisecond))
	configs := func(policy string) map[string]string {
		return map[string]string{
			"cleanup.policy": policy, "remote.storage.enable": "true", "segment.bytes": "16384",
			"local.retention.bytes": "1", "file.delete.delay.ms": "0", "min.cleanable.dirty.ratio": "0.01",
			"min.insync.replicas": "2",
		}
	}
	md := c.tcmCreateTopic(t, tcTopic, 1, 3, configs("compact"))
	c.tcmCreateTopic(t, tcPlain, 1, 3, configs("delete"))
	topicID := coord.TopicID(md.Topics[tcTopic].ID).String()
	leader, epoch := md.Topics[tcTopic].Partitions[0].Leader, md.Topics[tcTopic].Partitions[0].LeaderEpoch
	cl := c.Client(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	p := &tcProducer{t: t, cl: cl, keys: 300, size: 120, acked: map[int64]tcAck{}, hist: history.New()}
	addr := func() string { return c.LiveAddrs()[0] }
	// cleanedWhole: a leader of epoch e or later committed the manifest,
	// its remote cleaner checkpoint is past ckpt and at the remote end,
	// and each key appears once in the remote log (read back with
	// franz-go).
	cleanedWhole := func(e int32, ckpt int64) (*tiering.Manifest, bool) {
		m := readManifestOf(t, mc, bucket, tcTopic, topicID, 0)
		if m == nil || m.LeaderEpoch < e || m.RemoteCleanerCheckpoint <= ckpt || m.RemoteCleanerCheckpoint < m.EndOffset() || len(m.Segments) < 2 {
			return m, false
		}
		return m, tcCheck(p.acked, tcReadCompacted(t, addr(), m.EndOffset()), m.EndOffset(), m.EndOffset()).dups == 0
	}

	// 1. Rounds of every key on the first leader, until the bucket holds
	// them remote-cleaned.
	for range 3 {
		p.produceRound(false)
	}
	p.produceRound(true)
	var m *tiering.Manifest
	began := time.Now()
	waitFor(t, 120*time.Second, fmt.Sprintf("broker %d tiering and remote-cleaning the topic", leader), func() bool {
		var ok bool
		m, ok = cleanedWhole(epoch, 0)
		segs := partitionSegments(t, c.Broker(leader), tcTopic, 0)
		return ok && len(segs) > 0 && segs[0] > 0
	})
	t.Logf("broker %d (epoch %d): remote log [%d, %d) in %d segments, remote cleaner checkpoint %d, after %v",
		leader, epoch, m.LogStartOffset, m.EndOffset(), len(m.Segments), m.RemoteCleanerCheckpoint, time.Since(began).Round(time.Millisecond))

	// 2. SIGKILL of the leader; the next one tiers and compacts what is
	// produced to it, its remote cleaner starting at the checkpoint the
	// killed leader committed.
	for k := range compactTierKills(t) {
		if k > 0 {
			// The broker killed last time is back in the ISR first.
			c.WaitMetadata(t, 60*time.Second, "a full ISR of "+tcTopic, func(md kadm.Metadata) string {
				if d := md.Topics[tcTopic].Partitions[0]; len(d.ISR) != 3 {
					return fmt.Sprintf("leader %d isr %v", d.Leader, d.ISR)
				}
				return ""
			})
		}
		before := readManifestOf(t, mc, bucket, tcTopic, topicID, 0)
		victim := leader
		c.Broker(victim).Kill(t)
		killedAt := time.Now()
		c.WaitMetadata(t, clusterSessionTimeout+60*time.Second, "a new leader of "+tcTopic, func(md kadm.Metadata) string {
			d := md.Topics[tcTopic].Partitions[0]
			if d.Leader < 0 || d.Leader == victim || d.LeaderEpoch <= epoch {
				return fmt.Sprintf("leader %d epoch %d isr %v", d.Leader, d.LeaderEpoch, d.ISR)
			}
			leader, epoch = d.Leader, d.LeaderEpoch
			return ""
		})
		t.Logf("kill %d: broker %d killed (manifest [%d, %d), remote cleaner checkpoint %d); broker %d leads at epoch %d %v later",
			k+1, victim, before.LogStartOffset, before.EndOffset(), before.RemoteCleanerCheckpoint, leader, epoch, time.Since(killedAt).Round(time.Millisecond))
		c.Broker(victim).Restart(t)

		p.produceRound(false)
		p.produceRound(true)
		waitFor(t, 120*time.Second, fmt.Sprintf("broker %d (epoch %d) tiering and remote-cleaning the new rounds", leader, epoch), func() bool {
			var ok bool
			m, ok = cleanedWhole(epoch, before.RemoteCleanerCheckpoint)
			return ok && tcmCountEpoch(m, epoch) > 0
		})
		from, ok := tccFirstCleanFrom(c.Broker(leader))
		t.Logf("kill %d: broker %d's first remote cleaning began at %d; remote log [%d, %d), checkpoint %d, %d segments of epoch %d, %v after the kill",
			k+1, leader, from, m.LogStartOffset, m.EndOffset(), m.RemoteCleanerCheckpoint, tcmCountEpoch(m, epoch), epoch, time.Since(killedAt).Round(time.Millisecond))
		if !ok || from < before.RemoteCleanerCheckpoint {
			t.Errorf("kill %d: the new leader's first remote cleaning began at %d (logged: %v), below the checkpoint %d the killed leader committed: it cleaned the remote log again from there",
				k+1, from, ok, before.RemoteCleanerCheckpoint)
		}
		if m.LogStartOffset != 0 {
			t.Errorf("kill %d: remote log starts at %d: compaction moved the log start", k+1, m.LogStartOffset)
		}
	}

	// 3. A replay from offset 0 of everything acknowledged.
	end := int64(len(p.acked))
	recs := tcReadCompacted(t, addr(), end)
	rep := tcCheck(p.acked, recs, end, m.EndOffset())
	t.Logf("replay from 0 of %d acknowledged records: %+v", end, rep)
	if rep.lost+rep.inconsistent+rep.reordered+rep.older+rep.dups != 0 || rep.read >= int(end) {
		t.Fatalf("compaction guarantee broken or nothing compacted: %+v", rep)
	}
	mv, have := stableView(t, mc, bucket, topicID)
	checkManifestComplete(t, mv, have)

	// The same records in a tiered topic that deletes: the history
	// checker holds every acknowledgement against it after the kills.
	final := map[history.TP][]history.Record{}
	for _, r := range tcReadTopic(t, addr(), tcPlain, end) {
		final[history.TP{Topic: tcPlain}] = append(final[history.TP{Topic: tcPlain}], history.Record{Offset: r.offset, Value: tcHistoryValue(r.key, r.value, r.round)})
	}
	hrep := p.hist.Check(final)
	t.Logf("history of %s: %v; test ran %v", tcPlain, hrep, time.Since(testStart).Round(time.Millisecond))
	if !hrep.OK() || hrep.Lost+hrep.Inconsistent+hrep.Duplicated != 0 {
		t.Fatalf("history of %s: %v\n%s", tcPlain, hrep, strings.Join(hrep.Problems, "\n"))
	}
}
