package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"time"

	"github.com/stratastream/strata/proto/replpb"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
)

// This file is the leader's side of replication: the gRPC Replication
// service. Each follower broker holds one Replicate stream to this broker
// for all the partitions it follows here. The stream's sender pushes,
// for every partition STARTed on it, the batches after the last ones sent
// (up to replica.fetch.max.bytes per partition per message, and at most
// streamWindow messages ahead of what the follower has reported), and the
// high watermark and log start offset whenever they move. With nothing to
// send it sleeps on the partitions' append notifiers (which also fire
// when the high watermark rises), their replication state changes and the
// follower's messages: no polling.
//
// A partition's streaming ends with an error sent to the follower
// (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
// OFFSET_OUT_OF_RANGE, ...) when this broker stops leading it at the
// epoch it was started at, or when the follower's offset is not in the
// log; the follower then starts it again (after truncating, or learning
// the new leadership).

// streamWindow is how many data messages per partition a leader sends
// ahead of the follower's reports.
const streamWindow = 4

// streamMessageBytes bounds the records of one LeaderMessage (beyond the
// first partition's, which always goes).
const streamMessageBytes = 8 << 20

// replicationService implements replpb.ReplicationServer.
type replicationService struct {
	replpb.UnimplementedReplicationServer
	m *Manager
}

type tpKey struct {
	topic string
	index int32
}

// streamPart is one partition STARTed on a stream.
type streamPart struct {
	p      *Partition
	epoch  int32
	next   int64   // next offset to send
	marks  []int64 // end offsets of data messages the follower has not reported yet
	sentHW int64
	sentLS int64
}

// Replicate serves one follower's stream until it ends or the server
// closes. The first message must name a registered broker calling from
// its registered host (guard.go), else the stream ends with
// codes.PermissionDenied.
func (rs *replicationService) Replicate(stream replpb.Replication_ReplicateServer) error {
	m := rs.m
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	follower := first.GetFollowerId()
	if err := m.checkFollower(stream.Context(), follower); err != nil {
		return m.refused("Replicate", err)
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	inbox := make(chan *replpb.FollowerMessage, 64)
	inbox <- first
	recvErr := make(chan error, 1)
	go func() {
		for {
			fm, err := stream.Recv()
			if err != nil {
				recvErr <- err
				cancel()
				return
			}
			select {
			case inbox <- fm:
			case <-ctx.Done():
				return
			}
		}
	}()
	ls := &leaderStream{m: m, follower: follower, parts: map[tpKey]*streamPart{}}
	m.log.Debug("replication stream opened", "follower", follower)
	defer m.log.Debug("replication stream closed", "follower", follower)
	for {
		// Take the wake-up channels before looking at the state, so a
		// change after the look still wakes the wait below.
		wake := ls.wakeChannels()
		out := &replpb.LeaderMessage{}
	drain:
		for {
			select {
			case fm := <-inbox:
				ls.handle(fm, out)
			default:
				break drain
			}
		}
		ls.collect(out)
		if len(out.Partitions) > 0 {
			if err := stream.Send(out); err != nil {
				return err
			}
			continue
		}
		cases := make([]reflect.SelectCase, 0, len(wake)+4)
		var held <-chan time.Time
		var holdTimer *time.Timer
		if ls.heldFor > 0 {
			holdTimer = time.NewTimer(min(ls.heldFor, maxHoldCheck))
			held = holdTimer.C
		}
		cases = append(cases,
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(inbox)},
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(m.done)},
			reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(held)},
		)
		for _, ch := range wake {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
		}
		chosen, v, _ := reflect.Select(cases)
		if holdTimer != nil {
			holdTimer.Stop()
		}
		switch chosen {
		case 0:
			out := &replpb.LeaderMessage{}
			ls.handle(v.Interface().(*replpb.FollowerMessage), out)
			if len(out.Partitions) > 0 {
				if err := stream.Send(out); err != nil {
					return err
				}
			}
		case 1:
			select {
			case err := <-recvErr:
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			default:
				return ctx.Err()
			}
		case 2:
			return errors.New("broker shutting down")
		}
	}
}

// leaderStream is the sender's state of one stream.
type leaderStream struct {
	m        *Manager
	follower int32
	parts    map[tpKey]*streamPart
	// heldFor, when not zero, is how long to wait before looking again
	// at a partition whose data the leader quota held back.
	heldFor time.Duration
}

// maxHoldCheck bounds how long a held-back stream waits before looking
// at the quota again (a rate raised at run time applies by then).
const maxHoldCheck = 250 * time.Millisecond

// wakeChannels returns what the idle stream waits on: each partition's
// append notifier and replication-state channel.
func (ls *leaderStream) wakeChannels() []<-chan struct{} {
	out := make([]<-chan struct{}, 0, 2*len(ls.parts))
	for _, sp := range ls.parts {
		out = append(out, sp.p.log.AppendNotify())
		sp.p.mu.Lock()
		out = append(out, sp.p.changed)
		sp.p.mu.Unlock()
	}
	return out
}

// handle applies one follower message; errors for its partitions go into
// out.
func (ls *leaderStream) handle(fm *replpb.FollowerMessage, out *replpb.LeaderMessage) {
	now := ls.m.now()
	for _, pf := range fm.GetPartitions() {
		key := tpKey{pf.GetTopic(), pf.GetPartition()}
		switch pf.GetKind() {
		case replpb.PartitionFetch_STOP:
			delete(ls.parts, key)
		case replpb.PartitionFetch_START:
			delete(ls.parts, key)
			p, code, msg := ls.m.leaderPartition(key.topic, key.index, pf.GetLeaderEpoch())
			if code == 0 {
				leo, start := p.log.LogEndOffset(), p.log.LogStartOffset()
				if pf.GetLogEndOffset() > leo || pf.GetLogEndOffset() < start {
					code, msg = kerr.OffsetOutOfRange.Code, fmt.Sprintf("offset %d is outside the leader's local log [%d, %d)", pf.GetLogEndOffset(), start, leo)
				}
			}
			if code != 0 {
				out.Partitions = append(out.Partitions, ls.errorData(key, p, code, msg))
				continue
			}
			ls.parts[key] = &streamPart{p: p, epoch: pf.GetLeaderEpoch(), next: pf.GetLogEndOffset(), sentHW: -1, sentLS: -1}
			ls.report(p, pf.GetLeaderEpoch(), pf.GetLogEndOffset(), pf.GetLogStartOffset(), now)
		case replpb.PartitionFetch_PROGRESS:
			sp := ls.parts[key]
			if sp == nil || sp.epoch != pf.GetLeaderEpoch() {
				continue
			}
			leo := pf.GetLogEndOffset()
			k := 0
			for k < len(sp.marks) && sp.marks[k] <= leo {
				k++
			}
			sp.marks = sp.marks[k:]
			ls.report(sp.p, sp.epoch, leo, pf.GetLogStartOffset(), now)
		}
	}
}

// report passes a follower's log end and log start offsets to the
// partition and starts an ISR expansion if it earned one.
func (ls *leaderStream) report(p *Partition, epoch int32, leo, logStart int64, now time.Time) {
	m := ls.m
	if isr := p.followerReport(ls.follower, epoch, leo, logStart, now, m.host.Snapshot().Live(ls.follower)); isr != nil {
		m.changeISR(p, isr, fmt.Sprintf("broker %d caught up", ls.follower))
	}
}

// collect adds to out the data and watermarks due on every partition, and
// ends the partitions whose leadership moved.
func (ls *leaderStream) collect(out *replpb.LeaderMessage) {
	m := ls.m
	budget := streamMessageBytes
	now := m.now()
	ls.heldFor = 0
	for key, sp := range ls.parts {
		p := sp.p
		if epoch, leading := p.leaderEpochIfLeading(); !leading || epoch != sp.epoch {
			code, msg := kerr.NotLeaderForPartition.Code, "this broker no longer leads the partition"
			if leading && epoch > sp.epoch {
				code, msg = kerr.FencedLeaderEpoch.Code, fmt.Sprintf("leader epoch is now %d", epoch)
			}
			out.Partitions = append(out.Partitions, ls.errorData(key, p, code, msg))
			delete(ls.parts, key)
			continue
		}
		leo, hw, start := p.log.LogEndOffset(), p.log.HighWatermark(), p.log.LogStartOffset()
		var pd *replpb.PartitionData
		counted, holdable := p.leaderThrottle(ls.follower)
		canSend := sp.next < leo && len(sp.marks) < streamWindow && (budget > 0 || len(out.Partitions) == 0)
		if canSend && holdable {
			if over, wait := m.leaderQuota.Exceeded(); over {
				canSend = false
				m.leaderQuota.noteHold()
				if ls.heldFor == 0 || wait < ls.heldFor {
					ls.heldFor = wait
				}
			}
		}
		if canSend {
			data, next, err := readBatches(p.log, sp.next, int(m.cfg.FetchMaxBytes), leo)
			switch {
			case errors.Is(err, segment.ErrOffsetOutOfRange):
				out.Partitions = append(out.Partitions, ls.errorData(key, p, kerr.OffsetOutOfRange.Code, err.Error()))
				delete(ls.parts, key)
				continue
			case err != nil:
				out.Partitions = append(out.Partitions, ls.errorData(key, p, kerr.KafkaStorageError.Code, err.Error()))
				delete(ls.parts, key)
				continue
			case len(data) > 0:
				pd = &replpb.PartitionData{Records: data}
				sp.next = next
				sp.marks = append(sp.marks, next)
				budget -= len(data)
				p.noteSent(ls.follower, leo, now)
				if counted {
					m.leaderQuota.Record(len(data))
				}
			}
		}
		if pd == nil && hw == sp.sentHW && start == sp.sentLS {
			continue
		}
		if pd == nil {
			pd = &replpb.PartitionData{}
		}
		pd.Topic, pd.Partition, pd.LeaderEpoch = key.topic, key.index, sp.epoch
		pd.HighWatermark, pd.LogStartOffset, pd.LogEndOffset = hw, start, leo
		sp.sentHW, sp.sentLS = hw, start
		out.Partitions = append(out.Partitions, pd)
	}
}

func (ls *leaderStream) errorData(key tpKey, p *Partition, code int16, msg string) *replpb.PartitionData {
	pd := &replpb.PartitionData{Topic: key.topic, Partition: key.index, ErrorCode: int32(code), ErrorMessage: msg,
		HighWatermark: -1, LogStartOffset: -1, LogEndOffset: -1, LeaderEpoch: -1}
	if p != nil {
		pd.HighWatermark, pd.LogStartOffset, pd.LogEndOffset = p.log.HighWatermark(), p.log.LogStartOffset(), p.log.LogEndOffset()
		pd.LeaderEpoch, _ = p.leaderEpochIfLeading()
	}
	return pd
}

// leaderPartition finds a partition this broker leads at epoch, or the
// Kafka error for a follower that asks about it.
func (m *Manager) leaderPartition(topic string, index int32, epoch int32) (*Partition, int16, string) {
	p, exists := m.host.Partition(topic, index)
	if !exists {
		return nil, kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("no partition %s-%d", topic, index)
	}
	if p == nil {
		return nil, kerr.NotLeaderForPartition.Code, fmt.Sprintf("broker %d hosts no replica of %s-%d", m.cfg.BrokerID, topic, index)
	}
	cur, leading := p.leaderEpochIfLeading()
	switch {
	case !leading:
		return p, kerr.NotLeaderForPartition.Code, fmt.Sprintf("broker %d does not lead %s-%d", m.cfg.BrokerID, topic, index)
	case epoch < cur:
		return p, kerr.FencedLeaderEpoch.Code, fmt.Sprintf("leader epoch %d is older than the current %d", epoch, cur)
	case epoch > cur:
		return p, kerr.UnknownLeaderEpoch.Code, fmt.Sprintf("leader epoch %d is newer than the leader's %d", epoch, cur)
	}
	return p, 0, ""
}

// readBatches reads whole batches from off, at most maxBytes (at least
// one batch), below limit; it returns them and the offset after them.
func readBatches(l *segment.Log, off int64, maxBytes int, limit int64) ([]byte, int64, error) {
	var out []byte
	next := off
	for next < limit && len(out) < maxBytes {
		sl, err := l.Read(next, maxBytes-len(out), limit)
		if err != nil {
			if len(out) > 0 {
				return out, next, nil
			}
			return nil, off, err
		}
		if sl.Size == 0 {
			break
		}
		if len(out) > 0 && int(sl.Size) > maxBytes-len(out) {
			break
		}
		buf := make([]byte, sl.Size)
		if n, err := sl.File.ReadAt(buf, sl.Pos); n != len(buf) {
			if err == nil || errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w: file ends at %d", segment.ErrTruncated, sl.Pos+int64(n))
			}
			if len(out) > 0 {
				return out, next, nil
			}
			return nil, off, err
		}
		if out == nil {
			out = buf
		} else {
			out = append(out, buf...)
		}
		next = sl.NextOffset
	}
	return out, next, nil
}

// EpochEnds answers a follower's KIP-101 question for each partition.
func (rs *replicationService) EpochEnds(ctx context.Context, req *replpb.EpochEndsRequest) (*replpb.EpochEndsResponse, error) {
	if err := rs.m.checkFollower(ctx, req.GetFollowerId()); err != nil {
		return nil, rs.m.refused("EpochEnds", err)
	}
	resp := &replpb.EpochEndsResponse{}
	for _, q := range req.GetPartitions() {
		e := &replpb.EpochEnd{Topic: q.GetTopic(), Partition: q.GetPartition(), LeaderEpoch: -1, EndOffset: -1}
		p, code, _ := rs.m.leaderPartition(q.GetTopic(), q.GetPartition(), q.GetCurrentLeaderEpoch())
		if code != 0 {
			e.ErrorCode = int32(code)
		} else {
			e.LeaderEpoch, e.EndOffset = p.log.Epochs().EndOffsetFor(q.GetLeaderEpoch())
		}
		resp.Partitions = append(resp.Partitions, e)
	}
	return resp, nil
}
