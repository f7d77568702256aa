package replica

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/stratastream/strata/proto/replpb"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// This file is the follower's side of replication (Kafka's replica
// fetcher threads). A fetcher per leader broker holds one Replicate
// stream to it for every partition this broker follows there. A
// partition goes through two states on it:
//
//   - truncating: before fetching at a new leader epoch (or after the
//     leader refused the fetch offset), the fetcher asks the leader where
//     the follower's latest epoch ends (EpochEnds) and truncates the log
//     to the first offset where the two logs may differ (KIP-101, with
//     KIP-279's repeated question when the leader's answer is an older
//     epoch than the follower's, so several missed epochs are handled);
//   - fetching: STARTed on the stream at the log end; the leader pushes
//     batches, which are checked (CRC) and appended verbatim, with the
//     producer state updated; the fetcher reports the new log end offset
//     (PROGRESS) and keeps the leader's high watermark.
//
// The stream reconnects with backoff when it drops; partitions are then
// STARTed again from their log end. Metadata changes (Manager.Sync) move
// partitions between fetchers. A data message is appended only while the
// partition is still fetching on that fetcher at the message's epoch,
// checked under the partition's append lock, so a message from a deposed
// leader cannot land after the new leader's truncation.

// fetchState is a followed partition's state on its fetcher.
type fetchState int

const (
	fetchTruncating fetchState = iota
	fetchFetching
)

// fetchPart is one followed partition.
type fetchPart struct {
	p       *Partition
	epoch   int32 // the leader epoch it follows
	state   fetchState
	started bool // START sent on the current stream
	dirty   bool // appended since the last report
	removed bool // no longer on this fetcher
	retryAt time.Time
	// failures counts errors in a row, for the backoff.
	failures int
	// leaderStart and leaderEnd are the leader's log start and end from
	// an OFFSET_OUT_OF_RANGE, -1 if none.
	leaderStart, leaderEnd int64
	// leaderHW is the high watermark of the leader's last message, -1
	// before one: a replica behind it is not in sync, and the follower
	// quota may hold it back (throttle.go).
	leaderHW int64
}

// backoffLocked schedules the partition's next try after an error: 50ms,
// doubling up to replica.fetch.backoff.ms. Right after a leadership
// change the new leader may not know yet that it leads; the short first
// waits keep a failover from costing a full backoff. Caller holds f.mu.
func (fp *fetchPart) backoffLocked(limit time.Duration) {
	d := min(50*time.Millisecond<<min(fp.failures, 10), max(limit, 50*time.Millisecond))
	fp.failures++
	fp.retryAt = time.Now().Add(d)
}

// fetcher replicates the partitions led by one broker.
type fetcher struct {
	m      *Manager
	leader int32
	wake   chan struct{}

	mu      sync.Mutex
	parts   map[tpKey]*fetchPart
	stopped []tpKey // STOPs to send
}

func (f *fetcher) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// run is the fetcher's goroutine: it connects and serves streams until
// the manager closes.
func (f *fetcher) run() {
	m := f.m
	defer m.wg.Done()
	backoff := 50 * time.Millisecond
	var cc *grpc.ClientConn
	var ccAddr string
	defer func() {
		if cc != nil {
			_ = cc.Close()
		}
	}()
	for {
		f.mu.Lock()
		n := len(f.parts)
		f.mu.Unlock()
		if n == 0 {
			select {
			case <-m.done:
				return
			case <-f.wake:
				continue
			}
		}
		addr, ok := m.replicationAddr(f.leader)
		if ok && addr != ccAddr {
			if cc != nil {
				_ = cc.Close()
				cc = nil
			}
			c, err := grpc.NewClient("passthrough:///"+addr, m.clientOptions(addr)...)
			if err == nil {
				cc, ccAddr = c, addr
			} else {
				m.log.Warn("replication: cannot dial leader", "leader", f.leader, "addr", addr, "err", err)
			}
		}
		if ok && cc != nil {
			start := time.Now()
			err := f.session(replpb.NewReplicationClient(cc))
			if time.Since(start) > 5*time.Second {
				backoff = 50 * time.Millisecond
			}
			select {
			case <-m.done:
				return
			default:
			}
			if status.Code(err) == codes.PermissionDenied {
				m.log.Warn("replication: the leader refused this broker's stream", "leader", f.leader, "err", err)
			} else {
				m.log.Debug("replication stream ended", "leader", f.leader, "err", err)
			}
		}
		select {
		case <-m.done:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, max(m.cfg.FetchBackoff, 50*time.Millisecond))
	}
}

// maxReplicationMessage bounds one gRPC message on the replication
// service.
const maxReplicationMessage = 256 << 20

// session runs one stream to the leader until it fails.
func (f *fetcher) session(client replpb.ReplicationClient) error {
	m := f.m
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-m.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	stream, err := client.Replicate(ctx)
	if err != nil {
		return err
	}
	f.mu.Lock()
	for _, fp := range f.parts {
		fp.started = false
	}
	f.stopped = nil
	f.mu.Unlock()
	if err := stream.Send(&replpb.FollowerMessage{FollowerId: m.cfg.BrokerID, BrokerEpoch: m.cfg.BrokerEpoch}); err != nil {
		return err
	}
	recvDone := make(chan error, 1)
	go func() {
		// One frame for the stream: each message is decoded into a
		// buffer of its own, given back once its batches are appended
		// (codec.go).
		var frame leaderFrame
		defer frame.release()
		for {
			if err := stream.RecvMsg(&frame); err != nil {
				recvDone <- err
				cancel()
				return
			}
			for _, pd := range frame.msg.Partitions {
				f.handleData(pd)
			}
			frame.release()
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	heartbeat := time.NewTicker(replicaHeartbeat(m.cfg.LagTimeMax))
	defer heartbeat.Stop()
	for {
		next := f.truncatePending(ctx, client)
		msg, retry := f.outgoing()
		if len(msg.Partitions) > 0 {
			if err := stream.Send(msg); err != nil {
				return err
			}
		}
		if !next.IsZero() && (retry.IsZero() || next.Before(retry)) {
			retry = next
		}
		wait := time.Hour
		if !retry.IsZero() {
			wait = max(time.Until(retry), time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-f.wake:
		case <-timer.C:
		case <-heartbeat.C:
			f.markReportsDue()
		case err := <-recvDone:
			return err
		case <-ctx.Done():
			select {
			case err := <-recvDone:
				return err
			default:
				return ctx.Err()
			}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// replicaHeartbeat is how often a follower reports every partition it
// fetches even when nothing was appended: the leader counts a follower as
// caught up only when it hears from it (as Kafka's followers fetch all the
// time), so an idle partition keeps its live followers in the ISR, lets a
// caught-up follower back in, and still drops one that stopped. A quarter
// of replica.lag.time.max.ms, at most 500 ms (Kafka's
// replica.fetch.wait.max.ms).
func replicaHeartbeat(lag time.Duration) time.Duration {
	return max(min(lag/4, 500*time.Millisecond), 10*time.Millisecond)
}

// markReportsDue makes the next message report every partition that is
// fetching.
func (f *fetcher) markReportsDue() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fp := range f.parts {
		if fp.state == fetchFetching && fp.started {
			fp.dirty = true
		}
	}
}

// outgoing builds the next message: STARTs, PROGRESS reports and STOPs.
// retry is the earliest time a partition waits for, zero if none.
func (f *fetcher) outgoing() (msg *replpb.FollowerMessage, retry time.Time) {
	msg = &replpb.FollowerMessage{}
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, key := range f.stopped {
		msg.Partitions = append(msg.Partitions, &replpb.PartitionFetch{Topic: key.topic, Partition: key.index, Kind: replpb.PartitionFetch_STOP})
	}
	f.stopped = nil
	for key, fp := range f.parts {
		if fp.state != fetchFetching {
			continue
		}
		if !fp.retryAt.IsZero() && fp.retryAt.After(now) {
			if retry.IsZero() || fp.retryAt.Before(retry) {
				retry = fp.retryAt
			}
			continue
		}
		switch {
		case !fp.started:
			lastEpoch, _, _ := fp.p.log.Epochs().Latest()
			msg.Partitions = append(msg.Partitions, &replpb.PartitionFetch{Topic: key.topic, Partition: key.index,
				LeaderEpoch: fp.epoch, LogEndOffset: fp.p.log.LogEndOffset(), LastFetchedEpoch: lastEpoch, Kind: replpb.PartitionFetch_START,
				LogStartOffset: fp.p.log.LogStartOffset()})
			fp.started, fp.dirty = true, false
		case fp.dirty && f.holdLocked(fp, now, &retry):
			// Over the follower quota: the report waits, and with it
			// the leader's next messages.
		case fp.dirty:
			msg.Partitions = append(msg.Partitions, &replpb.PartitionFetch{Topic: key.topic, Partition: key.index,
				LeaderEpoch: fp.epoch, LogEndOffset: fp.p.log.LogEndOffset(), Kind: replpb.PartitionFetch_PROGRESS,
				LogStartOffset: fp.p.log.LogStartOffset()})
			fp.dirty = false
		}
	}
	return msg, retry
}

// holdLocked says whether the follower quota holds fp's report back: the
// partition is throttled, its log end is behind the leader's high
// watermark (Kafka's !isReplicaInSync), and the rate is exceeded. It
// then moves retry to when to look again. Caller holds f.mu.
func (f *fetcher) holdLocked(fp *fetchPart, now time.Time, retry *time.Time) bool {
	if fp.leaderHW < 0 || fp.p.log.LogEndOffset() >= fp.leaderHW || !fp.p.followerThrottled() {
		return false
	}
	q := f.m.followerQuota
	over, wait := q.Exceeded()
	if !over {
		return false
	}
	q.noteHold()
	at := now.Add(min(wait, maxHoldCheck))
	if retry.IsZero() || at.Before(*retry) {
		*retry = at
	}
	return true
}

// handleData applies one partition's news from the leader.
func (f *fetcher) handleData(pd *replpb.PartitionData) {
	m := f.m
	key := tpKey{pd.GetTopic(), pd.GetPartition()}
	f.mu.Lock()
	fp := f.parts[key]
	f.mu.Unlock()
	if fp == nil {
		return
	}
	p := fp.p
	if code := int16(pd.GetErrorCode()); code != 0 {
		f.mu.Lock()
		if f.parts[key] == fp && fp.state == fetchFetching && fp.started {
			fp.started = false
			fp.state = fetchTruncating
			fp.leaderStart, fp.leaderEnd = -1, -1
			if code == kerr.OffsetOutOfRange.Code {
				fp.leaderStart, fp.leaderEnd = pd.GetLogStartOffset(), pd.GetLogEndOffset()
				fp.retryAt = time.Time{}
			} else {
				fp.backoffLocked(m.cfg.FetchBackoff)
			}
		}
		f.mu.Unlock()
		name := "unknown"
		if e := kerr.ErrorForCode(code); e != nil {
			name = e.Error()
		}
		m.log.Info("replication: leader refused the fetch", "topic", key.topic, "partition", key.index,
			"leader", f.leader, "error", name, "message", pd.GetErrorMessage())
		f.poke()
		return
	}
	p.app.Lock()
	f.mu.Lock()
	current := f.parts[key] == fp && !fp.removed && fp.state == fetchFetching && fp.started && fp.epoch == pd.GetLeaderEpoch()
	f.mu.Unlock()
	if !current {
		p.app.Unlock()
		return
	}
	appended := false
	if recs := pd.GetRecords(); len(recs) > 0 {
		if err := p.app.AppendReplicatedLocked(recs); err != nil {
			p.app.Unlock()
			f.mu.Lock()
			if f.parts[key] == fp {
				fp.started = false
				if !errors.Is(err, segment.ErrNotContiguous) {
					fp.backoffLocked(m.cfg.FetchBackoff)
				}
			}
			f.mu.Unlock()
			m.log.Warn("replication: append failed; fetching again from the log end", "topic", key.topic, "partition", key.index, "err", err)
			f.poke()
			return
		}
		appended = true
		if p.followerThrottled() {
			m.followerQuota.Record(len(recs))
		}
	}
	hw := pd.GetHighWatermark()
	if hw >= 0 {
		p.log.SetHighWatermark(min(hw, p.log.LogEndOffset()))
	}
	p.app.Unlock()
	// The leader's log start (DeleteRecords, retention, tiering): the
	// follower's moves up to it, at most to its own high watermark as in
	// Kafka (UnifiedLog.maybeIncrementLogStartOffset), and is reported.
	// It is the leader's local log start, so the follower moves its own
	// as local retention does: a tiered log keeps the leader epochs of
	// what is now only in the store.
	startMoved := false
	if ls := min(pd.GetLogStartOffset(), p.log.HighWatermark()); ls > p.log.LogStartOffset() {
		if err := p.log.SetLocalLogStartOffset(ls); err != nil {
			if !errors.Is(err, segment.ErrClosed) {
				m.log.Warn("replication: moving the log start to the leader's failed", "topic", key.topic, "partition", key.index, "offset", ls, "err", err)
			}
		} else {
			startMoved = true
		}
	}
	f.mu.Lock()
	if hw >= 0 {
		fp.leaderHW = hw
	}
	if appended {
		fp.dirty, fp.failures = true, 0
	}
	if startMoved && f.parts[key] == fp {
		fp.dirty = true
	}
	f.mu.Unlock()
	if appended || startMoved {
		f.poke()
	}
}

// epochAsk is one partition's pending EpochEnds question.
type epochAsk struct {
	key tpKey
	fp  *fetchPart
	// latest is the follower's latest epoch when the question began;
	// epoch is the one asked in this round.
	latest, epoch int32
	// restart is what the store holds below the leader's log start when
	// the replica is to start over there (remoteBefore), nil otherwise.
	restart *restartAt
}

// restartAt is the state a replica starts over with at offset.
type restartAt struct {
	offset int64
	remote RemoteState
}

// remoteStateTimeout bounds the object-store reads of one restart.
const remoteStateTimeout = 30 * time.Second

// remoteBefore reads, outside every lock, what the object store holds of
// a partition about to start over at the leader's log start (its log
// ends below it): nil when it is not to start over, and ok false (retry
// later) when the store could not be read.
func (f *fetcher) remoteBefore(ctx context.Context, key tpKey, fp *fetchPart) (r *restartAt, ok bool) {
	f.mu.Lock()
	start := fp.leaderStart
	f.mu.Unlock()
	if start < 0 || fp.p.log.LogEndOffset() >= start {
		return nil, true
	}
	rctx, cancel := context.WithTimeout(ctx, remoteStateTimeout)
	defer cancel()
	st, err := fp.p.app.RemoteStateAt(rctx, start)
	if err != nil {
		f.m.log.Warn("replication: the object store's state below the leader's log start not read; retrying",
			"topic", key.topic, "partition", key.index, "offset", start, "err", err)
		return nil, false
	}
	return &restartAt{offset: start, remote: st}, true
}

// truncatePending runs the KIP-101 step for the partitions that need it
// and moves them to fetching. It returns the earliest retry time of those
// that must wait, zero if none.
func (f *fetcher) truncatePending(ctx context.Context, client replpb.ReplicationClient) (retry time.Time) {
	m := f.m
	now := time.Now()
	var asks []epochAsk
	f.mu.Lock()
	for key, fp := range f.parts {
		if fp.state != fetchTruncating {
			continue
		}
		if !fp.retryAt.IsZero() && fp.retryAt.After(now) {
			if retry.IsZero() || fp.retryAt.Before(retry) {
				retry = fp.retryAt
			}
			continue
		}
		last, _, _ := fp.p.log.Epochs().Latest()
		asks = append(asks, epochAsk{key: key, fp: fp, latest: last, epoch: last})
	}
	f.mu.Unlock()
	ready := asks[:0]
	for _, a := range asks {
		r, ok := f.remoteBefore(ctx, a.key, a.fp)
		if !ok {
			retry = f.backoffAll([]epochAsk{a}, retry)
			continue
		}
		a.restart = r
		ready = append(ready, a)
	}
	asks = ready
	// Up to a few rounds: KIP-279 asks again with an older epoch when
	// the leader's answer is an epoch the follower does not have.
	for round := 0; round < 8 && len(asks) > 0; round++ {
		req := &replpb.EpochEndsRequest{FollowerId: m.cfg.BrokerID}
		for _, a := range asks {
			req.Partitions = append(req.Partitions, &replpb.EpochQuery{Topic: a.key.topic, Partition: a.key.index,
				CurrentLeaderEpoch: a.fp.epoch, LeaderEpoch: a.epoch})
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := client.EpochEnds(rctx, req)
		cancel()
		if err != nil {
			m.log.Debug("replication: epoch query failed", "leader", f.leader, "err", err)
			return f.backoffAll(asks, retry)
		}
		answers := map[tpKey]*replpb.EpochEnd{}
		for _, e := range resp.GetPartitions() {
			answers[tpKey{e.GetTopic(), e.GetPartition()}] = e
		}
		var again []epochAsk
		for _, a := range asks {
			more, ok := f.truncateOne(a, answers[a.key])
			switch {
			case more >= 0:
				again = append(again, epochAsk{key: a.key, fp: a.fp, latest: a.latest, epoch: more, restart: a.restart})
			case !ok:
				retry = f.backoffAll([]epochAsk{a}, retry)
			}
		}
		asks = again
	}
	// Still asking after every round: try again later.
	return f.backoffAll(asks, retry)
}

// backoffAll schedules a retry of each partition and returns the earliest
// retry time, merged with retry.
func (f *fetcher) backoffAll(asks []epochAsk, retry time.Time) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range asks {
		fp := a.fp
		fp.backoffLocked(f.m.cfg.FetchBackoff)
		if retry.IsZero() || fp.retryAt.Before(retry) {
			retry = fp.retryAt
		}
	}
	return retry
}

// truncateOne applies the leader's answer to "where does epoch a.epoch
// end?" for one partition whose latest epoch was a.latest when the
// question began: it returns an epoch to ask about again (KIP-279), or -1
// with ok true when the partition is now fetching, or -1 with ok false to
// retry later.
func (f *fetcher) truncateOne(a epochAsk, ans *replpb.EpochEnd) (again int32, ok bool) {
	m := f.m
	key, fp, latest, asked := a.key, a.fp, a.latest, a.epoch
	p := fp.p
	f.mu.Lock()
	live := f.parts[key] == fp && !fp.removed && fp.state == fetchTruncating
	leaderStart, leaderEnd := fp.leaderStart, fp.leaderEnd
	f.mu.Unlock()
	if !live {
		return -1, true
	}
	p.app.Lock()
	defer p.app.Unlock()
	last, _, hasEpochs := p.log.Epochs().Latest()
	if last != latest {
		// An append landed since the question began (a deposed
		// leader's last message): start the question over.
		return -1, false
	}
	leo := p.log.LogEndOffset()
	target := leo
	switch {
	case !hasEpochs:
		// Nothing written under any epoch: nothing can diverge.
	case ans == nil || ans.GetErrorCode() != 0:
		if ans != nil {
			m.log.Debug("replication: leader refused the epoch query", "topic", key.topic, "partition", key.index, "error_code", ans.GetErrorCode())
		}
		return -1, false
	case ans.GetLeaderEpoch() == segment.UndefinedEpoch:
		// The leader knows no epoch at or below ours: keep what is
		// committed (Kafka's fallback to the high watermark).
		target = min(leo, p.log.HighWatermark())
	case ans.GetLeaderEpoch() == asked:
		// Both logs have epoch asked: they agree up to where the first
		// of the two ends it (ours ends at the log end when it is our
		// latest).
		_, ours := p.log.Epochs().EndOffsetFor(asked)
		target = min(leo, ours, ans.GetEndOffset())
	default:
		// The leader's answer is an older epoch: where does ours end?
		e, end := p.log.Epochs().EndOffsetFor(ans.GetLeaderEpoch())
		switch {
		case e == ans.GetLeaderEpoch():
			target = min(leo, end, ans.GetEndOffset())
		case e == segment.UndefinedEpoch:
			// Not reached (the leader's epoch is below our latest);
			// keep nothing beyond its end offset.
			target = min(leo, ans.GetEndOffset())
		default:
			// We lack the leader's epoch: ask about our largest one
			// below it (KIP-279).
			return e, true
		}
	}
	if leaderEnd >= 0 {
		target = min(target, leaderEnd)
	}
	if target < leo {
		if err := p.log.TruncateTo(target); err != nil {
			m.log.Error("replication: truncation failed", "topic", key.topic, "partition", key.index, "to", target, "err", err)
			return -1, false
		}
		m.log.Info("replica truncated to the leader's log (KIP-101)", "topic", key.topic, "partition", key.index,
			"from", leo, "to", p.log.LogEndOffset(), "leader", f.leader, "leader_epoch", fp.epoch)
		if err := p.app.ReloadProducersLocked(); err != nil {
			m.log.Error("replication: rebuilding producer state after truncation failed", "topic", key.topic, "partition", key.index, "err", err)
		}
	}
	if leaderStart >= 0 && p.log.LogEndOffset() < leaderStart {
		// The leader no longer has what comes next (retention, or
		// segments only in the bucket): start over at its log start,
		// with what the bucket holds below it.
		if a.restart == nil || a.restart.offset != leaderStart {
			return -1, false // read the store first (remoteBefore)
		}
		st := a.restart.remote
		if err := p.app.StartOverLocked(leaderStart, st); err != nil {
			m.log.Error("replication: restarting the log at the leader's start failed", "topic", key.topic, "partition", key.index, "err", err)
			return -1, false
		}
		m.log.Info("replica restarted at the leader's log start", "topic", key.topic, "partition", key.index, "offset", leaderStart,
			"remote_epochs", len(st.Epochs), "remote_producer_snapshot", st.ProducerSnapshot != nil)
	}
	f.mu.Lock()
	if f.parts[key] == fp && !fp.removed {
		fp.state, fp.started, fp.retryAt = fetchFetching, false, time.Time{}
		fp.leaderStart, fp.leaderEnd = -1, -1
	}
	f.mu.Unlock()
	return -1, true
}

// replicationAddr is the leader broker's replication address from the
// metadata.
func (m *Manager) replicationAddr(id int32) (string, bool) {
	b, ok := m.host.Snapshot().Broker(id)
	if !ok || b.ReplicationPort <= 0 {
		return "", false
	}
	return net.JoinHostPort(b.Host, strconv.Itoa(int(b.ReplicationPort))), true
}

// follow puts p on the fetcher of leader at epoch (truncating first),
// taking it off any other fetcher.
func (m *Manager) follow(p *Partition, leader, epoch int32) {
	key := tpKey{p.topic, p.index}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return
	}
	for id, f := range m.fetchers {
		if id == leader {
			continue
		}
		f.remove(key, p)
	}
	f := m.fetchers[leader]
	if f == nil {
		f = &fetcher{m: m, leader: leader, wake: make(chan struct{}, 1), parts: map[tpKey]*fetchPart{}}
		m.fetchers[leader] = f
		m.wg.Add(1)
		go f.run()
	}
	f.mu.Lock()
	fp := f.parts[key]
	if fp != nil && fp.p == p && fp.epoch == epoch {
		f.mu.Unlock()
		return
	}
	if fp != nil {
		fp.removed = true
	}
	f.parts[key] = &fetchPart{p: p, epoch: epoch, state: fetchTruncating, leaderStart: -1, leaderEnd: -1, leaderHW: -1}
	f.mu.Unlock()
	f.poke()
}

// unfollow takes p off every fetcher.
func (m *Manager) unfollow(p *Partition) {
	key := tpKey{p.topic, p.index}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.fetchers {
		f.remove(key, p)
	}
}

// remove takes the partition off the fetcher and queues its STOP.
func (f *fetcher) remove(key tpKey, p *Partition) {
	f.mu.Lock()
	fp := f.parts[key]
	if fp == nil {
		f.mu.Unlock()
		return
	}
	fp.removed = true
	delete(f.parts, key)
	if fp.started {
		f.stopped = append(f.stopped, key)
	}
	f.mu.Unlock()
	f.poke()
}
