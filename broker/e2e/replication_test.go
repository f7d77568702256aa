package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// These tests check replication (broker/replica*.go) end to end, against
// a real ZooKeeper and three real `strata broker` processes: no
// acknowledged record is lost when brokers are killed with SIGKILL and come
// back (with min.insync.replicas 1 and 2, with franz-go's and librdkafka's
// idempotent producers), a paused follower leaves the ISR and comes back,
// and a leader that took records its followers never got truncates them
// when it returns. Each prints parseable figures:
//
//	FAILOVER_MS partition=N ms=M victim=B     kill -9 of partition N's
//	                                          leader to the first acks=all
//	                                          acknowledgement on it
//	ACKS_RESUME_MS partition=N ms=M victim=B  the same for a partition
//	                                          whose follower was killed
//	ISR_SHRINK_MS / ISR_EXPAND_MS             SIGSTOP / SIGCONT of a
//	                                          follower to the ISR change
//	                                          in Metadata

// replicationPartitions are the partitions of the 3-partition topics.
var replicationPartitions = []int32{0, 1, 2}

// victims picks the brokers to kill: first one that is not the
// controller, then the controller; the survivor is the last one.
func victims(c *Cluster, md kadm.Metadata) (first, second, survivor int32) {
	second = md.Controller
	for _, id := range c.IDs() {
		if id == second {
			continue
		}
		if first == 0 {
			first = id
		} else {
			survivor = id
		}
	}
	return first, second, survivor
}

// killLeader kills broker victim with SIGKILL and waits until Metadata
// (from the running brokers) no longer lists it and every partition of
// topic has a live leader. It returns the kill time, the partitions the
// victim led and the new metadata.
func (c *Cluster) killLeader(t *testing.T, topic string, md kadm.Metadata, victim int32) (time.Time, []int32, kadm.Metadata) {
	t.Helper()
	led := partitionsLedBy(md, topic, victim)
	c.Broker(victim).Kill(t)
	killed := time.Now()
	c.WaitMetadata(t, clusterSessionTimeout+60*time.Second, fmt.Sprintf("new leaders after broker %d died", victim), func(m kadm.Metadata) string {
		if slices.Contains(m.Brokers.NodeIDs(), victim) {
			return fmt.Sprintf("broker %d still registered", victim)
		}
		for p, d := range m.Topics[topic].Partitions {
			if d.Leader == victim || d.Leader < 0 || slices.Contains(d.ISR, victim) {
				return fmt.Sprintf("partition %d: leader %d, isr %v", p, d.Leader, d.ISR)
			}
		}
		md = m
		return ""
	})
	t.Logf("broker %d (leader of %v) killed; %v later Metadata shows leaders %v", victim, led, time.Since(killed).Round(time.Millisecond), leadersOf(md, topic))
	return killed, led, md
}

// logFailover waits for the first acknowledgement, on each of parts, of a
// record sent after the kill, and logs its delay: on the partitions the
// victim led (led) it is the failover time, FAILOVER_MS; a record sent
// after the kill cannot have been acknowledged by the dead leader, so this
// is the first successful acks=all produce on the new leader (to within
// the send interval). On the other partitions, ACKS_RESUME_MS is how long
// acks=all writes stalled because a follower died: until its removal
// from the ISR lets the high watermark move. The delays are measurements
// (docs/cluster.md), not asserted: a loaded machine takes longer. The
// wait's bound, far beyond the session timeout, fails a failover that
// does not happen.
func logFailover(t *testing.T, acks *ackLog, victim int32, killed time.Time, parts, led []int32) {
	t.Helper()
	firsts := acks.waitAcks(t, parts, killed, 1, clusterSessionTimeout+60*time.Second, fmt.Sprintf("after broker %d was killed", victim))
	for _, p := range parts {
		d := firsts[p].Sub(killed)
		what := "ACKS_RESUME_MS"
		if slices.Contains(led, p) {
			what = "FAILOVER_MS"
		}
		t.Logf("%s partition=%d ms=%d victim=%d", what, p, d.Milliseconds(), victim)
	}
}

// logChecks logs checkSeqLog's findings.
func logChecks(t *testing.T, who string, res map[int32]seqCheck, sent map[int32][]outcome) {
	t.Helper()
	for _, p := range slices.Sorted(maps.Keys(res)) {
		r := res[p]
		t.Logf("%s: partition %d: %d records sent, %d acknowledged, %d failed, %d read back (%d of them not acknowledged)",
			who, p, len(sent[p]), r.acked, r.failed, r.consumed, r.unackedVisible)
	}
	if errs := failedErrors(sent); len(errs) > 0 {
		t.Logf("%s: failed produces by error: %v", who, errs)
	}
}

// TestReplicationSeedExperiment is the seed document's experiment: a
// topic with 3 partitions × RF 3 and min.insync.replicas=1, and franz-go's
// default producer (idempotent, acks=all, unlimited retries) writing
// numbered records to every partition every 20 ms. One broker is killed
// with SIGKILL, then a second (the controller): writes keep being
// acknowledged, by the last broker alone in the end. Both come back,
// catch up, rejoin every ISR and lead their preferred partitions again.
// The producer is stopped and flushed (every record then has its
// outcome), and the whole log is read back from the leaders, two of which
// are the restarted brokers; checkSeqLog's rules hold: every
// acknowledged record is there exactly once at its acknowledged offset, in
// send order per partition, and no record is there that the producer
// did not send, nor one twice (a record rolled back on one replica and
// still visible would be one of these). No produce may fail: the
// idempotent producer retries until it succeeds.
func TestReplicationSeedExperiment(t *testing.T) {
	c := StartCluster(t, 3)
	const topic = "seed"
	all := replicationPartitions
	md := c.createTopicWith(t, topic, 3, 3, map[string]string{"min.insync.replicas": "1"})
	first, second, survivor := victims(c, md)
	t.Logf("controller %d, leaders %v; killing %d, then %d; %d survives", md.Controller, leadersOf(md, topic), first, second, survivor)

	prod := c.startSeqProducer(t, topic, all, 20*time.Millisecond)
	prod.acks.waitAcks(t, all, time.Time{}, 20, 60*time.Second, "before any kill")

	killed, led, md := c.killLeader(t, topic, md, first)
	logFailover(t, prod.acks, first, killed, all, led)
	prod.acks.waitAcks(t, all, killed, 20, 60*time.Second, fmt.Sprintf("with broker %d dead", first))

	killed, led, md = c.killLeader(t, topic, md, second)
	logFailover(t, prod.acks, second, killed, all, led)
	for p, d := range md.Topics[topic].Partitions {
		if d.Leader != survivor || !slices.Equal(d.ISR, []int32{survivor}) {
			t.Fatalf("partition %d: leader %d, isr %v; want broker %d alone", p, d.Leader, d.ISR, survivor)
		}
	}
	prod.acks.waitAcks(t, all, killed, 20, 60*time.Second, fmt.Sprintf("on broker %d alone", survivor))

	c.Broker(first).Restart(t)
	c.Broker(second).Restart(t)
	restarted := time.Now()
	md = c.waitFullISR(t, 60*time.Second, topic, 3, true)
	t.Logf("brokers %d and %d restarted: every partition had all 3 replicas in its ISR and its preferred leader %v later; leaders %v",
		first, second, time.Since(restarted).Round(time.Millisecond), leadersOf(md, topic))
	prod.acks.waitAcks(t, all, time.Now(), 20, 60*time.Second, "after the brokers came back")

	sent := prod.stop(t)
	logs := c.readLog(t, topic, all)
	res := checkSeqLog(t, "franz-go", topic, logs, sent)
	logChecks(t, "franz-go", res, sent)
	for p, r := range res {
		if r.failed > 0 {
			t.Errorf("partition %d: %d produces failed; the idempotent producer should have retried them to success", p, r.failed)
		}
	}
	for _, id := range []int32{first, second} {
		if n := len(truncations(c.Broker(id).Output(), topic)); n > 0 {
			t.Logf("broker %d truncated %d partition(s) of %s when it came back", id, n, topic)
		}
	}
}

// TestReplicationMinInsyncReplicas is the same experiment with
// min.insync.replicas=2 and librdkafka (Debian's python3-confluent-kafka,
// idempotent, acks=all) as the producer. With two brokers left writes go
// on; with one left, an acks=all produce is refused with
// NOT_ENOUGH_REPLICAS (checked with a raw Produce request and with
// franz-go) and librdkafka gets no acknowledgement (it retries); after
// both brokers come back, librdkafka's records go through and the log read
// back satisfies checkSeqLog: no acknowledged record lost or duplicated.
func TestReplicationMinInsyncReplicas(t *testing.T) {
	requireConfluentKafka(t)
	c := StartCluster(t, 3)
	const topic = "min-isr"
	all := replicationPartitions
	md := c.createTopicWith(t, topic, 3, 3, map[string]string{"min.insync.replicas": "2"})
	first, second, survivor := victims(c, md)
	t.Logf("controller %d, leaders %v; killing %d, then %d; %d survives", md.Controller, leadersOf(md, topic), first, second, survivor)

	py := c.startPyProducer(t, topic, 3, 20*time.Millisecond)
	py.acks.waitAcks(t, all, time.Time{}, 20, 60*time.Second, "from librdkafka before any kill")

	killed, led, md := c.killLeader(t, topic, md, first)
	logFailover(t, py.acks, first, killed, all, led)
	py.acks.waitAcks(t, all, killed, 20, 60*time.Second, fmt.Sprintf("from librdkafka with broker %d dead", first))

	c.Broker(second).Kill(t)
	c.WaitMetadata(t, clusterSessionTimeout+60*time.Second, fmt.Sprintf("broker %d alone in every ISR", survivor), func(m kadm.Metadata) string {
		for p, d := range m.Topics[topic].Partitions {
			if d.Leader != survivor || !slices.Equal(d.ISR, []int32{survivor}) {
				return fmt.Sprintf("partition %d: leader %d, isr %v", p, d.Leader, d.ISR)
			}
		}
		return ""
	})
	alone := time.Now()
	t.Logf("broker %d killed: broker %d is alone in every ISR", second, survivor)

	// An acks=all produce to the last broker is refused with
	// NOT_ENOUGH_REPLICAS, before anything is appended: with a raw
	// Produce request, and with franz-go (not idempotent, a single try),
	// errors.Is. Metadata can show the new ISR a moment before the
	// leader's partition state has it: NOT_LEADER_OR_FOLLOWER (the new
	// leadership not applied yet) is retried, and so is
	// NOT_ENOUGH_REPLICAS_AFTER_APPEND (the old ISR let the append
	// through), whose record is then in the log: the checker below allows
	// as many of those, and no other probe record.
	probeCl := c.Client(t)
	kcl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DisableIdempotentWrite(), kgo.RecordRetries(1))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	appendedProbes := map[int32]int{}
	probe := func(p int32, what string, send func() error) {
		t.Helper()
		for {
			err := send()
			switch {
			case errorsIsAny(err, kerr.NotEnoughReplicas):
				t.Logf("%s acks=all produce to %s-%d with broker %d alone: %v", what, topic, p, survivor, err)
				return
			case errorsIsAny(err, kerr.NotLeaderForPartition, kerr.NotEnoughReplicasAfterAppend):
				if errorsIsAny(err, kerr.NotEnoughReplicasAfterAppend) {
					appendedProbes[p]++
				}
				t.Logf("%s acks=all produce to %s-%d right after the ISR change: %v; again", what, topic, p, err)
				time.Sleep(50 * time.Millisecond)
				if ctx.Err() == nil {
					continue
				}
			}
			t.Errorf("%s acks=all produce to %s-%d with one in-sync replica of min.insync.replicas 2: %v, want NOT_ENOUGH_REPLICAS", what, topic, p, err)
			return
		}
	}
	for _, p := range all {
		probe(p, "raw", func() error {
			req := kmsg.NewPtrProduceRequest()
			req.Acks, req.TimeoutMillis = -1, 5000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = p, encodeBatch([][]byte{[]byte("probe-raw")})
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := probeCl.Broker(int(survivor)).Request(ctx, req)
			if err != nil {
				return err
			}
			return kerr.ErrorForCode(resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)
		})
		probe(p, "franz-go", func() error {
			return kcl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("probe-kgo")}).FirstErr()
		})
	}
	// librdkafka keeps producing and retrying meanwhile: nothing of its
	// is acknowledged while the ISR is too small (a second of margin for
	// answers already on their way). The check waits until librdkafka
	// has handed over 20 records per partition since then, so that there
	// were records to acknowledge.
	waitFor(t, 60*time.Second, "20 librdkafka records per partition sent with one broker in the ISR", func() bool {
		for _, p := range all {
			if py.acks.sentBetween(p, alone.Add(time.Second), time.Now()) < 20 {
				return false
			}
		}
		return true
	})
	for _, p := range all {
		if n := py.acks.acksBetween(p, alone.Add(time.Second), time.Now()); n > 0 {
			t.Errorf("partition %d: %d librdkafka records acknowledged with broker %d alone in the ISR (min.insync.replicas 2)", p, n, survivor)
		}
	}

	c.Broker(first).Restart(t)
	c.Broker(second).Restart(t)
	restarted := time.Now()
	md = c.waitFullISR(t, 60*time.Second, topic, 3, true)
	t.Logf("brokers %d and %d restarted: full ISRs and preferred leaders %v later; leaders %v",
		first, second, time.Since(restarted).Round(time.Millisecond), leadersOf(md, topic))
	py.acks.waitAcks(t, all, time.Now(), 20, 60*time.Second, "from librdkafka after the brokers came back")

	sent := py.stop(t)
	logs := c.readLog(t, topic, all)
	for p, recs := range logs {
		n := 0
		logs[p] = slices.DeleteFunc(recs, func(r *kgo.Record) bool {
			if strings.HasPrefix(string(r.Value), "probe-") {
				n++
				return true
			}
			return false
		})
		if n > appendedProbes[p] {
			t.Errorf("%s-%d holds %d probe records; only %d were appended (NOT_ENOUGH_REPLICAS_AFTER_APPEND), the others were refused", topic, p, n, appendedProbes[p])
		}
	}
	res := checkSeqLog(t, "librdkafka", topic, logs, sent)
	logChecks(t, "librdkafka", res, sent)
	for p, r := range res {
		if r.failed > 0 {
			t.Errorf("partition %d: %d librdkafka produces failed", p, r.failed)
		}
	}
}

// TestReplicationLaggingFollower pauses a follower with SIGSTOP while
// franz-go's producer writes (acks=all) to the partitions it follows:
// after replica.lag.time.max.ms (2 s here) their leaders drop it, and only
// it, from the ISR, and acknowledgements resume without it; after SIGCONT
// it catches up and Metadata shows it back in every ISR. Then every
// partition keeps its full ISR for longer than the lag time, including
// the one the paused broker leads, which gets no writes: a follower that
// is at the leader's log end is in sync however long ago it last heard
// of a new record (Kafka's Replica.isCaughtUp). The ZooKeeper session
// timeout is raised to 30 s for this cluster so that the pause is a lag,
// not a death, however loaded the machine. The log read back then
// satisfies checkSeqLog.
func TestReplicationLaggingFollower(t *testing.T) {
	const lag = 2 * time.Second
	c := StartCluster(t, 3, fmt.Sprintf("replica.lag.time.max.ms=%d", lag.Milliseconds()), "zookeeper.session.timeout.ms=30000")
	const topic = "lagging"
	md := c.createTopicWith(t, topic, 3, 3, nil)
	var paused int32
	for _, id := range c.IDs() {
		if id != md.Controller {
			paused = id
			break
		}
	}
	var parts []int32
	for _, p := range replicationPartitions {
		if md.Topics[topic].Partitions[p].Leader != paused {
			parts = append(parts, p)
		}
	}
	others := c.without(paused)
	t.Logf("leaders %v; pausing broker %d, a follower of partitions %v", leadersOf(md, topic), paused, parts)

	prod := others.startSeqProducer(t, topic, parts, 20*time.Millisecond)
	prod.acks.waitAcks(t, parts, time.Time{}, 20, 60*time.Second, "before the pause")

	c.pauseBroker(t, paused)
	stopped := time.Now()
	shrink := others.WaitMetadata(t, 60*time.Second, fmt.Sprintf("the ISR of %v: every replica but broker %d, still registered", parts, paused), func(m kadm.Metadata) string {
		if !slices.Contains(m.Brokers.NodeIDs(), paused) {
			return fmt.Sprintf("broker %d no longer registered (its session expired: not what this test is about)", paused)
		}
		for _, p := range parts {
			d := m.Topics[topic].Partitions[p]
			want := slices.DeleteFunc(slices.Clone(d.Replicas), func(id int32) bool { return id == paused })
			if !sameMembers(d.ISR, want) {
				return fmt.Sprintf("partition %d: isr %v", p, d.ISR)
			}
		}
		return ""
	})
	t.Logf("ISR_SHRINK_MS ms=%d lag_ms=%d", shrink.Milliseconds(), lag.Milliseconds())
	if shrink < lag {
		t.Errorf("broker %d left the ISR %v after it was paused, before replica.lag.time.max.ms %v", paused, shrink, lag)
	}
	shrunk := time.Now()
	prod.acks.waitAcks(t, parts, shrunk, 10, 60*time.Second, fmt.Sprintf("with broker %d paused and out of the ISR", paused))
	_, firstAfterPause := prod.acks.acksSentAfter(parts[0], stopped.Add(100*time.Millisecond))
	t.Logf("writes go on without broker %d: first acknowledgement of a record sent after the pause %v after it; 10 acknowledgements per partition since the shrink by %v",
		paused, firstAfterPause.Sub(stopped).Round(time.Millisecond), time.Since(shrunk).Round(time.Millisecond))

	c.resumeBroker(t, paused)
	resumed := time.Now()
	fullISR := func(m kadm.Metadata) string {
		for p, d := range m.Topics[topic].Partitions {
			if len(d.ISR) != 3 {
				return fmt.Sprintf("partition %d: isr %v", p, d.ISR)
			}
		}
		return ""
	}
	expand := c.WaitMetadata(t, 60*time.Second, fmt.Sprintf("broker %d back in every ISR", paused), fullISR)
	t.Logf("ISR_EXPAND_MS ms=%d (paused %v)", expand.Milliseconds(), resumed.Sub(stopped).Round(time.Millisecond))
	prod.acks.waitAcks(t, parts, time.Now(), 10, 60*time.Second, fmt.Sprintf("with broker %d back", paused))

	// Every ISR stays full for twice the lag time: the followers are
	// caught up, including those of the partition nobody writes to.
	for end := time.Now().Add(2 * lag); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		m, err := c.Metadata(ctx, t)
		cancel()
		if err != nil {
			t.Fatalf("Metadata: %v", err)
		}
		if msg := fullISR(m); msg != "" {
			t.Errorf("%s, %v after broker %d was back in every ISR; want every partition in sync (the one it leads has no writes: its followers sit at its log end)",
				msg, time.Since(resumed.Add(expand)).Round(time.Millisecond), paused)
			break
		}
	}

	// Each leader logged its shrink for the lag, which removed the paused
	// broker and no other, and the expansion.
	for _, id := range c.IDs() {
		for _, ch := range isrChanges(c.Broker(id).Output(), topic) {
			if ch.shrunk && !slices.Equal(ch.removed(), []int32{paused}) {
				t.Errorf("broker %d shrank the ISR of %s-%d from %v to %v; only broker %d lagged", id, topic, ch.partition, ch.from, ch.to, paused)
			}
		}
	}
	for _, p := range parts {
		leader := md.Topics[topic].Partitions[p].Leader
		out := c.Broker(leader).Output()
		if !strings.Contains(out, "ISR shrunk") || !strings.Contains(out, "follower lagged past replica.lag.time.max.ms") || !strings.Contains(out, "ISR expanded") {
			t.Errorf("broker %d, leader of %s-%d, did not log the ISR shrink for the lag and the expansion", leader, topic, p)
		}
	}
	sent := prod.stop(t)
	logs := c.readLog(t, topic, parts)
	res := checkSeqLog(t, "franz-go", topic, logs, sent)
	logChecks(t, "franz-go", res, sent)
	for p, r := range res {
		if r.failed > 0 {
			t.Errorf("partition %d: %d produces failed", p, r.failed)
		}
	}
}

// TestReplicationDivergence makes a leader append records its followers
// never get: both followers of a one-partition topic are paused with
// SIGSTOP, 40 records ("lost-0".."lost-39", one batch each) are produced
// to the leader with acks=1, the leader is killed with SIGKILL and the
// followers resumed. The first few batches (up to the leader's stream
// window, streamWindow = 4) may already be in the followers' socket
// buffers: those reach them after SIGCONT and survive (an acks=1 record
// not yet committed may, as in Kafka); the rest exist only on the dead
// leader. A follower, still in the ISR, is elected and takes
// acks=all writes ("new-*"). The old leader comes back, truncates its log
// to the new leader's epoch start ("replica truncated" with exactly the
// lost suffix), rejoins the ISR and leads again (preferred replica); read
// from the new leader and then from it, the log is the same: the records
// produced before, the surviving prefix lost-0..lost-(k-1) and the new
// records, never lost-k or later, with k < 40.
func TestReplicationDivergence(t *testing.T) {
	c := StartCluster(t, 3)
	const topic = "diverge"
	md := c.createTopicWith(t, topic, 1, 3, nil)
	d := md.Topics[topic].Partitions[0]
	old := d.Leader
	var followers []int32
	for _, id := range d.Replicas {
		if id != old {
			followers = append(followers, id)
		}
	}
	t.Logf("%s-0: leader %d (epoch %d), followers %v, controller %d", topic, old, d.LeaderEpoch, followers, md.Controller)

	acksAll := func() *kgo.Client {
		return c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite())
	}
	produceValues := func(cl *kgo.Client, prefix string, n int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for i := range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "%s-%d", prefix, i)}).FirstErr(); err != nil {
				t.Fatalf("producing %s-%d (acks=all): %v", prefix, i, err)
			}
		}
	}
	const before, lost, fresh = 10, 40, 10
	produceValues(acksAll(), "before", before)

	// Straight to the leader, seeded with it alone: no Metadata request
	// can reach a paused broker. (kgo sends raw Produce requests with the
	// client's acks.)
	leaderCl, err := kgo.NewClient(kgo.SeedBrokers(c.Broker(old).Addr), kgo.DialTimeout(2*time.Second),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer leaderCl.Close()
	leaderBroker := leaderCl.SeedBrokers()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := leaderBroker.Request(ctx, kmsg.NewPtrApiVersionsRequest()); err != nil {
		t.Fatalf("connecting to broker %d: %v", old, err)
	}

	for _, id := range followers {
		c.pauseBroker(t, id)
	}
	pausedAt := time.Now()
	for i := range lost {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = 1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = 0, encodeBatch([][]byte{fmt.Appendf(nil, "lost-%d", i)})
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := leaderBroker.Request(ctx, req)
		if err != nil {
			t.Fatalf("acks=1 produce of lost-%d to broker %d: %v", i, old, err)
		}
		sp := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(sp.ErrorCode); err != nil || sp.BaseOffset != int64(before+i) {
			t.Fatalf("acks=1 produce of lost-%d to broker %d: %v at offset %d, want offset %d", i, old, err, sp.BaseOffset, before+i)
		}
	}
	c.Broker(old).Kill(t)
	killed := time.Now()
	for _, id := range followers {
		c.resumeBroker(t, id)
	}
	t.Logf("followers %v paused for %v; %d records appended on broker %d alone (acks=1), then it was killed",
		followers, time.Since(pausedAt).Round(time.Millisecond), lost, old)

	var newLeader int32
	c.WaitMetadata(t, clusterSessionTimeout+60*time.Second, "a follower leading", func(m kadm.Metadata) string {
		nd := m.Topics[topic].Partitions[0]
		if !slices.Contains(followers, nd.Leader) || slices.Contains(nd.ISR, old) {
			return fmt.Sprintf("leader %d, isr %v", nd.Leader, nd.ISR)
		}
		newLeader = nd.Leader
		return ""
	})
	t.Logf("broker %d leads %s-0 %v after the kill", newLeader, topic, time.Since(killed).Round(time.Millisecond))
	produceValues(acksAll(), "new", fresh)

	// want checks a read of the whole partition and returns k, the
	// number of lost-* records that survived.
	want := func(who string, extra int) int {
		t.Helper()
		recs := c.readLog(t, topic, []int32{0})[0]
		var vals []string
		for _, r := range recs {
			vals = append(vals, string(r.Value))
		}
		k := 0
		for k < lost && before+k < len(vals) && vals[before+k] == fmt.Sprintf("lost-%d", k) {
			k++
		}
		var exp []string
		for i := range before {
			exp = append(exp, fmt.Sprintf("before-%d", i))
		}
		for i := range k {
			exp = append(exp, fmt.Sprintf("lost-%d", i))
		}
		for i := range fresh {
			exp = append(exp, fmt.Sprintf("new-%d", i))
		}
		for i := range extra {
			exp = append(exp, fmt.Sprintf("final-%d", i))
		}
		if !slices.Equal(vals, exp) {
			t.Fatalf("%s: %s-0 holds %q, want %q", who, topic, vals, exp)
		}
		if k == lost {
			t.Fatalf("%s: every lost-* record reached the followers: no divergence to test", who)
		}
		return k
	}
	k := want(fmt.Sprintf("read from broker %d, the new leader", newLeader), 0)
	t.Logf("%d of the %d acks=1 records had reached the followers before the leader died; lost-%d..lost-%d were only on broker %d", k, lost, k, lost-1, old)

	c.Broker(old).Restart(t)
	back := time.Now()
	c.WaitMetadata(t, 60*time.Second, fmt.Sprintf("broker %d in the ISR and leading again", old), func(m kadm.Metadata) string {
		nd := m.Topics[topic].Partitions[0]
		if nd.Leader != old || len(nd.ISR) != 3 {
			return fmt.Sprintf("leader %d, isr %v", nd.Leader, nd.ISR)
		}
		return ""
	})
	t.Logf("broker %d back in the ISR and leading %s-0 again %v after its restart", old, topic, time.Since(back).Round(time.Millisecond))
	tr := truncations(c.Broker(old).Output(), topic)
	if len(tr) != 1 || tr[0] != [3]int64{0, before + lost, int64(before + k)} {
		t.Errorf("broker %d truncations of %s (partition, from, to): %v; want one, from %d to %d:\n%s",
			old, topic, tr, before+lost, before+k, c.Broker(old).Output())
	}
	want(fmt.Sprintf("read from broker %d, the old leader, back", old), 0)
	produceValues(acksAll(), "final", 5)
	want(fmt.Sprintf("read from broker %d after more writes", old), 5)
}
