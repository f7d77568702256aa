package tiering

import (
	"context"
	"fmt"
	"sort"

	"github.com/stratastream/strata/segment"
)

// Leader-epoch lineage.
//
// Every remote segment records the leader epochs that wrote its offsets
// (RemoteSegment.LeaderEpochs), as every local segment does
// (segment.SegmentInfo.LeaderEpochs, from the partition's leader-epoch
// cache). Two logs are in the same lineage over a range of offsets when
// each offset there was written in the same epoch in both: the records are
// then the same, since an epoch has one leader and followers append its
// batches verbatim and truncate what diverges (KIP-101). The epochs are
// the ones the logs carry, before any restore epoch base (the base only
// shifts the epoch the archiver fences with): a restored partition's
// local log starts at the remote end, so its comparisons only ever cover
// segments written in the new cluster, in the new cluster's epochs.
//
// Two rules use it:
//
//   - Local deletion (CanDeleteLocal): a local segment may be deleted only
//     when the manifest holds its offsets in the same lineage. For the
//     part below the remote log start (deleted remotely) the local epochs
//     must not be newer than the remote epoch at the log start, as they
//     could not be in one lineage.
//   - Divergence (reconcileLineage): after an unclean leader election the
//     new leader's log and the remote log part at some offset D, the first
//     offset of the range both hold at which their epochs differ. The
//     leader's log is the partition's truth from then on, so the leader
//     commits a manifest cut at D: the segments from D on move to the
//     dropped list (deleted after the delete delay), the one holding D is
//     cut to end there (RemoteSegment), and uploads continue from D with
//     the leader's data. D is a batch boundary of both logs (epochs change
//     at batch boundaries, and the common part is the same batches), so
//     the upload starts at a batch of the leader's segment and the cut
//     entry ends at a batch of the remote one. Until the cut is committed,
//     nothing of the remote log at or after D is served: remote reads stop
//     at the local log start (the broker's ReadBelow), which is at or
//     below D, and local deletion is vetoed for the diverged segments.
//
// A divergence at the very first offset both hold is acted on only when
// the leader's log demonstrably continues the remote log below that
// offset: its local log starts inside the remote log and the remote epoch
// just below is not newer than the local one there. Otherwise (say, a
// leader whose data directory was lost, or the remote log was superseded
// below this log's start by another leader) the remote log is left as it
// is, uploads stop with ErrDiverged, local deletion is vetoed, and an
// operator decides.

// unknownEpoch marks a range whose epoch is not recorded (an entry that
// compares equal to anything).
const unknownEpoch int32 = -1

// epochAt returns the epoch es assigns to offset o: that of the last entry
// starting at or before o. ok is false when there is none or it is
// unknown.
func epochAt(es []segment.EpochEntry, o int64) (int32, bool) {
	i := sort.Search(len(es), func(i int) bool { return es[i].StartOffset > o }) - 1
	if i < 0 || es[i].Epoch == unknownEpoch {
		return 0, false
	}
	return es[i].Epoch, true
}

// appendEpochs appends the entries of one segment [base, next), with an
// unknown entry for offsets before its first entry (or for all of it when
// it has none).
func appendEpochs(out, entries []segment.EpochEntry, base, next int64) []segment.EpochEntry {
	if len(entries) == 0 || entries[0].StartOffset > base {
		out = append(out, segment.EpochEntry{Epoch: unknownEpoch, StartOffset: base})
	}
	for _, e := range entries {
		if e.StartOffset < next {
			out = append(out, e)
		}
	}
	return out
}

// remoteLineage returns the epoch entries of m's segments that overlap
// [from, to), in offset order.
func remoteLineage(m *Manifest, from, to int64) []segment.EpochEntry {
	i := sort.Search(len(m.Segments), func(i int) bool { return m.Segments[i].NextOffset > from })
	var out []segment.EpochEntry
	for ; i < len(m.Segments) && m.Segments[i].BaseOffset < to; i++ {
		s := &m.Segments[i]
		out = appendEpochs(out, s.LeaderEpochs, s.BaseOffset, s.NextOffset)
	}
	return out
}

// localLineage returns the epoch entries of the local segments that
// overlap [from, to), in offset order.
func localLineage(segs []segment.SegmentInfo, from, to int64) []segment.EpochEntry {
	var out []segment.EpochEntry
	for _, s := range segs {
		if s.NextOffset > from && s.BaseOffset < to && s.NextOffset > s.BaseOffset {
			out = appendEpochs(out, s.LeaderEpochs, s.BaseOffset, s.NextOffset)
		}
	}
	return out
}

// firstMismatch returns the first offset in [from, to) to which a and b
// assign different known epochs. Epochs are constant between entries, so
// only from and the entries' starts need looking at.
func firstMismatch(a, b []segment.EpochEntry, from, to int64) (int64, bool) {
	points := []int64{from}
	for _, es := range [][]segment.EpochEntry{a, b} {
		for _, e := range es {
			if e.StartOffset > from && e.StartOffset < to {
				points = append(points, e.StartOffset)
			}
		}
	}
	sort.Slice(points, func(i, j int) bool { return points[i] < points[j] })
	for _, p := range points {
		ea, okA := epochAt(a, p)
		eb, okB := epochAt(b, p)
		if okA && okB && ea != eb {
			return p, true
		}
	}
	return 0, false
}

// coveredInLineage reports whether m holds the local segment si in si's
// lineage: the offsets of si at or above the remote log start with the
// same epochs, and none below it written in an epoch newer than the remote
// log's first.
func coveredInLineage(m *Manifest, si segment.SegmentInfo) bool {
	local := appendEpochs(nil, si.LeaderEpochs, si.BaseOffset, si.NextOffset)
	if from := max(si.BaseOffset, m.LogStartOffset); from < si.NextOffset {
		if _, diverged := firstMismatch(local, remoteLineage(m, from, si.NextOffset), from, si.NextOffset); diverged {
			return false
		}
	}
	if si.BaseOffset < m.LogStartOffset && len(m.Segments) > 0 {
		first, ok := epochAt(remoteLineage(m, m.LogStartOffset, m.LogStartOffset+1), m.LogStartOffset)
		if !ok {
			return true
		}
		below := min(si.NextOffset, m.LogStartOffset)
		for _, e := range local {
			if e.StartOffset < below && e.Epoch > first {
				return false
			}
		}
	}
	return true
}

// reconcileLineage compares, as leader, the local log's epochs with the
// manifest's over the offsets both hold and, when they diverge, commits
// the manifest cut at the divergence point (see the rules above). It
// fails with ErrDiverged when the remote log diverges in a way the leader
// cannot repair.
func (a *Archiver) reconcileLineage(ctx context.Context) error {
	m, _, ok := a.view()
	if !ok || len(m.Segments) == 0 {
		return nil
	}
	segs := a.cfg.Log.Segments()
	if len(segs) == 0 {
		return nil
	}
	localStart, localEnd := segs[0].BaseOffset, segs[len(segs)-1].NextOffset
	from, to := max(localStart, m.LogStartOffset), min(localEnd, m.EndOffset())
	if from >= to {
		return nil
	}
	local := localLineage(segs, from, to)
	d, diverged := firstMismatch(local, remoteLineage(m, from, to), from, to)
	if !diverged {
		return nil
	}
	if d == from && !continuesBelow(m, local, localStart, from) {
		return fmt.Errorf("%w: %s/%d: the leader's log [%d, %d) and the remote log [%d, %d) differ in epoch from %d on, with no common history to continue from; uploads stop and local data is kept",
			ErrDiverged, a.cfg.Topic, a.cfg.Partition, localStart, localEnd, m.LogStartOffset, m.EndOffset(), d)
	}
	next := m.Clone()
	dropped := cutAt(next, d)
	a.drop(next, dropped)
	if err := a.commit(ctx, next); err != nil {
		return fmt.Errorf("tiering: commit manifest of %s/%d cut at the divergence point %d: %w", a.cfg.Topic, a.cfg.Partition, d, err)
	}
	le, _ := epochAt(local, d)
	re, _ := epochAt(remoteLineage(m, d, d+1), d)
	a.log.Warn("tiering: the leader's log diverges from the remote log (unclean leader election); the remote log is cut there and continues with the leader's data",
		"divergence", d, "localEpoch", le, "remoteEpoch", re, "remoteEnd", m.EndOffset(), "segmentsDropped", len(dropped))
	return nil
}

// continuesBelow reports whether a local log starting at localStart,
// diverging from m at its first common offset from, continues m below
// from: it starts inside the remote log and the remote epoch just below
// from is not newer than the local epoch at from.
func continuesBelow(m *Manifest, local []segment.EpochEntry, localStart, from int64) bool {
	if localStart <= m.LogStartOffset || from != localStart {
		return false
	}
	below, ok1 := epochAt(remoteLineage(m, from-1, from), from-1)
	at, ok2 := epochAt(local, from)
	return ok1 && ok2 && below <= at
}

// cutAt cuts m's remote log at offset d (inside it, above its log start):
// segments from d on are removed and returned, the one holding d is cut to
// end at d.
func cutAt(m *Manifest, d int64) []RemoteSegment {
	i := sort.Search(len(m.Segments), func(i int) bool { return m.Segments[i].NextOffset > d })
	var dropped []RemoteSegment
	if i < len(m.Segments) && m.Segments[i].BaseOffset < d {
		s := &m.Segments[i]
		s.LeaderEpochs = clampEpochs(s.LeaderEpochs, s.BaseOffset, d)
		s.NextOffset = d
		s.HasSnapshot = false // the state at the old end; its object is left to the sweeper
		i++
	}
	dropped = append(dropped, m.Segments[i:]...)
	m.Segments = m.Segments[:i:i]
	// What the remote cleaner compacted above d is gone; new data there
	// is dirty.
	m.RemoteCleanerCheckpoint = min(m.RemoteCleanerCheckpoint, m.EndOffset())
	return dropped
}
