package broker

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratastream/strata/broker/replica"
	"github.com/stratastream/strata/coord/zktest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestThrottledReplicasParse checks leader/follower.replication.throttled.replicas
// parsing against Kafka's ThrottledReplicaListValidator and
// ConfigHandler.parseThrottledPartitions.
func TestThrottledReplicasParse(t *testing.T) {
	type probe struct {
		partition, broker int32
		want              bool
	}
	for i, c := range []struct {
		v      string
		ok     bool
		probes []probe
	}{
		{"", true, []probe{{0, 1, false}}},
		{"   ", true, []probe{{0, 1, false}}},
		{"*", true, []probe{{0, 1, true}, {7, 9, true}}},
		{" * ", true, []probe{{3, 3, true}}},
		{"0:1", true, []probe{{0, 1, true}, {0, 2, false}, {1, 1, false}}},
		{"0:1, 1:2 ,2:1", true, []probe{{1, 2, true}, {2, 1, true}, {1, 1, false}}},
		{"0:1,,1:2", true, []probe{{1, 2, true}}}, // empty entries pass Kafka's regex
		{"0:1,*", false, nil},
		{"0", false, nil},
		{"0:", false, nil},
		{":1", false, nil},
		{"a:1", false, nil},
		{"-1:1", false, nil},
		{"+1:1", false, nil},
		{"0:1:2", false, nil},
		{"99999999999:1", false, nil},
	} {
		var r throttledReplicas
		err := r.parse(c.v)
		if (err == nil) != c.ok {
			t.Errorf("#%d %q: got error %v, want ok=%v", i, c.v, err, c.ok)
			continue
		}
		if err != nil {
			if !strings.Contains(err.Error(), "partitionId:brokerId") {
				t.Errorf("#%d %q: error %q does not say the format", i, c.v, err)
			}
			continue
		}
		for _, p := range c.probes {
			if got := r.covers(p.partition, p.broker); got != p.want {
				t.Errorf("#%d %q: covers(%d, %d) = %v, want %v", i, c.v, p.partition, p.broker, got, p.want)
			}
		}
	}
	// Through the registry: a topic config, dynamic, validated.
	for _, name := range []string{"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"} {
		if err := checkTopicConfig(name, kmsg.StringPtr("0:1,1:2")); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if err := checkTopicConfig(name, kmsg.StringPtr("0-1")); err == nil {
			t.Errorf("%s=0-1 accepted", name)
		}
		if err := checkTopicConfigDynamic(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// brokerAlter sends IncrementalAlterConfigs on broker resource name and
// returns the resource's error code.
func brokerAlter(t *testing.T, cl *kgo.Client, name string, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) int16 {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.Configs = kmsg.ConfigResourceTypeBroker, name, ops
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Resources[0].ErrorCode
}

func setOp(name, v string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = name, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(v)
	return c
}

func deleteOp(name string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op = name, kmsg.IncrementalAlterConfigOpDelete
	return c
}

// describedRate returns a rate's value, source and read-only flag as
// DescribeConfigs reports them for broker 0.
func describedRate(t *testing.T, cl *kgo.Client, name string) (string, kmsg.ConfigSource, bool) {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.ConfigNames = kmsg.ConfigResourceTypeBroker, "0", []string{name}
	req.Resources = append(req.Resources, rr)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Resources) != 1 || len(resp.Resources[0].Configs) != 1 {
		t.Fatalf("describe %s: %+v", name, resp.Resources)
	}
	c := resp.Resources[0].Configs[0]
	return *c.Value, c.Source, c.ReadOnly
}

// TestThrottleRatesAtRunTime: the two rates come from the properties
// file, change by IncrementalAlterConfigs SET and DELETE (back to the
// file's value) and by AlterConfigs (unnamed rates go back), reach the
// replication quotas, and are described with their source; bad values
// and operations are refused and change nothing.
func TestThrottleRatesAtRunTime(t *testing.T) {
	const leaderKey, followerKey = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
	s := startServer(t, map[string]string{followerKey: "5000"})
	cl := newClient(t, s)
	rates := func() (int64, int64) { return s.repl.ThrottledRates() }
	if l, f := rates(); l != replica.Unthrottled || f != 5000 {
		t.Fatalf("at start: rates %d, %d; want unthrottled, 5000", l, f)
	}
	if v, src, ro := describedRate(t, cl, followerKey); v != "5000" || src != kmsg.ConfigSourceStaticBrokerConfig || ro {
		t.Fatalf("described %s=%s source %v read-only %v", followerKey, v, src, ro)
	}
	if v, src, _ := describedRate(t, cl, leaderKey); v != strconv.FormatInt(math.MaxInt64, 10) || src != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("described %s=%s source %v", leaderKey, v, src)
	}

	if code := brokerAlter(t, cl, "0", setOp(leaderKey, "1000000"), setOp(followerKey, "2000000")); code != 0 {
		t.Fatalf("SET: error %d", code)
	}
	if l, f := rates(); l != 1000000 || f != 2000000 {
		t.Fatalf("after SET: rates %d, %d", l, f)
	}
	if v, src, _ := describedRate(t, cl, leaderKey); v != "1000000" || src != kmsg.ConfigSourceDynamicBrokerConfig {
		t.Fatalf("described after SET: %s source %v", v, src)
	}
	for i, bad := range [][]kmsg.IncrementalAlterConfigsRequestResourceConfig{
		{setOp(leaderKey, "-1")},
		{setOp(leaderKey, "fast")},
		{setOp(followerKey, "1"), setOp(leaderKey, "x")}, // all or nothing
		{func() kmsg.IncrementalAlterConfigsRequestResourceConfig {
			c := setOp(leaderKey, "1")
			c.Op = kmsg.IncrementalAlterConfigOpAppend
			return c
		}()},
		{setOp(leaderKey, "1"), setOp(leaderKey, "2")},
		{setOp(leaderKey, "1"), setOp("num.partitions", "3")},
	} {
		if code := brokerAlter(t, cl, "", bad...); code == 0 {
			t.Errorf("#%d: accepted", i)
		}
	}
	if l, f := rates(); l != 1000000 || f != 2000000 {
		t.Fatalf("after refused changes: rates %d, %d", l, f)
	}

	if code := brokerAlter(t, cl, "0", deleteOp(followerKey)); code != 0 {
		t.Fatalf("DELETE: error %d", code)
	}
	if l, f := rates(); l != 1000000 || f != 5000 {
		t.Fatalf("after DELETE: rates %d, %d; want 1000000 and the file's 5000", l, f)
	}

	// AlterConfigs replaces the broker's dynamic configs: the leader rate
	// is named, the follower rate goes back to the file's value.
	req := kmsg.NewPtrAlterConfigsRequest()
	rr := kmsg.NewAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeBroker, "0"
	c := kmsg.NewAlterConfigsRequestResourceConfig()
	c.Name, c.Value = leaderKey, kmsg.StringPtr("0")
	rr.Configs = append(rr.Configs, c)
	req.Resources = append(req.Resources, rr)
	if code := brokerAlter(t, cl, "0", setOp(followerKey, "9")); code != 0 {
		t.Fatal(code)
	}
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("AlterConfigs: %v %+v", err, resp)
	}
	if l, f := rates(); l != 0 || f != 5000 {
		t.Fatalf("after AlterConfigs: rates %d, %d; want 0, 5000", l, f)
	}
}

// createAssigned creates a one-partition topic with the replicas given,
// the first preferred as leader.
func createAssigned(t *testing.T, cl *kgo.Client, name string, replicas []int32, configs map[string]string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
	a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	a.Partition, a.Replicas = 0, replicas
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Topics[0].ErrorCode; c != 0 {
		t.Fatalf("create topic %s: error %d %v", name, c, resp.Topics[0].ErrorMessage)
	}
}

// localBytes is the size of this broker's log of partition 0 of topic,
// -1 if it hosts none.
func localBytes(s *Server, topic string) int64 {
	ts := s.topic(topic)
	if ts == nil {
		return -1
	}
	p := ts.local(0)
	if p == nil {
		return -1
	}
	var n int64
	for _, seg := range p.log.Segments() {
		n += seg.Size
	}
	return n
}

// isrOf is partition 0's ISR of topic in s's metadata.
func isrOf(s *Server, topic string) []int32 {
	ti, ok := s.coord.Snapshot().Topic(topic)
	if !ok || len(ti.Partitions) == 0 {
		return nil
	}
	return ti.Partitions[0].State.ISR
}

// TestReplicationThrottleCatchUp runs two brokers on one real ZooKeeper.
// Broker 2 is stopped while 8 MB are produced to each of three topics
// led by broker 1; it then comes back and catches up: "free" without a
// throttle, "lthr" with the leader throttle (broker 1's
// leader.replication.throttled.rate set to 1 MB/s at run time, the topic
// listing 0:1), "fthr" with the follower throttle (broker 2's
// follower.replication.throttled.rate of 1 MB/s from its properties, the
// topic listing 0:2). The bytes of each replica on broker 2 are sampled
// every 100 ms; the throttled rates are computed over the catch-up's
// middle (from 15% to 90% of the log, some 6 s and 60 samples at the
// target rate), which is a rate from many samples over a long window,
// not a timed assertion on one event, and must be within 0.5x..1.5x of
// 1 MB/s. The unthrottled catch-up time is only logged. Then, with the
// followers back in the ISR, the leader rate is cut to 1 byte/s: an
// in-sync follower is never held back (acks=all produces still
// complete), and client fetches are not throttled.
func TestReplicationThrottleCatchUp(t *testing.T) {
	zks := zktest.Start(t)
	connect := zks.ConnectString(fmt.Sprintf("/strata-throttle-%d", time.Now().UnixNano()))
	props := func(id int, dir string, extra map[string]string) map[string]string {
		p := map[string]string{
			"broker.id":                        strconv.Itoa(id),
			"zookeeper.connect":                connect,
			"offsets.topic.replication.factor": "1",
			"replica.fetch.max.bytes":          "65536",
			"log.dirs":                         dir,
		}
		for k, v := range extra {
			p[k] = v
		}
		return p
	}
	dir2 := t.TempDir()
	s1 := startServer(t, props(1, t.TempDir(), nil))
	s2 := startServer(t, props(2, dir2, nil))
	cl := newClient(t, s1, kgo.RequiredAcks(kgo.LeaderAck()), kgo.ProducerBatchMaxBytes(16<<10), kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	topics := map[string]map[string]string{
		"free": nil,
		"lthr": {"leader.replication.throttled.replicas": "0:1"},
		"fthr": {"follower.replication.throttled.replicas": "0:2"},
	}
	for name, cfgs := range topics {
		createAssigned(t, cl, name, []int32{1, 2}, cfgs)
	}
	waitFor(t, "broker 2 hosting the replicas", func() bool {
		for name := range topics {
			if localBytes(s2, name) < 0 {
				return false
			}
		}
		return true
	})
	shutdown(t, s2)
	waitFor(t, "broker 2 out of the ISRs", func() bool {
		for name := range topics {
			if !slices.Equal(isrOf(s1, name), []int32{1}) {
				return false
			}
		}
		return true
	})

	const records, size = 8000, 1000
	value := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range value {
		value[i] = byte(rng.Uint32())
	}
	ctx := testCtx(t)
	for name := range topics {
		for i := 0; i < records; i += 500 {
			rs := make([]*kgo.Record, 500)
			for j := range rs {
				rs[j] = &kgo.Record{Topic: name, Value: value}
			}
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	total := map[string]int64{}
	for name := range topics {
		total[name] = localBytes(s1, name)
	}
	if code := brokerAlter(t, cl, "1", setOp("leader.replication.throttled.rate", "1000000")); code != 0 {
		t.Fatalf("setting broker 1's leader rate: error %d", code)
	}

	s2 = startServer(t, props(2, dir2, map[string]string{"follower.replication.throttled.rate": "1000000"}))
	series, done := sampleCatchUp(t, s2, total)
	t.Logf("unthrottled catch-up took %v", done["free"].Round(time.Millisecond))
	for _, name := range []string{"lthr", "fthr"} {
		checkThrottledRate(t, name, series[name], total[name], 1e6)
	}
	waitFor(t, "broker 2 back in the ISRs", func() bool {
		for name := range topics {
			if !slices.Equal(isrOf(s1, name), []int32{1, 2}) {
				return false
			}
		}
		return true
	})
	if got, _ := s1.repl.ThrottledBytes(); got < total["lthr"] {
		t.Errorf("broker 1 counted %d throttled bytes, want at least %d", got, total["lthr"])
	}

	// In sync, nothing is held back, whatever the rate.
	if code := brokerAlter(t, cl, "1", setOp("leader.replication.throttled.rate", "1")); code != 0 {
		t.Fatalf("setting broker 1's leader rate: error %d", code)
	}
	ctx = testCtx(t)
	all := newClient(t, s1, kgo.ProducerBatchMaxBytes(16<<10))
	for i := 0; i < 4; i++ {
		rs := make([]*kgo.Record, 500)
		for j := range rs {
			rs[j] = &kgo.Record{Topic: "lthr", Value: value}
		}
		if err := all.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("acks=all produce to a throttled topic with an in-sync follower: %v", err)
		}
	}
	consumer := newClient(t, s1, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"lthr": {0: kgo.NewOffset().AtStart()}}))
	got := 0
	for got < records+2000 {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records of a throttled topic: %v", got, records+2000, err)
		}
		got += fs.NumRecords()
	}
	if !slices.Equal(isrOf(s1, "lthr"), []int32{1, 2}) {
		t.Fatalf("ISR of lthr is %v after in-sync produces under a 1 B/s leader rate", isrOf(s1, "lthr"))
	}
	// Nothing acknowledged is missing from the follower, nothing differs:
	// each replica's log on broker 2 is byte-for-byte the leader's.
	for name := range topics {
		waitFor(t, name+" replicas of equal size", func() bool { return localBytes(s2, name) == localBytes(s1, name) })
		if a, b := logContents(t, s1, name), logContents(t, s2, name); !bytes.Equal(a, b) {
			t.Errorf("%s: broker 2's log (%d bytes) differs from the leader's (%d bytes)", name, len(b), len(a))
		}
	}
}

// logContents is the concatenated .log files of s's replica of
// partition 0 of topic.
func logContents(t *testing.T, s *Server, topic string) []byte {
	t.Helper()
	var out []byte
	for _, seg := range s.topic(topic).local(0).log.Segments() {
		b, err := os.ReadFile(seg.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b[:seg.Size]...)
	}
	return out
}

// catchUpSample is a replica's local size at a time since it started
// catching up.
type catchUpSample struct {
	at    time.Duration
	bytes int64
}

// sampleCatchUp samples the local size of each topic's partition 0 on s
// every 100 ms until each reaches its total (60 s bound), and returns the
// samples and when each got there. The rates are computed from the
// samples' own times, so a late tick only spaces them out.
func sampleCatchUp(t *testing.T, s *Server, total map[string]int64) (map[string][]catchUpSample, map[string]time.Duration) {
	t.Helper()
	series := map[string][]catchUpSample{}
	done := map[string]time.Duration{}
	start := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for len(done) < len(total) && time.Since(start) < 60*time.Second {
		at := time.Since(start)
		for name := range total {
			n := localBytes(s, name)
			series[name] = append(series[name], catchUpSample{at, n})
			if _, ok := done[name]; !ok && n >= total[name] {
				done[name] = at
			}
		}
		<-tick.C
	}
	for name := range total {
		if _, ok := done[name]; !ok {
			t.Fatalf("%s: broker %d did not catch up in 60 s (%d of %d bytes)", name, s.cfg.BrokerID, localBytes(s, name), total[name])
		}
		t.Logf("%s: %d bytes caught up in %v", name, total[name], done[name].Round(time.Millisecond))
	}
	return series, done
}

// checkThrottledRate measures the copy rate of a catch-up from its
// samples, from 15% to 90% of total (leaving out the start, and the end
// where the replica rejoins the ISR and is no longer held), and wants it
// within 0.5x..1.5x of rate.
func checkThrottledRate(t *testing.T, name string, series []catchUpSample, total int64, rate float64) {
	t.Helper()
	var from, to *catchUpSample
	for i := range series {
		sm := &series[i]
		if from == nil && sm.bytes >= total*15/100 {
			from = sm
		}
		if to == nil && sm.bytes >= total*90/100 {
			to = sm
		}
	}
	span := (to.at - from.at).Seconds()
	if span <= 0 {
		t.Fatalf("%s: 15%% to 90%% of the log in one sample: not throttled", name)
	}
	got := float64(to.bytes-from.bytes) / span
	t.Logf("%s: measured %.0f B/s over %.1f s (%d samples), throttle %.0f B/s", name, got, span, int(span*10), rate)
	if got < 0.5*rate || got > 1.5*rate {
		t.Errorf("%s: measured %.0f B/s, want %.0f B/s within 0.5x..1.5x", name, got, rate)
	}
}

// TestReassignmentThrottled adds a replica with AlterPartitionReassignments
// under Kafka's throttle, as kafka-reassign-partitions.sh --throttle sets
// it (leader.replication.throttled.replicas for the existing replica,
// follower.replication.throttled.replicas for the new one, both rates 1
// MB/s): the new replica's copy runs at the throttle, measured from its
// size over time, and the move completes.
func TestReassignmentThrottled(t *testing.T) {
	srv := reassignCluster(t, 2)
	s1, s2 := srv[0], srv[1]
	cl := newClient(t, s1, kgo.RequiredAcks(kgo.LeaderAck()), kgo.ProducerBatchMaxBytes(16<<10), kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	adm := kadm.NewClient(cl)
	createAssigned(t, cl, "mv", []int32{1}, map[string]string{
		"leader.replication.throttled.replicas":   "0:1",
		"follower.replication.throttled.replicas": "0:2",
	})
	value := make([]byte, 1000)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range value {
		value[i] = byte(rng.Uint32())
	}
	ctx := testCtx(t)
	for i := 0; i < 6000; i += 500 {
		rs := make([]*kgo.Record, 500)
		for j := range rs {
			rs[j] = &kgo.Record{Topic: "mv", Value: value}
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	total := map[string]int64{"mv": localBytes(s1, "mv")}
	for id, key := range map[string]string{"1": "leader.replication.throttled.rate", "2": "follower.replication.throttled.rate"} {
		if code := brokerAlter(t, cl, id, setOp(key, "1000000")); code != 0 {
			t.Fatalf("setting broker %s's %s: error %d", id, key, code)
		}
	}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("mv", 0, []int32{1, 2})
	mustAlter(t, adm, req)
	series, _ := sampleCatchUp(t, s2, total)
	checkThrottledRate(t, "mv", series["mv"], total["mv"], 1e6)
	waitNoReassignment(t, adm, "mv", 0)
	waitFor(t, "ISR [1 2]", func() bool { return slices.Equal(isrOf(s1, "mv"), []int32{1, 2}) })
}
