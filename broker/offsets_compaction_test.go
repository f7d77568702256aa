package broker

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/broker/e2e/history"
	"github.com/stratastream/strata/broker/group"
	"github.com/stratastream/strata/coord/zktest"
	"github.com/stratastream/strata/segment"
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

// moveCoordinator shuts down the leader of partition p of
// __consumer_offsets and waits until another broker leads it and has
// loaded its groups; it returns the brokers left.
func moveCoordinator(t *testing.T, srv []*Server, p int) []*Server {
	t.Helper()
	old := partitionInfo(srv[0], group.Topic, int32(p)).State.Leader
	var left []*Server
	for _, s := range srv {
		if s.cfg.BrokerID == old {
			start := time.Now()
			if err := s.Shutdown(testCtx(t)); err != nil {
				t.Fatalf("shutdown of broker %d: %v", old, err)
			}
			t.Logf("coordinator broker %d shut down in %v", old, time.Since(start))
			continue
		}
		left = append(left, s)
	}
	start := time.Now()
	waitFor(t, "a new coordinator loaded the group's partition", func() bool {
		lead := partitionInfo(left[0], group.Topic, int32(p)).State.Leader
		for _, s := range left {
			if s.cfg.BrokerID == lead && lead != old {
				s.groupLoader.mu.Lock()
				loaded := s.groupLoader.mu.loaded[p]
				s.groupLoader.mu.Unlock()
				return loaded
			}
		}
		return false
	})
	t.Logf("coordinator moved from broker %d to %d; loaded after %v", old, partitionInfo(left[0], group.Topic, int32(p)).State.Leader, time.Since(start))
	return left
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
// group member that commits after every record, waits until the log
// cleaner of every broker has compacted its replica of the group's
// partition of __consumer_offsets, then shuts down that partition's leader
// (the coordinator): the new coordinator replays only the compacted log,
// and a new member of the group, served by it, starts exactly at the last
// commits, reading nothing twice beyond them and skipping nothing.
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
	want := committed(t, admin, grp, topic)
	m.close()
	waitGroupState(t, admin, grp, "Empty", 0)
	for q := range partitions {
		if want[q] != done[q] || want[q] != rounds*perRound-3 {
			t.Fatalf("partition %d committed at %d, the member committed %d, want %d", q, want[q], done[q], rounds*perRound-3)
		}
	}
	t.Logf("%d commits to %s-%d in %v; log end %d", commits, group.Topic, p, time.Since(began), srv[0].topic(group.Topic).local(int32(p)).log.LogEndOffset())

	sizes := waitOffsetsCleaned(t, srv, p)
	left := moveCoordinator(t, srv, p)
	lead := partitionInfo(left[0], group.Topic, int32(p)).State.Leader
	reported := false
	for _, s := range left {
		for _, r := range s.groupLoader.loadReports() {
			if s.cfg.BrokerID != lead || r.Partition != p {
				continue
			}
			reported = true
			t.Logf("new coordinator (broker %d) replayed %d records, %d bytes in %v", lead, r.Records, r.Bytes, r.Duration)
			if r.Records*4 > commits || r.Offsets != int(partitions) || r.Bytes > slices.Max(sizes) {
				t.Errorf("new coordinator replayed %d records, %d bytes and loaded %d offsets; want under a quarter of the %d commits, at most the %d bytes of the cleaned logs, and %d offsets",
					r.Records, r.Bytes, r.Offsets, commits, slices.Max(sizes), partitions)
			}
		}
	}
	if !reported {
		t.Errorf("the new coordinator, broker %d, has no load report of partition %d", lead, p)
	}
	admin = newClient(t, left[0])
	if g := describeGroup(t, admin, grp); g.State != "Empty" || g.ProtocolType != "consumer" {
		t.Fatalf("after the move: group state %s protocol type %q, want Empty consumer", g.State, g.ProtocolType)
	}
	if got := committed(t, admin, grp, topic); !maps.Equal(got, want) {
		t.Fatalf("after compaction and the move: committed %v, want %v", got, want)
	}

	producer = newClient(t, left[0], kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	b := startMember(t, left[0].Addr().String(), grp, "member-b", topic)
	produceTracked(t, h, producer, topic, partitions, 1, "last")
	waitRecords(t, int(partitions)*4, b) // the three uncommitted and the last of each
	next := map[int32]int64{}
	for _, r := range b.records() {
		w, ok := next[r.Partition]
		if !ok {
			w = want[r.Partition]
		}
		if r.Offset != w {
			t.Fatalf("after the move the group read %d/%d (%s), want offset %d (from its commit %d, in order, once)", r.Partition, r.Offset, r.Value, w, want[r.Partition])
		}
		next[r.Partition] = w + 1
	}
	for q := range partitions {
		if next[q] != rounds*perRound+1 {
			t.Fatalf("partition %d read up to %d, want %d", q, next[q], rounds*perRound+1)
		}
	}
	checkHistory(t, h, left[0], topic, partitions, rounds*perRound+1, map[string]*groupMember{"member-a": m, "member-b": b})
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
