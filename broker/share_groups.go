package broker

import (
	"context"

	"github.com/stratastream/strata/broker/acl"
	"github.com/stratastream/strata/broker/group"
	"github.com/stratastream/strata/broker/share"
	"github.com/stratastream/strata/coord"
	"github.com/stratastream/strata/segment"
	"github.com/twmb/franz-go/pkg/kerr"
)

// This file connects share groups (package share, KIP-932) to the
// server. The membership of a share group lives on its group coordinator
// (the leader of its partition of __consumer_offsets, as for consumer
// groups); the share partitions live on the leaders of the topic
// partitions, which read their state through s.sharePersister (the share
// coordinator) on first use and write it there before answering an
// acknowledgement. A test may give its own persister
// (Config.SharePersister). The membership is kept durable by the group
// coordinator in __consumer_offsets (shareGroupStore) and restored by
// the load of the group's partition (groupLoading).

// startShareGroups starts the share group manager over the share-state
// persister: Config.SharePersister when a test gives one, else the share
// coordinator's (share_persister.go).
func (s *Server) startShareGroups() error {
	if s.sharePersister == nil {
		s.sharePersister = sharePersister{s}
	}
	cfg := s.cfg.Share
	cfg.Persister = s.sharePersister
	cfg.Logger = s.log.With("component", "share")
	cfg.GroupConfig = s.shareGroupConfig
	if cfg.GroupConfig == nil {
		cfg.GroupConfig = s.shareGroupConfigOf
	}
	s.shareDLQ = newDeadLetterWriter()
	cfg.DeadLetter = s.writeShareDeadLetters
	cfg.Store = shareGroupStore{s}
	cfg.MemberGone = func(group, member string) {
		s.shares.Sessions.CloseMember(group, member)
		s.shares.ReleaseMember(group, member, nil)
		s.dropIdleShareGroup(group)
	}
	m, err := share.New(cfg)
	if err != nil {
		return err
	}
	s.shares = m
	return nil
}

// isShareGroup reports whether this broker coordinates a share group of
// that id, with members or Empty. The offset APIs of classic and consumer
// groups answer it GROUP_ID_NOT_FOUND, as Kafka's ShareGroup ("Group G
// is not a consumer group"): group ids are one namespace.
func (s *Server) isShareGroup(id string) bool {
	return s.shares != nil && s.shares.Groups.Exists(id)
}

// shareGroupStore is the group coordinator as share.Store: it exists
// once the broker joined the cluster, before any partition of
// __consumer_offsets is loaded and a share group is served.
type shareGroupStore struct{ s *Server }

func (st shareGroupStore) StoreShareGroup(prev, next *group.ShareGroupState) (int16, <-chan error) {
	if st.s.groups == nil {
		return kerr.CoordinatorNotAvailable.Code, nil
	}
	return st.s.groups.StoreShareGroup(prev, next)
}

// shareGroupConfigOf is a share group's configs in force (group_config.go).
// share.auto.offset.reset has no broker setting (Kafka's default is
// latest); a group without it takes Config.Share.Defaults', which only
// tests change.
func (s *Server) shareGroupConfigOf(group string) share.GroupConfig {
	g := s.groupConfig(group)
	out := share.GroupConfig{
		AutoOffsetReset:         g.ShareAutoOffsetReset.Strategy,
		AutoOffsetResetDuration: g.ShareAutoOffsetReset.Duration,
		RecordLockDuration:      g.ShareRecordLockDuration,
		SessionTimeout:          g.ShareSessionTimeout,
		HeartbeatInterval:       g.ShareHeartbeatInterval,
		ReadCommitted:           g.ShareReadCommitted,
		DeadLetterTopic:         g.ShareDeadLetterTopic,
	}
	if _, set := s.storedGroupConfig(group)["share.auto.offset.reset"]; !set && s.cfg.Share.Defaults.AutoOffsetReset != "" {
		out.AutoOffsetReset, out.AutoOffsetResetDuration = s.cfg.Share.Defaults.AutoOffsetReset, s.cfg.Share.Defaults.AutoOffsetResetDuration
	}
	return out
}

// closeShareGroups stops the share group manager.
func (s *Server) closeShareGroups() {
	if s.shares != nil {
		s.shares.Close()
	}
}

// shareConnClosed closes the share sessions a closed connection opened
// and releases the records their members hold in them (Kafka's
// ShareSessionCache disconnect listener).
func (s *Server) shareConnClosed(c *conn) {
	if s.shares == nil {
		return
	}
	for k, parts := range s.shares.Sessions.CloseOwned(c) {
		s.releaseSessionRecords(k, parts)
	}
}

// releaseSessionRecords releases the records member k holds in the
// partitions of its closed session.
func (s *Server) releaseSessionRecords(k share.SessionKey, parts []share.TopicPartition) {
	in := map[share.TopicPartition]bool{}
	for _, tp := range parts {
		in[tp] = true
	}
	s.shares.ReleaseMember(k.Group, k.Member, func(key share.Key) bool {
		return in[share.TopicPartition{TopicID: key.TopicID, Partition: key.Partition}]
	})
	s.dropIdleShareGroup(k.Group)
}

// dropIdleShareGroup marks this broker's share partitions of group stale
// once no member of it has a share session here (their records were
// released and persisted as the sessions closed), so the next member
// reads the share coordinator's state again and sees what the offsets
// admin APIs changed meanwhile (Kafka's ShareGroupListener.onGroupEmpty).
func (s *Server) dropIdleShareGroup(group string) {
	if !s.shares.Sessions.HasGroup(group) {
		s.shares.MarkStale(group)
	}
}

// shareTopics resolves topic names for the share group membership from
// the coordinator's snapshot.
type shareTopics struct{ snap *coord.Snapshot }

func (t shareTopics) Topic(name string) ([16]byte, int32, bool) {
	ti, ok := t.snap.Topic(name)
	if !ok || isInternalTopic(name) {
		return [16]byte{}, 0, false
	}
	return [16]byte(ti.ID), int32(len(ti.Partitions)), true
}

// shareCoordinatorCode is the error for a share group request that needs
// the group's coordinator: NOT_COORDINATOR unless this broker has loaded
// the group's partition of __consumer_offsets.
func (s *Server) shareCoordinatorCode(group string) int16 {
	if s.shuttingDown() {
		return kerr.CoordinatorNotAvailable.Code
	}
	if !s.groupLoader.isLoaded(s.groups.PartitionFor(group)) {
		return kerr.NotCoordinator.Code
	}
	return 0
}

// shareTarget is one partition a share request names, resolved on this
// broker.
type shareTarget struct {
	tp   share.TopicPartition
	name string
	p    *partition
	sp   *share.Partition
	key  share.Key
}

// resolveShareTarget resolves a partition of a share request for group: the
// topic by id, READ on it (mayRead), this broker leading it, and its
// share partition loaded. A nonzero code says why not.
func (s *Server) resolveShareTarget(ctx context.Context, group string, tp share.TopicPartition, mayRead func(string) bool) (shareTarget, int16) {
	st := shareTarget{tp: tp, key: share.Key{Group: group, TopicID: tp.TopicID, Partition: tp.Partition}}
	t := s.topicByID(coord.TopicID(tp.TopicID))
	switch {
	case t == nil:
		return st, kerr.UnknownTopicID.Code
	case !mayRead(t.name):
		return st, kerr.TopicAuthorizationFailed.Code
	case !t.hasPartition(tp.Partition):
		return st, kerr.UnknownTopicOrPartition.Code
	case t.local(tp.Partition) == nil:
		return st, s.notHostedCode(t.name, tp.Partition)
	}
	st.name, st.p = t.name, t.local(tp.Partition)
	lead, err := st.p.leaderCheck(s.cfg.BrokerID)
	if err != nil {
		return st, kerr.NotLeaderForPartition.Code
	}
	sp, err := s.shares.Partition(ctx, st.key, lead.epoch, func(cfg share.GroupConfig) (int64, error) {
		return s.shareStartOffset(st.p, cfg)
	})
	if err != nil {
		s.log.Warn("share partition not loaded", "group", group, "topic", st.name, "partition", tp.Partition, "err", err)
		return st, share.ErrorCode(err)
	}
	st.sp = sp
	return st, 0
}

// shareStartOffset is where a new share partition of p starts, by
// share.auto.offset.reset.
func (s *Server) shareStartOffset(p *partition, cfg share.GroupConfig) (int64, error) {
	hw := p.log.HighWatermark()
	switch cfg.AutoOffsetReset {
	case share.ResetEarliest:
		return p.logStart(), nil
	case share.ResetByDuration:
	default:
		return hw, nil
	}
	ts := s.nowFn().Add(-cfg.AutoOffsetResetDuration).UnixMilli()
	off, _, found, err := s.remoteOffsetForTimestamp(p, ts)
	if err == nil && !found {
		off, _, found, err = p.log.OffsetForTimestamp(ts)
	}
	if err != nil {
		return 0, err
	}
	if !found || off > hw {
		return hw, nil
	}
	return off, nil
}

// shareBatch is one record batch read for a share fetch.
type shareBatch struct {
	share.Batch
	raw           []byte
	producerID    int64
	transactional bool
}

// shareReadStep bounds one read of a share fetch's pass over the log: a
// share fetch acquires at most MaxRecords records (500 by default), far
// fewer than the MaxBytes a client allows (franz-go: 50 MiB), so the
// pass reads in steps and stops once it holds enough records.
const shareReadStep = 256 << 10

// shareRead reads whole batches of p from offset from, below upTo,
// through the fetch path (local segments, or the bucket for offsets only
// there): at least one batch, at most about maxBytes, and, when
// maxRecords > 0, no more once the batches read hold maxRecords offsets
// from from on (a read of what a MaxRecords acquisition needs, not of
// MaxBytes: reading a whole remote chunk per share fetch of 500 records
// made a share group drain tiered history at a twentieth of a classic
// consumer's rate).
func (s *Server) shareRead(p *partition, from, upTo int64, maxBytes, maxRecords int) ([]shareBatch, error) {
	var out []shareBatch
	var remote remotePass // a remote read held back (quota, pool) ends the read: the share fetch finds nothing new and waits
	read := 0
	held := int64(0) // offsets from from on in the batches read
	for off := from; off < upTo && (read == 0 || read < maxBytes) && (maxRecords <= 0 || held < int64(maxRecords)); {
		var pr fetchPartResult
		sl, err := s.readPartition(&remote, p, off, max(min(maxBytes-read, shareReadStep), 1), upTo, &pr)
		if err == nil && sl.Size > 0 {
			buf := make([]byte, sl.Size)
			if _, err = sl.File.ReadAt(buf, sl.Pos); err == nil {
				n := len(out)
				out = appendShareBatches(out, buf, from)
				for _, b := range out[n:] {
					held += b.Last - max(b.Base, from) + 1
				}
				read += len(buf)
			}
		}
		for _, rel := range pr.releases {
			rel()
		}
		if err != nil {
			if len(out) > 0 {
				return out, nil // the error shows on the next fetch
			}
			return nil, err
		}
		if sl.Size == 0 || sl.NextOffset <= off {
			break
		}
		off = sl.NextOffset
	}
	return out, nil
}

// appendShareBatches splits buf into its batches, leaving out those
// wholly below from.
func appendShareBatches(out []shareBatch, buf []byte, from int64) []shareBatch {
	for pos := 0; pos < len(buf); {
		h, err := segment.ParseHeader(buf[pos:])
		if err != nil || h.Size() > len(buf)-pos {
			break // validated on append: not reached
		}
		if h.LastOffset() >= from {
			out = append(out, shareBatch{Batch: share.Batch{Base: h.BaseOffset, Last: h.LastOffset(), Archive: h.Control()},
				raw: buf[pos : pos+h.Size()], producerID: h.ProducerID, transactional: h.Transactional()})
		}
		pos += h.Size()
	}
	return out
}

// shareAcquire acquires for member up to maxRecords records of target
// and returns the batches holding them and the acquired ranges.
func (s *Server) shareAcquire(t shareTarget, member string, maxRecords int, strict bool, maxBytes int) ([]byte, []share.AcquiredRange, error) {
	limits := s.shares.Limits(t.key.Group)
	now := s.shares.Now()
	t.sp.SkipTo(t.p.logStart())
	from, ok := t.sp.FetchOffset(now, limits)
	if !ok {
		return nil, nil, nil
	}
	upTo := t.p.log.HighWatermark()
	readCommitted := s.shares.GroupConfig(t.key.Group).ReadCommitted
	if readCommitted {
		upTo = t.p.lastStableOffsetAt(upTo)
	}
	if from >= upTo {
		return nil, nil, nil
	}
	batches, err := s.shareRead(t.p, from, upTo, maxBytes, maxRecords)
	if err != nil || len(batches) == 0 {
		return nil, nil, err
	}
	if readCommitted {
		if err := s.archiveAborted(t.p, batches); err != nil {
			return nil, nil, err
		}
	}
	bs := make([]share.Batch, len(batches))
	for i, b := range batches {
		bs[i] = b.Batch
	}
	ranges := t.sp.Acquire(member, bs, maxRecords, strict, now, limits)
	var raw []byte
	for _, b := range batches {
		for _, r := range ranges {
			if r.First <= b.Last && r.Last >= b.Base {
				raw = append(raw, b.raw...)
				break
			}
		}
	}
	return raw, ranges, nil
}

// archiveAborted marks the batches of aborted transactions to be
// archived, as Kafka's share partitions do under read_committed: a
// transactional batch of a producer whose transaction aborted at a
// marker after the batch.
func (s *Server) archiveAborted(p *partition, batches []shareBatch) error {
	aborted, err := s.abortedTxns(p, batches[0].Base, batches[len(batches)-1].Last+1)
	if err != nil {
		return err
	}
	for i := range batches {
		b := &batches[i]
		for _, a := range aborted {
			if b.transactional && b.producerID == a.ProducerID && b.Base >= a.FirstOffset && b.Base < a.LastOffset {
				b.Archive = true
			}
		}
	}
	return nil
}

// shareAckBatches converts a request's acknowledgement batches.
func shareAckBatches[B any](in []B, conv func(B) share.AckBatch) []share.AckBatch {
	out := make([]share.AckBatch, len(in))
	for i, b := range in {
		out[i] = conv(b)
	}
	return out
}

// shareAcknowledge validates and applies one partition's
// acknowledgements for member, persisted before it returns.
func (s *Server) shareAcknowledge(ctx context.Context, group, member string, tp share.TopicPartition, batches []share.AckBatch, maxType int8, mayRead func(string) bool) int16 {
	if code := share.ValidateAckBatches(batches, maxType); code != 0 {
		return code
	}
	t, code := s.resolveShareTarget(ctx, group, tp, mayRead)
	if code != 0 {
		return code
	}
	return s.shares.Acknowledge(ctx, t.key, t.sp, member, batches)
}

// shareRequestCode checks what ShareFetch and ShareAcknowledge need
// before their session: READ on the group (GROUP_AUTHORIZATION_FAILED),
// a group id and a member id of at most 36 characters
// (INVALID_REQUEST).
func (s *Server) shareRequestCode(r *request, group, member string) int16 {
	if !s.authorize(r, acl.OpRead, acl.Group(group)) {
		return kerr.GroupAuthorizationFailed.Code
	}
	if group == "" || member == "" || len(member) > 36 {
		return kerr.InvalidRequest.Code
	}
	return 0
}

// shareLockMillis is a group's acquisition lock duration, as the share
// responses carry it.
func (s *Server) shareLockMillis(group string) int32 {
	return int32(s.shares.GroupConfig(group).RecordLockDuration.Milliseconds())
}
