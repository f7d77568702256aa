package group

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratastream/strata/segment"

	"github.com/stratastream/strata/segment/poll"
)

// memLog is an in-memory Log: it validates and numbers appended batches as
// segment.Log does and serves ReadCopy from them.
type memLog struct {
	mu struct {
		sync.Mutex
		batches [][]byte
		next    int64
		appends int
		failErr error
	}
	gate atomic.Pointer[chan struct{}] // when set, Append waits for it to close
	held atomic.Int32                  // Appends waiting for the gate
}

func (l *memLog) Append(b []byte, _ segment.AppendOptions) (segment.AppendResult, error) {
	if g := l.gate.Load(); g != nil {
		l.held.Add(1)
		<-*g
		l.held.Add(-1)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.appends++
	if l.mu.failErr != nil {
		return segment.AppendResult{}, l.mu.failErr
	}
	res := segment.AppendResult{BaseOffset: l.mu.next, LogAppendTime: -1}
	var add [][]byte
	next := l.mu.next
	err := segment.SplitBatches(b, func(h segment.Header, batch []byte) error {
		if _, err := segment.ValidateProduced(batch); err != nil {
			return err
		}
		cp := bytes.Clone(batch)
		segment.SetBaseOffset(cp, next)
		add = append(add, cp)
		next += int64(h.LastOffsetDelta) + 1
		return nil
	})
	if err != nil {
		return segment.AppendResult{}, err
	}
	l.mu.batches = append(l.mu.batches, add...)
	l.mu.next = next
	res.LastOffset = next - 1
	return res, nil
}

func (l *memLog) ReadCopy(offset int64, maxBytes int, maxOffset int64) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if offset < 0 || offset > l.mu.next {
		return nil, errors.New("memlog: offset out of range")
	}
	var out []byte
	for _, b := range l.mu.batches {
		h, _ := segment.ParseHeader(b)
		if h.NextOffset() <= offset {
			continue
		}
		if h.BaseOffset >= maxOffset || (len(out) > 0 && len(out)+len(b) > maxBytes) {
			break
		}
		out = append(out, b...)
	}
	return out, nil
}

func (l *memLog) LogStartOffset() int64 { return 0 }

func (l *memLog) LogEndOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.next
}

func (l *memLog) appends() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.appends
}

func (l *memLog) setFail(err error) {
	l.mu.Lock()
	l.mu.failErr = err
	l.mu.Unlock()
}

// hold makes Appends wait until the returned function is called.
func (l *memLog) hold() (release func()) {
	ch := make(chan struct{})
	l.gate.Store(&ch)
	var once sync.Once
	return func() {
		once.Do(func() {
			l.gate.Store(nil)
			close(ch)
		})
	}
}

// blockingReadLog is a memLog whose ReadCopy waits for release.
type blockingReadLog struct {
	*memLog
	release chan struct{}
	reading atomic.Bool
}

func (l *blockingReadLog) ReadCopy(offset int64, maxBytes int, maxOffset int64) ([]byte, error) {
	l.reading.Store(true)
	<-l.release
	return l.memLog.ReadCopy(offset, maxBytes, maxOffset)
}

// fakeClock is Config.Now under the test's control and, in an env on fake
// time, the coordinator's timers: those fire only in Advance, in the order
// of their deadlines, with the clock at each one's deadline, in the
// goroutine that calls Advance. So when Advance returns, every timeout
// it reached has run.
type fakeClock struct {
	ns atomic.Int64 // Unix time

	mu     sync.Mutex // held while setting the clock, never while a timer runs
	timers []*fakeTimer
}

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *fakeClock) Now() time.Time { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) NowMs() int64   { return c.ns.Load() / int64(time.Millisecond) }
func (c *fakeClock) now() time.Time { return c.Now() }

// Advance moves the clock on by d, firing the timers it reaches.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.ns.Load() + int64(d)
	for {
		var next *fakeTimer
		for _, t := range c.timers {
			if t.armed && t.at <= end && (next == nil || t.at < next.at) {
				next = t
			}
		}
		if next == nil {
			c.ns.Store(end)
			c.mu.Unlock()
			return
		}
		c.ns.Store(max(next.at, c.ns.Load()))
		next.armed = false
		c.mu.Unlock()
		next.f()
		c.mu.Lock()
	}
}

func (c *fakeClock) afterFunc(d time.Duration, f func()) timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, f: f, at: c.ns.Load() + int64(d), armed: true}
	c.timers = append(c.timers, t)
	return t
}

// fakeTimer is a timer of a fakeClock; its fields are guarded by the
// clock's mu.
type fakeTimer struct {
	c     *fakeClock
	f     func()
	at    int64 // deadline, Unix ns
	armed bool
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.armed
	t.armed = false
	return was
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.armed
	t.at, t.armed = t.c.ns.Load()+int64(d), true
	return was
}

// env is a coordinator with every partition loaded from memLogs.
type env struct {
	t     *testing.T
	c     *Coordinator
	cfg   Config
	logs  []*memLog
	clock *fakeClock
	// fakeTime: the coordinator's timeouts run on clock (newFakeTimeEnv).
	fakeTime bool
}

const testPartitions = 3

func testConfig(clock *fakeClock) Config {
	cfg := DefaultConfig()
	cfg.NumPartitions = testPartitions
	cfg.InitialRebalanceDelay = 100 * time.Millisecond // lets stableGroup's members join one generation
	cfg.MinSessionTimeout = 10 * time.Millisecond
	cfg.MaxSessionTimeout = time.Minute
	cfg.OffsetsRetentionCheckInterval = 0
	cfg.Now = clock.Now
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return cfg
}

// newEnv starts a coordinator; mod may change the config first. Its
// timeouts run on the runtime's timers.
func newEnv(t *testing.T, mod func(*Config)) *env {
	t.Helper()
	return startEnv(t, false, mod)
}

// newFakeTimeEnv is newEnv with the timeouts on e.clock: they fire only
// when the test advances it, so a test checks a timeout at its boundary
// and never waits for one. Joins from Empty (joinAll) advance the clock
// through the initial rebalance delay.
func newFakeTimeEnv(t *testing.T, mod func(*Config)) *env {
	t.Helper()
	return startEnv(t, true, mod)
}

func startEnv(t *testing.T, fakeTime bool, mod func(*Config)) *env {
	t.Helper()
	e := &env{t: t, clock: newFakeClock(), fakeTime: fakeTime}
	e.cfg = testConfig(e.clock)
	if fakeTime {
		e.cfg.timers = e.clock
	}
	if mod != nil {
		mod(&e.cfg)
	}
	for range e.cfg.NumPartitions {
		e.logs = append(e.logs, &memLog{})
	}
	e.start()
	return e
}

// start (re)starts the coordinator on the env's logs, as after a restart.
func (e *env) start() {
	e.t.Helper()
	c, err := New(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	for i, l := range e.logs {
		if _, err := c.Load(i, l); err != nil {
			e.t.Fatal(err)
		}
	}
	e.c = c
	e.t.Cleanup(func() { c.Close() })
}

// restart closes the coordinator and starts a new one on the same logs.
func (e *env) restart() {
	e.t.Helper()
	e.c.Close()
	e.start()
}

func (e *env) logOf(group string) *memLog { return e.logs[PartitionFor(group, e.cfg.NumPartitions)] }

// memberSpec describes a joining member.
type memberSpec struct {
	version   int16
	group     string
	client    string
	instance  string // static when set
	protocols []string
	meta      func(protocol string) []byte // protocol metadata; default the name
	ptype     string                       // default "consumer"
	session   time.Duration                // default 10 s
	rebalance time.Duration                // default 10 s
}

func (s memberSpec) request(memberID string) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = s.version
	r.Group = s.group
	r.MemberID = memberID
	r.ProtocolType = "consumer"
	if s.ptype != "" {
		r.ProtocolType = s.ptype
	}
	r.SessionTimeoutMillis = 10000
	if s.session != 0 {
		r.SessionTimeoutMillis = int32(s.session.Milliseconds())
	}
	r.RebalanceTimeoutMillis = 10000
	if s.rebalance != 0 {
		r.RebalanceTimeoutMillis = int32(s.rebalance.Milliseconds())
	}
	if s.instance != "" {
		r.InstanceID = kmsg.StringPtr(s.instance)
	}
	for _, p := range s.protocols {
		meta := []byte(p)
		if s.meta != nil {
			meta = s.meta(p)
		}
		r.Protocols = append(r.Protocols, kmsg.JoinGroupRequestProtocol{Name: p, Metadata: meta})
	}
	return r
}

func (e *env) ctx(client string) context.Context {
	return WithClient(context.Background(), Client{ID: client, Host: "/127.0.0.1"})
}

// goJoin sends a JoinGroup in its own goroutine.
func (e *env) goJoin(ctx context.Context, req *kmsg.JoinGroupRequest) <-chan *kmsg.JoinGroupResponse {
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { ch <- e.c.JoinGroup(ctx, req) }()
	return ch
}

// startJoin joins a new member: for v4+ dynamic members it first gets a
// member id with MEMBER_ID_REQUIRED. The join's answer arrives on the
// channel; it returns once the coordinator counts the member.
func (e *env) startJoin(s memberSpec, wantMembers int) <-chan *kmsg.JoinGroupResponse {
	e.t.Helper()
	if s.client == "" {
		s.client = "client"
	}
	memberID := ""
	if s.version >= 4 && s.instance == "" {
		resp := e.c.JoinGroup(e.ctx(s.client), s.request(""))
		if resp.ErrorCode != kerr.MemberIDRequired.Code {
			e.t.Fatalf("first join: got error %d, want MEMBER_ID_REQUIRED", resp.ErrorCode)
		}
		memberID = resp.MemberID
	}
	ch := e.goJoin(e.ctx(s.client), s.request(memberID))
	e.waitMembers(s.group, wantMembers)
	return ch
}

// rejoin sends the JoinGroup of a known member asynchronously.
func (e *env) rejoin(s memberSpec, memberID string) <-chan *kmsg.JoinGroupResponse {
	if s.client == "" {
		s.client = "client"
	}
	return e.goJoin(e.ctx(s.client), s.request(memberID))
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a response")
		panic("unreachable")
	}
}

// waitFor polls cond for up to a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, time.Minute, what, cond)
}

func (e *env) describe(group string) kmsg.DescribeGroupsResponseGroup {
	e.t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version = 5
	req.Groups = []string{group}
	resp := e.c.DescribeGroups(context.Background(), req)
	return resp.Groups[0]
}

// describeGeneration reads the group's generation (not in DescribeGroups).
func (e *env) describeGeneration(group string) int32 {
	g, _ := e.c.lookup(group, false)
	if g == nil {
		return -1
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.generation
}

// waitSyncing waits until the member's SyncGroup waits in the coordinator.
func (e *env) waitSyncing(group, memberID string) {
	e.t.Helper()
	waitFor(e.t, "sync to wait", func() bool {
		g, _ := e.c.lookup(group, false)
		if g == nil {
			return false
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		m := g.members[memberID]
		return m != nil && m.syncWait != nil
	})
}

// joining is the number of the group's members whose JoinGroup waits in
// the coordinator, not answered yet; -1 if there is no such group.
func (e *env) joining(group string) int {
	g, _ := e.c.lookup(group, false)
	if g == nil {
		return -1
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.awaitingJoin
}

// waitJoining waits until n members of the group wait in JoinGroup.
func (e *env) waitJoining(group string, n int) {
	e.t.Helper()
	waitFor(e.t, fmt.Sprintf("%d joins to wait", n), func() bool { return e.joining(group) == n })
}

func (e *env) waitMembers(group string, n int) {
	e.t.Helper()
	waitFor(e.t, "members to join", func() bool { return len(e.describe(group).Members) == n })
}

func (e *env) waitState(group string, s State) {
	e.t.Helper()
	waitFor(e.t, "state "+s.String(), func() bool { return e.describe(group).State == s.String() })
}

func (e *env) heartbeat(group, memberID string, gen int32, instance string) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version = 4
	req.Group, req.MemberID, req.Generation = group, memberID, gen
	if instance != "" {
		req.InstanceID = kmsg.StringPtr(instance)
	}
	return e.c.Heartbeat(context.Background(), req).ErrorCode
}

func syncReq(version int16, group, memberID string, gen int32, assign map[string][]byte) *kmsg.SyncGroupRequest {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version = version
	req.Group, req.MemberID, req.Generation = group, memberID, gen
	for id, a := range assign {
		req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: a})
	}
	return req
}

func (e *env) goSync(req *kmsg.SyncGroupRequest) <-chan *kmsg.SyncGroupResponse {
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	go func() { ch <- e.c.SyncGroup(context.Background(), req) }()
	return ch
}

// commitReq builds an OffsetCommit of partition 0..n-1 of topic at offset
// base+partition.
func commitReq(version int16, group, memberID string, gen int32, topic string, n int32, base int64, meta *string) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version = version
	req.Group, req.MemberID, req.Generation = group, memberID, gen
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = topic
	for p := range n {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition = p
		rp.Offset = base + int64(p)
		rp.LeaderEpoch = 7
		rp.Metadata = meta
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	return req
}

func commitCodes(resp *kmsg.OffsetCommitResponse) []int16 {
	var codes []int16
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			codes = append(codes, p.ErrorCode)
		}
	}
	return codes
}

// fetch returns topic/partition -> offset of a v8 OffsetFetch of group (all
// partitions), and the group's error.
func (e *env) fetchAll(group string) (map[tp]kmsg.OffsetFetchResponseGroupTopicPartition, int16) {
	e.t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	req.Groups = append(req.Groups, rg)
	resp := e.c.OffsetFetch(context.Background(), req)
	out := make(map[tp]kmsg.OffsetFetchResponseGroupTopicPartition)
	for _, t := range resp.Groups[0].Topics {
		for _, p := range t.Partitions {
			out[tp{t.Topic, p.Partition}] = p
		}
	}
	return out, resp.Groups[0].ErrorCode
}

func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = topics
	return m.AppendTo(nil)
}

func errName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(code).Error()
}
