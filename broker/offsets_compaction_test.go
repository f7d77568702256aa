package broker

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/e2e/history"
	"github.com/stratastream/strata/broker/group"
	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/segment/poll"
)

// offsetsCluster starts three brokers on ZooKeeper whose __consumer_offsets
// has three replicas and rolls segments every few commits, so that the
// log cleaner has sealed segments to compact.
func offsetsCluster(t *testing.T) []*Server {
	t.Helper()
	zk := zktest.Start(t)
	connect := zk.ConnectString("/strata-offsets-compact")
	srv := make([]*Server, 3)
	for i := range srv {
		srv[i] = startServer(t, map[string]string{
			"broker.id":                        fmt.Sprint(i + 1),
			"zookeeper.connect":                connect,
			"offsets.topic.replication.factor": "3",
			"offsets.topic.segment.bytes":      "4096",
			"group.initial.rebalance.delay.ms": "0",
			// The log cleaner compacts __consumer_offsets as soon as
			// a segment is sealed.
			"log.cleaner.backoff.ms":          "50",
			"log.cleaner.min.cleanable.ratio": "0.01",
		})
	}
	waitFor(t, "every broker registered", func() bool { return len(srv[0].coord.Snapshot().Brokers) == len(srv) })
	return srv
}

// commitEach commits, one OffsetCommit per record, the offset after each
// record m has read of topic and not yet committed, up to stop[p] of
// partition p, each accepted commit told to h; it returns how many
// commits it made.
func commitEach(t *testing.T, h *history.History, grp string, m *groupMember, topic string, done, stop map[int32]int64) int {
	t.Helper()
	n := 0
	for _, r := range m.records() {
		next := r.Offset + 1
		if next <= done[r.Partition] || next > stop[r.Partition] {
			continue
		}
		offs := map[string]map[int32]kgo.EpochOffset{topic: {r.Partition: {Epoch: r.LeaderEpoch, Offset: next}}}
		var cerr error
		m.cl.CommitOffsetsSync(testCtx(t), offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			cerr = err
			if err == nil {
				for _, rt := range resp.Topics {
					for _, rp := range rt.Partitions {
						if rp.ErrorCode != 0 {
							cerr = fmt.Errorf("partition %d: error %d", rp.Partition, rp.ErrorCode)
						}
					}
				}
			}
		})
		if cerr != nil {
			t.Fatalf("commit %s/%d at %d: %v", topic, r.Partition, next, cerr)
		}
		_, gen := m.cl.GroupMetadata()
		h.Committed(grp, gen, history.TP{Topic: topic, Partition: r.Partition}, next)
		done[r.Partition] = next
		n++
	}
	return n
}

// waitOffsetsCleaned waits until the log cleaner of every broker has
// compacted its replica of partition p of __consumer_offsets up to the
// active segment (which is never cleaned), and returns the bytes of the
// replicas' logs.
func waitOffsetsCleaned(t *testing.T, srv []*Server, p int) []int64 {
	t.Helper()
	start := time.Now()
	out := make([]int64, len(srv))
	for i, s := range srv {
		lp := s.topic(group.Topic).local(int32(p))
		if lp == nil {
			t.Fatalf("broker %d has no replica of %s-%d", s.cfg.BrokerID, group.Topic, p)
		}
		waitFor(t, fmt.Sprintf("broker %d cleaned %s-%d up to its active segment", s.cfg.BrokerID, group.Topic, p), func() bool {
			s.cleaner.kick()
			active := lp.log.ActiveBaseOffset()
			return active > 0 && lp.log.CleanerCheckpoint() >= active
		})
		out[i] = partitionBytes(lp.log)
		t.Logf("broker %d: %s-%d cleaned up to %d (log end %d), %d bytes in %d segments, after %v",
			s.cfg.BrokerID, group.Topic, p, lp.log.CleanerCheckpoint(), lp.log.LogEndOffset(), out[i], len(lp.log.Segments()), time.Since(start))
	}
	return out
}

func partitionBytes(l *segment.Log) int64 {
	var n int64
	for _, s := range l.Segments() {
		n += s.Size
	}
	return n
}

// shutdownCoordinator shuts down the leader of partition p of
// __consumer_offsets (a controlled shutdown: its leadership moves to
// another replica in sync) and waits until another broker has loaded the
// partition's groups; it returns the brokers left.
func shutdownCoordinator(t *testing.T, srv []*Server, p int) []*Server {
	t.Helper()
	old := partitionInfo(srv[0], group.Topic, int32(p)).State.Leader
	var left []*Server
	for _, s := range srv {
		if s.cfg.BrokerID != old {
			left = append(left, s)
			continue
		}
		start := time.Now()
		if err := s.Shutdown(testCtx(t)); err != nil {
			t.Fatalf("shutdown of broker %d: %v", old, err)
		}
		t.Logf("coordinator broker %d shut down in %v", old, time.Since(start))
	}
	waitCoordinatorMoved(t, left, p, old)
	return left
}

// electCoordinator makes another in-sync replica the preferred one of
// partition p of __consumer_offsets (a reassignment that only reorders its
// replicas) and elects it, and waits until it has loaded the partition's
// groups and the old leader, still running, has unloaded them.
func electCoordinator(t *testing.T, srv []*Server, p int) {
	t.Helper()
	info := partitionInfo(srv[0], group.Topic, int32(p))
	old := info.State.Leader
	to := int32(-1)
	for _, r := range info.State.ISR {
		if r != old {
			to = r
			break
		}
	}
	if to < 0 {
		t.Fatalf("%s-%d: no in-sync replica besides the leader %d: %+v", group.Topic, p, old, info.State)
	}
	order := []int32{to}
	for _, r := range info.Replicas {
		if r != to {
			order = append(order, r)
		}
	}
	adm := kadm.NewClient(newClient(t, srv[0]))
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(group.Topic, int32(p), order)
	mustAlter(t, adm, req)
	waitNoReassignment(t, adm, group.Topic, int32(p))
	res, err := adm.ElectLeaders(testCtx(t), kadm.ElectPreferredReplica, kadm.TopicsSet{group.Topic: {int32(p): {}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res[group.Topic] {
		if r.Err != nil && !errors.Is(r.Err, kerr.ElectionNotNeeded) {
			t.Fatalf("elect %s-%d: %v %s", group.Topic, p, r.Err, r.ErrMessage)
		}
	}
	waitCoordinatorMoved(t, srv, p, old)
	for _, s := range srv {
		if s.cfg.BrokerID == old {
			waitFor(t, "the old coordinator unloaded the partition", func() bool { return !coordinatorLoaded(s, p) })
		}
	}
}

// waitCoordinatorMoved waits until a broker of live other than old leads
// partition p of __consumer_offsets and has loaded it.
func waitCoordinatorMoved(t *testing.T, live []*Server, p int, old int32) {
	t.Helper()
	start := time.Now()
	var lead int32
	waitFor(t, "a new coordinator loaded the group's partition", func() bool {
		lead = partitionInfo(live[0], group.Topic, int32(p)).State.Leader
		for _, s := range live {
			if s.cfg.BrokerID == lead && lead != old {
				return coordinatorLoaded(s, p)
			}
		}
		return false
	})
	t.Logf("coordinator moved from broker %d to %d; loaded %v later", old, lead, time.Since(start))
}

func coordinatorLoaded(s *Server, p int) bool {
	return s.groupLoader.isLoaded(p)
}

// checkCoordinatorLoad checks what the coordinator of partition p replayed
// when it loaded it: fewer than maxRecords records, at most maxBytes, and
// offsets offsets.
func checkCoordinatorLoad(t *testing.T, live []*Server, p, maxRecords int, maxBytes int64, offsets int) {
	t.Helper()
	lead := partitionInfo(live[0], group.Topic, int32(p)).State.Leader
	for _, s := range live {
		if s.cfg.BrokerID != lead {
			continue
		}
		for _, r := range s.groupLoadReports() {
			if r.Partition != p {
				continue
			}
			t.Logf("new coordinator (broker %d) replayed %d records, %d bytes in %v", lead, r.Records, r.Bytes, r.Duration)
			if r.Records >= maxRecords || r.Bytes > maxBytes || r.Offsets != offsets {
				t.Errorf("new coordinator replayed %d records, %d bytes and loaded %d offsets; want fewer than %d records, at most %d bytes, and %d offsets",
					r.Records, r.Bytes, r.Offsets, maxRecords, maxBytes, offsets)
			}
			return
		}
	}
	t.Errorf("the new coordinator, broker %d, has no load report of partition %d", lead, p)
}

// committedOnly is committed without the partitions that have no commit.
func committedOnly(t *testing.T, cl *kgo.Client, grp, topic string) map[int32]int64 {
	t.Helper()
	out := committed(t, cl, grp, topic)
	maps.DeleteFunc(out, func(_ int32, off int64) bool { return off < 0 })
	return out
}

// resumeGroup starts a member of grp on s, checks the group is Empty with
// committed offsets from, produces one more record to each partition
// (whose end is then end[q]+1) and checks the member reads each partition
// from its commit to the end: every record once, in order, none before
// the commit.
func resumeGroup(t *testing.T, h *history.History, s *Server, grp, name, topic string, partitions int32, from, end map[int32]int64) *groupMember {
	t.Helper()
	admin := newClient(t, s)
	if g := describeGroup(t, admin, grp); g.State != "Empty" || g.ProtocolType != "consumer" {
		t.Fatalf("after the move: group state %s protocol type %q, want Empty consumer", g.State, g.ProtocolType)
	}
	if got := committedOnly(t, admin, grp, topic); !maps.Equal(got, from) {
		t.Fatalf("after compaction and the move: committed %v, want %v", got, from)
	}
	producer := newClient(t, s, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	m := startMember(t, s.Addr().String(), grp, name, topic)
	produceTracked(t, h, producer, topic, partitions, 1, name)
	n := 0
	for q := range partitions {
		end[q]++
		n += int(end[q] - from[q])
	}
	waitRecords(t, n, m)
	next := map[int32]int64{}
	for _, r := range m.records() {
		w, ok := next[r.Partition]
		if !ok {
			w = from[r.Partition]
		}
		if r.Offset != w {
			t.Fatalf("%s read %d/%d (%s), want offset %d (from its commit %d, in order, once)", name, r.Partition, r.Offset, r.Value, w, from[r.Partition])
		}
		next[r.Partition] = w + 1
	}
	for q := range partitions {
		if next[q] != end[q] {
			t.Fatalf("%s read partition %d up to %d, want %d", name, q, next[q], end[q])
		}
	}
	return m
}

// produceTracked produces n records to each of the topic's partitions,
// each told to h.
func produceTracked(t *testing.T, h *history.History, cl *kgo.Client, topic string, partitions int32, n int, tag string) {
	t.Helper()
	var rs []*kgo.Record
	for p := range partitions {
		for i := range n {
			r := &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%s-%d-%d", tag, p, i)}
			h.Sent("producer", history.TP{Topic: topic, Partition: p}, string(r.Value))
			rs = append(rs, r)
		}
	}
	for _, res := range cl.ProduceSync(testCtx(t), rs...) {
		tp := history.TP{Topic: topic, Partition: res.Record.Partition}
		if res.Err != nil {
			h.Answered(tp, string(res.Record.Value), history.Unknown, -1, res.Err.Error())
			t.Fatalf("produce %s: %v", res.Record.Value, res.Err)
		}
		h.Answered(tp, string(res.Record.Value), history.Acked, res.Record.Offset, "")
	}
}

// checkHistory tells h what the members read, reads the topic back in
// full and fails the test on anything lost, duplicated or inconsistent.
func checkHistory(t *testing.T, h *history.History, s *Server, topic string, partitions int32, perPartition int, members map[string]*groupMember) {
	t.Helper()
	for name, m := range members {
		for _, r := range m.records() {
			h.Read(name, history.TP{Topic: topic, Partition: r.Partition}, r.Offset, string(r.Value))
		}
	}
	final := map[history.TP][]history.Record{}
	for p := range partitions {
		tp := history.TP{Topic: topic, Partition: p}
		cl := newClient(t, s, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}}))
		ctx := testCtx(t)
		for len(final[tp]) < perPartition {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("read %d of %d records of %v: %v", len(final[tp]), perPartition, tp, ctx.Err())
			}
			fs.EachRecord(func(r *kgo.Record) {
				final[tp] = append(final[tp], history.Record{Offset: r.Offset, Value: string(r.Value)})
			})
		}
		cl.Close()
	}
	rep := h.Check(final)
	t.Logf("history: %v", rep)
	if !rep.OK() {
		t.Fatalf("history check failed: %v", rep)
	}
}

// TestGroupOffsetsSurviveCompactionAndCoordinatorMove runs a franz-go
// group member that commits after every record and waits until the log
// cleaner of every broker has compacted its replica of the group's
// partition of __consumer_offsets. Then the coordinator moves twice: by
// the election of another replica (the old one keeps running), and by a
// shutdown of the coordinator's broker. Each new coordinator replays only
// the compacted log, and a new member of the group, served by it, starts
// exactly at the last commits, reading nothing twice beyond them and
// skipping nothing; the history checker finds nothing lost.
func TestGroupOffsetsSurviveCompactionAndCoordinatorMove(t *testing.T) {
	const topic, grp, partitions, rounds, perRound = "oc", "oc-group", int32(2), 20, 10
	srv := offsetsCluster(t)
	admin := newClient(t, srv[0])
	if _, err := kadm.NewClient(admin).CreateTopic(testCtx(t), partitions, 3, nil, topic); err != nil {
		t.Fatal(err)
	}
	producer := newClient(t, srv[0], kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	p := group.PartitionFor(grp, srv[0].groups.NumPartitions())

	h := history.New()
	m := startMember(t, srv[0].Addr().String(), grp, "member-a", topic)
	done := map[int32]int64{}
	commits, began := 0, time.Now()
	for round := range rounds {
		produceTracked(t, h, producer, topic, partitions, perRound, fmt.Sprintf("r%d", round))
		waitRecords(t, (round+1)*perRound*int(partitions), m)
		stop := map[int32]int64{}
		for q := range partitions {
			stop[q] = int64((round + 1) * perRound)
			if round == rounds-1 {
				stop[q] -= 3 // the last three of each partition stay uncommitted
			}
		}
		commits += commitEach(t, h, grp, m, topic, done, stop)
	}
	want := committedOnly(t, admin, grp, topic)
	m.close()
	waitGroupState(t, admin, grp, "Empty", 0)
	for q := range partitions {
		if want[q] != done[q] || want[q] != rounds*perRound-3 {
			t.Fatalf("partition %d committed at %d, the member committed %d, want %d", q, want[q], done[q], rounds*perRound-3)
		}
	}
	t.Logf("%d commits to %s-%d in %v; log end %d", commits, group.Topic, p, time.Since(began), srv[0].topic(group.Topic).local(int32(p)).log.LogEndOffset())

	sizes := waitOffsetsCleaned(t, srv, p)
	end := map[int32]int64{}
	for q := range partitions {
		end[q] = rounds * perRound
	}

	// Move 1: another replica is elected; the old coordinator keeps
	// running as a follower.
	electCoordinator(t, srv, p)
	checkCoordinatorLoad(t, srv, p, commits/4, slices.Max(sizes), int(partitions))
	lead := partitionInfo(srv[0], group.Topic, int32(p)).State.Leader
	b := resumeGroup(t, h, srv[lead-1], grp, "member-b", topic, partitions, want, end)
	if err := b.cl.CommitUncommittedOffsets(testCtx(t)); err != nil {
		t.Fatalf("member-b commit: %v", err)
	}
	_, gen := b.cl.GroupMetadata()
	for q := range partitions {
		h.Committed(grp, gen, history.TP{Topic: topic, Partition: q}, end[q])
	}
	b.close()
	want = maps.Clone(end)

	// Move 2: the coordinator's broker shuts down.
	left := shutdownCoordinator(t, srv, p)
	checkCoordinatorLoad(t, left, p, commits/4, slices.Max(sizes)+4096, int(partitions))
	lead = partitionInfo(left[0], group.Topic, int32(p)).State.Leader
	c := resumeGroup(t, h, srv[lead-1], grp, "member-c", topic, partitions, want, end)
	checkHistory(t, h, left[0], topic, partitions, int(end[0]), map[string]*groupMember{"member-a": m, "member-b": b, "member-c": c})
}

// TestOffsetsTopicCompacted checks that __consumer_offsets is created
// compacted with offsets.topic.segment.bytes, and that one created without
// compaction (cleanup.policy=delete, unlimited retention, as before the
// log cleaner existed) becomes compacted with the incremental config
// change docs/compaction.md gives operators.
func TestOffsetsTopicCompacted(t *testing.T) {
	s := startServer(t, map[string]string{"offsets.topic.segment.bytes": "65536"})
	cl := newClient(t, s)
	d := describeTopic(t, cl, group.Topic)
	if v := d["cleanup.policy"].Value; v == nil || *v != "compact" {
		t.Fatalf("cleanup.policy %v, want compact", d["cleanup.policy"].Value)
	}
	if v := d["segment.bytes"].Value; v == nil || *v != "65536" {
		t.Fatalf("segment.bytes %v, want 65536 (offsets.topic.segment.bytes)", d["segment.bytes"].Value)
	}
	if c := s.topic(group.Topic).cfg; !c.compact || c.deletePolicy || c.seg.SegmentBytes != 65536 {
		t.Fatalf("effective config: compact %v delete %v segment.bytes %d", c.compact, c.deletePolicy, c.seg.SegmentBytes)
	}

	// As a topic created before compaction: the default policy (delete)
	// with unlimited retention.
	alter(t, cl, group.Topic, map[string]string{"retention.ms": "-1", "retention.bytes": "-1"})
	if c := s.topic(group.Topic).cfg; c.compact {
		t.Fatal("still compacted after its overrides were replaced")
	}
	adm := kadm.NewClient(cl)
	resps, err := adm.AlterTopicConfigs(testCtx(t), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "cleanup.policy", Value: kmsg.StringPtr("compact")}}, group.Topic)
	if err == nil {
		err = resps[0].Err
	}
	if err != nil {
		t.Fatalf("set cleanup.policy=compact: %v", err)
	}
	if c := s.topic(group.Topic).cfg; !c.compact || c.seg.RetentionMs != -1 || c.seg.RetentionBytes != -1 {
		t.Fatalf("after the change: compact %v retention.ms %d retention.bytes %d", c.compact, c.seg.RetentionMs, c.seg.RetentionBytes)
	}
}

// offsetsKeys reads a partition log of __consumer_offsets and counts, by
// group, its records and the tombstones among them.
func offsetsKeys(t *testing.T, l *segment.Log) (records, tombstones map[string]int) {
	t.Helper()
	records, tombstones = map[string]int{}, map[string]int{}
	off, end := l.LogStartOffset(), l.LogEndOffset()
	for off < end {
		buf, err := l.ReadCopy(off, 1<<20, end)
		if err != nil {
			t.Fatal(err)
		}
		if len(buf) == 0 {
			break
		}
		err = segment.SplitBatches(buf, func(h segment.Header, batch []byte) error {
			off = h.NextOffset()
			it, err := segment.NewRecordIter(batch, segment.DefaultMaxDecompressed)
			if err != nil {
				return err
			}
			for {
				rec, ok, err := it.Next()
				if err != nil || !ok {
					return err
				}
				var g string
				if len(rec.Key) >= 2 && rec.Key[1] == 2 { // group metadata key, version 2
					var k kmsg.GroupMetadataKey
					if err := k.ReadFrom(rec.Key); err != nil {
						return err
					}
					g = k.Group
				} else {
					var k kmsg.OffsetCommitKey
					if err := k.ReadFrom(rec.Key); err != nil {
						return err
					}
					g = k.Group
				}
				records[g]++
				if rec.Value == nil {
					tombstones[g]++
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return records, tombstones
}

// simpleCommit commits offset for partition 0..n-1 of topic as a
// standalone consumer (no member, generation -1).
func simpleCommit(t *testing.T, cl *kgo.Client, grp, topic string, n int32, offset int64) {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = grp, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	for p := range n {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p, offset
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			t.Fatalf("commit %s %s/%d: %v", grp, topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
		}
	}
}

// TestExpiredOffsetsCompactedAway lets the coordinator of a broker expire
// a standalone consumer's offsets (offsets.retention.minutes after its
// commit, on a fake clock), and the broker's log cleaner compact
// __consumer_offsets with delete.retention.ms=0: the expiry writes
// tombstones for the offsets and the group, the cleaner removes them
// with every record of the group once they are past their horizon, and a
// restart loads the other group's offsets and nothing of the expired one.
func TestExpiredOffsetsCompactedAway(t *testing.T) {
	const topic, gone, live = "ex", "expired-group", "live-group"
	cfg := testConfig(t, map[string]string{
		"offsets.topic.num.partitions":        "1",
		"offsets.topic.segment.bytes":         "1024",
		"offsets.retention.check.interval.ms": "20",
		"log.cleaner.backoff.ms":              "50",
		"log.cleaner.min.cleanable.ratio":     "0.01",
	})
	var fake atomic.Int64
	fake.Store(time.Now().UnixNano())
	cfg.Groups.Now = func() time.Time { return time.Unix(0, fake.Load()) }
	s := startServerConfig(t, cfg)
	cl := newClient(t, s)
	createTopic(t, cl, topic, 3, nil)
	alter(t, cl, group.Topic, map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "0", "segment.bytes": "1024"})
	l := s.topic(group.Topic).local(0).log

	simpleCommit(t, cl, gone, topic, 3, 5)
	fake.Add(int64(cfg.Groups.OffsetsRetention + time.Minute))
	waitFor(t, "the expired group's tombstones", func() bool {
		_, tombs := offsetsKeys(t, l)
		return tombs[gone] == 4 // its three offsets and the group
	})
	if got := committedOnly(t, cl, gone, topic); len(got) != 0 {
		t.Fatalf("expired group still has offsets %v", got)
	}
	// Commits of another group roll segments past the tombstones, so
	// the cleaner keeps them (setting their delete horizon), then, at a
	// later cleaning, removes them.
	start := time.Now()
	commits, left := 0, 0
	if !poll.For(time.Minute, func() bool {
		simpleCommit(t, cl, live, topic, 3, int64(commits))
		commits++
		recs, _ := offsetsKeys(t, l)
		if left = recs[gone]; left == 0 {
			return true
		}
		s.cleaner.kick()
		return false
	}) {
		t.Fatalf("the expired group still has %d records in the log after a minute", left)
	}
	t.Logf("the expired group's records compacted away after %d more commits, %v; cleaner checkpoint %d, log end %d",
		commits, time.Since(start), l.CleanerCheckpoint(), l.LogEndOffset())
	want := committedOnly(t, cl, live, topic)

	if err := s.Shutdown(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	s = startServerConfig(t, cfg)
	cl = newClient(t, s)
	if got := committedOnly(t, cl, live, topic); !maps.Equal(got, want) {
		t.Fatalf("after a restart: %s committed %v, want %v", live, got, want)
	}
	if got := committedOnly(t, cl, gone, topic); len(got) != 0 {
		t.Fatalf("after a restart the expired group has offsets %v", got)
	}
}
