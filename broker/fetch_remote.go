package broker

import (
	"context"
	"errors"
	"time"

	"github.com/stratastream/strata/segment"
	"github.com/stratastream/strata/tiering"
)

// Remote reads for Fetch and ListOffsets (tiered storage, tiering.go).
//
// A fetch offset below the local log start and at or above the remote log
// start (the committed manifest's LogStartOffset) is served by the
// broker's RemoteReader: whole batches of one cached chunk file, which the
// connection sends with sendfile like a segment range. A remote read stops
// at the local log start: the local log answers for every offset it
// holds, so a remote log that diverges from it (an unclean leader
// election the archiver has not reconciled yet) is never served. The chunk stays
// pinned in the cache until the response is written (rawBody.release) or
// dropped (a long-polling fetch that reads again). A remote read blocks
// only the request that needs it, and that for at most
// remote.fetch.max.wait.ms: it runs on the remote read pool
// (fetch_remote_pool.go) within the remote fetch quota
// (fetch_remote_quota.go), and the reader takes no lock across a GET.

// remoteFetchTimeout bounds the GETs of one remote read.
const remoteFetchTimeout = 30 * time.Second

// readPartition reads whole batches at off of partition p: from the
// remote log when off is only there, else from the local log. Remote
// slices are registered in pr for release after the response is sent.
// A remote read runs on the remote read pool within the remote fetch
// quota; one the quota or the pool holds back returns an empty slice and
// is noted in rp (fetch_remote_pool.go).
func (s *Server) readPartition(rp *remotePass, p *partition, off int64, maxBytes int, hw int64, pr *fetchPartResult) (segment.ReadSlice, error) {
	if localStart := p.log.LogStartOffset(); s.tier != nil && off < localStart {
		if m := p.remoteManifest(); m != nil {
			if off < m.LogStartOffset {
				return segment.ReadSlice{}, segment.ErrOffsetOutOfRange
			}
			if off < m.EndOffset() {
				// Nothing at or above hw (the high watermark, or the
				// last stable offset for read_committed) is returned.
				bound := min(localStart, hw)
				if off >= bound {
					return segment.ReadSlice{FirstOffset: off, NextOffset: off}, nil
				}
				rs, release, err := s.readRemote(rp, p, m, off, bound, maxBytes)
				if errors.Is(err, errRemoteReadHeld) {
					return segment.ReadSlice{FirstOffset: off, NextOffset: off}, nil
				}
				if err != nil {
					if errors.Is(err, tiering.ErrRemoteOffsetOutOfRange) {
						return segment.ReadSlice{}, segment.ErrOffsetOutOfRange
					}
					return segment.ReadSlice{}, err
				}
				if rs.Size > 0 {
					pr.releases = append(pr.releases, release)
					return segment.ReadSlice{File: rs.File, Pos: rs.Pos, Size: rs.Size, FirstOffset: rs.FirstOffset, NextOffset: rs.NextOffset}, nil
				}
				release()
				if rs.NextOffset <= off || rs.NextOffset >= hw {
					return segment.ReadSlice{NextOffset: off}, nil
				}
				off = rs.NextOffset // a compacted tail: go on locally
			}
		}
	}
	return p.log.Read(off, maxBytes, hw)
}

// errRemoteReadHeld: the quota or the pool held a remote read back.
var errRemoteReadHeld = errors.New("broker: remote read held back")

// remotePass is the remote side of one read pass of a fetch: when its
// remote reads stop being waited for, and whether one was held back.
type remotePass struct {
	deadline time.Time // set by the first remote read
	// held says a remote read was held back (quota, full queue, or not
	// done by the deadline); retry is when to read again, the least of
	// what each held read said.
	held  bool
	retry time.Duration
}

// hold notes a read held back that may be tried again after d.
func (rp *remotePass) hold(d time.Duration) {
	if !rp.held || d < rp.retry {
		rp.retry = d
	}
	rp.held = true
}

// remoteRejectedRetry is how soon a read the full queue turned away is
// tried again.
const remoteRejectedRetry = 10 * time.Millisecond

// readRemote reads partition p's remote log at off on the remote read
// pool, within the quota, and counts its bytes against the quota. A read
// the quota or the pool holds back is errRemoteReadHeld.
func (s *Server) readRemote(rp *remotePass, p *partition, m *tiering.Manifest, off, bound int64, maxBytes int) (tiering.RemoteSlice, func(), error) {
	bt := s.tier
	if d := bt.quota.throttle(); d > 0 {
		bt.reads.throttled(d)
		rp.hold(d)
		return tiering.RemoteSlice{}, nil, errRemoteReadHeld
	}
	if rp.deadline.IsZero() {
		rp.deadline = time.Now().Add(s.remoteFetchMaxWait())
	}
	ctx, cancel := context.WithDeadline(context.Background(), rp.deadline)
	defer cancel()
	key := tiering.PartitionKey{Topic: p.topic, Partition: p.index}
	rs, release, err := bt.reads.read(ctx, func(ctx context.Context) (tiering.RemoteSlice, error) {
		ctx, cancel := context.WithTimeout(ctx, remoteFetchTimeout)
		defer cancel()
		start := time.Now()
		rs, err := bt.reader.ReadBelow(ctx, key, m, off, bound, maxBytes)
		if !errors.Is(err, tiering.ErrRemoteOffsetOutOfRange) {
			s.metrics.observeRemoteRead(start, rs.Size, err)
		}
		if err == nil {
			bt.quota.record(rs.Size)
		}
		return rs, err
	})
	switch {
	case errors.Is(err, errRemoteReadRejected):
		rp.hold(remoteRejectedRetry)
		return rs, nil, errRemoteReadHeld
	case errors.Is(err, errRemoteReadExpired):
		rp.hold(0)
		return rs, nil, errRemoteReadHeld
	}
	return rs, release, err
}

// remoteFetchMaxWait is remote.fetch.max.wait.ms.
func (s *Server) remoteFetchMaxWait() time.Duration {
	if d := s.cfg.Tiering.RemoteFetch.MaxWait; d > 0 {
		return d
	}
	return defaultRemoteFetchMaxWait
}

// hasReleases reports whether the result holds pinned remote chunks.
func (res *fetchResult) hasReleases() bool {
	for i := range res.topics {
		for j := range res.topics[i].parts {
			if len(res.topics[i].parts[j].releases) > 0 {
				return true
			}
		}
	}
	return false
}

// releaseAll unpins the result's remote chunks. Safe to call twice.
func (res *fetchResult) releaseAll() {
	for i := range res.topics {
		for j := range res.topics[i].parts {
			pr := &res.topics[i].parts[j]
			for _, f := range pr.releases {
				f()
			}
			pr.releases = nil
		}
	}
}

// remoteEarliest is ListOffsets earliest: the remote log start when the
// partition is tiered and the remote log reaches below the local one.
func (p *partition) remoteEarliest() int64 { return p.logStart() }

// remoteOffsetForTimestamp answers ListOffsets by timestamp from the
// remote log first: the first offset below the local log start whose
// batch holds a timestamp ≥ ts. found is false when the remote log has no
// such offset (or there is none), and the local log answers.
func (s *Server) remoteOffsetForTimestamp(p *partition, ts int64) (offset, timestamp int64, found bool, err error) {
	if s.tier == nil {
		return 0, 0, false, nil
	}
	m := p.remoteManifest()
	if m == nil || m.LogStartOffset >= p.log.LogStartOffset() {
		return 0, 0, false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), remoteFetchTimeout)
	defer cancel()
	off, t, ok, err := s.tier.reader.OffsetForTimestamp(ctx, tiering.PartitionKey{Topic: p.topic, Partition: p.index}, m, ts)
	if err != nil || !ok {
		return 0, 0, false, err
	}
	if off >= p.log.LogStartOffset() {
		// The local log holds it too; let the local log answer (it
		// may hold an earlier match the remote segment ended before).
		return 0, 0, false, nil
	}
	return off, t, true, nil
}

// remoteLogEnabled reports whether ListOffsets treats the partition as
// tiered (Kafka's remoteLogEnabled): remote.storage.enable is on, or a
// remote log is still readable after it was turned off.
func (p *partition) remoteLogEnabled() bool {
	return p.tier != nil && (p.tier.gate.Tiered() || p.tier.manifest() != nil)
}

// highestRemoteOffset is ListOffsets latest-tiered (-5): the last offset
// of the last segment in the object store and the leader epoch that
// wrote it (from that segment's epochs, else the local epoch cache), or
// -1 and -1 when the store holds no segment of the partition.
func (p *partition) highestRemoteOffset() (offset int64, epoch int32) {
	m := p.tier.manifest()
	if m == nil || len(m.Segments) == 0 {
		return -1, -1
	}
	last := m.Segments[len(m.Segments)-1]
	offset, epoch = last.NextOffset-1, -1
	for _, e := range last.LeaderEpochs {
		if e.StartOffset <= offset {
			epoch = e.Epoch
		}
	}
	if epoch < 0 {
		epoch = epochForOffset(p, offset)
	}
	return offset, epoch
}
