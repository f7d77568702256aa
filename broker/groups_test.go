package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupMember is a franz-go group consumer that records what it reads.
type groupMember struct {
	cl *kgo.Client

	mu struct {
		sync.Mutex
		recs []*kgo.Record
	}
	done chan struct{}
}

// startMember starts a consumer of group on topics; it polls until closed.
func startMember(t *testing.T, addr, group, name string, topics ...string) *groupMember {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(addr),
		kgo.ClientID(name),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		// Generous: a member is never to expire here (close leaves).
		kgo.SessionTimeout(45*time.Second),
		kgo.HeartbeatInterval(100*time.Millisecond),
		kgo.RebalanceTimeout(5*time.Second),
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.RetryTimeout(10*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}
	return runGroupMember(t, name, cl, false)
}

// runGroupMember polls cl until it is closed, recording the records, and
// with mark marks each for commit before recording it (so a member closed
// once its records show commits them on its revoke).
func runGroupMember(t *testing.T, name string, cl *kgo.Client, mark bool) *groupMember {
	m := &groupMember{cl: cl, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			fs.EachError(func(topic string, p int32, err error) {
				if !errors.Is(err, context.Canceled) {
					t.Logf("%s: fetch %s/%d: %v", name, topic, p, err)
				}
			})
			if mark {
				fs.EachRecord(func(r *kgo.Record) { cl.MarkCommitRecords(r) })
			}
			m.mu.Lock()
			m.mu.recs = append(m.mu.recs, fs.Records()...)
			m.mu.Unlock()
		}
	}()
	t.Cleanup(m.close)
	return m
}

func (m *groupMember) records() []*kgo.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.mu.recs)
}

// close leaves the group and stops polling.
func (m *groupMember) close() {
	m.cl.Close()
	<-m.done
}

// waitRecords waits until the members together have read n records.
func waitRecords(t *testing.T, n int, ms ...*groupMember) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := 0
		for _, m := range ms {
			got += len(m.records())
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("members read %d records, want %d", got, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// describeGroup returns the group as DescribeGroups v5 shows it.
func describeGroup(t *testing.T, cl *kgo.Client, group string) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("describe %s: %+v", group, resp.Groups)
	}
	return resp.Groups[0]
}

// waitGroupState waits until the group is in state ("" for any) with
// members members.
func waitGroupState(t *testing.T, cl *kgo.Client, group, state string, members int) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		g := describeGroup(t, cl, group)
		if (state == "" || g.State == state) && len(g.Members) == members {
			return g
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s: state %s with %d members, want %s with %d", group, g.State, len(g.Members), state, members)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// committed returns the group's committed offsets of topic by partition.
func committed(t *testing.T, cl *kgo.Client, group, topic string) map[int32]int64 {
	t.Helper()
	return committedN(t, cl, group, topic, 4)
}

// produceEach produces n records to each of the topic's partitions.
func produceEach(t *testing.T, cl *kgo.Client, topic string, partitions int32, n int, tag string) {
	t.Helper()
	var rs []*kgo.Record
	for p := range partitions {
		for i := range n {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%s-%d-%d", tag, p, i)})
		}
	}
	if err := cl.ProduceSync(testCtx(t), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestGroupConsumeCommitRestartResume runs two franz-go group members on
// four partitions: each gets two, they read every record once and commit;
// after a restart of the server the group resumes from its commits.
func TestGroupConsumeCommitRestartResume(t *testing.T) {
	const topic, group, partitions, perPartition = "gt", "g", int32(4), 100
	cfg, err := ConfigFromProperties(map[string]string{
		"listeners":                        "PLAINTEXT://127.0.0.1:0",
		"metrics.listener":                 "",
		"log.dirs":                         t.TempDir(),
		"offsets.topic.num.partitions":     "5",
		"group.initial.rebalance.delay.ms": "500",
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(testLogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s := startServerConfig(t, cfg)
	producer, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	admin := newClient(t, s)
	createTopic(t, admin, topic, partitions, nil)

	a := startMember(t, s.Addr().String(), group, "member-a", topic)
	b := startMember(t, s.Addr().String(), group, "member-b", topic)
	g := waitGroupState(t, admin, group, "Stable", 2)
	if g.ProtocolType != "consumer" || g.Protocol == "" {
		t.Fatalf("stable group: protocol type %q protocol %q", g.ProtocolType, g.Protocol)
	}
	for _, m := range g.Members {
		var as kmsg.ConsumerMemberAssignment
		if err := as.ReadFrom(m.MemberAssignment); err != nil {
			t.Fatalf("member %s assignment: %v", m.MemberID, err)
		}
		n := 0
		for _, tp := range as.Topics {
			n += len(tp.Partitions)
		}
		if n != 2 || m.ClientHost != "/127.0.0.1" {
			t.Fatalf("member %s (%s, host %s): %d partitions, want 2", m.MemberID, m.ClientID, m.ClientHost, n)
		}
	}

	produceEach(t, producer, topic, partitions, perPartition, "first")
	waitRecords(t, int(partitions)*perPartition, a, b)
	seen := map[string]bool{}
	parts := map[int32]*groupMember{}
	for _, m := range []*groupMember{a, b} {
		for _, r := range m.records() {
			if seen[string(r.Value)] {
				t.Fatalf("record %s read twice", r.Value)
			}
			seen[string(r.Value)] = true
			if o, ok := parts[r.Partition]; ok && o != m {
				t.Fatalf("partition %d read by both members", r.Partition)
			}
			parts[r.Partition] = m
		}
		if err := m.cl.CommitUncommittedOffsets(testCtx(t)); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	if len(parts) != int(partitions) {
		t.Fatalf("records from %d partitions, want %d", len(parts), partitions)
	}
	for p, off := range committed(t, admin, group, topic) {
		if off != perPartition {
			t.Fatalf("partition %d committed at %d, want %d", p, off, perPartition)
		}
	}
	a.close()
	b.close()
	waitGroupState(t, admin, group, "Empty", 0)
	admin.Close()
	producer.Close()
	if err := s.Shutdown(testCtx(t)); err != nil {
		t.Fatal(err)
	}

	// Same data directory, new port.
	s = startServerConfig(t, cfg)
	admin = newClient(t, s)
	if g := describeGroup(t, admin, group); g.State != "Empty" || g.ProtocolType != "consumer" {
		t.Fatalf("after restart: group %s state %s protocol type %q, want Empty consumer", group, g.State, g.ProtocolType)
	}
	if got := committed(t, admin, group, topic); len(got) != int(partitions) || got[0] != perPartition || got[3] != perPartition {
		t.Fatalf("after restart: committed %v, want %d for each of %d partitions", got, perPartition, partitions)
	}
	producer, err = kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	produceEach(t, producer, topic, partitions, 10, "second")
	c := startMember(t, s.Addr().String(), group, "member-c", topic)
	// A last record in each partition: the member reads a partition in
	// order, so once it has read them all, it has read everything it
	// will below them.
	produceEach(t, producer, topic, partitions, 1, "last")
	waitFor(t, "the last record of every partition", func() bool {
		n := 0
		for _, r := range c.records() {
			if strings.HasPrefix(string(r.Value), "last-") {
				n++
			}
		}
		return n == int(partitions)
	})
	// Each partition was read from its commit, every record once.
	next := map[int32]int64{}
	for _, r := range c.records() {
		want, ok := next[r.Partition]
		if !ok {
			want = perPartition
		}
		if r.Offset != want {
			t.Fatalf("after restart the group read %d/%d (%s), want offset %d (from its commit %d, in order, once)", r.Partition, r.Offset, r.Value, want, perPartition)
		}
		next[r.Partition] = want + 1
	}
	for p := range partitions {
		if next[p] != perPartition+11 {
			t.Fatalf("after restart the group read partition %d up to %d, want %d", p, next[p], perPartition+11)
		}
	}
}

// TestFindCoordinatorVersions asks for coordinators at every version: groups
// and transactions get this broker (the first transaction key creates
// __transaction_state), unknown key types INVALID_REQUEST.
func TestFindCoordinatorVersions(t *testing.T) {
	s := startServer(t, map[string]string{"broker.id": "4"})
	rc := dialRaw(t, s)
	self := s.self
	ask := func(corr int32, req *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
		t.Helper()
		rc.send(corr, req)
		got, body, err := rc.readFrame()
		if err != nil || got != corr {
			t.Fatalf("v%d: corr %d err %v", req.Version, got, err)
		}
		resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
		decodeResponse(t, resp, body)
		return resp
	}
	for v := int16(0); v <= 3; v++ {
		for i, tc := range []struct {
			keyType int8
			code    int16
		}{
			{0, 0},
			{1, 0},
			{2, kerr.InvalidRequest.Code},
		} {
			if v == 0 && tc.keyType != 0 {
				continue // v0 has no key type
			}
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.Version, req.CoordinatorKey, req.CoordinatorType = v, "some-group", tc.keyType
			resp := ask(int32(v)*10+int32(i), req)
			if resp.ErrorCode != tc.code {
				t.Fatalf("v%d type %d: error %d, want %d", v, tc.keyType, resp.ErrorCode, tc.code)
			}
			want := [3]any{self.ID, self.Host, self.Port}
			if tc.code != 0 {
				want = [3]any{int32(-1), "", int32(-1)}
				if v >= 1 && (resp.ErrorMessage == nil || *resp.ErrorMessage == "") {
					t.Fatalf("v%d type %d: no error message", v, tc.keyType)
				}
			}
			if got := [3]any{resp.NodeID, resp.Host, resp.Port}; got != want {
				t.Fatalf("v%d type %d: node %v, want %v", v, tc.keyType, got, want)
			}
		}
	}
	for i, keyType := range []int8{0, 1, 2} {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorType = 4, keyType
		req.CoordinatorKeys = []string{"a", "b", ""}
		resp := ask(100+int32(i), req)
		if len(resp.Coordinators) != 3 {
			t.Fatalf("v4 type %d: %d coordinators, want 3", keyType, len(resp.Coordinators))
		}
		for j, c := range resp.Coordinators {
			wantCode := []int16{0, 0, kerr.InvalidRequest.Code}[i]
			if c.Key != req.CoordinatorKeys[j] || c.ErrorCode != wantCode {
				t.Fatalf("v4 type %d #%d: key %q error %d, want %q and %d", keyType, j, c.Key, c.ErrorCode, req.CoordinatorKeys[j], wantCode)
			}
			if wantCode == 0 && (c.NodeID != 4 || c.Host != self.Host || c.Port != self.Port) {
				t.Fatalf("v4 #%d: node %d at %s:%d, want 4 at %s:%d", j, c.NodeID, c.Host, c.Port, self.Host, self.Port)
			}
		}
	}
}

// TestListAndDescribeGroupStates lists groups at every version and
// describes them in their states: a group with only commits is Empty with
// no protocol type, a group waiting in its first join is
// PreparingRebalance, an unknown group is Dead.
func TestListAndDescribeGroupStates(t *testing.T) {
	s := startServer(t, map[string]string{"group.initial.rebalance.delay.ms": strconv.Itoa(math.MaxInt32)})
	cl := newClient(t, s)
	createTopic(t, cl, "lt", 1, nil)

	// A "simple" commit creates an Empty group without protocol type.
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = "simple", -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "lt"
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = 0, 7
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	cresp, err := commit.RequestWith(testCtx(t), cl)
	if err != nil || cresp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("simple commit: %v %+v", err, cresp)
	}

	// A join that waits out the initial rebalance delay (longer than the
	// test) keeps its group in PreparingRebalance.
	rc := dialRaw(t, s)
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version = 3 // no MEMBER_ID_REQUIRED round trip
	join.Group, join.ProtocolType = "joining", "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 10000, math.MaxInt32
	jp := kmsg.NewJoinGroupRequestProtocol()
	jp.Name, jp.Metadata = "range", []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	join.Protocols = append(join.Protocols, jp)
	rc.send(1, join)
	waitGroupState(t, cl, "joining", "PreparingRebalance", 1)

	lc := dialRaw(t, s)
	for v := int16(0); v <= 4; v++ {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = v
		lc.send(int32(v), req)
		_, body, err := lc.readFrame()
		if err != nil {
			t.Fatal(err)
		}
		resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
		decodeResponse(t, resp, body)
		if resp.ErrorCode != 0 {
			t.Fatalf("list v%d: %+v", v, resp)
		}
		got := map[string][2]string{}
		for _, g := range resp.Groups {
			got[g.Group] = [2]string{g.ProtocolType, g.GroupState}
		}
		want := map[string][2]string{"simple": {"", ""}, "joining": {"consumer", ""}}
		if v >= 4 {
			want = map[string][2]string{"simple": {"", "Empty"}, "joining": {"consumer", "PreparingRebalance"}}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("list v%d: %v, want %v", v, got, want)
		}
	}
	filter := kmsg.NewPtrListGroupsRequest()
	filter.StatesFilter = []string{"empty"}
	fr, err := filter.RequestWith(testCtx(t), cl)
	if err != nil || len(fr.Groups) != 1 || fr.Groups[0].Group != "simple" {
		t.Fatalf("list Empty groups: %v %+v", err, fr)
	}

	desc := kmsg.NewPtrDescribeGroupsRequest()
	desc.Groups = []string{"simple", "joining", "unknown"}
	dr, err := desc.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, g := range dr.Groups {
		states = append(states, fmt.Sprintf("%s:%s:%d", g.Group, g.State, len(g.Members)))
	}
	sort.Strings(states)
	if want := []string{"joining:PreparingRebalance:1", "simple:Empty:0", "unknown:Dead:0"}; !slices.Equal(states, want) {
		t.Fatalf("describe: %v, want %v", states, want)
	}
	if m := dr.Groups[1].Members; len(m) == 1 && (m[0].ClientID != "raw" || m[0].ClientHost != "/127.0.0.1") {
		t.Fatalf("joining member: client %q host %q, want raw at /127.0.0.1", m[0].ClientID, m[0].ClientHost)
	}
}

// TestJoinAbandonedWhenClientLeaves checks that a JoinGroup blocked in the
// coordinator is withdrawn when its connection closes, and that shutdown
// does not wait for a blocked JoinGroup. The joins would wait longer than
// the test runs.
func TestJoinAbandonedWhenClientLeaves(t *testing.T) {
	s := startServer(t, map[string]string{"group.initial.rebalance.delay.ms": strconv.Itoa(math.MaxInt32)})
	cl := newClient(t, s)
	join := func(rc *rawConn, group string) {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version = 3
		req.Group, req.ProtocolType = group, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, math.MaxInt32
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
		req.Protocols = append(req.Protocols, p)
		rc.send(1, req)
	}
	rc := dialRaw(t, s)
	join(rc, "left")
	waitGroupState(t, cl, "left", "PreparingRebalance", 1)
	if err := rc.c.Close(); err != nil {
		t.Fatal(err)
	}
	// The member is withdrawn at once; the group itself leaves
	// PreparingRebalance when the initial delay ends.
	waitGroupState(t, cl, "left", "", 0)

	rc = dialRaw(t, s)
	join(rc, "shut")
	waitGroupState(t, cl, "shut", "PreparingRebalance", 1)
	// Without a deadline: a shutdown that waited for the join would not
	// return before the test's deadline, nor close the connection before
	// the connection's.
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-testCtx(t).Done():
		t.Fatal("shutdown waits for the JoinGroup")
	}
	if _, _, err := rc.readFrame(); err == nil {
		t.Fatal("the JoinGroup cancelled by shutdown was answered")
	}
}

// TestOffsetsTopicIsInternal checks __consumer_offsets: internal in
// Metadata, unlimited retention, and closed to produce, delete, new
// partitions and retention changes; commits to unknown partitions fail.
func TestOffsetsTopicIsInternal(t *testing.T) {
	s := startServer(t, map[string]string{"offsets.topic.num.partitions": "2"})
	cl := newClient(t, s)
	const topic = "__consumer_offsets"

	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	md.Topics = append(md.Topics, mt)
	mresp, err := md.RequestWith(testCtx(t), cl)
	if err != nil || len(mresp.Topics) != 1 || !mresp.Topics[0].IsInternal || len(mresp.Topics[0].Partitions) != 2 {
		t.Fatalf("metadata: %v %+v", err, mresp)
	}
	if c := s.topic(topic).cfg.seg; c.RetentionMs != -1 || c.RetentionBytes != -1 {
		t.Fatalf("retention.ms %d retention.bytes %d, want -1 and -1", c.RetentionMs, c.RetentionBytes)
	}

	if sp := produceRaw(t, cl, topic, 0, buildBatch(t, 0, 1)); sp.ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("produce: error %d, want INVALID_TOPIC_EXCEPTION", sp.ErrorCode)
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr(topic)
	del.Topics = append(del.Topics, dt)
	dresp, err := del.RequestWith(testCtx(t), cl)
	if err != nil || dresp.Topics[0].ErrorCode != kerr.InvalidTopicException.Code || s.topic(topic) == nil {
		t.Fatalf("delete: %v %+v", err, dresp)
	}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = topic, 5
	cp.Topics = append(cp.Topics, cpt)
	cpresp, err := cp.RequestWith(testCtx(t), cl)
	if err != nil || cpresp.Topics[0].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("create partitions: %v %+v", err, cpresp)
	}
	for _, configs := range []map[string]string{{"retention.ms": "1000"}, {}} {
		req := kmsg.NewPtrAlterConfigsRequest()
		rr := kmsg.NewAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		for k, v := range configs {
			c := kmsg.NewAlterConfigsRequestResourceConfig()
			c.Name, c.Value = k, kmsg.StringPtr(v)
			rr.Configs = append(rr.Configs, c)
		}
		req.Resources = append(req.Resources, rr)
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil || resp.Resources[0].ErrorCode != kerr.InvalidConfig.Code {
			t.Fatalf("alter configs %v: %v %+v", configs, err, resp)
		}
	}
	alter(t, cl, topic, map[string]string{"retention.ms": "-1", "retention.bytes": "-1", "segment.ms": "3600000"})

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = "g", -1
	for _, name := range []string{"no-such-topic", topic} {
		ct := kmsg.NewOffsetCommitRequestTopic()
		ct.Topic = name
		for _, p := range []int32{0, 9} {
			pp := kmsg.NewOffsetCommitRequestTopicPartition()
			pp.Partition, pp.Offset = p, 1
			ct.Partitions = append(ct.Partitions, pp)
		}
		commit.Topics = append(commit.Topics, ct)
	}
	cresp, err := commit.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	var codes []int16
	for _, ct := range cresp.Topics {
		for _, p := range ct.Partitions {
			codes = append(codes, p.ErrorCode)
		}
	}
	unknown := kerr.UnknownTopicOrPartition.Code
	if want := []int16{unknown, unknown, 0, unknown}; !slices.Equal(codes, want) {
		t.Fatalf("commit codes %v, want %v", codes, want)
	}
}
