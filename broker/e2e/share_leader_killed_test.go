package e2e

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratastream/strata/broker/strataapi"
	"github.com/stratastream/strata/segment/poll"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Settings of the share-group fault test: short locks and a low delivery
// limit so that expiries and archiving happen within the test.
const (
	shareTestLock  = 2 * time.Second
	shareTestLimit = 3
	// shareTestSession is the share session timeout: the killed consumer
	// process stays a member this long, and a partition assigned to it
	// alone waits for the assignment that follows its removal.
	shareTestSession = 6 * time.Second
)

// TestShareGroupLeaderKilled: three broker processes with ZooKeeper, a
// topic of four partitions with three replicas, records produced with
// acks=all, and real franz-go share consumers of one share group:
//   - a consumer process (this test binary again) that acquires records
//     and is killed with SIGKILL holding them;
//   - a consumer that holds its records past their lock and then
//     accepts them (its acknowledgements of records since given to
//     others must be refused);
//   - seven consumers that accept, release or reject each record by its
//     number (every tenth is always released, so it is archived at
//     group.share.delivery.count.limit);
//
// and, once a quarter of the records are accepted, a kill -9 of the
// leader of partition 0. The test waits until the share coordinator's
// state of every partition starts at the log end (everything accepted
// or archived) and checks the ledger of what the consumers saw
// (share_ledger_test.go).
//
// On a stall it logs what the brokers think of the unfinished
// partitions (logShareView).
func TestShareGroupLeaderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end tests do not run with -short")
	}
	const (
		topic, group = "shq", "shq-workers"
		parts        = 4
		perPart      = 1500
		// workers: with the stuck consumer, twice as many members as
		// partitions, so the simple assignor gives every partition to
		// two members. With fewer, the stuck consumer (which does not
		// poll while it waits for its records to go to another) could
		// get a partition alone, and nobody would fetch its expired
		// records until it left: the stall, 60 s then a pass, that kept
		// this test out of make test.
		workers = 2*parts - 1
	)
	c := StartCluster(t, 3,
		"share.coordinator.state.topic.num.partitions=3",
		"share.coordinator.state.topic.replication.factor=3",
		"share.coordinator.state.topic.min.isr=2",
		"group.share.min.record.lock.duration.ms=1000",
		"group.share.record.lock.duration.ms="+strconv.Itoa(int(shareTestLock.Milliseconds())),
		"group.share.delivery.count.limit="+strconv.Itoa(shareTestLimit),
		"group.share.min.session.timeout.ms=1000",
		"group.share.session.timeout.ms="+strconv.Itoa(int(shareTestSession.Milliseconds())),
		"group.share.min.heartbeat.interval.ms=500",
		"group.share.heartbeat.interval.ms=1000")
	md := c.createTopicWith(t, topic, parts, 3, map[string]string{"min.insync.replicas": "2"})
	tid := md.Topics[topic].ID
	c.setGroupConfig(t, group, "share.auto.offset.reset", "earliest")
	produced := c.produceAllAcked(t, topic, parts, perPart)
	l := newShareLedger(shareTestLock, shareTestLimit)
	seeds := c.LiveAddrs()

	// The consumer process and the stuck consumer take records first.
	crashed := startShareConsumerProcess(t, seeds, group, topic, l)
	stuck := newShareWorker(t, "stuck", seeds, group, topic, l)
	held := stuck.pollHeld(t)
	crashed.kill(t)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for i := range workers {
		w := newShareWorker(t, fmt.Sprintf("w%d", i), seeds, group, topic, l)
		wg.Add(1)
		go func() { defer wg.Done(); w.run(ctx, shareQueuePolicy) }()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		stuck.ackLate(ctx, held)
		stuck.cl.Close() // leaves the group: an idle member would stall partitions assigned to it alone
	}()

	poll.Until(t, 60*time.Second, "a quarter of the records accepted", func() bool { return l.accepted() >= parts*perPart/4 })
	victim := c.killShareLeader(t, topic, 0, l)
	t.Logf("killed broker %d, the leader of partition 0, at %d records accepted", victim, l.accepted())

	final := c.waitShareFinished(t, group, tid, parts, perPart, l)
	cancel()
	wg.Wait()
	counts := l.check(t, produced)
	t.Logf("share coordinator state: %s", final)
	t.Logf("checker: %v", counts)
	if counts.crashedHeld == 0 || counts.staleAcksSent == 0 || counts.archivedAtLimit == 0 {
		t.Errorf("the faults did not happen as planned: %v", counts)
	}
}

// shareQueuePolicy is what the workers answer to record seq delivered
// for the count-th time: REJECT every tenth from 3, RELEASE always every
// tenth from 7 (archived at the delivery limit), RELEASE the first
// delivery of every tenth from 5, ACCEPT the rest.
func shareQueuePolicy(seq int, count int32) kgo.AckStatus {
	switch seq % 10 {
	case 3:
		return kgo.AckReject
	case 7:
		return kgo.AckRelease
	case 5:
		if count == 1 {
			return kgo.AckRelease
		}
	}
	return kgo.AckAccept
}

// setGroupConfig sets a group config with IncrementalAlterConfigs and
// waits until every broker describes it.
func (c *Cluster) setGroupConfig(t *testing.T, group, name, value string) {
	t.Helper()
	cl := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = name, kmsg.StringPtr(value)
	res.Configs = append(res.Configs, cfg)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Resources[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("set %s=%s on group %s: %v", name, value, group, err)
	}
	for _, id := range c.IDs() {
		poll.Until(t, 30*time.Second, fmt.Sprintf("broker %d describes %s=%s", id, name, value), func() bool {
			dreq := kmsg.NewPtrDescribeConfigsRequest()
			dres := kmsg.NewDescribeConfigsRequestResource()
			dres.ResourceType, dres.ResourceName, dres.ConfigNames = kmsg.ConfigResourceTypeGroupConfig, group, []string{name}
			dreq.Resources = append(dreq.Resources, dres)
			r, err := cl.Broker(int(id)).Request(ctx, dreq)
			if err != nil {
				return false
			}
			for _, rr := range r.(*kmsg.DescribeConfigsResponse).Resources {
				for _, rc := range rr.Configs {
					if rc.Name == name && rc.Value != nil && *rc.Value == value {
						return true
					}
				}
			}
			return false
		})
	}
}

// produceAllAcked produces perPart records (seqValue) to each partition
// with acks=all and returns their values; any failure fails the test.
func (c *Cluster) produceAllAcked(t *testing.T, topic string, parts int32, perPart int) []string {
	t.Helper()
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var recs []*kgo.Record
	var out []string
	for p := range parts {
		for i := range perPart {
			v := seqValue(p, i)
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)})
			out = append(out, v)
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing %d records: %v", len(recs), err)
	}
	return out
}

// killShareLeader kills -9 the leader of partition p of topic, noting the
// kill and the partitions it led in the ledger first.
func (c *Cluster) killShareLeader(t *testing.T, topic string, p int32, l *shareLedger) int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := c.Metadata(ctx, t)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	victim := md.Topics[topic].Partitions[p].Leader
	l.killed(shareKill{at: time.Now(), broker: victim, partitions: partitionsLedBy(md, topic, victim)})
	c.Broker(victim).Kill(t)
	return victim
}

// waitShareFinished waits until the share coordinator's state of every
// partition of the topic tid starts at perPart (the log end: everything
// accepted or archived, nothing in flight), read back with
// ReadShareGroupState at leader epoch -1 (which fences no one), and
// returns the states read.
func (c *Cluster) waitShareFinished(t *testing.T, group string, tid [16]byte, parts int32, perPart int64, l *shareLedger) string {
	t.Helper()
	cl := c.Client(t)
	states := make([]kmsg.ReadShareGroupStateResponseTopicPartition, parts)
	ok := poll.For(60*time.Second, func() bool {
		done := true
		for p := range parts {
			st, err := readShareState(cl, group, tid, p)
			if err != nil {
				done = false
				continue
			}
			states[p] = st
			done = done && st.StartOffset == perPart
		}
		return done
	})
	var b strings.Builder
	for p, st := range states {
		fmt.Fprintf(&b, "partition %d: start %d, batches %v; ", p, st.StartOffset, st.StateBatches)
		for _, sb := range st.StateBatches {
			if sb.LastOffset >= st.StartOffset && sb.DeliveryState != 2 && sb.DeliveryState != 4 {
				t.Errorf("partition %d: records %d-%d in state %d past the start offset", p, sb.FirstOffset, sb.LastOffset, sb.DeliveryState)
			}
		}
	}
	if !ok {
		t.Logf("the consumers saw: %s", l.byPartition())
		for p, st := range states {
			if st.StartOffset != perPart {
				t.Logf("partition %d from %d: %s", p, st.StartOffset, l.dump(int32(p), int(st.StartOffset), int(st.StartOffset)+12))
			}
		}
		c.logShareView(t, group, parts)
		t.Fatalf("share partitions not finished at %d: %s", perPart, b.String())
	}
	return b.String()
}

// logShareView logs, for a stalled test, what the brokers think: the
// group's members and assignments (ShareGroupDescribe), and each
// partition's leader, high watermark and in-memory share partition
// (DescribeSharePartitions, Strata's key 10001).
func (c *Cluster) logShareView(t *testing.T, group string, parts int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(c.Client(t))
	if d, err := adm.DescribeShareGroups(ctx, group); err != nil {
		t.Logf("ShareGroupDescribe: %v", err)
	} else {
		for _, g := range d {
			t.Logf("group %s: state %s, epoch %d, coordinator %d, err %v", g.GroupID, g.GroupState, g.GroupEpoch, g.Coordinator.NodeID, g.Err)
			for _, m := range g.Members {
				t.Logf("  member %s (%s): epoch %d, assigned %v", m.MemberID, m.ClientID, m.MemberEpoch, m.Assignment)
			}
		}
	}
	md, err := c.Metadata(ctx, t)
	if err != nil {
		t.Logf("metadata: %v", err)
		return
	}
	ends, err := adm.ListEndOffsets(ctx, "shq")
	if err != nil {
		t.Logf("end offsets: %v", err)
	}
	for p := range parts {
		mp := md.Topics["shq"].Partitions[p]
		end, _ := ends.Lookup("shq", p)
		view := "unknown"
		if mp.Leader > 0 {
			view = describeSharePartitionAt(c.Broker(mp.Leader).Addr, group, "shq", p)
		}
		t.Logf("partition %d: leader %d epoch %d isr %v, end offset %d (%v); leader's share partition: %s", p, mp.Leader, mp.LeaderEpoch, mp.ISR, end.Offset, end.Err, view)
	}
}

// describeSharePartitionAt asks the broker at addr for its in-memory
// share partition of group on topic partition p.
func describeSharePartitionAt(addr, group, topic string, p int32) string {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err.Error()
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	req := &strataapi.DescribeSharePartitionsRequest{GroupID: group, Topics: []strataapi.DescribeSharePartitionsRequestTopic{{Topic: topic, Partitions: []int32{p}}}}
	resp := req.ResponseKind().(*strataapi.DescribeSharePartitionsResponse)
	if err := strataapi.RoundTrip(conn, "e2e", 1, req, resp); err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%+v", resp)
}

// readShareState reads a share partition's state from its share
// coordinator (FindCoordinator key type 2).
func readShareState(cl *kgo.Client, group string, tid [16]byte, p int32) (kmsg.ReadShareGroupStateResponseTopicPartition, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var none kmsg.ReadShareGroupStateResponseTopicPartition
	freq := kmsg.NewPtrFindCoordinatorRequest()
	freq.CoordinatorType = 2
	freq.CoordinatorKeys = []string{group + ":" + base64.RawURLEncoding.EncodeToString(tid[:]) + ":" + strconv.Itoa(int(p))}
	fresp, err := freq.RequestWith(ctx, cl)
	if err != nil {
		return none, err
	}
	if err := kerr.ErrorForCode(fresp.Coordinators[0].ErrorCode); err != nil {
		return none, err
	}
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = group
	rt := kmsg.NewReadShareGroupStateRequestTopic()
	rt.TopicID = tid
	rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch = p, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Broker(int(fresp.Coordinators[0].NodeID)).Request(ctx, req)
	if err != nil {
		return none, err
	}
	got := resp.(*kmsg.ReadShareGroupStateResponse).Topics[0].Partitions[0]
	return got, kerr.ErrorForCode(got.ErrorCode)
}

// shareSink is where a share worker reports what it saw: the ledger, or
// (in the consumer process) the standard output.
type shareSink interface {
	delivered([]*shareDelivery)
	acking([]*shareDelivery, kgo.AckStatus, time.Time)
	answered([]*shareDelivery, []shareAckOutcome, time.Time)
	event(consumer string, at time.Time)
	discarded(consumer string, at time.Time)
}

// shareWorker is one franz-go share consumer reporting to a sink.
type shareWorker struct {
	name      string
	cl        *kgo.Client
	sink      shareSink
	prevStart time.Time // the start of the previous poll
	mu        sync.Mutex
	results   []kgo.ShareAckResult
}

// newShareWorker starts a share consumer of topic in group, polling
// with MaxConcurrentFetches 0 (ShareMaxRecordsStrict: nothing is
// acquired between polls) at most 10 records at a time. It is closed
// when the test ends.
func newShareWorker(t testing.TB, name string, seeds []string, group, topic string, sink shareSink) *shareWorker {
	t.Helper()
	w := &shareWorker{name: name, sink: sink, prevStart: time.Now()}
	watch := newShareWatch(func(at time.Time) { sink.event(name, at) })
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...),
		kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
		kgo.ShareMaxRecords(10), kgo.ShareMaxRecordsStrict(),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ShareAckCallback(w.onAck),
		kgo.Dialer(watch.dial),
		kgo.WithLogger(shareDiscardLog{func(at time.Time) { sink.discarded(name, at) }}),
		kgo.DialTimeout(2*time.Second), kgo.RetryTimeout(20*time.Second),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(time.Second),
	)
	if err != nil {
		t.Fatalf("share consumer %s: %v", name, err)
	}
	w.cl = cl
	t.Cleanup(cl.Close)
	return w
}

func (w *shareWorker) onAck(_ *kgo.Client, rs kgo.ShareAckResults) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.results = append(w.results, rs...)
}

func (w *shareWorker) takeResults() []kgo.ShareAckResult {
	w.mu.Lock()
	defer w.mu.Unlock()
	rs := w.results
	w.results = nil
	return rs
}

// poll polls once and reports the records given; with policy, it
// acknowledges each as policy says, flushes, and reports the answers.
func (w *shareWorker) poll(ctx context.Context, policy func(seq int, count int32) kgo.AckStatus) ([]*shareDelivery, []*kgo.Record) {
	start := time.Now()
	fs := w.cl.PollRecords(ctx, 10)
	at := time.Now()
	notBefore := w.prevStart
	w.prevStart = start
	var ds []*shareDelivery
	recs := fs.Records()
	for _, r := range recs {
		ds = append(ds, &shareDelivery{consumer: w.name, value: string(r.Value), partition: r.Partition, count: r.DeliveryCount(), notBefore: notBefore, at: at})
	}
	w.sink.delivered(ds)
	if policy == nil || len(ds) == 0 {
		return ds, recs
	}
	for i, d := range ds {
		_, seq, _ := parseSeqValue(d.value)
		st := policy(seq, d.count)
		w.sink.acking(ds[i:i+1], st, time.Now())
		recs[i].Ack(st)
	}
	w.flush(ctx, ds)
	return ds, recs
}

// flush sends the acknowledgements made and reports their answers.
func (w *shareWorker) flush(ctx context.Context, ds []*shareDelivery) {
	err := w.cl.FlushAcks(ctx)
	w.sink.answered(ds, ackOutcomes(ds, w.takeResults(), err), time.Now())
}

// run polls and acknowledges by policy until ctx ends.
func (w *shareWorker) run(ctx context.Context, policy func(seq int, count int32) kgo.AckStatus) {
	for ctx.Err() == nil {
		w.poll(ctx, policy)
	}
}

// pollHeld polls until the worker holds records and returns them,
// unacknowledged.
func (w *shareWorker) pollHeld(t *testing.T) shareHeld {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if ds, recs := w.poll(ctx, nil); len(ds) > 0 {
			return shareHeld{ds, recs}
		}
	}
	t.Fatalf("%s got no records", w.name)
	return shareHeld{}
}

// shareHeld are records a worker holds without acknowledging them.
type shareHeld struct {
	ds   []*shareDelivery
	recs []*kgo.Record
}

// ackLate waits until one of the held records is given to another
// consumer (its lock expired), then accepts them all.
func (w *shareWorker) ackLate(ctx context.Context, h shareHeld) {
	l := w.sink.(*shareLedger)
	values := make([]string, len(h.ds))
	for i, d := range h.ds {
		values[i] = d.value
	}
	if !poll.For(60*time.Second, func() bool { return ctx.Err() != nil || l.deliveredTo(values, w.name) }) || ctx.Err() != nil {
		return
	}
	l.acking(h.ds, kgo.AckAccept, time.Now())
	for _, r := range h.recs {
		r.Ack(kgo.AckAccept)
	}
	w.flush(ctx, h.ds)
}

// The consumer process: TestShareGroupConsumerProcess run by
// startShareConsumerProcess with these variables set.
const (
	shareChildSeeds = "STRATA_SHARE_CHILD_SEEDS"
	shareChildGroup = "STRATA_SHARE_CHILD_GROUP"
	shareChildTopic = "STRATA_SHARE_CHILD_TOPIC"
)

// TestShareGroupConsumerProcess is not a test of its own: it is the
// share consumer process of TestShareGroupLeaderKilled. It polls until
// it holds records, writes what it was given and its lock-losing events
// on its standard output, says "held", and holds them until its standard
// input ends (or the parent kills it).
func TestShareGroupConsumerProcess(t *testing.T) {
	seeds := os.Getenv(shareChildSeeds)
	if seeds == "" {
		t.Skip("the consumer process of TestShareGroupLeaderKilled")
	}
	out := &stdoutSink{}
	w := newShareWorker(t, "crashed", strings.Split(seeds, ","), os.Getenv(shareChildGroup), os.Getenv(shareChildTopic), out)
	w.pollHeld(t)
	out.line("held")
	_, _ = io.Copy(io.Discard, os.Stdin) // holds until the parent goes
}

// stdoutSink writes a consumer process's deliveries and events as
// lines: "delivery <value> <partition> <count> <notBefore> <at>" and
// "event <at>" and "discard <at>" (Unix nanoseconds).
type stdoutSink struct{ mu sync.Mutex }

func (s *stdoutSink) line(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(os.Stdout, "\n"+format+"\n", args...)
}

func (s *stdoutSink) delivered(ds []*shareDelivery) {
	for _, d := range ds {
		s.line("delivery %s %d %d %d %d", d.value, d.partition, d.count, d.notBefore.UnixNano(), d.at.UnixNano())
	}
}
func (s *stdoutSink) acking([]*shareDelivery, kgo.AckStatus, time.Time)       {}
func (s *stdoutSink) answered([]*shareDelivery, []shareAckOutcome, time.Time) {}
func (s *stdoutSink) event(_ string, at time.Time)                            { s.line("event %d", at.UnixNano()) }
func (s *stdoutSink) discarded(_ string, at time.Time)                        { s.line("discard %d", at.UnixNano()) }

// shareProcess is the running consumer process.
type shareProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	held  chan struct{}
	done  chan struct{} // its output read to the end
	l     *shareLedger
	out   strings.Builder // lines not understood
}

// startShareConsumerProcess starts the consumer process, its deliveries
// and events read into l as consumer "crashed".
func startShareConsumerProcess(t *testing.T, seeds []string, group, topic string, l *shareLedger) *shareProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestShareGroupConsumerProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "STRATA_BIN="+strataBin, shareChildSeeds+"="+strings.Join(seeds, ","),
		shareChildGroup+"="+group, shareChildTopic+"="+topic)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the consumer process: %v", err)
	}
	p := &shareProcess{cmd: cmd, stdin: stdin, held: make(chan struct{}), done: make(chan struct{}), l: l}
	go p.read(stdout)
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // gone already is fine
		<-p.done
		_ = cmd.Wait() // killed: its status says so
	})
	return p
}

// read reads the process's lines into the ledger.
func (p *shareProcess) read(r io.Reader) {
	defer close(p.done)
	sc := bufio.NewScanner(r)
	held := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 1 && f[0] == "held" && !held:
			held = true
			close(p.held)
		case len(f) == 2 && f[0] == "event":
			if at, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				p.l.event("crashed", time.Unix(0, at))
			}
		case len(f) == 2 && f[0] == "discard":
			if at, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				p.l.discarded("crashed", time.Unix(0, at))
			}
		case len(f) == 6 && f[0] == "delivery":
			part, _ := strconv.Atoi(f[2])
			count, _ := strconv.Atoi(f[3])
			nb, _ := strconv.ParseInt(f[4], 10, 64)
			at, _ := strconv.ParseInt(f[5], 10, 64)
			p.l.delivered([]*shareDelivery{{consumer: "crashed", value: f[1], partition: int32(part), count: int32(count), notBefore: time.Unix(0, nb), at: time.Unix(0, at)}})
		case len(f) > 0:
			p.out.WriteString(sc.Text() + "\n")
		}
	}
}

// kill waits until the process holds records and kills it with
// SIGKILL, noting the moment as its lock-losing event.
func (p *shareProcess) kill(t *testing.T) {
	t.Helper()
	select {
	case <-p.held:
	case <-p.done:
		t.Fatalf("the consumer process ended before holding records:\n%s", p.out.String())
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill() // its output is read to the end before it is shown
		<-p.done
		t.Fatalf("the consumer process holds no records after 60s:\n%s", p.out.String())
	}
	p.l.event("crashed", time.Now())
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill -9 of the consumer process: %v", err)
	}
	<-p.done
}
