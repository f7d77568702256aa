package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/broker/group"
	"github.com/stratastream/strata/coord/zktest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// These tests run a real ZooKeeper (coord/zktest) and three real `strata
// broker` processes, and check the coordination layer end to end:
// leadership spread, failover after kill -9 of a broker and of the
// controller, rejoining, a duplicate broker id refused, and a ZooKeeper
// outage during which the brokers keep serving, a broker cut off
// ZooKeeper whose acks=all writes are never acknowledged. Replication's
// own tests are in replication_test.go.

// createTopic creates topic through CreateTopics and waits until every
// partition has a live leader in Metadata.
func (c *Cluster) createTopic(t *testing.T, topic string, partitions int32, rf int16) kadm.Metadata {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(c.Client(t))
	resp, err := adm.CreateTopic(ctx, partitions, rf, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating %s (%d partitions, RF %d): %v %s", topic, partitions, rf, err, resp.ErrMessage)
	}
	var md kadm.Metadata
	c.WaitMetadata(t, 60*time.Second, "leaders of "+topic, func(m kadm.Metadata) string {
		td, ok := m.Topics[topic]
		if !ok || len(td.Partitions) != int(partitions) {
			return "topic not listed with all partitions"
		}
		for p, d := range td.Partitions {
			if d.Leader < 0 || len(d.Replicas) != int(rf) {
				return fmt.Sprintf("partition %d: leader %d, replicas %v", p, d.Leader, d.Replicas)
			}
		}
		md = m
		return ""
	})
	return md
}

// duplicateResult is how a broker started with a taken id ended.
type duplicateResult struct {
	code    int
	output  string
	elapsed time.Duration
	err     error
}

// startDuplicate runs a broker with an id that a live broker holds, on its
// own port and data directory, and reports its exit.
func (c *Cluster) startDuplicate(t *testing.T, id int32) <-chan duplicateResult {
	args := []string{"broker",
		"--override", "listeners=PLAINTEXT://" + freeAddr(t),
		"--override", "log.dirs=" + filepath.Join(t.TempDir(), "dup"),
		"--override", "metrics.listener=",
	}
	for _, o := range c.brokerOverrides(int(id), nil) {
		args = append(args, "--override", o)
	}
	out := make(chan duplicateResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		start := time.Now()
		b, err := exec.CommandContext(ctx, strataBin, args...).CombinedOutput()
		res := duplicateResult{output: string(b), elapsed: time.Since(start)}
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			res.code = ee.ExitCode()
		case err != nil:
			res.err = err
		}
		out <- res
	}()
	return out
}

// checkNotLeader sends Produce, Fetch, ListOffsets and OffsetForLeaderEpoch
// for partition p of topic straight to broker id, which does not lead it,
// and wants NOT_LEADER_OR_FOLLOWER from each.
func checkNotLeader(t *testing.T, cl *kgo.Client, id int32, topic string, p int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	br := cl.Broker(int(id))
	want := kerr.NotLeaderForPartition.Code

	prod := kmsg.NewPtrProduceRequest()
	prod.Acks, prod.TimeoutMillis = 1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition, pp.Records = p, encodeBatch([][]byte{[]byte("misdirected")})
	pt.Partitions = append(pt.Partitions, pp)
	prod.Topics = append(prod.Topics, pt)

	fetch := kmsg.NewPtrFetchRequest()
	fetch.MaxWaitMillis, fetch.MinBytes, fetch.MaxBytes = 0, 1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.PartitionMaxBytes = p, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)

	list := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.Timestamp = p, -1
	lt.Partitions = append(lt.Partitions, lp)
	list.Topics = append(list.Topics, lt)

	ofe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
	ot.Topic = topic
	op := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	op.Partition, op.LeaderEpoch = p, 0
	ot.Partitions = append(ot.Partitions, op)
	ofe.Topics = append(ofe.Topics, ot)

	for _, req := range []kmsg.Request{prod, fetchV12{fetch}, list, ofe} {
		resp, err := br.Request(ctx, req)
		if err != nil {
			t.Fatalf("%T to broker %d: %v", req, id, err)
		}
		var code int16
		switch r := resp.(type) {
		case *kmsg.ProduceResponse:
			code = r.Topics[0].Partitions[0].ErrorCode
		case *kmsg.FetchResponse:
			code = r.Topics[0].Partitions[0].ErrorCode
		case *kmsg.ListOffsetsResponse:
			code = r.Topics[0].Partitions[0].ErrorCode
		case *kmsg.OffsetForLeaderEpochResponse:
			code = r.Topics[0].Partitions[0].ErrorCode
		}
		if code != want {
			t.Errorf("%T for %s-%d to broker %d (not its leader): error %v, want NOT_LEADER_OR_FOLLOWER", req, topic, p, id, kerr.ErrorForCode(code))
		}
	}
}

// checkGroups consumes topic with a consumer group and commits, checks
// that every broker names the same coordinator for it, the leader of the
// group's partition of __consumer_offsets, and that another broker
// answers the group's requests with NOT_COORDINATOR.
func (c *Cluster) checkGroups(t *testing.T, topic string, records int) {
	t.Helper()
	const g = "cluster-group"
	// Closed (leaving the group) while its coordinator is alive: the test
	// kills brokers later.
	cl := c.newClient(t, kgo.ConsumerGroup(g), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := 0
	for n < records {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("group %s consumed %d of %d records: %v", g, n, records, ctx.Err())
		}
		n += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("committing: %v", err)
	}
	md, err := c.Metadata(ctx, t)
	if err != nil {
		t.Fatal(err)
	}
	offsets := md.Topics[group.Topic]
	if len(offsets.Partitions) != 3 {
		t.Fatalf("%s has %d partitions, want 3", group.Topic, len(offsets.Partitions))
	}
	leader := offsets.Partitions[int32(group.PartitionFor(g, 3))].Leader
	for _, id := range c.IDs() {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey, req.CoordinatorKeys = g, []string{g}
		resp, err := cl.Broker(int(id)).Request(ctx, req)
		if err != nil {
			t.Fatalf("FindCoordinator at broker %d: %v", id, err)
		}
		r := resp.(*kmsg.FindCoordinatorResponse)
		node := r.NodeID
		if len(r.Coordinators) > 0 {
			node = r.Coordinators[0].NodeID
		}
		if node != leader {
			t.Errorf("broker %d names coordinator %d for %s, want %d (leader of its %s partition)", id, node, g, leader, group.Topic)
		}
		if id == leader {
			continue
		}
		of := kmsg.NewPtrOffsetFetchRequest()
		of.Group = g
		og := kmsg.NewOffsetFetchRequestGroup()
		og.Group = g
		of.Groups = append(of.Groups, og)
		oresp, err := cl.Broker(int(id)).Request(ctx, of)
		if err != nil {
			t.Fatalf("OffsetFetch at broker %d: %v", id, err)
		}
		o := oresp.(*kmsg.OffsetFetchResponse)
		code := o.ErrorCode
		if len(o.Groups) > 0 {
			code = o.Groups[0].ErrorCode
		}
		if code != kerr.NotCoordinator.Code {
			t.Errorf("OffsetFetch at broker %d, not the coordinator: error %v, want NOT_COORDINATOR", id, kerr.ErrorForCode(code))
		}
	}
	committed, err := kadm.NewClient(cl).FetchOffsets(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	sum := int64(0)
	committed.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != int64(records) {
		t.Errorf("group %s committed offsets summing to %d, want %d", g, sum, records)
	}
	t.Logf("group %s coordinated by broker %d; %d records consumed and committed", g, leader, records)
}

func TestClusterFailover(t *testing.T) {
	c := StartCluster(t, 3)
	const topic = "spread"
	md := c.createTopic(t, topic, 3, 3)

	// Three partitions with three replicas on three brokers: each broker
	// leads exactly one, and every replica is in sync (at creation).
	for _, id := range c.IDs() {
		if led := partitionsLedBy(md, topic, id); len(led) != 1 {
			t.Fatalf("broker %d leads partitions %v, want exactly one; leaders %v", id, led, leadersOf(md, topic))
		}
	}
	for p, d := range md.Topics[topic].Partitions {
		if len(d.ISR) != 3 || d.Replicas[0] != d.Leader {
			t.Fatalf("partition %d: leader %d, replicas %v, isr %v; want the preferred replica leading, all in sync", p, d.Leader, d.Replicas, d.ISR)
		}
	}
	controller := md.Controller
	var victim, survivor int32
	for _, id := range c.IDs() {
		if id != controller {
			if victim == 0 {
				victim = id
			} else {
				survivor = id
			}
		}
	}
	t.Logf("controller %d, victim %d, survivor %d, leaders %v", controller, victim, survivor, leadersOf(md, topic))
	cluster := runCmd(t, 30*time.Second, "", strataBin, "cluster", "--bootstrap-server", c.Broker(victim).Addr)
	if !strings.Contains(cluster, fmt.Sprintf("Controller: %d\nBrokers: 3\n", controller)) {
		t.Errorf("strata cluster:\n%s", cluster)
	}
	for _, id := range c.IDs() {
		if !strings.Contains(cluster, fmt.Sprintf("\n%d    %s", id, c.Broker(id).Addr)) {
			t.Errorf("strata cluster does not list broker %d at %s:\n%s", id, c.Broker(id).Addr, cluster)
		}
	}

	// A second broker with a live broker's id is refused (after waiting
	// the session timeout for that registration to go).
	dup := c.startDuplicate(t, survivor)

	all := []int32{0, 1, 2}
	prod := c.producerClient(t)
	produceTo(t, prod, topic, all, 10, "before")
	if got := c.consumeAll(t, topic, all, 30); len(got) != 30 {
		t.Fatalf("consumed %d records, want 30", len(got))
	}
	// Brokers that do not lead a partition send clients to its leader.
	for p, l := range leadersOf(md, topic) {
		for _, id := range c.IDs() {
			if id != l {
				checkNotLeader(t, prod, id, topic, p)
			}
		}
	}
	c.checkGroups(t, topic, 30)

	// kill -9 a broker that is not the controller: its partition gets a
	// new leader once its session expires (the time is logged, a
	// measurement for docs/cluster.md; killLeader's bound fails a
	// failover that does not happen).
	killed, victimParts, md := c.killLeader(t, topic, md, victim)
	failover := time.Since(killed)
	t.Logf("broker %d killed: its partitions %v had new leaders in Metadata after %v (session timeout %v); leaders %v",
		victim, victimParts, failover.Round(time.Millisecond), clusterSessionTimeout, leadersOf(md, topic))
	for p, d := range md.Topics[topic].Partitions {
		if slices.Contains(d.ISR, victim) || !slices.Contains(d.OfflineReplicas, victim) {
			t.Errorf("partition %d: isr %v, offline %v; want broker %d out of the ISR and offline", p, d.ISR, d.OfflineReplicas, victim)
		}
	}
	desc := c.Describe(t, topic)
	t.Logf("strata topic describe after the kill:\n%s", desc)
	if strings.Contains(desc, "Leader: "+strconv.Itoa(int(victim))+"\t") || strings.Count(desc, "Offline: "+strconv.Itoa(int(victim))) != 3 {
		t.Errorf("describe does not show broker %d dead:\n%s", victim, desc)
	}
	for p := range leadersOf(md, topic) {
		want := fmt.Sprintf("Partition: %d\tLeader: %d\t", p, md.Topics[topic].Partitions[p].Leader)
		if !strings.Contains(desc, want) {
			t.Errorf("describe lacks %q:\n%s", want, desc)
		}
	}
	produceTo(t, prod, topic, all, 5, "after-kill")
	// The group's committed offsets survive the loss of a broker (its
	// coordinator, when the victim was): __consumer_offsets is replicated.
	fctx, fcancel := context.WithTimeout(context.Background(), 20*time.Second)
	committed, err := kadm.NewClient(c.Client(t)).FetchOffsets(fctx, "cluster-group")
	fcancel()
	if err != nil {
		t.Fatalf("fetching cluster-group's offsets after broker %d died: %v", victim, err)
	}
	var sum int64
	committed.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != 30 {
		t.Errorf("cluster-group's committed offsets after broker %d died add up to %d, want 30: %v", victim, sum, committed)
	}

	// The killed broker comes back: it catches up by replicating, its
	// partitions' leaders add it back to their ISR, and the controller
	// gives it back its preferred leadership (auto.leader.rebalance).
	c.Broker(victim).Restart(t)
	back := time.Now()
	c.WaitMetadata(t, 60*time.Second, fmt.Sprintf("broker %d back in every ISR and leading its preferred partitions", victim), func(m kadm.Metadata) string {
		if !slices.Contains(m.Brokers.NodeIDs(), victim) {
			return fmt.Sprintf("broker %d not registered", victim)
		}
		for p, d := range m.Topics[topic].Partitions {
			if !slices.Contains(d.ISR, victim) || d.Leader != d.Replicas[0] {
				return fmt.Sprintf("partition %d: leader %d, replicas %v, isr %v", p, d.Leader, d.Replicas, d.ISR)
			}
		}
		md = m
		return ""
	})
	t.Logf("broker %d rejoined every ISR and leads its preferred partitions again %v after its restart; leaders %v",
		victim, time.Since(back).Round(time.Millisecond), leadersOf(md, topic))
	// Its partitions, now led by it again, hold what was written while it
	// was down.
	if got := c.consumeAll(t, topic, all, 45); len(got) != 45 {
		t.Fatalf("consumed %d records after broker %d came back, want 45", len(got), victim)
	}
	if _, stderr, err := tryCmd(30*time.Second, "", strataBin, "topic", "elect-leaders", "--topic", topic, "--bootstrap-server", strings.Join(c.LiveAddrs(), ",")); err != nil {
		t.Errorf("elect-leaders with every preferred replica leading: %v, stderr %q", err, stderr)
	}

	res := <-dup
	t.Logf("duplicate broker.id=%d exited with %d after %v", survivor, res.code, res.elapsed.Round(time.Millisecond))
	if res.err != nil || res.code != 1 || !strings.Contains(res.output, "already registered") || strings.Contains(res.output, listeningMarker) {
		t.Errorf("broker with the taken id %d: exit %d (%v), output:\n%s", survivor, res.code, res.err, res.output)
	}

	// kill -9 the controller: another broker takes the role and the
	// cluster keeps working.
	c.Broker(controller).Kill(t)
	killed = time.Now()
	var newController time.Duration
	c.WaitMetadata(t, clusterSessionTimeout+60*time.Second, "a new controller and leaders", func(m kadm.Metadata) string {
		if m.Controller < 1 || m.Controller == controller {
			return fmt.Sprintf("controller %d", m.Controller)
		}
		if newController == 0 {
			newController = time.Since(killed)
		}
		for p, l := range leadersOf(m, topic) {
			if l == controller || l < 0 {
				return fmt.Sprintf("partition %d led by %d", p, l)
			}
		}
		md = m
		return ""
	})
	leaders := time.Since(killed)
	t.Logf("controller %d killed: broker %d became controller after %v, all partitions led after %v; leaders %v",
		controller, md.Controller, newController.Round(time.Millisecond), leaders.Round(time.Millisecond), leadersOf(md, topic))
	const after = "after-controller"
	c.createTopic(t, after, 2, 2)
	aprod := c.producerClient(t)
	produceTo(t, aprod, after, []int32{0, 1}, 10, "x")
	if got := c.consumeAll(t, after, []int32{0, 1}, 20); len(got) != 20 {
		t.Fatalf("consumed %d records of %s, want 20", len(got), after)
	}
	t.Logf("strata topic describe after the controller's death:\n%s", c.Describe(t, after))
	for _, id := range []int32{victim, survivor} {
		c.Broker(id).RequireAlive(t)
	}

	// SIGTERM with controlled shutdown: the partitions the stopping
	// broker leads move to their other in-sync replica, the victim, before
	// the process exits.
	c.WaitMetadata(t, 60*time.Second, "metadata", func(m kadm.Metadata) string { md = m; return "" })
	moved := partitionsLedBy(md, after, survivor)
	stopped := time.Now()
	c.Broker(survivor).Stop(t)
	t.Logf("broker %d stopped with SIGTERM in %v; it led %s partitions %v", survivor, time.Since(stopped).Round(time.Millisecond), after, moved)
	m, err := c.Metadata(context.Background(), t)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range moved {
		if l := m.Topics[after].Partitions[p].Leader; l != victim {
			t.Errorf("%s-%d is led by %d right after broker %d stopped, want %d", after, p, l, survivor, victim)
		}
	}
	if slices.Contains(m.Brokers.NodeIDs(), survivor) {
		t.Errorf("broker %d still registered after it stopped", survivor)
	}
	for p, l := range leadersOf(m, topic) {
		if l != victim {
			t.Errorf("%s-%d led by %d right after broker %d stopped, want %d", topic, p, l, survivor, victim)
		}
	}

	// The victim, now the only in-sync replica, takes writes and dies;
	// the survivor comes back out of sync: the partitions stay offline
	// (unclean.leader.election.enable is false) until an unclean election
	// brings them back on it.
	produceTo(t, c.producerClient(t), topic, all, 1, "victim-only")
	c.Broker(victim).Kill(t)
	c.Broker(survivor).Restart(t)
	c.WaitMetadata(t, clusterSessionTimeout+60*time.Second, "offline partitions", func(m kadm.Metadata) string {
		if slices.Contains(m.Brokers.NodeIDs(), victim) || !slices.Contains(m.Brokers.NodeIDs(), survivor) {
			return fmt.Sprintf("brokers %v", m.Brokers.NodeIDs())
		}
		for p, d := range m.Topics[topic].Partitions {
			if d.Leader != -1 {
				return fmt.Sprintf("partition %d: leader %d, isr %v", p, d.Leader, d.ISR)
			}
		}
		return ""
	})
	out := runCmd(t, 30*time.Second, "", strataBin, "topic", "elect-leaders", "--election-type", "unclean", "--topic", topic, "--bootstrap-server", strings.Join(c.LiveAddrs(), ","))
	if !strings.Contains(out, "Elected leaders (unclean)") {
		t.Errorf("elect-leaders --election-type unclean: %q", out)
	}
	c.WaitMetadata(t, 60*time.Second, "unclean leaders", func(m kadm.Metadata) string {
		for p, d := range m.Topics[topic].Partitions {
			if d.Leader != survivor || !slices.Equal(d.ISR, []int32{survivor}) {
				return fmt.Sprintf("partition %d: leader %d, isr %v", p, d.Leader, d.ISR)
			}
		}
		return ""
	})
	t.Logf("after an unclean election:\n%s", c.Describe(t, topic))
	produceTo(t, c.producerClient(t), topic, all, 1, "unclean")
	t.Logf("produced to broker %d, the unclean leader", survivor)
}

func TestClusterZooKeeperOutage(t *testing.T) {
	c := StartCluster(t, 3)
	const topic = "zk-outage"
	md := c.createTopic(t, topic, 3, 3)
	before := leadersOf(md, topic)
	all := []int32{0, 1, 2}
	prod := c.producerClient(t)
	produceTo(t, prod, topic, all, 5, "before")
	acked := 15

	// ZooKeeper goes away for 20 s: the brokers keep serving produce and
	// fetch for the partitions they lead, with the metadata they have.
	const outage = 20 * time.Second
	c.ZK.Stop()
	start := time.Now()
	checkedMetadata := false
	for i := 0; time.Since(start) < outage; i++ {
		produceTo(t, prod, topic, all, 1, fmt.Sprintf("outage%d", i))
		acked += 3
		if !checkedMetadata && time.Since(start) > 2*time.Second {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			m, err := c.Metadata(ctx, t)
			cancel()
			if err != nil {
				t.Fatalf("Metadata during the outage: %v", err)
			}
			if got := leadersOf(m, topic); !maps.Equal(got, before) || len(m.Brokers) != 3 {
				t.Errorf("Metadata during the outage: leaders %v (before %v), %d brokers", got, before, len(m.Brokers))
			}
			checkedMetadata = true
		}
		time.Sleep(500 * time.Millisecond)
	}
	if got := c.consumeAll(t, topic, all, acked); len(got) != acked {
		t.Fatalf("consumed %d records, want %d", len(got), acked)
	}
	t.Logf("ZooKeeper down %v: %d records produced (acks=1) and fetched back", time.Since(start).Round(time.Millisecond), acked)

	// ZooKeeper returns: the cluster recovers, a new topic can be created.
	c.ZK.Restart()
	back := time.Now()
	adm := kadm.NewClient(c.Client(t))
	const next = "after-zk"
	var created time.Duration
	for created == 0 {
		if time.Since(back) > 30*time.Second {
			t.Fatalf("no topic could be created within 30s of ZooKeeper's return")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := adm.CreateTopic(ctx, 2, 3, nil, next)
		cancel()
		if err == nil && (resp.Err == nil || errors.Is(resp.Err, kerr.TopicAlreadyExists)) {
			created = time.Since(back)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("a topic was created %v after ZooKeeper's return", created.Round(time.Millisecond))
	c.WaitMetadata(t, 60*time.Second, "leaders of "+next, func(m kadm.Metadata) string {
		for p, d := range m.Topics[next].Partitions {
			if d.Leader < 0 {
				return fmt.Sprintf("partition %d has no leader", p)
			}
		}
		if len(m.Topics[next].Partitions) != 2 || m.Controller < 1 {
			return fmt.Sprintf("%d partitions, controller %d", len(m.Topics[next].Partitions), m.Controller)
		}
		return ""
	})
	produceTo(t, prod, next, []int32{0, 1}, 5, "y")
	if got := c.consumeAll(t, next, []int32{0, 1}, 10); len(got) != 10 {
		t.Fatalf("consumed %d records of %s, want 10", len(got), next)
	}
	for _, id := range c.IDs() {
		b := c.Broker(id)
		b.RequireAlive(t)
		out := b.Output()
		if n := strings.Count(out, "ZooKeeper unreachable"); n != 1 || !strings.Contains(out, "cause=") {
			t.Errorf("broker %d logged the outage %d times, want once with its cause:\n%s", id, n, out)
		}
	}
}

// TestClusterSessionExpiry cuts one broker off ZooKeeper (through a TCP
// proxy) for longer than its session timeout: the others see it die and
// move its leadership; when it gets through again it finds its session
// expired, registers again with a new session and takes the current
// metadata, so it stops serving the partition it no longer leads.
func TestClusterSessionExpiry(t *testing.T) {
	if strataBin == "" {
		t.Skip("end-to-end tests do not run with -short")
	}
	c := &Cluster{ZK: zktest.Start(t)}
	c.Connect = c.ZK.ConnectString("/strata")
	proxy := zktest.NewProxy(t, c.ZK.Addr())
	for id := 1; id <= 3; id++ {
		var extra []string
		if id == 3 {
			extra = []string{"zookeeper.connect=" + proxy.ConnectString("/strata")}
		}
		c.brokers = append(c.brokers, StartBroker(t, c.brokerOverrides(id, extra)...))
	}
	c.waitAllSee(t, 30*time.Second, 3)
	const topic = "expiry"
	md := c.createTopic(t, topic, 3, 3)
	const cut int32 = 3
	led := partitionsLedBy(md, topic, cut)
	if len(led) != 1 {
		t.Fatalf("broker %d leads %v, want one partition", cut, led)
	}
	p := led[0]

	proxy.Block()
	blocked := time.Now()
	c.WaitMetadata(t, clusterSessionTimeout+60*time.Second, fmt.Sprintf("broker %d gone", cut), func(m kadm.Metadata) string {
		if slices.Contains(m.Brokers.NodeIDs(), cut) {
			return fmt.Sprintf("broker %d still registered", cut)
		}
		if l := m.Topics[topic].Partitions[p].Leader; l == cut || l < 0 {
			return fmt.Sprintf("partition %d led by %d", p, l)
		}
		return ""
	})
	t.Logf("broker %d cut off ZooKeeper: the others moved its partition %d after %v", cut, p, time.Since(blocked).Round(time.Millisecond))

	// Cut off, broker 3 still believes it leads partition p, but the
	// other replicas follow the new leader: an acks=all produce on it is
	// never acknowledged (it is appended there, and thrown away when the
	// broker comes back and truncates to the new leader's log).
	fencedCl, err := kgo.NewClient(kgo.SeedBrokers(c.Broker(cut).Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(), kgo.ProduceRequestTimeout(time.Second),
		kgo.RecordDeliveryTimeout(4*time.Second), kgo.MetadataMaxAge(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	ferr := fencedCl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("fenced")}).FirstErr()
	cancel()
	fencedCl.Close()
	t.Logf("acks=all produce to the cut-off broker %d: %v", cut, ferr)
	if ferr == nil {
		t.Errorf("an acks=all produce to broker %d, cut off from ZooKeeper and from its followers, was acknowledged", cut)
	}

	proxy.Unblock()
	// Asked of the others: the cut-off broker's own view is stale until it
	// reconnects.
	others := &Cluster{ZK: c.ZK, Connect: c.Connect, brokers: c.brokers[:2]}
	others.WaitMetadata(t, 60*time.Second, fmt.Sprintf("broker %d registered again", cut), func(m kadm.Metadata) string {
		if !slices.Contains(m.Brokers.NodeIDs(), cut) {
			return fmt.Sprintf("broker %d not registered", cut)
		}
		return ""
	})
	t.Logf("broker %d registered again %v after it was cut off", cut, time.Since(blocked).Round(time.Millisecond))
	b := c.Broker(cut)
	b.RequireAlive(t)
	if !strings.Contains(b.Output(), "session had expired") {
		t.Errorf("broker %d did not log the session expiry:\n%s", cut, b.Output())
	}
	// acks=all: an acks=1 record the new leader alone had is not
	// committed, and Kafka may drop it when broker 3, back in the ISR
	// before it was replicated, becomes the preferred leader again.
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite())
	produceTo(t, cl, topic, []int32{p}, 2, "while-back")
	// It truncates what it took alone, catches up from the new leader,
	// rejoins the ISR and leads its preferred partition again, at a newer
	// leader epoch.
	others.WaitMetadata(t, 60*time.Second, fmt.Sprintf("broker %d leading partition %d again, in sync", cut, p), func(m kadm.Metadata) string {
		d := m.Topics[topic].Partitions[p]
		if d.Leader != cut || !slices.Contains(d.ISR, cut) || d.LeaderEpoch < 2 {
			return fmt.Sprintf("partition %d: leader %d epoch %d isr %v", p, d.Leader, d.LeaderEpoch, d.ISR)
		}
		return ""
	})
	if !strings.Contains(b.Output(), "replica truncated") {
		t.Errorf("broker %d did not truncate the record it took while cut off:\n%s", cut, b.Output())
	}
	produceTo(t, cl, topic, []int32{0, 1, 2}, 2, "after-expiry")
	got := c.consumeAll(t, topic, []int32{0, 1, 2}, 8)
	if slices.Contains(got, "fenced") || len(got) != 8 {
		t.Errorf("records after broker %d came back: %q; want the 8 acknowledged ones and not the fenced one", cut, got)
	}
}
