package tiering

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/stratastream/strata/segment"
)

// ErrDiverged: the leader's local log cannot continue the remote log: it
// has no batch boundary at the remote end offset, or it diverges from the
// remote log with no common history to repair it from (lineage.go).
var ErrDiverged = errors.New("tiering: local log does not continue the remote log")

// uploadNext uploads the next segment the remote log lacks, if one is
// sealed and committed, and commits the manifest with it. It reports
// whether it uploaded one.
func (a *Archiver) uploadNext(ctx context.Context) (bool, error) {
	m, epoch, ok := a.view()
	if !ok {
		return false, nil
	}
	segs := a.cfg.Log.Segments()
	info, found := nextToUpload(segs, a.cfg.Log.HighWatermark(), m.EndOffset())
	if !found {
		return false, nil
	}
	comp := a.compaction()
	ckpt := cleanerCheckpoint(a.cfg.Log)
	if !comp.uploadable(info, ckpt, a.cfg.Now().UnixMilli()) {
		return false, nil // not cleaned yet, and younger than max.compaction.lag.ms
	}
	end := m.EndOffset()
	next := m.Clone()
	dropped := false
	from := info.BaseOffset
	switch {
	case len(m.Segments) == 0 && compactionGap(comp, segs, max(m.LogStartOffset, segs[0].BaseOffset), info.BaseOffset, ckpt):
		// The first upload of a compacted log whose oldest segments the
		// cleaner emptied: the remote log starts where the local one
		// does, not at the first record kept (compaction never moves
		// the log start).
		from = max(m.LogStartOffset, segs[0].BaseOffset)
		next.LogStartOffset = from
	case len(m.Segments) == 0:
		// The remote log starts here, or inside this segment when the log
		// start was moved there.
		next.LogStartOffset = max(m.LogStartOffset, info.BaseOffset)
	case info.BaseOffset < end:
		from = end // another replica's segment boundaries, or a cleaning that regrouped segments: upload the rest
	case compactionGap(comp, segs, end, info.BaseOffset, ckpt):
		// The offsets [end, base) lost their records to the cleaner: the
		// remote entry covers them, beginning at the remote end.
		from = end
	case info.BaseOffset > end:
		// Local data in [end, base) is gone: it was deleted while tiering
		// was off, or by DeleteRecords. The remote segments below it are
		// older than deleted data, so below the partition's log start.
		a.log.Warn("tiering: gap between the remote log and the local log; dropping the older remote segments",
			"remoteEnd", end, "localBase", info.BaseOffset, "segments", len(m.Segments))
		a.drop(next, next.Segments)
		next.Segments = nil
		next.LogStartOffset = info.BaseOffset
		dropped = true
	}

	// The commit must land within half the sweep grace of the upload's
	// start (Sweeper): measured on the monotonic clock, and given to the
	// commit as its deadline.
	started := a.cfg.Mono()
	rs, err := a.uploadObjects(ctx, next, info, from, epoch)
	if err != nil {
		return false, err
	}
	left := a.cfg.Grace/2 - (a.cfg.Mono() - started)
	if left <= 0 {
		// The sweeper may take these objects for orphans any time now.
		return false, fmt.Errorf("tiering: upload of %s/%d at %d took %v, over half the sweep grace; uploading again",
			a.cfg.Topic, a.cfg.Partition, from, a.cfg.Grace/2-left)
	}
	next.Segments = append(next.Segments, rs)
	cctx, cancel := context.WithTimeout(ctx, left)
	err = a.commit(cctx, next)
	cancel()
	if err != nil {
		return false, fmt.Errorf("tiering: commit manifest of %s/%d with segment %d: %w", a.cfg.Topic, a.cfg.Partition, from, err)
	}
	a.mu.Lock()
	a.mu.lastUpload = a.cfg.Now()
	a.mu.uploadedSegs++
	a.mu.uploadedBytes += rs.Size
	a.mu.Unlock()
	a.log.Info("tiering: upload committed", "base", rs.BaseOffset, "next", rs.NextOffset, "bytes", rs.Size, "id", rs.ID)
	if dropped {
		a.logStartMoved(next.LogStartOffset)
	}
	return true, nil
}

// compactionGap reports whether the local offsets [end, base) between the
// remote end and the next local segment to upload hold no records because
// the cleaner removed them, rather than because they were deleted: the
// topic compacts, the local log still begins at or below end, and the gap
// lies below the cleaner checkpoint (recovery accepts gaps only there).
func compactionGap(c Compaction, segs []segment.SegmentInfo, end, base, ckpt int64) bool {
	return c.Enabled && base > end && len(segs) > 0 && segs[0].BaseOffset <= end && base <= ckpt
}

// nextToUpload picks the oldest sealed, committed, non-empty segment that
// reaches past the remote end.
func nextToUpload(segs []segment.SegmentInfo, hw, remoteEnd int64) (segment.SegmentInfo, bool) {
	for _, s := range segs {
		if !s.Sealed || s.NextOffset > hw {
			break
		}
		if s.NextOffset <= remoteEnd || s.Size == 0 || s.NextOffset <= s.BaseOffset {
			continue
		}
		return s, true
	}
	return segment.SegmentInfo{}, false
}

// uploadObjects puts the objects of the local segment info from offset
// from on (from is info.BaseOffset unless a slice is uploaded), under a
// fresh id in m's layout, and returns the manifest entry for them.
func (a *Archiver) uploadObjects(ctx context.Context, m *Manifest, info segment.SegmentInfo, from int64, epoch int32) (RemoteSegment, error) {
	f, err := os.Open(info.LogPath)
	if err != nil {
		return RemoteSegment{}, fmt.Errorf("tiering: upload: %w", err) // deleted under us: the next step re-plans
	}
	defer f.Close()

	rs := RemoteSegment{
		BaseOffset:   from,
		NextOffset:   info.NextOffset,
		Size:         info.Size,
		MaxTimestamp: info.MaxTimestamp,
		Epoch:        epoch,
		ID:           newObjectID(),
		LeaderEpochs: clampEpochs(info.LeaderEpochs, from, info.NextOffset),
	}
	var index, timeIndex []byte
	pos := int64(0)
	if from == info.BaseOffset {
		if index, err = os.ReadFile(info.IndexPath); err != nil {
			return RemoteSegment{}, fmt.Errorf("tiering: upload: %w", err)
		}
		if timeIndex, err = os.ReadFile(info.TimeIndexPath); err != nil {
			return RemoteSegment{}, fmt.Errorf("tiering: upload: %w", err)
		}
	} else {
		sl, err := sliceSegment(f, info, from, a.compaction().Enabled)
		if err != nil {
			return RemoteSegment{}, err
		}
		pos, index, timeIndex, rs.MaxTimestamp = sl.pos, sl.index, sl.timeIndex, sl.maxTimestamp
		rs.Size = info.Size - pos
	}
	snapshot, err := a.producerSnapshot(info.NextOffset)
	if err != nil {
		return RemoteSegment{}, err
	}
	rs.HasSnapshot = snapshot != nil
	var txnIndex []byte
	if f := a.cfg.TxnIndex; f != nil {
		txnIndex = f(info.BaseOffset, from)
	}
	rs.HasTxnIndex = len(txnIndex) > 0

	put := func(suffix string, r io.Reader, size int64) error {
		key := m.SegmentKey(&rs, suffix)
		if _, err := a.cfg.Store.Put(ctx, key, r, size, PutCondition{}); err != nil {
			return fmt.Errorf("tiering: upload %s: %w", key, err)
		}
		return nil
	}
	if rs.HasTxnIndex {
		if err := put(SuffixTxnIndex, bytes.NewReader(txnIndex), int64(len(txnIndex))); err != nil {
			return RemoteSegment{}, err
		}
	}
	if err := put(SuffixLog, io.NewSectionReader(f, pos, rs.Size), rs.Size); err != nil {
		return RemoteSegment{}, err
	}
	if err := put(SuffixIndex, bytes.NewReader(index), int64(len(index))); err != nil {
		return RemoteSegment{}, err
	}
	if err := put(SuffixTimeIndex, bytes.NewReader(timeIndex), int64(len(timeIndex))); err != nil {
		return RemoteSegment{}, err
	}
	if snapshot != nil {
		if err := put(SuffixSnapshot, bytes.NewReader(snapshot), int64(len(snapshot))); err != nil {
			return RemoteSegment{}, err
		}
	}
	rs.UploadedAt = a.cfg.Now().UTC()
	return rs, nil
}

// producerSnapshot is the producer state at offset to upload with the
// segment ending there: the broker's in-memory one, else the file.
func (a *Archiver) producerSnapshot(offset int64) ([]byte, error) {
	if f := a.cfg.ProducerSnapshot; f != nil {
		if b, ok := f(offset); ok {
			return b, nil
		}
	}
	return readSnapshotFile(a.cfg.Log.Dir(), offset)
}

// readSnapshotFile reads the producer snapshot at offset in the partition
// directory dir (segment names it; the broker's producer package writes
// it), or returns nil when there is none.
func readSnapshotFile(dir string, offset int64) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, segment.SnapshotFileName(offset)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tiering: producer snapshot: %w", err)
	}
	return b, nil
}

// clampEpochs keeps the epoch entries that wrote offsets in [from, next),
// the first moved up to from.
func clampEpochs(entries []segment.EpochEntry, from, next int64) []segment.EpochEntry {
	var out []segment.EpochEntry
	for i, e := range entries {
		end := next
		if i+1 < len(entries) {
			end = min(end, entries[i+1].StartOffset)
		}
		if end <= from || e.StartOffset >= next {
			continue
		}
		e.StartOffset = max(e.StartOffset, from)
		out = append(out, e)
	}
	return out
}

// newObjectID returns a random token for object names.
func newObjectID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// logStartMoved tells the broker about a new remote log start.
func (a *Archiver) logStartMoved(offset int64) {
	if a.cfg.OnLogStartOffset != nil {
		a.cfg.OnLogStartOffset(offset)
	}
}

// deleteKeys deletes keys, a few at a time, and returns the errors joined.
func deleteKeys(ctx context.Context, store ObjectStore, keys []string) error {
	sem := make(chan struct{}, 8)
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = store.Delete(ctx, k)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
